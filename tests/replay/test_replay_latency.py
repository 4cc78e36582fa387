"""Whole latencies from a schedule: TTFT, TPOT, ITL and E2EL are what the steps cost, queueing included; a padding
strategy on its own clock queues more; one forward of prefill and decode pays one overhead."""

from __future__ import annotations

import math

import pytest

from tests.replay.test_replay_timing import TIMER, Lookup
from tests.support.probe import fitted_timer
from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.step_fit import FittedStep
from vllm_hpu_mm.replay.latency import StepClock, latency_dict, latency_of, padded_clock, real_clock
from vllm_hpu_mm.replay.scheduler import Arrivals, Prompt, simulate

LIMITS = EngineShape(
    max_num_seqs=2, max_num_batched_tokens=4096, max_model_len=8192, block_size=128, num_kv_blocks=1000
)
#: One forward costs 10 ms, each token 1 ms more: easy sums.
STEP = FittedStep(block_size=128, overhead_s=0.01, token_s=0.001, sequence_s=0.0, chunk_s=0.0, pair_s=0.0, image_s=0.0,
                  patch_s=0.0, frontend_s=0.005, source="test", samples=10, interval=0.1)  # fmt: skip


def clock() -> StepClock:
    return real_clock(fitted_timer(STEP), unified=True)


def run(prompts: list[Prompt], load: int | Arrivals, c: StepClock, limits: EngineShape = LIMITS):  # type: ignore[no-untyped-def]
    trace = simulate(prompts, limits, load, clock=c.clock, vision_clock=c.vision_clock)
    return trace, latency_of([trace], c, load="test", frontend_s=STEP.frontend_s, interval=STEP.interval)


def test_one_request_costs_its_prefill_then_one_decode_step_per_token() -> None:
    _, x = run([Prompt(100, 5)], 1, clock())
    prefill, decode = 0.01 + 0.1, 0.01 + 0.001
    assert x.ttft[0] == pytest.approx(prefill + 0.005)
    assert x.tpot[0] == pytest.approx(decode)
    assert x.itl == pytest.approx((decode,) * 3)
    assert x.e2el[0] == pytest.approx(0.005 + prefill + 4 * decode)
    assert x.request_throughput == pytest.approx(1 / x.e2el[0])
    assert x.output_throughput == pytest.approx(5 / x.e2el[0])
    assert latency_dict(x)["ttft_ms"]["p50"] == pytest.approx(1000 * x.ttft[0], abs=1e-3)


def test_a_request_that_waits_for_a_slot_waits_in_its_ttft() -> None:
    one = EngineShape(
        max_model_len=8192, max_num_seqs=1, max_num_batched_tokens=4096, block_size=128, num_kv_blocks=1000
    )
    _, x = run([Prompt(100, 5), Prompt(100, 5)], 2, clock(), one)
    first = 0.11 + 4 * 0.011
    # the second arrived with the first, ran after it finished
    assert x.ttft[2] == pytest.approx(first + 0.11 + 0.005)
    assert x.ttft[0] == pytest.approx(0.11 + 0.005)


def test_a_mixed_step_pays_one_overhead_and_every_decoded_token_sees_it() -> None:
    # two clients, the second prompt longer: its prefill runs beside the first's decode for one step
    c = clock()
    trace, x = run([Prompt(10, 4), Prompt(10, 4)], 2, c)
    groups = c.step_seconds(trace)
    # both prefills in one forward: 10 ms + 20 tokens; then decodes of 2: 10 ms + 2 tokens
    assert groups[0][0] == pytest.approx(0.03)
    assert groups[0][1:] == (1, 0)
    assert all(s == pytest.approx(0.012) for s, _, d in groups[1:] if d == 2)
    separate = StepClock(c.decode, c.prefill, c.vision, c.overhead_s, unified=False)
    assert separate.clock(trace.events[0]) == pytest.approx(0.03)
    assert x.itl[0] == pytest.approx(0.012)


def test_poisson_arrivals_are_timed_from_their_arrival() -> None:
    trace, x = run(
        [Prompt(50, 3)] * 20,
        Arrivals(rate=2.0, seed=3),
        clock(),
        EngineShape(
            max_model_len=8192, max_num_seqs=8, max_num_batched_tokens=4096, block_size=128, num_kv_blocks=1000
        ),
    )
    arrivals = [s.arrival_s for s in trace.spans]
    assert min(arrivals) > 0
    assert len(set(arrivals)) == 20
    # far below saturation: most requests find the engine idle (one prefill plus the API server); one that arrives
    # during a step waits for its end and shares the next with the others that came meanwhile
    assert x.ttft[0] == pytest.approx(0.01 + 0.05 + 0.005)
    assert 0.065 < x.ttft[2] < 0.065 + 3 * 0.061
    assert 1.0 < x.request_throughput < 3.0


def test_a_padding_strategy_on_its_own_clock_is_slower_and_queues_more() -> None:
    prompts = [Prompt(300, 40)] * 12
    exact = padded_clock(TIMER, Lookup())
    padded = padded_clock(TIMER, Lookup(pad_blocks=400))
    _, fast = run(
        prompts,
        6,
        exact,
        EngineShape(
            max_model_len=8192, max_num_seqs=6, max_num_batched_tokens=4096, block_size=128, num_kv_blocks=1000
        ),
    )
    _, slow = run(
        prompts,
        6,
        padded,
        EngineShape(
            max_model_len=8192, max_num_seqs=6, max_num_batched_tokens=4096, block_size=128, num_kv_blocks=1000
        ),
    )
    assert slow.tpot[0] > fast.tpot[0]
    assert slow.e2el[1] > fast.e2el[1]
    assert slow.request_throughput < fast.request_throughput
    assert not math.isnan(slow.itl[2])


def test_the_api_servers_time_per_image_adds_to_image_requests_only() -> None:
    c = clock()
    trace = simulate([Prompt(100, 3), Prompt(100, 3, image_tokens=(66,))], LIMITS, 1, clock=c.clock,
                     vision_clock=c.vision_clock)  # fmt: skip
    assert [s.images for s in trace.spans] == [0, 1]
    plain = latency_of([trace], c, load="test", frontend_s=0.005)
    imaged = latency_of([trace], c, load="test", frontend_s=0.005, frontend_image_s=0.02)
    assert imaged.ttft[0] == pytest.approx(plain.ttft[0])  # the text request's first token: unchanged
    assert imaged.ttft[2] == pytest.approx(plain.ttft[2] + 0.02)  # the image request's: 20 ms later
    assert imaged.mean_ttft == pytest.approx(plain.mean_ttft + 0.01)


def test_requests_refused_in_their_arrival_slots_spread_the_rest_over_the_whole_run() -> None:
    # 20% refused at 2 requests/s: vllm bench serve sends all 200 over about 100 s, 160 ran: about 1.6 requests/s
    prompts = [Prompt(8192, 3) if k % 5 == 4 else Prompt(50, 3) for k in range(200)]
    trace, x = run(prompts, Arrivals(rate=2.0, seed=3), clock())
    assert (x.requests, trace.refused) == (160, 40)
    assert 1.4 < x.request_throughput < 1.8
    first = min(s.arrival_s for s in trace.spans)
    assert x.duration_s >= trace.refused_s[1] - first  # the last request, refused, ends the run no earlier


def test_recorded_arrival_times_are_replayed_as_sent() -> None:
    # a client's log: the second request 50 ms after the first, the third 2 s later (the server idle in between)
    times = (0.0, 0.05, 2.0)
    trace, x = run([Prompt(100, 3)] * 3, Arrivals(times=times), clock())
    assert [s.arrival_s for s in trace.spans] == pytest.approx(list(times))
    assert trace.spans[2].first_s == pytest.approx(2.0 + 0.11)  # alone on an idle engine: its own prefill
    assert x.requests == 3
    assert Arrivals(times=times).describe() == "3 recorded arrivals over 2 s"


@pytest.mark.parametrize("times", [(1.0, 0.5), (-1.0,), (math.inf,)])
def test_recorded_times_out_of_order_or_out_of_range_are_refused(times: tuple[float, ...]) -> None:
    with pytest.raises(ConfigError, match="ascending seconds"):
        Arrivals(times=times)


def test_a_request_finding_the_server_idle_waits_for_its_wake_up_and_one_in_company_does_not() -> None:
    # the second request arrives while the first runs; the third after 2 s of idleness
    times = (0.0, 0.05, 2.0)
    c = clock()
    trace = simulate([Prompt(100, 3)] * 3, LIMITS, Arrivals(times=times), clock=c.clock, vision_clock=c.vision_clock)

    def wake(idle_s: float, images: int) -> float:
        return 0.03 if idle_s > 1.0 else 0.01

    plain = latency_of([trace], c, load="test")
    woken = latency_of([trace], c, load="test", wake=wake)
    # first (idle since ever) +30 ms, second (in company) +0 (were it taken as idle: +10 ms), third (idle 2 s) +30 ms
    assert woken.mean_ttft == pytest.approx(plain.mean_ttft + 0.06 / 3)
    assert woken.tpot == plain.tpot  # the wait is before the first token

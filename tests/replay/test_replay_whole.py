"""Whole latencies on a shared closed-loop schedule: re-timing it on a configuration's clock gives what scheduling
it again on that clock gives, bit for bit; a padded clock's kept prices follow its lookup's fallbacks."""

from __future__ import annotations

import dataclasses

import pytest

from tests.replay.test_replay_latency import STEP
from tests.replay.test_replay_timing import TIMER, Lookup
from tests.support.probe import fitted_timer
from vllm_hpu_mm.engine import EngineShape, GraphRun
from vllm_hpu_mm.replay.latency import StepClock, latency_of, padded_clock, real_clock
from vllm_hpu_mm.replay.run import replay
from vllm_hpu_mm.replay.scheduler import Arrivals, DecodeRun, Prompt, Trace, simulate
from vllm_hpu_mm.replay.schedules import Images, schedules
from vllm_hpu_mm.replay.whole import _known_prices, _Recorded, retimed, strategy_latency
from vllm_hpu_mm.runtimes.vllm_gaudi import VllmGaudi
from vllm_hpu_mm.traffic.default import default_traffic

LIMITS = EngineShape(max_num_seqs=4, max_num_batched_tokens=512, max_model_len=4096, block_size=128, num_kv_blocks=60)
#: Chunked prompts, prefix hits, images (encoded in the step that reaches them), answers of one token and long ones,
#: and more requests than slots or KV blocks: every kind of step the scheduler emits.
PROMPTS = [Prompt(900, 30, cached=256, image_tokens=(300,)), Prompt(40, 1), Prompt(1300, 12), Prompt(64, 200),
           Prompt(700, 5, image_tokens=(120, 90)), Prompt(2000, 3, cached=1024), Prompt(33, 64)] * 3  # fmt: skip


class Compiling(Lookup):
    """Decode buckets looked up in sorted order; a shape none covers compiles a fallback that sorts first, so a
    shape looked up before finds another bucket afterwards (the lookup's state changes its answers)."""

    def __init__(self) -> None:
        super().__init__()
        self.buckets = [(4, 1, 40)]
        self.added: list[tuple[str, tuple[int, int, int]]] = []

    def decode(self, sequences: int, blocks: int) -> GraphRun:
        found = next((b for b in self.buckets if b[0] >= sequences and b[2] >= blocks), None)
        if found is None:
            found = (sequences, 1, -(-blocks // 8) * 8)
            self.buckets = sorted([*self.buckets, found])
            self.added.append(("decode", found))
        return GraphRun("decode", found, found, sequences, sequences, blocks)

    def fallbacks(self) -> list[tuple[str, tuple[int, int, int]]]:
        return list(self.added)


@pytest.mark.parametrize("load", [1, 3, 8])
@pytest.mark.parametrize("kind", ["real, one forward per step", "padded", "padded, compiling"])
def test_a_closed_loop_re_timed_is_the_schedule_run_again_on_that_clock(load: int, kind: str) -> None:
    def clock() -> StepClock:
        if kind == "real, one forward per step":
            return real_clock(fitted_timer(STEP), unified=True)
        return padded_clock(TIMER, Compiling() if kind == "padded, compiling" else Lookup(pad_blocks=30))

    common = simulate(PROMPTS, LIMITS, load)  # no clock at all: every time 0
    again = simulate(PROMPTS, LIMITS, load, clock=(c := clock()).clock, vision_clock=c.vision_clock)
    got = retimed(common, clock())
    assert got.events == again.events
    assert len(got.spans) == len(PROMPTS)
    assert got.spans == again.spans  # every request's arrival, first and last token, to the last bit
    assert got.busy_s == again.busy_s > 0
    assert dataclasses.replace(got, spans=(), busy_s=0.0) == dataclasses.replace(again, spans=(), busy_s=0.0)


def test_arrivals_in_time_are_not_re_timed() -> None:
    timed = simulate(PROMPTS, LIMITS, Arrivals(rate=5.0), clock=(c := real_clock(TIMER, unified=False)).clock)
    with pytest.raises(ValueError, match="scheduled again"):
        retimed(timed, c)


def test_a_kept_price_gives_way_when_the_lookup_compiles() -> None:
    lookup = Compiling()
    clock = padded_clock(TIMER, lookup)
    before = clock.decode(1, 30)  # in (4, 1, 40)
    assert before == TIMER.decode_padded(GraphRun("decode", (4, 1, 40), (4, 1, 40), 1, 1, 30))
    assert clock.decode(1, 30) == before  # kept
    clock.decode(1, 50)  # no bucket holds it: (1, 1, 56) compiles, sorted before (4, 1, 40)
    after = clock.decode(1, 30)
    assert after == TIMER.decode_padded(GraphRun("decode", (1, 1, 56), (1, 1, 56), 1, 1, 30)) != before
    assert lookup.fallbacks() == [("decode", (1, 1, 56))]


def test_arrivals_in_time_scheduled_again_from_the_common_requests_equal_a_fresh_sample() -> None:
    shape = EngineShape(max_num_seqs=8, max_num_batched_tokens=2048, max_model_len=16384, block_size=128,
                        num_kv_blocks=3000)  # fmt: skip
    traffic, images, arrivals = default_traffic(), Images((1600, 3136, 12544)), Arrivals(rate=20.0)
    common = schedules(traffic, shape, images, concurrency=None, requests=60, arrivals=arrivals, timer=TIMER)
    assert len(common.prompts) == 60
    kept, sampled = (strategy_latency(VllmGaudi(), shape, TIMER, traffic, images, concurrency=None, requests=60,
                                      arrivals=arrivals, common=c) for c in (common, None))  # fmt: skip
    assert kept == sampled
    assert kept[0].requests > 0


@pytest.mark.parametrize("rate", [2.0, 50.0, 10_000.0])
@pytest.mark.parametrize("kind", ["real, one forward per step", "padded, compiling"])
def test_arrivals_in_time_continued_from_the_common_schedule_run_again(rate: float, kind: str) -> None:
    def clock() -> StepClock:
        if kind == "real, one forward per step":
            return real_clock(fitted_timer(STEP), unified=True)
        return padded_clock(TIMER, Compiling())

    prompts, arrivals = PROMPTS * 5, Arrivals(rate=rate)
    common = simulate(prompts, LIMITS, arrivals, clock=(c := real_clock(TIMER, unified=False)).clock,
                      vision_clock=c.vision_clock)  # fmt: skip
    assert common.resume is not None
    again = simulate(prompts, LIMITS, arrivals, clock=(c := clock()).clock, vision_clock=c.vision_clock)
    got = simulate(prompts, LIMITS, arrivals, clock=(c := clock()).clock, vision_clock=c.vision_clock,
                   reference=common)  # fmt: skip
    assert got.spans == again.spans  # every request's times, to the last bit
    assert got.busy_s == again.busy_s > 0
    assert got == again
    # once the server is saturated the rest of the common schedule is taken, not scheduled again; at 2/s it never
    # is, and the state differs where every request has arrived
    assert (got.events[-1] is common.events[-1]) == (rate > 2.0)
    # a reference of other requests (the same ones but the last two swapped) is never continued from
    other = simulate([*prompts[:-2], prompts[-1], prompts[-2]], LIMITS, arrivals, clock=(c := clock()).clock,
                     vision_clock=c.vision_clock)  # fmt: skip
    assert other.resume is not None
    mixed = simulate(prompts, LIMITS, arrivals, clock=(c := clock()).clock, vision_clock=c.vision_clock,
                     reference=other)  # fmt: skip
    assert mixed == again
    assert mixed.events[-1] is not other.events[-1]


def test_a_continued_schedule_takes_the_replays_prices_while_no_lookup_compiled() -> None:
    prompts, arrivals = PROMPTS * 5, Arrivals(rate=10_000.0)
    common = simulate(prompts, LIMITS, arrivals, clock=(c := real_clock(TIMER, unified=False)).clock,
                      vision_clock=c.vision_clock)  # fmt: skip
    replayed = replay([common], Lookup(pad_blocks=30), "padded", timer=TIMER)
    prices = replayed.times[0].prices
    assert prices == tuple(padded_clock(TIMER, Lookup(pad_blocks=30)).clock(e) for e in common.events)

    def run(known: tuple[float, ...] | None) -> Trace:
        c = padded_clock(TIMER, Lookup(pad_blocks=30))
        return simulate(prompts, LIMITS, arrivals, clock=c.clock, vision_clock=c.vision_clock, reference=common,
                        reference_prices=None if known is None else lambda: known)  # fmt: skip

    again, got = run(None), run(prices)
    assert got.events[-1] is common.events[-1]  # continued
    assert got == again
    assert got.spans == again.spans  # every request's times, to the last bit
    assert got.busy_s == again.busy_s
    assert run(tuple(2 * p for p in prices)).busy_s > got.busy_s  # the prices are what it reads
    # taken only while neither lookup compiled a fallback
    lookup = Compiling()
    known = _known_prices(replayed, lookup)
    assert known is not None
    assert known() == prices
    lookup.decode(1, 50)  # compiles (1, 1, 56)
    assert known() is None
    assert _known_prices(dataclasses.replace(replayed, fallbacks=(("decode", (1, 1, 56)),)), Lookup()) is None


@pytest.mark.parametrize("load", [Arrivals(rate=10_000.0), 4])
def test_the_replays_prices_leave_every_latency_as_it_was(load: Arrivals | int) -> None:
    """A schedule continued from the common one (arrivals in time) or the common one re-timed (a closed loop) takes
    the replay's prices of its events: the latencies are those of pricing every event again."""
    shape = EngineShape(max_num_seqs=8, max_num_batched_tokens=2048, max_model_len=16384, block_size=128,
                        num_kv_blocks=3000)  # fmt: skip
    traffic, images = default_traffic(), Images((1600, 3136, 12544))
    arrivals, concurrency = (load, None) if isinstance(load, Arrivals) else (None, load)
    common = schedules(traffic, shape, images, concurrency=concurrency, requests=60, arrivals=arrivals, timer=TIMER)
    model = VllmGaudi()
    replayed = replay(common.traces, model.text_lookup(shape), "default", timer=TIMER)
    assert not replayed.fallbacks
    assert len(replayed.times[0].prices) == len(common.traces[0].events)
    kept, priced = (strategy_latency(model, shape, TIMER, traffic, images, concurrency=concurrency, requests=60,
                                     arrivals=arrivals, common=common, replayed=r)
                    for r in (replayed, None))  # fmt: skip
    assert kept == priced
    assert kept[0].requests == 60


@pytest.mark.parametrize("taken", [False, True])
def test_a_schedules_own_prices_give_its_latencies_as_pricing_again_does(taken: bool) -> None:
    prompts, arrivals = PROMPTS * 5, Arrivals(rate=10_000.0)
    common = simulate(prompts, LIMITS, arrivals, clock=(c := real_clock(TIMER, unified=False)).clock,
                      vision_clock=c.vision_clock)  # fmt: skip
    replayed = replay([common], Lookup(pad_blocks=30), "padded", timer=TIMER)
    clock = padded_clock(TIMER, Lookup(pad_blocks=30))
    priced = _Recorded(clock, (lambda: replayed.times[0].prices) if taken else None)
    trace = simulate(prompts, LIMITS, arrivals, clock=priced, vision_clock=clock.vision_clock, reference=common,
                     reference_prices=priced.take)  # fmt: skip
    assert trace.events[-1] is common.events[-1]  # continued: its last events' prices the replay's when taken
    assert len(priced.prices) < len(trace.events) if taken else len(priced.prices) == len(trace.events)
    prices = priced.of(trace, common, Lookup())
    assert prices is not None
    fresh = padded_clock(TIMER, Lookup(pad_blocks=30))
    assert clock.step_seconds(trace, prices) == fresh.step_seconds(trace)
    assert latency_of([trace], clock, load="x", prices=[prices]) == latency_of([trace], fresh, load="x")
    assert clock.step_seconds(trace, [2 * p for p in prices]) != fresh.step_seconds(trace)  # what it reads
    compiled = Compiling()
    compiled.decode(1, 50)
    assert priced.of(trace, common, compiled) is None  # a lookup that compiled prices again


@pytest.mark.parametrize("compiling", [False, True])
def test_a_re_timed_schedules_prices_give_its_latencies_as_pricing_again_does(compiling: bool) -> None:
    def lookup() -> Lookup:
        if not compiling:
            return Lookup(pad_blocks=30)
        small = Compiling()
        small.buckets = [(4, 1, 8)]  # the schedule's decodes outgrow it
        return small

    common = simulate(PROMPTS, LIMITS, 3)
    clock = padded_clock(TIMER, used := lookup())
    priced = _Recorded(clock, None)
    got = retimed(common, clock, price=priced)
    assert got == retimed(common, padded_clock(TIMER, lookup()))
    kept = priced.of(got, got, used)
    if compiling:  # its lookup compiled while it priced: every price is asked again
        assert used.fallbacks()
        assert kept is None
        return
    assert kept is not None
    fresh = padded_clock(TIMER, lookup())
    assert clock.step_seconds(got, kept) == fresh.step_seconds(got)
    assert latency_of([got], clock, load="x", prices=[kept]) == latency_of([got], fresh, load="x")


def _counted_as_they_come(events: tuple[object, ...], lookup: Lookup) -> tuple[list[object], list[float]]:
    """What a replay without balance counts, event by event in order: (per bucket, in the order each first ran;
    tokens, context, slots and blocks, real and padded)."""
    per_bucket: dict[tuple[str, tuple[int, int, int]], list[float]] = {}
    sums = [0.0] * 8
    for event in events:
        if isinstance(event, DecodeRun):
            runs, weight = [lookup.decode(event.sequences, event.blocks)], float(event.steps)
        else:
            runs, weight = lookup.prefill(event), 1.0  # type: ignore[arg-type]
        for run in runs:
            b, q, c = run.shape
            if run.phase == "prompt":
                first = (run.tokens, b * q)
                sums[0] += weight * run.tokens
                sums[1] += weight * b * q
                if c:
                    sums[2] += weight * run.blocks
                    sums[3] += weight * b * c
            else:
                first = (run.requests, b)
                sums[4] += weight * run.requests
                sums[5] += weight * b
                sums[6] += weight * run.blocks
                sums[7] += weight * c
            entry = per_bucket.setdefault((run.phase, run.bucket), [0.0, 0.0, 0.0])
            entry[0] += weight
            entry[1] += weight * first[0]
            entry[2] += weight * first[1]
    return [(k, tuple(v)) for k, v in per_bucket.items()], sums


@pytest.mark.parametrize("compiling", [False, True])
@pytest.mark.parametrize("load", [3, Arrivals(rate=10_000.0)])
def test_an_unbalanced_replay_counts_each_answer_once_as_event_by_event(compiling: bool, load: int | Arrivals) -> None:
    def lookup() -> Lookup:
        if not compiling:
            return Lookup(pad_blocks=30)
        small = Compiling()
        small.buckets = [(4, 1, 8)]  # outgrown: its answers change as it compiles
        return small

    trace = simulate(PROMPTS * 5, LIMITS, load, clock=real_clock(TIMER, unified=False).clock)
    got = replay([trace], used := lookup(), "x", timer=TIMER)
    assert bool(used.fallbacks()) == compiling
    per_bucket, sums = _counted_as_they_come(trace.events, lookup())
    assert list(got.per_bucket.items()) == per_bucket  # every figure and the order buckets first ran in
    assert [
        got.prefill_tokens.real,
        got.prefill_tokens.padded,
        got.prefill_context.real,
        got.prefill_context.padded,
        got.decode_slots.real,
        got.decode_slots.padded,
        got.decode_blocks.real,
        got.decode_blocks.padded,
    ] == sums

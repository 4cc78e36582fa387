"""Fleet sizing (``plan/fleet.py``) on a tiny fitted step model and a few dozen requests: the capacity search's
bounds and monotonicity, the replicas, and the choice against a brute force. Sub-second: no model is planned."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest

from vllm_hpu_mm.engine import EngineShape, PrefillChunk
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.step_fit import FittedStep
from vllm_hpu_mm.plan.fleet import (
    HANDOFF_BYTES_PER_S,
    HANDOFF_S,
    MAX_PERIODS,
    Capacity,
    ReplicaShape,
    Targets,
    choose,
    latency_at,
    max_rate,
    over_profile,
    parse_profile,
    pipelined,
    placement,
    replica_model,
    replicas_for,
    saturation,
    scaled,
    sized,
)
from vllm_hpu_mm.replay.scheduler import Prompt
from vllm_hpu_mm.replay.timing import Timer

SHAPE = EngineShape(max_model_len=2048, max_num_seqs=8, max_num_batched_tokens=512, block_size=16, num_kv_blocks=2000)


def step(overhead_s: float = 0.01, token_s: float = 2e-4, sequence_s: float = 1e-3) -> FittedStep:
    return FittedStep(block_size=16, overhead_s=overhead_s, token_s=token_s, sequence_s=sequence_s, chunk_s=0.0,
                      pair_s=1e-8, image_s=0.0, patch_s=0.0, frontend_s=0.005, source="a test", samples=10,
                      interval=0.1)  # fmt: skip


def timer(s: FittedStep | None = None) -> Timer:
    return Timer(s or step(), lambda tokens: tokens, lambda patches: patches)


#: Two seeds of 24 requests of varied prompt and answer lengths.
SAMPLES = [[Prompt(40 + (37 * i + 11 * seed) % 300, 8 + (5 * i + seed) % 24) for i in range(24)] for seed in (0, 1)]


def capacity(targets: Targets, s: FittedStep | None = None, *, bracket: bool = False) -> Capacity:
    return max_rate(replica_model(timer(s), SHAPE), SAMPLES, targets, iterations=6, bracket=bracket)


def test_capacity_never_exceeds_the_throughput_at_max_num_seqs() -> None:
    replica = replica_model(timer(), SHAPE)
    top = saturation(replica, SAMPLES)
    for targets in (Targets(10.0, 1.0), Targets(0.5, 0.05), Targets(0.2, 0.03)):
        cap = capacity(targets)
        assert 0 < cap.rate <= top
        assert cap.saturation == top
    assert capacity(Targets(10.0, 1.0)).limited_by == ("saturation",)  # loose targets: the throughput binds


def test_the_latency_at_capacity_meets_the_targets_and_just_above_it_misses() -> None:
    targets = Targets(0.3, 0.04)
    cap = capacity(targets)
    assert 0 < cap.rate < cap.saturation
    assert not targets.misses(cap.latency)
    above = latency_at(replica_model(timer(), SHAPE), SAMPLES, cap.rate * 1.2)
    assert targets.misses(above)


def test_a_looser_target_never_lowers_the_capacity() -> None:
    ttfts, tpots = (0.08, 0.15, 0.3, 1.0), (0.03, 0.04, 0.08)
    caps = {(a, b): capacity(Targets(a, b)).rate for a, b in itertools.product(ttfts, tpots)}
    for (a, b), rate in caps.items():
        for (c, d), other in caps.items():
            if c >= a and d >= b:
                assert other >= rate, ((a, b), (c, d))


def test_a_target_no_load_meets_gives_zero_with_the_light_load_figures() -> None:
    cap = capacity(Targets(0.001, 0.5))
    assert cap.rate == 0
    assert cap.limited_by == ("ttft_p99",)
    assert cap.latency.ttft[2] > 0.001


def test_the_interval_and_the_api_servers_time_come_from_the_fitted_step() -> None:
    replica = replica_model(timer(), SHAPE)
    assert replica.interval == 0.1
    assert replica.frontend_s == 0.005
    assert "a test" in replica.evidence
    targets = Targets(0.3, 0.04)
    cap = capacity(targets, bracket=True)
    low, high = cap.rate_range() or (0.0, 0.0)
    assert low < cap.rate < high
    # each end is the search itself with every step 10% slower or faster, not a rescaled figure
    assert low == max_rate(scaled(replica, 1.1), SAMPLES, targets, iterations=6, bracket=False).rate
    assert high == max_rate(scaled(replica, 0.9), SAMPLES, targets, iterations=6, bracket=False).rate
    assert capacity(targets).rate_range() is None  # not bracketed: no range claimed


def test_an_api_server_sharing_the_engines_cpu_lowers_saturation_and_slows_steps_under_load() -> None:
    shared = dataclasses.replace(step(), frontend_share=1.0)
    plain, loaded = replica_model(timer(), SHAPE), replica_model(timer(shared), SHAPE)
    assert saturation(loaded, SAMPLES) < saturation(plain, SAMPLES)
    assert latency_at(loaded, SAMPLES, 0.0001).ttft == pytest.approx(latency_at(plain, SAMPLES, 0.0001).ttft, rel=1e-3)
    busy = 0.5 * saturation(plain, SAMPLES)
    assert latency_at(loaded, SAMPLES, busy).tpot[0] > latency_at(plain, SAMPLES, busy).tpot[0]
    assert capacity(Targets(10.0, 1.0), shared).rate < capacity(Targets(10.0, 1.0)).rate


def test_a_calibrated_wake_up_after_idleness_is_in_the_fleets_latencies_as_in_the_replays() -> None:
    woken = dataclasses.replace(step(), wake_s=0.2, wake_tau_s=1.0)
    plain, waking = replica_model(timer(), SHAPE), replica_model(timer(woken), SHAPE)
    # a light load: nearly every request finds the replica idle long past the ramp, so waits the whole wake-up
    light = 0.01
    gap = latency_at(waking, SAMPLES, light).ttft[0] - latency_at(plain, SAMPLES, light).ttft[0]
    assert gap == pytest.approx(0.2, rel=0.05)
    # the closed loop never idles: saturation is untouched
    assert saturation(waking, SAMPLES) == saturation(plain, SAMPLES)


@pytest.mark.parametrize("kwargs", [{"ttft_p99": 0.0, "tpot_p99": 0.1}, {"ttft_p99": 1.0, "tpot_p99": -1.0},
                                    {"ttft_p99": 1.0, "tpot_p99": 0.1, "e2e_p99": math.inf}])  # fmt: skip
def test_a_target_that_is_no_time_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError, match="latency target"):
        Targets(**kwargs)


def test_replicas_cover_the_rate_with_headroom() -> None:
    assert replicas_for(10.0, 0.2, 3.0) == 4  # 12 / 3
    assert replicas_for(9.0, 0.0, 3.0) == 3
    assert replicas_for(1.0, 0.0, 0.0) == 0


#: Candidate shapes with capacities from step models of different speeds: (shape, capacity per replica).
def _candidates(rate: float, targets: Targets, headroom: float = 0.2) -> list:  # type: ignore[type-arg]
    out = []
    for tp, speed in ((1, 1.0), (2, 1.7), (4, 2.6)):
        s = step(overhead_s=0.01 / speed, token_s=2e-4 / speed, sequence_s=1e-3 / speed)
        cap = capacity(targets, s)
        if cap.rate <= 0:
            continue
        replica = replica_model(timer(s), SHAPE)
        first = sized(ReplicaShape.of(tp, 8, 512), cap, rate, headroom, cards_per_node=8)
        latency = latency_at(replica, SAMPLES, rate / first.replicas)
        out.append(sized(ReplicaShape.of(tp, 8, 512), cap, rate, headroom, cards_per_node=8, latency=latency,
                         targets=targets))  # fmt: skip
    return out


def test_the_chosen_fleet_is_the_cheapest_by_brute_force_and_a_higher_rate_never_needs_fewer_cards() -> None:
    targets = Targets(0.3, 0.04)
    cards_before = 0
    for rate in (1.0, 5.0, 20.0, 60.0):
        candidates = _candidates(rate, targets)
        chosen = choose(candidates)
        assert chosen is not None
        # brute force: every candidate with every replica count up to 1000, the fewest cards whose capacity covers
        # the rate with its headroom
        cheapest = min(r * c.cards_per_replica for c in candidates for r in range(1, 1000)
                       if r * c.capacity.rate >= rate * 1.2)  # fmt: skip
        assert chosen.total_cards == cheapest
        assert chosen.total_cards >= cards_before
        cards_before = chosen.total_cards


def test_a_looser_target_never_needs_more_cards() -> None:
    tight = choose(_candidates(20.0, Targets(0.15, 0.03)))
    loose = choose(_candidates(20.0, Targets(0.6, 0.06)))
    assert tight is not None
    assert loose is not None
    assert loose.total_cards <= tight.total_cards


def test_cards_available_bound_the_choice_and_nodes_pack_replicas() -> None:
    candidates = _candidates(20.0, Targets(0.3, 0.04))
    cheapest = choose(candidates)
    assert cheapest is not None
    assert choose(candidates, cheapest.total_cards - 1) is None
    c = sized(ReplicaShape.of(2, 8, 512), candidates[0].capacity, 100.0, 0.0, cards_per_node=8)
    assert c.nodes == math.ceil(c.replicas / 4)


# --- a load profile over the day ---------------------------------------------------------------------------------

PROFILE = "28800:2,3600:5.5,21600:12,14400:7,18000:0"


def test_a_profile_reads_inline_or_from_a_csv_with_names() -> None:
    inline = parse_profile(PROFILE)
    assert [(p.seconds, p.rate) for p in inline] == [(28800, 2), (3600, 5.5), (21600, 12), (14400, 7), (18000, 0)]
    text = "period,seconds,rate\nnight,28800,2\nmorning,3600,5.5\n"
    assert [(p.name, p.seconds, p.rate) for p in parse_profile("day.csv", text)] == [
        ("night", 28800, 2),
        ("morning", 3600, 5.5),
    ]


@pytest.mark.parametrize(
    ("raw", "text", "said"),
    [
        ("600:2,600", None, "is not SECONDS:RATE"),
        ("600:x", None, "are not numbers"),
        ("0:2", None, "out of range"),
        ("600:-1", None, "out of range"),
        ("600:0,60:0", None, "no period with a rate above 0"),
        (",".join(["60:1"] * (MAX_PERIODS + 1)), None, f"at most {MAX_PERIODS}"),
        ("600000:1,600000:1", None, r"lasts 1,200,000 s, over a week \(604,800 s\)"),
        ("f.csv", "period,rate\nnight,2\n", "no 'seconds' and 'rate' columns"),
        ("f.csv", "seconds,rate\n" + "60,1\n" * (MAX_PERIODS + 1), f"over {MAX_PERIODS} periods"),
        ("f.csv", "seconds,rate\n60,lots\n", "f.csv row 2"),
    ],
)  # fmt: skip
def test_a_bad_profile_is_one_line(raw: str, text: str | None, said: str) -> None:
    with pytest.raises(ConfigError, match=said) as error:
        parse_profile(raw, text)
    assert "\n" not in str(error.value)


def test_a_higher_period_rate_never_needs_fewer_replicas_and_the_peak_is_the_single_rate_plan() -> None:
    targets = Targets(0.3, 0.04)
    cap = capacity(targets)
    periods = parse_profile(PROFILE)
    for headroom in (0.0, 0.2):
        day = over_profile(periods, cap.rate, headroom, cards_per_replica=2)
        by_rate = sorted(day.periods, key=lambda s: s.period.rate)
        assert all(a.replicas <= b.replicas for a, b in itertools.pairwise(by_rate))
        assert min(s.replicas for s in day.periods) >= 1  # an idle period keeps one replica warm
        peak = max(periods, key=lambda p: p.rate)
        single = sized(ReplicaShape.of(2, 8, 512), cap, peak.rate, headroom, cards_per_node=8)
        assert day.peak_cards == single.total_cards == max(s.cards for s in day.periods)
        hours = sum(p.seconds for p in periods) / 3600
        assert day.peak_card_hours == pytest.approx(single.total_cards * hours)
        assert day.card_hours == pytest.approx(sum(s.cards * s.period.seconds / 3600 for s in day.periods))
        assert 0 < day.saved_card_hours < day.peak_card_hours


# --- pipeline stages --------------------------------------------------------------------------------------------


def test_pipeline_stages_never_speed_a_lone_request_and_the_bubble_idles_the_stages() -> None:
    replica = replica_model(timer(), SHAPE)
    assert pipelined(replica, 1, 4096) is replica
    c, p = replica.clock, pipelined(replica, 4, 4096).clock
    hop = 3 * HANDOFF_S  # three hand-offs of one token's activations, and their bytes
    one = c.decode(1, 4) + hop + 3 * 4096 / HANDOFF_BYTES_PER_S
    assert p.decode(1, 4) == pytest.approx(one)
    # fewer requests than stages: each its own micro-batch, the pass of one (the stages idle the rest)
    assert p.decode(3, 12) == pytest.approx(one)
    # many: the micro-batch of a quarter of them, never below the stages' busy time, never above the whole batch
    # at TP alone plus the hand-offs
    p64 = p.decode(64, 256)
    assert p64 >= c.decode(16, 64) + hop
    assert p64 <= c.decode(64, 256) + hop + 3 * 64 * 4096 / HANDOFF_BYTES_PER_S
    chunk = (PrefillChunk(300, 0),)
    assert p.prefill(chunk) > c.prefill(chunk)  # a lone prompt passes every stage in sequence
    assert p.vision(1000) == c.vision(1000)  # the vision tower: on the first stage, as at TP alone


def test_a_replica_spans_nodes_by_whole_stages_only() -> None:
    assert placement(8, 2, 8) == (2, 8)
    assert placement(4, 2, 8) == (1, 8)
    assert placement(1, 2, 1) == (2, 1)
    assert placement(4, 3, 8) == (3, 4)  # 3 stages of 4 cards: one per node, none split across two
    assert placement(16, 1, 8) is None
    cap = capacity(Targets(0.3, 0.04))
    spanning = sized(ReplicaShape.of(8, 8, 512, 2), cap, 100.0, 0.0, cards_per_node=8)
    assert spanning.cards_per_replica == 16
    assert spanning.nodes == 2 * spanning.replicas
    assert spanning.shape.label.startswith("TP8 PP2 ")
    within = sized(ReplicaShape.of(2, 8, 512, 2), cap, 100.0, 0.0, cards_per_node=8)
    assert within.nodes == math.ceil(within.replicas / 2)

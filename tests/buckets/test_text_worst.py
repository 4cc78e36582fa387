"""The worst shape against the runtime's own buckets: exact over every shape the limits allow (checked shape by shape
on small limits), bounded by corner buckets that make no shape dearer, the least worst and the graphs that reach the
bound stated where the budget is too small, and a drifted traffic's padded time never beyond the stated worst."""

from __future__ import annotations

import functools
import math
import random

import numpy as np
import pytest

from vllm_hpu_mm.buckets import text_worst, turns
from vllm_hpu_mm.buckets.text import TextBucketPlan, TextLimits
from vllm_hpu_mm.buckets.text_budget import (
    LOADS_KEPT,
    BudgetedPlan,
    LoadShapes,
    LoadVerdict,
    grow_from,
    padded_time,
    padded_times,
)
from vllm_hpu_mm.buckets.text_time import LookupTable, cached
from vllm_hpu_mm.buckets.text_worst import (
    _TRIED,
    BOUND,
    FEW,
    MAX_SCHEDULED,
    TAIL,
    THIN,
    Between,
    _between,
    _most_paid,
    _no_longer,
    _Phase,
    _steady,
    bound_worst,
    with_bounded_worst,
    worst_case,
)
from vllm_hpu_mm.engine import Bucket, EngineShape
from vllm_hpu_mm.models.catalog import CATALOG, DEFAULT_MODEL
from vllm_hpu_mm.plan.text_buckets import text_time
from vllm_hpu_mm.runtimes.vllm_gaudi import VllmGaudi
from vllm_hpu_mm.runtimes.vllm_gaudi.exponential import decode_block_ceiling

SHAPE = EngineShape(max_model_len=2048, max_num_seqs=16, max_num_batched_tokens=1024, block_size=128,
                    num_kv_blocks=400)  # fmt: skip
LIMITS = TextLimits.of(SHAPE, decode_block_ceiling(SHAPE))
TIME = text_time(CATALOG[DEFAULT_MODEL], "gaudi2", block_size=128, tensor_parallel_size=1)
_EXP = VllmGaudi().text_shapes(SHAPE)
EXP: tuple[tuple[Bucket, ...], tuple[Bucket, ...]] = (_EXP.prefill, tuple((b, 1, c) for b, c in _EXP.decode))
EXP_GRAPHS = len(EXP[0]) + len(EXP[1])


def coarse() -> TextBucketPlan:
    """A plan with rows far apart: the top row alone covers most shapes, so small ones pad to it."""
    top_ctx = LIMITS.top_context(1)
    prompt = ((1, 256, 0), (1, 256, top_ctx), (1, 1024, 0), (1, 1024, top_ctx))
    decode = ((2, 1, 32), (16, 1, 64), (16, 1, LIMITS.top_blocks(16)))
    return TextBucketPlan(prompt, decode, 2, 2, (len(prompt), len(decode)))


def every_shape() -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    decode = [(n, k) for n in range(1, LIMITS.max_num_seqs + 1) for k in range(n, LIMITS.top_blocks(n) + 1)]
    prefill = [(q, c) for q in range(1, LIMITS.top_query + 1) for c in range(0, LIMITS.top_context(q) + 1)]
    return decode, prefill


def step_ratios(plan: TextBucketPlan) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # type: ignore[type-arg]
    """Per shape of every_shape(), its step time in the plan's buckets and in exp's, both phases (infinite where no
    bucket holds it: exp leaves the last context block of the longest prompts to compile, not compared)."""
    decode, prefill = every_shape()
    out = []
    for buckets, phase, shapes in ((plan.decode, "d", decode), (EXP[1], "d", decode), (plan.prompt, "p", prefill),
                                   (EXP[0], "p", prefill)):  # fmt: skip
        table = LookupTable(buckets)
        a = np.array([s[0] for s in shapes], dtype=np.int64)
        c = np.array([s[1] for s in shapes], dtype=np.int64)
        at = table.index(a, np.ones_like(a), c) if phase == "d" else table.index(np.ones_like(a), a, c)
        secs = {i: TIME.decode_s(b, v) if phase == "d" else TIME.prefill_s(b, q, v)
                for i in set(at.tolist()) if i >= 0 for b, q, v in [table.bucket(i)]}  # fmt: skip
        out.append(np.array([secs.get(i, math.inf) for i in at.tolist()]))  # inf: no bucket (exp compiles it)
    return out[0], out[1], out[2], out[3]


def test_the_worst_shape_is_the_worst_of_every_shape_the_limits_allow() -> None:
    plan = coarse()
    worst = worst_case(plan, EXP, LIMITS, TIME)
    ours_d, exp_d, ours_p, exp_p = step_ratios(plan)
    assert worst.decode is not None
    assert worst.prefill is not None
    assert worst.decode.ratio == pytest.approx(float((ours_d / exp_d).max()), rel=1e-9)
    assert worst.prefill.ratio == pytest.approx(float((ours_p / exp_p).max()), rel=1e-9)
    assert worst.prefill.ratio > BOUND  # the coarse plan is far off: what the bound must repair
    n, k = worst.decode.first, worst.decode.second
    assert n <= k <= LIMITS.top_blocks(n)
    assert worst.decode.ours is not None
    assert worst.decode.theirs is not None
    assert TIME.decode_s(*worst.decode.ours[::2]) / TIME.decode_s(*worst.decode.theirs[::2]) == pytest.approx(
        worst.decode.ratio)  # fmt: skip


def test_corner_buckets_bound_the_worst_within_half_of_exp_making_no_shape_dearer() -> None:
    plan = coarse()
    bounded, worst = bound_worst(plan, EXP, LIMITS, TIME, budget=EXP_GRAPHS // 2)
    assert worst.within
    assert worst.worst is not None
    assert worst.worst.ratio <= BOUND
    assert bounded.graphs <= EXP_GRAPHS // 2
    assert worst.added == bounded.graphs - plan.graphs > 0
    assert set(plan.prompt) <= set(bounded.prompt)
    assert set(plan.decode) <= set(bounded.decode)
    before, after = step_ratios(plan), step_ratios(bounded)
    for old, new in ((before[0], after[0]), (before[2], after[2])):
        assert (new <= old * (1 + 1e-9)).all()  # no shape dearer: every load's padded time can only fall
    assert float((after[0] / after[1]).max()) <= BOUND * (1 + 1e-9)
    assert float((after[2] / after[3]).max()) <= BOUND * (1 + 1e-9)


def test_a_budget_too_small_states_the_least_worst_and_the_graphs_that_reach_the_bound() -> None:
    plan = coarse()
    short, worst = bound_worst(plan, EXP, LIMITS, TIME, budget=plan.graphs + 1)
    assert not worst.within
    assert short.graphs == plan.graphs + 1
    assert worst.added == 1
    assert worst.worst is not None
    unbounded = worst_case(plan, EXP, LIMITS, TIME).worst
    assert unbounded is not None
    assert worst.worst.ratio < unbounded.ratio
    assert worst.reaches is not None
    assert worst.reaches > plan.graphs + 1
    line = worst.line()
    assert f"not met within {plan.graphs + 1} graphs" in line
    assert f"{worst.reaches} graphs reach it" in line
    _, enough = bound_worst(plan, EXP, LIMITS, TIME, budget=worst.reaches)
    assert enough.within
    assert enough.graphs == worst.reaches


def test_the_graphs_that_reach_the_bound_are_searched_up_to_the_runtimes_own_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # fresh9's 96k configuration: 64 more buckets did not reach 1.5x, and the plan named no budget that does
    plan = coarse()
    _, found = bound_worst(plan, EXP, LIMITS, TIME, budget=plan.graphs + 1)
    assert found.reaches is not None
    monkeypatch.setattr(text_worst, "MAX_EXTRA", 0)
    _, worst = bound_worst(plan, EXP, LIMITS, TIME, budget=plan.graphs + 1)
    assert worst.reaches == found.reaches  # beyond MAX_EXTRA, as far as the runtime's own count
    monkeypatch.setattr(text_worst, "_best_step", lambda *_: None)  # no bucket helps: the runtime's own do
    _, stuck = bound_worst(plan, EXP, LIMITS, TIME, budget=plan.graphs + 1)
    assert stuck.reaches is None
    assert stuck.line().endswith(f"no buckets added reach it; exp's own {EXP_GRAPHS} graphs do")
    assert stuck.to_dict()["runtime_graphs"] == EXP_GRAPHS


def test_the_search_past_the_budget_stops_at_the_defaults_cap_where_the_runtimes_count_is_larger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # lin's own count at the default max_model_len is in the thousands: a bucket a step up to it ran for minutes
    # (r11 releases case 10); the work asked is bounded by the default's cap, not by the runtime's count
    plan = coarse()
    cap = plan.graphs + 2
    monkeypatch.setattr(text_worst, "MAX_EXTRA", 0)
    monkeypatch.setattr(text_worst, "MAX_DEFAULT_BUDGET", cap)
    rooms: list[int] = []
    step = text_worst._best_step

    def counted(phases, bound, room, strict):  # type: ignore[no-untyped-def]
        rooms.append(room)
        return step(phases, bound, room, strict)

    monkeypatch.setattr(text_worst, "_best_step", counted)
    _, worst = bound_worst(plan, EXP, LIMITS, TIME, budget=plan.graphs + 1)
    assert cap < EXP_GRAPHS
    assert max(rooms) <= cap - plan.graphs
    assert worst.reaches is None or worst.reaches <= cap


def test_drifted_traffic_never_pads_beyond_the_stated_worst() -> None:
    bounded, worst = bound_worst(coarse(), EXP, LIMITS, TIME, budget=EXP_GRAPHS // 2)
    assert worst.worst is not None
    rng = random.Random(35)
    decode, prefill = every_shape()
    for _ in range(20):  # traffic the plan never saw: any mix of the shapes the limits allow
        load = LoadShapes("drifted", {s: rng.randint(1, 50) for s in rng.sample(prefill, 30)},
                          {s: rng.randint(1, 500) for s in rng.sample(decode, 30)})  # fmt: skip
        ours, theirs = padded_time(bounded.prompt, bounded.decode, load, TIME), padded_time(*EXP, load, TIME)
        busy = (ours.bucket_prefill_s + ours.bucket_decode_s) / (theirs.bucket_prefill_s + theirs.bucket_decode_s)
        assert busy <= worst.worst.ratio * (1 + 1e-9)


def test_the_worst_case_in_words_and_json_names_the_shape_the_ratio_and_its_interval() -> None:
    _, worst = bound_worst(coarse(), EXP, LIMITS, TIME, budget=EXP_GRAPHS // 2, against="exp")
    worst = worst.__class__(**{**worst.__dict__, "intervals": (("decode", 0.8, 1.2), ("prefill", 0.9, 1.1))})
    w = worst.worst
    assert w is not None
    line = worst.line()
    assert line.startswith("worst shape (of every one the limits allow): ")
    assert f"{w.ratio:.2f}x its step under exp" in line
    assert "bound 1.5x: met with" in line
    assert "beyond the budget" not in line
    repaired = worst.__class__(**{**worst.__dict__, "beyond": 2, "graphs": worst.graphs + 2, "own_graphs": 0}).line()
    assert (
        f"met with {worst.graphs + 2} graphs ({worst.added} corner buckets added, 2 more beyond the budget so "
        in repaired
    )
    assert "more than the budget" not in repaired  # the runtime's graph count unknown: not named
    told = worst.__class__(**{**worst.__dict__, "beyond": 2, "graphs": worst.graphs + 2, "own_graphs": EXP_GRAPHS})
    assert (f"; {worst.graphs + 2} graphs, more than the budget ({worst.budget}, at most half of the {EXP_GRAPHS} of "
            "exp): the 2 beyond it keep every load judged within exp's padded time") in told.line()  # fmt: skip
    assert told.to_dict()["runtime_graphs"] == EXP_GRAPHS
    low, high = worst.span(w)  # type: ignore[misc]
    assert low == pytest.approx(w.ratio * (0.8 / 1.2 if w.phase == "decode" else 0.9 / 1.1))
    assert f"{low:.2f}-{high:.2f}x within the step model's interval" in line
    data = worst.to_dict()
    assert data["ratio"] == round(w.ratio, 4)
    assert data["within_bound"]
    assert data["line"] == line
    assert math.isclose(data["ratio_interval"][w.phase][1], high)


def _losing_load() -> tuple[BudgetedPlan, tuple[LoadShapes, ...]]:
    """The coarse plan chosen for loads where it pads longer than exp at one of them: few-sequence decode steps
    that its (16, 64) bucket holds within the bound but exp's (4, 48) and (4, 64) hold cheaper."""
    loads = (LoadShapes("1 at once", {(200, 0): 40}, {(2, 30): 400}),
             LoadShapes("4 at once", {(200, 0): 10}, {(4, 40): 800, (3, 50): 400}))  # fmt: skip
    plan = coarse()
    verdicts = tuple(LoadVerdict(load.load, padded_time(plan.prompt, plan.decode, load, TIME),
                                 padded_time(*EXP, load, TIME)) for load in loads)  # fmt: skip
    assert [v.short for v in verdicts] == [False, True]  # the case the rule must repair
    return BudgetedPlan(plan, plan.graphs, "chosen", verdicts), loads


def _weights(loads: tuple[LoadShapes, ...]) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    prefill: dict[tuple[int, int], int] = {}
    decode: dict[tuple[int, int], int] = {}
    for load in loads:
        for out, shapes in ((prefill, load.prefill), (decode, load.decode)):
            for key, n in shapes.items():
                out[key] = out.get(key, 0) + round(n)
    return prefill, decode


def test_no_planned_load_pads_longer_than_exp_once_the_worst_is_bounded() -> None:
    chosen, loads = _losing_load()
    out = with_bounded_worst(chosen, _weights(loads), loads, LIMITS, EXP, TIME, given=None)
    for load in loads:  # judged here, not through the verdicts the plan carries
        ours, theirs = padded_time(out.plan.prompt, out.plan.decode, load, TIME), padded_time(*EXP, load, TIME)
        assert ours.padded_s <= theirs.padded_s * (1 + 1e-9)
    assert not out.short
    assert out.plan.graphs <= EXP_GRAPHS // 2
    assert "no load pads longer than under the runtime's own" in out.reason
    assert out.worst is not None
    assert out.worst.graphs == out.plan.graphs


def test_load_repairs_make_no_shape_dearer_and_a_given_budget_says_where_it_pads_longer() -> None:
    chosen, loads = _losing_load()
    own_times = [v.own for v in chosen.loads]
    plan, verdicts, added, why = _no_longer(chosen.plan, chosen.loads, loads, own_times, EXP, LIMITS, TIME, 8, False)
    assert 0 < added == plan.graphs - chosen.plan.graphs <= 8
    assert not any(v.short for v in verdicts)
    assert "make no shape dearer" in why
    before, after = step_ratios(chosen.plan), step_ratios(plan)
    for old, new in ((before[0], after[0]), (before[2], after[2])):
        assert (new <= old * (1 + 1e-9)).all()  # every shape the limits allow: no load, judged or not, longer
    same, verdicts, added, why = _no_longer(chosen.plan, chosen.loads, loads, own_times, EXP, LIMITS, TIME, 0, False)
    assert (same, added) == (chosen.plan, 0)
    assert why == "; pads longer than the runtime's own at 4 at once within the given budget"


def test_without_room_the_runtime_s_own_buckets_are_kept_in_the_losing_phase() -> None:
    chosen, loads = _losing_load()
    own_times = [v.own for v in chosen.loads]
    plan, verdicts, added, why = _no_longer(chosen.plan, chosen.loads, loads, own_times, EXP, LIMITS, TIME, 0, True)
    assert added == 0
    assert plan.decode == EXP[1]  # decode padded longer: exp's own decode buckets, the same time at every load
    assert plan.prompt == chosen.plan.prompt
    assert not any(v.short for v in verdicts)
    assert "the runtime's own decode buckets kept" in why


def _rows_at_the_levels() -> tuple[BudgetedPlan, tuple[LoadShapes, ...], Between]:
    """Decode rows at the judged loads (1, 2, 4, 8, 12 and 16 at once) with exp's block values: no judged load pads
    longer than exp, but a load between them runs in the next planned row (8 for 5 at once, 16 for 9) where exp's
    rows (6, 10) are nearer."""
    values = sorted({c for _, _, c in EXP[1]})
    decode = tuple((b, 1, c) for b in (1, 2, 4, 8, 16) for c in values if b <= c <= LIMITS.top_blocks(b))
    prompt = (*EXP[0], (1, LIMITS.top_query, LIMITS.top_context(1)))  # exp's, and the longest prompts exp compiles
    plan = TextBucketPlan(prompt, decode, 2, 2, (len(prompt), len(decode)))

    def at(n: int, sample: int = 0) -> LoadShapes:  # most steps at n sequences, the drain's at one fewer
        return LoadShapes(f"{n} at once", {(200, 0): 10}, {(n, 3 * n): 400, (max(1, n - 1), 3 * n): 100})

    loads = tuple(at(n) for n in (1, 2, 4, 8, 12, 16))
    verdicts = tuple(LoadVerdict(load.load, padded_time(plan.prompt, plan.decode, load, TIME),
                                 padded_time(*EXP, load, TIME)) for load in loads)  # fmt: skip
    assert not any(v.short for v in verdicts)
    return BudgetedPlan(plan, plan.graphs, "chosen", verdicts), loads, Between(at, frozenset({1, 2, 4, 8, 12, 16}), 16)


def _longer_at(plan: TextBucketPlan, between: Between) -> list[int]:
    out = []
    for n in range(1, between.top + 1):
        load = between.at(n)
        ours, theirs = padded_time(plan.prompt, plan.decode, load, TIME), padded_time(*EXP, load, TIME)
        if ours.padded_s > theirs.padded_s * (1 + 1e-9):
            out.append(n)
    return out


def test_no_load_between_the_judged_ones_pads_longer_than_exp() -> None:
    chosen, loads, between = _rows_at_the_levels()
    judged_only = with_bounded_worst(chosen, _weights(loads), loads, LIMITS, EXP, TIME, given=None)
    assert {5, 9} <= set(_longer_at(judged_only.plan, between))  # the levels alone miss them
    out = with_bounded_worst(chosen, _weights(loads), loads, LIMITS, EXP, TIME, given=None, between=between)
    assert _longer_at(out.plan, between) == []  # every load 1..max_num_seqs, not only the ones judged
    assert "loads between the levels and steady states judged, these padded longer before" in out.reason
    assert not out.short


def test_the_loads_judged_between_the_levels_include_the_one_padding_longest() -> None:
    chosen, loads, between = _rows_at_the_levels()
    ratios = {}
    for n in range(1, between.top + 1):
        load = between.at(n)
        ratios[n] = (padded_time(chosen.plan.prompt, chosen.plan.decode, load, TIME).padded_s /
                     padded_time(*EXP, load, TIME).padded_s)  # fmt: skip
    longest = max((n for n in ratios if n not in between.judged), key=lambda n: ratios[n])
    assert ratios[longest] > 1.0  # a load between the levels pads longer than exp
    picked = _between(chosen.plan, EXP, between, loads, TIME)
    scheduled = [load.load for load, _, _ in picked if "steady" not in load.load]
    steady = [int(load.load.split()[0]) for load, _, _ in picked if "steady" in load.load]
    assert f"{longest} at once" in scheduled
    assert longest in steady  # chosen by its steady state too, not only as a load of at most FEW at once
    assert all(ratios[n] > 0.97 for n in steady)


def test_a_load_thin_on_its_one_sample_is_judged_on_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """A load padding beyond THIN of exp's on the sample the plan was repaired on is scheduled again on another
    sample and held there too; a load within THIN is not. The second sample here holds a third more KV blocks per
    sequence: without the rule, loads 10 and 11 at once pad longer than exp on it."""
    monkeypatch.setattr(turns, "_can_fork", lambda: False)  # every sample asked for here, none in a child
    chosen, loads, small = _rows_at_the_levels()
    asked: list[int] = []

    def second(n: int) -> LoadShapes:
        return LoadShapes(f"{n} at once", {(200, 0): 10}, {(n, 4 * n): 400, (max(1, n - 1), 4 * n): 100})

    def at(n: int, sample: int = 0) -> LoadShapes:
        if not sample:
            return small.at(n)
        asked.append(n)
        return second(n)

    def ratio(plan: TextBucketPlan, n: int, sample: int) -> float:
        load = second(n) if sample else small.at(n)
        return (padded_time(plan.prompt, plan.decode, load, TIME).padded_s /
                padded_time(*EXP, load, TIME).padded_s)  # fmt: skip

    between = Between(at, small.judged, 16)
    monkeypatch.setattr(text_worst, "THIN", math.inf)  # one sample each, as before the rule
    once = with_bounded_worst(chosen, _weights(loads), loads, LIMITS, EXP, TIME, given=None, between=between)
    assert asked == []
    longer = [n for n in range(1, 17) if ratio(once.plan, n, 1) > 1 + 1e-9]
    assert {10, 11} <= set(longer)
    assert all(ratio(once.plan, n, 0) > THIN for n in (10, 11))  # thin on the first sample (load 6 is not: unseen)
    monkeypatch.setattr(text_worst, "THIN", THIN)
    twice = with_bounded_worst(chosen, _weights(loads), loads, LIMITS, EXP, TIME, given=None, between=between)
    assert {10, 11} <= set(asked)
    assert not {6, 8} & set(asked)  # within THIN on their sample (0.55 and 0.64 of exp's padding): not asked again
    assert all(ratio(twice.plan, n, 1) <= 1 + 1e-9 for n in asked)  # each held on the second too
    assert f"{len(set(asked))} loads judged on a second sample of the traffic too" in twice.reason


def test_the_loads_between_scheduled_ahead_and_on_two_cores_are_those_scheduled_here(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """_between with its few loads started early in a child (Between.ahead) and the others on both cores judges the
    same loads with the same times as one process."""
    monkeypatch.setattr(turns, "_can_fork", lambda: True)  # the child only schedules and pickles (see test_turns)
    chosen, loads, small = _rows_at_the_levels()
    between = Between(small.at, small.judged, 40)  # loads above FEW: some scheduled by their steady state
    shared = _between(chosen.plan, EXP, between, loads, TIME, early=between.ahead())
    monkeypatch.setattr(turns, "PROCESSES", 1)
    alone = _between(chosen.plan, EXP, between, loads, TIME)
    assert shared == alone
    assert len([load for load, _, _ in shared if "steady" not in load.load]) > len(between.few())


@pytest.mark.parametrize("right", [0, 1, 3])
def test_the_loads_between_guessed_ahead_are_those_scheduled_here(monkeypatch: pytest.MonkeyPatch, right: int) -> None:
    """_between with loads scheduled on a guess in a child (some picked, some not, in another order) judges the same
    loads with the same times as one process: the picked taken from the child, only the others scheduled anew."""
    monkeypatch.setattr(turns, "_can_fork", lambda: True)
    chosen, loads, small = _rows_at_the_levels()
    between = Between(small.at, small.judged, 40)
    alone = _between(chosen.plan, EXP, between, loads, TIME)
    picked = [int(load.load.split()[0]) for load, _, _ in alone[-MAX_SCHEDULED:]]
    assert all(n > FEW for n in picked)
    others = [n for n in range(FEW + 1, 41) if n not in picked and n not in small.judged]
    guesses = [others[0], *picked[:right][::-1], others[-1]]  # two not picked around them
    asked: list[int] = []

    def at(n: int, sample: int = 0) -> LoadShapes:
        asked.append(n)
        return small.at(n, sample)

    between_asked = Between(at, small.judged, 40)
    child = turns.Ahead([functools.partial(small.at, n) for n in guesses])
    try:
        shared = _between(chosen.plan, EXP, between_asked, loads, TIME, guessed=(guesses, child))
    finally:
        child.stop()
    assert shared == alone
    monkeypatch.setattr(turns, "_can_fork", lambda: False)  # the loads not guessed all scheduled here, asked for
    child = turns.Ahead([functools.partial(small.at, n) for n in guesses])
    asked.clear()
    again = _between(chosen.plan, EXP, between_asked, loads, TIME, guessed=(guesses, child))
    assert again == alone
    assert sorted(n for n in asked if n > FEW) == sorted(picked[right:])  # the guessed ones taken from the child


def test_more_loads_than_a_run_keeps_priced_at_once_are_each_priced_as_alone() -> None:
    """_between prices every steady state in one call, more loads than a planning run keeps arrays of (LOADS_KEPT):
    each answer is the one worked out alone and uncached."""
    loads = [LoadShapes(f"{n} at once", {(64 * k, k): 3}, {(n, n * k): 100, (n, n * k + 1): 7})
             for n in range(1, 17) for k in range(1, 34)]  # fmt: skip
    assert len(loads) > LOADS_KEPT
    chosen, _, _ = _rows_at_the_levels()
    time = cached(TIME)
    for prompt, decode in (chosen.plan.prompt, chosen.plan.decode), EXP:
        assert padded_times(prompt, decode, loads, time) == tuple(padded_time(prompt, decode, load, TIME)
                                                                  for load in loads)  # fmt: skip


def test_trials_grown_from_a_plan_kept_by_grow_from_are_priced_as_looked_up_afresh() -> None:
    """A repair's trials (the plan's buckets and a few more) at loads the plan was priced at one by one: once
    grow_from keeps the plan's lookup at those loads together, a trial is grown from it (no table of its own is
    built) and prices every load as an uncached lookup does."""
    chosen, loads = _losing_load()
    plan, time = chosen.plan, cached(TIME)
    for load in loads:  # the plan priced at each load alone first, as the repair's verdicts are
        padded_time(plan.prompt, plan.decode, load, time)
    grow_from(plan.prompt, plan.decode, loads, time)
    for group in (((4, 1, 48),), ((4, 1, 48), (4, 1, 64), (2, 1, 16)), ((1, 1, 8),)):
        grown = tuple(sorted({*plan.decode, *group}))
        assert padded_times(plan.prompt, grown, loads, time) == tuple(padded_time(plan.prompt, grown, load, TIME)
                                                                      for load in loads)  # fmt: skip
        assert time.kept("lookup table", (1, grown), lambda: None) is None  # grown, not looked up afresh


def test_no_dearer_kept_per_bucket_set_answers_for_the_buckets_the_phase_holds_now() -> None:
    """A phase keeps its no_dearer answers per (its buckets, group): once a bucket is added, the same group is judged
    again against the grown set (here its answer changes), as a fresh phase judges it."""
    time = cached(TIME)
    phase = _Phase("decode", set(coarse().decode), EXP[1], LIMITS, time)
    group: tuple[Bucket, ...] = ((1, 1, 16),)
    first = phase.no_dearer(group)
    phase.ours.add((2, 1, 8))
    phase.regrid()
    fresh = _Phase("decode", set(phase.ours), EXP[1], LIMITS, time).no_dearer(group)
    assert phase.no_dearer(group) == fresh != first


def test_each_cell_s_own_seconds_are_those_of_the_runtime_s_bucket_named_for_it() -> None:
    """regrid looks each cell up once in the runtime's own buckets, for both the bucket it names and its seconds: each
    cell's seconds are its named bucket's, a bucket that holds the cell, and the worst shape's ratio reads them."""
    phase = _Phase("decode", set(coarse().decode), EXP[1], LIMITS, cached(TIME))
    cells = phase.cells
    assert len(cells.b) > 10
    for i in range(len(cells.b)):
        b, q, c = int(cells.b[i]), int(cells.q[i]), int(cells.c[i])
        if phase.own_at[i] < 0:
            assert math.isinf(phase.own_s[i])
            continue
        own = phase._theirs_table.bucket(int(phase.own_at[i]))
        assert min(own[0] - b, own[1] - q, own[2] - c) >= 0  # the named bucket holds the cell
        assert phase.own_s[i] == TIME.decode_s(own[0], own[2])
    worst = phase.worst()
    assert worst is not None
    assert worst.ratio == pytest.approx(float(phase.ratio.max()))


def test_a_tables_prices_are_kept_for_the_price_asked() -> None:
    table = LookupTable(((2, 1, 8), (4, 1, 32), (8, 1, 64)))
    decode = lambda b, _q, c: TIME.decode_s(b, c)  # noqa: E731
    double = lambda b, _q, c: 2 * TIME.decode_s(b, c)  # noqa: E731
    assert table.seconds(decode).tolist() == [TIME.decode_s(2, 8), TIME.decode_s(4, 32), TIME.decode_s(8, 64)]
    assert table.seconds(double).tolist() == [2 * s for s in table.seconds(decode).tolist()]


def test_a_schedule_of_arrivals_in_time_is_no_load_level_of_the_steady_state() -> None:
    # a rate's or a profile's schedule is labelled "0 at once" (no clients): read as level 0 it failed every
    # `buckets replay --request-rate` with a math domain error (107e361)
    _, loads, _ = _rows_at_the_levels()
    timed = LoadShapes("0 at once", {(200, 0): 10}, {(3, 9): 400, (7, 30): 100})
    steady, alone = _steady((*loads, timed)), _steady(loads)
    assert steady is not None
    assert alone is not None
    assert steady.means == alone.means
    assert [lv[0] for lv in steady.levels] == [1, 2, 4, 8, 12, 16]
    assert np.array_equal(steady.spread, alone.spread)
    assert steady.at(5).decode == alone.at(5).decode


def _no_dearer_on_every_cell(phase: _Phase, group: tuple[Bucket, ...]) -> bool:
    """The no-dearer rule as it reads: every cell of the grid of both sets' edges and the group's, looked up afresh
    in the buckets with and without the group."""
    from vllm_hpu_mm.buckets.text_worst import _decode_cells, _prefill_cells

    grown = sorted({*phase.ours, *group})
    cells = (_decode_cells if phase.name == "decode" else _prefill_cells)(grown, phase.theirs, LIMITS)
    before, after = LookupTable(sorted(phase.ours)), LookupTable(grown)
    old = phase.price(before, before.index(cells.b, cells.q, cells.c))
    new = phase.price(after, after.index(cells.b, cells.q, cells.c))
    return not np.any(new > old * (1 + 1e-9))


def test_no_dearer_judged_on_the_cells_a_group_can_hold_is_the_judgement_on_every_cell() -> None:
    """A group's check looks only at the cells its buckets can hold (the others keep their bucket): its answer is
    the one over every cell of the grid, for groups that make shapes dearer and groups that do not."""
    rng = random.Random(7)
    time = cached(TIME)
    answers = []
    for name, ours, theirs in (("decode", coarse().decode, EXP[1]), ("prefill", coarse().prompt, EXP[0])):
        phase = _Phase(name, set(ours), theirs, LIMITS, time)
        pool = [b for b in theirs if b not in phase.ours]
        for size in (1, 1, 1, 2, 3) * 4:
            group = tuple(rng.sample(pool, size))
            answers.append(phase.no_dearer(group))
            assert answers[-1] == _no_dearer_on_every_cell(phase, group), (name, group)
    assert sorted(set(answers)) == [False, True]  # both kinds of group were judged


def test_a_bound_search_kept_for_the_run_is_the_one_worked_out_afresh() -> None:
    time = cached(TIME)
    plan = coarse()
    first = bound_worst(plan, EXP, LIMITS, time, budget=plan.graphs + 4)
    assert bound_worst(plan, EXP, LIMITS, time, budget=plan.graphs + 4) is first  # kept
    assert first == bound_worst(plan, EXP, LIMITS, TIME, budget=plan.graphs + 4)  # uncached: the same
    assert bound_worst(plan, EXP, LIMITS, time, budget=plan.graphs + 4, strict=True) == bound_worst(
        plan, EXP, LIMITS, TIME, budget=plan.graphs + 4, strict=True)  # fmt: skip


def test_a_shape_neither_bucket_set_holds_is_told_in_words_never_a_nan_ratio() -> None:
    # exp's prompt contexts stop one block short of the top (15 of 16 here): a plan stopping there too leaves the
    # one-token prefills after 16 context blocks to compile under both (inf / inf: it was the worst, as nan)
    top = LIMITS.top_context(1)
    prompt = ((1, 256, 0), (1, 256, top - 1), (1, 1024, 0), (1, 1024, top - 1))
    plan = TextBucketPlan(prompt, coarse().decode, 2, 2, (len(prompt), 3))
    w = worst_case(plan, EXP, LIMITS, TIME).prefill
    assert w is not None
    assert math.isfinite(w.ratio)
    for held_by in (w.ours, w.theirs):  # each label is a bucket holding the shape, not a set's last bucket
        assert held_by is not None
        assert held_by[1] >= w.first
        assert held_by[2] >= w.second
    _, _, ours, theirs = step_ratios(plan)
    held = np.isfinite(ours) & np.isfinite(theirs)
    assert w.ratio == pytest.approx(float(np.max(ours[held] / theirs[held])))
    assert w.neither > 0
    assert bool((np.isinf(ours) & np.isinf(theirs)).any())  # cells there, and shapes in them
    assert w.neither_shape == (1, top)
    assert "neither set holds, the largest prefill 1 query tokens after 16 context blocks: both compile" in (
        w.neither_words()
    )
    # a shape only exp holds is named as compiling under the plan, not as the plan's last bucket
    short = TextBucketPlan(((1, 1024, top - 4),), coarse().decode, 2, 2, (1, 3))
    v = worst_case(short, EXP, LIMITS, TIME).prefill
    assert v is not None
    assert v.ratio == math.inf
    assert v.ours is None
    assert "planned none: compiles" in v.where()


def test_the_repairs_most_paid_shapes_are_those_a_dict_summed_shape_by_shape_ranks_first() -> None:
    # _most_paid sums in numpy what _repairs summed in a dict: the same sums (the same additions in the same order)
    # and the same ranking, ties in first-seen order (values from a few steps, so that ties and repeats are common)
    rng = np.random.default_rng(7)
    for _ in range(300):
        firsts, seconds, extras = [], [], []
        for _ in range(int(rng.integers(0, 4))):
            keys = dict.fromkeys(zip(rng.integers(1, 6, 25).tolist(), rng.integers(0, 6, 25).tolist(), strict=True))
            firsts.append(np.array([k[0] for k in keys], dtype=np.int64))
            seconds.append(np.array([k[1] for k in keys], dtype=np.int64))
            extras.append(rng.choice([0.1, 0.25, 0.3, 1.0, 2.0], len(keys)))
        pay: dict[tuple[int, int], float] = {}
        for f, s, e in zip(firsts, seconds, extras, strict=True):
            for key, more in zip(zip(f.tolist(), s.tolist(), strict=True), e.tolist(), strict=True):
                pay[key] = pay.get(key, 0.0) + more
        assert _most_paid(firsts, seconds, extras) == sorted(pay, key=lambda k: -pay[k])[:_TRIED]


def test_the_top_level_is_held_with_its_kv_tail_stretched(monkeypatch: pytest.MonkeyPatch) -> None:
    """The top level's decodes (16 at once) sit just below the plan's (16, 64) bucket and the next one is far above:
    another sample whose KV runs TAIL times longer pads to it. As before the rule (TAIL 1) that sample pads longer
    than exp's; with it the plan holds it within exp's, and every level too."""
    loads = (LoadShapes("1 at once", {(200, 0): 40}, {(1, 10): 400}),
             LoadShapes("16 at once", {(200, 0): 10}, {(16, 60): 800, (15, 58): 100}))  # fmt: skip
    plan = coarse()
    verdicts = tuple(LoadVerdict(load.load, padded_time(plan.prompt, plan.decode, load, TIME),
                                 padded_time(*EXP, load, TIME)) for load in loads)  # fmt: skip
    chosen = BudgetedPlan(plan, plan.graphs, "chosen", verdicts)
    tail = text_worst._tailed(loads[1], LIMITS)
    assert max(k for _, k in tail.decode) == math.ceil(60 * TAIL)
    assert not tail.prefill

    def ratio(p: TextBucketPlan, load: LoadShapes) -> float:
        return padded_time(p.prompt, p.decode, load, TIME).padded_s / padded_time(*EXP, load, TIME).padded_s

    monkeypatch.setattr(text_worst, "TAIL", 1.0)
    once = with_bounded_worst(chosen, _weights(loads), loads, LIMITS, EXP, TIME, given=None)
    assert ratio(once.plan, tail) > 1 + 1e-9  # the level held on its sample only: a longer KV tail pads longer
    monkeypatch.setattr(text_worst, "TAIL", TAIL)
    out = with_bounded_worst(chosen, _weights(loads), loads, LIMITS, EXP, TIME, given=None)
    assert ratio(out.plan, tail) <= 1 + 1e-9
    assert all(ratio(out.plan, load) <= 1 + 1e-9 for load in loads)
    assert out.plan.graphs <= EXP_GRAPHS // 2

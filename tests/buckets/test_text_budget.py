"""The text graph budget beside the planner: padded time through vllm-gaudi's lookup rule, the default steps (a
third up to a half), the choice judged at every load against the runtime's own buckets, and the cap on a given
budget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.roofline import Roofline
from vllm_hpu_mm.buckets import turns
from vllm_hpu_mm.buckets.text import TextLimits, plan_text_buckets, prepare_phases, text_bucket_splits
from vllm_hpu_mm.buckets.text_budget import (
    MARGIN,
    MAX_DEFAULT_BUDGET,
    LoadShapes,
    LoadVerdict,
    PaddedTime,
    best_at,
    boosted,
    budget_for,
    budget_steps,
    check_budget,
    choose_budget,
    default_most,
    losing,
    padded_time,
    padded_times,
    standing,
)
from vllm_hpu_mm.buckets.text_time import cached
from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes.vllm_gaudi.common import BucketLookup
from vllm_hpu_mm.runtimes.vllm_gaudi.config import BucketingConfig
from vllm_hpu_mm.runtimes.vllm_gaudi.exponential import decode_block_ceiling
from vllm_hpu_mm.runtimes.vllm_gaudi.file_strategy import bucket_file

TIME = Roofline()
SHAPE = EngineShape(max_model_len=8192, max_num_seqs=32, max_num_batched_tokens=2048, block_size=128,
                    num_kv_blocks=2000)  # fmt: skip
LIMITS = TextLimits.of(SHAPE, decode_block_ceiling(SHAPE))


def exp_buckets() -> tuple[tuple[tuple[int, int, int], ...], tuple[tuple[int, int, int], ...]]:
    own = BucketLookup(BucketingConfig(), SHAPE)
    return tuple(own.prompt), tuple(own.decode)


def test_the_default_steps_start_at_a_third_and_end_at_a_half() -> None:
    steps = budget_steps(228)
    assert steps[0] == budget_for(228) == 76
    assert steps[-1] == 114
    assert steps == sorted(set(steps))


@pytest.mark.parametrize("own", [16794, 25253])
def test_the_default_search_asks_for_no_more_than_its_cap_where_a_third_of_lins_count_is_more(own: int) -> None:
    # vllm-gaudi v0.19.0's lin (16,794 graphs at the default max_model_len) and main's: a third of them planned for
    # minutes (r11 releases case 10), the cap in seconds
    assert budget_steps(own) == [MAX_DEFAULT_BUDGET]
    assert default_most(own) == MAX_DEFAULT_BUDGET < budget_for(own)


@pytest.mark.parametrize("own", [228, 1087, 4749, 6471])
def test_the_cap_leaves_every_exp_pad_and_32k_lin_search_as_it_was(own: int) -> None:
    # exp's and pad's default counts, lin's at a 32,768-token max_model_len: every step a third to a half
    assert budget_steps(own)[0] == budget_for(own)
    assert budget_steps(own)[-1] == default_most(own) == budget_for(own, 1 / 2)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(2, 64), st.integers(0, 40)), min_size=1, max_size=12),
       st.integers(1, 4), st.integers(1, 64), st.integers(0, 40))  # fmt: skip
def test_padded_time_looks_up_as_vllm_gaudi_does(buckets: list[tuple[int, int, int]], b: int, q: int, c: int) -> None:
    shape = EngineShape(max_model_len=64 * 128, max_num_seqs=4, max_num_batched_tokens=256, block_size=128,
                        num_kv_blocks=1000)  # fmt: skip
    prompt = tuple(sorted(set(buckets)))
    theirs = BucketLookup(BucketingConfig(from_file="f", file_text=bucket_file(prompt, ((1, 1, 1),)),
                                          prompt_bs_max=4), shape)  # fmt: skip
    if len(theirs.prompt) != len(prompt):  # vllm-gaudi filtered some out: compare on what it keeps
        prompt = tuple(theirs.prompt)
    load = LoadShapes("x", {(q, c): 1}, {})
    t = padded_time(prompt, ((1, 1, 1),), load, TIME)
    found = theirs.find_prompt(1, q, c)
    if theirs.added:
        assert t.uncovered == 1
    else:
        assert t.bucket_prefill_s == pytest.approx(TIME.prefill_s(*found))


def loads() -> list[LoadShapes]:
    out = []
    for level in (1, 4, 16, 32):
        decode = {(n, n * k): 100.0 for n in range(max(1, level // 2), level + 1) for k in (3, 12, 40)}
        decode.update({(n, 5 * n): 20.0 for n in range(1, level)})  # the drain
        out.append(LoadShapes(f"{level} at once", {(300, 0): 5.0, (2048, 8): 2.0, (120, 30): 3.0}, decode))
    return out


def weights(ls: list[LoadShapes]) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    prefill: dict[tuple[int, int], int] = {}
    decode: dict[tuple[int, int], int] = {}
    for load in ls:
        for k, n in load.prefill.items():
            prefill[k] = prefill.get(k, 0) + round(n)
        for k, n in load.decode.items():
            decode[k] = decode.get(k, 0) + round(n)
    return prefill, decode


def test_the_default_budget_is_the_smallest_step_at_which_every_load_pads_within_the_margin() -> None:
    own = exp_buckets()
    ls = loads()
    chosen = choose_budget(weights(ls), ls, LIMITS, own, TIME, load_levels=[1, 4, 16, 32])
    steps = budget_steps(len(own[0]) + len(own[1]))
    assert chosen.budget in steps
    missed = [v.load for v in chosen.loads if v.beyond(MARGIN)]
    if missed:  # a half, and the reason names the loads that miss the margin (and those still short)
        assert chosen.budget == steps[-1]
        assert "does not reach" in chosen.reason
        assert all(load in chosen.reason for load in missed)
    else:
        for v in chosen.loads:
            assert v.ours.padded_s <= MARGIN * v.own.padded_s + 1e-9 * v.own.useful_s
            assert not v.ours.uncovered
        for smaller in steps[: steps.index(chosen.budget)]:
            try:
                at = choose_budget(weights(ls), ls, LIMITS, own, TIME, budget=smaller, load_levels=[1, 4, 16, 32])
            except ConfigError:
                continue
            assert any(v.beyond(MARGIN) for v in at.loads)
    assert chosen.plan.graphs <= chosen.budget


def test_a_given_budget_is_taken_as_it_is_and_capped_by_the_runtimes_own_count() -> None:
    own = exp_buckets()
    ls = loads()
    assert choose_budget(weights(ls), ls, LIMITS, own, TIME, budget=40).budget == 40
    check_budget(228, 228, "--text-graph-budget")
    with pytest.raises(ConfigError, match=r"--text-graph-budget 2147483647 is invalid; accepted: at most 228"):
        check_budget(2147483647, 228, "--text-graph-budget")
    check_budget(1, 228, "--text-graph-budget")  # the planner refuses it with the least these limits need


def _warmup(scale: float):  # type: ignore[no-untyped-def]
    """A warm-up estimate in which a graph costs more the larger its shape (as the fitted one does), ``scale``
    weighing the size against a fixed per-graph second."""

    def seconds(prompt, decode):  # type: ignore[no-untyped-def]
        return sum(1 + scale * q * (c + 1) / 2048 for _, q, c in prompt) + sum(1 + scale * c / 64 for _, _, c in decode)

    return seconds


@pytest.mark.parametrize(("scale", "said"), [(0.0, ""), (0.2, "would warm up longer"), (4.0, "below a third")])
def test_the_default_budget_warms_up_within_its_share_of_the_runtimes_own_warm_up(scale: float, said: str) -> None:
    own = exp_buckets()
    ls = loads()
    warmup = _warmup(scale)
    chosen = choose_budget(weights(ls), ls, LIMITS, own, TIME, load_levels=[1, 4, 16, 32], warmup=warmup)
    total = len(own[0]) + len(own[1])
    share = (budget_for(total) if chosen.budget <= budget_for(total) else budget_for(total, 1 / 2)) / total
    assert warmup(chosen.plan.prompt, chosen.plan.decode) <= share * warmup(*own) + 1e-9
    assert said in chosen.reason  # a budget passed over (or brought below a third) for its warm-up says so


def test_without_a_size_cost_the_warm_up_rule_changes_nothing() -> None:
    own = exp_buckets()
    ls = loads()
    plain = choose_budget(weights(ls), ls, LIMITS, own, TIME, load_levels=[1, 4, 16, 32])
    counted = choose_budget(weights(ls), ls, LIMITS, own, TIME, load_levels=[1, 4, 16, 32], warmup=_warmup(0.0))
    assert counted.budget == plain.budget
    assert counted.plan == plain.plan


def _verdict(load: str, own: tuple[float, float, float, float], ours: tuple[float, float]) -> LoadVerdict:
    """A load's verdict from (useful prefill, useful decode, own prefill padding, own decode padding) and ours."""
    up, ud, op, od = own
    return LoadVerdict(load, PaddedTime(up, ud, up + ours[0], ud + ours[1], 0), PaddedTime(up, ud, up + op, ud + od, 0))


def test_a_losing_load_is_weighed_by_how_thin_the_runtimes_own_padding_leaves_its_margin() -> None:
    thin = _verdict("8 at once", (10.0, 90.0, 0.5, 0.5), (0.4, 1.5))  # own pads 1% here, ours 1.9x
    thick = _verdict("64 at once", (10.0, 90.0, 5.0, 5.0), (4.0, 15.0))  # own pads 10%, ours 1.9x
    fine = _verdict("1 at once", (10.0, 90.0, 1.0, 1.0), (0.5, 0.5))
    lost = losing([thin, thick, fine])
    assert set(lost) == {(0, 1), (1, 1)}  # decode loses at both; prefill holds, and the fine load is left alone
    assert lost[(0, 1)] == pytest.approx(10 * lost[(1, 1)])


def test_only_the_phases_that_lose_are_weighed_in() -> None:
    close = _verdict("4 at once", (50.0, 50.0, 1.0, 1.0), (0.84, 1.2))  # decode loses, prefill within the margin
    assert set(losing([close])) == {(0, 1)}
    even = _verdict("4 at once", (50.0, 50.0, 1.0, 1.0), (0.9, 0.9))  # each phase at 0.9: beyond 0.85 in both
    assert set(losing([even])) == {(0, 0), (0, 1)}


def test_a_boosted_load_adds_its_own_steps_at_its_share_of_the_planning_seconds() -> None:
    ls = loads()
    own = exp_buckets()
    own_times = [padded_time(own[0], own[1], load, TIME) for load in ls]
    base = weights(ls)
    more = boosted(base, ls, own_times, {(2, 1): 0.5}, TIME)
    assert more[0] == base[0]  # only the boosted phase changes
    added = {k: n - base[1].get(k, 0) for k, n in more[1].items() if n != base[1].get(k, 0)}
    assert set(added) <= set(ls[2].decode)
    added_s = sum(n * TIME.decode_s(s, b) for (s, b), n in added.items())
    total = sum(n * TIME.prefill_s(1, q, c) for (q, c), n in base[0].items()) + sum(
        n * TIME.decode_s(s, b) for (s, b), n in base[1].items())  # fmt: skip
    assert added_s == pytest.approx(0.5 * total, rel=0.02)


@pytest.mark.parametrize("graphs", [30, 40, 60])
def test_where_the_least_time_plan_misses_the_margin_the_default_takes_one_that_stands_no_worse(graphs: int) -> None:
    ls = loads()
    own = exp_buckets()
    own_times = [padded_time(own[0], own[1], load, TIME) for load in ls]
    least_time = plan_text_buckets(*weights(ls), LIMITS, budget=graphs, time=TIME, load_levels=[1, 4, 16, 32])
    first = [LoadVerdict(load.load, padded_time(least_time.prompt, least_time.decode, load, TIME), theirs)
             for load, theirs in zip(ls, own_times, strict=True)]  # fmt: skip
    repaired = best_at(weights(ls), ls, LIMITS, own, own_times, TIME, [1, 4, 16, 32], graphs, None)
    assert repaired is not None
    plan, verdicts = repaired
    assert plan.graphs <= graphs
    assert standing(verdicts) <= standing(first)
    if not any(v.beyond(MARGIN) for v in first):  # nothing to repair: the least-time plan itself
        assert plan == least_time


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 32), st.integers(1, 400)), min_size=1, max_size=12),
       st.lists(st.tuples(st.integers(1, 32), st.integers(1, 400)), min_size=1, max_size=20))  # fmt: skip
def test_padded_time_looks_up_decode_steps_as_vllm_gaudi_does(buckets: list[tuple[int, int]],
                                                             steps: list[tuple[int, int]]) -> None:  # fmt: skip
    decode = tuple(sorted({(b, 1, max(b, c)) for b, c in buckets}))
    file = bucket_file(((1, 128, 0),), decode)
    kept = BucketLookup(BucketingConfig(from_file="f", file_text=file), SHAPE).decode
    decode = tuple(kept)  # what vllm-gaudi keeps of the file
    top = max(c for _, _, c in decode)
    shapes = {(s, max(s, k)): 1.0 for s, k in steps if max(s, k) <= top}  # beyond: vllm-gaudi caps the key itself
    t = padded_time(((1, 128, 0),), decode, LoadShapes("x", {}, shapes), TIME)
    expected, missing = 0.0, 0
    for s, k in shapes:
        theirs = BucketLookup(BucketingConfig(from_file="f", file_text=file), SHAPE)  # no fallback from another step
        found = theirs.find_decode(s, k)
        missing += bool(theirs.added)
        expected += TIME.decode_s(s, k) if theirs.added else TIME.decode_s(found[0], found[2])
    assert t.uncovered == missing
    assert t.bucket_decode_s == pytest.approx(expected)


def test_a_loads_times_kept_per_bucket_set_are_the_ones_worked_out_afresh() -> None:
    """One planning run keeps each load's phase times per bucket set: asked again (and in between for other sets, the
    same prompt beside another decode), each answer is the uncached one, exactly."""
    cached_time = cached(TIME)
    own = exp_buckets()
    sets = [own, (own[0][: len(own[0]) // 2], own[1]), (own[0], own[1][::2]), own]
    for load in loads():
        for prompt, decode in sets * 2:  # the second pass reads the kept times
            assert padded_time(prompt, decode, load, cached_time) == padded_time(prompt, decode, load, TIME)


def test_loads_judged_at_once_get_each_loads_own_uncached_times() -> None:
    """padded_times keeps one lookup per bucket set for a set of loads (found by their identities, in order): each
    load's answer is the one worked out alone and uncached, whatever set or order it is asked in."""
    cached_time = cached(TIME)
    own = exp_buckets()
    ls = loads()
    sets = [own, (own[0][: len(own[0]) // 2], own[1]), (own[0], own[1][::2]), own]
    for group in (ls, ls[::-1], ls[1:3], ls):
        for prompt, decode in sets:
            got = padded_times(prompt, decode, group, cached_time)
            assert got == tuple(padded_time(prompt, decode, load, TIME) for load in group)


def test_the_splits_kept_for_a_planning_run_are_those_of_their_own_weights_and_budget() -> None:
    """text_bucket_splits keeps its answer per weights and budget: asked for another budget, or other weights, in
    the same run, each answer is the one a fresh run gives."""
    ls = loads()
    base = weights(ls)
    more = (base[0], {**base[1], (32, 400): 5000})  # the decode weights changed, the prefill ones not
    run = cached(TIME)
    for w, graphs in ((base, 40), (base, 60), (more, 40), (base, 40)):
        kept = text_bucket_splits(*w, LIMITS, budget=graphs, time=run, load_levels=[1, 4, 16, 32])
        assert kept == text_bucket_splits(*w, LIMITS, budget=graphs, time=cached(TIME), load_levels=[1, 4, 16, 32])


def test_the_phases_prepared_before_the_search_are_those_every_step_prepares() -> None:
    """prepare_phases keeps each phase under the key text_bucket_splits asks at every budget of the default's search
    (one entry per phase, found again, not a second); the splits are a fresh run's."""
    ls = loads()
    w = weights(ls)
    run = cached(TIME)
    prepare_phases(*w, LIMITS, budget=60, time=run, load_levels=[1, 4, 16, 32])
    for graphs in (60, 70):
        kept = text_bucket_splits(*w, LIMITS, budget=graphs, time=run, load_levels=[1, 4, 16, 32])
        assert kept == text_bucket_splits(*w, LIMITS, budget=graphs, time=cached(TIME), load_levels=[1, 4, 16, 32])
    assert [len(run._kept[phase]) for phase in ("prompt", "decode")] == [1, 1]


def test_the_default_budget_search_in_turns_chooses_what_one_process_chooses(monkeypatch: pytest.MonkeyPatch) -> None:
    own = exp_buckets()
    ls = loads()[1:3]
    in_two = choose_budget(weights(ls), ls, LIMITS, own, TIME, load_levels=[4, 16], warmup=_warmup(0.2))
    monkeypatch.setattr(turns, "PROCESSES", 1)
    in_one = choose_budget(weights(ls), ls, LIMITS, own, TIME, load_levels=[4, 16], warmup=_warmup(0.2))
    assert in_two == in_one


def test_a_bucket_set_grown_by_a_few_buckets_is_looked_up_as_a_fresh_one() -> None:
    """A set that adds a few buckets to one looked up before is looked up from it (a shape moves to an added bucket
    where that one holds it and sorts first): every answer is the uncached one, the added buckets landing before,
    between and after the kept ones."""
    cached_time = cached(TIME)
    own = exp_buckets()
    ls = loads()
    prompt, decode = list(own[0][::3]), list(own[1][::3])
    padded_times(prompt, decode, ls, cached_time)
    for more_prompt, more_decode in zip(own[0][1::3], own[1][1::3][::-1], strict=False):
        prompt, decode = sorted({*prompt, more_prompt}), sorted({*decode, more_decode})
        got = padded_times(prompt, decode, ls, cached_time)
        assert got == tuple(padded_time(prompt, decode, load, TIME) for load in ls)


def test_loads_sharing_one_mapping_are_looked_up_once_and_priced_each_as_alone() -> None:
    """Steady states near one judged load hold its prefill chunks (the same mapping): a load set looks the shared
    part up once (its shapes appear once end to end), and each load's answer is the one worked out alone, uncached,
    in any order and again from the kept answers."""
    from vllm_hpu_mm.buckets.text_budget import _loadset

    shared = {(300, 0): 5.0, (2048, 8): 2.0, (120, 30): 3.0, (640, 2): 1.5}
    ls = [LoadShapes(f"{n} at once", shared, {(n, n * k): 100.0 + k for k in (3, 12, 40)}) for n in (2, 5, 9)]
    ls.append(LoadShapes("16 at once", {(300, 0): 5.0, (64, 1): 1.0}, {(16, 160): 50.0}))  # equal keys, not shared
    cached_time = cached(TIME)
    own = exp_buckets()
    for group in (ls, ls[::-1], ls):
        for prompt, decode in (own, (own[0][::2], own[1])):
            got = padded_times(prompt, decode, group, cached_time)
            assert got == tuple(padded_time(prompt, decode, load, TIME) for load in group)
    prefill_shapes = len(_loadset(ls, cached_time).phases[0][0])
    assert prefill_shapes == len(shared) + 2  # the shared chunks once, the other load's two


def test_weight_sets_planned_in_one_run_get_the_plans_each_gets_alone() -> None:
    """A planning run keeps one set of axes per limits, and what depends on them alone (ladder grids, the rows'
    step rules and seconds) serves every weight set: each set's plans at each budget are those a fresh run gives."""
    ls = loads()
    run = cached(TIME)
    for w in (weights(ls[:2]), weights(ls[2:]), weights(ls)):
        assert text_bucket_splits(*w, LIMITS, budget=48, time=run) == text_bucket_splits(
            *w, LIMITS, budget=48, time=cached(TIME))  # fmt: skip

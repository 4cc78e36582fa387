"""The text bucket planner: its buckets cover every shape the limits allow (so vllm-gaudi's lookup never falls back),
they respect the budget, and its dynamic programmes are exact (checked against brute force on small cases)."""

from __future__ import annotations

import dataclasses
import itertools
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.buckets.planner import INFEASIBLE, CoverTable
from vllm_hpu_mm.buckets.text import (
    DECODE_MAX_STEP,
    TextLimits,
    _allocate,
    _Curve,
    block_grid,
    plan_text_buckets,
)
from vllm_hpu_mm.runtimes.base import EngineShape, PrefillChunk
from vllm_hpu_mm.runtimes.vllm_gaudi.common import BucketLookup
from vllm_hpu_mm.runtimes.vllm_gaudi.config import BucketingConfig
from vllm_hpu_mm.runtimes.vllm_gaudi.file_strategy import bucket_file
from vllm_hpu_mm.runtimes.vllm_gaudi.runner import RunnerLookup


@st.composite
def limits_and_traffic(draw: st.DrawFn) -> tuple[TextLimits, dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    block = draw(st.sampled_from([64, 128, 256]))
    mml = draw(st.sampled_from([2048, 4096, 10000, 32768]))
    mns = draw(st.integers(1, 96))
    mnbt = draw(st.sampled_from([1024, 2048, 8192]))
    kv = draw(st.integers(50, 5000))
    per_seq = math.ceil(mml / block)
    cap = min(per_seq * mns, 3 * kv)
    limits = TextLimits(mns, mnbt, mml, block, cap, draw(st.integers(1, 3)))
    top_q = limits.top_query
    prefill = draw(st.dictionaries(
        st.integers(1, top_q).flatmap(lambda q: st.tuples(st.just(q), st.integers(0, limits.top_context(q)))),
        st.integers(1, 1000), max_size=12))  # fmt: skip
    decode = draw(st.dictionaries(
        st.integers(1, mns).flatmap(lambda n: st.tuples(st.just(n), st.integers(n, max(n, min(n * per_seq, cap))))),
        st.integers(1, 1000), max_size=12))  # fmt: skip
    return limits, prefill, decode


def engine(limits: TextLimits, kv: int) -> EngineShape:
    return EngineShape(max_model_len=limits.max_model_len, max_num_seqs=limits.max_num_seqs,
                       max_num_batched_tokens=limits.max_num_batched_tokens, block_size=limits.block_size,
                       num_kv_blocks=kv)  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(limits_and_traffic(), st.integers(2, 24), st.data())
def test_any_shape_within_the_limits_finds_a_planned_bucket(
    case: tuple[TextLimits, dict[tuple[int, int], int], dict[tuple[int, int], int]], budget: int, data: st.DataObject
) -> None:
    limits, prefill, decode = case
    prompt_budget = max(1, budget // 3)
    plan = plan_text_buckets(prefill, decode, limits, prompt_budget=prompt_budget,
                             decode_budget=max(1, budget - prompt_budget))  # fmt: skip
    cfg = BucketingConfig(from_file="planned.txt", file_text=bucket_file(plan.prompt, plan.decode),
                          prompt_bs_max=limits.max_prefill_batch)  # fmt: skip
    kv = max(1, -(-limits.decode_block_cap // 3))
    lookup = BucketLookup(cfg, engine(limits, kv))
    # vllm-gaudi keeps every planned bucket (none is filtered out) ...
    assert len(lookup.prompt) == len(plan.prompt)
    assert len(lookup.decode) == len(plan.decode)
    # ... and any shape the limits allow finds one of them
    q = data.draw(st.integers(1, limits.top_query), label="query")
    ctx = data.draw(st.integers(0, limits.top_context(q)), label="context blocks")
    assert lookup.find_prompt(1, q, ctx)[1] >= q
    assert lookup.find_prompt(1, q, 0)[1] >= q  # the runner's merge check
    n = data.draw(st.integers(1, limits.max_num_seqs), label="sequences")
    top = max(n, min(n * math.ceil(limits.max_model_len / limits.block_size), limits.decode_block_cap))
    blocks = data.draw(st.integers(n, top), label="blocks")
    bucket = lookup.find_decode(n, blocks)
    assert bucket[0] >= n
    assert bucket[2] >= blocks
    if min(limits.max_prefill_batch, limits.max_num_seqs) > 1:  # merged prefills (no context) up to the batch size
        b = data.draw(st.integers(2, min(limits.max_prefill_batch, limits.max_num_seqs)), label="prefill batch")
        most = min(limits.max_num_batched_tokens // b, limits.max_model_len)
        q2 = data.draw(st.integers(1, most), label="merged query")
        assert lookup.find_prompt(b, q2, 0)[0] >= b
    assert not lookup.added
    assert len(plan.decode) <= max(1, budget - prompt_budget)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(limits_and_traffic())
def test_the_runner_replaying_planned_buckets_never_compiles(
    case: tuple[TextLimits, dict[tuple[int, int], int], dict[tuple[int, int], int]],
) -> None:
    limits, prefill, decode = case
    plan = plan_text_buckets(prefill, decode, limits, prompt_budget=6, decode_budget=8)
    cfg = BucketingConfig(from_file="planned.txt", file_text=bucket_file(plan.prompt, plan.decode))
    runner = RunnerLookup(cfg, engine(limits, max(1, -(-limits.decode_block_cap // 3))))
    for (q, c), _ in prefill.items():
        run = runner.prefill((PrefillChunk(q, c * limits.block_size),))[0]
        assert ("prompt", run.shape) in runner.warmed
    for (n, b), _ in decode.items():
        assert ("decode", runner.decode(n, b).shape) in runner.warmed
    assert not runner.fallbacks()


def brute_force(weights: dict[int, int], k: int, top: int) -> int:
    """Least sum(weight x bucket) over every list of at most k values, drawn from the values, that ends at top."""
    values = sorted(set(weights) | {top})
    best = None
    for size in range(1, k + 1):
        for chosen in itertools.combinations(values[:-1], size - 1):
            buckets = [*chosen, top]
            cost = sum(n * next(b for b in buckets if b >= v) for v, n in weights.items())
            best = cost if best is None else min(best, cost)
    assert best is not None
    return best


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.integers(1, 60), st.integers(1, 50), min_size=1, max_size=8), st.integers(1, 5),
       st.integers(0, 20))  # fmt: skip
def test_the_row_programme_is_exactly_optimal_against_brute_force(weights: dict[int, int], k: int, extra: int) -> None:
    top = max(weights) + extra
    table = CoverTable(weights, cover=top, granule=1)
    while table.num_buckets < min(k, len(table.values)):
        table.grow()
    assert table.buckets()[-1] == top
    assert table.best_cost() == brute_force(weights, k, top)


def brute_force_constrained(weights: dict[int, int], k: int, top: int, forced: list[int],
                            max_ratio: float | None) -> int | None:  # fmt: skip
    """Least sum(weight x bucket) over lists of exactly k values from the values that end at top, hold every forced
    value and step at most max_ratio (into any value but top); None when no such list exists."""
    values = sorted(set(weights) | {top} | set(forced))
    best = None
    for chosen in itertools.combinations(values[:-1], k - 1):
        buckets = [*chosen, top]
        if not set(forced) <= set(buckets):
            continue
        if max_ratio is not None and any(b > max_ratio * a for a, b in itertools.pairwise(buckets) if b != top):
            continue
        cost = sum(n * next(b for b in buckets if b >= v) for v, n in weights.items())
        best = cost if best is None else min(best, cost)
    return best


@settings(max_examples=120, deadline=None)
@given(st.dictionaries(st.integers(1, 60), st.integers(1, 50), min_size=1, max_size=7), st.integers(1, 5),
       st.integers(0, 20), st.lists(st.integers(1, 60), max_size=3), st.sampled_from([None, 1.5, 2.0]))  # fmt: skip
def test_the_row_programme_with_forced_values_and_a_widest_step_is_exactly_optimal(
    weights: dict[int, int], k: int, extra: int, forced: list[int], max_ratio: float | None
) -> None:
    top = max(weights) + extra
    forced = [f for f in forced if f < top]
    table = CoverTable(weights, cover=top, granule=1, forced=forced, max_ratio=max_ratio)
    while table.num_buckets < min(k, len(table.values)):
        table.grow()
    expected = brute_force_constrained(weights, table.num_buckets, top, forced, max_ratio)
    if expected is None:
        assert table.best_cost() == INFEASIBLE
        return
    assert table.best_cost() == expected
    assert set(forced) <= set(table.buckets())
    assert table.buckets()[-1] == top


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(limits_and_traffic(), st.integers(12, 40), st.data())
def test_with_the_runtimes_own_rows_no_prefill_pads_its_query_further_than_the_runtimes_own_buckets(
    case: tuple[TextLimits, dict[tuple[int, int], int], dict[tuple[int, int], int]], budget: int, data: st.DataObject
) -> None:
    limits, prefill, decode = case
    limits = dataclasses.replace(limits, max_prefill_batch=1)
    kv = max(1, -(-limits.decode_block_cap // 3))
    own = BucketLookup(BucketingConfig(), engine(limits, kv))
    query_rows = sorted({q for _, q, _ in own.prompt})
    batch_rows = sorted({b for b, _, _ in own.decode})
    prompt_budget = max(len(query_rows) + 1, budget // 2)  # the rows and the covering one
    plan = plan_text_buckets(prefill, decode, limits, prompt_budget=prompt_budget, decode_budget=budget,
                             query_rows=query_rows, batch_rows=batch_rows)  # fmt: skip
    ours = BucketLookup(BucketingConfig(from_file="planned.txt", file_text=bucket_file(plan.prompt, plan.decode)),
                        engine(limits, kv))  # fmt: skip
    assert {q for q in query_rows if q < limits.top_query} <= {q for _, q, _ in plan.prompt}
    if len(batch_rows) + 1 <= budget:
        assert {b for b in batch_rows if b < limits.max_num_seqs} <= {b for b, _, _ in plan.decode}
    q = data.draw(st.integers(1, limits.top_query), label="query")
    ctx = data.draw(st.integers(0, limits.top_context(q)), label="context blocks")
    theirs = own.find_prompt(1, q, ctx)
    if not own.added:  # a shape their own buckets cover (no fallback)
        assert ours.find_prompt(1, q, ctx)[1] <= theirs[1]


def test_decode_block_values_step_at_most_the_widest_step_when_the_budget_allows() -> None:
    limits = TextLimits(64, 2048, 32768, 128, 9000)
    decode = {(n, n * b): 10 for n in (1, 4, 16, 64) for b in (3, 8, 40, 200)}
    plan = plan_text_buckets({(512, 0): 10}, decode, limits, prompt_budget=4, decode_budget=40)
    rows: dict[int, list[int]] = {}
    for b, _, c in plan.decode:
        rows.setdefault(b, []).append(c)
    for b, values in rows.items():
        steps = [y / x for x, y in itertools.pairwise(sorted(values)) if y != limits.top_blocks(b)]
        assert all(s <= DECODE_MAX_STEP * 1.01 for s in steps), (b, sorted(values))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.integers(0, 1000), min_size=1, max_size=4).map(lambda c: sorted(c, reverse=True)),
                min_size=1, max_size=4), st.integers(1, 12))  # fmt: skip
def test_the_graph_allocation_over_rows_is_exactly_optimal(costs: list[list[int]], graphs: int) -> None:
    curves = [_Curve(tuple(c), tuple((i,) * (m + 1) for m in range(len(c)))) for i, c in enumerate(costs)]
    if graphs < len(curves):
        return
    counts = _allocate(curves, graphs)
    assert sum(counts) <= graphs
    assert all(m >= 1 for m in counts)
    best = min(sum(c[m - 1] for c, m in zip(costs, combo, strict=True))
               for combo in itertools.product(*(range(1, len(c) + 1) for c in costs))
               if sum(combo) <= graphs)  # fmt: skip
    assert sum(c[m - 1] for c, m in zip(costs, counts, strict=True)) == best


def test_block_values_round_to_sixteen_steps_per_doubling() -> None:
    assert [block_grid(v) for v in (0, 7, 16, 17, 33, 1000)] == [0, 7, 16, 17, 34, 1024]
    assert all(block_grid(v) >= v and block_grid(v) <= v * 1.0625 + 1 for v in range(1, 5000))


def test_a_tight_budget_still_covers_with_one_bucket_per_phase() -> None:
    limits = TextLimits(16, 2048, 4096, 128, 500)
    plan = plan_text_buckets({(100, 0): 5, (2000, 3): 1}, {(3, 10): 9}, limits, prompt_budget=1, decode_budget=1)
    assert plan.prompt == ((1, 2048, limits.top_context(1)),)
    assert plan.decode == ((16, 1, limits.top_blocks(16)),)

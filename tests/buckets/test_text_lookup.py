"""The planner's fast paths give the slow ones' answers exactly: vllm-gaudi's lookup rule (the first bucket in sorted
order holding the shape in every dimension) against a plain scan of the sorted buckets, and a phase's shapes priced
row by row (kept slices) against the whole lookup, bit for bit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.buckets.text_time import (
    NOT_FOUND,
    LookupTable,
    PhaseAxes,
    _Allocation,
    _Curve,
    _Pricer,
    _seconds,
    moved,
    unique_ints,
    unique_pairs,
)

small = st.integers(1, 40)
buckets = st.lists(st.tuples(small, small, st.integers(0, 60)), min_size=0, max_size=25)
shapes = st.lists(st.tuples(small, small, st.integers(0, 70)), min_size=1, max_size=40)


def scan(table: list[tuple[int, int, int]], b: int, q: int, c: int) -> tuple[int, int, int] | None:
    """vllm-gaudi's rule as it reads: the first bucket in sorted order at least as large in every dimension."""
    return next((bucket for bucket in sorted(set(table)) if bucket >= (b, q, c) and bucket[0] >= b and
                 bucket[1] >= q and bucket[2] >= c), None)  # fmt: skip


@settings(max_examples=100, deadline=None, derandomize=True)
@given(table=buckets, asked=shapes)
def test_the_lookup_takes_the_first_sorted_bucket_holding_the_shape(
    table: list[tuple[int, int, int]], asked: list[tuple[int, int, int]]
) -> None:
    lookup = LookupTable(table)
    b, q, c = (np.array(x, dtype=np.int64) for x in zip(*asked, strict=True))
    at = lookup.index(b, q, c)
    found_b, found_q, found_c, found = lookup.find(b, q, c)
    for i, shape in enumerate(asked):
        expected = scan(table, *shape)
        if expected is None:
            assert at[i] == -1
            assert not found[i]
            assert (found_b[i], found_q[i], found_c[i]) == shape  # its own shape: a compile
        else:
            assert lookup.bucket(int(at[i])) == expected == (found_b[i], found_q[i], found_c[i])


def _time(row: int, value: int) -> float:
    return 1e-3 * row + 1e-5 * row * value + 1 / (3 + value)  # uneven sums: an order change would show


AXES = PhaseAxes(time=_time, rows_top=40, row_round=1, floor=lambda r: 0, top=lambda r, p: 60, need=lambda r, p: 1,
                 spill=True, zero=False)  # fmt: skip


@st.composite
def plans(draw: st.DrawFn) -> tuple[list[int], list[tuple[int, ...]]]:
    rows = sorted(draw(st.sets(st.integers(1, 40), min_size=1, max_size=6)))
    values = [tuple(sorted(draw(st.sets(st.integers(0, 60), min_size=1, max_size=5)))) for _ in rows]
    return rows, values


@settings(max_examples=50, deadline=None, derandomize=True)
@given(asked=shapes, plan_list=st.lists(plans(), min_size=1, max_size=6))
def test_a_phase_priced_row_by_row_is_the_whole_lookup_bit_for_bit(
    asked: list[tuple[int, int, int]], plan_list: list[tuple[list[int], list[tuple[int, ...]]]]
) -> None:  # fmt: skip
    first = np.array([a for a, _, _ in asked], dtype=np.int64)
    second = np.array([c for _, _, c in asked], dtype=np.int64)
    weight = np.array([1.0 + b / 7 for _, b, _ in asked])
    pricer = _Pricer(AXES, first, second, weight)
    for rows, values in plan_list * 2:  # the second pass reads the kept slices
        assert pricer.seconds(rows, values) == _seconds(AXES, rows, values, first, second, weight)


curve_costs = st.lists(st.one_of(st.floats(0, 100), st.just(float("inf"))), min_size=1, max_size=6)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(
    costs=st.lists(curve_costs, min_size=1, max_size=5), budgets=st.lists(st.integers(0, 35), min_size=1, max_size=6)
)
def test_an_allocation_worked_out_as_budgets_are_asked_is_the_full_one(
    costs: list[list[float]], budgets: list[int]
) -> None:
    curves = [_Curve(c, [(i,) * (m + 1) for m in range(len(c))]) for i, c in enumerate(costs)]
    full = _Allocation(curves)
    full_best = full.best  # every total at once
    grown = _Allocation(curves)
    for budget in budgets:
        assert grown.counts(budget) == full.counts(budget)
    finite = np.flatnonzero(np.isfinite(full_best))
    assert full.least == (int(finite[0]) if len(finite) else None)


@settings(max_examples=50, deadline=None, derandomize=True)
@given(table=buckets, added=buckets, asked=shapes)
def test_buckets_added_move_each_shape_to_the_bucket_a_fresh_lookup_finds(
    table: list[tuple[int, int, int]], added: list[tuple[int, int, int]], asked: list[tuple[int, int, int]]
) -> None:
    """moved(): the shapes' buckets once buckets join a table, without a new lookup, are the scan's over both."""
    lookup = LookupTable(table)
    b, q, c = (np.array(x, dtype=np.int64) for x in zip(*asked, strict=True))
    found = lookup.found(lookup.index(b, q, c))
    assert found is not None

    def price(x: int, y: int, z: int) -> float:
        return float(x * 10_000 + y * 100 + z)

    seconds = np.array([price(*hit) if (hit := scan(table, *s)) else -1.0 for s in asked])
    got = moved(found, seconds, b, q, c, added, price)
    assert got is not None
    fresh = [scan(table + added, *s) for s in asked]
    assert got[1].tolist() == [price(*hit) if hit else -1.0 for hit in fresh]
    assert (got[0] == NOT_FOUND).tolist() == [hit is None for hit in fresh]


ints = st.lists(st.integers(-3, 1 << 40), min_size=0, max_size=60)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(values=ints, small_range=st.booleans())
def test_unique_ints_is_numpys_unique_with_its_inverse(values: list[int], small_range: bool) -> None:
    a = np.array([v % 50 if small_range else v for v in values], dtype=np.int64)
    distinct, inverse = unique_ints(a)
    want, want_inverse = np.unique(a, return_inverse=True)
    assert np.array_equal(distinct, want)
    assert np.array_equal(inverse, want_inverse.reshape(-1))
    assert inverse.dtype == want_inverse.dtype


@settings(max_examples=100, deadline=None, derandomize=True)
@given(pairs=st.lists(st.tuples(st.integers(-2, 1 << 33), st.integers(0, 1 << 30)), min_size=0, max_size=60),
       small_range=st.booleans())  # fmt: skip
def test_unique_pairs_are_the_sorted_distinct_pairs_with_their_inverse(pairs: list[tuple[int, int]],
                                                                       small_range: bool) -> None:  # fmt: skip
    cut = [(f % 40, s % 30) if small_range else (f, s) for f, s in pairs]
    first = np.array([f for f, _ in cut], dtype=np.int64)
    second = np.array([s for _, s in cut], dtype=np.int64)
    firsts, seconds, inverse = unique_pairs(first, second)
    distinct = sorted(set(cut))
    assert list(zip(firsts.tolist(), seconds.tolist(), strict=True)) == distinct
    assert [distinct[i] for i in inverse.tolist()] == cut

"""Which text graphs are kept when not all fit: the maximal shapes first, so every shape still has a bucket."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.plan.text_cost import TextBucket
from vllm_hpu_mm.plan.text_graphs import _kept


def bucket(batch: int, size: int, cost: int) -> TextBucket:
    return TextBucket(batch, size, cost)


GRID = (bucket(1, 128, 10), bucket(2, 128, 20), bucket(1, 256, 20), bucket(2, 256, 40))


def test_everything_is_kept_when_everything_fits() -> None:
    assert _kept(GRID, 90, shared=False) == GRID


def test_the_covering_shape_is_kept_first_then_the_cheapest_that_still_fit() -> None:
    # (2, 256) covers every other shape: keeping it means no shape compiles, only pads further.
    assert _kept(GRID, 60, shared=False) == (bucket(1, 128, 10), bucket(2, 256, 40))


def test_when_the_covering_shapes_do_not_fit_the_cheapest_are_kept() -> None:
    assert _kept(GRID, 35, shared=False) == (bucket(1, 128, 10), bucket(2, 128, 20))


def test_a_shared_pool_keeps_every_graph_no_larger_than_the_pool() -> None:
    assert _kept(GRID, 20, shared=True) == GRID[:3]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(1, 8), st.integers(0, 5)), min_size=1, max_size=40))
def test_maximal_shapes_are_those_no_other_bucket_covers(shapes: list[tuple[int, int, int]]) -> None:
    from vllm_hpu_mm.plan.text_cost import TextBucket
    from vllm_hpu_mm.plan.text_graphs import _maximal_shapes

    buckets = tuple(TextBucket(b, s, 1, c) for b, s, c in shapes)
    brute = {
        (x.batch, x.size, x.context)
        for x in buckets
        if not any(o != x and o.batch >= x.batch and o.size >= x.size and o.context >= x.context for o in buckets)
    }
    assert _maximal_shapes(buckets) == brute

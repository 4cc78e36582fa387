"""Sizes far beyond any image align in bounded time: tiles come off a side in one step, not one by one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.preprocess.align import _trim, aligned_size
from vllm_hpu_mm.values import AlignMode


def trim_one_by_one(h: int, w: int, height: int, width: int, budget: int, factor: int) -> tuple[int, int]:
    while h * w > budget and (h > factor or w > factor):
        if (h * width >= w * height and h > factor) or w == factor:
            h -= factor
        else:
            w -= factor
    return h, w


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 60), st.integers(1, 60), st.integers(1, 6000), st.integers(1, 6000), st.integers(1, 3600))
def test_trimming_in_steps_equals_trimming_tile_by_tile(ht: int, wt: int, height: int, width: int, tiles: int) -> None:
    f = 112
    assert _trim(ht * f, wt * f, height, width, tiles * f * f, f) == trim_one_by_one(ht * f, wt * f, height, width,
                                                                                     tiles * f * f, f)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.integers(10**6, 10**30), st.integers(1, 5000), st.sampled_from(list(AlignMode)))
def test_a_side_of_any_length_aligns_under_the_cap(long: int, short: int, mode: AlignMode) -> None:
    for height, width in ((short, long), (long, short)):
        h, w = aligned_size(height, width, mode=mode)
        assert h % 112 == 0
        assert w % 112 == 0
        assert h * w <= 12845056

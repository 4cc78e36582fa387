"""The 112-pixel alignment rule (vllm_hpu_mm.preprocess.align): exact cases and hypothesis properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.preprocess import ALIGN_FACTOR, QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, AlignMode, aligned_size
from vllm_hpu_mm.preprocess.align import image_tokens, native_size, patch_count

F = ALIGN_FACTOR
TILE = F * F
EXAMPLES = settings(max_examples=200, deadline=None)

sides = st.integers(min_value=1, max_value=20_000)
modes = st.sampled_from(list(AlignMode))


@st.composite
def limits(draw: st.DrawFn) -> tuple[int, int]:
    """(min_pixels, max_pixels), feasible or not, from tiny to uncapped."""
    max_pixels = draw(st.one_of(st.integers(TILE, 64 * TILE), st.integers(TILE, QWEN_MAX_PIXELS), st.just(1 << 62)))
    min_pixels = draw(st.one_of(st.integers(0, TILE), st.integers(0, max_pixels)))
    return min_pixels, max_pixels


def feasible(min_pixels: int, max_pixels: int) -> bool:
    return max(1, math.ceil(min_pixels / TILE)) <= max_pixels // TILE


@pytest.mark.parametrize(
    ("width", "height", "aligned", "tokens"),
    [
        (640, 427, (672, 448), 384),  # facts file: COCO-size photo, stock rule gives 345 tokens
        (500, 333, (448, 336), 192),  # facts file: stock rule gives 216 tokens
        (512, 512, (560, 560), 400),
        (1, 1, (112, 112), 16),
    ],
)
def test_known_sizes(width: int, height: int, aligned: tuple[int, int], tokens: int) -> None:
    h, w = aligned_size(height, width)
    assert (w, h) == aligned
    assert image_tokens(h, w) == tokens
    assert patch_count(h, w) == 4 * tokens


@EXAMPLES
@given(height=sides, width=sides, lim=limits(), mode=modes)
def test_multiple_of_112_and_inside_limits(height: int, width: int, lim: tuple[int, int], mode: AlignMode) -> None:
    min_pixels, max_pixels = lim
    if not feasible(min_pixels, max_pixels):
        with pytest.raises(ConfigError, match="no 112-aligned size"):
            aligned_size(height, width, min_pixels=min_pixels, max_pixels=max_pixels, mode=mode)
        return
    h, w = aligned_size(height, width, min_pixels=min_pixels, max_pixels=max_pixels, mode=mode)
    assert h % F == 0
    assert w % F == 0
    assert h >= F
    assert w >= F
    assert min_pixels <= h * w <= max_pixels
    assert patch_count(h, w) % 64 == 0


@EXAMPLES
@given(
    height=st.integers(2 * F, 20_000),
    width=st.integers(2 * F, 20_000),
    max_tiles=st.integers(16, QWEN_MAX_PIXELS // TILE),
    min_fraction=st.floats(0.0, 0.25),
)
def test_nearest_aspect_error_is_bounded(height: int, width: int, max_tiles: int, min_fraction: float) -> None:
    """Each side is within one factor of the image scaled by ONE common factor s, where s is 1 (rounding, then
    within half a factor), the scale down to max_pixels, or the scale up to min_pixels. So the aspect ratio h/w is
    within [(sH - 112) / (sW + 112), (sH + 112) / (sW - 112)] of the image's H/W: e.g. within 1/3 of a tile per
    side for a side of at least 336 px after scaling."""
    max_pixels = max_tiles * TILE
    min_pixels = int(min_fraction * max_pixels)
    area = height * width
    assume(min(height, width) * min(1.0, math.sqrt(max_pixels / area)) >= 2 * F)
    h, w = aligned_size(height, width, min_pixels=min_pixels, max_pixels=max_pixels)
    fits = [(s, 1.0) for s in (math.sqrt(max_pixels / area), math.sqrt(min_pixels / area) if min_pixels else 0.0)]
    scales = [(1.0, 0.5), *fits]
    assert any(abs(h - s * height) <= tol * F and abs(w - s * width) <= tol * F for s, tol in scales), (h, w)


@EXAMPLES
@given(height=sides, width=sides, lim=limits())
def test_nearest_equals_transformers_smart_resize(height: int, width: int, lim: tuple[int, int]) -> None:
    """Where transformers' rule is defined (aspect <= 200, no side rounding to 0) and keeps its own limits."""
    min_pixels, max_pixels = lim
    assume(feasible(min_pixels, max_pixels))
    assume(max(height, width) / min(height, width) <= 200)
    assume(round(height / F) >= 1 and round(width / F) >= 1)
    expected = smart_resize(height, width, factor=F, min_pixels=min_pixels, max_pixels=max_pixels)
    assume(min_pixels <= expected[0] * expected[1] <= max_pixels)
    got = aligned_size(height, width, min_pixels=min_pixels, max_pixels=max_pixels)
    if got != expected:
        # Only where transformers' float scaling misses an exact multiple that integer arithmetic finds.
        assert float_misrounds(height, width, min_pixels, max_pixels), (got, expected)
        assert min_pixels <= got[0] * got[1] <= max_pixels


def float_misrounds(height: int, width: int, min_pixels: int, max_pixels: int) -> bool:
    """Does smart_resize's float ``floor(side / beta / f)`` or ``ceil(side * beta / f)`` differ from exact?"""
    down, up = math.sqrt(height * width / max_pixels), math.sqrt(min_pixels / (height * width))
    for side, other in ((height, width), (width, height)):
        if math.floor(side / down / F) != math.isqrt(max_pixels * side // (other * TILE)):
            return True
        exact_up = math.isqrt(-(-min_pixels * side // (other * TILE)) - 1) + 1 if min_pixels else 0
        if math.ceil(side * up / F) != exact_up:
            return True
    return False


@EXAMPLES
@given(
    height=st.integers(15, 20_000),
    width=st.integers(15, 20_000),
    min_pixels=st.integers(0, TILE),
    max_pixels=st.one_of(st.integers(TILE, QWEN_MAX_PIXELS), st.just(1 << 62)),
)
def test_down_never_bills_more_than_the_stock_rule(height: int, width: int, min_pixels: int, max_pixels: int) -> None:
    """min_pixels <= one tile, so it never forces DOWN to grow; sides >= 15 px so the stock rule is defined.
    One 112 x 112 tile (16 tokens) is the least any aligned image bills, so tinier images are held to that."""
    assume(max(height, width) / min(height, width) <= 200)
    h, w = aligned_size(height, width, min_pixels=min_pixels, max_pixels=max_pixels, mode=AlignMode.DOWN)
    stock_h, stock_w = smart_resize(height, width, factor=28, min_pixels=min_pixels, max_pixels=max_pixels)
    assert image_tokens(h, w) <= max(image_tokens(F, F), image_tokens(stock_h, stock_w))


@EXAMPLES
@given(height=sides, width=sides, lim=limits())
@example(height=225, width=225, lim=(12794881, 12819968))  # only 7 x 146 or 14 x 73 tiles fit: far from the ideal
def test_pad_canvas_holds_the_image_when_it_fits(height: int, width: int, lim: tuple[int, int]) -> None:
    min_pixels, max_pixels = lim
    assume(feasible(min_pixels, max_pixels))
    canvas = math.ceil(height / F) * F * math.ceil(width / F) * F
    assume(canvas <= max_pixels)
    h, w = aligned_size(height, width, min_pixels=min_pixels, max_pixels=max_pixels, mode=AlignMode.PAD)
    if canvas >= min_pixels:
        assert h * w == canvas  # the smallest canvas: each side rounded up, nothing more
    ht, wt = math.ceil(height / F), math.ceil(width / F)
    lo, hi = max(1, math.ceil(min_pixels / TILE)), max_pixels // TILE
    if any(max(wt, math.ceil(lo / k)) <= hi // k for k in range(ht, min(hi, ht + 500) + 1)):
        assert h >= height
        assert w >= width


@pytest.mark.parametrize(
    ("height", "width", "mode", "expected"),
    [
        (1, 1, AlignMode.NEAREST, (112, 112)),
        (1, 200, AlignMode.NEAREST, (112, 224)),  # too thin to keep its aspect: one tile high
        (60, 2000, AlignMode.NEAREST, (112, 2016)),
        (60, 2000, AlignMode.DOWN, (112, 896)),  # gives back length: stock bills 56x1988 = 142 tokens
        (427, 640, AlignMode.DOWN, (336, 560)),
        (427, 640, AlignMode.PAD, (448, 672)),
        (333, 500, AlignMode.PAD, (336, 560)),
        (7016, 4961, AlignMode.NEAREST, (4256, 2912)),  # SROIE scan, capped at Qwen max_pixels (as smart_resize)
    ],
)
def test_edge_cases(height: int, width: int, mode: AlignMode, expected: tuple[int, int]) -> None:
    assert aligned_size(height, width, mode=mode) == expected


def test_narrow_range_still_lands_inside() -> None:
    """Exactly three tiles allowed: rounding alone would step over the range, the fallback finds 112 x 336."""
    assert aligned_size(427, 640, min_pixels=3 * TILE, max_pixels=3 * TILE) == (112, 336)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_pixels": 20_000, "max_pixels": 24_000}, "no 112-aligned size"),
        ({"min_pixels": -1}, "min_pixels=-1"),
        ({"max_pixels": TILE - 1}, "below one 112x112 tile"),
        ({"min_pixels": 2 * TILE, "max_pixels": TILE}, "above max_pixels"),
        ({"factor": 100}, "multiple of 28"),
    ],
)
def test_bad_limits_are_config_errors(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        aligned_size(100, 100, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("height", "width"), [(0, 10), (10, 0), (-1, 5)])
def test_non_positive_sizes_are_rejected(height: int, width: int) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        aligned_size(height, width)


def test_defaults_are_qwen_processor_defaults() -> None:
    assert (QWEN_MIN_PIXELS, QWEN_MAX_PIXELS) == (56 * 56, 28 * 28 * 16384)


@EXAMPLES
@given(height=st.integers(1, 3000), width=st.integers(1, 3000), max_tiles=st.integers(1, 64))
def test_pad_over_the_cap_holds_the_image_at_the_largest_scale(height: int, width: int, max_tiles: int) -> None:
    """Brute force over every canvas under the cap: none holds the image (aspect kept) at a larger scale."""
    assume(math.ceil(height / F) * math.ceil(width / F) > max_tiles)
    h, w = aligned_size(height, width, min_pixels=0, max_pixels=max_tiles * TILE, mode=AlignMode.PAD)
    assert h * w <= max_tiles * TILE
    scale = min(h / height, w / width)
    best = max(min(ht * F / height, (max_tiles // ht) * F / width) for ht in range(1, max_tiles + 1))
    assert scale == pytest.approx(best)


@pytest.mark.parametrize("size", [(333, 500), (480, 640), (2000, 30), (4000, 6000), (20, 20)])
def test_a_familys_own_grid_follows_the_qwen_processors_resize(size: tuple[int, int]) -> None:
    # native_size is aligned_size's nearest rule on another tower's grid (Qwen3-VL: 32 px per token side)
    h, w = size
    assert native_size(h, w, factor=28) == aligned_size(h, w, factor=28, mode=AlignMode.NEAREST)
    assert native_size(h, w, factor=32) == smart_resize(h, w, factor=32, min_pixels=QWEN_MIN_PIXELS,
                                                        max_pixels=QWEN_MAX_PIXELS)  # fmt: skip

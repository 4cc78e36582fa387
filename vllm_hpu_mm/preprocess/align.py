"""The 112-pixel alignment rule: pure integer arithmetic on sizes, no image decoding.

A Qwen2.5-VL image of H x W pixels (both multiples of 28) becomes (H/14)*(W/14) patches and (H/28)*(W/28) tokens.
When H and W are multiples of 112 (8 patches, the vision tower's attention window) every window is a full 8 x 8
block and the patch count is a multiple of 64, which is what makes bucket padding exact (see ``buckets.spec``).

Guarantees of :func:`aligned_size` (pinned down by ``tests/test_align*.py``):

- both sides are multiples of ``factor`` and at least one ``factor``;
- the area lies in ``[min_pixels, max_pixels]``; limits that admit no aligned area raise :class:`ConfigError`;
- away from the limits' corner cases, each side is within one ``factor`` of the image scaled by one common factor
  ``s`` (1, or the scale that reaches ``max_pixels`` or ``min_pixels``), which bounds the aspect-ratio error.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.values import AlignMode

ALIGN_FACTOR = 112
PATCH_SIZE = 14
MERGE_SIZE = 2
#: The stock Qwen2-VL / Qwen2.5-VL resize factor (patch 14 x merge 2).
STOCK_FACTOR = PATCH_SIZE * MERGE_SIZE
#: Qwen2.5-VL's processor defaults (preprocessor_config.json of the public checkpoints).
QWEN_MIN_PIXELS = 3136
QWEN_MAX_PIXELS = 12845056


def patch_count(height: int, width: int, patch_size: int = PATCH_SIZE) -> int:
    """Vision patches of an image already at a patch-aligned size."""
    return (height // patch_size) * (width // patch_size)


def image_tokens(height: int, width: int) -> int:
    """LLM tokens billed for an image already at a 28-aligned size: ``(H/28) * (W/28)``."""
    unit = PATCH_SIZE * MERGE_SIZE
    return (height // unit) * (width // unit)


def _check_limits(min_pixels: int, max_pixels: int, factor: int, *, grid: int = STOCK_FACTOR) -> None:
    """``factor`` a positive multiple of ``grid`` (the Qwen2.5-VL tower's 28 px unless a family's own is given) and
    limits that hold at least one ``factor``-aligned size."""
    if factor <= 0 or factor % grid:
        raise ConfigError(f"alignment factor {factor} must be a positive multiple of {grid}")
    if min_pixels < 0:
        raise ConfigError(f"min_pixels={min_pixels} must be >= 0")
    tile = factor * factor
    if max_pixels < tile:
        raise ConfigError(
            f"max_pixels={max_pixels} is below one {factor}x{factor} tile ({tile} pixels); "
            f"accepted: max_pixels >= {tile}"
        )
    if min_pixels > max_pixels:
        raise ConfigError(f"min_pixels={min_pixels} is above max_pixels={max_pixels}; accepted: min <= max")
    # Every aligned area is a whole number of tiles, so the range must hold one.
    if max(1, -(-min_pixels // tile)) > max_pixels // tile:
        raise ConfigError(
            f"no {factor}-aligned size has between min_pixels={min_pixels} and max_pixels={max_pixels} pixels; "
            f"accepted: a range that contains a multiple of {tile}"
        )


def _fit_below(height: int, width: int, max_pixels: int, factor: int) -> tuple[int, int]:
    """Largest factor-multiple size at the image's aspect ratio whose area is at most ``max_pixels``.

    Each side is ``floor(side * sqrt(max_pixels / area) / factor)`` tiles, computed exactly with integer square
    roots (floating point misses exact multiples: 1319 x 1319 under 448² pixels would get 336 x 336).
    """
    tile = factor * factor
    h = max(factor, math.isqrt(max_pixels * height // (width * tile)) * factor)
    w = max(factor, math.isqrt(max_pixels * width // (height * tile)) * factor)
    return _trim(h, w, height, width, max_pixels, factor)


def _pad_canvas_under_cap(height: int, width: int, max_pixels: int, factor: int) -> tuple[int, int]:
    """The canvas under ``max_pixels`` that holds the image at the largest scale (aspect kept exactly, then padded).

    Flooring each side separately (the ``NEAREST`` cap) can waste most of a small canvas on padding; here every
    canvas height up to the image's own is tried (at most ``height / factor`` steps), ties going to fewer tiles.
    """
    hi = max_pixels // (factor * factor)
    best = (0.0, 0, 0, 0)  # (scale, -tiles, h tiles, w tiles)
    for ht in range(1, min(hi, -(-height // factor)) + 1):
        wt = min(hi // ht, -(-width // factor))
        scale = min(ht * factor / height, wt * factor / width)
        best = max(best, (scale, -ht * wt, ht, wt))
    return best[2] * factor, best[3] * factor


def _ceil_sqrt(numerator: int, denominator: int) -> int:
    """``ceil(sqrt(numerator / denominator))`` for non-negative integers, exactly."""
    ceiling = -(-numerator // denominator)
    return 0 if ceiling == 0 else math.isqrt(ceiling - 1) + 1


def _fit_above(height: int, width: int, min_pixels: int, factor: int) -> tuple[int, int]:
    """Smallest factor-multiple size at the image's aspect ratio whose area is at least ``min_pixels``."""
    tile = factor * factor
    return (
        max(factor, _ceil_sqrt(min_pixels * height, width * tile) * factor),
        max(factor, _ceil_sqrt(min_pixels * width, height * tile) * factor),
    )


def _trim(h: int, w: int, height: int, width: int, budget: int, factor: int) -> tuple[int, int]:
    """Take tiles off until ``h * w <= budget``, always from the side stretched most relative to the image.

    Needed where a side was clamped up to one tile (a very thin image): the area then overshoots, and the long side
    pays for it. Stops at a single tile. The tiles one side loses in a row are taken at once (as many as keep it the
    most stretched and still over budget, plus one), so the work does not grow with the image's size.
    """
    while h * w > budget and (h > factor or w > factor):
        # h / height >= w / width, exactly in integers
        take_h = (h * width >= w * height and h > factor) or w == factor
        side, other, own, opposite = (h, w, height, width) if take_h else (w, h, width, height)
        over = -(-(side * other - budget) // (factor * other))  # tiles until the area fits
        floor = (side - factor) // factor  # tiles until one is left
        if other > factor:  # tiles while this side stays the most stretched (ties go to the height)
            lead = side * opposite - other * own
            stretched = lead // (factor * opposite) + 1 if take_h else -(-lead // (factor * opposite))
            steps = max(1, min(over, floor, stretched))
        else:
            steps = max(1, min(over, floor))
        side -= steps * factor
        h, w = (side, other) if take_h else (other, side)
    return h, w


def _stock_area(height: int, width: int, min_pixels: int, max_pixels: int) -> int:
    """Area that Qwen's stock factor-28 rule (``smart_resize``) gives, the bill that ``DOWN`` never exceeds."""
    f = STOCK_FACTOR
    h, w = round(height / f) * f, round(width / f) * f
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(f, math.floor(height / beta / f) * f)
        w = max(f, math.floor(width / beta / f) * f)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = math.ceil(height * beta / f) * f, math.ceil(width * beta / f) * f
    return h * w


def stock_patches(height: int, width: int, *, min_pixels: int, max_pixels: int) -> int:
    """Patches Qwen2.5-VL's own processor (factor 28) gives an image of ``height`` x ``width``: what ``DOWN`` is
    measured against."""
    return _stock_area(height, width, min_pixels, max_pixels) // (PATCH_SIZE * PATCH_SIZE)


def _settle(
    h: int,
    w: int,
    height: int,
    width: int,
    min_pixels: int,
    max_pixels: int,
    factor: int,
    at_least: tuple[int, int] = (1, 1),
) -> tuple[int, int]:
    """Return ``(h, w)`` if its area is within the limits, else the in-range size closest to the image's aspect.

    Only narrow ranges (``min_pixels`` close to ``max_pixels``) get here: rounding a scaled side by up to one tile
    can then step over the range. ``at_least`` (tiles per side) is honoured when some in-range size allows it
    (``PAD`` keeps its canvas). Candidates are the few heights around the ideal one for each end of the range,
    plus the smallest allowed, so this is O(1) even for an uncapped ``max_pixels``.
    """
    if min_pixels <= h * w <= max_pixels:
        return h, w
    tile = factor * factor
    lo, hi = max(1, -(-min_pixels // tile)), max_pixels // tile  # area range in tiles; _check_limits: lo <= hi
    ratio = height / width
    for min_ht, min_wt in (at_least, (1, 1)):
        candidates = {min_ht, min_ht + 1}
        for n in (lo, hi):
            for ideal in (math.sqrt(n * ratio), n / min_wt):
                candidates.update(range(math.floor(ideal) - 1, math.ceil(ideal) + 2))
        best = _closest(sorted(k for k in candidates if k >= min_ht), lo, hi, ratio, min_wt)
        if best is None:
            # No candidate near the ideal (e.g. only 7 x 146 tiles fit the range): every in-range size has a side
            # of at most sqrt(hi) tiles, so trying each such side, as height and as width, finds them all.
            best = _closest(range(min_ht, math.isqrt(hi) + 1), lo, hi, ratio, min_wt)
            by_width = _closest(range(min_wt, math.isqrt(hi) + 1), lo, hi, 1 / ratio, min_ht)
            if by_width is not None and (best is None or by_width[0] < best[0]):
                best = (by_width[0], by_width[2], by_width[1])
        if best is not None:
            return best[1] * factor, best[2] * factor
    raise AssertionError("unreachable: one tile high always admits lo tiles wide")


def _closest(heights: Iterable[int], lo: int, hi: int, ratio: float, min_wt: int) -> tuple[float, int, int] | None:
    """(aspect error, h tiles, w tiles) of the size with area in ``[lo, hi]`` tiles, height among ``heights`` and
    width at least ``min_wt``, closest to ``ratio`` (height / width); None if there is none."""
    best: tuple[float, int, int] | None = None
    for ht in heights:
        wt_lo, wt_hi = max(min_wt, -(-lo // ht)), hi // ht
        if wt_lo > wt_hi:
            continue
        wt = min(max(round(ht / ratio), wt_lo), wt_hi)
        error = abs(math.log(ht / wt / ratio))
        if best is None or error < best[0]:
            best = (error, ht, wt)
    return best


def aligned_size(
    height: int,
    width: int,
    *,
    min_pixels: int = QWEN_MIN_PIXELS,
    max_pixels: int = QWEN_MAX_PIXELS,
    mode: AlignMode = AlignMode.NEAREST,
    factor: int = ALIGN_FACTOR,
) -> tuple[int, int]:
    """Target ``(height, width)``, both multiples of ``factor``, for an image of ``height`` x ``width`` pixels.

    - ``NEAREST``: Qwen's ``smart_resize`` rule with ``factor`` (default 112): round each side to the nearest
      multiple, then scale down to fit ``max_pixels`` or up to reach ``min_pixels``, aspect ratio kept. Equal to
      transformers' ``smart_resize(height, width, factor, min_pixels, max_pixels)`` wherever that one is defined
      (each side rounds to at least one ``factor``) and keeps its own limits, except that we scale with exact
      integer arithmetic where its floating point misses an exact multiple; unlike it, a side never rounds to 0.
    - ``DOWN``: floor each side to a multiple instead of rounding, so the image never grows, and never bills more
      tokens than the stock factor-28 rule with the same limits (a very thin image gives back length for the
      width it gains), unless ``min_pixels`` forces it up or the image is under one tile (16 tokens, the least).
    - ``PAD``: the canvas size: each side rounded *up*, so the whole image fits without resampling (grown further,
      still without resampling, if below ``min_pixels``); a canvas above ``max_pixels`` becomes the canvas under
      the cap that holds the image, scaled down with its exact aspect ratio, at the largest scale.

    ``max_pixels`` is a hard cap. Limits that admit no aligned size raise :class:`ConfigError`. Dimensions are
    validated by the caller (``image.check_dimensions``); here they must be positive.
    """
    if height <= 0 or width <= 0:
        raise ValueError(f"image size {width}x{height} must be positive")
    _check_limits(min_pixels, max_pixels, factor)
    if mode is AlignMode.PAD:
        h, w = math.ceil(height / factor) * factor, math.ceil(width / factor) * factor
        if h * w > max_pixels:
            h, w = _pad_canvas_under_cap(height, width, max_pixels, factor)
        elif h * w < min_pixels:
            grown_h, grown_w = _fit_above(height, width, min_pixels, factor)
            canvas = (h // factor, w // factor)
            h, w = max(h, grown_h), max(w, grown_w)
            return _settle(h, w, height, width, min_pixels, max_pixels, factor, at_least=canvas)
        return _settle(h, w, height, width, min_pixels, max_pixels, factor)
    if mode is AlignMode.DOWN:
        h = max(factor, math.floor(height / factor) * factor)
        w = max(factor, math.floor(width / factor) * factor)
        if h * w > max_pixels:
            h, w = _fit_below(height, width, max_pixels, factor)
        h, w = _trim(h, w, height, width, _stock_area(height, width, min_pixels, max_pixels), factor)
    else:
        return _nearest(height, width, min_pixels, max_pixels, factor)
    if h * w < min_pixels:
        h, w = _fit_above(height, width, min_pixels, factor)
    return _settle(h, w, height, width, min_pixels, max_pixels, factor)


def _nearest(height: int, width: int, min_pixels: int, max_pixels: int, factor: int) -> tuple[int, int]:
    """Qwen's ``smart_resize`` rule (see :func:`aligned_size`, ``NEAREST``), exact, for validated limits."""
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        h, w = _fit_below(height, width, max_pixels, factor)
    if h * w < min_pixels:
        h, w = _fit_above(height, width, min_pixels, factor)
    return _settle(h, w, height, width, min_pixels, max_pixels, factor)


def native_size(height: int, width: int, *, factor: int, min_pixels: int = QWEN_MIN_PIXELS,
                max_pixels: int = QWEN_MAX_PIXELS) -> tuple[int, int]:  # fmt: skip
    """``(height, width)`` as a Qwen-VL family's own processor resizes an image for a tower of ``factor`` pixels per
    token side (patch x merge: Qwen2-VL 28, Qwen3-VL 32): :func:`aligned_size`'s ``NEAREST`` rule on that grid."""
    if height <= 0 or width <= 0:
        raise ValueError(f"image size {width}x{height} must be positive")
    _check_limits(min_pixels, max_pixels, factor, grid=1)
    return _nearest(height, width, min_pixels, max_pixels, factor)

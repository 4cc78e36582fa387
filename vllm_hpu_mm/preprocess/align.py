"""The 112-pixel alignment rule: pure integer arithmetic on sizes, no image decoding.

A Qwen2.5-VL image of H x W pixels (both multiples of 28) becomes (H/14)*(W/14) patches and (H/28)*(W/28) tokens.
When H and W are multiples of 112 (8 patches, the vision tower's attention window) every window is a full 8 x 8
block and the patch count is a multiple of 64, which is what makes bucket padding exact (see ``buckets.spec``).
"""

from __future__ import annotations

import math

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.preprocess.modes import AlignMode

ALIGN_FACTOR = 112
PATCH_SIZE = 14
MERGE_SIZE = 2
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


def _check_limits(min_pixels: int, max_pixels: int, factor: int) -> None:
    if factor <= 0 or factor % (PATCH_SIZE * MERGE_SIZE):
        raise ConfigError(f"alignment factor {factor} must be a positive multiple of {PATCH_SIZE * MERGE_SIZE}")
    if min_pixels < 0:
        raise ConfigError(f"min_pixels={min_pixels} must be >= 0")
    if max_pixels < factor * factor:
        raise ConfigError(
            f"max_pixels={max_pixels} is below one {factor}x{factor} tile ({factor * factor} pixels); "
            f"accepted: max_pixels >= {factor * factor}"
        )
    if min_pixels > max_pixels:
        raise ConfigError(f"min_pixels={min_pixels} is above max_pixels={max_pixels}; accepted: min <= max")


def _fit_below(height: float, width: float, max_pixels: int, factor: int) -> tuple[int, int]:
    """Largest factor-multiple size at the image's aspect ratio whose area is at most ``max_pixels``."""
    beta = math.sqrt(height * width / max_pixels)
    h = max(factor, math.floor(height / beta / factor) * factor)
    w = max(factor, math.floor(width / beta / factor) * factor)
    # A side clamped up to one tile can push the area over the cap; take it back from the other side.
    while h * w > max_pixels:
        if h >= w and h > factor:
            h -= factor
        elif w > factor:
            w -= factor
        else:
            break
    return h, w


def _fit_above(height: float, width: float, min_pixels: int, factor: int) -> tuple[int, int]:
    """Smallest factor-multiple size at the image's aspect ratio whose area is at least ``min_pixels``."""
    beta = math.sqrt(min_pixels / (height * width))
    return math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor


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
      multiple, then scale down to fit ``max_pixels`` or up to reach ``min_pixels``, aspect ratio kept.
    - ``DOWN``: floor each side to a multiple instead of rounding, so the image never grows (and never bills more
      tokens than the stock factor-28 rule), unless ``min_pixels`` forces it up.
    - ``PAD``: the canvas size: each side rounded *up*, so the whole image fits without resampling; if that canvas
      exceeds ``max_pixels`` the image must be scaled down first, and this returns the ``NEAREST`` size under the cap.

    Dimensions are validated by the caller (``image.check_dimensions``); here they must be positive.
    """
    if height <= 0 or width <= 0:
        raise ValueError(f"image size {width}x{height} must be positive")
    _check_limits(min_pixels, max_pixels, factor)
    if mode is AlignMode.PAD:
        h, w = math.ceil(height / factor) * factor, math.ceil(width / factor) * factor
        if h * w <= max_pixels:
            return h, w
        return _fit_below(height, width, max_pixels, factor)
    if mode is AlignMode.DOWN:
        h = max(factor, math.floor(height / factor) * factor)
        w = max(factor, math.floor(width / factor) * factor)
    else:
        h = max(factor, round(height / factor) * factor)
        w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        return _fit_below(height, width, max_pixels, factor)
    if h * w < min_pixels:
        return _fit_above(height, width, min_pixels, factor)
    return h, w

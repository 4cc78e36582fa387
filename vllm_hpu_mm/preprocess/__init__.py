"""Image preprocessing: safe loading, the 112-pixel alignment rule, and Qwen2-VL pixel values.

Importing this package is cheap: the alignment rule is pure arithmetic, and the image and pixel modules (Pillow and
NumPy; no torch or transformers) are imported when one of their names is first asked for, so that a plan, which
needs only the alignment rule, does not pay for Pillow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from vllm_hpu_mm.preprocess.align import (
    ALIGN_FACTOR,
    QWEN_MAX_PIXELS,
    QWEN_MIN_PIXELS,
    aligned_size,
    image_tokens,
    patch_count,
)
from vllm_hpu_mm.values import AlignMode

if TYPE_CHECKING:
    from vllm_hpu_mm.preprocess.image import AlignedImage, align_image, check_dimensions, load_image
    from vllm_hpu_mm.preprocess.pixels import QWEN_IMAGE_MEAN, QWEN_IMAGE_STD, to_patch_bytes, to_pixel_values

__all__ = [
    "ALIGN_FACTOR",
    "QWEN_IMAGE_MEAN",
    "QWEN_IMAGE_STD",
    "QWEN_MAX_PIXELS",
    "QWEN_MIN_PIXELS",
    "AlignMode",
    "AlignedImage",
    "align_image",
    "aligned_size",
    "check_dimensions",
    "image_tokens",
    "load_image",
    "patch_count",
    "to_patch_bytes",
    "to_pixel_values",
]

#: The names of the modules that need Pillow, by the module that defines them (imported on first use).
_LAZY = {
    "AlignedImage": "image",
    "align_image": "image",
    "check_dimensions": "image",
    "load_image": "image",
    "QWEN_IMAGE_MEAN": "pixels",
    "QWEN_IMAGE_STD": "pixels",
    "to_patch_bytes": "pixels",
    "to_pixel_values": "pixels",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)

"""Image preprocessing: safe loading, the 112-pixel alignment rule, and Qwen2-VL pixel values.

Importing this package is cheap (Pillow and NumPy only; no torch or transformers).
"""

from vllm_hpu_mm.preprocess.align import (
    ALIGN_FACTOR,
    QWEN_MAX_PIXELS,
    QWEN_MIN_PIXELS,
    aligned_size,
    image_tokens,
    patch_count,
)
from vllm_hpu_mm.preprocess.image import AlignedImage, align_image, check_dimensions, load_image
from vllm_hpu_mm.preprocess.pixels import QWEN_IMAGE_MEAN, QWEN_IMAGE_STD, to_patch_bytes, to_pixel_values
from vllm_hpu_mm.values import AlignMode

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

"""The served loader's size rule: which image sizes it refuses before decoding a pixel (an empty image, an aspect
ratio or a pixel count beyond the limits). Pure arithmetic, apart from :mod:`.image` (and Pillow), so that a plan
counting the images a server admits does not import the decoder."""

from __future__ import annotations

from typing import Literal

from vllm_hpu_mm.envs import get_settings  # cheap: envs imports only vllm_hpu_mm.values and errors

__all__ = ["Refusal", "dimension_problem", "size_limits"]

#: Why the server refuses an image by its size alone (before decoding it).
Refusal = Literal["empty", "aspect_ratio", "pixels"]


def size_limits(max_image_pixels: int | None, max_aspect_ratio: float | None) -> tuple[int, float]:
    """The limits given, each one not given read from ``VLLM_HPU_MM_MAX_IMAGE_PIXELS`` and
    ``VLLM_HPU_MM_MAX_ASPECT_RATIO`` (``vllm_hpu_mm.envs``)."""
    if max_image_pixels is None or max_aspect_ratio is None:
        settings = get_settings()
        max_image_pixels = settings.max_image_pixels if max_image_pixels is None else max_image_pixels
        max_aspect_ratio = settings.max_aspect_ratio if max_aspect_ratio is None else max_aspect_ratio
    return max_image_pixels, max_aspect_ratio


def dimension_problem(
    width: int, height: int, *, max_image_pixels: int | None = None, max_aspect_ratio: float | None = None
) -> Refusal | None:
    """Why the served loader refuses a ``width`` x ``height`` image, or None when it accepts it. Limits default to
    ``VLLM_HPU_MM_MAX_IMAGE_PIXELS`` and ``VLLM_HPU_MM_MAX_ASPECT_RATIO`` (``vllm_hpu_mm.envs``)."""
    max_image_pixels, max_aspect_ratio = size_limits(max_image_pixels, max_aspect_ratio)
    if width <= 0 or height <= 0:
        return "empty"
    if max(width, height) / min(width, height) > max_aspect_ratio:
        return "aspect_ratio"
    if width * height > max_image_pixels:
        return "pixels"
    return None

"""Aligned RGB image -> Qwen2-VL ``pixel_values``, laid out exactly as transformers' Qwen2-VL image processor does.

Layout (``Qwen2VLImageProcessor`` / ``Qwen2VLImageProcessorPil``): one row per 14 x 14 patch, rows ordered by
2 x 2 merge group (group row, group column, then the row and column inside the group); each row is
``channel x temporal x 14 x 14``, the single image frame repeated ``temporal_patch_size`` times.

:func:`to_patch_bytes` gives the same layout as uint8, neither rescaled nor normalised: what vLLM 0.32 asks the HF
processor for (it normalises on the device), and what the served processor uses (``vllm_hpu_mm.plugin.pixels``).

Why it is faster: the patch shuffle is done on the uint8 pixels (4x less memory traffic than on float32), and the
rescale + normalise is one table lookup per channel (256 entries, computed in float32 as ``(x / 255 - mean) / std``,
the PIL processor's arithmetic: its values come out bit-identical; the torchvision one differs by float32 rounding).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from PIL import Image

from vllm_hpu_mm.errors import ImageError

#: Qwen2-VL / Qwen2.5-VL normalisation (OpenAI CLIP), from the checkpoints' preprocessor_config.json.
QWEN_IMAGE_MEAN = (0.48145466, 0.4578275, 0.40821073)
QWEN_IMAGE_STD = (0.26862954, 0.26130258, 0.27577711)

Grid = tuple[int, int, int]


def _lookup_table(image_mean: Sequence[float], image_std: Sequence[float]) -> npt.NDArray[np.float32]:
    """``[3, 256]``: the normalised float32 value of each uint8 level, per channel."""
    if len(image_mean) != 3 or len(image_std) != 3 or not all(s > 0 for s in image_std):
        raise ValueError(f"image_mean={image_mean} / image_std={image_std}; accepted: 3 values each, std > 0")
    levels = np.arange(256, dtype=np.float32) / np.float32(255)
    mean = np.asarray(image_mean, dtype=np.float32)[:, None]
    std = np.asarray(image_std, dtype=np.float32)[:, None]
    return np.ascontiguousarray((levels[None, :] - mean) / std, dtype=np.float32)


def _patches(image: Image.Image, patch_size: int, merge_size: int) -> tuple[npt.NDArray[np.uint8], Grid]:
    """The uint8 pixels in patch order, ``[P, 3, patch * patch]``, and the ``(1, h, w)`` grid."""
    unit = patch_size * merge_size
    width, height = image.size
    if image.mode != "RGB" or width % unit or height % unit or not width or not height:
        raise ImageError(
            f"image {width}x{height} in mode {image.mode}; accepted: an RGB image whose sides are non-zero "
            f"multiples of {unit} (use align_image first)"
        )
    gh, gw = height // patch_size, width // patch_size
    pixels = np.asarray(image)
    # [H, W, C] -> [group row, group col, row in group, col in group, C, patch row, patch col]
    grouped = pixels.reshape(gh // merge_size, merge_size, patch_size, gw // merge_size, merge_size, patch_size, 3)
    shuffled = np.ascontiguousarray(grouped.transpose(0, 3, 1, 4, 6, 2, 5)).reshape(gh * gw, 3, patch_size**2)
    return shuffled, (1, gh, gw)


def to_patch_bytes(
    image: Image.Image, *, patch_size: int = 14, temporal_patch_size: int = 2, merge_size: int = 2
) -> tuple[npt.NDArray[np.uint8], Grid]:
    """``(pixels [P, 3 * temporal * patch * patch] uint8, grid)``: the same layout as :func:`to_pixel_values`,
    neither rescaled nor normalised (what vLLM asks the HF processor for when the model normalises on the device)."""
    shuffled, grid = _patches(image, patch_size, merge_size)
    out = np.repeat(shuffled[:, :, None, :], temporal_patch_size, axis=2)
    return out.reshape(shuffled.shape[0], -1), grid


def to_pixel_values(
    image: Image.Image,
    *,
    image_mean: Sequence[float],
    image_std: Sequence[float],
    patch_size: int = 14,
    temporal_patch_size: int = 2,
    merge_size: int = 2,
) -> tuple[npt.NDArray[np.float32], Grid]:
    """``(pixel_values [P, 3 * temporal * patch * patch] float32, (t, h, w) patch grid)`` of an aligned RGB image.

    ``image`` must be RGB with both sides multiples of ``patch_size * merge_size`` (what ``align_image`` gives).
    """
    lut = _lookup_table(image_mean, image_std)
    shuffled, (_, gh, gw) = _patches(image, patch_size, merge_size)
    out = np.empty((gh * gw, 3, temporal_patch_size, patch_size**2), dtype=np.float32)
    for channel in range(3):
        np.take(lut[channel], shuffled[:, channel], out=out[:, channel, 0])
    out[:, :, 1:] = out[:, :, :1]  # the still image repeated across the temporal patch
    return out.reshape(gh * gw, -1), (1, gh, gw)

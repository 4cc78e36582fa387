"""Our pixel path inside the served processor: aligned RGB images get their ``pixel_values`` from
:func:`vllm_hpu_mm.preprocess.pixels.to_pixel_values` instead of transformers' Qwen2-VL image processor.

The aligned processor (:mod:`.processor`) hands the HF processor RGB images already at 112-multiple sizes, so the HF
image processor only lays out patches (and rescales and normalises them when asked). vLLM 0.32 asks for uint8
patches and normalises on the device (``do_rescale=False, do_normalize=False``): our path then only shuffles the
uint8 pixels into patch order (:func:`~vllm_hpu_mm.preprocess.pixels.to_patch_bytes`), identical to transformers'
output. Asked to normalise, it uses one lookup table per channel (bit-identical to transformers' PIL processor,
within float32 rounding of the torchvision one). The serving gain is in
``benchmarks/performance/results/served_path_cpu.md``.

The HF image processor object keeps everything else: the class of the instance vLLM caches is swapped to a subclass
whose ``__call__`` takes our path only when it gives the same result, and hands anything else back to the original:
a resize that would change the size, non-RGB or non-PIL images, turned-off rescaling or normalisation, other
means, patch or merge sizes, or arguments we do not know.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["fast_pixels_processor", "pixel_values_if_exact"]

#: Call arguments that do not change the result for aligned RGB images (given their default or equal values).
_NEUTRAL = frozenset({"do_convert_rgb", "data_format", "input_data_format", "device", "disable_grouping", "resample"})
_MARK = "_hpu_mm_fast_pixels"


def _limits(processor: Any, kwargs: Mapping[str, Any]) -> tuple[int, int] | None:
    size = kwargs.get("size") or processor.size
    low = kwargs.get("min_pixels") or _edge(size, "shortest_edge")
    high = kwargs.get("max_pixels") or _edge(size, "longest_edge")
    return (int(low), int(high)) if low and high else None


def _edge(size: Any, key: str) -> Any:
    return size.get(key) if isinstance(size, Mapping) else getattr(size, key, None)


def pixel_values_if_exact(processor: Any, images: Any, kwargs: Mapping[str, Any]) -> Any | None:
    """``BatchFeature(pixel_values, image_grid_thw)`` by our path when it equals what ``processor`` would give for
    ``images`` with these call arguments, else None (the caller then runs the processor itself)."""
    from PIL import Image

    if not isinstance(images, (list, tuple)) or not images:
        return None
    if not all(isinstance(im, Image.Image) and im.mode == "RGB" for im in images):
        return None
    # vLLM 0.32 asks for neither (uint8 patches, normalised on the device); transformers' default is both.
    normalize = kwargs.get("do_normalize", processor.do_normalize)
    if kwargs.get("do_rescale", processor.do_rescale) != normalize:
        return None
    settings = {
        "rescale_factor": 1 / 255,
        "image_mean": processor.image_mean,
        "image_std": processor.image_std,
        "patch_size": processor.patch_size,
        "temporal_patch_size": processor.temporal_patch_size,
        "merge_size": processor.merge_size,
    }
    for key, value in kwargs.items():
        if key in ("return_tensors", "size", "min_pixels", "max_pixels", "do_resize", "do_rescale", "do_normalize"):
            continue
        if key in _NEUTRAL:
            continue
        if key not in settings or (value is not None and _differs(value, settings[key])):
            return None
    if kwargs.get("return_tensors") not in ("pt", None):
        return None
    if normalize and abs(float(processor.rescale_factor) - 1 / 255) > 1e-12:
        return None
    limits = _limits(processor, kwargs)
    if limits is None:
        return None
    return _compute(processor, images, limits, normalize=bool(normalize))


def _differs(value: Any, expected: Any) -> bool:
    if isinstance(value, (list, tuple)) and isinstance(expected, (list, tuple)):
        return [float(v) for v in value] != [float(e) for e in expected]
    if isinstance(value, float) or isinstance(expected, float):
        return abs(float(value) - float(expected)) > 1e-12
    return bool(value != expected)


def _compute(processor: Any, images: Any, limits: tuple[int, int], *, normalize: bool) -> Any | None:
    import numpy as np
    import torch
    from transformers.feature_extraction_utils import BatchFeature
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    from vllm_hpu_mm.preprocess.pixels import to_patch_bytes, to_pixel_values

    patch, merge, temporal = int(processor.patch_size), int(processor.merge_size), int(processor.temporal_patch_size)
    factor = patch * merge
    for image in images:
        width, height = image.size
        if width % factor or height % factor:
            return None
        try:
            if smart_resize(height, width, factor=factor, min_pixels=limits[0], max_pixels=limits[1]) != (
                height,
                width,
            ):
                return None  # the HF processor would resize: let it
        except ValueError:  # its own aspect-ratio refusal: let it say so
            return None
    values: list[Any] = []
    grids = []
    for image in images:
        pixels: Any
        if normalize:
            pixels, grid = to_pixel_values(
                image,
                image_mean=processor.image_mean,
                image_std=processor.image_std,
                patch_size=patch,
                temporal_patch_size=temporal,
                merge_size=merge,
            )
        else:
            pixels, grid = to_patch_bytes(image, patch_size=patch, temporal_patch_size=temporal, merge_size=merge)
        values.append(pixels)
        grids.append(grid)
    data = {
        "pixel_values": torch.from_numpy(np.concatenate(values) if len(values) > 1 else values[0]),
        "image_grid_thw": torch.tensor(grids, dtype=torch.int64),
    }
    return BatchFeature(data=data)


class FastPixelsMixin:
    """Put in front of the HF image processor's class: ``__call__`` takes our path when it is exact."""

    def __call__(self, images: Any = None, *args: Any, **kwargs: Any) -> Any:
        if not args:
            fast = pixel_values_if_exact(self, images, kwargs)
            if fast is not None:
                _log_once()
                return fast
        return super().__call__(images, *args, **kwargs)  # type: ignore[misc]


_classes: dict[type, type] = {}
_logged: list[bool] = []


def _log_once() -> None:
    if not _logged:
        _logged.append(True)
        logger.info("vllm-hpu-mm: pixel values of aligned images come from our NumPy path (plugin/pixels.py)")


def fast_pixels_processor(hf_processor: Any) -> Any:
    """Give ``hf_processor.image_processor`` our pixel path (once per instance; vLLM caches the processor)."""
    image_processor = getattr(hf_processor, "image_processor", None)
    if image_processor is None or getattr(image_processor, _MARK, False):
        return hf_processor
    if not all(hasattr(image_processor, a) for a in ("image_mean", "image_std", "patch_size", "merge_size", "size")):
        return hf_processor  # not a Qwen2-VL image processor
    cls = type(image_processor)
    if cls not in _classes:
        _classes[cls] = type(f"HpuMm{cls.__name__}", (FastPixelsMixin, cls), {"__module__": __name__, _MARK: True})
    image_processor.__class__ = _classes[cls]
    return hf_processor

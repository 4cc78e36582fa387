"""Aligned Qwen2.5-VL multimodal processing: every image is resized once to its 112-multiple size before the HF
processor, and vLLM's budget helpers count tokens by the same rule.

Mixins over vLLM's processing-info and multimodal-processor classes (the stock Qwen2.5-VL ones, or whichever
another plugin registered); :func:`aligned_processor_classes` builds the concrete subclasses.

- ``_get_hf_mm_inputs`` (called by ``BaseMultiModalProcessor._apply_hf_processor_main``) aligns every image with
  :func:`vllm_hpu_mm.preprocess.image.align_image`; the HF processor's own ``smart_resize`` (factor 28) then keeps
  the size, so ``image_grid_thw`` has h and w multiples of 8 and the request is billed ``(H/28)*(W/28)`` tokens.
- min/max pixels come from ``_merge_and_resolve_mm_processor_kwargs`` (configured ``--mm-processor-kwargs`` merged
  with the request's), so a per-request ``max_pixels`` is honoured. Under the ``shrink`` policy the effective
  ``max_pixels`` is ``min(max_pixels, largest bucket * 196)`` (:func:`~vllm_hpu_mm.buckets.policy.pixel_limits`);
  under ``reject`` an image above the largest bucket is refused here, in the API server, with an
  :class:`~vllm_hpu_mm.errors.OversizeImageError` (HTTP 400).
- ``_get_vision_info`` and ``get_image_size_with_most_features`` (profiling, max tokens per item) use the same rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from vllm_hpu_mm.buckets.packing import oversize_error
from vllm_hpu_mm.buckets.policy import OversizePolicy, pixel_limits
from vllm_hpu_mm.envs import Settings, get_settings
from vllm_hpu_mm.errors import ImageError
from vllm_hpu_mm.preprocess.align import ALIGN_FACTOR, aligned_size, image_tokens, patch_count


def settings_pixel_limits(
    min_pixels: int, max_pixels: int, settings: Settings, *, for_budget: bool = False
) -> tuple[int, int]:
    """:func:`~vllm_hpu_mm.buckets.policy.pixel_limits` under the process settings' buckets and policy."""
    return pixel_limits(
        min_pixels, max_pixels, settings.multimodal_buckets, settings.oversize_policy, for_budget=for_budget
    )


def check_oversize(height: int, width: int, settings: Settings, *, original: tuple[int, int]) -> None:
    """Under ``reject``, refuse an aligned ``height`` x ``width`` image above the largest bucket."""
    buckets = settings.multimodal_buckets
    if not buckets or settings.oversize_policy is not OversizePolicy.REJECT:
        return
    patches = patch_count(height, width)
    if patches > max(buckets):
        from vllm_hpu_mm.plugin.metrics import record_oversize

        record_oversize(OversizePolicy.REJECT.value)
        raise oversize_error(patches, buckets, size=original)


def _to_pil(item: Any) -> Any:
    """vLLM hands images as PIL images; numpy/torch arrays (offline users) become PIL images for alignment."""
    from PIL import Image

    if isinstance(item, Image.Image):
        return item
    import numpy as np

    array = item.detach().cpu().numpy() if hasattr(item, "detach") else np.asarray(item)
    if array.ndim == 3 and array.shape[0] in (1, 3, 4) and array.shape[-1] not in (1, 3, 4):
        array = array.transpose(1, 2, 0)  # CHW -> HWC
    if array.dtype != np.uint8:
        scale = 255.0 if array.size and float(array.max()) <= 1.0 else 1.0
        array = np.clip(np.rint(array * scale), 0, 255).astype(np.uint8)
    if array.ndim == 3 and array.shape[-1] == 1:
        array = array[..., 0]
    try:
        return Image.fromarray(array)
    except (TypeError, ValueError) as exc:
        raise ImageError(f"image array of shape {array.shape} is not an image ({exc}); accepted: HWC or CHW") from None


class AlignedProcessingInfoMixin:
    """Overrides for a ``Qwen2VLProcessingInfo`` subclass: budgets on the 112 rule."""

    def get_hf_processor(self, **kwargs: object) -> Any:
        """vLLM's HF processor, its image processor given our pixel path (:mod:`.pixels`)."""
        from vllm_hpu_mm.plugin.pixels import fast_pixels_processor

        return fast_pixels_processor(super().get_hf_processor(**kwargs))  # type: ignore[misc]

    def hpu_mm_requested_limits(self, mm_kwargs: Mapping[str, object]) -> tuple[int, int]:
        """``(min_pixels, max_pixels)`` the processor config and the request ask for, before our bucket cap."""
        from vllm_hpu_mm.plugin import log_settings_once

        log_settings_once()  # the API server's logging is configured only after plugins load
        merged = self._merge_and_resolve_mm_processor_kwargs(mm_kwargs)  # type: ignore[attr-defined]
        scoped = merged.get("images_kwargs", {})
        size = self._get_vision_size(scoped, default_size=self.get_image_processor().size)  # type: ignore[attr-defined]
        return int(size["shortest_edge"]), int(size["longest_edge"])

    def hpu_mm_pixel_limits(self, mm_kwargs: Mapping[str, object]) -> tuple[int, int]:
        """``(min_pixels, max_pixels)`` the budget helpers assume for a request with these ``mm_processor_kwargs``."""
        return settings_pixel_limits(*self.hpu_mm_requested_limits(mm_kwargs), get_settings(), for_budget=True)

    def _get_vision_info(
        self,
        *,
        image_width: int,
        image_height: int,
        num_frames: int = 1,
        do_resize: bool = True,
        image_processor: Any,
        mm_kwargs: Mapping[str, object],
        modality: str | None = None,
    ) -> tuple[Any, int]:
        if modality not in (None, "image") or not do_resize or num_frames != 1:  # videos keep the stock rule
            return super()._get_vision_info(  # type: ignore[misc,no-any-return]
                image_width=image_width,
                image_height=image_height,
                num_frames=num_frames,
                do_resize=do_resize,
                image_processor=image_processor,
                mm_kwargs=mm_kwargs,
                modality=modality,
            )
        from vllm.multimodal.parse import ImageSize

        min_pixels, max_pixels = self.hpu_mm_pixel_limits(mm_kwargs)
        h, w = aligned_size(
            image_height, image_width, min_pixels=min_pixels, max_pixels=max_pixels, mode=get_settings().align_mode
        )
        return ImageSize(width=w, height=h), image_tokens(h, w)

    def get_image_size_with_most_features(self, max_pixels: int | None = None) -> Any:
        """The aligned image with the most tokens under the limits: a 112-tile grid of at most ``max_pixels``."""
        from vllm.multimodal.parse import ImageSize

        if max_pixels is None:
            _, max_pixels = self.hpu_mm_pixel_limits({})
        tiles = max(1, max_pixels // (ALIGN_FACTOR * ALIGN_FACTOR))
        max_aspect = get_settings().max_aspect_ratio
        for n in range(tiles, 0, -1):  # squarest factorisation within the aspect limit, as the stock helper does
            rows = next(d for d in range(math.isqrt(n), 0, -1) if n % d == 0)
            if (n // rows) / rows <= max_aspect:
                return ImageSize(width=ALIGN_FACTOR * (n // rows), height=ALIGN_FACTOR * rows)
        return ImageSize(width=ALIGN_FACTOR, height=ALIGN_FACTOR)


class AlignedMultiModalProcessorMixin:
    """Overrides for a ``Qwen2VLMultiModalProcessor`` subclass: align every image once before the HF processor, and
    count each multimodal request's prompt length (placeholders included) for ``--from-metrics``."""

    def apply(self, *args: Any, **kwargs: Any) -> Any:
        from vllm_hpu_mm.plugin.metrics import record_request

        result = super().apply(*args, **kwargs)  # type: ignore[misc]
        try:
            tokens = len(result["prompt_token_ids"])
            images = len(result.get("mm_placeholders", {}).get("image", ()))
        except (KeyError, TypeError, AttributeError):  # another vLLM's result shape: count nothing, serve anyway
            return result
        record_request(tokens, images)
        return result

    def _get_hf_mm_inputs(self, mm_items: Any, hf_kwargs: Mapping[str, object]) -> Any:
        inputs = super()._get_hf_mm_inputs(mm_items, hf_kwargs)  # type: ignore[misc]
        images = inputs.hf_data.get("images")
        if images:
            inputs.hf_data["images"] = self.hpu_mm_align(list(images), hf_kwargs)
        return inputs

    def hpu_mm_align(self, images: list[Any], mm_kwargs: Mapping[str, object]) -> list[Any]:
        from vllm_hpu_mm.plugin.metrics import record_aligned, record_oversize
        from vllm_hpu_mm.preprocess.image import align_image

        settings = get_settings()
        req_min, req_max = self.info.hpu_mm_requested_limits(mm_kwargs)  # type: ignore[attr-defined]
        min_pixels, max_pixels = settings_pixel_limits(req_min, req_max, settings)
        buckets = settings.multimodal_buckets or (0,)
        shrinking = bool(settings.multimodal_buckets) and settings.oversize_policy is OversizePolicy.SHRINK
        mode = settings.align_mode
        out = []
        for item in images:
            aligned = align_image(
                _to_pil(item),
                min_pixels=min_pixels,
                max_pixels=max_pixels,
                mode=mode,
                max_image_pixels=settings.max_image_pixels,
                max_aspect_ratio=settings.max_aspect_ratio,
            )
            w, h = aligned.size
            check_oversize(h, w, settings, original=aligned.original_size)
            record_aligned(patch_count(h, w), settings.multimodal_buckets)
            ow, oh = aligned.original_size
            if shrinking and patch_count(*aligned_size(oh, ow, min_pixels=req_min, max_pixels=req_max, mode=mode)) > (
                max(buckets)
            ):
                record_oversize(OversizePolicy.SHRINK.value)  # the bucket cap, not the request, made it smaller
            out.append(aligned.image)
        return out


def aligned_processor_classes(info_cls: type, processor_cls: type) -> tuple[type, type]:
    """Concrete (info, processor) classes: our mixins in front of the given vLLM classes."""
    info = type(f"HpuMm{info_cls.__name__}", (AlignedProcessingInfoMixin, info_cls), {"__module__": __name__})
    processor = type(
        f"HpuMm{processor_cls.__name__}", (AlignedMultiModalProcessorMixin, processor_cls), {"__module__": __name__}
    )
    return info, processor

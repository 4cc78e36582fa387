"""What happens to an image that needs more patches than the largest vision bucket: the policy
(:class:`~vllm_hpu_mm.values.OversizePolicy`, defined with the other setting values) and the one rule for the pixel
limits it implies (:func:`pixel_limits`), used by the served processor, the bucket runner's packer and
``buckets check`` alike."""

from __future__ import annotations

from collections.abc import Sequence

from vllm_hpu_mm.preprocess.align import ALIGN_FACTOR
from vllm_hpu_mm.values import Buckets, OversizePolicy

__all__ = ["OversizePolicy", "pixel_limits"]


def pixel_limits(
    min_pixels: int,
    max_pixels: int,
    buckets: Sequence[int] | None,
    policy: OversizePolicy,
    *,
    for_budget: bool = False,
) -> tuple[int, int]:
    """Effective ``(min_pixels, max_pixels)`` of an aligned image under a bucket list and the oversize policy.

    ``shrink`` caps ``max_pixels`` at the largest bucket's pixels (``largest * 196``), so images are resized to fit
    it. ``reject`` aligns images uncapped (and refuses the ones above the largest bucket), but caps the budget
    helpers (``for_budget``: the largest image that is *accepted*). ``eager`` and no buckets never cap.
    ``min_pixels`` never exceeds the cap; ``max_pixels`` is at least one 112 x 112 tile.
    """
    capped = (OversizePolicy.SHRINK, OversizePolicy.REJECT) if for_budget else (OversizePolicy.SHRINK,)
    if buckets and policy in capped:
        max_pixels = min(max_pixels, Buckets(buckets).shrink_limit)
    max_pixels = max(max_pixels, ALIGN_FACTOR * ALIGN_FACTOR)
    return min(min_pixels, max_pixels), max_pixels

"""A bucket list against a set of image sizes, the oversize policy applied: what ``buckets check`` reports."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from vllm_hpu_mm.buckets.planner import Evaluation, evaluate
from vllm_hpu_mm.buckets.policy import OversizePolicy, pixel_limits
from vllm_hpu_mm.buckets.sizes import Sizes, patch_counts
from vllm_hpu_mm.values import AlignMode


def evaluate_sizes(
    sizes: Sizes,
    buckets: Sequence[int],
    *,
    min_pixels: int,
    max_pixels: int,
    mode: AlignMode = AlignMode.NEAREST,
    policy: OversizePolicy = OversizePolicy.SHRINK,
) -> Evaluation:
    """Evaluate ``buckets`` on images aligned under ``[min_pixels, max_pixels]``.

    The limits are the served processor's (:func:`~vllm_hpu_mm.buckets.policy.pixel_limits`): under ``shrink``
    images are resized to fit the largest bucket and counted in ``num_shrunk``; under ``eager`` the images above the
    largest bucket keep their size and are counted in ``num_oversize`` at their own patch count; under ``reject``
    the server answers them with HTTP 400: they are counted in ``num_oversize`` and in no patch total (the
    efficiency is the served images').
    """
    low, cap = pixel_limits(min_pixels, max_pixels, buckets, policy)
    sample = patch_counts(sizes, min_pixels=low, max_pixels=cap, mode=mode)
    if policy is not OversizePolicy.REJECT or not buckets:
        return evaluate(sample.counts, buckets, num_shrunk=sample.num_shrunk)
    largest = max(buckets)
    # sample.counts is patches -> images: weigh each patch count by its images, never count distinct values
    served = {c: n for c, n in sample.counts.items() if c <= largest}
    ev = evaluate(served, buckets, num_shrunk=sample.num_shrunk)
    return dataclasses.replace(ev, num_images=sample.num_images, num_oversize=sample.num_images - ev.num_images)

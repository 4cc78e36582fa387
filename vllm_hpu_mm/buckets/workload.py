"""A bucket list against a set of image sizes, the oversize policy applied: what ``buckets check`` reports, and
the one scoring rule ``buckets plan`` plans under (:func:`served_counts`, :func:`faithful_largest`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from vllm_hpu_mm.buckets.planner import Evaluation, evaluate
from vllm_hpu_mm.buckets.policy import OversizePolicy, pixel_limits
from vllm_hpu_mm.buckets.sizes import PatchSample, Sizes, patch_counts
from vllm_hpu_mm.values import BUCKET_GRANULE, PIXELS_PER_PATCH, AlignMode


def served_counts(
    sizes: Sizes,
    buckets: Sequence[int],
    *,
    min_pixels: int,
    max_pixels: int,
    mode: AlignMode = AlignMode.NEAREST,
    policy: OversizePolicy = OversizePolicy.SHRINK,
) -> PatchSample:
    """The images' patch counts as the served processor aligns them under ``buckets``: the limits of
    :func:`~vllm_hpu_mm.buckets.policy.pixel_limits` (under ``shrink`` the list's own largest bucket x 196 caps
    them, so the list decides how far its images are shrunk)."""
    low, cap = pixel_limits(min_pixels, max_pixels, buckets, policy)
    return patch_counts(sizes, min_pixels=low, max_pixels=cap, mode=mode)


def faithful_largest(
    sizes: Sizes,
    counts: Mapping[int, int],
    *,
    min_pixels: int,
    max_pixels: int,
    mode: AlignMode = AlignMode.NEAREST,
    at_least: int = 0,
) -> int:
    """The smallest largest bucket (a multiple of 64, at least ``at_least``) under which ``shrink`` serves every
    image at ``counts``, its count under ``max_pixels`` alone.

    The largest count itself is not always enough: the cap ``largest x 196`` it implies shrinks an image by scaling
    both sides and flooring them to the grid (and under ``down`` by Qwen2.5-VL's own count at that cap), which can
    land below an image that fits that area exactly (1920x1080 under ``down``: 9792 patches at 2458624 px, 9216 at
    9792 x 196). A bucket of ``ceil(max_pixels / 196)`` always is (its cap is ``max_pixels`` itself). An image's
    count never falls as the cap rises, so the least such bucket is found by bisection over multiples of 64."""
    wanted = dict(counts)

    def keeps(largest: int) -> bool:
        served = served_counts(sizes, (largest,), min_pixels=min_pixels, max_pixels=max_pixels, mode=mode)
        return dict(served.counts) == wanted

    def granule(n: int) -> int:
        return -(-n // BUCKET_GRANULE)

    lo = granule(max(at_least, max(wanted)))  # in granules; the largest count has to fit anyway
    hi = max(lo, granule(-(-max_pixels // PIXELS_PER_PATCH)))
    if keeps(lo * BUCKET_GRANULE):
        return lo * BUCKET_GRANULE
    while hi - lo > 1:  # keeps(hi) holds, keeps(lo) does not
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if keeps(mid * BUCKET_GRANULE) else (mid, hi)
    return hi * BUCKET_GRANULE


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
    sample = served_counts(sizes, buckets, min_pixels=min_pixels, max_pixels=max_pixels, mode=mode, policy=policy)
    if policy is not OversizePolicy.REJECT or not buckets:
        return evaluate(sample.counts, buckets, num_shrunk=sample.num_shrunk)
    largest = max(buckets)
    # sample.counts is patches -> images: weigh each patch count by its images, never count distinct values
    served = {c: n for c, n in sample.counts.items() if c <= largest}
    ev = evaluate(served, buckets, num_shrunk=sample.num_shrunk)
    return dataclasses.replace(ev, num_images=sample.num_images, num_oversize=sample.num_images - ev.num_images)

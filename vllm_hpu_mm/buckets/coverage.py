"""Does a bucket list cover the pixel range images are aligned to? (Beyond the syntax checks of ``spec``.)

With 112-aligned images, the patch counts an image can have under ``[min_pixels, max_pixels]`` are multiples of 64
between :func:`smallest_patches` and :func:`largest_patches`:

- the largest bucket should reach ``largest_patches(max_pixels)`` (= ``floor(max_pixels / 112**2) * 64``, i.e.
  ``max_pixels / 196`` rounded down to whole 112 x 112 tiles); otherwise the oversize policy applies to the
  images in between, and the message says what that policy does;
- the smallest bucket should not be below ``smallest_patches(min_pixels)``: a bucket no single image can need is
  only used by packed batches of several small images.

Each finding is a :class:`CoverageIssue`; :func:`validate_coverage` raises :class:`~vllm_hpu_mm.errors.BucketError`
on the first one for callers that want a hard failure (``strict``), otherwise returns them as warnings.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from vllm_hpu_mm.buckets.policy import OversizePolicy
from vllm_hpu_mm.errors import BucketError
from vllm_hpu_mm.preprocess.align import ALIGN_FACTOR
from vllm_hpu_mm.values import BUCKET_GRANULE

_TILE_PIXELS = ALIGN_FACTOR * ALIGN_FACTOR

_POLICY_EFFECT = {
    OversizePolicy.SHRINK: "they are shrunk to fit the largest bucket (policy shrink): fewer tokens than asked",
    OversizePolicy.EAGER: "they run at their exact shape (policy eager): one graph compilation per new shape",
    OversizePolicy.REJECT: "they are rejected with an error (policy reject)",
}


@dataclasses.dataclass(frozen=True)
class CoverageIssue:
    """One problem of a bucket list against a pixel range; ``message`` is a complete sentence for the user."""

    kind: str  # "largest_too_small" or "smallest_too_small"
    message: str


def largest_patches(max_pixels: int) -> int:
    """Most patches of a 112-aligned image with at most ``max_pixels`` pixels (a 1 x N tile strip reaches it)."""
    return max_pixels // _TILE_PIXELS * BUCKET_GRANULE


def smallest_patches(min_pixels: int) -> int:
    """Fewest patches of a 112-aligned image with at least ``min_pixels`` pixels (at least one tile)."""
    return max(1, math.ceil(min_pixels / _TILE_PIXELS)) * BUCKET_GRANULE


def coverage_issues(
    buckets: Sequence[int],
    *,
    min_pixels: int,
    max_pixels: int,
    policy: OversizePolicy,
    source: str,
) -> list[CoverageIssue]:
    """Problems of ``buckets`` (ascending) for images aligned into ``[min_pixels, max_pixels]``; empty if none."""
    issues: list[CoverageIssue] = []
    need = largest_patches(max_pixels)
    if buckets[-1] < need:
        issues.append(
            CoverageIssue(
                "largest_too_small",
                f"{source}: the largest bucket {buckets[-1]} is below the {need} patches of the largest aligned "
                f"image under max_pixels={max_pixels} (max_pixels/196 in whole 112x112 tiles); images above "
                f"{buckets[-1]} patches are oversize and {_POLICY_EFFECT[policy]}. Add a bucket >= {need} or "
                f"lower max_pixels to {buckets[-1] * 196}",
            )
        )
    floor = smallest_patches(min_pixels)
    if buckets[0] < floor:
        issues.append(
            CoverageIssue(
                "smallest_too_small",
                f"{source}: the smallest bucket {buckets[0]} is below the {floor} patches of the smallest aligned "
                f"image under min_pixels={min_pixels} (min_pixels/196 in whole 112x112 tiles); no single image "
                f"uses it, only packed small images. Use buckets >= {floor}",
            )
        )
    return issues


def validate_coverage(
    buckets: Sequence[int],
    *,
    min_pixels: int,
    max_pixels: int,
    policy: OversizePolicy,
    source: str,
    strict: bool = False,
) -> list[str]:
    """Warning messages for ``buckets``; with ``strict`` the first problem raises :class:`BucketError` instead."""
    issues = coverage_issues(buckets, min_pixels=min_pixels, max_pixels=max_pixels, policy=policy, source=source)
    if strict and issues:
        raise BucketError(issues[0].message)
    return [issue.message for issue in issues]

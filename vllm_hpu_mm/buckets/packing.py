"""Mapping images to buckets and packing the images of one batch into bucket-sized vision-encoder passes.

Used by the bucketed runner (``graphs.runner``). Everything here works on patch counts (14 x 14 patches per image,
a multiple of 64 for 112-aligned images); no tensors, no images.

Packing rule (:func:`pack`), stated exactly:

1. Images above the largest bucket follow the oversize policy: ``eager`` gives each its own pass with
   ``bucket=None`` and no padding (placed after the bucketed passes), ``reject`` raises
   :class:`~vllm_hpu_mm.errors.OversizeImageError`, and ``shrink`` must already have been applied upstream (the
   processor resizes under :func:`~vllm_hpu_mm.buckets.policy.pixel_limits`; an oversize count reaching
   :func:`pack` under ``shrink`` is a caller bug: ``ValueError``).
2. The other images are taken in decreasing patch count (ties: lower input index first) and each goes into the
   first open pass (in the order passes were opened) where it *fits* — the new sum is at most the largest bucket —
   and where merging does not add padded patches: ``bucket_for(sum + n) <= bucket_for(sum) + bucket_for(n)``.
   Otherwise it opens a new pass. This is first-fit decreasing into bins of the largest bucket, with a merge test
   that guarantees packing never costs more vision compute than running every image alone.
3. Each pass then shrinks to the smallest bucket that holds its sum; ``padding = bucket - sum``, filled by the
   runner with one dummy image (a multiple of 64 patches when the images are 112-aligned and the buckets are
   multiples of 64).

Order: ``PackedPass.items`` holds indices into the input, so the runner puts per-image outputs back in input order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TypeVar

from vllm_hpu_mm.buckets.policy import OversizePolicy
from vllm_hpu_mm.errors import OversizeImageError
from vllm_hpu_mm.values import Buckets

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class PackedPass:
    """One vision-encoder pass: some images of the batch plus one dummy image of ``padding`` patches."""

    #: The bucket (patches) the pass runs at, or None for an exact-shape oversize pass (``eager`` policy).
    bucket: int | None
    #: Indices into the input of the images in this pass, in pass order.
    items: tuple[int, ...]
    #: Patch counts of those images, same order as ``items``.
    patches: tuple[int, ...]
    #: Patches of the dummy image that fills the bucket (``bucket - sum(patches)``; 0 for an eager pass).
    padding: int

    @property
    def total(self) -> int:
        """Patches the tower processes in this pass (real + padding)."""
        return sum(self.patches) + self.padding


def bucket_for(patches: int, buckets: Sequence[int]) -> int | None:
    """The smallest bucket that holds ``patches``, or None if it exceeds the largest."""
    return Buckets(buckets).bucket_for(patches)


def shrink_limit(buckets: Sequence[int]) -> int:
    """The ``max_pixels`` that makes every aligned image fit the largest bucket: ``largest * 196``."""
    return Buckets(buckets).shrink_limit


def oversize_error(
    patches: int,
    buckets: Sequence[int],
    *,
    size: tuple[int, int] | None = None,
    index: int | None = None,
) -> OversizeImageError:
    """The error for an image above the largest bucket under the ``reject`` policy (``size`` is ``(W, H)``): the
    one message for it, from the processor (API server), the packer and the runner."""
    what = "image" if index is None else f"image {index}"
    if size is not None:
        what += f" of {size[0]}x{size[1]} pixels"
    return OversizeImageError(
        f"{what} needs {patches} vision patches, above the largest bucket ({max(buckets)}) and the oversize "
        f"policy is '{OversizePolicy.REJECT.value}'; send a smaller image (at most {shrink_limit(buckets)} "
        f"pixels), or set VLLM_HPU_MM_OVERSIZE_POLICY=shrink or eager, or add a bucket >= {patches} to "
        "VLLM_MULTIMODAL_BUCKETS"
    )


def pack(patch_counts: Sequence[int], buckets: Sequence[int], policy: OversizePolicy) -> list[PackedPass]:
    """Pack the images of one batch into passes (rule in the module docstring); ``buckets`` ascending."""
    ordered = Buckets(buckets)
    largest = ordered.largest
    fitting: list[int] = []
    eager: list[PackedPass] = []
    for i, n in enumerate(patch_counts):
        if n <= 0:
            raise ValueError(f"image {i} has {n} patches; patch counts must be positive")
        if n <= largest:
            fitting.append(i)
        elif policy is OversizePolicy.EAGER:
            eager.append(PackedPass(None, (i,), (n,), 0))
        elif policy is OversizePolicy.REJECT:
            raise oversize_error(n, ordered, index=i)
        else:
            raise ValueError(
                f"image {i} has {n} patches, above the largest bucket {largest}, under the 'shrink' policy: it "
                f"should have been resized upstream (max_pixels={shrink_limit(ordered)})"
            )
    fitting.sort(key=lambda i: (-patch_counts[i], i))
    bins: list[list[int]] = []
    sums: list[int] = []
    for i in fitting:
        n = patch_counts[i]
        alone = _bucket(n, ordered)
        for b, s in enumerate(sums):
            if s + n <= largest and _bucket(s + n, ordered) <= _bucket(s, ordered) + alone:
                bins[b].append(i)
                sums[b] = s + n
                break
        else:
            bins.append([i])
            sums.append(n)
    passes = [
        PackedPass(_bucket(s, ordered), tuple(items), tuple(patch_counts[i] for i in items), _bucket(s, ordered) - s)
        for items, s in zip(bins, sums, strict=True)
    ]
    return passes + eager


def _bucket(patches: int, buckets: Sequence[int]) -> int:
    bucket = bucket_for(patches, buckets)
    assert bucket is not None  # callers only ask for sums at most the largest bucket
    return bucket

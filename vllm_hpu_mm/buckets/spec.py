"""Parsing and validation of a vision bucket list (``VLLM_MULTIMODAL_BUCKETS``).

A bucket is a number of 14x14 vision patches, ``(W * H) / (14 * 14)`` for an image of W x H pixels. 112-aligned
images always have a patch count that is a multiple of 64 (8 x 8 patches per 112 x 112 tile), so buckets must be
multiples of 64 as well: then the padding between an image and its bucket is a whole dummy image.
"""

from __future__ import annotations

from collections.abc import Iterable

from vllm_hpu_mm.errors import BucketError

#: The Gaudi guide's default for Qwen2.5-VL (patch counts).
DEFAULT_BUCKETS: tuple[int, ...] = (1600, 3136, 4096, 6400, 7744, 9216, 12544)
#: Patches per bucket granule: one 112 x 112 tile is 8 x 8 patches of 14 x 14 pixels.
BUCKET_GRANULE = 64
#: Pixels per patch (14 x 14).
PIXELS_PER_PATCH = 14 * 14
ACCEPTED_FORM = "a comma-separated list of positive integers, each a multiple of 64, e.g. 1600,3136,4096"


def parse_buckets(value: str | Iterable[int], *, source: str = "VLLM_MULTIMODAL_BUCKETS") -> tuple[int, ...]:
    """Parse and validate a bucket list; return it sorted ascending.

    ``source`` names the setting the value came from (an environment variable or a CLI flag) so that every error
    says where to look. Raises :class:`BucketError` naming the bad token and the accepted form.
    """
    if isinstance(value, str):
        tokens = [t.strip() for t in value.split(",")]
        if not value.strip():
            raise BucketError(f"{source} is empty; expected {ACCEPTED_FORM}")
        numbers: list[int] = []
        for token in tokens:
            if not token:
                raise BucketError(f"{source}={value!r} has an empty entry; expected {ACCEPTED_FORM}")
            try:
                numbers.append(int(token))
            except ValueError:
                raise BucketError(
                    f"{source}={value!r}: {token!r} is not an integer; expected {ACCEPTED_FORM}"
                ) from None
    else:
        numbers = [int(v) for v in value]
        if not numbers:
            raise BucketError(f"{source} is empty; expected {ACCEPTED_FORM}")
    for n in numbers:
        if n <= 0:
            raise BucketError(f"{source}: bucket {n} is not positive; expected {ACCEPTED_FORM}")
        if n % BUCKET_GRANULE:
            lower = n // BUCKET_GRANULE * BUCKET_GRANULE
            raise BucketError(
                f"{source}: bucket {n} is not a multiple of {BUCKET_GRANULE} "
                f"(nearest valid: {max(lower, BUCKET_GRANULE)} or {lower + BUCKET_GRANULE}); expected {ACCEPTED_FORM}"
            )
    seen: set[int] = set()
    for n in numbers:
        if n in seen:
            raise BucketError(f"{source}: bucket {n} appears more than once; expected {ACCEPTED_FORM}")
        seen.add(n)
    return tuple(sorted(numbers))

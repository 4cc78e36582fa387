"""The vision bucket list: :class:`~vllm_hpu_mm.values.Buckets` and :func:`parse_buckets`, defined in
:mod:`vllm_hpu_mm.values` (standard-library only, for the environment registry) and named here with the rest of
the bucket model."""

from __future__ import annotations

from vllm_hpu_mm.values import ACCEPTED_FORM, BUCKET_GRANULE, DEFAULT_BUCKETS, PIXELS_PER_PATCH, Buckets, parse_buckets

__all__ = ["ACCEPTED_FORM", "BUCKET_GRANULE", "DEFAULT_BUCKETS", "PIXELS_PER_PATCH", "Buckets", "parse_buckets"]

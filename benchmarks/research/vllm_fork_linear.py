"""Moved: the fork's 2024 linear model now lives in the package (vllm_hpu_mm.runtimes.vllm_fork.linear, the 1.17
release line of vllm_hpu_mm.runtimes.vllm_fork.releases); re-exported here for the scripts that import it."""

from __future__ import annotations

from vllm_hpu_mm.runtimes.vllm_fork.linear import (
    FORK_LINEAR_COMMIT,
    linear_buckets,
    read_bucket_settings,
    warmup_buckets,
    warmup_range,
)

__all__ = ["FORK_LINEAR_COMMIT", "linear_buckets", "read_bucket_settings", "warmup_buckets", "warmup_range"]

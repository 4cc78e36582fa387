"""HabanaAI/vllm-fork's 2024 linear bucketing, as ``vllm/worker/habana_model_runner.py`` @ e30ddc3db (2024-08-07,
habana_main) generates it (our own code): ``read_bucket_settings`` (``VLLM_{PROMPT,DECODE}_{BS,SEQ}_BUCKET_{MIN,STEP,
MAX}``, Python ``int()``), ``warmup_range`` (doubling from min while below step, then every step up to max) and
``warmup_buckets`` (the product of the batch and sequence ranges; no token-budget filter without LoRA).

Defaults at that commit: prompt batch (1, 32, min(max_num_seqs, 64)), decode batch (1, 128, max_num_seqs), prompt
sequence (block, block, 1024), decode sequence (block, block, 2048). Later in 2024 the fork moved this into
vllm-hpu-extension (dbde4b81b #534, 2024-11-22) and in 2025 added its exponential strategy (d6718b21c #642,
2025-04-11), which is not modelled here. Not yet wired into :class:`VllmFork`'s plan (it still plans a powers-of-two
grid): ``benchmarks/gaudi_log_buckets.py`` checks this model against the public logs that print their bucket
configuration.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from vllm_hpu_mm.errors import ConfigError

__all__ = ["FORK_LINEAR_COMMIT", "linear_buckets", "read_bucket_settings", "warmup_buckets", "warmup_range"]

FORK_LINEAR_COMMIT = "e30ddc3db"
Range = tuple[int, int, int]
#: A bucket count a 2-core planner can enumerate; the fork itself would warm them all.
MAX_BUCKETS = 1_000_000


def read_bucket_settings(env: Mapping[str, str], phase: str, dim: str, defaults: Range) -> Range:
    """(min, step, max) from ``VLLM_<PHASE>_<DIM>_BUCKET_<PARAM>`` or the default, through ``int()`` as the fork."""
    out = []
    for param, default in zip(("min", "step", "max"), defaults, strict=True):
        name = f"VLLM_{phase}_{dim}_BUCKET_{param}".upper()
        raw = env.get(name)
        try:
            out.append(default if raw is None else int(raw))
        except ValueError:
            raise ConfigError(
                f"{name}={raw!r} is invalid; accepted: an integer (vllm-fork fails at start-up)"
            ) from None
    return out[0], out[1], out[2]


def warmup_range(config: Range) -> list[int]:
    """min, doubled while below step and within max, then step, 2 x step, ... up to max."""
    bmin, bstep, bmax = config
    if bmin > bmax:
        raise ConfigError(f"bucket range {config}: min above max; vllm-fork asserts min <= max")
    if bstep <= 0 or bmin <= 0:
        raise ConfigError(f"bucket range {config}: min and step must be >= 1 (vllm-fork would never finish)")
    ramp = []
    value = bmin
    while value < bstep and value <= bmax:
        ramp.append(value)
        value *= 2
    return ramp + list(range(bstep, bmax + 1, bstep))


def warmup_buckets(bs: Range, seq: Range) -> list[tuple[int, int]]:
    """The product of the two ranges, ordered as the fork warms them (by tokens, then sequence, then batch)."""
    bss, seqs = warmup_range(bs), warmup_range(seq)
    if len(bss) * len(seqs) > MAX_BUCKETS:
        raise ConfigError(f"bucket ranges {bs} x {seq} give over {MAX_BUCKETS} buckets; accepted: fewer")
    return sorted(itertools.product(bss, seqs), key=lambda b: (b[0] * b[1], b[1], b[0]))


def linear_buckets(
    env: Mapping[str, str], *, max_num_seqs: int, block_size: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(prompt, decode) buckets ``(batch, sequence length)`` the fork @e30ddc3db warms for these settings."""
    prompt = warmup_buckets(
        read_bucket_settings(env, "prompt", "bs", (1, 32, min(max_num_seqs, 64))),
        read_bucket_settings(env, "prompt", "seq", (block_size, block_size, 1024)),
    )
    decode = warmup_buckets(
        read_bucket_settings(env, "decode", "bs", (1, 128, max_num_seqs)),
        read_bucket_settings(env, "decode", "seq", (block_size, block_size, 2048)),
    )
    return prompt, decode

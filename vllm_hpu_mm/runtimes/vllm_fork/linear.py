"""HabanaAI/vllm-fork's linear bucketing, each generation as its code generates it (our own code, from our reading).

- 2024 in-tree (``vllm/worker/habana_model_runner.py``; @e30ddc3db on habana_main, shipped as v0.5.3.post1-Gaudi-1.17.0
  @1e0e492e1): the product of a batch range and a *sequence length* range, prompt and decode alike, no filter
  (:func:`linear_buckets`, :func:`warmup_buckets`).
- v0.5.3.post1+Gaudi-1.18.0 (@84922944d, still in-tree): decode by KV *blocks*; prompt buckets over the token
  budget dropped; decode blocks below the batch skipped, up to the KV blocks rounded to the step.
- vllm-hpu-extension ``bucketing.py`` / ``bucketing/linear.py`` (the fork moved it there in dbde4b81b #534,
  2024-11-22), the pin each tag's requirements name: 4ff86cf / d4b0d38 (Gaudi 1.19, 1.20) decode block ranges
  clamped to the KV blocks; 2b4ba56 (1.21.0) prompt and decode maxima from max_model_len; 29bc7a4 (1.21.2, 1.21.3)
  contiguous PA takes the decode block max from the KV blocks and skips batch > blocks; 8211e0b (1.22.0) buckets
  become (batch, query, context blocks).

A range (min, step, max): min doubled while below the step and within max, then step, 2 x step, ... up to max.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from vllm_hpu_mm.errors import ConfigError

__all__ = [
    "FORK_LINEAR_COMMIT",
    "MAX_BUCKETS",
    "Range",
    "decode_by_blocks",
    "linear_buckets",
    "prompt_product",
    "read_bucket_settings",
    "warmup_buckets",
    "warmup_range",
]

FORK_LINEAR_COMMIT = "e30ddc3db"
Range = tuple[int, int, int]
#: A bucket count a 2-core planner can enumerate; the fork itself would warm them all.
MAX_BUCKETS = 1_000_000


def _int(env: Mapping[str, str], name: str, default: int, line: str) -> int:
    raw = env.get(name)
    try:
        return default if raw is None else int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is invalid; accepted: an integer as Python int() reads it (vllm-fork {line} "
                          "fails at start-up)") from None  # fmt: skip


def read_bucket_settings(env: Mapping[str, str], phase: str, dim: str, defaults: Range, line: str = "") -> Range:
    """(min, step, max) from ``VLLM_<PHASE>_<DIM>_BUCKET_<PARAM>`` or the default, through ``int()`` as the fork."""
    got = [
        _int(env, f"VLLM_{phase}_{dim}_BUCKET_{p}".upper(), d, line)
        for p, d in zip(("min", "step", "max"), defaults, strict=True)
    ]
    return got[0], got[1], got[2]


def warmup_range(config: Range, *, at_least_min: bool = True, prefix: str = "") -> list[int]:
    """The range's values; ``at_least_min``: values of the stepped part below min dropped (from 1.18 on; the 2024
    in-tree code kept them). The fork asserts min <= max; a zero step stops ``range()``; min <= 0 below the step
    would double forever (refused here). ``prefix`` (``VLLM_PROMPT_BS_BUCKET``) names each variable of a refusal."""
    bmin, bstep, bmax = config

    def name(param: str) -> str:
        return f"{prefix}_{param}" if prefix else f"the bucket range's {param.lower()}"

    where = f" (the range (min, step, max) {tuple(config)})"
    if bmin > bmax:
        raise ConfigError(f"{name('MIN')} {bmin} is above {name('MAX')} {bmax}{where}; accepted: min <= max "
                          "(vllm-fork asserts it)")  # fmt: skip
    if bstep == 0:
        raise ConfigError(f"{name('STEP')} 0{where}; accepted: a step >= 1 (vllm-fork's range() fails)")
    if bmin <= 0 and bmin < bstep:
        raise ConfigError(f"{name('MIN')} {bmin}{where}; accepted: a min >= 1 (vllm-fork would double it "
                          "forever)")  # fmt: skip
    ramp = []
    value = bmin
    while value < bstep and value <= bmax:
        ramp.append(value)
        value *= 2
    if bstep > 0 and (bmax - bstep) // bstep + 1 > MAX_BUCKETS:
        raise ConfigError(f"{name('STEP')} {bstep}{where}: over {MAX_BUCKETS:,} values; accepted: a larger step")
    out = ramp + list(range(bstep, bmax + 1, bstep))
    return [v for v in out if v >= bmin] if at_least_min else out


def _check_count(a: list[int], b: list[int], what: str) -> None:
    if len(a) * len(b) > MAX_BUCKETS:
        raise ConfigError(f"{what}: {len(a):,} x {len(b):,} buckets, over {MAX_BUCKETS:,}; accepted: fewer")


def warmup_buckets(bs: Range, seq: Range, phase: str = "") -> list[tuple[int, int]]:
    """2024 in-tree: the product of the two ranges (nothing filtered), by tokens, then sequence, then batch; a range
    refused names its variables (``phase``: prompt or decode)."""
    names = [f"VLLM_{phase}_{dim}_BUCKET".upper() if phase else "" for dim in ("bs", "seq")]
    bss = warmup_range(bs, at_least_min=False, prefix=names[0])
    seqs = warmup_range(seq, at_least_min=False, prefix=names[1])
    _check_count(bss, seqs, f"bucket ranges {bs} x {seq}")
    return sorted(itertools.product(bss, seqs), key=lambda b: (b[0] * b[1], b[1], b[0]))


def linear_buckets(
    env: Mapping[str, str], *, max_num_seqs: int, block_size: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(prompt, decode) buckets ``(batch, sequence length)`` of the 2024 in-tree code (@e30ddc3db, 1e0e492e1):
    prompt batch (1, 32, min(max_num_seqs, 64)), decode batch (1, 128, max_num_seqs), prompt sequence (block, block,
    1024), decode sequence (block, block, 2048)."""
    line = "v0.5.3.post1-Gaudi-1.17.0"
    prompt = warmup_buckets(
        read_bucket_settings(env, "prompt", "bs", (1, 32, min(max_num_seqs, 64)), line),
        read_bucket_settings(env, "prompt", "seq", (block_size, block_size, 1024), line),
        "prompt",
    )
    decode = warmup_buckets(
        read_bucket_settings(env, "decode", "bs", (1, 128, max_num_seqs), line),
        read_bucket_settings(env, "decode", "seq", (block_size, block_size, 2048), line),
        "decode",
    )
    return prompt, decode


def prompt_product(bs: list[int], seq: list[int], budget: int) -> list[tuple[int, int]]:
    """1.18 on: (batch, query) over the token budget dropped, unless that drops every one (then all are kept)."""
    _check_count(bs, seq, "prompt bucket ranges")
    every = list(itertools.product(bs, seq))
    kept = [b for b in every if b[0] * b[1] <= budget]
    return kept or every


def decode_by_blocks(
    bs: list[int], blocks: list[int], last: int, *, skip_below_batch: bool, cap_inclusive: bool
) -> list[tuple[int, int]]:
    """(batch, KV blocks) per batch along the block range: ``skip_below_batch`` drops blocks < batch (1.18, 1.21.2
    on); ``cap_inclusive`` (the extension): the first value >= ``last`` becomes ``last`` and ends the batch's run;
    otherwise (1.18) values above ``last`` end it."""
    _check_count(bs, blocks, "decode bucket ranges")
    out = []
    for b in bs:
        for n in blocks:
            if skip_below_batch and n < b:
                continue
            if cap_inclusive and n >= last:
                out.append((b, last))
                break
            if not cap_inclusive and n > last:
                break
            out.append((b, n))
    return out

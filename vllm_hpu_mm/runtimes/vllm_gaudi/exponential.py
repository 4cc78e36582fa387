"""vllm-gaudi's exponential strategy (the default, ``VLLM_BUCKETING_STRATEGY=exp``), as
``vllm_gaudi/extension/bucketing/exponential.py`` @ 091bbadd computes it (our own code): its prompt and decode range
configurations and ``warmup_range_with_limit``. It overwrites the range variables (only ``VLLM_PROMPT_BS_BUCKET_MAX``
and a ``VLLM_PROMPT_QUERY_BUCKET_MIN`` of 1 count), and at or above :data:`LONG_CTX_THRESHOLD` it shrinks its
context range.
"""

from __future__ import annotations

import math

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes.vllm_gaudi.config import BucketingConfig, Cfg
from vllm_hpu_mm.runtimes.vllm_gaudi.releases import MAIN, Release

__all__ = ["LONG_CTX_THRESHOLD", "decode_block_ceiling", "decode_cfgs", "exp_range", "prompt_cfgs"]


#: exponential.py and common.py @ 091bbadd: at or above this max_model_len the exponential strategy shrinks its
#: context range and common.generate_buckets adds one "edge" context per query length.
LONG_CTX_THRESHOLD = 8192


def prompt_cfgs(cfg: BucketingConfig, shape: EngineShape, mnps: int) -> tuple[Cfg, Cfg, Cfg]:
    """get_prompt_cfgs: (batch, query, context) as (min, step, max, count)."""
    bs, mnbt, mml = shape.block_size, shape.max_num_batched_tokens, shape.max_model_len
    qmin = 1 if cfg.prompt_query_min == 1 and cfg.release.exp_min_one else bs  # v0.11.2: always the block size
    q_limit = math.ceil(math.log2(mnbt))
    rules = cfg.release.long_ctx_rules
    span = mnbt if rules == "every" or (rules == "long" and mml >= LONG_CTX_THRESHOLD) else qmin
    max_ctx = max(1, (mml - span) // bs)
    ctx_limit = 2 if max_ctx == 1 else math.ceil(math.log2(max_ctx)) + 1
    if cfg.merged_prefill:
        return (1, 1, 1, 1), (qmin, bs * 4, mnbt, q_limit), (0, 4, max_ctx * mnps, ctx_limit)
    return (1, 2, mnps, math.ceil(math.log2(mnps)) + 1), (qmin, bs, mnbt, q_limit), (0, 1, max_ctx, ctx_limit)


def decode_block_ceiling(shape: EngineShape, release: Release = MAIN) -> int:
    """The most KV blocks its own decode buckets reach without contiguous PA: every sequence at max_model_len,
    clamped at 3x the KV blocks for dense models on main (get_decode_cfgs: decodes above it "recompile at runtime");
    unclamped from v0.21.0 to v0.27.0rc0; v0.19's own rule before; 3x the KV blocks before v0.19.0; the KV blocks
    plus one block size before #1124 (v0.17.0rc1 - v0.18.0rc0); before b631d73f #1091 the worst case (its blocks
    per sequence rounded down) capped at the KV blocks x sequences / 4."""
    worst = math.ceil(shape.max_model_len / shape.block_size) * shape.max_num_seqs
    kv = shape.num_kv_blocks
    if release.exp_decode_max == "v0.19":
        return max(min(worst, kv * shape.max_num_seqs // 3), kv * 3)
    if release.exp_decode_max == "kv3":
        return kv * 3
    if release.exp_decode_max == "kv+block":
        return kv + shape.block_size
    if release.exp_decode_max == "seqs/4":
        return min(shape.max_model_len // shape.block_size * shape.max_num_seqs, kv * shape.max_num_seqs // 4)
    if release.exp_decode_max == "kv-cap":
        return min(shape.max_model_len // shape.block_size * shape.max_num_seqs, kv)
    if release.exp_decode_max == "worst" or shape.skip_decode_block_clamp:
        return worst
    return min(worst, kv * 3)


def decode_cfgs(cfg: BucketingConfig, shape: EngineShape) -> tuple[Cfg, Cfg, Cfg]:
    """get_decode_cfgs: the worst case, clamped to the KV cache (3x the KV blocks without contiguous PA on main;
    the release decides, :mod:`.releases`)."""
    mns, bs, mml, kv = shape.max_num_seqs, shape.block_size, shape.max_model_len, shape.num_kv_blocks
    conti = cfg.contiguous_pa
    release = cfg.release
    if conti:
        # up to v0.19: the KV blocks themselves; from v0.21.0 the smaller of them and the worst case
        kv_only = release.exp_decode_max in ("v0.19", "kv3", "kv+block", "seqs/4", "kv-cap")
        max_blocks = kv if kv_only else min(kv, math.ceil(mml / bs) * mns)
    else:
        max_blocks = decode_block_ceiling(shape, release)
    # before #1124 the step count is the KV blocks' own, whatever the maximum
    limit = math.ceil(math.log2(kv if release.exp_decode_max in ("kv+block", "seqs/4", "kv-cap") else max_blocks)) + 1
    if release.exp_decode_limit_cap:  # v0.19.0rc0: fewer block steps for large KV caches (shorter warm-up)
        limit = min(limit, max(6, math.ceil(math.log2(mns)) + 1))
    if release.exp_decode_compensation and not conti and kv > 0 and max_blocks > kv * 3:
        limit += math.ceil(math.log2(max_blocks / (kv * 3))) + 1
    return (1, 2, mns, math.ceil(math.log2(mns)) + 1), (1, 1, 1, 1), (1, mns, max_blocks, limit)


def exp_range(
    bmin: int,
    bstep: int,
    bmax: int,
    count: int,
    contiguous_pa: bool,
    dense: bool = False,
    clamp: bool = True,
    one_edge: bool = True,
) -> list[int]:
    # exponential.py warmup_range_with_limit @ 091bbadd: `count` values spaced geometrically from bmin (or from
    # bstep when bmin is 0 or 1, which is then added back) to bmax, each rounded up to a multiple of bstep.
    # ``dense`` (long-context prompt ranges @ 37baba9d): half of them geometric up to bmax / count, the other half
    # in equal steps from there to bmax (the float arithmetic in its order: the rounding depends on it).
    # ``one_edge`` False (v0.11.2, before #645): only a 0 minimum is set aside; a 1 is spaced from itself.
    edge = bmin if bmin == 0 or (bmin == 1 and one_edge) else None
    if edge is not None:
        bmin = bstep
    if count <= 0:
        raise ConfigError(f"exponential bucket count {count} is invalid; vllm-gaudi asserts a positive count")
    geometric, top = (count // 2, bmax / count) if dense else (count, float(bmax))
    if geometric <= 1:
        return [bmax]
    values: set[int] = set()
    for i in range(geometric):
        if i == count - 1 and contiguous_pa:
            values.add(bmax)
        else:
            scaled = bmin * math.pow(top / bmin, (1.0 / float(geometric - 1)) * i)
            values.add(math.ceil(scaled / bstep) * bstep)
    if dense:
        linear = count - geometric
        step = (bmax - top) / linear
        values.update(math.ceil((top + i * step) / bstep) * bstep for i in range(1, linear + 1))
    if edge is not None:
        values.add(edge)
    out = sorted(values)
    if clamp and out[-1] > bmax:  # v0.13.0 keeps a max rounded up to the step
        out[-1] = bmax
    return out

"""vllm-gaudi's padding-aware strategy (``VLLM_BUCKETING_STRATEGY=pad``), as
``vllm_gaudi/extension/bucketing/padding_aware.py`` @ 091bbadd computes it (our own code): its range configurations
(``MIN, STEP, MAX, PAD_MAX, PAD_PERCENT`` per range) and ``warmup_range_with_limits``.
"""

from __future__ import annotations

import math

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes.vllm_gaudi.config import BucketingConfig, Cfg, read_range

__all__ = ["decode_cfgs", "pad_range", "prompt_cfgs"]


def prompt_cfgs(cfg: BucketingConfig, shape: EngineShape, mnps: int) -> tuple[Cfg, Cfg, Cfg]:
    """get_prompt_cfgs: (batch, query, context) as (min, step, max, pad_max, pad_percent)."""
    bs, mnbt, mml = shape.block_size, shape.max_num_batched_tokens, shape.max_model_len
    bs_cfg = read_range(cfg, "prompt", "bs", (1, 1, mnps, math.ceil(mnps / 4), 25))
    q_cfg = read_range(cfg, "prompt", "query", (bs, bs, mnbt, math.ceil(mnbt / 4), 25))
    max_ctx = math.ceil((mml - q_cfg[0]) / bs)
    ctx_pad = math.ceil(mnbt / bs)
    if cfg.merged_prefill:
        ctx_cfg = read_range(cfg, "prompt", "ctx", (0, 4, max_ctx * mnps, ctx_pad, 25))
        return (1, 1, 1, bs_cfg[3], bs_cfg[4]), (q_cfg[0], q_cfg[1] * 4, mnbt, q_cfg[3], q_cfg[4]), tuple(ctx_cfg)
    return tuple(bs_cfg), tuple(q_cfg), tuple(read_range(cfg, "prompt", "ctx", (0, 2, max_ctx, ctx_pad, 25)))


def decode_cfgs(cfg: BucketingConfig, shape: EngineShape) -> tuple[Cfg, Cfg, Cfg]:
    """get_decode_cfgs: the block minimum is compared with the KV blocks, not with the block max (unlike linear)."""
    mns, bs, mml, kv = shape.max_num_seqs, shape.block_size, shape.max_model_len, shape.num_kv_blocks
    conti = cfg.contiguous_pa
    bs_cfg = read_range(cfg, "decode", "bs", (1, 2, mns, math.ceil(mns / 4), 25))
    max_blocks = kv if conti else max(math.ceil(mml * mns / bs), bs)
    block = read_range(cfg, "decode", "block", (bs, bs, max_blocks, math.ceil(max_blocks / 4), 25))
    if conti and block[2] > kv:
        block[2] = kv
    if block[0] > kv:
        block[0] = max(1, kv - block[1])
    return tuple(bs_cfg), (1, 1, 1, 1, 0), tuple(block)


def pad_range(bmin: int, bstep: int, bmax: int, pad_max: int, pad_percent: int, what: str) -> list[int]:
    # padding_aware.py warmup_range_with_limits @ 091bbadd: doubling up to bstep, then keep a multiple of bstep
    # only where skipping it would exceed pad_percent or pad_max of padding (or it is a multiple of pad_max).
    if pad_max == 0:
        pad_max = bmax
    if bmin > bmax:
        raise ConfigError(f"{what}: min {bmin} > max {bmax}; vllm-gaudi asserts min <= max (padding-aware); "
                          f"accepted: what sets the max at {bmin} or more, or a smaller min")  # fmt: skip
    if bstep <= 0:
        raise ConfigError(f"{what}: step {bstep} is invalid; accepted: step >= 1 (vllm-gaudi asserts it)")
    if not 0 <= pad_percent <= 50:
        raise ConfigError(f"{what}: pad_percent {pad_percent} is invalid; accepted: 0..50 (vllm-gaudi asserts it)")
    if bmin < 0:
        raise ConfigError(f"{what}: min {bmin} is invalid; accepted: min >= 0 (vllm-gaudi would never finish)")
    out = [bmin]
    current = bmin
    while current <= bmax:
        last = out[-1]
        if current <= bstep:
            nxt = last * 2 or 1
            if nxt <= bmax:
                out.append(nxt)
        else:
            nxt = current + bstep
            padding = nxt - last - 1
            if pad_max == 0:
                raise ConfigError(f"{what}: pad_max 0 with max 0 divides by zero in vllm-gaudi")
            keep = padding / nxt > pad_percent / 100.0 or padding > pad_max or current % pad_max == 0
            if keep and current != last:
                out.append(current)
        current = nxt
    if out[-1] != bmax:
        out.append(bmax)
    return out

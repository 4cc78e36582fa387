"""vllm-gaudi's linear strategy (``VLLM_BUCKETING_STRATEGY=lin``), as
``vllm_gaudi/extension/bucketing/linear.py`` @ 091bbadd computes it (our own code): its range configurations (which
honour the ``VLLM_*_BUCKET_{MIN,STEP,MAX}`` variables) and ``warmup_range``.
"""

from __future__ import annotations

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes.vllm_gaudi.config import BucketingConfig, Cfg, read_range

__all__ = ["decode_cfgs", "lin_range", "prompt_cfgs"]


def prompt_cfgs(cfg: BucketingConfig, shape: EngineShape, mnps: int) -> tuple[Cfg, Cfg, Cfg]:
    """get_prompt_cfgs: (batch, query, context) as (min, step, max)."""
    bs, mnbt, mml = shape.block_size, shape.max_num_batched_tokens, shape.max_model_len
    bs_cfg = read_range(cfg, "prompt", "bs", (1, 1, mnps))
    q_cfg = read_range(cfg, "prompt", "query", (bs, bs, mnbt))
    max_ctx = (mml - q_cfg[0]) // bs
    if cfg.merged_prefill:
        ctx_cfg = read_range(cfg, "prompt", "ctx", (0, 4, max_ctx * mnps))
        return (1, 1, 1), (q_cfg[0], q_cfg[1] * 4, mnbt), tuple(ctx_cfg)
    return tuple(bs_cfg), tuple(q_cfg), tuple(read_range(cfg, "prompt", "ctx", (0, 1, max_ctx)))


def decode_cfgs(cfg: BucketingConfig, shape: EngineShape) -> tuple[Cfg, Cfg, Cfg]:
    """get_decode_cfgs: no clamp to the KV cache unless contiguous PA."""
    mns, bs, mml, kv = shape.max_num_seqs, shape.block_size, shape.max_model_len, shape.num_kv_blocks
    conti = cfg.contiguous_pa
    bs_cfg = read_range(cfg, "decode", "bs", (1, 32, mns))
    max_blocks = kv if conti else max((mml * mns) // bs, bs)
    block = read_range(cfg, "decode", "block", (1, bs, max_blocks))
    if cfg.release.lin_clamp_contiguous_only:
        if conti and block[2] > kv:
            block[2] = kv
        if block[0] > block[2]:
            block[0] = max(1, block[2] - block[1])
    elif block[2] > kv:  # before v0.21.0: clamped to the KV blocks whatever the PA, the min only then
        block[2] = kv
        if block[0] > kv:
            block[0] = max(1, kv - block[1])
    return tuple(bs_cfg), (1, 1, 1), tuple(block)


def lin_range(bmin: int, bstep: int, bmax: int, what: str) -> list[int]:
    # linear.py warmup_range @ 091bbadd: doubling from bmin while below bstep, then every bstep up to bmax;
    # 0 as bmin means "start at bstep and add a 0 bucket".
    if bmin > bmax:
        raise ConfigError(f"{what}: min {bmin} > max {bmax}; vllm-gaudi asserts min <= max (linear strategy); "
                          f"accepted: what sets the max at {bmin} or more, or a smaller min")  # fmt: skip
    add_zero = bmin == 0
    if add_zero:
        if bmax == 0:
            return [0]
        bmin = bstep
    if bstep <= 0 or bmin < 0:
        raise ConfigError(f"{what}: step {bstep} / min {bmin} is invalid; accepted: step >= 1, min >= 0")
    ramp: list[int] = []
    value = bmin
    while value < bstep and value <= bmax:
        ramp.append(value)
        value *= 2
        if value == 0:  # bmin 0 cannot reach here; guard against a loop anyway
            break
    out = [b for b in ramp + list(range(bstep, bmax + 1, bstep)) if b >= bmin]
    if add_zero:
        out.append(0)
    return out

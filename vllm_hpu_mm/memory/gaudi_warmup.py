"""What vllm-gaudi warms up: an exact, pure model of its prompt/decode bucketing and its multimodal warm-up.

Modelled on vllm-gaudi main @ 091bbadd (``VLLM_GAUDI_COMMIT``), read file by file; our own code, not a copy:

- ``vllm_gaudi/extension/bucketing/common.py``: ``HPUBucketingManager.generate_{prompt,decode}_buckets``,
  ``generate_buckets`` (its filters, the long-context "edge" buckets, the decode corrector), spec-decode buckets;
- ``extension/bucketing/{exponential,linear,padding_aware}.py``: the strategies' configurations (here) and
  ranges (:mod:`.gaudi_ranges`);
- ``extension/bucketing/file_strategy.py``: ``VLLM_BUCKETING_FROM_FILE`` (see :mod:`.gaudi_bucket_file`);
- ``extension/features.py``, ``extension/environment.py``, ``extension/config.py``: how the variables are parsed
  (``int()``, its ``boolean()``) and the derived ``use_contiguous_pa`` / ``merged_prefill`` (:mod:`.gaudi_config`);
- ``v1/worker/hpu_model_runner.py``: ``max_num_prefill_seqs`` (``VLLM_PROMPT_BS_BUCKET_MAX``, default 1),
  ``warmup_model`` (what is generated, when warm-up is skipped), ``warmup_graphs``;
- vision: ``extension/bucketing/vision.py`` and ``warmup_multimodal_graphs`` (see :mod:`.gaudi_vision`).

Nothing here imports vllm, torch or habana_frameworks, and nothing here was run on Gaudi. The harness
``benchmarks/vllm_gaudi_bucket_counts.py`` checks this model against vllm-gaudi's own code on CPU.

Run-time inputs we cannot know before launch: ``EngineShape.num_kv_blocks`` (vllm-gaudi sets it from the KV cache
it allocates from free memory after the weights load; decode buckets depend on it under every strategy) and, for
vision, the model's patch size (read from the loaded tower; 14 for Qwen2.5-VL). Callers pass estimates.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.memory.gaudi_bucket_file import bucket_file, parse_bucket_file
from vllm_hpu_mm.memory.gaudi_config import (
    LONG_CTX_THRESHOLD,
    PARAMS,
    RANGE_VARIABLES,
    STRATEGIES,
    VLLM_GAUDI_COMMIT,
    Bucket,
    BucketingConfig,
    EngineShape,
    config_from_env,
    effective_strategy,
    var_name,
    warmup_enabled,
)
from vllm_hpu_mm.memory.gaudi_ranges import exp_range, lin_range, pad_range
from vllm_hpu_mm.memory.gaudi_vision import (
    VisionWarmup,
    format_resolutions,
    parse_resolutions,
    vision_buckets_from_env,
    vision_graph_patches,
    vision_warmup,
)

__all__ = [
    "LONG_CTX_THRESHOLD",
    "RANGE_VARIABLES",
    "STRATEGIES",
    "VLLM_GAUDI_COMMIT",
    "BucketingConfig",
    "EngineShape",
    "VisionWarmup",
    "bucket_file",
    "config_from_env",
    "decode_buckets",
    "effective_strategy",
    "format_resolutions",
    "overridden_variables",
    "parse_bucket_file",
    "parse_resolutions",
    "prompt_buckets",
    "vision_buckets_from_env",
    "vision_graph_patches",
    "vision_warmup",
    "warmup_enabled",
    "warned_variables",
]

# --- per-strategy configurations -----------------------------------------------------------------------------------

Cfg = tuple[int, ...]


def _read(cfg: BucketingConfig, phase: str, dim: str, defaults: Cfg) -> list[int]:
    # linear.py / padding_aware.py read_bucket_settings @ 091bbadd: env value or default per parameter; an unset
    # QUERY parameter falls back to the same SEQ parameter (deprecated spelling).
    out = []
    for param, default in zip(PARAMS, defaults, strict=False):
        value = cfg.setting(var_name(f"{phase}_{dim}", param))
        if value is None and dim == "query":
            value = cfg.setting(var_name(f"{phase}_seq", param))
        out.append(default if value is None else value)
    return out


def _prompt_cfgs(cfg: BucketingConfig, strategy: str, shape: EngineShape, mnps: int) -> tuple[Cfg, Cfg, Cfg]:
    bs, mnbt, mml = shape.block_size, shape.max_num_batched_tokens, shape.max_model_len
    merged = cfg.merged_prefill
    if strategy == "exp":  # exponential.py get_prompt_cfgs
        qmin = 1 if cfg.prompt_query_min == 1 else bs
        q_limit = math.ceil(math.log2(mnbt))
        span = mnbt if mml >= LONG_CTX_THRESHOLD else qmin
        max_ctx = max(1, (mml - span) // bs)
        ctx_limit = 2 if max_ctx == 1 else math.ceil(math.log2(max_ctx)) + 1
        if merged:
            return (1, 1, 1, 1), (qmin, bs * 4, mnbt, q_limit), (0, 4, max_ctx * mnps, ctx_limit)
        return (1, 2, mnps, math.ceil(math.log2(mnps)) + 1), (qmin, bs, mnbt, q_limit), (0, 1, max_ctx, ctx_limit)
    if strategy == "lin":  # linear.py get_prompt_cfgs
        bs_cfg = _read(cfg, "prompt", "bs", (1, 1, mnps))
        q_cfg = _read(cfg, "prompt", "query", (bs, bs, mnbt))
        max_ctx = (mml - q_cfg[0]) // bs
        if merged:
            ctx_cfg = _read(cfg, "prompt", "ctx", (0, 4, max_ctx * mnps))
            return (1, 1, 1), (q_cfg[0], q_cfg[1] * 4, mnbt), tuple(ctx_cfg)
        return tuple(bs_cfg), tuple(q_cfg), tuple(_read(cfg, "prompt", "ctx", (0, 1, max_ctx)))
    # padding_aware.py get_prompt_cfgs
    bs_cfg = _read(cfg, "prompt", "bs", (1, 1, mnps, math.ceil(mnps / 4), 25))
    q_cfg = _read(cfg, "prompt", "query", (bs, bs, mnbt, math.ceil(mnbt / 4), 25))
    max_ctx = math.ceil((mml - q_cfg[0]) / bs)
    ctx_pad = math.ceil(mnbt / bs)
    if merged:
        ctx_cfg = _read(cfg, "prompt", "ctx", (0, 4, max_ctx * mnps, ctx_pad, 25))
        return (1, 1, 1, bs_cfg[3], bs_cfg[4]), (q_cfg[0], q_cfg[1] * 4, mnbt, q_cfg[3], q_cfg[4]), tuple(ctx_cfg)
    return tuple(bs_cfg), tuple(q_cfg), tuple(_read(cfg, "prompt", "ctx", (0, 2, max_ctx, ctx_pad, 25)))


def _decode_cfgs(cfg: BucketingConfig, strategy: str, shape: EngineShape) -> tuple[Cfg, Cfg, Cfg]:
    mns, bs, mml, kv = shape.max_num_seqs, shape.block_size, shape.max_model_len, shape.num_kv_blocks
    conti = cfg.contiguous_pa
    if strategy == "exp":  # exponential.py get_decode_cfgs: worst case, clamped to the KV cache (3x without CPA)
        max_blocks = math.ceil(mml / bs) * mns
        if conti:
            max_blocks = min(kv, max_blocks)
        elif not shape.skip_decode_block_clamp:
            max_blocks = min(max_blocks, kv * 3)
        limit = math.ceil(math.log2(max_blocks)) + 1
        if not conti and kv > 0 and max_blocks > kv * 3:
            limit += math.ceil(math.log2(max_blocks / (kv * 3))) + 1
        return (1, 2, mns, math.ceil(math.log2(mns)) + 1), (1, 1, 1, 1), (1, mns, max_blocks, limit)
    if strategy == "lin":  # linear.py get_decode_cfgs: no clamp to the KV cache unless contiguous PA
        bs_cfg = _read(cfg, "decode", "bs", (1, 32, mns))
        max_blocks = kv if conti else max((mml * mns) // bs, bs)
        block = _read(cfg, "decode", "block", (1, bs, max_blocks))
        if conti and block[2] > kv:
            block[2] = kv
        if block[0] > block[2]:
            block[0] = max(1, block[2] - block[1])
        return tuple(bs_cfg), (1, 1, 1), tuple(block)
    # padding_aware.py get_decode_cfgs
    bs_cfg = _read(cfg, "decode", "bs", (1, 2, mns, math.ceil(mns / 4), 25))
    max_blocks = kv if conti else max(math.ceil(mml * mns / bs), bs)
    block = _read(cfg, "decode", "block", (bs, bs, max_blocks, math.ceil(max_blocks / 4), 25))
    if conti and block[2] > kv:
        block[2] = kv
    if block[0] > kv:  # compared with the KV blocks, not with the block max (unlike linear)
        block[0] = max(1, kv - block[1])
    return tuple(bs_cfg), (1, 1, 1, 1, 0), tuple(block)


def _range(cfg: BucketingConfig, strategy: str, rng: Cfg, what: str) -> list[int]:
    if strategy == "exp":
        return sorted(exp_range(rng[0], rng[1], rng[2], rng[3], cfg.contiguous_pa))
    if strategy == "lin":
        return sorted(lin_range(rng[0], rng[1], rng[2], what))
    return sorted(pad_range(rng[0], rng[1], rng[2], rng[3], rng[4], what))


# --- bucket generation (common.py generate_buckets) -----------------------------------------------------------------


def _prompt_filter(cfg: BucketingConfig, shape: EngineShape, mnps: int) -> Callable[[int, int, int], bool]:
    mml, blk = shape.max_model_len, shape.block_size
    if cfg.merged_prefill:
        return lambda b, q, c: c <= mnps * ((mml - math.floor(q / mnps)) // blk)
    ctx_cap = math.ceil((mml - 1) / blk)
    return lambda b, q, c: c <= ctx_cap and q <= mml and b * q <= shape.max_num_batched_tokens


def _decode_fix(cfg: BucketingConfig, shape: EngineShape) -> Callable[[int, int, int], Bucket | None]:
    if cfg.contiguous_pa:
        return lambda b, q, c: (b, q, c)
    per_seq = math.ceil(shape.max_model_len / shape.block_size)
    return lambda b, q, c: (b, q, min(c, b * per_seq)) if b <= c else None


def _generate(
    cfg: BucketingConfig,
    shape: EngineShape,
    is_prompt: bool,
    ranges: tuple[list[int], list[int], list[int]] | None,
    file_buckets: list[Bucket] | None,
    mnps: int,
) -> list[Bucket]:
    prompt_ok = _prompt_filter(cfg, shape, mnps)
    decode_fix = _decode_fix(cfg, shape)

    def admit(b: int, q: int, c: int) -> Bucket | None:
        if is_prompt:
            return (b, q, c) if prompt_ok(b, q, c) else None
        return decode_fix(b, q, c)

    out: set[Bucket] = set()
    if file_buckets is not None:
        out = {k for k in (admit(*f) for f in file_buckets) if k is not None}
    elif ranges is not None:
        bs_range, query_range, ctx_range = ranges
        if is_prompt and shape.mamba_chunk_size > 0 and shape.mamba_chunk_size_is_explicit:
            m = shape.mamba_chunk_size
            query_range = [math.ceil(q / m) * m for q in query_range]
        if not bs_range or not ctx_range:
            raise ConfigError("a bucket range is empty; vllm-gaudi fails on max() of no buckets")
        top_ctx = max(ctx_range)
        long_ctx = is_prompt and shape.max_model_len >= LONG_CTX_THRESHOLD
        ctx_cap = cfg.prompt_ctx_max
        for b in set(bs_range):
            for c0 in set(ctx_range):
                c = c0
                for q in query_range:
                    if long_ctx and c0 == top_ctx:
                        # the largest context is replaced per query by what still fits max_model_len; the
                        # replacement carries over to the next query when VLLM_PROMPT_CTX_BUCKET_MAX rejects it
                        edge = (shape.max_model_len - q) // shape.block_size
                        if edge >= 0 and (ctx_cap is None or edge < ctx_cap):
                            c = edge
                    k = admit(b, q, c)
                    if k is not None:
                        out.add(k)
    if not out:
        phase = "prompt" if is_prompt else "decode"
        raise ConfigError(
            f"vllm-gaudi would generate 0 {phase} buckets from this configuration and fail at start-up "
            "('Please adjust the bucketing configuration')"
        )
    return sorted(out)


def _prefill_seqs(cfg: BucketingConfig, shape: EngineShape) -> int:
    # hpu_model_runner.py __init__ @ 091bbadd: merged prefill uses max_num_seqs, else VLLM_PROMPT_BS_BUCKET_MAX or 1.
    if cfg.merged_prefill:
        return shape.max_num_seqs
    mnps = 1 if cfg.prompt_bs_max is None else cfg.prompt_bs_max
    if mnps < 1:
        raise ConfigError(
            f"VLLM_PROMPT_BS_BUCKET_MAX={mnps} is invalid; accepted: an integer >= 1 (vllm-gaudi fails on it)"
        )
    return mnps


def _file_buckets(cfg: BucketingConfig) -> tuple[list[Bucket], list[Bucket]]:
    if cfg.file_text is None:
        raise ConfigError(
            f"VLLM_BUCKETING_FROM_FILE={cfg.from_file!r}: the file's content is needed; "
            "pass it as BucketingConfig.file_text"
        )
    return parse_bucket_file(cfg.file_text)


def prompt_buckets(cfg: BucketingConfig, shape: EngineShape) -> tuple[Bucket, ...]:
    """(batch, query_len, ctx_blocks) prompt buckets exactly as vllm-gaudi 091bbadd generates them, sorted.

    Empty when VLLM_ENABLE_BUCKETING is off. VLLM_SKIP_WARMUP keeps them generated but warms none
    (:func:`warmup_enabled`). hpu_model_runner.py warmup_graphs then skips a bucket whose query length exceeds
    max_num_batched_tokens, which only a bucket file under merged prefill can produce (not subtracted here).
    """
    if not cfg.enable_bucketing:
        return ()
    mnps = _prefill_seqs(cfg, shape)
    strategy = effective_strategy(cfg)
    if strategy == "file":
        buckets = _generate(cfg, shape, True, None, _file_buckets(cfg)[0], mnps)
    else:
        bs_cfg, q_cfg, ctx_cfg = _prompt_cfgs(cfg, strategy, shape, mnps)
        ranges = (
            _range(cfg, strategy, bs_cfg, "prompt batch size range"),
            _range(cfg, strategy, q_cfg, "prompt query range"),
            _range(cfg, strategy, ctx_cfg, "prompt context range"),
        )
        buckets = _generate(cfg, shape, True, ranges, None, mnps)
    if cfg.sliding_window:  # common.py generate_prompt_buckets: FusedSDPA slicing drops unsliceable long queries
        size = 1024 if cfg.slice_size is None else cfg.slice_size
        threshold = 8192 if cfg.slice_threshold is None else cfg.slice_threshold
        buckets = [k for k in buckets if k[2] != 0 or k[1] < threshold or k[1] % size == 0]
    return tuple(buckets)


def _spec_decode(cfg: BucketingConfig, shape: EngineShape, seeds: list[Bucket]) -> list[Bucket]:
    # common.py generate_spec_decode_buckets @ 091bbadd
    tokens = 1 + shape.num_speculative_tokens
    per_seq = math.ceil(shape.max_model_len / shape.block_size)

    def fix(b: int, q: int, c: int) -> Bucket:
        return (b, q, c) if cfg.contiguous_pa else (b, q, min(c, b * per_seq))

    out = set(seeds)
    for b, q, c in seeds:
        if b * tokens <= c:
            out.add(fix(b * tokens, q, c))
        out.add(fix(b * tokens, q, c * tokens))
    return sorted(out)


def decode_buckets(cfg: BucketingConfig, shape: EngineShape) -> tuple[Bucket, ...]:
    """(batch, 1, ctx_blocks) decode buckets exactly as vllm-gaudi 091bbadd generates them, sorted.

    Depends on ``shape.num_kv_blocks``, a run-time number (see :class:`EngineShape`). With speculative decoding
    the seeds are expanded as vllm-gaudi does.
    """
    if not cfg.enable_bucketing:
        return ()
    mnps = _prefill_seqs(cfg, shape)
    strategy = effective_strategy(cfg)
    if strategy == "file":
        buckets = _generate(cfg, shape, False, None, _file_buckets(cfg)[1], mnps)
    else:
        bs_cfg, q_cfg, blk_cfg = _decode_cfgs(cfg, strategy, shape)
        blocks = _range(cfg, strategy, blk_cfg, "decode block range")
        if cfg.contiguous_pa and blocks[-1] < shape.num_kv_blocks:
            blocks.append(shape.num_kv_blocks)
        ranges = (
            _range(cfg, strategy, bs_cfg, "decode batch size range"),
            _range(cfg, strategy, q_cfg, "decode query range"),
            blocks,
        )
        buckets = _generate(cfg, shape, False, ranges, None, mnps)
    if shape.num_speculative_tokens:
        buckets = _spec_decode(cfg, shape, buckets)
    return tuple(buckets)


# --- which variables count -------------------------------------------------------------------------------------------


def warned_variables(cfg: BucketingConfig) -> tuple[str, ...]:
    """The variables vllm-gaudi's exponential strategy warns it will overwrite (exponential.py
    check_for_user_flags @ 091bbadd): the set ones among ``VLLM_PROMPT_{BS,SEQ}_BUCKET_{MIN,STEP,MAX}`` and
    ``VLLM_DECODE_{BS,BLOCK}_BUCKET_{MIN,STEP,MAX}``. It names VLLM_PROMPT_BS_BUCKET_MAX although that one still
    counts (it sets the prefill batch size)."""
    if effective_strategy(cfg) != "exp" or not cfg.enable_bucketing:
        return ()
    dims = ("prompt_bs", "prompt_seq", "decode_bs", "decode_block")
    return tuple(v for d in dims for p in ("min", "step", "max") if cfg.setting(v := var_name(d, p)) is not None)


def _counted(cfg: BucketingConfig, strategy: str) -> set[str]:
    """Range variables that can change the generated buckets under ``strategy``."""
    counted = {"VLLM_PROMPT_BS_BUCKET_MAX", "VLLM_PROMPT_CTX_BUCKET_MAX"}  # prefill batch size; edge-ctx cap
    if strategy == "file":
        return {"VLLM_PROMPT_BS_BUCKET_MAX"}  # read by the runner (max prefill batch), not by the file path
    if strategy == "exp":
        if cfg.prompt_query_min == 1:
            counted.add("VLLM_PROMPT_QUERY_BUCKET_MIN")
        return counted
    params = ("min", "step", "max") if strategy == "lin" else PARAMS
    for dim in ("prompt_bs", "prompt_query", "prompt_ctx", "decode_bs", "decode_block"):
        counted.update(var_name(dim, p) for p in params)
    for p in params:  # a SEQ parameter counts only where its QUERY twin is unset
        if cfg.setting(var_name("prompt_query", p)) is None:
            counted.add(var_name("prompt_seq", p))
    if cfg.merged_prefill:  # merged prefill replaces the batch range (1, 1, 1) and the query max
        counted -= {var_name("prompt_bs", p) for p in PARAMS if p != "max"}
        counted -= {var_name("prompt_query", "max"), var_name("prompt_seq", "max")}
    return counted


def overridden_variables(cfg: BucketingConfig) -> tuple[str, ...]:
    """Set range variables (and strategy variables) that have no effect on what vllm-gaudi warms.

    Under ``exp`` (the default) every range variable is overwritten except VLLM_PROMPT_BS_BUCKET_MAX (prefill batch
    size), VLLM_PROMPT_CTX_BUCKET_MAX (caps the long-context edge buckets) and VLLM_PROMPT_QUERY_BUCKET_MIN=1;
    ``lin`` ignores the PAD_* variables; a bucket file makes every range variable and the strategy moot.
    VLLM_PROMPT_BS_BUCKET_MAX is never listed: the runner always reads it (max prefill batch).
    """
    strategy = effective_strategy(cfg)
    out = [v for v in cfg.set_variables() if v not in _counted(cfg, strategy)]
    if strategy == "file":
        out.append("VLLM_BUCKETING_STRATEGY")
        if cfg.exponential_bucketing is not None:
            out.append("VLLM_EXPONENTIAL_BUCKETING")
    elif cfg.exponential_bucketing is not None and strategy != cfg.strategy:
        out.append("VLLM_BUCKETING_STRATEGY")
    if not cfg.enable_bucketing:
        out = [*cfg.set_variables(), "VLLM_BUCKETING_STRATEGY"]
    return tuple(dict.fromkeys(out))

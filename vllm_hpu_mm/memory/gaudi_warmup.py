"""What vllm-gaudi warms up: an exact, pure model of its prompt/decode bucketing and its multimodal warm-up.

Modelled on vllm-gaudi main @ 091bbadd (``VLLM_GAUDI_COMMIT``), read file by file; our own code, not a copy:

- ``vllm_gaudi/extension/bucketing/common.py``: ``HPUBucketingManager.generate_{prompt,decode}_buckets``,
  ``generate_buckets`` (its filters, the long-context "edge" buckets, the decode corrector), spec-decode buckets;
- ``extension/bucketing/{exponential,linear,padding_aware}.py``: the three strategies' ranges;
- ``extension/bucketing/file_strategy.py``: ``VLLM_BUCKETING_FROM_FILE`` (see :mod:`.gaudi_bucket_file`);
- ``extension/features.py``, ``extension/environment.py``, ``extension/config.py``: how the variables are parsed
  (``int()``, its ``boolean()``) and the derived ``use_contiguous_pa`` / ``merged_prefill``;
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

import dataclasses
import math
from collections.abc import Callable, Mapping

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.memory.gaudi_bucket_file import bucket_file, parse_bucket_file
from vllm_hpu_mm.memory.gaudi_vision import (
    VisionWarmup,
    format_resolutions,
    parse_resolutions,
    vision_buckets_from_env,
    vision_graph_patches,
    vision_warmup,
)

__all__ = [
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

VLLM_GAUDI_COMMIT = "091bbadda10bee4fd3f6d0efc1844d2610dd2707"
STRATEGIES = ("exp", "lin", "pad")
#: extension/bucketing/common.py and exponential.py @ 091bbadd: at or above this max_model_len the exponential
#: strategy shrinks its context range and common.generate_buckets adds one "edge" context per query length.
LONG_CTX_THRESHOLD = 8192

Bucket = tuple[int, int, int]

_DIMS = ("prompt_bs", "prompt_query", "prompt_seq", "prompt_ctx", "decode_bs", "decode_block")
_PARAMS = ("min", "step", "max", "pad_max", "pad_percent")


def _var(dim: str, param: str) -> str:
    return f"VLLM_{dim.upper()}_BUCKET_{param.upper()}"


#: The 30 range variables vllm-gaudi declares (extension/features.py get_user_flags @ 091bbadd), in its order.
RANGE_VARIABLES: tuple[str, ...] = tuple(_var(d, p) for d in _DIMS for p in _PARAMS)


@dataclasses.dataclass(frozen=True)
class EngineShape:
    """The engine numbers vllm-gaudi's bucketing reads (HPUBucketingManager.initialize, warmup_model @ 091bbadd).

    ``max_num_batched_tokens`` is the scheduler's final value (vLLM fills it in when chunked prefill is off).
    ``num_kv_blocks`` is known only at run time: vllm-gaudi sets it from the KV cache it allocated
    (``bucketing_manager.num_hpu_blocks``), i.e. from free device memory after the weights load.
    ``skip_decode_block_clamp`` is True only for hybrid / interleaved-sliding-window models (not Qwen2.5-VL).
    Prefix caching as vLLM's ``--enable-prefix-caching`` sets it does not enter the bucketing: vllm-gaudi derives
    its own ``prefix_caching``/``use_contiguous_pa`` from environment variables (see :class:`BucketingConfig`).
    """

    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    num_kv_blocks: int
    num_speculative_tokens: int = 0
    mamba_chunk_size: int = 0
    mamba_chunk_size_is_explicit: bool = False
    skip_decode_block_clamp: bool = False

    def __post_init__(self) -> None:
        for name in ("max_model_len", "max_num_seqs", "max_num_batched_tokens", "block_size", "num_kv_blocks"):
            if getattr(self, name) < 1:
                raise ConfigError(f"EngineShape.{name}={getattr(self, name)} is invalid; accepted: an integer >= 1")


@dataclasses.dataclass(frozen=True)
class BucketingConfig:
    """vllm-gaudi's bucketing variables, parsed as it parses them (``None`` = not set).

    Range fields are named ``<phase>_<dim>_<param>`` after ``VLLM_<PHASE>_<DIM>_BUCKET_<PARAM>``; read one by
    variable name with :meth:`setting`. ``file_text`` is the content of the ``VLLM_BUCKETING_FROM_FILE`` file
    (pure functions do not read files: load it yourself, or build it with :func:`bucket_file`).
    """

    strategy: str = "exp"
    exponential_bucketing: bool | None = None  # deprecated VLLM_EXPONENTIAL_BUCKETING, through its boolean()
    from_file: str | None = None
    file_text: str | None = None
    merged_prefill: bool = False  # VLLM_MERGED_PREFILL
    contiguous_pa: bool = False  # use_contiguous_pa: VLLM_CONTIGUOUS_PA, else not VLLM_PREFIX_CACHING
    enable_bucketing: bool = True  # VLLM_ENABLE_BUCKETING
    skip_warmup: bool = False  # VLLM_SKIP_WARMUP
    sliding_window: bool = False  # PT_HPU_SDPA_QKV_SLICE_MODE_FWD
    slice_size: int | None = None  # PT_HPU_SDPA_BC_FACTOR (default 1024)
    slice_threshold: int | None = None  # VLLM_FUSEDSDPA_SLIDE_THLD (default 8192)
    prompt_bs_min: int | None = None
    prompt_bs_step: int | None = None
    prompt_bs_max: int | None = None
    prompt_bs_pad_max: int | None = None
    prompt_bs_pad_percent: int | None = None
    prompt_query_min: int | None = None
    prompt_query_step: int | None = None
    prompt_query_max: int | None = None
    prompt_query_pad_max: int | None = None
    prompt_query_pad_percent: int | None = None
    prompt_seq_min: int | None = None
    prompt_seq_step: int | None = None
    prompt_seq_max: int | None = None
    prompt_seq_pad_max: int | None = None
    prompt_seq_pad_percent: int | None = None
    prompt_ctx_min: int | None = None
    prompt_ctx_step: int | None = None
    prompt_ctx_max: int | None = None
    prompt_ctx_pad_max: int | None = None
    prompt_ctx_pad_percent: int | None = None
    decode_bs_min: int | None = None
    decode_bs_step: int | None = None
    decode_bs_max: int | None = None
    decode_bs_pad_max: int | None = None
    decode_bs_pad_percent: int | None = None
    decode_block_min: int | None = None
    decode_block_step: int | None = None
    decode_block_max: int | None = None
    decode_block_pad_max: int | None = None
    decode_block_pad_percent: int | None = None

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ConfigError(
                f"VLLM_BUCKETING_STRATEGY={self.strategy!r} is invalid; accepted: exactly one of exp, lin, pad"
            )

    def setting(self, variable: str) -> int | None:
        """The parsed value of one range variable, e.g. ``setting("VLLM_PROMPT_BS_BUCKET_MAX")``."""
        if variable not in RANGE_VARIABLES:
            raise KeyError(variable)
        value: int | None = getattr(self, variable.removeprefix("VLLM_").replace("_BUCKET", "").lower())
        return value

    def set_variables(self) -> tuple[str, ...]:
        """The range variables that are set, in vllm-gaudi's declaration order."""
        return tuple(v for v in RANGE_VARIABLES if self.setting(v) is not None)


# --- parsing -----------------------------------------------------------------------------------------------------


def _gaudi_boolean(raw: str) -> bool:
    # extension/config.py boolean() @ 091bbadd: anything outside this list is False, never an error.
    return raw.lower() in ("true", "t", "1", "yes", "y", "on")


def _gaudi_int(name: str, raw: str) -> int:
    # extension/config.py Env(name, int) @ 091bbadd: Python int(), so " 128 ", "+128" and "1_024" are accepted.
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(
            f"{name}={raw!r} is invalid; accepted: an integer as Python int() reads it (e.g. 128); "
            "vllm-gaudi fails at start-up ('failed to process environment variable')"
        ) from None


def config_from_env(env: Mapping[str, str]) -> BucketingConfig:
    """Parse vllm-gaudi's bucketing variables from ``env`` exactly as vllm-gaudi 091bbadd does.

    Every declared variable is parsed at start-up (``finalize_config`` evaluates them all), so a bad integer in
    any range variable fails the launch whatever the strategy: here it raises :class:`ConfigError`.
    """
    fields: dict[str, object] = {}
    for variable in RANGE_VARIABLES:
        raw = env.get(variable)
        if raw is not None:
            fields[variable.removeprefix("VLLM_").replace("_BUCKET", "").lower()] = _gaudi_int(variable, raw)
    strategy = env.get("VLLM_BUCKETING_STRATEGY")
    if strategy is not None:
        if strategy not in STRATEGIES:  # features.py: choice('exp', 'lin', 'pad') on the raw string
            raise ConfigError(
                f"VLLM_BUCKETING_STRATEGY={strategy!r} is invalid; accepted: exactly one of exp, lin, pad "
                "(lower case, no spaces)"
            )
        fields["strategy"] = strategy
    exp_env = env.get("VLLM_EXPONENTIAL_BUCKETING")
    if exp_env is not None:
        fields["exponential_bucketing"] = _gaudi_boolean(exp_env)
    from_file = env.get("VLLM_BUCKETING_FROM_FILE")
    if from_file:  # common.py: `if get_config().VLLM_BUCKETING_FROM_FILE:` so "" means no file
        fields["from_file"] = from_file
    for field, variable in (
        ("merged_prefill", "VLLM_MERGED_PREFILL"),
        ("enable_bucketing", "VLLM_ENABLE_BUCKETING"),
        ("skip_warmup", "VLLM_SKIP_WARMUP"),
        ("sliding_window", "PT_HPU_SDPA_QKV_SLICE_MODE_FWD"),
    ):
        raw = env.get(variable)
        if raw is not None:
            fields[field] = _gaudi_boolean(raw)
    # environment.py _get_prefix + features.py use_contiguous_pa @ 091bbadd: VLLM_CONTIGUOUS_PA wins; otherwise
    # contiguous PA is on only when VLLM_PREFIX_CACHING is set to something false (vLLM's own flag is not read).
    conti = env.get("VLLM_CONTIGUOUS_PA")
    prefix = env.get("VLLM_PREFIX_CACHING")
    if conti is not None:
        fields["contiguous_pa"] = _gaudi_boolean(conti)
    elif prefix is not None:
        fields["contiguous_pa"] = not _gaudi_boolean(prefix)
    for field, variable in (("slice_size", "PT_HPU_SDPA_BC_FACTOR"), ("slice_threshold", "VLLM_FUSEDSDPA_SLIDE_THLD")):
        raw = env.get(variable)
        if raw is not None:
            fields[field] = _gaudi_int(variable, raw)
    return BucketingConfig(**fields)  # type: ignore[arg-type]


def effective_strategy(cfg: BucketingConfig) -> str:
    """``file`` when a bucket file is set, else the strategy after the deprecated override (common.py)."""
    if cfg.from_file is not None:
        return "file"
    if cfg.exponential_bucketing is not None:
        return "exp" if cfg.exponential_bucketing else "lin"
    return cfg.strategy


def warmup_enabled(cfg: BucketingConfig) -> bool:
    """Whether warmup_model warms anything: not with VLLM_ENABLE_BUCKETING off or VLLM_SKIP_WARMUP on."""
    return cfg.enable_bucketing and not cfg.skip_warmup


# --- ranges (one per strategy) -----------------------------------------------------------------------------------


def _exp_range(bmin: int, bstep: int, bmax: int, count: int, contiguous_pa: bool) -> list[int]:
    # exponential.py warmup_range_with_limit @ 091bbadd: `count` values spaced geometrically from bmin (or from
    # bstep when bmin is 0 or 1, which is then added back) to bmax, each rounded up to a multiple of bstep.
    edge = bmin if bmin in (0, 1) else None
    if edge is not None:
        bmin = bstep
    if count <= 0:
        raise ConfigError(f"exponential bucket count {count} is invalid; vllm-gaudi asserts a positive count")
    if count == 1:
        return [bmax]
    values: set[int] = set()
    for i in range(count):
        if i == count - 1 and contiguous_pa:
            values.add(bmax)
        else:
            scaled = bmin * math.pow(bmax / bmin, (1.0 / float(count - 1)) * i)
            values.add(math.ceil(scaled / bstep) * bstep)
    if edge is not None:
        values.add(edge)
    out = sorted(values)
    if out[-1] > bmax:
        out[-1] = bmax
    return out


def _lin_range(bmin: int, bstep: int, bmax: int, what: str) -> list[int]:
    # linear.py warmup_range @ 091bbadd: doubling from bmin while below bstep, then every bstep up to bmax;
    # 0 as bmin means "start at bstep and add a 0 bucket".
    if bmin > bmax:
        raise ConfigError(f"{what}: min {bmin} > max {bmax}; vllm-gaudi asserts min <= max (linear strategy)")
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


def _pad_range(bmin: int, bstep: int, bmax: int, pad_max: int, pad_percent: int, what: str) -> list[int]:
    # padding_aware.py warmup_range_with_limits @ 091bbadd: doubling up to bstep, then keep a multiple of bstep
    # only where skipping it would exceed pad_percent or pad_max of padding (or it is a multiple of pad_max).
    if pad_max == 0:
        pad_max = bmax
    if bmin > bmax:
        raise ConfigError(f"{what}: min {bmin} > max {bmax}; vllm-gaudi asserts min <= max (padding-aware)")
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


# --- per-strategy configurations -----------------------------------------------------------------------------------

Cfg = tuple[int, ...]


def _read(cfg: BucketingConfig, phase: str, dim: str, defaults: Cfg) -> list[int]:
    # linear.py / padding_aware.py read_bucket_settings @ 091bbadd: env value or default per parameter; an unset
    # QUERY parameter falls back to the same SEQ parameter (deprecated spelling).
    out = []
    for param, default in zip(_PARAMS, defaults, strict=False):
        value = cfg.setting(_var(f"{phase}_{dim}", param))
        if value is None and dim == "query":
            value = cfg.setting(_var(f"{phase}_seq", param))
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
        return sorted(_exp_range(rng[0], rng[1], rng[2], rng[3], cfg.contiguous_pa))
    if strategy == "lin":
        return sorted(_lin_range(rng[0], rng[1], rng[2], what))
    return sorted(_pad_range(rng[0], rng[1], rng[2], rng[3], rng[4], what))


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
    (:func:`warmup_enabled`).
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
    return tuple(v for d in dims for p in ("min", "step", "max") if cfg.setting(v := _var(d, p)) is not None)


def _counted(cfg: BucketingConfig, strategy: str) -> set[str]:
    """Range variables that can change the generated buckets under ``strategy``."""
    counted = {"VLLM_PROMPT_BS_BUCKET_MAX", "VLLM_PROMPT_CTX_BUCKET_MAX"}  # prefill batch size; edge-ctx cap
    if strategy == "file":
        return {"VLLM_PROMPT_BS_BUCKET_MAX"}  # read by the runner (max prefill batch), not by the file path
    if strategy == "exp":
        if cfg.prompt_query_min == 1:
            counted.add("VLLM_PROMPT_QUERY_BUCKET_MIN")
        return counted
    params = ("min", "step", "max") if strategy == "lin" else _PARAMS
    for dim in ("prompt_bs", "prompt_query", "prompt_ctx", "decode_bs", "decode_block"):
        counted.update(_var(dim, p) for p in params)
    for p in params:  # a SEQ parameter counts only where its QUERY twin is unset
        if cfg.setting(_var("prompt_query", p)) is None:
            counted.add(_var("prompt_seq", p))
    if cfg.merged_prefill:  # merged prefill replaces the batch range (1, 1, 1) and the query max
        counted -= {_var("prompt_bs", p) for p in _PARAMS if p != "max"}
        counted -= {_var("prompt_query", "max"), _var("prompt_seq", "max")}
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

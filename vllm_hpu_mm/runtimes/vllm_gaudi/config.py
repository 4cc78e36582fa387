"""vllm-gaudi's bucketing inputs: the engine numbers it reads and its variables, parsed as it parses them.

Modelled on vllm-gaudi main @ 091bbadd (our own code): ``vllm_gaudi/extension/features.py`` (the declared
variables), ``extension/config.py`` (``Env``: ``int()``; its ``boolean()``), ``extension/environment.py``
(``prefix_caching``), ``extension/bucketing/common.py`` (strategy choice, the deprecated override),
``v1/worker/hpu_model_runner.py`` (what reaches ``HPUBucketingManager.initialize``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes.vllm_gaudi.releases import MAIN, Release

__all__ = [
    "COMMIT_SHORT",
    "PARAMS",
    "RANGE_VARIABLES",
    "STRATEGIES",
    "VLLM_GAUDI_COMMIT",
    "BucketingConfig",
    "Cfg",
    "config_from_env",
    "effective_strategy",
    "read_range",
    "var_name",
    "warmup_enabled",
]

VLLM_GAUDI_COMMIT = "091bbadda10bee4fd3f6d0efc1844d2610dd2707"
#: The same, short, as messages and docs cite it.
COMMIT_SHORT = VLLM_GAUDI_COMMIT[:8]
STRATEGIES = ("exp", "lin", "pad")
#: One range's configuration: (min, step, max[, count | pad_max, pad_percent]) as a strategy reads it.
Cfg = tuple[int, ...]

_DIMS = ("prompt_bs", "prompt_query", "prompt_seq", "prompt_ctx", "decode_bs", "decode_block")
PARAMS = ("min", "step", "max", "pad_max", "pad_percent")


def var_name(dim: str, param: str) -> str:
    """``var_name("prompt_bs", "max")`` -> ``VLLM_PROMPT_BS_BUCKET_MAX``."""
    return f"VLLM_{dim.upper()}_BUCKET_{param.upper()}"


#: The 30 range variables vllm-gaudi declares (extension/features.py get_user_flags @ 091bbadd), in its order.
RANGE_VARIABLES: tuple[str, ...] = tuple(var_name(d, p) for d in _DIMS for p in PARAMS)


@dataclasses.dataclass(frozen=True)
class BucketingConfig:
    """vllm-gaudi's bucketing variables, parsed as it parses them (``None`` = not set).

    Range fields are named ``<phase>_<dim>_<param>`` after ``VLLM_<PHASE>_<DIM>_BUCKET_<PARAM>``; read one by
    variable name with :meth:`setting`. ``file_text`` is the content of the ``VLLM_BUCKETING_FROM_FILE`` file
    (pure functions do not read files: load it yourself, or build it with :func:`bucket_file`).
    """

    strategy: str = "exp"
    #: VLLM_BUCKETING_STRATEGY as the user set it (None: unset), kept for releases that read it and pick nothing by it.
    strategy_given: str | None = None
    #: The release line whose behaviour is modelled (:mod:`.releases`); main @091bbadd by default.
    release: Release = MAIN
    exponential_bucketing: bool | None = None  # deprecated VLLM_EXPONENTIAL_BUCKETING, through its boolean()
    from_file: str | None = None
    file_text: str | None = None
    #: How the user named the file, for messages: ``--bucket-file FILE`` (default ``VLLM_BUCKETING_FROM_FILE=FILE``).
    file_source: str | None = None
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

    @property
    def file_named(self) -> str:
        """The bucket file as the user named it (the flag or the variable, and the path)."""
        return self.file_source or f"VLLM_BUCKETING_FROM_FILE={self.from_file}"

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


#: Releases before v0.20.0rc0: VLLM_BUCKETING_STRATEGY is a ValueFromList of these names (read, checked, unused).
OLD_STRATEGY_NAMES = ("exponential_bucketing", "linear_bucketing")


def config_from_env(env: Mapping[str, str], release: Release = MAIN) -> BucketingConfig:
    """Parse vllm-gaudi's bucketing variables from ``env`` exactly as ``release`` (main @091bbadd by default) does.

    Every declared variable is parsed at start-up (``finalize_config`` evaluates them all), so a bad integer in
    any range variable fails the launch whatever the strategy: here it raises :class:`ConfigError`. Releases before
    v0.20.0rc0 declare no PAD variables (they are not read) and pick the strategy with VLLM_EXPONENTIAL_BUCKETING.
    """
    fields: dict[str, object] = {"release": release}
    declared = RANGE_VARIABLES if release.strategy_variable else tuple(v for v in RANGE_VARIABLES if "_PAD_" not in v)
    for variable in declared:
        raw = env.get(variable)
        if raw is not None:
            fields[variable.removeprefix("VLLM_").replace("_BUCKET", "").lower()] = _gaudi_int(variable, raw)
    strategy = env.get("VLLM_BUCKETING_STRATEGY")
    if strategy is not None:
        fields["strategy_given"] = strategy
    if not release.strategy_variable:
        if env.get("VLLM_DECODE_BLOCK_BUCKET_LIMIT") is not None:  # declared (int) before v0.20.0rc0, read nowhere
            _gaudi_int("VLLM_DECODE_BLOCK_BUCKET_LIMIT", env["VLLM_DECODE_BLOCK_BUCKET_LIMIT"])
        if strategy is not None and strategy not in OLD_STRATEGY_NAMES:
            raise ConfigError(
                f"VLLM_BUCKETING_STRATEGY={strategy!r} is invalid for {release}; accepted there: "
                f"{' or '.join(OLD_STRATEGY_NAMES)} (it picks nothing: VLLM_EXPONENTIAL_BUCKETING=false selects lin)"
            )
        strategy = None
    if strategy is not None:
        if strategy not in STRATEGIES:  # features.py: choice('exp', 'lin', 'pad') on the raw string
            raise ConfigError(
                f"VLLM_BUCKETING_STRATEGY={strategy!r} is invalid; accepted: exactly one of exp, lin, pad "
                "(lower case, no spaces)"
            )
        fields["strategy"] = strategy
    unified = env.get("VLLM_UNIFIED_ATTN")
    if release.unified_attn_variable and unified is not None and _gaudi_boolean(unified):
        raise ConfigError(
            f"VLLM_UNIFIED_ATTN={unified!r}: {release} then warms unified-attention buckets (query, shared and "
            "unique blocks), which are not modelled; accepted: unset or false"
        )
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


def read_range(cfg: BucketingConfig, phase: str, dim: str, defaults: Cfg) -> list[int]:
    """linear.py / padding_aware.py read_bucket_settings @ 091bbadd: the variable's value or the default per
    parameter; an unset QUERY parameter falls back to the same SEQ parameter (the deprecated spelling)."""
    out = []
    for param, default in zip(PARAMS, defaults, strict=False):
        value = cfg.setting(var_name(f"{phase}_{dim}", param))
        if value is None and dim == "query":
            value = cfg.setting(var_name(f"{phase}_seq", param))
        out.append(default if value is None else value)
    return out


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

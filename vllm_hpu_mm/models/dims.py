"""Model dimensions and the bytes they cost: weights per card (dense, quantized widths), KV-cache bytes per token,
parameters of the language model and of the vision tower. Facts only: reading a ``config.json`` is
:mod:`.config_json`, the public checkpoints are :mod:`.catalog`, finding a model's config is :mod:`.lookup`.
"""

from __future__ import annotations

import dataclasses

from vllm_hpu_mm.errors import ConfigError

__all__ = [
    "DTYPE_BYTES",
    "QUANTIZED_WEIGHT_BITS",
    "ModelDims",
    "VisionDims",
    "dtype_bytes",
    "kv_bytes_per_token",
    "text_parameters",
    "vision_parameters",
    "weight_bytes",
]

#: vLLM 0.32's ``--dtype`` choices (``ModelDType`` in vllm/config/model.py) and their bytes; ``auto`` takes the
#: checkpoint's dtype, bfloat16 for every Qwen2.5-VL checkpoint (vLLM also turns a float32 config into bf16).
DTYPE_BYTES: dict[str, int] = {"auto": 2, "bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}


def dtype_bytes(dtype: str, *, source: str = "--dtype") -> int:
    """Bytes per element of a vLLM ``--dtype`` spelling; anything vLLM's --dtype refuses is refused here."""
    name = dtype.strip().lower()
    if name not in DTYPE_BYTES:
        hint = (
            "; 8-bit weights are --quantization fp8, an 8-bit KV cache is --kv-cache-dtype fp8" if "8" in name else ""
        )
        raise ConfigError(f"{source}={dtype!r} is not a dtype vLLM accepts; accepted: {', '.join(DTYPE_BYTES)}{hint}")
    return DTYPE_BYTES[name]


@dataclasses.dataclass(frozen=True)
class VisionDims:
    depth: int = 32
    hidden_size: int = 1280
    num_heads: int = 16
    intermediate_size: int = 3420
    patch_size: int = 14
    temporal_patch_size: int = 2
    in_channels: int = 3
    spatial_merge_size: int = 2
    window_size: int = 112
    out_hidden_size: int = 3584


@dataclasses.dataclass(frozen=True)
class ModelDims:
    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int
    vision: VisionDims
    #: Where the numbers came from (catalog entry, config.json path), for the plan's output.
    source: str = "catalog"
    #: vLLM's quantization method named by the checkpoint (config.json's quantization_config, or the id).
    quantization: str | None = None
    #: Weight bits of that quantization when the checkpoint states them (GPTQ/AWQ ``bits``).
    quant_weight_bits: int | None = None


def text_parameters(m: ModelDims) -> int:
    """Parameters of the language model: embeddings, decoder layers (q/k/v with bias), final norm, LM head."""
    h, kv_width = m.hidden_size, m.num_kv_heads * m.head_dim
    q_width = m.num_heads * m.head_dim
    attn = h * q_width + q_width + 2 * (h * kv_width + kv_width) + q_width * h
    mlp = 3 * h * m.intermediate_size
    layer = attn + mlp + 2 * h
    embed = m.vocab_size * h
    head = 0 if m.tie_word_embeddings else m.vocab_size * h
    return embed + m.num_layers * layer + h + head


def vision_parameters(v: VisionDims) -> int:
    """Parameters of the vision tower: patch embedding, blocks (qkv/proj/gated MLP with bias), patch merger."""
    d, i = v.hidden_size, v.intermediate_size
    patch = v.in_channels * v.temporal_patch_size * v.patch_size**2 * d
    block = (d * 3 * d + 3 * d) + (d * d + d) + 2 * (d * i + i) + (i * d + d) + 2 * d
    merged = d * v.spatial_merge_size**2
    merger = d + (merged * merged + merged) + (merged * v.out_hidden_size + v.out_hidden_size)
    return patch + v.depth * block + merger


#: Bits per language-model weight under vLLM 0.32's --quantization methods of a known width (int4 methods store
#: ~4 bits plus small scales); the vision tower and embeddings stay at --dtype. Other methods are counted at --dtype.
QUANTIZED_WEIGHT_BITS: dict[str, int] = {
    **dict.fromkeys(("fp8", "fbgemm_fp8", "modelopt", "modelopt_mxfp8", "mxfp8", "experts_int8", "fp8_per_tensor",
                     "fp8_per_block", "fp8_per_channel", "int8_per_channel_weight_only"), 8),
    **dict.fromkeys(("awq", "auto_awq", "awq_marlin", "gptq", "auto_gptq", "gptq_marlin", "modelopt_fp4", "mxfp4",
                     "nvfp4_per_token"), 4),
}  # fmt: skip


def weight_bytes(m: ModelDims, dtype_size: int, tensor_parallel_size: int, quantization: str | None = None) -> int:
    """Weight bytes held by one device: everything sharded evenly over the tensor-parallel ranks.

    With a known ``quantization`` the decoder layers' linear weights are counted at its width (an estimate): the
    checkpoint's own ``bits`` when it states them for that method, else the method's usual width."""
    total = (text_parameters(m) + vision_parameters(m.vision)) * dtype_size
    method = (quantization or "").lower()
    bits = QUANTIZED_WEIGHT_BITS.get(method)
    if bits is not None and m.quant_weight_bits is not None and method == (m.quantization or "").lower():
        bits = m.quant_weight_bits
    if bits is not None:
        h, kv_width, q_width = m.hidden_size, m.num_kv_heads * m.head_dim, m.num_heads * m.head_dim
        linear = m.num_layers * (h * q_width + 2 * h * kv_width + q_width * h + 3 * h * m.intermediate_size)
        total -= linear * dtype_size - linear * bits // 8
    return total // tensor_parallel_size


def kv_bytes_per_token(m: ModelDims, dtype_size: int, tensor_parallel_size: int) -> int:
    """K and V for one token on one device: 2 x layers x kv_heads x head_dim x dtype bytes / TP.

    With TP above the KV-head count vLLM replicates heads, so a device never holds less than one head.
    """
    heads = max(1, m.num_kv_heads // tensor_parallel_size) if tensor_parallel_size > m.num_kv_heads else 0
    if heads:
        return 2 * m.num_layers * heads * m.head_dim * dtype_size
    return 2 * m.num_layers * m.num_kv_heads * m.head_dim * dtype_size // tensor_parallel_size

"""Model dimensions and the bytes they cost: weights per card (dense and mixture-of-experts layers, quantized widths,
expert parallelism), KV-cache bytes per token (grouped-query and multi-head latent attention; sliding-window and
linear-attention layers whose cache does not grow with the sequence), parameters of the language model and of the
vision tower. Facts only: reading a ``config.json`` is :mod:`.config_json`, the vision towers of each family are
:mod:`.families`, the public checkpoints are :mod:`.catalog`, finding a model's config is :mod:`.lookup`.
"""

from __future__ import annotations

import dataclasses

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.families import FAMILIES

__all__ = [
    "DTYPE_BYTES",
    "QUANTIZED_WEIGHT_BITS",
    "TEXT_ONLY",
    "Attention",
    "MoE",
    "ModelDims",
    "VisionDims",
    "active_linear_parameters",
    "dtype_bytes",
    "expert_parameters",
    "expert_weight_bytes",
    "kv_bytes_per_sequence",
    "kv_bytes_per_token",
    "text_parameters",
    "vision_parameters",
    "weight_bytes",
]

#: vLLM 0.32's ``--dtype`` choices (``ModelDType`` in vllm/config/model.py) and their bytes; ``auto`` takes the
#: checkpoint's dtype, bfloat16 for every checkpoint planned here (vLLM also turns a float32 config into bf16).
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
    """A vision tower. The defaults are Qwen2.5-VL's (the reference tower of the cost model); ``depth`` 0 means no
    tower (a text model). ``family`` names the entry of :data:`~.families.FAMILIES` the tower belongs to."""

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
    family: str = "qwen2_5_vl"
    #: Gate/up/down MLP (Qwen2.5-VL) or a two-layer MLP (most ViTs).
    gated_mlp: bool = True
    #: LayerNorm (weight and bias) or RMSNorm (weight only).
    norm_bias: bool = False
    #: The patch embedding has a bias (Conv3d/Conv2d with bias).
    patch_bias: bool = False
    #: Learned position embeddings (Qwen3-VL, SigLIP towers).
    num_position_embeddings: int = 0
    #: Extra mergers for DeepStack features (Qwen3-VL): one per index.
    deepstack_layers: int = 0
    #: Fixed input side in pixels for towers that resize every image (Gemma 3's SigLIP: 896); 0 = native resolution.
    image_size: int = 0
    #: Tokens one image (or tile) costs when fixed (Gemma 3: 256); 0 = from the image size.
    tokens_per_image: int = 0
    #: Parameters of further towers beside this one (DeepSeek-OCR's SAM encoder beside its CLIP tower).
    extra_parameters: int = 0
    #: Ovis: merged patches go through a head onto this many visual words, embedded by their own table, in place of
    #: a merger MLP; 0 = a merger MLP.
    visual_vocab_size: int = 0

    @property
    def present(self) -> bool:
        return self.depth > 0

    @property
    def aligned_processor_applies(self) -> bool:
        """Our 112-px processor and patch buckets (multiples of 64) serve this family (Qwen2.5-VL's processor and
        tower: :attr:`~vllm_hpu_mm.models.families.Family.aligned_processor`)."""
        return any(f.key == self.family and f.aligned_processor for f in FAMILIES)

    @property
    def alignment(self) -> int:
        """Pixels per output token along one side: patch x merge (Qwen2-VL family: 28, Qwen3-VL: 32)."""
        return self.patch_size * self.spatial_merge_size


#: No vision tower.
TEXT_ONLY = VisionDims(depth=0, hidden_size=0, num_heads=1, intermediate_size=0, out_hidden_size=0, family="none")


@dataclasses.dataclass(frozen=True)
class Attention:
    """How a layer's attention is built and what it caches. ``kind``: ``gqa`` (multi-head / grouped-query) or
    ``mla`` (DeepSeek's multi-head latent attention: one compressed latent plus the RoPE key per token, the same on
    every tensor-parallel rank)."""

    kind: str = "gqa"
    #: MLA: the latent and RoPE widths, and the query/key/value head widths.
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    #: q/k/v projections carry a bias (Qwen2 family).
    qkv_bias: bool = False
    #: Layers whose attention looks back at most ``sliding_window`` tokens, and that window.
    sliding_layers: int = 0
    sliding_window: int = 0
    #: Linear-attention / state-space layers (Gated DeltaNet, Mamba): a fixed state per sequence, no KV per token.
    linear_layers: int = 0
    #: Bytes of one linear layer's state per sequence (at the model's dtype), when the config gives its shapes.
    linear_state_elements: int = 0
    #: Full-attention layers with their own head width and KV heads (Gemma 4's ``global_head_dim`` and
    #: ``num_global_key_value_heads``); 0 = the model's own.
    full_head_dim: int = 0
    full_kv_heads: int = 0


@dataclasses.dataclass(frozen=True)
class MoE:
    """Mixture-of-experts MLP. ``layers`` of the decoder layers are sparse; the rest use the dense MLP."""

    num_experts: int = 0
    experts_per_token: int = 0
    expert_intermediate_size: int = 0
    #: Shared experts run for every token: their count and the width of each.
    shared_experts: int = 0
    shared_intermediate_size: int = 0
    layers: int = 0

    @property
    def present(self) -> bool:
        return self.num_experts > 0 and self.layers > 0


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
    attention: Attention = Attention()
    moe: MoE = MoE()
    #: The config's ``model_type`` and first architecture (what vLLM and vllm-gaudi key their behaviour on).
    model_type: str = "qwen2_5_vl"
    architecture: str = "Qwen2_5_VLForConditionalGeneration"
    #: vLLM's derived maximum model length (max positions x a RoPE scaling factor where vLLM applies one).
    derived_max_model_len: int = 0
    #: Group size of int4 scales, when the checkpoint states it.
    quant_group_size: int = 128
    #: The checkpoint quantizes only the routed experts (its ``ignore`` list keeps attention and shared experts at
    #: the model's dtype, as Kimi K2.5's compressed-tensors int4 does).
    quant_experts_only: bool = False
    #: The ``*.json`` files of the local model folder, where a quantization's own config file would be (vLLM 0.32
    #: looks through them); None where the checkpoint is no local folder (catalog, Hugging Face cache).
    folder_json_files: tuple[str, ...] | None = None

    @property
    def max_model_len(self) -> int:
        """The longest ``--max-model-len`` vLLM accepts without ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``."""
        return self.derived_max_model_len or self.max_position_embeddings

    @property
    def attention_layers(self) -> int:
        """Layers that keep a KV cache growing with the sequence."""
        return self.num_layers - self.attention.linear_layers - self.attention.sliding_layers


def _gqa_parameters(h: int, heads: int, kv_heads: int, head_dim: int, bias: bool) -> int:
    q_width, kv_width = heads * head_dim, kv_heads * head_dim
    return h * q_width + 2 * h * kv_width + q_width * h + ((q_width + 2 * kv_width) if bias else 0)


def _attention_parameters(m: ModelDims) -> int:
    """Attention weights over all layers; full-attention layers with their own widths (Gemma 4) counted apart. A
    layer whose K and V share one projection (``attention_k_eq_v``) still holds both on the device: vLLM loads the
    K weights into both slots (``vllm/model_executor/models/gemma4.py``)."""
    h, a = m.hidden_size, m.attention
    if a.kind == "mla":
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        q = (
            (h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * m.num_heads * qk)
            if a.q_lora_rank
            else (h * m.num_heads * qk)
        )
        kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank
        kv += a.kv_lora_rank * m.num_heads * (a.qk_nope_head_dim + a.v_head_dim)
        return m.num_layers * (q + kv + m.num_heads * a.v_head_dim * h)
    usual = _gqa_parameters(h, m.num_heads, m.num_kv_heads, m.head_dim, a.qkv_bias)
    if not (a.full_head_dim or a.full_kv_heads):
        return m.num_layers * usual
    full = _gqa_parameters(h, m.num_heads, a.full_kv_heads or m.num_kv_heads, a.full_head_dim or m.head_dim, a.qkv_bias)
    return (m.num_layers - m.attention_layers) * usual + m.attention_layers * full


def expert_parameters(m: ModelDims) -> int:
    """Parameters of the routed experts (what expert parallelism splits), over all sparse layers."""
    if not m.moe.present:
        return 0
    return m.moe.layers * m.moe.num_experts * 3 * m.hidden_size * m.moe.expert_intermediate_size


def _mlp_parameters(m: ModelDims) -> int:
    """Dense MLPs, shared experts and routers over all layers (routed experts are :func:`expert_parameters`)."""
    h, moe = m.hidden_size, m.moe
    dense_layers = m.num_layers - (moe.layers if moe.present else 0)
    total = dense_layers * 3 * h * m.intermediate_size
    if moe.present:
        shared = moe.shared_experts * 3 * h * moe.shared_intermediate_size
        total += moe.layers * (shared + h * moe.num_experts)
    return total


def text_parameters(m: ModelDims) -> int:
    """Parameters of the language model: embeddings, decoder layers (attention, dense or expert MLPs, two norms),
    final norm, LM head."""
    layer_norms = 2 * m.hidden_size
    body = _attention_parameters(m) + m.num_layers * layer_norms + _mlp_parameters(m) + expert_parameters(m)
    embed = m.vocab_size * m.hidden_size
    head = 0 if m.tie_word_embeddings else m.vocab_size * m.hidden_size
    return embed + body + m.hidden_size + head


#: Ovis's visual vocabulary keeps four indicator words that its head does not score (``INDICATOR_IDS`` of
#: AIDC-AI/Ovis2.5's modeling_ovis2_5.py).
OVIS_INDICATOR_SLOTS = 4


def vision_parameters(v: VisionDims) -> int:
    """Parameters of the vision tower: patch (and position) embedding, blocks (qkv/proj, gated or two-layer MLP with
    biases, two norms), the patch merger (Ovis: its visual head and visual-word table) and any DeepStack mergers. Zero
    for a text model."""
    if not v.present:
        return 0
    d, i = v.hidden_size, v.intermediate_size
    norm = 2 * d if v.norm_bias else d
    patch = v.in_channels * v.temporal_patch_size * v.patch_size**2 * d + (d if v.patch_bias else 0)
    mlp = 3 * (d * i) + 2 * i + d if v.gated_mlp else 2 * (d * i) + i + d
    block = (d * 3 * d + 3 * d) + (d * d + d) + mlp + 2 * norm
    merged = d * v.spatial_merge_size**2
    merger = norm + (merged * merged + merged) + (merged * v.out_hidden_size + v.out_hidden_size)
    if v.visual_vocab_size > OVIS_INDICATOR_SLOTS:  # Ovis: Linear(merged -> scored words) + LayerNorm, the words' table
        words = v.visual_vocab_size - OVIS_INDICATOR_SLOTS
        merger = merged * words + 2 * words + v.visual_vocab_size * v.out_hidden_size
    deepstack = v.deepstack_layers * (2 * merged + merged * merged + merged + merged * v.out_hidden_size)
    return patch + v.num_position_embeddings * d + v.depth * block + merger + deepstack + v.extra_parameters


#: Bits per language-model weight under vLLM 0.32's --quantization methods of a known width (int4 methods store
#: ~4 bits plus small scales); the vision tower and embeddings stay at --dtype. Other methods are counted at --dtype.
QUANTIZED_WEIGHT_BITS: dict[str, int] = {
    **dict.fromkeys(("fp8", "fbgemm_fp8", "modelopt", "modelopt_mxfp8", "mxfp8", "experts_int8", "fp8_per_tensor",
                     "fp8_per_block", "fp8_per_channel", "int8_per_channel_weight_only", "inc", "deepseek_v4_fp8",
                     "compressed-tensors"), 8),
    **dict.fromkeys(("awq", "auto_awq", "awq_marlin", "gptq", "auto_gptq", "gptq_marlin", "modelopt_fp4", "mxfp4",
                     "gpt_oss_mxfp4", "nvfp4_per_token", "moe_wna16"), 4),
}  # fmt: skip
#: Methods whose int weights carry a scale (16 bits) and a zero point per group (AWQ/GPTQ layouts).
_GROUPED = frozenset({"awq", "auto_awq", "awq_marlin", "gptq", "auto_gptq", "gptq_marlin", "moe_wna16"})
#: MX formats: one 8-bit scale per 32 weights.
_MX = frozenset({"mxfp4", "gpt_oss_mxfp4", "mxfp8", "modelopt_mxfp8"})


def _linear_parameters(m: ModelDims) -> int:
    """The decoder layers' linear weights (what a weight quantization stores at its own width)."""
    return _attention_parameters(m) + _mlp_parameters(m) + expert_parameters(m)


def active_linear_parameters(m: ModelDims) -> int:
    """Linear weights one token multiplies through: attention, dense MLPs and shared experts, and of the routed
    experts the ``experts_per_token`` of ``num_experts`` it is routed to (what a step's FLOPs are counted from)."""
    experts = expert_parameters(m)
    routed = experts * m.moe.experts_per_token // m.moe.num_experts if m.moe.present else 0
    return _linear_parameters(m) - experts + routed


def _bits_per_weight(m: ModelDims, method: str) -> float | None:
    bits = QUANTIZED_WEIGHT_BITS.get(method)
    if bits is not None and m.quant_weight_bits is not None and method == (m.quantization or "").lower():
        bits = m.quant_weight_bits
    if bits is None:
        return None
    if method in _GROUPED:
        return bits + (16 + bits) / max(m.quant_group_size, 1)
    if method == "compressed-tensors" and bits < 8:  # symmetric int groups: one 16-bit scale per group
        return bits + 16 / max(m.quant_group_size, 1)
    if method in _MX:
        return bits + 8 / 32
    return float(bits)


def weight_bytes(
    m: ModelDims,
    dtype_size: int,
    tensor_parallel_size: int,
    quantization: str | None = None,
    *,
    expert_parallel_size: int = 0,
) -> int:
    """Weight bytes held by one device: everything sharded evenly over the tensor-parallel ranks, the routed experts
    over ``expert_parallel_size`` ranks instead when expert parallelism is on (vLLM's EP spans TP x DP).

    With a known ``quantization`` the decoder layers' linear weights are counted at its width (an estimate): the
    checkpoint's own ``bits`` when it states them for that method, else the method's usual width, with int4 group
    scales and MX block scales; embeddings, norms and the vision tower stay at ``dtype_size``."""
    method = (quantization or "").lower()
    bits = _bits_per_weight(m, method)
    linear = _linear_parameters(m)
    experts = expert_parameters(m)
    other = text_parameters(m) + vision_parameters(m.vision) - linear

    def at_width(params: int) -> float:
        return params * bits / 8 if bits is not None else params * dtype_size

    quantized_dense = not (m.quant_experts_only and method == (m.quantization or "").lower())
    dense_linear = at_width(linear - experts) if quantized_dense else (linear - experts) * dtype_size
    expert_bytes = at_width(experts)
    ep = expert_parallel_size if expert_parallel_size > 1 else tensor_parallel_size
    return round((other * dtype_size + dense_linear) / tensor_parallel_size + expert_bytes / ep)


def expert_weight_bytes(m: ModelDims, dtype_size: int, tensor_parallel_size: int, quantization: str | None = None,
                        ) -> int:  # fmt: skip
    """Bytes of the routed experts on one device (tensor-parallel sharding), at the quantized width as in
    :func:`weight_bytes`."""
    bits = _bits_per_weight(m, (quantization or "").lower())
    per = bits / 8 if bits is not None else dtype_size
    return round(expert_parameters(m) * per / tensor_parallel_size)


def _per_layer_token_bytes(m: ModelDims, kv_dtype_size: int, tensor_parallel_size: int, *, full: bool) -> float:
    """K and V of one token in one layer on one device; ``full`` picks the full-attention layers' own widths."""
    a = m.attention
    if a.kind == "mla":  # one latent + RoPE key per token, replicated on every rank (no V)
        return (a.kv_lora_rank + a.qk_rope_head_dim) * kv_dtype_size
    kv_heads, head_dim = m.num_kv_heads, m.head_dim
    if full:
        kv_heads, head_dim = a.full_kv_heads or kv_heads, a.full_head_dim or head_dim
    # A device never holds less than one head: TP beyond the KV-head count replicates them.
    per_card = 1 if tensor_parallel_size > kv_heads else kv_heads / tensor_parallel_size
    return 2 * per_card * head_dim * kv_dtype_size


def kv_bytes_per_token(m: ModelDims, dtype_size: int, tensor_parallel_size: int) -> int:
    """K and V of one token on one device over the layers whose cache grows with the sequence: 2 x layers x KV heads
    x head_dim x dtype bytes / TP (GQA; a device never holds less than one head), or layers x (latent + RoPE key) x
    dtype bytes (MLA, not split by TP). Sliding-window and linear-attention layers are :func:`kv_bytes_per_sequence`.
    """
    return round(m.attention_layers * _per_layer_token_bytes(m, dtype_size, tensor_parallel_size, full=True))


def kv_bytes_per_sequence(m: ModelDims, dtype_size: int, tensor_parallel_size: int, max_model_len: int) -> int:
    """What one sequence costs on top of :func:`kv_bytes_per_token` x its length: the sliding-window layers' cache
    (at most the window) and the linear-attention layers' fixed state."""
    a = m.attention
    sliding = (
        a.sliding_layers
        * min(a.sliding_window, max_model_len)
        * _per_layer_token_bytes(m, dtype_size, tensor_parallel_size, full=False)
    )
    state = a.linear_layers * a.linear_state_elements * dtype_size / tensor_parallel_size
    return round(sliding + state)

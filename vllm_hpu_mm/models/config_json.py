"""Any decoder's or vision-language model's ``config.json`` read and validated field by field into
:class:`~.dims.ModelDims`: dense and mixture-of-experts layers (routed and shared experts), grouped-query and latent
(MLA) attention, sliding-window and linear-attention layers, tied embeddings, a nested ``text_config`` /
``vision_config`` (or the family's own section names, :mod:`.families`), and the checkpoint's quantization.

Every field the plan reads is checked for type, integrality and range, and a bad one raises
:class:`~vllm_hpu_mm.errors.ConfigError` naming the file, the key (``vision_config.patch_size``), the bad value and
the accepted form. Optional keys take the Hugging Face defaults when absent (transformers' own config class fills
them first where transformers is installed: :func:`with_transformers_defaults`).
"""

from __future__ import annotations

import builtins
import json
import math
from pathlib import Path
from typing import Any

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.dims import TEXT_ONLY, Attention, ModelDims, MoE, VisionDims
from vllm_hpu_mm.models.families import GENERIC, Family, family_of

__all__ = [
    "MAX_DIM",
    "QWEN25VL_ARCHITECTURE",
    "derived_max_model_len",
    "dims_from_config",
    "quantization_from_config",
    "read_config_json",
    "with_transformers_defaults",
]

#: The largest dimension we accept in a config (int32, as the checkpoints' own tensors are indexed).
MAX_DIM = 2**31 - 1
QWEN25VL_MODEL_TYPE = "qwen2_5_vl"
QWEN25VL_ARCHITECTURE = "Qwen2_5_VLForConditionalGeneration"


def read_config_json(path: Path, *, source: str) -> dict[str, Any]:
    """The parsed JSON object of ``path``; any read, decode or shape problem is a ConfigError naming ``source``."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{source}: cannot read {path}: {exc}; accepted: a readable UTF-8 Hugging Face config.json"
        ) from None
    if not text.strip():
        raise ConfigError(f"{source}: {path} is empty; accepted: a Hugging Face config.json (a JSON object)")
    try:
        cfg = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        raise ConfigError(f"{source}: {path} is not valid JSON ({exc}); accepted: a JSON object") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{source}: {path} holds a JSON {type(cfg).__name__}; accepted: a JSON object")
    return cfg


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a JSON number")


class _Reader:
    """Typed access to one section of a config, with errors naming the file and the dotted key."""

    def __init__(self, section: dict[str, Any], prefix: str, path: Path) -> None:
        self.section, self.prefix, self.path = section, prefix, path

    def _bad(self, key: str, value: Any, accepted: str) -> ConfigError:
        return ConfigError(f"{self.path}: {self.prefix}{key}={value!r} is invalid; accepted: {accepted}")

    def int(self, key: str, default: int | None = None, *, minimum: int = 1) -> int:
        value = self.section.get(key)
        if value is None:
            if default is None:
                raise ConfigError(f"{self.path}: {self.prefix}{key} is missing; accepted: a positive integer")
            return default
        # JSON has one number type: 14.0 is an integer, 14.5 and true are not.
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_DIM:
            lo = "a positive integer" if minimum == 1 else f"an integer from {minimum}"
            raise self._bad(key, value, f"{lo} up to {MAX_DIM}")
        return value

    def opt_int(self, key: str, *, minimum: builtins.int = 0) -> builtins.int | None:
        """An optional integer (``null`` and absence are None)."""
        return None if self.section.get(key) is None else self.int(key, minimum=minimum)

    def first(
        self, keys: tuple[str, ...], default: builtins.int | None = None, *, minimum: builtins.int = 1
    ) -> builtins.int:
        """The first of ``keys`` present (an integer), else ``default``; missing with no default is an error."""
        for key in keys:
            if self.section.get(key) is not None:
                return self.int(key, minimum=minimum)
        if default is None:
            raise ConfigError(f"{self.path}: {self.prefix}{keys[0]} is missing; accepted: a positive integer")
        return default

    def bool(self, key: str, default: bool) -> bool:
        value = self.section.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._bad(key, value, "true or false")
        return value


def _section(cfg: dict[str, Any], key: str, path: Path) -> dict[str, Any] | None:
    value = cfg.get(key)
    if value is not None and not isinstance(value, dict):
        raise ConfigError(f"{path}: {key}={value!r} is invalid; accepted: an object")
    return value


def _quant_section(cfg: dict[str, Any], path: Path) -> dict[str, Any] | None:
    q = cfg.get("quantization_config")
    for nested in ("text_config", "llm_config", "language_config"):
        if q is None and isinstance(cfg.get(nested), dict):
            q = cfg[nested].get("quantization_config")
    if q is not None and not isinstance(q, dict):
        raise ConfigError(f"{path}: quantization_config={q!r} is invalid; accepted: an object with 'quant_method'")
    return q


def quantization_from_config(cfg: dict[str, Any], path: Path) -> tuple[str | None, int | None]:
    """(``quantization_config.quant_method``, its weight ``bits``) as vLLM reads them, or (None, None).
    compressed-tensors states its bits per config group (``config_groups.*.weights.num_bits``)."""
    q = _quant_section(cfg, path)
    if q is None:
        return None, None
    method = q.get("quant_method")
    if not isinstance(method, str) or not method.strip():
        raise ConfigError(
            f"{path}: quantization_config.quant_method={method!r} is invalid; accepted: a method name such as 'awq'"
        )
    bits = q.get("bits")
    groups = q.get("config_groups")
    if bits is None and isinstance(groups, dict):
        widths = {g.get("weights", {}).get("num_bits") for g in groups.values() if isinstance(g, dict)
                  and isinstance(g.get("weights"), dict)}  # fmt: skip
        bits = max((w for w in widths if isinstance(w, int)), default=None)
    if bits is not None and (isinstance(bits, bool) or not isinstance(bits, int) or bits not in (2, 3, 4, 8)):
        raise ConfigError(f"{path}: quantization_config.bits={bits!r} is invalid; accepted: 2, 3, 4 or 8")
    return method.strip().lower(), bits


def _quant_group_size(cfg: dict[str, Any], path: Path) -> int:
    """The group size of the checkpoint's int scales: ``group_size``, or compressed-tensors' per config group."""
    q = _quant_section(cfg, path) or {}
    size = q.get("group_size")
    groups = q.get("config_groups")
    if size is None and isinstance(groups, dict):
        sizes = [w.get("group_size") for g in groups.values() if isinstance(g, dict)
                 and isinstance(w := g.get("weights"), dict)]  # fmt: skip
        size = min((v for v in sizes if isinstance(v, int) and not isinstance(v, bool) and v > 0), default=None)
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 128


def _quant_experts_only(cfg: dict[str, Any], path: Path) -> bool:
    """Whether the quantization leaves attention at the model's dtype (its ``ignore`` list names ``self_attn``):
    then only the routed experts are stored at the quantized width."""
    ignore = (_quant_section(cfg, path) or {}).get("ignore")
    return isinstance(ignore, list) and any(isinstance(i, str) and "self_attn" in i for i in ignore)


#: vLLM 0.32's keys for a model's maximum length (``_get_and_verify_max_len`` in vllm/config/model.py): the smallest
#: present wins.
_MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                 "max_sequence_length", "max_seq_length", "seq_len")  # fmt: skip
#: RoPE types whose ``max_position_embeddings`` is already scaled (vLLM does not multiply by ``factor`` again).
_SCALED_ROPE = frozenset({"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"})
#: vLLM's length when a config names none of the keys.
DEFAULT_MAX_LEN = 2048


def derived_max_model_len(text: dict[str, Any], model_type: str) -> int:
    """vLLM 0.32's derived maximum model length (``vllm/config/model.py`` ``_get_and_verify_max_len``): the smallest
    of the length keys, times the RoPE scaling ``factor`` unless the RoPE type is one that is already scaled (or the
    model is Gemma 3)."""
    lengths = [v for k in _MAX_LEN_KEYS if isinstance(v := text.get(k), int) and not isinstance(v, bool) and v > 0]
    derived = min(lengths) if lengths else DEFAULT_MAX_LEN
    rope = text.get("rope_scaling") or text.get("rope_parameters")
    if isinstance(rope, dict) and "gemma3" not in model_type:
        kind = rope.get("rope_type", rope.get("type", "default"))
        factor = rope.get("factor")
        if kind not in _SCALED_ROPE and isinstance(factor, int | float) and not isinstance(factor, bool) and factor > 0:
            derived = int(derived * factor)
    return derived


def with_transformers_defaults(cfg: dict[str, Any]) -> dict[str, Any]:
    """``cfg`` with transformers' defaults for its ``model_type`` filled in where transformers is installed and
    knows the type (``AutoConfig.for_model``); the raw JSON otherwise. Keys the file states always win."""
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str):
        return cfg
    try:
        from transformers import AutoConfig

        full = AutoConfig.for_model(model_type, **cfg).to_dict()
    except Exception:  # transformers absent, or it cannot build this type: the raw JSON is what we have
        return cfg
    merged = {**full, **cfg}
    for key in ("text_config", "vision_config"):
        if isinstance(full.get(key), dict) and isinstance(cfg.get(key), dict):
            merged[key] = {**full[key], **cfg[key]}
    return merged


#: vLLM 0.32 transformers_utils/configs/deepseek_vl2.py DeepseekVLV2Config: a ``deepseek_vl_v2`` config of these
#: architectures is loaded with this model type (vllm-gaudi's vision table then finds ``deepseek_ocr``).
VLLM_MODEL_TYPE_BY_ARCHITECTURE = (
    ("DeepseekOCRForCausalLM", "deepseek_ocr"),
    ("DeepseekOCR2ForCausalLM", "deepseek_ocr2"),
)


def _model_type(cfg: dict[str, Any], path: Path) -> tuple[str, str]:
    model_type = cfg.get("model_type", "")
    archs = cfg.get("architectures") or []
    if not isinstance(model_type, str):
        raise ConfigError(f"{path}: model_type={model_type!r} is invalid; accepted: a string such as 'qwen2_5_vl'")
    if not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
        raise ConfigError(f"{path}: architectures={archs!r} is invalid; accepted: a list of class names")
    # vLLM renames the model type as it loads the config, and runtimes key on the renamed one
    model_type = next((renamed for arch, renamed in VLLM_MODEL_TYPE_BY_ARCHITECTURE if arch in archs), model_type)
    return model_type, archs[0] if archs else ""


def _text_section(cfg: dict[str, Any], family: Family | None, path: Path) -> tuple[dict[str, Any], str]:
    for key in (*(family.text_sections if family else ()), "text_config", "llm_config", "language_config"):
        section = _section(cfg, key, path)
        if section is not None and ("hidden_size" in section or "num_hidden_layers" in section):
            return section, f"{key}."
    return cfg, ""


def _count_layer_types(t: _Reader, layers: int) -> tuple[int, int]:
    """(sliding-window, linear-attention) layer counts from ``layer_types`` or Gemma 3's ``sliding_window_pattern``."""
    kinds = t.section.get("layer_types")
    if isinstance(kinds, list) and all(isinstance(k, str) for k in kinds):
        return (sum(k == "sliding_attention" for k in kinds[:layers]),
                sum(k in ("linear_attention", "mamba", "gated_delta_net") for k in kinds[:layers]))  # fmt: skip
    pattern = t.section.get("sliding_window_pattern")
    if isinstance(pattern, int) and not isinstance(pattern, bool) and pattern > 1:
        return layers - layers // pattern, 0
    interval = t.section.get("full_attention_interval")
    if isinstance(interval, int) and not isinstance(interval, bool) and interval > 1:
        return 0, layers - layers // interval
    return 0, 0


def _attention(t: _Reader, model_type: str, layers: int) -> Attention:
    sliding, linear = _count_layer_types(t, layers)
    window = t.opt_int("sliding_window") or 0
    if not window:
        sliding = 0
    state = 0
    if linear:
        kh, kd = t.opt_int("linear_num_key_heads") or 0, t.opt_int("linear_key_head_dim") or 0
        vh, vd = t.opt_int("linear_num_value_heads") or 0, t.opt_int("linear_value_head_dim") or 0
        conv = (t.opt_int("linear_conv_kernel_dim") or 4) - 1
        state = vh * kd * vd + conv * (2 * kh * kd + vh * vd)
    bias = t.bool("attention_bias", t.bool("qkv_bias", model_type.startswith(("qwen2", "dots"))))
    if t.section.get("kv_lora_rank") is not None and t.section.get("use_mla", True) is not False:
        return Attention("mla", kv_lora_rank=t.int("kv_lora_rank"), q_lora_rank=t.opt_int("q_lora_rank") or 0,
                         qk_rope_head_dim=t.int("qk_rope_head_dim"), qk_nope_head_dim=t.int("qk_nope_head_dim"),
                         v_head_dim=t.int("v_head_dim"), sliding_layers=sliding, sliding_window=window,
                         linear_layers=linear, linear_state_elements=state)  # fmt: skip
    return Attention("gqa", qkv_bias=bias, sliding_layers=sliding, sliding_window=window, linear_layers=linear,
                     linear_state_elements=state, full_head_dim=t.opt_int("global_head_dim") or 0,
                     full_kv_heads=t.opt_int("num_global_key_value_heads") or 0)  # fmt: skip


def _first_int(value: Any) -> int | None:
    """An integer, or the first of a list of integers (ERNIE gives text and vision expert counts as a pair)."""
    if isinstance(value, list) and value:
        value = value[0]
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _moe(t: _Reader, layers: int, dense_inter: int) -> MoE:
    s = t.section
    experts = next((v for k in ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")
                    if (v := _first_int(s.get(k))) is not None), 0)  # fmt: skip
    if experts <= 1:
        return MoE()
    per_token = next((v for k in ("num_experts_per_tok", "moe_k", "moe_topk", "top_k")
                      if (v := _first_int(s.get(k))) is not None), 1)  # fmt: skip
    width = _first_int(s.get("moe_intermediate_size")) or dense_inter
    shared = next((v for k in ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts")
                   if (v := _first_int(s.get(k))) is not None), 0)  # fmt: skip
    shared_width = width
    if s.get("shared_expert_intermediate_size"):
        shared, shared_width = max(shared, 1), t.int("shared_expert_intermediate_size")
    dense_first = t.opt_int("first_k_dense_replace") or t.opt_int("moe_layer_start_index") or 0
    step = (
        t.opt_int("interleave_moe_layer_step")
        or t.opt_int("decoder_sparse_step")
        or t.opt_int("moe_layer_freq")
        or t.opt_int("moe_layer_interval")
        or 1
    )
    only_dense = s.get("mlp_only_layers") or []
    sparse = [i for i in range(dense_first, layers) if (i - dense_first + 1) % step == 0 and i not in only_dense]
    if step > 1 and "interleave_moe_layer_step" in s:  # Llama 4: layers step-1, 2*step-1, ... are sparse
        sparse = [i for i in range(layers) if (i + 1) % step == 0]
    return MoE(experts, per_token, width, shared, shared_width, len(sparse))


def dims_from_config(cfg: dict[str, Any], *, name: str, path: Path, source: str) -> ModelDims:
    """Dimensions from a Hugging Face ``config.json`` of any decoder or vision-language model (flat, or with the
    language model in a ``text_config`` / ``llm_config`` / ``language_config`` section)."""
    model_type, arch = _model_type(cfg, path)
    family = family_of(model_type, arch)
    text, prefix = _text_section(cfg, family, path)
    t = _Reader(text, prefix, path)
    hidden = t.first(("hidden_size", "d_model", "n_embd"))
    heads = t.first(("num_attention_heads", "n_head", "num_heads"))
    kv_heads = t.first(("num_key_value_heads", "num_kv_heads", "multi_query_group_num"), heads)
    if heads % kv_heads:
        raise ConfigError(f"{path}: {t.prefix}num_attention_heads={heads} is not a multiple of "
                          f"num_key_value_heads={kv_heads}; accepted: grouped-query heads (a divisor)")  # fmt: skip
    if text.get("head_dim") is None and hidden % heads:
        raise ConfigError(f"{path}: {t.prefix}hidden_size={hidden} is not a multiple of num_attention_heads={heads} "
                          "and no head_dim is given; accepted: a head_dim, or heads dividing hidden_size")  # fmt: skip
    head_dim = t.int("head_dim", hidden // heads)
    layers = t.first(("num_hidden_layers", "n_layer", "num_layers"))
    inter = t.first(("intermediate_size_mlp", "intermediate_size", "ffn_hidden_size"), 0, minimum=0)
    moe = _moe(t, layers, inter)
    if not inter and not moe.present:
        raise ConfigError(f"{path}: {t.prefix}intermediate_size is missing; accepted: a positive integer")
    vision = _vision(cfg, family, hidden, path, model_type)
    top = _Reader(cfg, "", path)
    # Gemma ties its embeddings unless the config says otherwise (transformers' Gemma*Config default).
    tie = top.bool("tie_word_embeddings", t.bool("tie_word_embeddings", model_type.startswith("gemma")))
    method, bits = quantization_from_config(cfg, path)
    return ModelDims(
        name=name,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=inter,
        vocab_size=t.int("vocab_size"),
        tie_word_embeddings=tie,
        max_position_embeddings=t.first(_MAX_LEN_KEYS, DEFAULT_MAX_LEN),
        vision=vision,
        source=source,
        quantization=method,
        quant_weight_bits=bits,
        attention=_attention(t, model_type, layers),
        moe=moe,
        model_type=model_type or "unknown",
        architecture=arch,
        derived_max_model_len=derived_max_model_len(text, model_type),
        quant_group_size=_quant_group_size(cfg, path),
        quant_experts_only=_quant_experts_only(cfg, path),
    )


def _vision(cfg: dict[str, Any], family: Family | None, text_hidden: int, path: Path, model_type: str) -> VisionDims:
    """The vision tower, read with its family's key names; a text model has none (:data:`TEXT_ONLY`)."""
    fam = family or GENERIC
    names = (*fam.vision_sections, "vision_config")
    name, section = next(((n, s) for n in names if (s := _section(cfg, n, path)) is not None), (names[0], None))
    if section is None:
        if family is not None:
            wanted = " or ".join(f"'{n}'" for n in fam.vision_sections)
            raise ConfigError(f"{path}: no {wanted} section; expected a {fam.display} config.json")
        return TEXT_ONLY
    backbone = section.get("backbone_config")  # Ovis: the ViT sits under the visual tokenizer
    towers = section.get("width")  # DeepSeek-OCR: named towers (a CLIP and a SAM ViT) side by side
    extra = 0
    if isinstance(towers, dict) and towers and all(isinstance(t, dict) for t in towers.values()):
        ranked = sorted(towers.values(), key=lambda t: t.get("layers", 0) if isinstance(t.get("layers"), int) else 0)
        backbone, extra = ranked[-1], sum(_side_tower_parameters(t, f"{name}.width.", path)
                                          for t in ranked[:-1])  # fmt: skip
    v = _Reader(backbone if isinstance(backbone, dict) else section, f"{name}.", path)
    width = v.first((*fam.width_keys, "hidden_size", "embed_dim", "vt_hidden_size", "width"))
    heads = v.first(("num_heads", "num_attention_heads", "n_heads", "vt_num_attention_heads", "heads"))
    if width % heads:
        raise ConfigError(f"{path}: {v.prefix}hidden_size={width} is not a multiple of {v.prefix}num_heads={heads}; "
                          "accepted: heads dividing the width")  # fmt: skip
    ratio = v.section.get("mlp_ratio")
    default_inter = int(width * ratio) if isinstance(ratio, int | float) and not isinstance(ratio, bool) else None
    if default_inter is None and isinstance(towers, dict):
        default_inter = 4 * width  # a ViT's usual MLP when the tower names none
    inter = v.first(("intermediate_size", "mlp_dim", "vt_intermediate_size"), default_inter)
    patch = v.first(("patch_size", "spatial_patch_size"), fam.patch_size)
    merge = _merge_size(cfg, section, name, fam, path)
    image_size = v.first(("image_size",), 0, minimum=0) if fam.fixed_size else 0
    positions = v.first(("num_position_embeddings",), 0, minimum=0)
    if not positions and v.section.get("init_pos_emb_height"):  # Kimi's MoonViT: a learned height x width grid
        positions = v.int("init_pos_emb_height") * v.first(("init_pos_emb_width",), 1)
    if not positions and image_size:
        positions = (image_size // patch) ** 2
    tokens = 0
    if fam.fixed_size and image_size:
        tokens = _Reader(cfg, "", path).first(("mm_tokens_per_image",), (image_size // patch) ** 2 // merge**2)
    deepstack = section.get("deepstack_visual_indexes")
    return VisionDims(
        depth=v.first(("depth", "num_hidden_layers", "num_layers", "vt_num_hidden_layers", "layers")),
        hidden_size=width,
        num_heads=heads,
        intermediate_size=inter,
        patch_size=patch,
        temporal_patch_size=v.first(("temporal_patch_size",), 2 if fam.key.startswith("qwen") else 1),
        in_channels=v.first(("in_chans", "in_channels", "num_channels"), 3),
        spatial_merge_size=merge,
        window_size=v.first(("window_size",), 112, minimum=0),
        out_hidden_size=v.first(("out_hidden_size", "projector_output_dim"), text_hidden),
        family=fam.key,
        gated_mlp=fam.gated_mlp,
        norm_bias=fam.norm_bias,
        patch_bias=fam.patch_bias,
        num_position_embeddings=positions,
        deepstack_layers=len(deepstack) if isinstance(deepstack, list) else 0,
        image_size=image_size,
        tokens_per_image=tokens,
        extra_parameters=extra,
        visual_vocab_size=_Reader(cfg, "", path).first(("visual_vocab_size",), 0, minimum=0),
    )


def _side_tower_parameters(tower: dict[str, Any], prefix: str, path: Path) -> int:
    """A plain ViT's parameters (qkv and output projections, a 4x two-layer MLP, two LayerNorms per block) from a
    tower entry's ``width``, ``layers`` and optional ``mlp_ratio``."""
    t = _Reader(tower, prefix, path)
    d, layers = t.int("width"), t.int("layers")
    ratio = tower.get("mlp_ratio")
    inter = int(d * ratio) if isinstance(ratio, int | float) and not isinstance(ratio, bool) else 4 * d
    return layers * (4 * d * d + 4 * d + 2 * d * inter + inter + d + 4 * d)


def _merge_size(cfg: dict[str, Any], section: dict[str, Any], name: str, fam: Family, path: Path) -> int:
    """Patches merged per side into one token: the tower's ``spatial_merge_size`` (Qwen, ERNIE, dots.ocr), the
    top-level one (Mistral 3), Llama 4's pixel shuffle (ratio 0.5 -> 2) or Ovis's ``hidden_stride``."""
    for holder in (section, cfg):
        for key in ("spatial_merge_size", "hidden_stride"):
            value = holder.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    kernel = section.get("merge_kernel_size")  # Kimi: [2, 2]
    if isinstance(kernel, list) and kernel and isinstance(kernel[0], int) and not isinstance(kernel[0], bool):
        return max(kernel[0], 1)
    shuffle = section.get("pixel_shuffle_ratio")
    if isinstance(shuffle, int | float) and not isinstance(shuffle, bool) and 0 < shuffle < 1:
        return round(1 / math.sqrt(shuffle))
    if section.get("spatial_merge_size") is not None:
        raise ConfigError(f"{path}: {name}.spatial_merge_size is invalid; accepted: a positive integer")
    return fam.spatial_merge_size

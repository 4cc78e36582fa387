"""Model dimensions for the memory plan: an embedded catalog of the public Qwen2.5-VL checkpoints, or a local
model folder's ``config.json``, turned into weight bytes and KV-cache bytes per token.

The catalog's numbers are the public ``config.json`` values of the Qwen/Qwen2.5-VL-*-Instruct checkpoints; the
vision tower is the same in all four sizes except its output width (``out_hidden_size`` = the text hidden size).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from vllm_hpu_mm.errors import ConfigError

DTYPE_BYTES: dict[str, int] = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1, "int8": 1}
DTYPE_ALIASES: dict[str, str] = {"auto": "bfloat16", "bf16": "bfloat16", "half": "float16", "fp16": "float16",
                                 "float": "float32", "fp32": "float32", "float8": "fp8", "fp8_e4m3": "fp8"}  # fmt: skip


def dtype_bytes(dtype: str, *, source: str = "--dtype") -> int:
    """Bytes per element of a vLLM ``--dtype`` spelling (``auto`` means the checkpoints' bfloat16)."""
    name = DTYPE_ALIASES.get(dtype.lower(), dtype.lower())
    if name not in DTYPE_BYTES:
        accepted = ", ".join(sorted({*DTYPE_BYTES, *DTYPE_ALIASES}))
        raise ConfigError(f"{source}={dtype!r} is not a known dtype; accepted: {accepted}")
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


def _qwen(name: str, hidden: int, layers: int, heads: int, kv: int, inter: int, vocab: int, tie: bool) -> ModelDims:
    return ModelDims(name, hidden, layers, heads, kv, hidden // heads, inter, vocab, tie, 128000,
                     VisionDims(out_hidden_size=hidden))  # fmt: skip


#: Public Qwen2.5-VL Instruct checkpoints (config.json of each Hugging Face repository).
CATALOG: dict[str, ModelDims] = {
    m.name: m
    for m in (
        _qwen("Qwen/Qwen2.5-VL-3B-Instruct", 2048, 36, 16, 2, 11008, 151936, True),
        _qwen("Qwen/Qwen2.5-VL-7B-Instruct", 3584, 28, 28, 4, 18944, 152064, False),
        _qwen("Qwen/Qwen2.5-VL-32B-Instruct", 5120, 64, 40, 8, 27648, 152064, False),
        _qwen("Qwen/Qwen2.5-VL-72B-Instruct", 8192, 80, 64, 8, 29568, 152064, False),
    )
}
DEFAULT_MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"


def _lookup_catalog(name: str) -> ModelDims | None:
    """Catalog entry by full name, or by the short form (``Qwen2.5-VL-7B-Instruct``, ``qwen2.5-vl-7b``)."""
    key = name.strip().lower().removesuffix("/")
    for full, dims in CATALOG.items():
        short = full.split("/", 1)[1].lower()
        if key in (full.lower(), short, short.removesuffix("-instruct")):
            return dims
    return None


def _int(cfg: dict[str, Any], key: str, path: Path) -> int:
    value = cfg.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{path}: {key!r} is missing or not a positive integer (got {value!r})")
    return value


def from_config(cfg: dict[str, Any], *, name: str, path: Path) -> ModelDims:
    """Dimensions from a Hugging Face Qwen2.5-VL ``config.json`` (flat, or with a ``text_config`` section)."""
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    assert isinstance(text, dict)
    vis = cfg.get("vision_config")
    if not isinstance(vis, dict):
        raise ConfigError(f"{path}: no 'vision_config' section; expected a Qwen2.5-VL config.json")
    heads = _int(text, "num_attention_heads", path)
    hidden = _int(text, "hidden_size", path)
    head_dim: int = text.get("head_dim") or hidden // heads
    vision_hidden = _int(vis, "hidden_size", path)
    vision = VisionDims(
        depth=_int(vis, "depth", path),
        hidden_size=vision_hidden,
        num_heads=_int(vis, "num_heads", path),
        intermediate_size=_int(vis, "intermediate_size", path),
        patch_size=int(vis.get("patch_size", 14)),
        temporal_patch_size=int(vis.get("temporal_patch_size", 2)),
        in_channels=int(vis.get("in_chans") or vis.get("in_channels") or 3),
        spatial_merge_size=int(vis.get("spatial_merge_size", 2)),
        window_size=int(vis.get("window_size", 112)),
        out_hidden_size=int(vis.get("out_hidden_size", hidden)),
    )
    tie = cfg.get("tie_word_embeddings", text.get("tie_word_embeddings", False))
    return ModelDims(
        name=name,
        hidden_size=hidden,
        num_layers=_int(text, "num_hidden_layers", path),
        num_heads=heads,
        num_kv_heads=int(text.get("num_key_value_heads") or heads),
        head_dim=int(head_dim),
        intermediate_size=_int(text, "intermediate_size", path),
        vocab_size=_int(text, "vocab_size", path),
        tie_word_embeddings=bool(tie),
        max_position_embeddings=int(text.get("max_position_embeddings", 32768)),
        vision=vision,
    )


def resolve_model(model: str, *, source: str = "--model") -> ModelDims:
    """A catalog name (full or short) or a local folder holding ``config.json``."""
    path = Path(model).expanduser()
    if path.is_dir():
        config = path / "config.json"
        try:
            cfg = json.loads(config.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{source}={model!r}: cannot read {config}: {exc}") from None
        if not isinstance(cfg, dict):
            raise ConfigError(f"{source}={model!r}: {config} is not a JSON object")
        return from_config(cfg, name=model, path=config)
    dims = _lookup_catalog(model)
    if dims is None:
        raise ConfigError(
            f"{source}={model!r} is neither a local model folder with config.json nor a known model; "
            f"accepted: a folder, or one of {', '.join(CATALOG)}"
        )
    return dims


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


#: Bytes per language-model weight under vLLM's --quantization methods we know (int4 methods store ~0.5 byte plus
#: small scales); the vision tower and embeddings stay at --dtype. Anything else is counted at --dtype.
QUANTIZED_WEIGHT_BYTES: dict[str, float] = {
    **dict.fromkeys(("fp8", "fbgemm_fp8", "ptpc_fp8", "modelopt", "experts_int8"), 1.0),
    **dict.fromkeys(("awq", "awq_marlin", "gptq", "gptq_marlin", "bitsandbytes", "gguf"), 0.5),
}


def weight_bytes(m: ModelDims, dtype_size: int, tensor_parallel_size: int, quantization: str | None = None) -> int:
    """Weight bytes held by one device: everything sharded evenly over the tensor-parallel ranks.

    With a known ``quantization`` the decoder layers' linear weights are counted at its width (an estimate)."""
    total = (text_parameters(m) + vision_parameters(m.vision)) * dtype_size
    per_weight = QUANTIZED_WEIGHT_BYTES.get((quantization or "").lower())
    if per_weight is not None:
        h, kv_width, q_width = m.hidden_size, m.num_kv_heads * m.head_dim, m.num_heads * m.head_dim
        linear = m.num_layers * (h * q_width + 2 * h * kv_width + q_width * h + 3 * h * m.intermediate_size)
        total -= round(linear * (dtype_size - per_weight))
    return total // tensor_parallel_size


def kv_bytes_per_token(m: ModelDims, dtype_size: int, tensor_parallel_size: int) -> int:
    """K and V for one token on one device: 2 x layers x kv_heads x head_dim x dtype bytes / TP.

    With TP above the KV-head count vLLM replicates heads, so a device never holds less than one head.
    """
    heads = max(1, m.num_kv_heads // tensor_parallel_size) if tensor_parallel_size > m.num_kv_heads else 0
    if heads:
        return 2 * m.num_layers * heads * m.head_dim * dtype_size
    return 2 * m.num_layers * m.num_kv_heads * m.head_dim * dtype_size // tensor_parallel_size

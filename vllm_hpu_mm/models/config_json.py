"""A Qwen2.5-VL ``config.json`` read and validated field by field into :class:`~.models.ModelDims`.

Every field the plan reads is checked for type, integrality and range, and a bad one raises
:class:`~vllm_hpu_mm.errors.ConfigError` naming the file, the key (``vision_config.patch_size``), the bad value and
the accepted form. Optional keys take the Hugging Face defaults of ``Qwen2_5_VLConfig`` /
``Qwen2_5_VLVisionConfig`` (transformers) when absent.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from vllm_hpu_mm.errors import ConfigError, ModelConfigUnavailable
from vllm_hpu_mm.models.dims import ModelDims, VisionDims

__all__ = ["MAX_DIM", "QWEN25VL_ARCHITECTURE", "dims_from_config", "quantization_from_config", "read_config_json"]

#: The largest dimension we accept in a config (int32, as the checkpoints' own tensors are indexed).
MAX_DIM = 2**31 - 1
QWEN25VL_MODEL_TYPE = "qwen2_5_vl"
QWEN25VL_ARCHITECTURE = "Qwen2_5_VLForConditionalGeneration"


def read_config_json(path: Path, *, source: str) -> dict[str, Any]:
    """The parsed JSON object of ``path``; any read, decode or shape problem is a ConfigError naming ``source``."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read {path}: {exc}") from None
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

    def bool(self, key: str, default: bool) -> bool:
        value = self.section.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._bad(key, value, "true or false")
        return value


def _check_model_type(cfg: dict[str, Any], path: Path, name: str) -> None:
    """Only Qwen2.5-VL configs can be planned; anything else is a model the planner does not know."""
    model_type = cfg.get("model_type")
    archs = cfg.get("architectures")
    if model_type is not None and not isinstance(model_type, str):
        raise ConfigError(f"{path}: model_type={model_type!r} is invalid; accepted: a string such as 'qwen2_5_vl'")
    if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
        raise ConfigError(f"{path}: architectures={archs!r} is invalid; accepted: a list of class names")
    known = model_type == QWEN25VL_MODEL_TYPE or QWEN25VL_ARCHITECTURE in (archs or [])
    if (model_type is not None or archs) and not known:
        raise ModelConfigUnavailable(
            f"{name!r}: {path} describes a {model_type or ', '.join(archs or [])!s} model; the memory planner "
            f"knows Qwen2.5-VL only (model_type {QWEN25VL_MODEL_TYPE!r}, {QWEN25VL_ARCHITECTURE})"
        )


def quantization_from_config(cfg: dict[str, Any], path: Path) -> tuple[str | None, int | None]:
    """(``quantization_config.quant_method``, its weight ``bits``) as vLLM reads them, or (None, None)."""
    q = cfg.get("quantization_config")
    if q is None:
        text = cfg.get("text_config")
        q = text.get("quantization_config") if isinstance(text, dict) else None
    if q is None:
        return None, None
    if not isinstance(q, dict):
        raise ConfigError(f"{path}: quantization_config={q!r} is invalid; accepted: an object with 'quant_method'")
    method = q.get("quant_method")
    if not isinstance(method, str) or not method.strip():
        raise ConfigError(
            f"{path}: quantization_config.quant_method={method!r} is invalid; accepted: a method name such as 'awq'"
        )
    bits = q.get("bits")
    if bits is not None and (isinstance(bits, bool) or not isinstance(bits, int) or bits not in (2, 3, 4, 8)):
        raise ConfigError(f"{path}: quantization_config.bits={bits!r} is invalid; accepted: 2, 3, 4 or 8")
    return method.strip().lower(), bits


def dims_from_config(cfg: dict[str, Any], *, name: str, path: Path, source: str) -> ModelDims:
    """Dimensions from a Hugging Face Qwen2.5-VL ``config.json`` (flat, or with a ``text_config`` section)."""
    _check_model_type(cfg, path, name)
    nested = cfg.get("text_config")
    if nested is not None and not isinstance(nested, dict):
        raise ConfigError(f"{path}: text_config={nested!r} is invalid; accepted: an object")
    vis = cfg.get("vision_config")
    if not isinstance(vis, dict):
        raise ConfigError(f"{path}: no 'vision_config' section; expected a Qwen2.5-VL config.json")
    t = _Reader(nested if nested is not None else cfg, "text_config." if nested is not None else "", path)
    v = _Reader(vis, "vision_config.", path)

    hidden = t.int("hidden_size")
    heads = t.int("num_attention_heads")
    kv_heads = t.int("num_key_value_heads", heads)
    if heads % kv_heads:
        raise ConfigError(f"{path}: {t.prefix}num_attention_heads={heads} is not a multiple of "
                          f"num_key_value_heads={kv_heads}; accepted: grouped-query heads (a divisor)")  # fmt: skip
    if t.section.get("head_dim") is None and hidden % heads:
        raise ConfigError(f"{path}: {t.prefix}hidden_size={hidden} is not a multiple of num_attention_heads={heads} "
                          "and no head_dim is given; accepted: a head_dim, or heads dividing hidden_size")  # fmt: skip
    head_dim = t.int("head_dim", hidden // heads)
    vision_hidden = v.int("hidden_size")
    vision_heads = v.int("num_heads")
    if vision_hidden % vision_heads:
        raise ConfigError(f"{path}: vision_config.hidden_size={vision_hidden} is not a multiple of "
                          f"vision_config.num_heads={vision_heads}; accepted: heads dividing the width")  # fmt: skip
    vision = VisionDims(
        depth=v.int("depth"),
        hidden_size=vision_hidden,
        num_heads=vision_heads,
        intermediate_size=v.int("intermediate_size"),
        patch_size=v.int("patch_size", 14),
        temporal_patch_size=v.int("temporal_patch_size", 2),
        in_channels=v.int("in_chans", v.int("in_channels", 3)),
        spatial_merge_size=v.int("spatial_merge_size", 2),
        window_size=v.int("window_size", 112),
        out_hidden_size=v.int("out_hidden_size", hidden),
    )
    top = _Reader(cfg, "", path)
    tie = top.bool("tie_word_embeddings", t.bool("tie_word_embeddings", False))
    method, bits = quantization_from_config(cfg, path)
    return ModelDims(
        name=name,
        hidden_size=hidden,
        num_layers=t.int("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=t.int("intermediate_size"),
        vocab_size=t.int("vocab_size"),
        tie_word_embeddings=tie,
        max_position_embeddings=t.int("max_position_embeddings", 32768),
        vision=vision,
        source=source,
        quantization=method,
        quant_weight_bits=bits,
    )

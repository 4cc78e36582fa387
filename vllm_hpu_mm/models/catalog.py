"""The public Qwen2.5-VL Instruct checkpoints, embedded for model ids whose ``config.json`` is nowhere on this
machine, and what a model id itself says: the family and size (``someorg/qwen2.5-vl-72b-finetune``) and the
quantization (``-AWQ``, ``-GPTQ-Int4``, ``-FP8``).

The numbers are the public ``config.json`` values of the Qwen/Qwen2.5-VL-*-Instruct repositories; the vision tower
is the same in all four sizes except its output width (``out_hidden_size`` = the text hidden size).
"""

from __future__ import annotations

import dataclasses
import re

from vllm_hpu_mm.models.dims import Attention, ModelDims, VisionDims

__all__ = ["CATALOG", "DEFAULT_MODEL", "catalog_by_id", "quantization_from_id"]


def _qwen(name: str, hidden: int, layers: int, heads: int, kv: int, inter: int, vocab: int, tie: bool) -> ModelDims:
    return ModelDims(name, hidden, layers, heads, kv, hidden // heads, inter, vocab, tie, 128000,
                     VisionDims(out_hidden_size=hidden), source=f"catalog: {name}", attention=Attention(qkv_bias=True),
                     derived_max_model_len=128000)  # fmt: skip


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

#: "Qwen2.5-VL" then the size in billions, in the spellings model ids use (qwen2.5-vl-7b, Qwen2_5_VL_72B, ...).
_FAMILY_SIZE = re.compile(r"qwen[-_ ]?2(?:\.|_|-|)5[-_ ]?vl[-_ ]?(\d+)b(?![a-z0-9])", re.IGNORECASE)
_SIZES = {int(re.search(r"-(\d+)B-", name).group(1)): dims for name, dims in CATALOG.items()}  # type: ignore[union-attr]

#: Markers of quantized checkpoints in model ids -> vLLM's --quantization method (vLLM 0.32 names) and weight bits.
_ID_QUANT: tuple[tuple[re.Pattern[str], str, int | None], ...] = (
    (re.compile(r"(?<![a-z0-9])awq(?![a-z0-9])", re.IGNORECASE), "awq", 4),
    (re.compile(r"(?<![a-z0-9])gptq[-_]?int8(?![a-z0-9])", re.IGNORECASE), "gptq", 8),
    (re.compile(r"(?<![a-z0-9])gptq(?![a-z0-9])", re.IGNORECASE), "gptq", 4),
    (re.compile(r"(?<![a-z0-9])fp8(?![a-z0-9])", re.IGNORECASE), "fp8", 8),
)


def quantization_from_id(model_id: str) -> tuple[str | None, int | None]:
    """(vLLM method, weight bits) named in a model id, e.g. ``...-Instruct-AWQ`` -> ("awq", 4)."""
    for pattern, method, bits in _ID_QUANT:
        if pattern.search(model_id):
            return method, bits
    return None, None


def catalog_by_id(model_id: str) -> ModelDims | None:
    """The catalog entry of the Qwen2.5-VL size named in ``model_id``, as that model (quantization from the id)."""
    match = _FAMILY_SIZE.search(model_id)
    if match is None or int(match.group(1)) not in _SIZES:
        return None
    base = _SIZES[int(match.group(1))]
    if model_id == base.name:
        return base
    method, bits = quantization_from_id(model_id)
    source = f"{base.source} (Qwen2.5-VL {match.group(1)}B parsed from the id)"
    return dataclasses.replace(base, name=model_id, source=source, quantization=method, quant_weight_bits=bits)

"""Where a model's dimensions come from, in vLLM's order: a local folder's ``config.json``; else the Hugging Face
cache (offline, through :func:`huggingface_hub.try_to_load_from_cache`, which reads ``HF_HUB_CACHE`` / ``HF_HOME``
itself); else the embedded catalog, by the family and size parsed from the id (``someorg/qwen2.5-vl-72b-finetune``),
with the quantization taken from the config or, for catalog matches, from the id (``-AWQ``, ``-GPTQ-Int4``,
``-FP8``).

Nothing here downloads: a model that is neither local, cached nor recognisable raises
:class:`~vllm_hpu_mm.errors.ModelConfigUnavailable` (a ConfigError) with what was tried and how to give a config.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from vllm_hpu_mm.errors import ConfigError, ModelConfigUnavailable
from vllm_hpu_mm.memory.model_config import dims_from_config, read_config_json
from vllm_hpu_mm.memory.models import CATALOG, ModelDims

__all__ = ["catalog_by_id", "from_hf_cache", "plan_skipped_warning", "quantization_from_id", "resolve"]

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
_PATH_LIKE = re.compile(r"^(?:[~./\\]|[A-Za-z]:[\\/])")


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


def from_hf_cache(model_id: str, revision: str | None = None) -> Path | None:
    """The cached ``config.json`` of a Hub repository, or None when it is not cached (never downloads)."""
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    try:
        found = try_to_load_from_cache(model_id, "config.json", revision=revision)
    except (HFValidationError, ValueError, OSError):  # not a valid repo id, or an unreadable cache
        return None
    return Path(found) if isinstance(found, str) else None


def resolve(model: str, *, source: str = "--model", revision: str | None = None) -> ModelDims:
    """The model's dimensions, from the first of: local folder, Hugging Face cache, catalog by id.

    Raises ConfigError for a config with a bad field, and ModelConfigUnavailable when no config can be found.
    """
    if not model.strip() or not model.isprintable():
        raise ConfigError(f"{source}={model!r} is empty or holds control characters; accepted: a model id or a local "
                          "folder with config.json")  # fmt: skip
    try:
        path = Path(model).expanduser()
        is_dir, exists = path.is_dir(), path.exists()
    except (OSError, RuntimeError, ValueError):  # an unknown ~user, a name too long for the file system
        path, is_dir, exists = Path(model), False, False
    if is_dir:
        config = path / "config.json"
        if not config.is_file():
            raise ConfigError(f"{source}={model!r}: the folder has no config.json; accepted: a model folder")
        cfg = read_config_json(config, source=f"{source}={model!r}")
        return dims_from_config(cfg, name=model, path=config, source=f"config.json in {path}")
    if exists:
        raise ConfigError(f"{source}={model!r} is a file; accepted: a model folder holding config.json, or a model id")
    cached = None if _PATH_LIKE.match(model) else from_hf_cache(model.strip(), revision)
    if cached is not None:
        cfg = read_config_json(cached, source=f"{source}={model!r}")
        return dims_from_config(cfg, name=model, path=cached, source=f"Hugging Face cache: {cached}")
    dims = catalog_by_id(model)
    if dims is not None:
        return dims
    where = "no such folder" if _PATH_LIKE.match(model) else "not a local folder, not in the Hugging Face cache"
    raise ModelConfigUnavailable(
        f"{source}={model!r}: no config.json found ({where}, and not a Qwen2.5-VL id of a known size: "
        f"{', '.join(CATALOG)}); accepted: a local model folder, a model id whose config.json is in the Hugging "
        "Face cache (huggingface-cli download MODEL config.json), or an id naming Qwen2.5-VL 3B/7B/32B/72B"
    )


def plan_skipped_warning(exc: ModelConfigUnavailable) -> str:
    """The one-line warning ``serve`` prints when it launches without a plan because no config could be found."""
    return (
        f"the memory plan was skipped: {exc}. The server starts with vLLM's own memory settings; to get a plan, "
        "fetch only the config (huggingface-cli download MODEL config.json) or pass a local model folder"
    )

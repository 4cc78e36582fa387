"""Where a model's dimensions come from, in vLLM's order: a local folder's ``config.json``; else the Hugging Face
cache (offline, through :func:`huggingface_hub.try_to_load_from_cache`, which reads ``HF_HUB_CACHE`` / ``HF_HOME``
itself); else the embedded catalog, by the family and size parsed from the id (``someorg/qwen2.5-vl-72b-finetune``),
with the quantization taken from the config or, for catalog matches, from the id (``-AWQ``, ``-GPTQ-Int4``,
``-FP8``).

Nothing here downloads: a model that is neither local, cached nor recognisable raises
:class:`~vllm_hpu_mm.errors.ModelConfigUnavailable` (a ConfigError) with what was tried and how to give a config;
one vLLM could not serve at all (a local path that does not exist, a name that is no Hugging Face id) raises a plain
ConfigError, which ``serve`` refuses instead of launching without a plan.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from vllm_hpu_mm.errors import ConfigError, ModelConfigUnavailable
from vllm_hpu_mm.models.catalog import CATALOG, catalog_by_id
from vllm_hpu_mm.models.config_json import dims_from_config, read_config_json, with_transformers_defaults
from vllm_hpu_mm.models.dims import ModelDims

__all__ = ["from_hf_cache", "plan_skipped_warning", "resolve"]

_PATH_LIKE = re.compile(r"^(?:[~./\\]|[A-Za-z]:[\\/])")


def from_hf_cache(model_id: str, revision: str | None = None) -> Path | None:
    """The cached ``config.json`` of a Hub repository, or None when it is not cached (never downloads)."""
    from huggingface_hub import constants

    # the repository's cache folder, as try_to_load_from_cache looks for it first: without it, the answer is None
    # without importing the Hub's client (a fifth of a second of every plan)
    try:
        if not (Path(constants.HF_HUB_CACHE) / "--".join(["models", *model_id.split("/")])).is_dir():
            return None
    except (ValueError, OSError):  # a name the file system cannot look up: no repository of it is cached
        return None
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    try:
        found = try_to_load_from_cache(model_id, "config.json", revision=revision)
    except (HFValidationError, ValueError, OSError):  # not a valid repo id, or an unreadable cache
        return None
    return Path(found) if isinstance(found, str) else None


def _dims(cfg: dict[str, Any], *, name: str, path: Path, source: str) -> ModelDims:
    """The raw JSON's dimensions; when it leaves out a key the plan needs, transformers' defaults for its
    ``model_type`` fill it (where transformers is installed), as ``AutoConfig`` would."""
    try:
        return dims_from_config(cfg, name=name, path=path, source=source)
    except ConfigError as exc:
        if "is missing" not in str(exc):
            raise
        filled = with_transformers_defaults(cfg)
        if filled is cfg:
            raise
        return dims_from_config(filled, name=name, path=path, source=f"{source} (+ transformers' defaults)")


def resolve(model: str, *, source: str = "--model", revision: str | None = None) -> ModelDims:
    """The model's dimensions, from the first of: local folder, Hugging Face cache, catalog by id.

    Raises ConfigError for a config with a bad field or a model vLLM could not serve (a missing local path, a name
    that is no Hugging Face id), and ModelConfigUnavailable when no config can be found.
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
        read = _dims(cfg, name=model, path=config, source=f"config.json in {path}")
        return dataclasses.replace(read, folder_json_files=tuple(sorted(f.name for f in path.glob("*.json"))))
    if exists:
        raise ConfigError(f"{source}={model!r} is a file; accepted: a model folder holding config.json, or a model id")
    cached = None if _PATH_LIKE.match(model) else from_hf_cache(model.strip(), revision)
    if cached is not None:
        cfg = read_config_json(cached, source=f"{source}={model!r}")
        return _dims(cfg, name=model, path=cached, source=f"Hugging Face cache: {cached}")
    dims = catalog_by_id(model)
    if dims is not None:
        return dims
    unservable = _unservable(model, source)
    if unservable:
        raise ConfigError(unservable)
    raise ModelConfigUnavailable(
        f"{source}={model!r}: no config.json found (not a local folder, not in the Hugging Face cache, and not a "
        f"Qwen2.5-VL id of a known size: "
        f"{', '.join(CATALOG)}); accepted: a local model folder (any decoder or vision-language model), a model id "
        "whose config.json is in the Hugging Face cache (huggingface-cli download MODEL config.json), or an id "
        "naming Qwen2.5-VL 3B/7B/32B/72B"
    )


def _unservable(model: str, source: str) -> str | None:
    """Why vLLM could not serve ``model``, a name that is no existing folder, or None where the Hub (or object
    storage) may still hold it. vLLM 0.32 hands a name that is not a local path to huggingface_hub, which refuses an
    invalid repo id (``OSError: Repo id must ...``, a traceback after the engine's start-up): a path that does not
    exist, or a name such as ``--dry-run`` (what ``-- --dry-run`` gives vLLM's positional model)."""
    accepted = "accepted: an existing local model folder, or a Hugging Face model id (name or namespace/name)"
    if _PATH_LIKE.match(model):
        return f"{source}={model!r}: no such folder; {accepted}"
    if "://" in model:  # s3://, gs://, az://: vLLM streams these (transformers_utils/utils.py is_cloud_storage)
        return None
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id  # type: ignore[attr-defined]  # public, not re-exported

    try:
        validate_repo_id(model)
    except HFValidationError:
        after_dashes = " (after `--` every token is vLLM's positional model)" if model.startswith("-") else ""
        return (
            f"{source}={model!r} is neither a local folder nor a valid Hugging Face model id{after_dashes}; {accepted}"
        )
    return None


def plan_skipped_warning(exc: ModelConfigUnavailable) -> str:
    """The one-line warning ``serve`` prints when it launches without a plan because no config could be found."""
    return (
        f"the memory plan was skipped: {exc}. The server starts with vLLM's own memory settings; to get a plan, "
        "fetch only the config (huggingface-cli download MODEL config.json) or pass a local model folder"
    )

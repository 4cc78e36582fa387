"""Registering our Qwen2.5-VL class with vLLM's ModelRegistry, on top of whichever class another plugin registered.

vLLM keeps the *last* ``register_model`` call for an architecture and walks plugins in entry-point discovery order,
so coexisting with vllm-gaudi must work in both orders:

- it registered first: the registry entry is not vLLM's stock one; we record it as our base, then register ours;
- it registers after us: we wrap ``ModelRegistry.register_model`` (this process only) so a later registration of
  the architecture is recorded as our base and ours stays registered.

The base is kept as a registry entry (a lazy ``module:Class`` or a class) and resolved only when vLLM imports our
model class (``vllm_hpu_mm.plugin.model``), so nothing heavy is imported at plugin load.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

logger = logging.getLogger(__name__)

ARCH = "Qwen2_5_VLForConditionalGeneration"
STOCK_MODULE = "vllm.model_executor.models.qwen2_5_vl"
#: The name vLLM imports: ``vllm_hpu_mm.plugin.model`` builds it on first access (module ``__getattr__``).
OUR_CLASS = "HpuMmQwen2_5_VLForConditionalGeneration"
OUR_TARGET = f"vllm_hpu_mm.plugin.model:{OUR_CLASS}"

_lock = threading.RLock()
#: The other plugin's registry entry we build on, or None for vLLM's stock class.
_base_entry: Any = None


def base_entry() -> Any:
    """The registry entry (``_LazyRegisteredModel`` / ``_RegisteredModel``) our class builds on; None = stock."""
    return _base_entry


def _is_ours(entry: Any) -> bool:
    return getattr(entry, "module_name", None) == "vllm_hpu_mm.plugin.model" or (
        getattr(getattr(entry, "model_cls", None), "__module__", "") == "vllm_hpu_mm.plugin.model"
    )


def _is_stock(entry: Any) -> bool:
    return getattr(entry, "module_name", None) == STOCK_MODULE and getattr(entry, "class_name", None) == ARCH


def describe_entry(entry: Any) -> str:
    if entry is None:
        return f"{STOCK_MODULE}:{ARCH} (stock)"
    if hasattr(entry, "module_name"):
        return f"{entry.module_name}:{entry.class_name}"
    cls = getattr(entry, "model_cls", None)
    return f"{cls.__module__}:{cls.__qualname__}" if cls is not None else repr(entry)


def _adopt(entry: Any) -> None:
    global _base_entry
    if entry is None or _is_ours(entry) or _is_stock(entry):
        return
    if _base_entry is not None and describe_entry(_base_entry) != describe_entry(entry):
        logger.warning(
            "vllm-hpu-mm: %s replaces %s as the base of our %s",
            describe_entry(entry),
            describe_entry(_base_entry),
            ARCH,
        )
    _base_entry = entry
    logger.info("vllm-hpu-mm: building %s on %s (registered by another plugin)", ARCH, describe_entry(entry))


def register_model(registry: Any = None) -> None:
    """Register our class for :data:`ARCH` in ``registry`` (default: vLLM's ``ModelRegistry``); re-entrant."""
    if registry is None:
        from vllm import ModelRegistry

        registry = ModelRegistry
    with _lock:
        _adopt(registry.models.get(ARCH))
        _wrap(registry)
        _original(registry)(ARCH, OUR_TARGET)


def _original(registry: Any) -> Any:
    fn = registry.register_model
    return getattr(fn, "_hpu_mm_original", fn)


def _wrap(registry: Any) -> None:
    """Intercept later registrations of :data:`ARCH`: they become our base; ours stays registered."""
    if getattr(registry.register_model, "_hpu_mm_wrapper", False):
        return
    original = registry.register_model

    def register_model(model_arch: str, model_cls: Any) -> None:
        original(model_arch, model_cls)
        if model_arch != ARCH:
            return
        with _lock:
            entry = registry.models.get(ARCH)
            if entry is not None and not _is_ours(entry):
                _adopt(entry)
                original(ARCH, OUR_TARGET)

    register_model._hpu_mm_wrapper = True  # type: ignore[attr-defined]
    register_model._hpu_mm_original = original  # type: ignore[attr-defined]
    registry.register_model = register_model


def reset_for_tests() -> None:
    """Forget the recorded base (unit tests register against throwaway registries)."""
    global _base_entry
    with _lock:
        _base_entry = None

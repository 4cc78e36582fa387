"""Our Qwen2.5-VL model class: the registered base class (stock or another plugin's) plus a bucketed vision tower.

vLLM imports ``vllm_hpu_mm.plugin.model:HpuMmQwen2_5_VLForConditionalGeneration``; the class is built on first
access (module ``__getattr__``) on the base recorded by :mod:`.registration`, with our aligned processor
registered on it (:mod:`.processor`).

The tower: after the weights are in place (``process_weights_after_loading``, which vLLM calls for every load
format, ``dummy`` included) ``self.visual`` gets its class swapped to a subclass whose ``forward`` goes through
:class:`~vllm_hpu_mm.graphs.runner.BucketedVisionRunner`, which calls the original ``forward`` on bucket shapes only.
This single seam covers images, videos, the eager and the data-parallel paths (they all call ``self.visual``).
Calls with precomputed ``encoder_metadata`` (vLLM's own CUDA encoder graphs) are already bucket-shaped by vLLM's
budgets and go straight to the original ``forward``. When the tower is not vLLM's stock class, or the base class
comes from vllm-gaudi (which buckets its tower itself with the same ``VLLM_MULTIMODAL_BUCKETS``), it is left alone.

On CUDA the buckets also become vLLM's own encoder CUDA-graph budgets (:func:`apply_cuda_encoder_graphs`).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import torch

from vllm_hpu_mm.envs import Settings, get_settings
from vllm_hpu_mm.plugin.registration import OUR_CLASS, base_entry, describe_entry

logger = logging.getLogger(__name__)

_RUNNER_ATTR = "_hpu_mm_runner"


def _load_base() -> type:
    entry = base_entry()
    if entry is None:
        from vllm.model_executor.models.qwen2_5_vl import Qwen2_5_VLForConditionalGeneration

        return Qwen2_5_VLForConditionalGeneration
    cls: type = entry.load_model_cls()
    return cls


class BucketedTowerMixin:
    """Put in front of the tower's class: ``forward`` runs through the runner (bucket shapes only)."""

    def forward(
        self, x: torch.Tensor, grid_thw: Any, *, encoder_metadata: dict[str, torch.Tensor] | None = None
    ) -> torch.Tensor:
        runner = self.__dict__.get(_RUNNER_ATTR)
        if runner is None or encoder_metadata is not None or grid_thw is None:
            return super().forward(x, grid_thw, encoder_metadata=encoder_metadata)  # type: ignore[misc,no-any-return]
        out: torch.Tensor = runner(x, grid_thw)
        return out


_subclasses: dict[tuple[type, type], type] = {}


def _subclass(mixin: type, cls: type, prefix: str) -> type:
    """``mixin`` in front of ``cls``, one class per pair (instances of the same tower class share it)."""
    key = (mixin, cls)
    if key not in _subclasses:
        _subclasses[key] = type(f"{prefix}{cls.__name__}", (mixin, cls), {"__module__": __name__})
    return _subclasses[key]


def bucketed_tower_class(tower_cls: type) -> type:
    return _subclass(BucketedTowerMixin, tower_cls, "Bucketed")


def _stock_forward(tower: Any) -> Any:
    """The tower's own forward (taken before the class swap) as the runner's encoder, grids as lists as vLLM does."""
    original = type(tower).forward

    def encode(pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = original(tower, pixel_values, grid_thw.tolist())
        return out

    return encode


def _fp32_vision_softmax(tower: Any) -> int:
    """Make the vision attention run in float32 where vLLM's backend is plain SDPA; returns modules changed.

    Other backends (flash-attention on CUDA, vllm-gaudi's fused SDPA on HPU) own their softmax precision: FA
    keeps an fp32 softmax accumulator already, and vllm-gaudi reads ``VLLM_FP32_SOFTMAX*`` itself.
    """
    from vllm.model_executor.layers.attention.mm_encoder_attention import MMEncoderAttention

    changed = 0
    for module in tower.modules():
        if not isinstance(module, MMEncoderAttention) or isinstance(module, _Fp32AttentionMixin):
            continue
        backend = str(getattr(module, "attn_backend", ""))
        if "TORCH_SDPA" not in backend:
            continue
        attention: Any = module
        attention.__class__ = _fp32_attention_class(type(module))
        changed += 1
    return changed


class _Fp32AttentionMixin:
    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        dtype = query.dtype
        out: torch.Tensor = super().forward(query.float(), key.float(), value.float(), **kwargs)  # type: ignore[misc]
        return out.to(dtype)


def _fp32_attention_class(cls: type) -> type:
    return _subclass(_Fp32AttentionMixin, cls, "Fp32")


def _window_patches(tower: Any) -> int:
    """The attention window side in patches (112 px / 14 = 8 for Qwen2.5-VL)."""
    return int(tower.window_size) // int(tower.patch_size)


def install_bucketed_tower(model: Any, settings: Settings) -> int | None:
    """Swap ``model.visual`` to the bucketed tower and warm it up; returns buckets captured (None: left alone)."""
    from vllm.model_executor.models.qwen2_5_vl import Qwen2_5_VisionTransformer

    from vllm_hpu_mm.graphs.select import build_runner, warmup
    from vllm_hpu_mm.plugin.metrics import multiprocess_enabled, pass_hook, record_warmup

    tower: Any = getattr(model, "visual", None)
    if tower is None or tower.__dict__.get(_RUNNER_ATTR) is not None:
        return None
    from vllm_hpu_mm.graphs.hpu import HpuRoute, buckets_for_vllm_gaudi, hpu_route

    if not isinstance(tower, Qwen2_5_VisionTransformer) or hpu_route(type(model), tower) is HpuRoute.VLLM_GAUDI:
        logger.info(
            "vllm-hpu-mm: vision tower %s of %s keeps its own execution (it buckets with VLLM_MULTIMODAL_BUCKETS=%s);"
            " we add alignment and the bucket cap only",
            type(tower).__qualname__,
            type(model).__mro__[2].__qualname__ if len(type(model).__mro__) > 2 else type(model).__qualname__,
            buckets_for_vllm_gaudi(settings.multimodal_buckets),
        )
        return None
    if settings.fp32_softmax_vision and tower.dtype != torch.float32:
        logger.info("vllm-hpu-mm: vision attention softmax in float32 in %d layers", _fp32_vision_softmax(tower))
    encoder = _stock_forward(tower)
    runner = build_runner(
        settings,
        encoder,
        device=tower.device,
        merge_size=tower.spatial_merge_size,
        spatial_window=_window_patches(tower),
        on_pass=pass_hook(settings.shape_log),
    )
    tower.__class__ = bucketed_tower_class(type(tower))
    tower.__dict__[_RUNNER_ATTR] = runner
    patch_dim = tower.patch_embed.proj.weight[0].numel() if hasattr(tower.patch_embed, "proj") else 1176
    dtype = getattr(getattr(tower, "input_norm", None), "input_dtype", None) or tower.dtype
    captured = warmup(runner, patch_dim, dtype, tower.device, settings=settings)
    record_warmup(runner.executor.name, captured)
    if not multiprocess_enabled():
        logger.info(
            "vllm-hpu-mm: PROMETHEUS_MULTIPROC_DIR is not set, so our vision metrics stay in this process and do "
            "not reach the API server's /metrics; set it to an empty directory to export them"
        )
    return captured


def apply_cuda_encoder_graphs(vllm_config: Any, settings: Settings, *, backend: str) -> dict[str, Any] | None:
    """On the ``cuda`` backend, turn our buckets into vLLM's own encoder CUDA graphs; returns the fields set.

    vLLM's worker builds its ``EncoderCudaGraphManager`` from ``compilation_config`` after the model is constructed,
    so setting the fields here (in the worker, from the model's ``__init__``) takes effect; vLLM then captures one
    encoder graph per bucket (budget = patches / 4) and profiles their memory. Left alone when the user configured
    encoder graphs themselves (``cudagraph_mm_encoder`` already on), with ``--enforce-eager`` (no graphs at all) or
    with bucketing disabled.
    """
    from vllm_hpu_mm.runtimes import registry

    compilation = vllm_config.compilation_config
    eager = bool(getattr(vllm_config.model_config, "enforce_eager", False))
    make = registry.encoder_graphs(backend) if backend in registry.DEFAULT_RUNTIME else None
    if make is None or settings.multimodal_buckets is None or eager or compilation.cudagraph_mm_encoder:
        return None
    fields = make(settings.multimodal_buckets)
    for key, value in fields.items():
        setattr(compilation, key, value)
    logger.info("vllm-hpu-mm: vLLM encoder CUDA graphs from VLLM_MULTIMODAL_BUCKETS: %s", fields)
    return fields


class BucketedModelMixin:
    """Put in front of the Qwen2.5-VL model class: validates settings, then buckets the tower after loading."""

    def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
        settings = get_settings()  # a bad value fails here, before the weights take device memory
        if torch.cuda.is_available():
            from vllm_hpu_mm.graphs.select import resolve_backend

            device = getattr(vllm_config.device_config, "device", None) or "cuda"
            apply_cuda_encoder_graphs(vllm_config, settings, backend=resolve_backend(settings.graph_backend, device))
        super().__init__(vllm_config=vllm_config, prefix=prefix)  # type: ignore[call-arg]

    def process_weights_after_loading(self) -> None:
        parent = getattr(super(), "process_weights_after_loading", None)
        if parent is not None:
            parent()
        install_bucketed_tower(self, get_settings())


@functools.cache
def build_model_class() -> type:
    """Our model class on the recorded base, with the aligned processor registered on it."""
    from vllm.multimodal import MULTIMODAL_REGISTRY

    from vllm_hpu_mm.plugin.processor import aligned_processor_classes

    base = _load_base()
    factories = base._processor_factory  # type: ignore[attr-defined]
    info, processor = aligned_processor_classes(factories.info, factories.processor)
    cls = type(OUR_CLASS, (BucketedModelMixin, base), {"__module__": __name__, "__qualname__": OUR_CLASS})
    MULTIMODAL_REGISTRY.register_processor(processor, info=info, dummy_inputs=factories.dummy_inputs)(cls)
    logger.debug("vllm-hpu-mm: %s built on %s", OUR_CLASS, describe_entry(base_entry()))
    return cls


def __getattr__(name: str) -> Any:
    if name == OUR_CLASS:
        return build_model_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""HPU backend (Intel Gaudi): one HPU graph per bucket pass layout, through Habana's ``wrap_in_hpu_graph``.

Not run on Gaudi: this module is tested in CI against the stand-in ``habana_frameworks`` package in ``tests/stubs/``
(it records captures and replays and returns the same static output buffer on every replay, as a real graph does).
Nobody has run it on a Gaudi card yet.

Two routes, chosen by :func:`hpu_route`:

- **vllm-gaudi owns the tower** (its own ``Qwen2_5_VLForConditionalGeneration`` is the class our plugin builds on):
  vllm-gaudi already pads every image to a bucket and captures every bucket at warm-up, reading the same
  ``VLLM_MULTIMODAL_BUCKETS`` variable with the same meaning. We do not wrap its tower a second time; our job is to
  validate that variable at startup (``envs.load`` does) and log what vllm-gaudi will use
  (:func:`buckets_for_vllm_gaudi`).
- **we own the tower** (stock vLLM or transformers' tower on an HPU platform): :class:`HpuGraphExecutor`.

HPU graphs run in lazy mode only: start the server with ``PT_HPU_LAZY_MODE=1`` (the user's environment, as in the
Gaudi guide); ``PT_HPUGRAPH_DISABLE_TENSOR_CACHE`` is what ``disable_tensor_cache=True`` sets per module here.
A graph replays only on identical input shapes and bakes in host values used while it was captured. The stock towers
build their attention segments and window permutation on the host from ``grid_thw``, so the layout of a pass (which
images, which sizes) is part of what a graph captured: graphs are therefore keyed on ``(bucket, layout)``. Warm-up
captures each bucket's canonical layout (one dummy image filling it); a new layout of a known bucket is captured on
first use (counted in :attr:`HpuGraphExecutor.runtime_captures`) up to ``max_graphs``, after which passes run in
lazy mode without a graph. A tower that takes its layout as device tensors (``tower_forward`` of the research
executor, ``benchmarks/research/cuda_graphs.py``) would need one graph per bucket only; that port is not done.
"""

from __future__ import annotations

import enum
import importlib
import logging
from types import ModuleType
from typing import Any

import torch
from torch import nn

from vllm_hpu_mm.errors import BackendError
from vllm_hpu_mm.graphs.base import EncoderFn

logger = logging.getLogger(__name__)

Layout = tuple[tuple[int, int, int], ...]


def import_habana() -> tuple[ModuleType, ModuleType]:
    """``(habana_frameworks.torch.hpu, habana_frameworks.torch.core)``, or :class:`BackendError` off Gaudi."""
    try:
        hpu = importlib.import_module("habana_frameworks.torch.hpu")
        core = importlib.import_module("habana_frameworks.torch.core")
    except ImportError as exc:
        raise BackendError(
            "the HPU graph backend needs Intel Gaudi's PyTorch bridge (habana_frameworks.torch), which is not "
            f"importable here ({exc}); on a machine without Gaudi set VLLM_HPU_MM_GRAPH_BACKEND=auto, cpu or cuda"
        ) from exc
    return hpu, core


class _FixedLayoutPass(nn.Module):
    """The tower with one pass layout baked in: ``forward(pixel_values)``, the shape ``wrap_in_hpu_graph`` wants."""

    def __init__(self, encoder: EncoderFn, grid_thw: torch.Tensor) -> None:
        super().__init__()
        if isinstance(encoder, nn.Module):
            self.tower = encoder  # registered, so .to()/state follow the real module
        self.encoder = encoder
        self.grid_thw = grid_thw

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.encoder(pixel_values, self.grid_thw)


class HpuGraphExecutor:
    """Runs each bucket pass as an HPU graph (``wrap_in_hpu_graph``) keyed on ``(bucket, layout)``. Not run on Gaudi.

    Exact-shape passes (``bucket`` None) run in lazy mode without a graph. Every pass ends with ``mark_step()`` so
    lazy ops are flushed before the runner slices the output, and the output is cloned because a replay writes into
    the same static buffer every time.
    """

    name = "hpu"

    def __init__(self, encoder: EncoderFn, *, max_graphs: int = 64) -> None:
        self._hpu, self._core = import_habana()
        self.encoder = encoder
        self.max_graphs = max_graphs
        self.runtime_captures = 0
        self._graphs: dict[tuple[int, Layout], nn.Module] = {}
        self._warned_full = False

    @property
    def captured(self) -> tuple[tuple[int, Layout], ...]:
        """Keys of the graphs captured so far, in capture order."""
        return tuple(self._graphs)

    def _graph(self, bucket: int, grid_thw: torch.Tensor, *, at_warmup: bool) -> nn.Module | None:
        layout: Layout = tuple((int(t), int(h), int(w)) for t, h, w in grid_thw.tolist())
        key = (bucket, layout)
        graph = self._graphs.get(key)
        if graph is not None:
            return graph
        if len(self._graphs) >= self.max_graphs:
            if not self._warned_full:
                self._warned_full = True
                logger.warning(
                    "HPU graph cache full (%d graphs): new pass layouts run without a graph", len(self._graphs)
                )
            return None
        module: Any = _FixedLayoutPass(self.encoder, grid_thw.clone())
        graph = self._hpu.wrap_in_hpu_graph(module, disable_tensor_cache=True)
        assert isinstance(graph, nn.Module)
        self._graphs[key] = graph
        if not at_warmup:
            self.runtime_captures += 1
        return graph

    def warmup(self, bucket: int, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> None:
        """Capture the bucket's graph for this layout by running it once."""
        self._run(self._graph(bucket, grid_thw, at_warmup=True), pixel_values, grid_thw)

    def __call__(self, bucket: int | None, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        graph = None if bucket is None else self._graph(bucket, grid_thw, at_warmup=False)
        return self._run(graph, pixel_values, grid_thw)

    def _run(self, graph: nn.Module | None, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            out = self.encoder(pixel_values, grid_thw) if graph is None else graph(pixel_values)
            out = out.clone()
        self._core.mark_step()
        return out


class HpuRoute(str, enum.Enum):
    """Who runs the vision tower's graphs on an HPU platform."""

    #: vllm-gaudi's own Qwen2.5-VL class pads and captures its buckets; we only validate and log them.
    VLLM_GAUDI = "vllm-gaudi"
    #: Our runner with :class:`HpuGraphExecutor`.
    OURS = "ours"


def owned_by_vllm_gaudi(obj: object) -> bool:
    """True when ``obj`` (a model class, model or tower instance) is, or derives from, a vllm-gaudi class."""
    cls = obj if isinstance(obj, type) else type(obj)
    return any(k.__module__.split(".")[0] == "vllm_gaudi" for k in cls.__mro__)


def hpu_route(model_cls: type, tower: object | None = None) -> HpuRoute:
    """Decide who captures the vision buckets on HPU.

    vllm-gaudi's route is taken when the model class we build on, or its tower, comes from vllm-gaudi: that class
    already buckets the tower with the same ``VLLM_MULTIMODAL_BUCKETS``, and a second graph layer around its
    graphed tower would capture twice. Otherwise we own the tower and wrap it with :class:`HpuGraphExecutor`.
    """
    if owned_by_vllm_gaudi(model_cls) or (tower is not None and owned_by_vllm_gaudi(tower)):
        return HpuRoute.VLLM_GAUDI
    return HpuRoute.OURS


def buckets_for_vllm_gaudi(buckets: tuple[int, ...] | None) -> str:
    """The ``VLLM_MULTIMODAL_BUCKETS`` value vllm-gaudi reads, in its spelling (ascending, or ``None``).

    vllm-gaudi reads the variable from the same process environment, so there is nothing to pass: this is the
    already-validated value (``envs.load`` refuses anything vllm-gaudi would misread) for the startup log line.
    """
    return "None" if buckets is None else ",".join(str(b) for b in sorted(buckets))

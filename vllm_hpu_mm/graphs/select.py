"""Backend selection and warm-up for the bucketed vision runner.

``VLLM_HPU_MM_GRAPH_BACKEND``:

- ``auto``: ``hpu`` when Habana's bridge imports and vLLM's platform is HPU, ``cuda`` when the tower is on a CUDA
  device, else ``cpu`` **on exact shapes**: CPU eager captures no graph, so padding an image to its bucket is work
  with nothing to reuse (measured on the CPU server: ``benchmarks/performance/results/served_path_cpu.md``);
- ``cpu``: :class:`~vllm_hpu_mm.graphs.cpu.EagerExecutor` on bucket shapes, padded as on a graph backend: for
  testing bucket behaviour on a CPU machine;
- ``cuda``: eager passes on bucket shapes; the graphs are vLLM's own encoder CUDA graphs, configured from the same
  buckets by :mod:`vllm_hpu_mm.runtimes.vllm_cuda.encoder_graphs` (vLLM replays them before our runner is reached;
  what is left — items above the largest budget, ``--enforce-eager`` — comes to the runner);
- ``hpu``: :class:`~vllm_hpu_mm.graphs.hpu.HpuGraphExecutor` (not run on Gaudi). When vllm-gaudi owns the tower
  (:func:`~vllm_hpu_mm.graphs.hpu.hpu_route`) the runner is not used at all;
- ``none``: eager and unbucketed (one exact-shape pass per call).
"""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Callable

import torch

from vllm_hpu_mm.envs import Settings, get_settings
from vllm_hpu_mm.errors import BackendError, ConfigError
from vllm_hpu_mm.graphs.base import EncoderFn, PassExecutor, PassRecord
from vllm_hpu_mm.graphs.cpu import EagerExecutor
from vllm_hpu_mm.graphs.runner import BucketedVisionRunner, dummy_grid

logger = logging.getLogger(__name__)


def habana_available() -> bool:
    """Whether Habana's PyTorch bridge can be imported (without importing it)."""
    try:
        return importlib.util.find_spec("habana_frameworks.torch") is not None
    except (ImportError, ValueError):  # a parent package that is not a package, or a broken stand-in
        return False


def platform_is_hpu() -> bool:
    """Whether vLLM's current platform is HPU (vllm-gaudi's out-of-tree platform); False without vLLM."""
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return False
    return str(getattr(current_platform, "device_type", "")) == "hpu"


def resolve_backend(backend: str, device: torch.device | str) -> str:
    """The concrete backend (cpu, cuda, hpu, none) for a ``VLLM_HPU_MM_GRAPH_BACKEND`` value and the tower device."""
    dev = torch.device(device)
    if backend == "auto":
        if dev.type == "hpu" or (habana_available() and platform_is_hpu()):
            return "hpu"
        if dev.type == "cuda" and torch.cuda.is_available():
            return "cuda"
        return "cpu"
    if backend == "cuda" and not torch.cuda.is_available():
        raise BackendError(
            "VLLM_HPU_MM_GRAPH_BACKEND=cuda but torch.cuda is not available in this process; "
            "accepted here: auto, cpu, none"
        )
    if backend not in ("cpu", "cuda", "hpu", "none"):
        raise ConfigError(f"graph backend {backend!r} is invalid; accepted: auto, cpu, cuda, hpu, none")
    return backend


def select_executor(settings: Settings, encoder_fn: EncoderFn, *, device: torch.device | str) -> PassExecutor:
    """The :class:`PassExecutor` for ``settings.graph_backend`` on ``device``; :class:`BackendError` if unusable."""
    backend = resolve_backend(settings.graph_backend, device)
    if backend == "hpu":
        from vllm_hpu_mm.graphs.hpu import HpuGraphExecutor  # imports habana_frameworks: only on this path

        return HpuGraphExecutor(encoder_fn)
    return EagerExecutor(encoder_fn, name="eager" if backend == "none" else backend)


def pads_to_buckets(setting: str, backend: str) -> bool:
    """Whether the runner pads passes to bucket shapes for ``VLLM_HPU_MM_GRAPH_BACKEND=setting`` resolved to
    ``backend``: on the graph backends (a graph per bucket is reused), and on CPU only when asked for by name."""
    if backend == "none":
        return False
    if backend == "cpu":
        return setting == "cpu"
    return True


def build_runner(
    settings: Settings,
    encoder_fn: EncoderFn,
    *,
    device: torch.device | str,
    merge_size: int = 2,
    spatial_window: int = 8,
    on_pass: Callable[[PassRecord], None] | None = None,
) -> BucketedVisionRunner:
    """A runner with the selected executor, the settings' buckets (None, exact shapes, unless
    :func:`pads_to_buckets`) and policy."""
    executor = select_executor(settings, encoder_fn, device=device)
    padded = pads_to_buckets(settings.graph_backend, resolve_backend(settings.graph_backend, device))
    buckets = settings.multimodal_buckets if padded else None
    return BucketedVisionRunner(
        executor,
        buckets,
        settings.oversize_policy,
        merge_size=merge_size,
        spatial_window=spatial_window,
        on_pass=on_pass,
    )


def warmup(
    runner: BucketedVisionRunner,
    dim: int,
    dtype: torch.dtype,
    device: torch.device | str,
    *,
    settings: Settings | None = None,
) -> int:
    """Capture/compile every bucket of ``runner`` once (one dummy image filling it); return how many succeeded.

    ``dim`` is the patch dimension (1176 for Qwen2.5-VL) and ``dtype`` the dtype pixels arrive in. Skipped (0) when
    ``VLLM_SKIP_WARMUP`` is true (``settings`` defaults to the process settings) or bucketing is disabled. A bucket
    whose capture raises :class:`BackendError` is logged and skipped; any other error propagates.
    """
    settings = get_settings() if settings is None else settings
    name = runner.executor.name
    if settings.skip_warmup or runner.buckets is None:
        if settings.skip_warmup:
            why = "VLLM_SKIP_WARMUP is set"
        elif settings.multimodal_buckets is None:
            why = "vision bucketing is disabled"
        else:
            why = "the tower runs exact shapes (no graphs to reuse; VLLM_HPU_MM_GRAPH_BACKEND=cpu pads to buckets)"
        logger.info("captured 0 vision buckets (%s): %s", name, why)
        return 0
    start = time.perf_counter()
    captured = 0
    # Largest first: graphs sharing one memory pool (CUDA) then reserve about the largest graph, not the sum
    # (H100: 810 MiB vs 1596 MiB smallest first for the default buckets,
    # benchmarks/performance/results/vision_memory_calibration).
    for bucket in sorted(runner.buckets, reverse=True):
        grid = torch.tensor(
            [dummy_grid(bucket, merge_size=runner.merge_size, spatial_window=runner.spatial_window)], dtype=torch.int64
        )
        pixels = torch.zeros((bucket, dim), dtype=dtype, device=device)
        try:
            runner.executor.warmup(bucket, pixels, grid)
        except BackendError as exc:
            logger.warning("vision bucket %d was not captured (%s): %s", bucket, name, exc)
            continue
        captured += 1
    logger.info(
        "captured %d/%d vision buckets in %.2f s (%s)",
        captured,
        len(runner.buckets),
        time.perf_counter() - start,
        name,
    )
    return captured

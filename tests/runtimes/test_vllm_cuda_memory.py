# mypy: disable-error-code="attr-defined,arg-type"
"""The CUDA plan's KV cache is vLLM 0.32's own: the same inputs through vLLM's ``request_memory`` and
``Worker.determine_available_memory`` (run here on CPU with the profiling result stated) give the same bytes."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

import pytest

from vllm_hpu_mm.runtimes.base import ESTIMATE_CUDAGRAPHS, MemoryInputs
from vllm_hpu_mm.runtimes.vllm_cuda import NON_TORCH_BYTES, VllmCuda, available_kv_cache_memory

GIB = 2**30


def _vllm_kv(monkeypatch: pytest.MonkeyPatch, total: int, util: float, non_kv: int, graphs: int, estimate: bool) -> int:
    """vLLM's own determine_available_memory, with the profiling run's result given instead of measured."""
    from vllm.v1.worker import gpu_worker
    from vllm.v1.worker.utils import request_memory

    snapshot = types.SimpleNamespace(total_memory=total, free_memory=total, device_="cuda:0")
    cache = types.SimpleNamespace(gpu_memory_utilization=util, kv_cache_memory_bytes=None)
    result = types.SimpleNamespace(non_kv_cache_memory=non_kv, total_consumed=non_kv, transient_peak_headroom=0,
                                   after_profile=types.SimpleNamespace(free_memory=total - non_kv))  # fmt: skip

    @contextlib.contextmanager
    def profiled(*_: Any, **__: Any) -> Iterator[Any]:
        yield result

    monkeypatch.setattr(gpu_worker, "memory_profiling", profiled)
    monkeypatch.setattr(gpu_worker, "maybe_apply_startup_plan", lambda _: None)
    monkeypatch.setattr(gpu_worker, "maybe_rocm_profiling_fallback", lambda _: None, raising=False)
    monkeypatch.setattr(gpu_worker.current_platform, "is_cuda_alike", lambda: True)
    monkeypatch.setattr(gpu_worker.envs, ESTIMATE_CUDAGRAPHS, estimate)
    runner = types.SimpleNamespace(model_memory_usage=0, profile_run=lambda **_: None,
                                   profile_cudagraph_memory=lambda: graphs)  # fmt: skip
    worker = types.SimpleNamespace(
        cache_config=cache, init_snapshot=snapshot, requested_memory=request_memory(snapshot, cache),
        model_runner=runner, randomize_dummy_inputs=False, vllm_config=types.SimpleNamespace(
            compilation_config=types.SimpleNamespace(cudagraph_mode=gpu_worker.CUDAGraphMode.FULL_AND_PIECEWISE)),
        _scoped_allocator_max_split=lambda **_: contextlib.nullcontext(),
        model_config=types.SimpleNamespace(multimodal_config=None), parallel_config=types.SimpleNamespace(),
    )  # fmt: skip
    return int(gpu_worker.Worker.determine_available_memory(worker))  # type: ignore[arg-type]


@pytest.mark.vllm
@pytest.mark.parametrize(("util", "estimate"), [(0.5, True), (0.92, True), (0.92, False), (0.3, True)])
def test_the_cuda_kv_cache_is_vllms_formula_for_the_same_inputs(
    monkeypatch: pytest.MonkeyPatch, util: float, estimate: bool
) -> None:
    total, weights, peak, graphs = round(79.19 * GIB), round(15.45 * GIB), round(1.9 * GIB), round(1.3 * GIB)
    non_kv = weights + peak + NON_TORCH_BYTES
    ours = VllmCuda().memory(MemoryInputs(
        total_bytes=total, free_before_load_bytes=total, weight_bytes=weights, activation_peak_bytes=peak,
        gpu_memory_utilization=util, graph_reserved_mem=0.1, graph_estimate_bytes=graphs, kv_block_bytes=1,
        graphs=True, env={ESTIMATE_CUDAGRAPHS: "1" if estimate else "0"}))  # fmt: skip
    assert ours.kv_cache_bytes == _vllm_kv(monkeypatch, total, util, non_kv, graphs, estimate)
    assert ours.kv_cache_bytes == available_kv_cache_memory(total, util, non_kv, graphs, estimate)


def test_half_the_h100_is_not_the_gaudi_formulas_promise() -> None:
    # The old CUDA plan took (free after load) x 0.5 x 0.9: 28 GiB for the 7B. vLLM asks for half the card and takes
    # everything else out of it: at most ~23 GiB before its profiling peak and graphs.
    total, weights = round(79.19 * GIB), round(15.45 * GIB)
    kv = available_kv_cache_memory(total, 0.5, weights + NON_TORCH_BYTES, 0, True)
    assert kv < 24.2 * GIB
    assert kv < (total - weights) * 0.5 * 0.9

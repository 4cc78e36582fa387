"""vLLM on NVIDIA GPUs (vLLM 0.32/0.33): what it does with your environment.

- Memory: the KV cache is ``total x gpu_memory_utilization`` less what the profiling run measured (weights,
  activation peak, non-torch memory); CUDA graphs are captured after that, from what is left. It reads none of the
  guide's ``VLLM_GRAPH_*`` variables.
- Graphs: one CUDA graph per ``cudagraph_capture_sizes`` entry, by token count (decode and mixed batches alike;
  longer prefills run piecewise), all captured into one shared pool; the vision encoder's own CUDA graphs per token
  budget (:mod:`.encoder_graphs`).
- What ``serve`` hands it: :mod:`.exports` (one ``--compilation-config``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from vllm_hpu_mm.engine import EngineShape, TextShapes
from vllm_hpu_mm.envs import read_if_set
from vllm_hpu_mm.runtimes.arithmetic import VLLM_032, vllm_batch_defaults
from vllm_hpu_mm.runtimes.base import (
    ESTIMATE_CUDAGRAPHS,
    FP32_SOFTMAX,
    BatchLimits,
    DeviceFacts,
    MemoryInputs,
    MemorySplit,
    NoBucketList,
    Runtime,
    RuntimeEntry,
    RuntimeTraits,
    VisionBucketing,
)
from vllm_hpu_mm.runtimes.vllm_cuda.encoder_graphs import encoder_cudagraph_config
from vllm_hpu_mm.values import GIB

__all__ = [
    "ENTRY",
    "NON_TORCH_BYTES",
    "TRAITS",
    "VllmCuda",
    "available_kv_cache_memory",
    "capture_sizes",
    "capture_sizes_refused",
]

#: Memory the worker takes after its start-up snapshot outside PyTorch's tensors (cuBLAS/NCCL workspaces), per card:
#: an estimate (vLLM logs print 0.2-0.3 GiB for it on single nodes; the CUDA context itself is taken before the
#: snapshot and so is not counted against the KV cache).
NON_TORCH_BYTES = GIB // 4


def available_kv_cache_memory(
    total: int, utilization: float, non_kv_cache_memory: int, cudagraph_estimate: int, estimate_cudagraphs: bool
) -> int:
    """vLLM 0.32's KV cache: ``request_memory`` (``v1/worker/utils.py``) asks for ceil(total x utilisation);
    ``Worker.determine_available_memory`` (``v1/worker/gpu_worker.py``) gives the KV cache that less the profiled
    non-KV memory (weights + the profiling run's transient peak + non-torch memory), less the profiled CUDA-graph
    memory when VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is on (its default)."""
    requested = math.ceil(total * utilization)
    return requested - non_kv_cache_memory - (cudagraph_estimate if estimate_cudagraphs else 0)


TRAITS = RuntimeTraits(
    backend="cuda",
    reads=frozenset(),
    profiles_forward=True,
    fp32_softmax_default=False,
    fp32_softmax_note="vLLM's CUDA attention backends choose their own softmax precision (vLLM 0.32 reads no "
    "VLLM_FP32_SOFTMAX)",
    not_read=((FP32_SOFTMAX, "vLLM 0.32 reads none of it (its CUDA attention backends choose the softmax precision)"),),
    enforced_by="serve exports the graphs that fit as --compilation-config capture sizes and encoder budgets",
    profiles_graphs=True,
    offloads_weights=True,  # model_executor/offloader/base.py create_offloader, offloader/uva.py (vLLM 0.32)
    tower_follows_limits=True,
    kv_cache_memory_bytes_zero_unset=True,
    # vLLM's own CUDA image at the release planned (Docker Hub vllm/vllm-openai, tags v<version>)
    image="vllm/vllm-openai:v0.32.0",
)


def _grid(top: int, small: range | tuple[int, ...]) -> set[int]:
    """``small`` up to ``top``, then multiples of 8 below 256 and of 16 from 256 up to ``top``."""
    return {n for n in small if n <= top} | set(range(8, min(top + 1, 256), 8)) | set(range(256, top + 1, 16))


def capture_sizes(max_num_seqs: int, max_num_batched_tokens: int, *, speculative_tokens: int = 0,
                  performance_mode: str = "balanced", given: tuple[int, ...] | None = None,
                  given_max: int | None = None) -> list[int]:  # fmt: skip
    """vLLM 0.32's default ``cudagraph_capture_sizes`` (``config/vllm.py`` ``VllmConfig._set_cudagraph_sizes``,
    512 the platform's default ceiling): the ceiling min(max_num_seqs x (1 + speculative tokens) x 2, 512,
    max_num_batched_tokens); 1, 2, 4 (``interactivity``: every size up to 32), multiples of 8 below 256 and of 16
    from 256 up to it; max_num_batched_tokens where it is within; then the uniform decode batches: ``max_num_seqs``
    tokens without speculative decoding, else each request count of the same grid (and ``max_num_seqs``) times
    1 + the speculative tokens, within the ceiling before the token budget's clamp. The user's
    ``cudagraph_capture_sizes`` (``given``) replace the rule: deduplicated, those within the token budget; their
    ``max_cudagraph_capture_size`` alone (``given_max``) is the ceiling, with no uniform decode sizes added."""
    if given is not None:
        return sorted({n for n in given if n <= max_num_batched_tokens})
    query = 1 + speculative_tokens
    ceiling = min(max_num_seqs * query * 2, 512) if given_max is None else given_max
    uniform: set[int] = set()
    if given_max is not None:
        pass
    elif query > 1:
        counts = _grid(min(max_num_seqs, 512), (1, 2, 4)) | {min(max_num_seqs, 512)}
        uniform = {n * query for n in counts if n * query <= ceiling}
    elif max_num_seqs <= ceiling:
        uniform = {max_num_seqs}
    top = min(max_num_batched_tokens, ceiling)
    sizes = _grid(top, range(1, min(top, 32) + 1) if performance_mode == "interactivity" else (1, 2, 4))
    if max_num_batched_tokens <= top:
        sizes.add(max_num_batched_tokens)
    return sorted(sizes | {n for n in uniform if n <= max_num_batched_tokens})


def capture_sizes_refused(config: Mapping[str, object], max_num_batched_tokens: int) -> str | None:
    """Why vLLM 0.32 refuses the compilation config's capture sizes while it builds its config from the arguments
    (``config/vllm.py`` ``VllmConfig._set_cudagraph_sizes``, run from ``__post_init__`` on CUDA with graphs on, before
    anything loads), else None. The class takes each alone; the build refuses a ceiling that comes out below 1
    (2448-2451), an empty ``cudagraph_capture_sizes`` (2454-2458) and both given where the ceiling is not the largest
    size within the token budget (2510-2518). Only for graphs on: under ``--enforce-eager`` or ``cudagraph_mode``
    NONE vLLM skips these checks. Non-integer values are left to the class's own check."""
    sizes, top = config.get("cudagraph_capture_sizes"), config.get("max_cudagraph_capture_size")
    if type(top) is int and min(top, max_num_batched_tokens) < 1:
        return f"max_cudagraph_capture_size {top} leaves no CUDA graph size; accepted with graphs on: 1 or more"
    if not isinstance(sizes, list) or not all(type(n) is int for n in sizes):
        return None
    if not sizes:
        return (
            "cudagraph_capture_sizes is empty: vLLM needs at least one size when CUDA graphs are on; accepted: "
            "one or more sizes, or --enforce-eager (or cudagraph_mode NONE) for no graphs"
        )
    kept = [n for n in sizes if n <= max_num_batched_tokens]
    largest = max(kept, default=0)
    if type(top) is int and not kept:
        return (
            f"none of cudagraph_capture_sizes is within max_num_batched_tokens {max_num_batched_tokens}, so "
            f"vLLM refuses max_cudagraph_capture_size {top} beside them; accepted: a size within the budget"
        )
    if type(top) is int and top != largest:
        return (
            f"max_cudagraph_capture_size {top} is not the largest of cudagraph_capture_sizes within "
            f"max_num_batched_tokens {max_num_batched_tokens} ({largest}): vLLM refuses the pair; accepted: "
            f"max_cudagraph_capture_size {largest}, or one of the two alone"
        )
    return None


@dataclasses.dataclass(frozen=True)
class VllmCuda(NoBucketList):
    name: Runtime = Runtime.VLLM_CUDA
    traits: RuntimeTraits = TRAITS
    #: The user's --compilation-config: its cudagraph_capture_sizes and its max_cudagraph_capture_size. Whether any
    #: graph is captured at all (its cudagraph_mode, -O, --enforce-eager) is one rule of the plan's,
    #: :func:`vllm_hpu_mm.plan.derived.graphs_off_by`.
    given_sizes: tuple[int, ...] | None = None
    given_max: int | None = None

    def with_compilation_config(self, config: Mapping[str, object]) -> VllmCuda:
        sizes, top = config.get("cudagraph_capture_sizes"), config.get("max_cudagraph_capture_size")
        ints = isinstance(sizes, list) and sizes and all(isinstance(n, int) and n > 0 for n in sizes)
        return dataclasses.replace(self, given_sizes=tuple(sizes) if ints and isinstance(sizes, list) else None,
                                   given_max=top if isinstance(top, int) and top > 0 else None)  # fmt: skip

    def text_shapes(self, shape: EngineShape) -> TextShapes:
        sizes = capture_sizes(shape.max_num_seqs, shape.max_num_batched_tokens,
                              speculative_tokens=shape.num_speculative_tokens,
                              performance_mode=shape.performance_mode, given=self.given_sizes,
                              given_max=self.given_max)  # fmt: skip
        decode = tuple((n, 0) for n in sizes)
        whose = "your --compilation-config's" if self.given_sizes or self.given_max else "vLLM's"
        return TextShapes((), decode, f"{whose} CUDA graph capture sizes (by token count)")

    def memory(self, m: MemoryInputs) -> MemorySplit:
        """:func:`available_kv_cache_memory` with the plan's estimates of the weights, the profiling run's peak,
        the non-torch memory and the graphs vLLM profiles (or, when free memory after load is stated, total - free
        as the non-KV memory)."""
        estimate = read_if_set(ESTIMATE_CUDAGRAPHS, m.env) is not False  # declared in envs.py; on by default
        graphs = m.graph_estimate_bytes if m.graphs else 0
        if m.free_after_load_bytes is not None:
            non_kv = m.total_bytes - m.free_after_load_bytes
            free = m.free_after_load_bytes
        else:
            non_kv = m.weight_bytes + m.activation_peak_bytes + NON_TORCH_BYTES
            free = m.free_before_load_bytes - non_kv
        kv = available_kv_cache_memory(m.total_bytes, m.gpu_memory_utilization, non_kv, graphs, estimate)
        requested = math.ceil(m.total_bytes * m.gpu_memory_utilization)
        note = "less the profiled CUDA-graph memory" if estimate else f"graphs not subtracted ({ESTIMATE_CUDAGRAPHS}=0)"
        formula = (
            f"{VLLM_032} v1/worker/utils.py request_memory + gpu_worker.determine_available_memory: "
            f"ceil(total x gpu_memory_utilization) - (weights + profiling peak + non-torch), {note}"
        )
        if m.kv_cache_memory_bytes is not None:  # gpu_worker.py:649: the given size, utilization not read
            kv = m.kv_cache_memory_bytes
            formula = f"{VLLM_032} gpu_worker.determine_available_memory: the explicit --kv-cache-memory-bytes"
        return MemorySplit(
            free,
            m.activation_peak_bytes,
            requested - non_kv,
            graphs,
            max(kv, 0),
            formula,
            NON_TORCH_BYTES if m.free_after_load_bytes is None else 0,
        )

    def batch_defaults(self, device: DeviceFacts) -> BatchLimits:
        return vllm_batch_defaults(device)

    def vision_bucketing(self, model_type: str, *, model: str | None = None) -> VisionBucketing:
        return VisionBucketing(False, False, (), f"{VLLM_032} runs the vision tower eagerly unless encoder CUDA "
                               "graphs are configured (compilation_config.cudagraph_mm_encoder)")  # fmt: skip


ENTRY = RuntimeEntry(Runtime.VLLM_CUDA, TRAITS, lambda env, spelled, version, bucket_file: VllmCuda(), "h100",
                     "vllm_hpu_mm.runtimes.vllm_cuda.exports", encoder_graphs=encoder_cudagraph_config,
                     compilation_refused=capture_sizes_refused)  # fmt: skip

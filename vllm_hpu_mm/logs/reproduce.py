"""Reproduce a public Gaudi log's memory split with the plan's model: the split the log printed (weights, profiling
run, free memory, usable, graph reserve, KV cache and blocks, warm-up), the inputs the log states (a ``# inputs:``
header: model config, runtime, device, utilisation, graph reserve), and what the plan computes from them two ways:

- *given the logged free memory*: the runtime's own arithmetic from that free memory (usable, graphs, KV, blocks);
- *from the inputs alone*: weights from the model's config, the runtime's profiling run, the device's total.

Used by ``benchmarks/gaudi_log_reproduction.py`` and its test; tolerances are the issue's (1% given free memory;
weights 3% and blocks a few percent from the inputs alone).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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
from vllm_hpu_mm.models import devices
from vllm_hpu_mm.models.config_json import dims_from_config, read_config_json
from vllm_hpu_mm.models.dims import ModelDims, kv_bytes_per_token, weight_bytes
from vllm_hpu_mm.plan.costs import warmup_estimate
from vllm_hpu_mm.runtimes.base import MemoryInputs, Runtime
from vllm_hpu_mm.runtimes.registry import model_for
from vllm_hpu_mm.values import GIB

__all__ = ["Logged", "Reproduction", "read_log", "reproduce"]


@dataclasses.dataclass(frozen=True)
class Logged:
    """What one log printed (None where it did not), and the inputs its header states."""

    inputs: dict[str, Any]
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


def _gib(text: str) -> int:
    return round(float(text) * GIB)


def read_log(lines: Iterable[str]) -> Logged:
    """The memory lines of a Gaudi log and its ``# inputs: {json}`` header (first match of each wins)."""
    found: dict[str, Any] = {}
    inputs: dict[str, Any] = {}
    for line in lines:
        if line.startswith("# inputs:"):
            inputs = json.loads(line.split(":", 1)[1])
            continue
        if (m := HPU_TOTAL.search(line)) and "total_bytes" not in found:
            found["total_bytes"] = _gib(m["total"])
        if (m := HPU_WEIGHTS.search(line)) and "weight_bytes" not in found:
            found["weight_bytes"] = size_bytes(m)
        if (m := HPU_PROFILE_RUN.search(line)) and "profile_bytes" not in found:
            found["profile_bytes"] = size_bytes(m)
        if (m := GAUDI_MEMORY.search(line)) and "free_bytes" not in found:
            found.update(free_bytes=_gib(m["free"]), usable_bytes=_gib(m["usable"]))
            if m["graph"] is not None:
                found.update(graph_bytes=_gib(m["graph"]), kv_bytes=_gib(m["kv"]))
        if (m := HPU_CACHE_ENGINE.search(line)) and "kv_bytes" not in found:
            found["kv_bytes"] = size_bytes(m)
        if (m := HPU_BLOCKS.search(line)) and "kv_blocks" not in found:
            found["kv_blocks"] = int(m["n"] or m["n2"])
        if (m := WARMUP_FINISHED.search(line)) and "warmup_seconds" not in found:
            found.update(warmup_seconds=int(m["secs"]), warmup_bytes=size_bytes(m))
        if (m := PHASE_TOTAL.search(line)) and m["pct"] and float(m["pct"]) > 0:
            found["graphs_warmed"] = found.get("graphs_warmed", 0) + round(int(m["n"]) * 100 / float(m["pct"]))
    return Logged(inputs=inputs, **found)


@dataclasses.dataclass(frozen=True)
class Reproduction:
    """Logged values against the plan's, by quantity: ``{name: (logged, planned)}`` given the logged free memory
    (``given_free``) and from the inputs alone (``from_inputs``)."""

    name: str
    given_free: dict[str, tuple[int, int]]
    from_inputs: dict[str, tuple[int, int]]

    @staticmethod
    def error(pair: tuple[int, int]) -> float:
        logged, planned = pair
        return abs(planned - logged) / logged if logged else math.inf


def _model(inputs: dict[str, Any], configs: Path) -> ModelDims:
    path = configs / inputs["model"]
    return dims_from_config(read_config_json(path, source="log inputs"), name=inputs["model"], path=path,
                            source=str(path))  # fmt: skip


def reproduce(name: str, logged: Logged, configs: Path) -> Reproduction:
    """The plan's numbers for the log's inputs, against the log's (see the module docstring)."""
    i = logged.inputs
    model = _model(i, configs)
    tp, block = int(i.get("tp", 1)), int(i.get("block_size", 128))
    runtime = model_for(Runtime(i.get("runtime", "vllm-fork")))
    block_bytes = kv_bytes_per_token(model, 2, tp) * block
    weights = weight_bytes(model, 2, tp, i.get("quantization"))
    total = devices.device_spec(i.get("device", "gaudi2")).total_bytes
    util, reserved = float(i.get("gpu_memory_utilization", 0.9)), float(i.get("graph_reserved_mem", 0.1))
    eager = bool(i.get("enforce_eager", False))

    def split(free: int | None) -> tuple[int, int, int, int]:
        ms = runtime.memory(MemoryInputs(
            total_bytes=total, free_before_load_bytes=total, weight_bytes=weights, activation_peak_bytes=0,
            gpu_memory_utilization=util, graph_reserved_mem=reserved, graph_estimate_bytes=0,
            kv_block_bytes=block_bytes, graphs=not eager, free_after_load_bytes=free))  # fmt: skip
        return ms.usable_bytes, ms.graph_bytes, ms.kv_cache_bytes, ms.free_after_load_bytes

    given: dict[str, tuple[int, int]] = {}
    if logged.free_bytes is not None:
        usable, graphs, kv, _ = split(logged.free_bytes)
        given["usable"] = (logged.usable_bytes or 0, usable)
        if logged.graph_bytes is not None and logged.kv_bytes is not None:
            given["graph_reserve"], given["kv_cache"] = (logged.graph_bytes, graphs), (logged.kv_bytes, kv)
        if logged.kv_blocks is not None:
            given["kv_blocks"] = (logged.kv_blocks, kv // block_bytes)
    elif logged.kv_bytes is not None and logged.kv_blocks is not None:  # KV size printed, blocks from it
        given["kv_blocks"] = (logged.kv_blocks, logged.kv_bytes // block_bytes)
    alone: dict[str, tuple[int, int]] = {}
    if logged.weight_bytes is not None:
        alone["weights"] = (logged.weight_bytes, weights)
    if logged.total_bytes is not None:
        alone["total"] = (logged.total_bytes, total)
    if logged.kv_blocks is not None and logged.free_bytes is None and logged.kv_bytes is None:
        alone["kv_blocks"] = (logged.kv_blocks, split(None)[2] // block_bytes)
    if logged.free_bytes is not None:
        usable, graphs, kv, free = split(None)
        alone["free"] = (logged.free_bytes, free)
        if logged.kv_blocks is not None:
            alone["kv_blocks"] = (logged.kv_blocks, kv // block_bytes)
    estimate = warmup_estimate("hpu", logged.graphs_warmed or 0)
    if logged.warmup_seconds is not None and logged.graphs_warmed and estimate is not None:
        alone["warmup_seconds"] = (logged.warmup_seconds, round(estimate.seconds))
    return Reproduction(name, given, alone)

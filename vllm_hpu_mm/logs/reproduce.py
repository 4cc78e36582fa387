"""Reproduce a Gaudi server log's memory split with the plan's model: the split the log printed (device total,
weights, profiling run, free memory, usable, graph reserve, KV cache and blocks, warm-up), against what the plan
computes from typed inputs (:class:`RunInputs`: the model, runtime, device and settings the run was started with)
two ways:

- *given the logged free memory*: the runtime's own arithmetic from that free memory (usable, graphs, KV, blocks);
- *from the inputs alone*: weights from the model's config, the runtime's profiling run, the device's total.

``vllm-hpu-mm memory compare`` runs it on a user's log with the plan's flags;
``benchmarks/agreement/gaudi_log_reproduction.py`` on the public logs in tests/data/gaudi_logs. The tolerances
(:data:`TOLERANCES`) are the ones docs/memory-plan.md
states.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable
from typing import Any, Literal

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.logs.doctor.runs import RunSplitter
from vllm_hpu_mm.logs.numbers import integer, number
from vllm_hpu_mm.logs.patterns import (
    BUCKET_TUPLE,
    ENGINE_LENGTH,
    ENGINE_SHAPE,
    GAUDI_GRAPH_RESERVE,
    GAUDI_KV_DUMMY,
    GAUDI_MEMORY,
    GENERATED_BUCKETS,
    HPU_BLOCKS,
    HPU_CACHE_ENGINE,
    HPU_PROFILE_RUN,
    HPU_TOTAL,
    HPU_WEIGHTS,
    KV_CACHE_TOKENS,
    MODEL,
    PHASE_TOTAL,
    RELEASE,
    VLLM_BLOCKS,
    VLLM_WEIGHTS,
    WARMUP_FINISHED,
    size_bytes,
)
from vllm_hpu_mm.models.dims import ModelDims, kv_bytes_per_token, weight_bytes
from vllm_hpu_mm.plan.rules import profile_costs_of
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
    "given_free": {"usable": 0.01, "graph_reserve": 0.01, "kv_cache": 0.01, "kv_blocks": 0.01, "kv_tokens": 0.01},
    "from_inputs": {"weights": 0.03, "total": 0.01, "free": 0.05, "kv_blocks": 0.05, "kv_tokens": 0.05},
}


@dataclasses.dataclass(frozen=True)
class Logged:
    """What one run of a log printed (None where it did not); the first match of each line wins."""

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
    #: The buckets the log lists: generated (``Generated N prompt buckets: [...]``) and captured as graphs (each
    #: ``Graph/... captured`` summary), by phase: prompt (batch, query, context blocks), decode (batch, 1, blocks).
    generated_buckets: tuple[tuple[str, tuple[int, int, int]], ...] = ()
    captured_buckets: tuple[tuple[str, tuple[int, int, int]], ...] = ()
    #: The log's runner warms in two passes (vllm-fork's V0 runner before #1178: ``(batch, tokens)`` buckets).
    two_pass: bool = False
    #: The KV capacity vLLM printed in tokens (``GPU KV cache size: N tokens``; blocks x block size where
    #: ``max_model_len`` is a multiple of it).
    kv_tokens: int | None = None
    #: The KV share came from vllm-gaudi V1's dummy-block line (the usable part).
    kv_dummy: bool = False
    #: The release the log names (vLLM's banner or engine line), or None.
    release: str | None = None
    #: The longest sequence the run was started with (vLLM's engine config line: ``max_seq_len=N``), or None.
    max_model_len: int | None = None
    #: The model and quantization on vLLM's engine config line (``model='...'``, ``quantization=fp8``; ``None``
    #: printed there is read as none), or None where the log has no such line.
    model: str | None = None
    quantization: str | None = None
    #: The weights came from the fork's ``Loading model weights took in total`` line (not its pre-loading line).
    weights_in_total: bool = False
    #: Which run (server start) of how many in the log was read: the last that printed a memory figure.
    run: int = 1
    runs: int = 1

    @property
    def has_memory(self) -> bool:
        """The log printed at least one memory figure (a warm-up summary alone is not one)."""
        return any(getattr(self, f.name) is not None for f in dataclasses.fields(self) if f.name in _MEMORY_FIELDS)


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
    #: Bytes per KV element (``--kv-cache-dtype``: 1 for the fp8 family; the model's dtype under ``auto``).
    kv_dtype_size: int = 2
    #: ``--num-gpu-blocks-override``: the blocks the runtime allocates whatever memory holds (None: not given).
    num_gpu_blocks_override: int | None = None
    #: Ranks the routed experts are spread over (--enable-expert-parallel), 0 when off.
    expert_parallel_size: int = 0
    #: The device's name, for the wording of a comparison ("" where not known).
    device: str = ""
    #: The engine sizes the runtime shapes its profiling pass from, None where not known (the runtime's fixed
    #: residue then).
    engine: EngineShape | None = None


_MEMORY_FIELDS = ("total_bytes", "weight_bytes", "profile_bytes", "free_bytes", "usable_bytes", "graph_bytes",
                  "kv_bytes", "kv_blocks", "warmup_seconds", "warmup_bytes", "kv_tokens")  # fmt: skip


def _gib(text: str) -> int:
    return round(number(text) * GIB)


def _buckets(text: str, phase: str, block_size: int) -> tuple[list[tuple[str, tuple[int, int, int]]], bool]:
    """A logged bucket list as (phase, (batch, query, context blocks)); and whether it was the fork's 2-D form
    (``(batch, tokens)``: decode tokens become blocks of ``block_size``)."""
    out, two_d = [], False
    for m in BUCKET_TUPLE.finditer(text):
        a, b = integer(m[1]), integer(m[2])
        if m[3] is not None:
            out.append((phase, (a, b, integer(m[3]))))
            continue
        two_d = True
        out.append((phase, (a, b, 0) if phase == "prompt" else (a, 1, -(-b // block_size))))
    return out, two_d


def read_log(lines: Iterable[str], block_size: int = 128) -> Logged:
    """The memory lines of a Gaudi log (vllm-fork, vllm-gaudi), read as they stream by. A log of several server
    starts is split into runs as ``oom-doctor`` and ``memory calibrate`` split it
    (:class:`~vllm_hpu_mm.logs.doctor.runs.RunSplitter`), and only the last run that printed a memory figure is read,
    as calibrate reads it: a start that failed before loading its weights lends the run read nothing (not even its
    ``max_model_len``). Bucket lists keep at most :data:`MAX_BUCKETS` entries each (a log's size does not grow
    memory)."""
    splitter = RunSplitter()
    run: dict[str, Any] = {}
    chosen: dict[str, Any] | None = None
    for n, line in enumerate(lines):
        if splitter.feed(line, n + 1):
            chosen = run if Logged(**run).has_memory else chosen
            run = {"run": splitter.runs}
        _read_line(line, run, block_size)
    chosen = run if chosen is None or Logged(**run).has_memory else chosen
    return Logged(**chosen, runs=splitter.runs)


def _read_line(line: str, found: dict[str, Any], block_size: int) -> None:
    """One line's figures into ``found``, the figures of the run it belongs to."""
    if (m := HPU_TOTAL.search(line)) and "total_bytes" not in found:
        found["total_bytes"] = _gib(m["total"])
    if (m := HPU_WEIGHTS.search(line)) and ("weight_bytes" not in found or _in_total(m) > found["weights_in_total"]):
        # the fork prints its card's pre-loading line, then its total: the total wins (hpu_model_runner.py load_model)
        found.update(weight_bytes=size_bytes(m), weights_in_total=_in_total(m))
    if (m := HPU_PROFILE_RUN.search(line)) and "profile_bytes" not in found:
        found["profile_bytes"] = size_bytes(m)
    if (m := GAUDI_MEMORY.search(line)) and "free_bytes" not in found:
        found.update(free_bytes=_gib(m["free"]), usable_bytes=_gib(m["usable"]),
                     gpu_memory_utilization=number(m["util"]))  # fmt: skip
        if m["graph"] is not None:
            found.update(graph_bytes=_gib(m["graph"]), kv_bytes=_gib(m["kv"]),
                         graph_reserved_mem=number(m["reserved"]))  # fmt: skip
    _read_vllm_spellings(line, found)
    if (m := HPU_CACHE_ENGINE.search(line)) and "kv_bytes" not in found:
        found["kv_bytes"] = size_bytes(m)
    if (m := HPU_BLOCKS.search(line)) and "kv_blocks" not in found:
        found["kv_blocks"] = integer(m["n"] or m["n2"])
    if (m := WARMUP_FINISHED.search(line)) and "warmup_seconds" not in found:
        found.update(warmup_seconds=integer(m["secs"]), warmup_bytes=size_bytes(m))
    if (m := PHASE_TOTAL.search(line)) and m["pct"] and number(m["pct"]) > 0:
        found["graphs_warmed"] = found.get("graphs_warmed", 0) + round(integer(m["n"]) * 100 / number(m["pct"]))
    if (m := PHASE_TOTAL.search(line)) and m["b"]:
        phase = "decode" if "decode" in m["phase"].lower() else "prompt"
        listed, two_d = _buckets(m["b"][: MAX_BUCKETS * 24], phase, block_size)
        found["captured_buckets"] = (*found.get("captured_buckets", ()), *listed[:MAX_BUCKETS])
        found["two_pass"] = found.get("two_pass", False) or two_d
    if m := GENERATED_BUCKETS.search(line):
        listed, two_d = _buckets(m["b"][: MAX_BUCKETS * 24], m["phase"], block_size)
        kept = tuple(b for b in found.get("generated_buckets", ()) if b[0] != m["phase"])
        found["generated_buckets"] = (*kept, *listed[:MAX_BUCKETS])
        found["two_pass"] = found.get("two_pass", False) or two_d


def _in_total(m: re.Match[str]) -> bool:
    return m[0].startswith("Loading")


def _read_vllm_spellings(line: str, found: dict[str, Any]) -> None:
    """The figures vLLM itself prints (V0 and V1 wordings) and vllm-gaudi V1's dummy-block KV split, where the
    runtime's own line did not give them; and the release the log names."""
    if (m := GAUDI_KV_DUMMY.search(line)) and "kv_dummy" not in found:
        # the usable KV share (the plan's KV cache: one block less), not the dummy block GAUDI_MEMORY may have read
        found.update(kv_bytes=size_bytes(m), kv_dummy=True)
    if (m := GAUDI_GRAPH_RESERVE.search(line)) and "graph_bytes" not in found:
        found.update(graph_bytes=size_bytes(m), graph_reserved_mem=number(m["reserved"]))
    if (m := VLLM_WEIGHTS.search(line)) and "weight_bytes" not in found:
        # vLLM's "GB" here is GiB (it divides by 2**30)
        found.update(weight_bytes=round(number(m["size"]) * GIB), weights_in_total=False)
    if (m := VLLM_BLOCKS.search(line)) and "kv_blocks" not in found:
        found["kv_blocks"] = integer(m["n"])
    if (m := KV_CACHE_TOKENS.search(line)) and "kv_tokens" not in found:
        found["kv_tokens"] = integer(m["tokens"].replace(",", ""))
    if (m := RELEASE.search(line)) and "release" not in found:
        found["release"] = m["v1"] or m["v2"]
    if "max_" in line and "max_model_len" not in found and (m := ENGINE_LENGTH.search(line)):
        found["max_model_len"] = integer(m["n"])
    if "quantization=" in line and "quantization" not in found:
        shape = {f["key"]: f["value"] for f in ENGINE_SHAPE.finditer(line)}
        if "quantization" in shape:
            found["quantization"] = shape["quantization"]
            if m := MODEL.search(line):
                found["model"] = m["model"]


#: Most buckets kept from one logged list (vllm-gaudi's largest strategies generate tens of thousands).
MAX_BUCKETS = 100_000


def logged_warmup_seconds(logged: Logged, inputs: RunInputs) -> int | None:
    """The warm-up the runtime's fitted per-graph model gives for the buckets the log lists (its era from the log:
    two passes for the fork's V0 runner); None where the log lists none or the runtime has no model."""
    generated = logged.generated_buckets or logged.captured_buckets
    if not generated:
        return None

    def split(buckets: tuple[tuple[str, tuple[int, int, int]], ...]) -> tuple[list[tuple[int, int, int]],
                                                                               list[tuple[int, int]]]:  # fmt: skip
        return [s for p, s in buckets if p == "prompt"], [(s[0], s[2]) for p, s in buckets if p == "decode"]

    prompt, decode = split(generated)
    estimate = warmup_estimate(
        inputs.runtime.traits,
        prompt=prompt,
        decode=decode,
        block_size=inputs.block_size,
        eager=inputs.enforce_eager,
        era_name="two_pass" if logged.two_pass else None,
        captured=split(logged.captured_buckets) if logged.captured_buckets else None,
    )
    return None if estimate is None else round(estimate.seconds)


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
    block_bytes = kv_bytes_per_token(i.model, i.kv_dtype_size, i.tensor_parallel_size) * i.block_size

    def blocks(
        kv_bytes: int,
    ) -> int:  # the override replaces what memory holds (kv_cache_utils may_override_num_blocks)
        return kv_bytes // block_bytes if i.num_gpu_blocks_override is None else i.num_gpu_blocks_override

    weights = weight_bytes(i.model, i.dtype_size, i.tensor_parallel_size, i.quantization,
                           expert_parallel_size=i.expert_parallel_size)  # fmt: skip

    profile = None if i.engine is None else profile_costs_of(i.model, i.dtype_size, i.tensor_parallel_size, i.engine)

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
            profile=profile,
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
            given_free["kv_blocks"] = (logged.kv_blocks, blocks(given.kv_cache_bytes))
    elif logged.kv_bytes is not None and logged.kv_blocks is not None:  # KV size printed, blocks from it
        given_free["kv_blocks"] = (logged.kv_blocks, blocks(logged.kv_bytes))
    from_inputs: dict[str, tuple[int, int]] = {}
    if logged.weight_bytes is not None:
        from_inputs["weights"] = (logged.weight_bytes, weights)
    if logged.total_bytes is not None:
        from_inputs["total"] = (logged.total_bytes, i.total_bytes)
    if logged.kv_blocks is not None and logged.free_bytes is None and logged.kv_bytes is None:
        from_inputs["kv_blocks"] = (logged.kv_blocks, blocks(alone.kv_cache_bytes))
    if logged.free_bytes is not None:
        from_inputs["free"] = (logged.free_bytes, alone.free_after_load_bytes)
        if logged.kv_blocks is not None:
            from_inputs["kv_blocks"] = (logged.kv_blocks, blocks(alone.kv_cache_bytes))
    if logged.profile_bytes is not None:  # reported: the runtime's profiling pass, planned from the engine sizes
        from_inputs["profile"] = (logged.profile_bytes, alone.profile_bytes)
    if logged.kv_tokens is not None:  # vLLM's capacity in tokens: the blocks x block size
        from_inputs["kv_tokens"] = (logged.kv_tokens, blocks(alone.kv_cache_bytes) * i.block_size)
        if given is not None:
            given_free["kv_tokens"] = (logged.kv_tokens, blocks(given.kv_cache_bytes) * i.block_size)
    seconds = logged_warmup_seconds(logged, inputs)
    if logged.warmup_seconds is not None and seconds is not None:
        from_inputs["warmup_seconds"] = (logged.warmup_seconds, seconds)
    return Reproduction(name, given_free, from_inputs, alone, given, weights, block_bytes, seconds)

"""A started server's log against the plan for the flags it was started with (``vllm-hpu-mm memory compare``): for
every memory figure the log printed, the logged value, the plan's value from the inputs alone, the plan's value
given the logged free memory (where that applies) and their relative differences, held to the reproduction's
tolerances (:data:`~.reproduce.TOLERANCES`); for each quantity outside its tolerance, the likely cause.

The plan's side is :func:`~.reproduce.reproduce`, the same code the public-log benchmark runs; its inputs come from
the plan's own :class:`~vllm_hpu_mm.plan.inputs.PlanInputs` (the flags, the environment, the runtime's defaults).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Literal

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.logs.doctor.source import LogSource
from vllm_hpu_mm.logs.reading import Purpose
from vllm_hpu_mm.logs.reproduce import Logged, Mode, Reproduction, RunInputs, reproduce
from vllm_hpu_mm.models.devices import KNOWN_DEVICES
from vllm_hpu_mm.plan.inputs import PlanInputs
from vllm_hpu_mm.runtimes import registry
from vllm_hpu_mm.runtimes.base import Runtime
from vllm_hpu_mm.values import GIB, MIB

__all__ = [
    "EXPECTED_LINES",
    "QUANTITIES",
    "Comparison",
    "Miss",
    "Row",
    "check_writer",
    "compare",
    "run_inputs",
]

Unit = Literal["bytes", "blocks", "tokens", "seconds"]

#: The quantities a Gaudi log can print, in the order of a start-up: (name, label, unit).
QUANTITIES: tuple[tuple[str, str, Unit], ...] = (
    ("total", "device total", "bytes"),
    ("weights", "weights", "bytes"),
    ("profile", "profiling run", "bytes"),
    ("free", "free memory", "bytes"),
    ("usable", "usable", "bytes"),
    ("graph_reserve", "graph reserve", "bytes"),
    ("kv_cache", "KV cache", "bytes"),
    ("kv_blocks", "KV blocks", "blocks"),
    ("kv_tokens", "KV tokens", "tokens"),
    ("warmup_seconds", "warm-up", "seconds"),
)

#: What a log must hold to be compared (vllm-fork's and vllm-gaudi's own wording), for the error on one that has none.
EXPECTED_LINES = (
    "'Free device memory: X GiB, Y GiB usable ...', '# HPU blocks: N' or 'Usable num_blocks: N', "
    "'Loading model weights took ...', 'Initializing cache engine took ...', 'Model profiling run took ...', "
    "'(X GiB/Y GiB used)', 'Warmup finished in N secs', vLLM's 'Loading model weights took X GB', "
    "'Model loading took X GiB', '# GPU blocks: N', 'GPU KV cache size: N tokens', vllm-gaudi's '... reserved for "
    "KV cache dummy block ... reserved for usable KV cache'"
)
#: What compare reads a log for, named when the log holds no text.
COMPARED = Purpose(
    "compare", f"the memory lines of a Gaudi server's log (vllm-gaudi, vllm-fork): any of {EXPECTED_LINES}"
)


@dataclasses.dataclass(frozen=True)
class Row:
    """One quantity the log printed, with the plan's value both ways (None where a way does not apply) and the
    tolerance each is held to (None: reported, not checked)."""

    name: str
    label: str
    unit: Unit
    logged: int
    alone: int | None
    given: int | None
    tolerance_alone: float | None
    tolerance_given: float | None
    #: What the ``given`` value starts from: the logged free memory, or (KV blocks only) the logged KV cache.
    given_basis: str = "free memory"

    @staticmethod
    def difference(logged: int, planned: int | None) -> float | None:
        """(planned - logged) / logged (infinite where only the plan holds something), None where the plan has no
        value."""
        if planned is None:
            return None
        if logged == 0:
            return 0.0 if planned == 0 else math.inf
        return (planned - logged) / logged


@dataclasses.dataclass(frozen=True)
class Miss:
    """A compared quantity outside its tolerance, and what most likely made it so."""

    row: Row
    mode: Mode
    planned: int
    difference: float
    tolerance: float
    cause: str


@dataclasses.dataclass(frozen=True)
class Comparison:
    rows: tuple[Row, ...]
    misses: tuple[Miss, ...]
    inputs: RunInputs
    #: The runtime's memory arithmetic as its model states it (formula and source, with its commit where it has one).
    formula: str
    #: The release the log names (vLLM's banner or engine line), None where it names none.
    release: str | None = None
    #: Which run (server start) of how many in the log was compared (:func:`~.reproduce.read_log`).
    run: int = 1
    runs: int = 1

    @property
    def compared(self) -> int:
        """How many (quantity, way) pairs were held to a tolerance."""
        return sum((r.tolerance_alone is not None) + (r.tolerance_given is not None) for r in self.rows)


def run_inputs(i: PlanInputs, flag: Callable[[str], str], *, writer: LogSource | None = None,
               source: str = "") -> RunInputs:  # fmt: skip
    """The run the plan's inputs describe, per card; only a Gaudi runtime's log is read, of one pipeline stage. A
    refusal names the log's writer too, where it is known (``writer``, of the log at ``source``)."""
    written = None if writer is None else writer.describe
    log = "" if written is None else f"log {source!r} was written by {written}, "
    if i.backend != "hpu" or i.runtime.traits.backend != "hpu":
        raise ConfigError(
            f"{log}the plan is for {i.runtime_name.value} on {i.device} ({flag('runtime')}, "
            f"{flag('device')}={i.device!r}): memory compare reads a Gaudi server's log (vllm-gaudi, vllm-fork); "
            "accepted: --device gaudi2 or gaudi3 (or auto on a Gaudi host) with --runtime auto, vllm-gaudi or "
            "vllm-fork"
        )
    if i.pipeline_parallel_size != 1:
        raise ConfigError(
            f"{flag('pipeline_parallel_size')}={i.pipeline_parallel_size}: the figures compared are one card's of a "
            f"single pipeline stage{'' if written is None else f' (log {source!r}, written by {written})'}; "
            "accepted: 1"
        )
    return RunInputs(
        model=i.model,
        runtime=i.runtime,
        total_bytes=i.total_bytes,
        gpu_memory_utilization=i.gpu_memory_utilization,
        graph_reserved_mem=i.graph_reserved_mem,
        tensor_parallel_size=i.tensor_parallel_size,
        block_size=i.block_size,
        quantization=i.quantization,
        enforce_eager=i.enforce_eager,
        dtype_size=i.dtype_size,
        kv_dtype_size=i.kv_dtype_size,
        num_gpu_blocks_override=i.num_gpu_blocks_override,
        expert_parallel_size=i.expert_parallel_size,
        device=i.device,
        engine=i.engine(1),
    )


def _rows(logged: Logged, r: Reproduction, i: RunInputs) -> list[Row]:
    alone, given = r.alone, r.given
    blocks_given = r.given_free.get("kv_blocks", (0, None))[1]
    tokens = r.from_inputs.get("kv_tokens", (0, None))[1], r.given_free.get("kv_tokens", (0, None))[1]
    values: dict[str, tuple[int | None, int | None, int | None]] = {
        "total": (logged.total_bytes, i.total_bytes, None),
        "weights": (logged.weight_bytes, r.weight_bytes, None),
        "profile": (logged.profile_bytes, alone.profile_bytes, None),
        "free": (logged.free_bytes, alone.free_after_load_bytes, None),
        "usable": (logged.usable_bytes, alone.usable_bytes, given.usable_bytes if given else None),
        "graph_reserve": (logged.graph_bytes, alone.graph_bytes, given.graph_bytes if given else None),
        "kv_cache": (logged.kv_bytes, alone.kv_cache_bytes, given.kv_cache_bytes if given else None),
        "kv_blocks": (logged.kv_blocks, alone.kv_cache_bytes // r.block_bytes, blocks_given),
        "kv_tokens": (logged.kv_tokens, *tokens),
        "warmup_seconds": (logged.warmup_seconds, r.warmup_seconds, None),
    }
    rows = []
    for name, label, unit in QUANTITIES:
        value, planned_alone, planned_given = values[name]
        if value is None:
            continue
        rows.append(
            Row(
                name,
                label,
                unit,
                value,
                planned_alone,
                planned_given,
                Reproduction.tolerance("from_inputs", name) if name in r.from_inputs else None,
                Reproduction.tolerance("given_free", name) if name in r.given_free else None,
                "KV cache" if name == "kv_blocks" and given is None else "free memory",
            )
        )
    return rows


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def _settings(logged: Logged, i: RunInputs, flag: Callable[[str], str]) -> dict[str, str]:
    """The settings the log printed that differ from the ones planned with: utilisation, graph reserve, eager."""
    out = {}
    util, reserved = logged.gpu_memory_utilization, logged.graph_reserved_mem
    if util is not None and abs(util - i.gpu_memory_utilization) > 1e-9:
        out["utilisation"] = (
            f"the log ran with gpu_memory_utilization={util:g} where "
            f"{flag('gpu_memory_utilization')} says {i.gpu_memory_utilization:g}"
        )
    if reserved is not None and abs(reserved - i.graph_reserved_mem) > 1e-9:
        out["reserve"] = (
            f"the log ran with VLLM_GRAPH_RESERVED_MEM={reserved:g} where the plan used "
            f"{i.graph_reserved_mem:g} ({flag('graph_reserved_mem')}, else VLLM_GRAPH_RESERVED_MEM)"
        )
    if logged.graph_bytes == 0 and not i.enforce_eager and i.graph_reserved_mem > 0:
        out["eager"] = f"the log reserved nothing for graphs: an eager run ({flag('enforce_eager')})"
    planned_len = i.engine.max_model_len if i.engine is not None else None
    if logged.max_model_len is not None and planned_len is not None and logged.max_model_len != planned_len:
        out["length"] = (
            f"the log ran with max_model_len={logged.max_model_len} where {flag('max_model_len')} says {planned_len}: "
            f"{i.runtime.name.value}'s profiling pass and the KV cache it leaves are shaped by the length, so the "
            "two lengths profile and split memory differently"
        )
    return out


def _logged_quantization(logged: Logged, i: RunInputs, flag: Callable[[str], str]) -> str:
    """The log's engine line, where it printed a quantization other than the one planned with ("" otherwise)."""
    printed = logged.quantization
    read = None if printed is None or printed.lower() == "none" else printed
    if printed is None or (read or "").lower() == (i.quantization or "").lower():
        return ""
    model = f" (model {logged.model!r})" if logged.model else ""
    plan = f"{flag('quantization')} {read}" if read else f"no {flag('quantization')}"
    if logged.model and logged.model != i.model.name:
        plan += f" and {flag('model')} {logged.model}"
    return (f"the log's engine ran with quantization={printed}{model} where {flag('quantization')} says "
            f"{i.quantization or 'none'}: plan with {plan}")  # fmt: skip


def _cause(
    row: Row, mode: Mode, logged: Logged, r: Reproduction, i: RunInputs, flag: Callable[[str], str], missed: set[str]
) -> str:
    """The likely cause of ``row`` missing its tolerance, from what the log printed and the inputs planned with."""
    settings = _settings(logged, i, flag)
    runtime = i.runtime.name.value
    if row.name == "total":
        same = [
            d.name
            for d in KNOWN_DEVICES.values()
            if d.backend == "hpu" and abs(d.total_bytes - row.logged) <= 0.01 * row.logged
        ]
        which = f" (a {same[0]}'s)" if same else ""
        return (
            f"a different device: the log's card reports {_gib(row.logged)}{which}, {flag('device')} "
            f"{i.device or '?'} plans {_gib(i.total_bytes)}"
        )
    release = f" (the log's vLLM version: {logged.release})" if logged.release else ""
    if row.name == "weights":
        quantized = _logged_quantization(logged, i, flag)
        if quantized:  # the log's own line first: it says what the card loaded
            return quantized
        return (
            f"a different model or weight format than the flags say: check {flag('model')} ({i.model.name}), "
            f"{flag('quantization')} ({i.quantization or 'none'}), {flag('dtype')} and "
            f"{flag('tensor_parallel_size')} ({i.tensor_parallel_size}){release}"
        )
    if row.name == "free":
        if "weights" in missed:
            return "it follows the weights (see weights)"
        return settings.get("length") or _free_cause(row, logged, r, i, flag)
    if row.name == "kv_blocks" and i.num_gpu_blocks_override is not None:
        return (
            f"{flag('num_gpu_blocks_override')} {i.num_gpu_blocks_override} sets the plan's blocks; the log's server "
            f"allocated {row.logged}: it ran without the override (or with another)"
        )
    if row.name == "kv_blocks" and mode == "given_free":
        if "kv_cache" in missed:
            return "it follows the KV cache (see KV cache)"
        return (
            f"a different KV block than the plan's {r.block_bytes / MIB:g} MiB: check {flag('block_size')} "
            f"({i.block_size}), {flag('tensor_parallel_size')} ({i.tensor_parallel_size}), {flag('dtype')}, "
            f"{flag('kv_cache_dtype')} ({i.kv_dtype_size}-byte elements) and the model's KV heads ({i.model.name})"
        )
    if row.name == "usable" and "utilisation" in settings:
        return settings["utilisation"]
    if row.name != "usable" and settings:
        return "; ".join(settings.values())
    if row.name == "kv_blocks" and "free" in missed:
        return "it follows the free memory (see free memory)"
    if row.name == "kv_blocks":
        return (
            f"a different utilisation or graph reserve than the flags say ({flag('gpu_memory_utilization')} "
            f"{i.gpu_memory_utilization:g}, VLLM_GRAPH_RESERVED_MEM {i.graph_reserved_mem:g}), or other memory "
            "held on the card"
        )
    if row.name == "usable":
        return f"a different utilisation than {flag('gpu_memory_utilization')} {i.gpu_memory_utilization:g}"
    return (
        f"a different graph reserve or utilisation than the plan's (VLLM_GRAPH_RESERVED_MEM "
        f"{i.graph_reserved_mem:g}, {flag('gpu_memory_utilization')} {i.gpu_memory_utilization:g}), or a "
        f"different runtime's arithmetic than {runtime}'s"
    )


def _free_cause(row: Row, logged: Logged, r: Reproduction, i: RunInputs, flag: Callable[[str], str]) -> str:
    """Why free memory differs, from the log's own lines first: its profiling-run line (a pass the runtime does not
    make, or one that held more than the plan takes), then its release."""
    runtime, traits = i.runtime.name.value, i.runtime.traits
    logged_profile, planned_profile = logged.profile_bytes, r.alone.profile_bytes
    gap = (row.alone or 0) - row.logged  # > 0: the card held more than the plan counts
    if logged_profile is not None and logged_profile > 0 and not traits.profiles_forward:
        profiling = [n.value for n, t in registry.TRAITS.items() if t.profiles_forward and t.backend == traits.backend]
        return (
            f"the log shows a profiling run ({logged_profile / MIB:.0f} MiB, its 'Model profiling run took' line), "
            f"which {runtime} does not make" + (f": {flag('runtime')} {' or '.join(profiling)}?" if profiling else "")
        )
    if logged_profile is not None and traits.profiles_forward and gap > 0:
        extra = logged_profile - planned_profile
        if extra >= gap / 2:
            return (
                f"the log's own profiling run held {logged_profile / MIB:.0f} MiB ('Model profiling run took'), where "
                f"the plan takes {planned_profile / MIB:.0f} MiB for {runtime}'s profiling pass: {extra / GIB:.2f} "
                f"GiB of the {gap / GIB:.2f} GiB difference"
            )
    counted = f"the weights and {runtime}'s {planned_profile / MIB:.0f} MiB profiling run" if planned_profile else (
        "the weights")  # fmt: skip
    shown = f" (its profiling run, {logged_profile / MIB:.0f} MiB, does not account for it)" if logged_profile else ""
    release = f"; the log's vLLM version: {logged.release}" if logged.release else ""
    return (
        f"memory held on the card beyond {counted}, not shown by the log's own lines{shown}: another process, or "
        f"a different runtime than {flag('runtime')} {runtime}{release}"
    )


def check_writer(writer: LogSource, planned: Runtime, flag: Callable[[str], str], *, source: str) -> None:
    """Refuse a log another runtime wrote (its own lines name it: TGI, vLLM on CPU or CUDA, vllm-fork against a
    vllm-gaudi plan): its figures follow that runtime's arithmetic, not the plan's. A log whose lines name no runtime
    is compared."""
    gaudi = [r.value for r, t in registry.TRAITS.items() if t.backend == "hpu"]
    if writer.framework != "vllm" and writer.named:
        written = writer.describe
    elif writer.runtime is not None and writer.runtime_named and writer.runtime != planned:
        written = writer.runtime.value
    elif writer.runtime is None and writer.accelerator not in (None, "hpu") and writer.named:
        written = writer.describe
    else:
        return
    other = (
        f", or {flag('runtime')} {written}" if written in gaudi else f" (memory compare plans {' and '.join(gaudi)})"
    )
    raise ConfigError(
        f"log {source!r} was written by {written}, the plan is for {planned.value} ({flag('runtime')}): its figures "
        f"follow another runtime's arithmetic; accepted: a {planned.value} log{other}"
    )


def compare(logged: Logged, inputs: RunInputs, flag: Callable[[str], str], *, source: str,
            writer: LogSource | None = None) -> Comparison:  # fmt: skip
    """Compare what the log at ``source`` printed with the plan for ``inputs``; ``flag`` names a sizing field as the
    user typed it (:meth:`~vllm_hpu_mm.plan.args.SizingArgs.flag`). Raises ConfigError for a log with no memory
    line (naming its writer, where known)."""
    if not logged.has_memory:
        by = "" if writer is None else f" (written by {writer.describe})"
        raise ConfigError(
            f"log {source!r}{by} has no memory lines of a Gaudi server to compare; expected any of {EXPECTED_LINES}"
        )
    r = reproduce(source, logged, inputs)
    rows = _rows(logged, r, inputs)
    outside: list[tuple[Row, Mode, int, float, float]] = []
    for row in rows:
        ways: tuple[tuple[Mode, int | None, float | None], ...] = (
            ("from_inputs", row.alone, row.tolerance_alone),
            ("given_free", row.given, row.tolerance_given),
        )
        for mode, planned, tolerance in ways:
            if planned is None or tolerance is None:
                continue
            diff = Row.difference(row.logged, planned)
            if diff is not None and abs(diff) > tolerance:
                outside.append((row, mode, planned, diff, tolerance))
    missed = {row.name for row, *_ in outside}
    misses = tuple(
        Miss(row, mode, planned, diff, tol, _cause(row, mode, logged, r, inputs, flag, missed))
        for row, mode, planned, diff, tol in outside
    )
    return Comparison(tuple(rows), misses, inputs, r.alone.formula, logged.release, logged.run, logged.runs)

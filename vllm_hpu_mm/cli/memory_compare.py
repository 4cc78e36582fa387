"""'vllm-hpu-mm memory compare LOG': how far off was the plan? A started Gaudi server's log (vllm-gaudi, vllm-fork)
against the plan for the flags it was started with (the same sizing flags as 'memory plan'; VLLM_GRAPH_RESERVED_MEM
from the environment as 'memory plan' reads it).

For every memory figure the log printed (device total, weights, profiling run, free memory, usable, graph reserve,
KV cache, KV blocks, KV tokens, warm-up seconds; the runtime's own lines and vLLM's V0 and V1 spellings): the logged
value, the plan's from the inputs alone, the plan's given the logged free memory, and the relative differences; the
runtime arithmetic used and the vLLM version the log names (its `vLLM API server version` or `LLM engine (v...)`
line; vllm-gaudi and the fork print no release of their own, so `release` is the vLLM base they run on). A log of
several server starts is split into runs as oom-doctor splits it, and only the last run that printed a memory figure
is compared, as memory calibrate reads it (the report says which run of how many). The log is streamed (any size;
gzip/bzip2/xz, UTF-8 or UTF-16).
Tolerances (the public-log reproduction's): given the logged free memory 1%; from the inputs alone weights 3%, free
memory and KV blocks 5%, the device total 1%; warm-up seconds and the profiling run are reported. Exit 0 when every
compared quantity is within its tolerance, 1 when one is outside (named, with its likely cause), 2 for invalid input,
another runtime's log or a log with no memory lines (the one line names the log's runtime, read from its first
lines).
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.common import ExitCode, help_text, print_json, runs_read
from vllm_hpu_mm.plan.args import PLAN_OPTIONS, VLLM_FLAGS, SizingArgs, add_options
from vllm_hpu_mm.values import GIB, MIB

if TYPE_CHECKING:
    from vllm_hpu_mm.logs.compare import Comparison, Row

__all__ = ["add_parser"]

#: The planner's options that change the memory split a log shows (the rest size graphs and buckets).
SPLIT_OPTIONS = ("device", "runtime", "total_memory_gib", "graph_reserved_mem")
#: How each way of planning is named in the text and the JSON.
WAYS = {"from_inputs": "from the inputs alone", "given_free": "given the logged"}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``compare`` action to ``vllm-hpu-mm memory``."""
    p = sub.add_parser(
        "compare",
        help="compare a started server's log with the plan for its flags",
        description=help_text(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("log", help="the server's start-up log, or - for standard input")
    add_options(p, VLLM_FLAGS)
    add_options(p, [o for o in PLAN_OPTIONS if o.field in SPLIT_OPTIONS])
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: log, inputs, run and runs (which server start of how many the log holds was "
        "read: the last that printed a memory figure), arithmetic, release, quantities (a row per figure: its unit, "
        "logged, from_inputs, given_logged, their differences and tolerances; sizes in bytes), outside (each "
        "quantity outside its tolerance, with its likely_cause), compared (how many comparisons) and within (the "
        "verdict: true when none is outside)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # imported here: every ``memory`` action's parser is built, and the log readers are for this one alone (a
    # ``memory plan`` starts 20 modules lighter)
    from vllm_hpu_mm.jobs.compare import compare_log

    result = compare_log(str(args.log), SizingArgs.from_namespace(args), envs.load(), envs.runtime_environ())
    if args.json:
        print_json(_report(result, str(args.log)))
    else:
        _print(result, str(args.log))
    return int(ExitCode.NEGATIVE if result.misses else ExitCode.OK)


def _value(row: Row, v: int | None) -> str:
    if v is None:
        return "-"
    if row.unit == "seconds":
        return f"{v} s"
    if row.unit in ("blocks", "tokens"):
        return str(v)
    return f"{v / GIB:.2f} GiB" if abs(v) >= GIB else f"{v / MIB:.0f} MiB"


def _cell(row: Row, planned: int | None, tolerance: float | None) -> str:
    diff = row.difference(row.logged, planned)
    if planned is None or diff is None:
        return "-"
    diff = 0.0 if abs(diff) < 5e-5 else diff  # no "-0.00%"
    mark = "reported" if tolerance is None else ("ok" if abs(diff) <= tolerance else "OUTSIDE") + f" {tolerance:.0%}"
    return f"{_value(row, planned)} {diff:+.2%} ({mark})"


def _print(c: Comparison, log: str) -> None:
    i = c.inputs
    print(
        f"memory compare: {log} against the plan for {i.model.name} on {i.device} ({i.total_bytes / GIB:.2f} GiB), "
        f"{i.runtime.name.value}, TP {i.tensor_parallel_size}, gpu_memory_utilization {i.gpu_memory_utilization:g}, "
        f"VLLM_GRAPH_RESERVED_MEM {i.graph_reserved_mem:g}{', eager' if i.enforce_eager else ''}, block size "
        f"{i.block_size}"
    )
    print(runs_read(c.run, c.runs))
    print(f"arithmetic: {c.formula}")
    if c.release:
        print(f"the log's vLLM version: {c.release}")
    table = [("quantity", "logged", "plan from the inputs alone", "plan given the logged free memory")]
    for row in c.rows:
        given = _cell(row, row.given, row.tolerance_given)
        if row.given is not None and row.given_basis != "free memory":
            given += f" (from the logged {row.given_basis})"
        table.append((row.label, _value(row, row.logged), _cell(row, row.alone, row.tolerance_alone), given))
    widths = [max(len(r[k]) for r in table) for k in range(3)]
    for r in table:
        print(f"  {r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}")
    if any(r.name == "kv_blocks" and r.given_basis == "KV cache" for r in c.rows):
        print(
            "note: the log printed its KV cache but no free memory: its blocks are checked against that KV cache; "
            "from the inputs alone they are reported, not checked (they also depend on the run's utilisation and "
            "graph reserve, which such a log does not print)"
        )
    for m in c.misses:
        basis = "" if m.mode == "from_inputs" else f" {m.row.given_basis}"
        print(
            f"outside: {m.row.label} {WAYS[m.mode]}{basis}: logged {_value(m.row, m.row.logged)}, planned "
            f"{_value(m.row, m.planned)} ({m.difference:+.2%}, tolerance {m.tolerance:.0%}); likely cause: {m.cause}"
        )
    if c.misses:
        print(f"verdict: {len(c.misses)} of {c.compared} comparisons outside their tolerance")
    elif c.compared:
        print(f"verdict: all {c.compared} comparisons within their tolerance")
    else:
        print("verdict: nothing to hold to a tolerance: the log printed only figures that are reported")


def _finite(x: float | None) -> float | None:
    """A difference as JSON holds it: an infinite one (nothing logged, something planned) as null."""
    return x if x is None or math.isfinite(x) else None


def _report(c: Comparison, log: str) -> dict[str, Any]:
    i = c.inputs
    return {
        "log": log,
        "inputs": {
            "model": i.model.name,
            "device": i.device,
            "total_bytes": i.total_bytes,
            "runtime": i.runtime.name.value,
            "tensor_parallel_size": i.tensor_parallel_size,
            "gpu_memory_utilization": i.gpu_memory_utilization,
            "graph_reserved_mem": i.graph_reserved_mem,
            "block_size": i.block_size,
            "quantization": i.quantization,
            "enforce_eager": i.enforce_eager,
        },
        # the run read, as memory calibrate and oom-doctor --json name it
        "run": c.run,
        "runs": c.runs,
        "arithmetic": c.formula,
        "release": c.release,
        "quantities": [
            {
                "name": r.name,
                "unit": r.unit,
                "logged": r.logged,
                "from_inputs": r.alone,
                "difference_from_inputs": _finite(r.difference(r.logged, r.alone)),
                "tolerance_from_inputs": r.tolerance_alone,
                "given_logged": r.given,
                "given_basis": r.given_basis if r.given is not None else None,
                "difference_given_logged": _finite(r.difference(r.logged, r.given)),
                "tolerance_given_logged": r.tolerance_given,
            }
            for r in c.rows
        ],
        "outside": [
            {
                "name": m.row.name,
                "mode": m.mode,
                "logged": m.row.logged,
                "planned": m.planned,
                "difference": _finite(m.difference),
                "tolerance": m.tolerance,
                "likely_cause": m.cause,
            }
            for m in c.misses
        ],
        "compared": c.compared,
        "within": not c.misses,
    }

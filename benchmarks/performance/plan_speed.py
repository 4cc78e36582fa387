"""How long the main job's plan takes as a user runs it: ``serve --dry-run``, ``memory plan`` and ``buckets replay``
(the embedded traffic), each a fresh ``python -m vllm_hpu_mm.cli.main`` process, timed from start to exit.

Each command runs ``--runs`` times (at least 5) in a clean environment (no VLLM_* / HF_* settings, an empty Hugging
Face cache and an empty home, so no memory profile another run calibrated; offline: the main job,
Qwen2.5-VL-7B-Instruct on a Gaudi2 served by vllm-gaudi, with the catalog's dimensions), the commands taking turns.
Python's compiled modules are written and read as an installed package's are (PYTHONDONTWRITEBYTECODE dropped; each
checkout compiled once before the runs), so no run pays for compiling the package. Reported per command: the median,
min and max wall time, and the median CPU time of the process (user + system, a forked child's included: what the
command itself costs, other jobs' turns on a shared machine aside) and of the planning process alone (the critical
path on an idle 2-core machine, where a child works beside it). The machine is named (CPU model, ``nproc``) with the
load average before and after the runs: on a loaded machine the wall times are longer, the CPU times much less so.
With ``--baseline DIR`` (another checkout, e.g. the commit before a change) its commands take turns with this
checkout's, so that both meet the same load. One command::

    .venv/bin/python benchmarks/performance/plan_speed.py --runs 5 [--baseline /path/to/other/checkout]

It prints a Markdown table and writes ``benchmarks/performance/results/plan_speed.md`` and ``.json``. The target
(issue #31): ``serve --dry-run`` and ``memory plan`` at most 2 s, ``buckets replay`` at most 10 s, on an idle 2-core
machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
COMMANDS = {
    "serve --dry-run": "serve --dry-run",
    "memory plan": "memory plan",
    "buckets replay": "buckets replay",
}
#: Runs the command as ``python -m vllm_hpu_mm.cli.main`` does, then writes the process's own CPU seconds and minor
#: page faults (its forked children's left out) to the file named first: the planning process's CPU is the critical
#: path on an idle machine (a child works beside it), so it stands for the wall time an idle 2-core machine would
#: see; its page faults (first touches of new memory, and pages copied after each fork) are part of its system time.
SELF_CPU = (
    "import atexit, resource, runpy, sys\n"
    "out = sys.argv.pop(1)\n"
    "def own():\n"
    "    r = resource.getrusage(resource.RUSAGE_SELF)\n"
    "    open(out, 'w').write(f'{r.ru_utime + r.ru_stime!r} {r.ru_minflt}')\n"
    "atexit.register(own)\n"
    "runpy.run_module('vllm_hpu_mm.cli.main', run_name='__main__', alter_sys=True)\n"
)
#: Most seconds one command may take before the run is called failed (a plan that hangs is a finding, not a wait).
TIMEOUT_S = 300
MIN_RUNS = 5
MAX_RUNS = 50


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def git_commit(root: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=root,
                          check=False)  # fmt: skip
    return done.stdout.strip() or "unknown"


def run_once(args: str, hub: str, root: Path) -> tuple[float, float, float, float]:
    """Wall and CPU seconds (user + system; the planning process's own, its children left out) and the planning
    process's minor page faults of one run of ``vllm-hpu-mm ARGS`` from checkout ``root``; exits on a failed run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "HF_")) and k != "PYTHONDONTWRITEBYTECODE"}
    # an empty home: no memory profile another run calibrated (~/.cache/vllm-hpu-mm) changes the plan timed
    env.update({"HF_HUB_CACHE": hub, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(root), "HOME": hub})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    own = Path(hub) / "own_cpu"
    done = subprocess.run([sys.executable, "-c", SELF_CPU, str(own), *shlex.split(args)], capture_output=True,
                          text=True, env=env, cwd=root, timeout=TIMEOUT_S, check=False)  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"vllm-hpu-mm {args} failed with exit {done.returncode}:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    own_cpu, own_faults = own.read_text().split()
    return wall, cpu, float(own_cpu), float(own_faults)


def summary(walls: list[float], cpus: list[float], own: list[float], faults: list[float]) -> dict[str, Any]:
    return {"runs": len(walls), "median_s": round(statistics.median(walls), 3), "min_s": round(min(walls), 3),
            "max_s": round(max(walls), 3), "median_cpu_s": round(statistics.median(cpus), 3),
            "median_own_cpu_s": round(statistics.median(own), 3),
            "median_own_faults": round(statistics.median(faults)), "wall_s": [round(x, 3) for x in walls],
            "cpu_s": [round(x, 3) for x in cpus], "own_cpu_s": [round(x, 3) for x in own],
            "own_faults": [round(x) for x in faults]}  # fmt: skip


def markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        "# Plan speed: the main job as a user runs it",
        "",
        f"Machine: {m['cpu']}, nproc {m['nproc']}, Python {m['python']}; load average (1, 5, 15 min) "
        f"{m['load_before']} before and {m['load_after']} after the runs{'' if not m['note'] else '; ' + m['note']}. "
        f"Commit {result['commit']}"
        + (f", beside {result['baseline']['commit']} (`--baseline`, taking turns)" if result.get("baseline") else "")
        + ". Written by `benchmarks/performance/plan_speed.py`.",
        "",
        f"Each command {result['runs']} times, a fresh process each (import, plan, print), in a clean environment "
        "(the main job: Qwen2.5-VL-7B-Instruct on a Gaudi2 under vllm-gaudi, the embedded traffic; the package's "
        "modules compiled beforehand, as an installed package's are). Wall time from start to exit; CPU time is the "
        "process's user + system time, a forked child's included (the budget search works on two cores); own CPU "
        "the planning process's alone (its children left out: the critical path on an idle 2-core machine, where a "
        "child works beside it); own faults its minor page faults.",
        "",
        "| command | commit | median wall s | min s | max s | median CPU s | median own CPU s | median own faults "
        "| target (idle 2-core) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in COMMANDS:
        target = "10" if name == "buckets replay" else "2"
        for run in (result.get("baseline"), result):
            if run:
                s = run["commands"][name]
                lines.append(f"| `{name}` | {run['commit']} | {s['median_s']:.2f} | {s['min_s']:.2f} | "
                             f"{s['max_s']:.2f} | {s['median_cpu_s']:.2f} | {s['median_own_cpu_s']:.2f} | "
                             f"{s['median_own_faults']} | {target} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=MIN_RUNS, help=f"runs per command ({MIN_RUNS} to {MAX_RUNS})")
    parser.add_argument("--note", default="", help="a line on the machine's state (e.g. 'shared with other jobs')")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for plan_speed.md and .json")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout timed in turns with this one")
    args = parser.parse_args()
    if not MIN_RUNS <= args.runs <= MAX_RUNS:
        parser.error(f"--runs {args.runs} is invalid; accepted: {MIN_RUNS} to {MAX_RUNS}")
    if args.baseline is not None and not (args.baseline / "vllm_hpu_mm").is_dir():
        parser.error(f"--baseline {args.baseline} is invalid; accepted: a checkout of this project")
    roots = [ROOT] if args.baseline is None else [args.baseline.resolve(), ROOT]
    machine = {"cpu": cpu_model(), "nproc": os.cpu_count(), "python": platform.python_version(),
               "load_before": load_average(), "note": args.note}  # fmt: skip
    times: dict[tuple[Path, str], tuple[list[float], list[float], list[float], list[float]]] = {
        (r, n): ([], [], [], []) for r in roots for n in COMMANDS}  # fmt: skip
    for root in roots:  # as installed: the package's modules compiled once, not at every run
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "vllm_hpu_mm")], check=True)
    with tempfile.TemporaryDirectory() as hub:
        for _ in range(args.runs):
            for name, command in COMMANDS.items():  # commands and checkouts take turns: a load spike hits each alike
                for root in roots:
                    for kept, value in zip(times[(root, name)], run_once(command, hub, root), strict=True):
                        kept.append(value)
    machine["load_after"] = load_average()
    runs = {root: {"commit": git_commit(root), "commands": {n: summary(*times[(root, n)]) for n in COMMANDS}}
            for root in roots}  # fmt: skip
    result = {**runs[ROOT], "runs": args.runs, "machine": machine,
              "baseline": runs[roots[0]] if args.baseline is not None else None}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    text = markdown(result)
    (args.out / "plan_speed.md").write_text(text)
    (args.out / "plan_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

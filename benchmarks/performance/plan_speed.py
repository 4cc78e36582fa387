"""How long the main job's plan takes as a user runs it: ``serve --dry-run``, ``memory plan`` and ``buckets replay``
(the embedded traffic), each a fresh ``python -m vllm_hpu_mm.cli.main`` process, timed from start to exit.

Each command runs ``--runs`` times (at least 5) in a clean environment (no VLLM_* / HF_* settings, an empty Hugging
Face cache, offline: the main job, Qwen2.5-VL-7B-Instruct on a Gaudi2 served by vllm-gaudi, with the catalog's
dimensions), the commands taking turns. Reported per command: the median, min and max wall time, and the median CPU
time of the process (user + system: what the command itself costs, other jobs' turns on a shared machine aside).
The machine is named (CPU model, ``nproc``) with the load average before and after the runs: on a loaded machine the
wall times are longer, the CPU times much less so. One command::

    .venv/bin/python benchmarks/performance/plan_speed.py --runs 5

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


def git_commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                          check=False)  # fmt: skip
    return done.stdout.strip() or "unknown"


def run_once(args: str, hub: str) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run of ``vllm-hpu-mm ARGS``; exits on a failed run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "HF_"))}
    env.update({"HF_HUB_CACHE": hub, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "vllm_hpu_mm.cli.main", *shlex.split(args)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=TIMEOUT_S, check=False)  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"vllm-hpu-mm {args} failed with exit {done.returncode}:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def summary(walls: list[float], cpus: list[float]) -> dict[str, Any]:
    return {"runs": len(walls), "median_s": round(statistics.median(walls), 3), "min_s": round(min(walls), 3),
            "max_s": round(max(walls), 3), "median_cpu_s": round(statistics.median(cpus), 3),
            "wall_s": [round(x, 3) for x in walls], "cpu_s": [round(x, 3) for x in cpus]}  # fmt: skip


def markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        "# Plan speed: the main job as a user runs it",
        "",
        f"Machine: {m['cpu']}, nproc {m['nproc']}, Python {m['python']}; load average (1, 5, 15 min) "
        f"{m['load_before']} before and {m['load_after']} after the runs{'' if not m['note'] else '; ' + m['note']}. "
        f"Commit {result['commit']}. Written by `benchmarks/performance/plan_speed.py`.",
        "",
        f"Each command {result['runs']} times, a fresh process each (import, plan, print), in a clean environment "
        "(the main job: Qwen2.5-VL-7B-Instruct on a Gaudi2 under vllm-gaudi, the embedded traffic). Wall time from "
        "start to exit; CPU time is the process's user + system time.",
        "",
        "| command | median wall s | min s | max s | median CPU s | target (idle 2-core) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, s in result["commands"].items():
        target = "10" if name == "buckets replay" else "2"
        lines.append(f"| `{name}` | {s['median_s']:.2f} | {s['min_s']:.2f} | {s['max_s']:.2f} | "
                     f"{s['median_cpu_s']:.2f} | {target} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=MIN_RUNS, help=f"runs per command ({MIN_RUNS} to {MAX_RUNS})")
    parser.add_argument("--note", default="", help="a line on the machine's state (e.g. 'shared with other jobs')")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for plan_speed.md and .json")
    args = parser.parse_args()
    if not MIN_RUNS <= args.runs <= MAX_RUNS:
        parser.error(f"--runs {args.runs} is invalid; accepted: {MIN_RUNS} to {MAX_RUNS}")
    machine = {"cpu": cpu_model(), "nproc": os.cpu_count(), "python": platform.python_version(),
               "load_before": load_average(), "note": args.note}  # fmt: skip
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in COMMANDS}
    with tempfile.TemporaryDirectory() as hub:
        for _ in range(args.runs):
            for name, command in COMMANDS.items():  # the commands take turns: a load spike hits each alike
                wall, cpu = run_once(command, hub)
                times[name][0].append(wall)
                times[name][1].append(cpu)
    machine["load_after"] = load_average()
    result = {"commit": git_commit(), "runs": args.runs, "machine": machine,
              "commands": {name: summary(*t) for name, t in times.items()}}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    text = markdown(result)
    (args.out / "plan_speed.md").write_text(text)
    (args.out / "plan_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

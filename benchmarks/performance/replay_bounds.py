"""The replay's work bound (issue 34 item 9): CPU seconds of ``buckets replay`` at the documented maxima
(``--requests 100000 --request-rate 10000``: arrivals in time, so each configuration's own schedule is computed
again) and at smaller loads, each in a fresh process (the import of the CLI included), optionally in turns with a
baseline checkout (``--baseline DIR``: the same commands run from that tree; each row then says whether this tree's
``--json`` output is byte-identical to the baseline's of the same round).

CPU seconds (user + system of the child), not wall time: the machine is shared, and a loaded machine stretches the
wall time of the same work. The load average at each run is recorded beside it.

    python benchmarks/performance/replay_bounds.py [--rounds 1] [--baseline DIR] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
CASES = {
    "maxima: --requests 100000 --request-rate 10000": ["--requests", "100000", "--request-rate", "10000"],
    "--request-rate 4 (2000 requests)": ["--request-rate", "4"],
    "--concurrency 32 (2000 requests)": ["--concurrency", "32"],
    "--load-profile 3:8,3:64,2:0 (2000 requests)": ["--load-profile", "3:8,3:64,2:0"],
    "--request-rate 300 --requests 5000": ["--request-rate", "300", "--requests", "5000"],
    "default (every load level, 2000 requests)": [],
}
#: Seconds one command may run (a loaded 2-core machine at the maxima before the change: ~10 minutes).
CASE_TIMEOUT_S = 1800


def cpu_seconds(tree: Path, args: list[str]) -> tuple[float, int, bytes]:
    """(CPU seconds of the child, exit code, its output) of ``buckets replay ARGS --json`` run from ``tree``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "vllm_hpu_mm.cli.main", "buckets", "replay", *args, "--json"],
                          cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          timeout=CASE_TIMEOUT_S, check=False)  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used, done.returncode, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--baseline", type=Path, help="another checkout, timed in turns with this one")
    parser.add_argument("--only", default="", help="run the cases whose name holds this")
    parser.add_argument("--machine", default=f"{platform.machine()}, {os.cpu_count()} CPUs (shared)")
    parser.add_argument("--name", default="replay_bounds")
    parser.add_argument("--note", default="", help="what the trees are (commits), recorded with the results")
    opts = parser.parse_args()
    trees = {"this": REPO, **({"baseline": opts.baseline.resolve()} if opts.baseline else {})}
    rows = []
    for case, args in CASES.items():
        if opts.only not in case:
            continue
        for _ in range(opts.rounds):
            outputs = {}
            for label, tree in trees.items():  # in turns: a change in the machine's load hits both alike
                load = os.getloadavg()[0]
                seconds, code, outputs[label] = cpu_seconds(tree, args)
                rows.append({"case": case, "tree": label, "cpu_s": round(seconds, 2), "exit": code,
                             "load_1min": round(load, 2)})  # fmt: skip
                print(f"{case} [{label}]: {seconds:.1f} s CPU, exit {code}, load {load:.1f}", flush=True)
            if "baseline" in outputs:
                rows[-2]["same_output"] = outputs["this"] == outputs["baseline"]
    RESULTS.mkdir(exist_ok=True)
    record = {"machine": opts.machine, "baseline": str(opts.baseline or ""), "note": opts.note, "rows": rows}
    (RESULTS / f"{opts.name}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    lines = [f"# buckets replay: CPU seconds per command ({opts.machine})", "",
             "Each command in a fresh process, the CLI's import included; CPU = user + system of the child. "
             "Written by `benchmarks/performance/replay_bounds.py`.", "", *([opts.note, ""] if opts.note else []),
             "| case | tree | CPU s | exit | load (1 min) | --json byte-identical to the baseline's |",
             "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    same = {"True": "yes", "False": "NO", "None": ""}
    lines += [f"| {r['case']} | {r['tree']} | {r['cpu_s']} | {r['exit']} | {r['load_1min']} | "
              f"{same[str(r.get('same_output'))]} |" for r in rows]  # fmt: skip
    (RESULTS / f"{opts.name}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

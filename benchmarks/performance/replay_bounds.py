"""The replay's work bound (issue 34 item 9): CPU seconds of ``buckets replay`` at the documented maxima
(``--requests 100000`` with ``--request-rate 10000``: arrivals in time, so each configuration's own schedule is
computed again; with the longest ``--load-profile``, 64 segments over 86,400 s at up to 100,000 clients; with
``--concurrency 100000``) and at smaller loads, each in a fresh process (the import of the CLI included), optionally
in turns with a baseline checkout (``--baseline DIR``: the same commands run from that tree; each row then says
whether this tree's ``--json`` output is byte-identical to the baseline's of the same round).

CPU seconds (user + system of the command and its forked children) are the comparable figure: the machine is shared,
and a loaded machine stretches the wall time of the same work. The wall time, the peak memory of the command (its
largest process: the command or a child it forked) and the load average at each run are recorded beside it.

    python benchmarks/performance/replay_bounds.py [--rounds 1] [--baseline DIR] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
#: The longest profile the flag accepts: 64 segments of 1,350 s (86,400 s), every other one at the most clients.
LONGEST_PROFILE = ",".join("1350:100000" if i % 2 == 0 else "1350:64" for i in range(64))
CASES = {
    "maxima: --requests 100000 --request-rate 10000": ["--requests", "100000", "--request-rate", "10000"],
    "maxima: --requests 100000 --load-profile (64 segments, 86,400 s, 100,000 clients)": [
        "--requests",
        "100000",
        "--load-profile",
        LONGEST_PROFILE,
    ],
    "maxima: --requests 100000 --concurrency 100000": ["--requests", "100000", "--concurrency", "100000"],
    "--request-rate 4 (2000 requests)": ["--request-rate", "4"],
    "--concurrency 32 (2000 requests)": ["--concurrency", "32"],
    "--load-profile 3:8,3:64,2:0 (2000 requests)": ["--load-profile", "3:8,3:64,2:0"],
    "--request-rate 300 --requests 5000": ["--request-rate", "300", "--requests", "5000"],
    "default (every load level, 2000 requests)": [],
}
#: Seconds one command may run (a loaded 2-core machine at the maxima before the change: ~10 minutes).
CASE_TIMEOUT_S = 1800


def cpu_seconds(tree: Path, args: list[str]) -> tuple[float, float, float, int, bytes]:
    """(CPU seconds of the command and its children, wall seconds, peak memory of its largest process in MiB, exit
    code, its output) of ``buckets replay ARGS --json`` run from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen([sys.executable, "-m", "vllm_hpu_mm.cli.main", "buckets", "replay", *args, "--json"],
                                 cwd=tree, env=env, stdout=out, stderr=subprocess.DEVNULL)  # fmt: skip
        _, status, usage = os.wait4(child.pid, 0)  # this command's own usage, its forked children's included
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        out.seek(0)
        output = out.read()
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024, child.returncode, output


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
                seconds, wall, peak, code, outputs[label] = cpu_seconds(tree, args)
                rows.append({"case": case, "tree": label, "cpu_s": round(seconds, 2), "wall_s": round(wall, 2),
                             "peak_mib": round(peak), "exit": code, "load_1min": round(load, 2)})  # fmt: skip
                print(f"{case} [{label}]: {seconds:.1f} s CPU, {wall:.1f} s wall, {peak:.0f} MiB, exit {code}, "
                      f"load {load:.1f}", flush=True)  # fmt: skip
            if "baseline" in outputs:
                rows[-2]["same_output"] = outputs["this"] == outputs["baseline"]
    RESULTS.mkdir(exist_ok=True)
    record = {"machine": opts.machine, "baseline": str(opts.baseline or ""), "note": opts.note, "rows": rows}
    (RESULTS / f"{opts.name}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    lines = [f"# buckets replay: CPU seconds per command ({opts.machine})", "",
             "Each command in a fresh process, the CLI's import included; CPU = user + system of the command and the "
             "children it forked; peak = the largest resident set of its processes. "
             "Written by `benchmarks/performance/replay_bounds.py`.", "", *([opts.note, ""] if opts.note else []),
             "| case | tree | CPU s | wall s | peak MiB | exit | load (1 min) | --json byte-identical to the "
             "baseline's |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    same = {"True": "yes", "False": "NO", "None": ""}
    lines += [f"| {r['case']} | {r['tree']} | {r['cpu_s']} | {r['wall_s']} | {r['peak_mib']} | {r['exit']} | "
              f"{r['load_1min']} | {same[str(r.get('same_output'))]} |" for r in rows]  # fmt: skip
    (RESULTS / f"{opts.name}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

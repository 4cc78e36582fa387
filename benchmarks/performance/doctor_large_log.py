"""The OOM doctor on a large log: wall time and peak memory (max RSS) of ``vllm-hpu-mm oom-doctor``.

Builds two logs of about ``--mib`` MiB from real line formats and runs the CLI on each in a fresh process ``--rounds``
times, next to a process that only imports the doctor, so the table shows what the log itself costs:

- ``lines``: a served-request line repeated, with the OOM traceback of
  tests/data/logs/vllm_13152_runtime_serving.log at the end;
- ``one line``: the same text with its line breaks replaced by spaces (a log pasted or exported without newlines),
  read in bounded windows.

    python -m benchmarks.performance.doctor_large_log --mib 200 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
REQUEST_LINE = (
    "INFO 02-12 12:19:58 metrics.py:455] Avg prompt throughput: 1123.4 tokens/s, Avg generation throughput: 612.9 "
    "tokens/s, Running: 31 reqs, Swapped: 0 reqs, Pending: 2 reqs, GPU KV cache usage: 87.1%, CPU KV cache usage: 0.0%."
)
PROBE = (
    "import resource, sys, time; t = time.perf_counter(); from vllm_hpu_mm.cli.main import main; "
    "code = main(sys.argv[1:]) if len(sys.argv) > 1 else 0; "
    "print('RESULT', time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, code, "
    "file=sys.stderr)"
)


def build_log(path: Path, mib: int, sep: str = "\n") -> None:
    tail = (REPO / "tests/data/logs/vllm_13152_runtime_serving.log").read_text().splitlines()
    tail = [line for line in tail if not line.startswith("# ")]
    line = (REQUEST_LINE + sep).encode()
    with path.open("wb") as f:
        f.write(line * (mib * 2**20 // len(line)))
        f.write((sep.join(tail) + "\n").encode())


def probe(*argv: str) -> tuple[float, float, int]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=REPO, check=False)
    fields = next(line for line in proc.stderr.splitlines() if line.startswith("RESULT")).split()
    return float(fields[1]), int(fields[2]) / 1024, int(fields[3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=200, help="size of the generated log in MiB (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--machine", default="this 2-core CPU dev machine (shared, loaded)", help="machine label")
    parser.add_argument("--out", default=str(RESULTS / "doctor_large_log.json"), help="result file")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape, sep in (("lines", "\n"), ("one line", " ")):
            log = Path(tmp) / "big.log"
            build_log(log, args.mib, sep)
            size = log.stat().st_size / 2**20
            for r in range(args.rounds):
                _, base_rss, _ = probe()
                seconds, rss, code = probe("oom-doctor", str(log), "--json")
                rows.append({"shape": shape, "round": r, "seconds": round(seconds, 2), "max_rss_mib": round(rss, 1),
                             "import_only_rss_mib": round(base_rss, 1), "exit_code": code})  # fmt: skip
    print(f"oom-doctor on {size:.0f} MiB logs, {args.machine}")
    print(f"{'shape':>8}  {'round':>5}  {'seconds':>8}  {'max RSS MiB':>11}  {'imports only':>12}  {'exit':>4}")
    for row in rows:
        print(f"{row['shape']:>8}  {row['round']:>5}  {row['seconds']:>8}  {row['max_rss_mib']:>11}  "
              f"{row['import_only_rss_mib']:>12}  {row['exit_code']:>4}")  # fmt: skip
    Path(args.out).write_text(json.dumps({"machine": args.machine, "log_mib": round(size, 1), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()

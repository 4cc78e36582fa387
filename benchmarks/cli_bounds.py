"""The bounds on the CLI's work: wall time, peak memory (max RSS) and exit code of commands whose input could make
the work grow, each in a fresh process (the import of the CLI included), next to a baseline.

- ``serve --dry-run`` with many pass-through server arguments (argparse's time grows with the square of the number
  of flags; more than 4096 arguments are refused before parsing);
- the joint bucket planner (``plan/bucket_fit.py``) where lists of many buckets no longer fit the vision pool: a
  configured list of every multiple of 64 up to 25600, ``--max-buckets 100`` over MathVista's ~200 distinct sizes, and
  ``--max-buckets 300`` over 3000 random sizes with vision pools from 1.5 to 9 GiB (the search bounds its work and
  says so).

    python -m benchmarks.cli_bounds [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBE = (
    "import resource, sys, time; t = time.perf_counter(); from vllm_hpu_mm.cli.main import main; "
    "code = main(sys.argv[1:]); "
    "print('RESULT', time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, code, "
    "file=sys.stderr)"
)
EVERY_64 = ",".join(str(64 * i) for i in range(1, 401))
MATHVISTA = REPO / "vllm_hpu_mm/data/mathvista_testmini.csv"


def cases(sizes_csv: str) -> list[tuple[str, list[str], dict[str, str]]]:
    port = ["--port", "8000"]
    serve = ["serve", "--dry-run", "--plan-device", "h100"]
    graphs = ["--graph-prompt-ratio", "1", "--graph-multimodal-prompt-ratio", "0"]
    return [
        ("serve --dry-run: the main job (vllm-gaudi on Gaudi2, text buckets planned over the default traffic)",
         ["serve", "--dry-run"], {}),
        ("serve --dry-run (baseline: H100, no text buckets to plan)", serve, {}),
        ("serve --dry-run + 1,000 server arguments", serve + port * 500, {}),
        ("serve --dry-run + 4,090 server arguments (near the most read)", serve + port * 2045, {}),
        ("serve --dry-run + 40,000 server arguments (refused)", serve + port * 20000, {}),
        ("memory plan (baseline)", ["memory", "plan"], {}),
        ("memory plan, VLLM_MULTIMODAL_BUCKETS = every multiple of 64 to 25600", ["memory", "plan"],
         {"VLLM_MULTIMODAL_BUCKETS": EVERY_64}),
        ("memory plan --max-buckets 100 --sizes mathvista", ["memory", "plan", "--max-buckets", "100", "--sizes",
                                                             str(MATHVISTA)], {}),
        *[(f"memory plan --max-buckets 300 --sizes 3000 random, graph share {share}",
           ["memory", "plan", "--max-buckets", "300", "--sizes", sizes_csv, "--graph-reserved-mem", share, *graphs], {})
          for share in ("0.1", "0.3", "0.6")],
    ]  # fmt: skip


def run(argv: list[str], env: dict[str, str]) -> tuple[float, int, int]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    full.update({"PYTHONPATH": str(REPO), **env})
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=full, check=False)
    line = next(x for x in done.stderr.splitlines() if x.startswith("RESULT"))
    _, secs, rss, code = line.split()
    return float(secs), int(rss), int(code)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs per case; the table shows the fastest (default 3)")
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/cli_bounds"), help="results path stem")
    args = parser.parse_args()
    rng = random.Random(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sizes = Path(tmp) / "random_3000.csv"
        sizes.write_text("width,height\n" + "".join(f"{rng.randint(100, 2000)},{rng.randint(100, 2000)}\n"
                                                    for _ in range(3000)))  # fmt: skip
        for name, argv, env in cases(str(sizes)):
            runs = [run(argv, env) for _ in range(args.rounds)]
            secs, rss, code = min(runs)
            rows.append({"case": name, "seconds": round(secs, 2), "max_rss_mib": round(rss / 1024), "exit": code})
            print(f"{name}: {secs:.2f} s, {rss / 1024:.0f} MiB, exit {code}", flush=True)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    Path(args.out + ".json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=1) + "\n")
    lines = [f"# CLI work bounds ({machine}; `python -m benchmarks.cli_bounds`, fastest of {args.rounds})", "",
             "Each command in a fresh process, the import of the CLI included.", "",
             "| case | seconds | max RSS MiB | exit |", "|---|---:|---:|---:|"]  # fmt: skip
    lines += [f"| {r['case']} | {r['seconds']} | {r['max_rss_mib']} | {r['exit']} |" for r in rows]
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

"""The bounds on the CLI's work: wall time, peak memory (max RSS) and exit code of commands whose input could make
the work grow, each in a fresh process (the import of the CLI included), next to a baseline.

- ``serve --dry-run`` with many pass-through server arguments (argparse's time grows with the square of the number
  of flags; more than 4096 arguments are refused before parsing);
- the joint bucket planner (``plan/bucket_fit.py``) where lists of many buckets no longer fit the vision pool: a
  configured list of every multiple of 64 up to 25600, ``--max-buckets 100`` over MathVista's ~200 distinct sizes, and
  ``--max-buckets 300`` over 3000 random sizes with vision pools from 1.5 to 9 GiB (the search bounds its work and
  says so);
- the largest input of each class of issue 24 (every file under 10 MB): vllm-gaudi's lin strategy (~18,000 graphs)
  and a huge range variable, bucket files (two full ranges on a line, 100,000 buckets, a 200,000-character line,
  100,000 lines), a traffic CSV, a /metrics page with wide histograms, and ``--from-metrics`` against a loopback server
  that trickles a byte every 2 s or sends an endless body.

    python -m benchmarks.performance.cli_bounds [--rounds 3] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
PROBE = (
    "import resource, sys, time; t = time.perf_counter(); from vllm_hpu_mm.cli.main import main; "
    "code = main(sys.argv[1:]); "
    "print('RESULT', time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, code, "
    "file=sys.stderr)"
)
EVERY_64 = ",".join(str(64 * i) for i in range(1, 401))
MATHVISTA = REPO / "vllm_hpu_mm/data/mathvista_testmini.csv"


#: Seconds a case may run before it is recorded as cut (the target is 30 s).
CASE_TIMEOUT_S = 300


def _trickle(h: http.server.BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.end_headers()
    try:
        for _ in range(60):  # a byte every 2 s for two minutes
            h.wfile.write(b"#")
            h.wfile.flush()
            time.sleep(2)
    except OSError:
        pass  # the client hung up at its deadline


def _endless(h: http.server.BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.end_headers()
    block = b"# " + b"x" * 65_000 + b"\n"
    try:
        for _ in range(100_000):  # 6.5 GB unless the client hangs up
            h.wfile.write(block)
    except OSError:
        pass


def loopback(handler: object) -> str:
    """A threaded HTTP server on loopback answering GET with ``handler``; its /metrics URL."""

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            handler(self)  # type: ignore[operator]

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}/metrics"


def inputs(tmp: Path) -> dict[str, str]:
    """The largest input of each class, written under ``tmp`` (each under 10 MB)."""
    rng = random.Random(2)
    files = {
        "two_ranges": "(1, range(2, 10000), range(0, 10000))\n",
        # 99,000 prompt + 1,000 decode buckets: the cap
        "cap_file": "".join(f"(1, {q}, range(0, 1000))\n" for q in range(128, 128 * 100, 128))
        + "(range(1, 11), 1, range(8, 801, 8))\n",
        "long_line": "(1, 128, [" + ",".join(["0"] * 100_000) + "])x\n",
        "many_lines": "".join(
            f"({rng.choice((1, 2, 4))}, {rng.randrange(2, 8192)}, {rng.randrange(0, 256)})\n" for _ in range(99_999)
        )
        + "(1, 1, 8)\n",
        "traffic": "width,height,text_tokens,output_tokens,cached_tokens\n"
        + "".join(
            f"{rng.randint(100, 4000)},{rng.randint(100, 4000)},{(t := rng.randint(1, 30000))},{rng.randint(1, 4000)},"
            f"{rng.randint(0, t)}\n"
            for _ in range(250_000)
        ),
    }
    wide = []
    for name in ("vllm:request_prompt_tokens", "vllm:request_generation_tokens"):
        wide.append(f"# TYPE {name} histogram")
        wide += [f'{name}_bucket{{le="{10 * (i + 1)}.0"}} {i + 1}.0' for i in range(60_000)]
        wide.append(f'{name}_bucket{{le="+Inf"}} 60000.0')
    files["wide_metrics"] = "\n".join(wide) + "\n"
    out = {}
    for name, text in files.items():
        path = tmp / (name + (".csv" if name == "traffic" else ".prom" if "metrics" in name else ".txt"))
        path.write_text(text)
        assert path.stat().st_size < 10_000_000, (name, path.stat().st_size)
        out[name] = str(path)
    return out


def issue_24_cases(tmp: Path) -> list[tuple[str, list[str], dict[str, str]]]:
    f = inputs(tmp)
    lin = {"VLLM_BUCKETING_STRATEGY": "lin"}
    replay = ["buckets", "replay", "--no-plan"]
    return [
        ("memory plan, VLLM_BUCKETING_STRATEGY=lin (~18,000 text graphs)", ["memory", "plan"], lin),
        ("serve --dry-run (the main job), VLLM_BUCKETING_STRATEGY=lin", ["serve", "--dry-run", "--plan-runtime",
                                                                       "vllm-gaudi", "--plan-device", "gaudi2"], lin),
        ("memory plan, lin, VLLM_DECODE_BLOCK_BUCKET_MAX=10**12 (refused)", ["memory", "plan"],
         {**lin, "VLLM_DECODE_BLOCK_BUCKET_MAX": str(10**12)}),
        ("memory plan, lin, VLLM_DECODE_BLOCK_BUCKET_MAX=10**8 (pruned to the same buckets)", ["memory", "plan"],
         {**lin, "VLLM_DECODE_BLOCK_BUCKET_MAX": str(10**8)}),
        ("buckets replay --bucket-file: one line of two full ranges, 10^8 buckets (refused)",
         [*replay, "--bucket-file", f["two_ranges"]], {}),
        ("buckets replay --bucket-file: 100,000 buckets (half the 200,000 cap)",
         [*replay, "--bucket-file", f["cap_file"]], {}),
        ("buckets replay --bucket-file: 100,000 lines (1.6 MB)", [*replay, "--bucket-file", f["many_lines"]], {}),
        ("buckets replay --bucket-file: a 200,000-character line (refused)",
         [*replay, "--bucket-file", f["long_line"]], {}),
        ("buckets replay --sizes: a 250,000-row traffic CSV (~8 MB)", [*replay, "--sizes", f["traffic"]], {}),
        ("buckets replay --from-metrics: two 60,000-bucket histograms (~5 MB page)",
         [*replay, "--from-metrics", f["wide_metrics"]], {}),
        ("buckets check --from-metrics: a server trickling a byte every 2 s (cut at the 20 s deadline)",
         ["buckets", "check", "--from-metrics", loopback(_trickle)], {}),
        ("buckets check --from-metrics: an endless body (cut at the 8 MiB cap)",
         ["buckets", "check", "--from-metrics", loopback(_endless)], {}),
        ("buckets check --sizes mathvista, VLLM_HPU_MM_OVERSIZE_POLICY=reject", ["buckets", "check", "--sizes",
                                                                                   str(MATHVISTA)],
         {"VLLM_HPU_MM_OVERSIZE_POLICY": "reject"}),
    ]  # fmt: skip


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


def run(argv: list[str], env: dict[str, str]) -> tuple[float, int, int | str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    full.update({"PYTHONPATH": str(REPO), **env})
    try:
        done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=full,
                              check=False, timeout=CASE_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        return float(CASE_TIMEOUT_S), 0, f"cut at {CASE_TIMEOUT_S} s"
    line = next((x for x in done.stderr.splitlines() if x.startswith("RESULT")), None)
    if line is None:  # a traceback: the exit code is the process's
        return 0.0, 0, f"{done.returncode} (traceback)"
    _, secs, rss, code = line.split()
    return float(secs), int(rss), int(code)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs per case; the table shows the fastest (default 3)")
    parser.add_argument("--out", default=str(RESULTS / "cli_bounds"), help="results path stem")
    parser.add_argument("--only", help="run only the cases whose name contains this (results are not written)")
    args = parser.parse_args()
    rng = random.Random(1)
    rows = []
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        sizes = Path(tmp) / "random_3000.csv"
        sizes.write_text("width,height\n" + "".join(f"{rng.randint(100, 2000)},{rng.randint(100, 2000)}\n"
                                                    for _ in range(3000)))  # fmt: skip
        for name, argv, env in cases(str(sizes)) + issue_24_cases(Path(tmp)):
            if args.only and args.only not in name:
                continue
            slow = "trickling" in name or "lin" in name  # one round: each takes tens of seconds
            runs = [run(argv, env) for _ in range(1 if slow else args.rounds)]
            secs, rss, code = min(runs, key=lambda r: r[0])
            rows.append({"case": name, "seconds": round(secs, 2), "max_rss_mib": round(rss / 1024), "exit": code})
            print(f"{name}: {secs:.2f} s, {rss / 1024:.0f} MiB, exit {code}", flush=True)
    if args.only:
        return
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    # the machine is shared: its load says how far the times are from an idle one's
    machine += f", load average {load_start:.1f} at the start and {os.getloadavg()[0]:.1f} at the end"
    Path(args.out + ".json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=1) + "\n")
    lines = [f"# CLI work bounds ({machine}; `python -m benchmarks.performance.cli_bounds`, "
             f"fastest of {args.rounds})", "",
             "Each command in a fresh process, the import of the CLI included; cases that take tens of seconds "
             "ran once. Exit 2 is a one-line refusal.", "",
             "| case | seconds | max RSS MiB | exit |", "|---|---:|---:|---:|"]  # fmt: skip
    lines += [f"| {r['case']} | {r['seconds']} | {r['max_rss_mib']} | {r['exit']} |" for r in rows]
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

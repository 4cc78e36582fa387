"""Is ``torch.compile`` per bucket worth it for the vision tower on CPU? Eager vs compiled, per bucket.

Runs transformers' Qwen2.5-VL vision tower (random weights, fp32, SDPA) through ``EagerExecutor`` with
``compile=False`` and ``compile=True`` on one dummy image per bucket and prints a Markdown table: warm-up (first call,
includes compilation), then eager and compiled calls alternately (so machine load hits both alike) and their minimum
and median. The load average at start is printed: on a shared 2-core machine, trust the minima. Usage:

    .venv/bin/python benchmarks/performance/cpu_tower_compile.py --machine "CPU: 2-core x86-64 dev machine, 24 GiB" \
        > benchmarks/performance/results/cpu_tower_compile.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Any

import torch
from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel

from vllm_hpu_mm.graphs.cpu import EagerExecutor
from vllm_hpu_mm.graphs.runner import dummy_grid, transformers_encoder

TOWERS: dict[str, dict[str, Any]] = {
    # The e2e checkpoint's tower.
    "tiny (depth 2, hidden 64)": {"depth": 2, "hidden_size": 64, "num_heads": 2, "intermediate_size": 128},
    "small (depth 4, hidden 256)": {"depth": 4, "hidden_size": 256, "num_heads": 4, "intermediate_size": 512},
}


def build(dims: dict[str, Any]) -> torch.nn.Module:
    config: Any = Qwen2_5_VLVisionConfig(
        **dims, out_hidden_size=128, patch_size=14, spatial_merge_size=2, window_size=112, fullatt_block_indexes=[1]
    )
    config._attn_implementation = "sdpa"
    model: Any = Qwen2_5_VisionTransformerPretrainedModel(config)
    tower: torch.nn.Module = model.float().eval()
    return tower


def once(ex: EagerExecutor, bucket: int, pixels: torch.Tensor, grid: torch.Tensor) -> float:
    t0 = time.perf_counter()
    ex(bucket, pixels, grid)
    return time.perf_counter() - t0


def compare(eager: EagerExecutor, compiled: EagerExecutor, bucket: int, reps: int) -> list[str]:
    """Table cells: first call of each, then min / median of alternating calls, then the speed-up of the minima."""
    grid = torch.tensor([dummy_grid(bucket)])
    pixels = torch.randn(bucket, 1176)
    firsts = [once(ex, bucket, pixels, grid) for ex in (eager, compiled)]
    runs: tuple[list[float], list[float]] = ([], [])
    for _ in range(reps):
        for ex, times in zip((eager, compiled), runs, strict=True):
            times.append(once(ex, bucket, pixels, grid))
    cells = []
    for first, times in zip(firsts, runs, strict=True):
        cells += [f"{first:.2f}", f"{min(times) * 1e3:.1f} / {statistics.median(times) * 1e3:.1f}"]
    return [*cells, f"{min(runs[0]) / min(runs[1]):.2f}x"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machine", required=True, help="what this ran on, printed with the table")
    parser.add_argument("--buckets", default="256,1024,1600")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    buckets = [int(b) for b in args.buckets.split(",")]
    torch.manual_seed(0)
    print(f"# torch.compile per bucket vs eager, vision tower on CPU\n\nMachine: {args.machine}  ")
    print(f"torch {torch.__version__}, {platform.python_implementation()} {platform.python_version()}, ")
    print(f"threads {torch.get_num_threads()}, fp32, SDPA, random weights, {args.reps} alternating calls each; ")
    print(f"load average at start {os.getloadavg()[0]:.1f} (other jobs share the machine).\n")
    print(
        "| tower | bucket (patches) | eager first call (s) | eager min / median (ms) | compiled first call (s) "
        "| compiled min / median (ms) | speed-up (min) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, dims in TOWERS.items():
        model = build(dims)
        eager = EagerExecutor(transformers_encoder(model))
        compiled = EagerExecutor(transformers_encoder(model), compile=True)
        for bucket in buckets:
            try:
                cells = compare(eager, compiled, bucket, args.reps)
            except Exception as exc:  # report, do not hide: a failing compile is a result too
                cells = ["", "", f"failed: {type(exc).__name__}", "", ""]
            print(f"| {label} | {bucket} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()

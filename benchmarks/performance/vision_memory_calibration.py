"""Calibrate the vision-graph memory model (``vllm_hpu_mm.plan.vision_cost``) on an NVIDIA GPU.

Per bucket (the default list 1600..12544 and a few more), on transformers' Qwen2.5-VL vision tower with the 7B
vision dims (random weights, bf16), through our research CUDA-graph executor (``benchmarks/research/cuda_graphs.py``):

- eager peak above weights and inputs: ``max_memory_allocated`` during one uncaptured forward (the executor's
  varlen forward, the basis of the model's coefficients) and during transformers' own eager forward;
- one graph's private pool: the bytes of the allocator segments that belong to that graph's pool
  (``torch.cuda.memory_snapshot()``, ``segment_pool_id``), with the ``memory_reserved`` delta as a cross-check;
- all default buckets in one shared pool captured largest first (and, for comparison, smallest first), and the
  sum of private pools; ``mem_get_info`` deltas name what the driver saw (cuBLAS workspaces included);

each against the model's prediction, with the error per bucket. HPU (Gaudi) graph costs are *estimated* from this
model, not measured: no Gaudi was available.

    python benchmarks/performance/vision_memory_calibration.py --out "$OUT"
    python benchmarks/performance/vision_memory_calibration.py \
        --report benchmarks/performance/results/vision_memory_calibration.json
"""

from __future__ import annotations

import argparse
import contextlib
import gc as pygc
import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from benchmarks.research import cuda_graphs as gcuda  # noqa: E402
from benchmarks.research.mlp_pad import pad_vision_mlps  # noqa: E402
from vllm_hpu_mm.values import DEFAULT_BUCKETS  # noqa: E402

MIB = 2**20
EXTRA_BUCKETS = (1024, 2304, 6912, 16384)
PATCH_DIM = 3 * 2 * 14 * 14


def _cost_module() -> Any:
    try:
        return importlib.import_module("vllm_hpu_mm.plan.vision_cost")
    except ImportError:
        return None


def predictions(bucket: int) -> dict[str, float | None]:
    vc = _cost_module()
    if vc is None:  # the facts file's linear model, used until vision_cost lands
        return {"eager_mib": 0.0424 * bucket + 3, "graph_pool_mib": 0.0624 * bucket + 5, "source": None}
    return {
        "eager_mib": vc.eager_peak_bytes(bucket) / MIB,
        "graph_pool_mib": vc.graph_pool_bytes(bucket) / MIB,
    }


def pool_segments_bytes() -> dict[Any, int]:
    """Reserved bytes per allocator pool id ((0, 0) is the ordinary pool)."""
    out: dict[Any, int] = {}
    snapshot: list[dict[str, Any]] = torch.cuda.memory_snapshot()  # type: ignore[no-untyped-call]
    for seg in snapshot:
        key = tuple(seg.get("segment_pool_id", (0, 0)))
        out[key] = out.get(key, 0) + int(seg["total_size"])
    return out


def graph_pool_bytes(before: dict[Any, int]) -> int:
    after = pool_segments_bytes()
    return sum(v for k, v in after.items() if k != (0, 0) and k not in before) + sum(
        after.get(k, 0) - v for k, v in before.items() if k != (0, 0)
    )


def example(bucket: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(bucket, PATCH_DIM, generator=gen).to("cuda", torch.bfloat16), torch.tensor([[1, 8, bucket // 8]])


def measure(buckets: list[int], tower: Any, compiled: bool) -> list[dict[str, Any]]:
    gen = torch.Generator().manual_seed(1)
    rows = []
    geo = gcuda.TowerGeometry.from_tower(tower)
    for b in buckets:
        row: dict[str, Any] = {"bucket": b}
        pixels, grid = example(b, gen)
        idx = gcuda.DeviceIndices.from_layout(gcuda.pass_layout(grid, geo), torch.device("cuda"))
        with torch.inference_mode():
            gcuda.tower_forward(tower, pixels, idx)  # warm (cuBLAS handles, kernels)
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            out = gcuda.tower_forward(tower, pixels, idx)
            torch.cuda.synchronize()
            row["eager_varlen_peak_mib"] = (torch.cuda.max_memory_allocated() - base) / MIB
            del out
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            ref: Any = tower(pixels, grid_thw=grid.cuda())
            torch.cuda.synchronize()
            row["eager_transformers_peak_mib"] = (torch.cuda.max_memory_allocated() - base) / MIB
            del ref
        torch.cuda.empty_cache()
        # One graph in its own (private) pool.
        ex = gcuda.CudaGraphExecutor(tower, shared_pool=False, compile_blocks=compiled)
        before_pools, before_res = pool_segments_bytes(), torch.cuda.memory_reserved()
        free_before = torch.cuda.mem_get_info()[0]
        ex.warmup(b, pixels, grid)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        row["graph_pool_mib"] = graph_pool_bytes(before_pools) / MIB
        row["reserved_delta_mib"] = (torch.cuda.memory_reserved() - before_res) / MIB
        row["device_free_delta_mib"] = (free_before - torch.cuda.mem_get_info()[0]) / MIB
        cap = ex.graphs[b]
        row["static_io_mib"] = (
            sum(
                t.numel() * t.element_size()
                for t in (cap.pixels, cap.out, cap.idx.position_ids, cap.idx.window_index, cap.idx.reverse_index)
            )
            / MIB
        )
        pred = predictions(b)
        row["pred_eager_mib"], row["pred_graph_pool_mib"] = pred["eager_mib"], pred["graph_pool_mib"]
        row["eager_error_pct"] = 100 * (pred["eager_mib"] - row["eager_varlen_peak_mib"]) / row["eager_varlen_peak_mib"]
        row["graph_error_pct"] = 100 * (pred["graph_pool_mib"] - row["graph_pool_mib"]) / row["graph_pool_mib"]
        row["graph_over_eager"] = row["graph_pool_mib"] / row["eager_varlen_peak_mib"]
        rows.append(row)
        print(json.dumps(row), flush=True)
        del ex, cap
        pygc.collect()
        torch.cuda.empty_cache()
    return rows


def shared_pool(buckets: list[int], tower: Any, descending: bool, compiled: bool) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(2)
    pygc.collect()
    torch.cuda.empty_cache()
    before_pools, free_before = pool_segments_bytes(), torch.cuda.mem_get_info()[0]
    ex = gcuda.CudaGraphExecutor(tower, compile_blocks=compiled)
    t0 = time.perf_counter()
    for b in sorted(buckets, reverse=descending):
        ex.warmup(b, *example(b, gen))
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    torch.cuda.empty_cache()
    out = {
        "order": "largest first" if descending else "smallest first",
        "buckets": sorted(buckets),
        "pool_mib": graph_pool_bytes(before_pools) / MIB,
        "device_free_delta_mib": (free_before - torch.cuda.mem_get_info()[0]) / MIB,
        "capture_s": seconds,
    }
    del ex
    pygc.collect()
    torch.cuda.empty_cache()
    return out


def report(res: dict[str, Any]) -> str:
    """Markdown: the predictions made at run time, and those of the model as it is now (after calibration)."""
    env = res["environment"]
    vc = "vllm_hpu_mm.plan.vision_cost" if res.get("model") == "vision_cost" else "the facts file's linear model"
    now = _cost_module()
    lines = [
        f"# Vision-graph memory calibration on {env.get('card')}"
        + (" (variant: MLP-padded tower, torch.compile'd blocks)" if res.get("variant") == "best" else ""),
        "",
        f"Card: {env.get('card')}; torch {env.get('torch')}, transformers {env.get('transformers')}. Tower: "
        "Qwen2.5-VL-7B vision dims, random weights, bf16, one image (grid 1 x 8 x b/8) per bucket, our CUDA-graph "
        f"executor (host-built indices, flash varlen attention). `run-time model`: {vc} when the run was made; "
        "`model now`: the coefficients in vllm_hpu_mm/plan/vision_cost.py at report time. The eager model is "
        "compared with transformers' eager forward (what vLLM's profiling run resembles); our uncaptured varlen "
        "forward peaks higher and is shown for reference. HPU (Gaudi) graph costs are estimated from this model, "
        "not measured.",
        "",
        "| bucket | transformers eager peak, MiB | model now | error | our varlen eager peak | graph pool, MiB "
        "| run-time model | error | model now | error | pool / transformers eager | reserved delta | static I/O |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["per_bucket"]:
        b, pool, eager = r["bucket"], r["graph_pool_mib"], r["eager_transformers_peak_mib"]
        e_now = now.eager_peak_bytes(b) / MIB if now else float("nan")
        g_now = now.graph_pool_bytes(b) / MIB if now else float("nan")
        lines.append(
            f"| {b} | {eager:.1f} | {e_now:.1f} | {100 * (e_now - eager) / eager:+.1f}% | "
            f"{r['eager_varlen_peak_mib']:.1f} | {pool:.1f} | {r['pred_graph_pool_mib']:.1f} | "
            f"{r['graph_error_pct']:+.1f}% | {g_now:.1f} | {100 * (g_now - pool) / pool:+.1f}% | {pool / eager:.2f} | "
            f"{r['reserved_delta_mib']:.1f} | {r['static_io_mib']:.1f} |"
        )
    lines += [
        "",
        "## All default buckets",
        "",
        "| pools | measured MiB | run-time model | error | model now | error | capture s |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in res.get("sets", []):
        mode = None
        if now:
            mode = now.PoolMode.PRIVATE if "private" in s["label"] else now.PoolMode.SHARED
        p_now = now.capture_bytes(s.get("buckets", list(DEFAULT_BUCKETS)), mode) / MIB if now else float("nan")
        p_then = s.get("pred_mib") or float("nan")
        m = s["pool_mib"]
        lines.append(
            f"| {s['label']} | {m:.0f} | {p_then:.0f} | {100 * (p_then - m) / m:+.1f}% | {p_now:.0f} | "
            f"{100 * (p_now - m) / m:+.1f}% | {s.get('capture_s', float('nan')):.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", RESULTS)))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--report", type=Path)
    ap.add_argument(
        "--variant",
        choices=("base", "best"),
        default="base",
        help="base: the tower as shipped (what vision_cost models); best: MLP padded + torch.compile'd blocks",
    )
    args = ap.parse_args()
    if args.report:
        md = report(json.loads(args.report.read_text()))
        args.report.with_suffix(".md").write_text(md + "\n")
        print(md)
        return 0
    if not torch.cuda.is_available():
        print("this calibration needs a CUDA GPU", file=sys.stderr)
        return 2
    encoder_bench: Any = importlib.import_module("vision_encoder_h100")  # the sibling script: same tower, same env
    build_tower, environment = encoder_bench.build_tower, encoder_bench.environment

    args.out.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"environment": environment(), "model": "vision_cost" if _cost_module() else "facts"}
    tower = build_tower("cuda", torch.bfloat16)
    compiled = args.variant == "best"
    if compiled:
        pad_vision_mlps(tower)
    res["variant"] = args.variant
    buckets = sorted({*DEFAULT_BUCKETS, *EXTRA_BUCKETS})
    if args.quick:
        buckets = [1024, 1600, 4096]
    res["per_bucket"] = measure(buckets, tower, compiled)
    path = args.out / ("vision_memory_calibration.json" if not compiled else "vision_memory_calibration_best.json")
    path.write_text(json.dumps(res, indent=1))
    default = [b for b in DEFAULT_BUCKETS if b in buckets]
    vc = _cost_module()
    sets = []
    private_sum = sum(r["graph_pool_mib"] for r in res["per_bucket"] if r["bucket"] in default)
    sets.append(
        {
            "label": f"{len(default)} private pools (sum of the per-bucket pools)",
            "pool_mib": private_sum,
            "pred_mib": vc.capture_bytes(default, vc.PoolMode.PRIVATE) / MIB if vc else None,
        }
    )
    for descending in (True, False):
        with contextlib.suppress(torch.cuda.OutOfMemoryError):
            s = shared_pool(default, tower, descending, compiled)
            s["label"] = f"one shared pool, {s['order']}"
            s["pred_mib"] = vc.capture_bytes(default, vc.PoolMode.SHARED) / MIB if vc else None
            sets.append(s)
            print(json.dumps(s), flush=True)
    res["sets"] = sets
    path.write_text(json.dumps(res, indent=1))
    md = report(res)
    path.with_suffix(".md").write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

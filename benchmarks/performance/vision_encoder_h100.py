"""Qwen2.5-VL vision encoder on an NVIDIA GPU: our bucketed runner (pad + pack + CUDA-graph replay) against
transformers' eager forward and an exact-shape graph, plus the MLP zero-padding and a compiled-block variant.

Run (on the GPU machine; writes JSON there and prints a table):

    python benchmarks/performance/vision_encoder_h100.py --out "$OUT"          # full run, ~5 min on an H100
    python benchmarks/performance/vision_encoder_h100.py --quick --out /tmp/x  # small sizes, few repeats (smoke test)
    python benchmarks/performance/vision_encoder_h100.py \
        --report benchmarks/performance/results/vision_encoder_h100.json  # JSON -> .md

Tower: transformers' ``Qwen2_5_VisionTransformerPretrainedModel`` with the 7B vision dims (depth 32, hidden 1280,
16 heads, intermediate 3420, out 3584, full attention at blocks 7/15/23/31, window 112), random weights, bf16.
Mixed batch: image sizes drawn from COCO val2017 (``vllm_hpu_mm/data/coco_val2017.csv``, a copy of
``/work/shared/data/image_sizes/coco_val2017.csv``; COCO annotations CC BY 4.0), 112-aligned by our preprocessor
rule, buckets planned from the whole CSV by ``vllm_hpu_mm.buckets.planner.optimal_buckets``.

FLOP counts are the useful work of the real (unpadded) patches with the unpadded MLP; % of peak is against a bf16
8192^3 matmul measured in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import importlib.util
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT))

from benchmarks.research import cuda_graphs as gc  # noqa: E402
from benchmarks.research.mlp_pad import pad_vision_mlps  # noqa: E402
from vllm_hpu_mm.buckets.packing import pack  # noqa: E402
from vllm_hpu_mm.buckets.planner import evaluate, optimal_buckets  # noqa: E402
from vllm_hpu_mm.buckets.policy import OversizePolicy  # noqa: E402
from vllm_hpu_mm.buckets.sizes import read_sizes_csv  # noqa: E402
from vllm_hpu_mm.graphs.runner import BucketedVisionRunner  # noqa: E402
from vllm_hpu_mm.preprocess.align import aligned_size, patch_count  # noqa: E402
from vllm_hpu_mm.values import DEFAULT_BUCKETS  # noqa: E402

SIZES = [(224, 224), (448, 448), (672, 672), (896, 896), (1344, 1008)]  # (width, height)
#: Facts file anchors (H100 80GB HBM3, torch 2.11, transformers 5.17), ms per single image.
ANCHOR_EAGER = {"224x224": 26.3, "448x448": 36.0, "672x672": 56.2, "896x896": 90.9, "1344x1008": 144.7}
ANCHOR_GRAPH = {"224x224": 6.2, "448x448": 11.0, "672x672": 21.1, "896x896": 37.8, "1344x1008": 64.9}
PATCH_DIM = 3 * 2 * 14 * 14
COCO_CSV = ROOT / "vllm_hpu_mm" / "data" / "coco_val2017.csv"
DIMS: dict[str, Any] = {"depth": 32, "hidden": 1280, "heads": 16, "inter": 3420, "out": 3584, "full": (7, 15, 23, 31)}
#: "cuda", or "cpu" under --cpu-dry-run (a tiny tower and an eager stand-in executor, to test this script's logic).
DEVICE = "cuda"
TINY = {"depth": 4, "hidden": 64}


def build_tower(device: str, dtype: torch.dtype, depth: int = DIMS["depth"], hidden: int = DIMS["hidden"]) -> Any:
    if device == "cpu":
        depth, hidden = TINY["depth"], TINY["hidden"]
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel

    full = [i for i in DIMS["full"] if i < depth] or [depth - 1]
    cfg = Qwen2_5_VLVisionConfig(
        depth=depth,
        hidden_size=hidden,
        num_heads=DIMS["heads"] if hidden >= 1280 else 4,
        intermediate_size=DIMS["inter"] if hidden >= 1280 else 90,
        out_hidden_size=DIMS["out"] if hidden >= 1280 else 48,
        fullatt_block_indexes=full,
        window_size=112,
        patch_size=14,
        spatial_merge_size=2,
        temporal_patch_size=2,
        in_channels=3,
        hidden_act="silu",
    )
    torch.manual_seed(0)
    with torch.device(device):
        tower = Qwen2_5_VisionTransformerPretrainedModel._from_config(cfg, attn_implementation="sdpa")  # type: ignore[no-untyped-call]
    with torch.no_grad():  # visible biases and norm weights, so padding or indexing mistakes cannot hide
        for name, p in tower.named_parameters():
            if p.ndim == 1:
                p.copy_(torch.randn_like(p) * 0.05 + (1.0 if "norm" in name or "ln_q" in name else 0.0))
    return tower.to(dtype).eval()


def merged(out: Any) -> torch.Tensor:
    t = out.pooler_output if hasattr(out, "pooler_output") else out
    assert isinstance(t, torch.Tensor)
    return t


def eager_fn(tower: Any) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def run(pixels: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return merged(tower(pixels, grid_thw=grid.to(pixels.device)))

    return run


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.float(), b.float()
    return float((a - b).norm() / b.norm())


def time_ms(fn: Callable[[], Any], warmup: int, repeat: int) -> dict[str, float]:
    """Median / min of ``repeat`` runs timed with CUDA events around the whole call (host work included)."""
    for _ in range(warmup):
        fn()
    times = []
    if DEVICE == "cpu":
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times), "n": repeat}
    torch.cuda.synchronize()
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times), "n": repeat}


def tower_flops(grids: list[tuple[int, int, int]]) -> float:
    """Useful FLOPs of one forward over these images (matmuls and attention; unpadded MLP)."""
    h, inter, out, depth = DIMS["hidden"], DIMS["inter"], DIMS["out"], DIMS["depth"]
    n_full = len(DIMS["full"])
    p = sum(t * gh * gw for t, gh, gw in grids)
    linear = 2 * p * (3 * h * h + h * h + 3 * h * inter) * depth
    full_attn = sum(4 * (gh * gw) ** 2 * h * t for t, gh, gw in grids) * n_full
    layout = gc.pass_layout([list(g) for g in grids], gc.TowerGeometry(2, 112, 14, DIMS["full"]))
    win = layout.cu_window_seqlens.diff().double()
    window_attn = float((win**2).sum()) * 4 * h * (depth - n_full)
    embed = 2 * p * PATCH_DIM * h
    merger = 2 * (p // 4) * (4 * h) * (4 * h) + 2 * (p // 4) * (4 * h) * out
    return float(linear + full_attn + window_attn + embed + merger)


def matmul_peak(quick: bool) -> float:
    n = 4096 if quick else 8192
    if DEVICE == "cpu":
        n = 256
    a = torch.randn(n, n, device=DEVICE, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=DEVICE, dtype=torch.bfloat16)
    t = time_ms(lambda: a @ b, 3, 10 if quick else 30)["median_ms"]
    return 2 * n**3 / (t * 1e-3) / 1e12


def environment() -> dict[str, Any]:
    import transformers

    smi = ""
    with contextlib.suppress(Exception):
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version,clocks.max.sm", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    flash_attn_pkg = "installed" if importlib.util.find_spec("flash_attn") else "not installed"
    try:
        from torch.nn.attention.varlen import varlen_attn  # noqa: F401

        varlen = "torch.nn.attention.varlen.varlen_attn"
    except ImportError:
        varlen = "aten._flash_attention_forward (no torch.nn.attention.varlen)"
    return {
        "card": torch.cuda.get_device_name(0) if DEVICE == "cuda" else "CPU dry run (not a measurement)",
        "nvidia_smi": smi,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "flash_attn_package": flash_attn_pkg,
        "varlen_attention": varlen,
    }


def grid_of(w: int, h: int) -> tuple[int, int, int]:
    return (1, h // 14, w // 14)


def pixels_for(grids: list[tuple[int, int, int]], gen: torch.Generator) -> torch.Tensor:
    p = sum(t * h * w for t, h, w in grids)
    return torch.randn(p, PATCH_DIM, generator=gen).to(DEVICE, torch.bfloat16)


def capture_descending(ex: gc.CudaGraphExecutor, buckets: list[int]) -> float:
    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(7)
    for b in sorted(buckets, reverse=True):
        grid = torch.tensor([[1, 8, b // 8]])
        ex.warmup(b, torch.randn(b, PATCH_DIM, generator=gen).to(DEVICE, torch.bfloat16), grid)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


@contextlib.contextmanager
def section(results: dict[str, Any], name: str, out: Path) -> Iterator[dict[str, Any]]:
    t0 = time.perf_counter()
    part: dict[str, Any] = {}
    results[name] = part
    print(f"== {name}", flush=True)
    try:
        yield part
    except Exception as e:  # keep the other sections' numbers; the error is a result too
        part["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    part["seconds"] = round(time.perf_counter() - t0, 1)
    (out / "vision_encoder_h100.json").write_text(json.dumps(results, indent=1, default=str))


# ----------------------------------------------------------------------------------------------------- sections


def check_correctness(part: dict[str, Any], tower: Any, padded: Any, towers: dict[str, Any]) -> None:
    """Packed/padded replays vs eager bf16 and an fp32 reference, outputs poisoned before each replay."""
    gen = torch.Generator().manual_seed(int(time.time()))  # fresh inputs on every run
    executors = [t["bucketed"] for t in towers.values()]
    tower32 = copy.deepcopy(tower).float()
    cases = {
        "three images packed (448², 224², 672²)": [(1, 32, 32), (1, 16, 16), (1, 48, 48)],
        "one 896² filling bucket 4096": [(1, 64, 64)],
        "eight 224² packed": [(1, 16, 16)] * 8,
        "1344x1008 in bucket 7744": [(1, 72, 96)],
    }
    rows = []
    for label, grids in cases.items():
        pixels = pixels_for(grids, gen)
        grid = torch.tensor(grids)
        with torch.inference_mode():  # the static outputs are inference tensors
            for ex_ in executors:
                for cap in ex_.graphs.values():
                    cap.out.fill_(float("nan"))
        before = sum(ex_.eager_passes for ex_ in executors)
        with torch.inference_mode():
            got = {name: t["runner"](pixels, grid) for name, t in towers.items()}
        counts = [t * h * w // 4 for t, h, w in grids]
        ref32 = torch.cat(
            [
                eager_fn(tower32)(x.float(), torch.tensor([g]))
                for x, g in zip(torch.split(pixels, [c * 4 for c in counts]), grids, strict=True)
            ]
        )
        ref16 = torch.cat(
            [
                eager_fn(tower)(x, torch.tensor([g]))
                for x, g in zip(torch.split(pixels, [c * 4 for c in counts]), grids, strict=True)
            ]
        )
        row: dict[str, Any] = {
            "case": label,
            "all_finite_after_poison": all(bool(torch.isfinite(g).all()) for g in got.values()),
            "eager_fallback_passes": sum(ex_.eager_passes for ex_ in executors) - before,
            "eager_bf16_vs_fp32": rel_l2(ref16, ref32),
            "mlp_padded_eager_vs_fp32": rel_l2(eager_fn(padded)(pixels, grid), ref32),
        }
        for name, g in got.items():
            row[f"{name}_graph_vs_fp32"] = rel_l2(g, ref32)
            row[f"{name}_graph_vs_eager_bf16"] = rel_l2(g, ref16)
        bound = 1.25 * row["eager_bf16_vs_fp32"] + 1e-3
        row["ok"] = (
            row["all_finite_after_poison"]
            and row["eager_fallback_passes"] == 0
            and all(row[f"{name}_graph_vs_fp32"] <= bound for name in got)
            and row["mlp_padded_eager_vs_fp32"] <= bound
        )
        rows.append(row)
        print(json.dumps(row), flush=True)
    part["cases"] = rows
    part["all_ok"] = all(r["ok"] for r in rows)
    del tower32
    torch.cuda.empty_cache()


def bench_sizes(part: dict[str, Any], towers: dict[str, Any], sizes: list[tuple[int, int]], quick: bool) -> None:
    gen = torch.Generator().manual_seed(3)
    reps = (2, 5) if quick else (3, 15)
    eager_reps = (1, 3) if quick else (1, 5)
    rows = []
    runners = {name: t["runner"] for name, t in towers.items()}
    for w, h in sizes:
        for n in (1, 8):
            grids = [grid_of(w, h)] * n
            grid = torch.tensor(grids)
            pixels = pixels_for(grids, gen)
            patches = sum(a * b * c for a, b, c in grids)
            row: dict[str, Any] = {"size": f"{w}x{h}", "images": n, "patches": patches, "flops": tower_flops(grids)}
            row["eager_ms"] = time_ms(functools.partial(eager_fn(towers["base"]["tower"]), pixels, grid), *eager_reps)
            for name, t in towers.items():
                exact: gc.CudaGraphExecutor = t["exact"]
                exact.warmup(patches, pixels, grid)
                row[f"{name}_exact_graph_ms"] = time_ms(functools.partial(exact, patches, pixels, grid), *reps)
                passes = [
                    (p.bucket, p.padding) for p in pack([patches // n] * n, DEFAULT_BUCKETS, OversizePolicy.EAGER)
                ]
                row["runner_passes"] = passes
                row[f"{name}_runner_ms"] = time_ms(functools.partial(runners[name], pixels, grid), *reps)
                row[f"{name}_runner_eager_fallbacks"] = t["bucketed"].eager_passes
            rows.append(row)
            print(json.dumps({k: (v["median_ms"] if isinstance(v, dict) else v) for k, v in row.items()}), flush=True)
            exact_graphs = [t["exact"] for t in towers.values()]
            for ex in exact_graphs:  # free exact-shape graphs before the next size
                ex.graphs.clear()
            torch.cuda.empty_cache()
    part["rows"] = rows


def bench_attention(part: dict[str, Any], tower: Any, quick: bool) -> None:
    """One exact-shape graph per attention implementation: flash varlen vs dense SDPA with a block-diagonal mask."""
    gen = torch.Generator().manual_seed(5)
    rows = []
    for w, h in [(448, 448)] if quick else [(448, 448), (896, 896)]:
        grids = [grid_of(w, h)]
        grid, pixels = torch.tensor(grids), pixels_for(grids, gen)
        p = grids[0][1] * grids[0][2]
        row: dict[str, Any] = {"size": f"{w}x{h}"}
        outs = {}
        for attention in ("varlen", "sdpa_mask"):
            ex = gc.CudaGraphExecutor(tower, attention=attention)
            ex.warmup(p, pixels, grid)
            row[attention] = time_ms(functools.partial(ex, p, pixels, grid), 2, 10)
            outs[attention] = ex(p, pixels, grid)
            del ex
            torch.cuda.empty_cache()
        row["rel_l2_between"] = rel_l2(outs["sdpa_mask"], outs["varlen"])
        rows.append(row)
        print(json.dumps(row, default=str), flush=True)
    part["rows"] = rows


def _each(fn: Callable[..., Any], jobs: list[tuple[Any, ...]]) -> None:
    for job in jobs:
        fn(*job)


def bench_mixed(part: dict[str, Any], towers: dict[str, Any], n_images: int, batch: int, quick: bool) -> None:
    sizes = [s for s, n in read_sizes_csv(COCO_CSV).counts.items() for _ in range(n)]
    all_counts = [patch_count(*aligned_size(h, w)) for w, h in sizes]
    planned = optimal_buckets(all_counts, 4)
    ev = evaluate(all_counts, planned)
    part["csv"] = str(COCO_CSV.relative_to(ROOT))
    part["planned_buckets"] = list(planned)
    part["plan_efficiency_one_image_per_pass"] = ev.efficiency
    rng = random.Random(11)
    drawn = rng.sample(list(sizes), n_images)
    grids = []
    for w, h in drawn:
        ah, aw = aligned_size(h, w)
        grids.append((1, ah // 14, aw // 14))
    batches = [grids[i : i + batch] for i in range(0, len(grids), batch)]
    gen = torch.Generator().manual_seed(9)
    inputs = [(torch.tensor(b), pixels_for(b, gen)) for b in batches]
    real = sum(t * h * w for t, h, w in grids)
    part["images"] = n_images
    part["batch"] = batch
    part["real_patches"] = real
    part["flops"] = sum(tower_flops(b) for b in batches)
    reps = (1, 3) if quick else (2, 7)

    base = towers["base"]["tower"]
    jobs_in = [(px, g) for g, px in inputs]
    part["eager_batched_ms"] = time_ms(functools.partial(_each, eager_fn(base), jobs_in), 1, reps[1])

    def one_by_one() -> None:
        for g, px in inputs:
            for x, row in zip(torch.split(px, [int(r.prod()) for r in g]), g, strict=True):
                eager_fn(base)(x, row[None])

    part["eager_one_per_pass_ms"] = time_ms(one_by_one, 0, 1 if quick else 2)
    for name, t in towers.items():
        planned_ex = gc.CudaGraphExecutor(t["tower"], compile_blocks=t["compiled"])
        capture_descending(planned_ex, list(planned))
        runner = BucketedVisionRunner(planned_ex, tuple(planned), OversizePolicy.EAGER)
        part[f"{name}_runner_planned_ms"] = time_ms(functools.partial(_each, runner, jobs_in), *reps)
        part[f"{name}_runner_default_ms"] = time_ms(functools.partial(_each, t["runner"], jobs_in), *reps)
        # Ideal: the same passes at their exact real size (no dummy), one graph each.
        exact = gc.CudaGraphExecutor(t["tower"], compile_blocks=t["compiled"])
        jobs = []
        bucket_patches = 0
        for g, px in inputs:
            counts = [int(r.prod()) for r in g]
            chunks = torch.split(px, counts)
            for p in pack(counts, planned, OversizePolicy.EAGER):
                bucket_patches += p.bucket or sum(p.patches)
                sub_grid = g[list(p.items)]
                sub_px = torch.cat([chunks[i] for i in p.items])
                exact.warmup(sum(p.patches), sub_px, sub_grid)
                jobs.append((sum(p.patches), sub_px, sub_grid))
        part["planned_bucket_patches"] = bucket_patches
        part[f"{name}_exact_passes_ms"] = time_ms(functools.partial(_each, exact, jobs), *reps)
        part[f"{name}_eager_fallbacks"] = planned_ex.eager_passes
        del planned_ex, exact, runner
        torch.cuda.empty_cache()
    print(json.dumps({k: (v["median_ms"] if isinstance(v, dict) else v) for k, v in part.items()}), flush=True)


def bench_compiled(part: dict[str, Any], padded: Any, quick: bool) -> None:
    """torch.compile of the block (fuses RMSNorm, rotary, SiLU*up, residuals) inside the graph: eight 896² images."""
    w, h = (448, 448) if quick else (896, 896)
    grids = [grid_of(w, h)] * 8
    grid, pixels = torch.tensor(grids), pixels_for(grids, torch.Generator().manual_seed(13))
    p = sum(a * b * c for a, b, c in grids)
    part["size"] = f"8x{w}x{h}"
    part["flops"] = tower_flops(grids)
    plain = gc.CudaGraphExecutor(padded)
    plain.warmup(p, pixels, grid)
    part["padded_graph_ms"] = time_ms(functools.partial(plain, p, pixels, grid), 2, 10)
    ref = plain(p, pixels, grid)
    del plain
    torch.cuda.empty_cache()
    t0 = time.perf_counter()
    compiled = gc.CudaGraphExecutor(padded, compile_blocks=True)
    compiled.warmup(p, pixels, grid)
    part["compile_and_capture_s"] = round(time.perf_counter() - t0, 1)
    part["padded_compiled_graph_ms"] = time_ms(functools.partial(compiled, p, pixels, grid), 2, 10)
    part["rel_l2_compiled_vs_plain"] = rel_l2(compiled(p, pixels, grid), ref)
    print(json.dumps(part, default=str), flush=True)


def _pool_bytes() -> int:
    """Bytes reserved in graph pools (allocator segments outside the ordinary pool)."""
    if DEVICE != "cuda":
        return 0
    snapshot: list[dict[str, Any]] = torch.cuda.memory_snapshot()  # type: ignore[no-untyped-call]
    return sum(int(seg["total_size"]) for seg in snapshot if tuple(seg.get("segment_pool_id", (0, 0))) != (0, 0))


class _DryExecutor:
    """--cpu-dry-run stand-in for CudaGraphExecutor: same interface, runs the capturable forward eagerly."""

    name = "dry"

    def __init__(self, tower: Any, *, attention: str = "sdpa_mask", compile_blocks: bool = False) -> None:
        self.tower, self.eager_passes = tower, 0
        self.graphs: dict[int, Any] = {}
        self.geo = gc.TowerGeometry.from_tower(tower)

    def warmup(self, bucket: int, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> None:
        self.graphs[bucket] = type("Captured", (), {"out": torch.empty(1)})()

    def __call__(self, bucket: int | None, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        if bucket not in self.graphs:
            self.eager_passes += 1
        idx = gc.DeviceIndices.from_layout(gc.pass_layout(grid_thw, self.geo), pixel_values.device)
        with torch.inference_mode():
            return gc.tower_forward(self.tower, pixel_values, idx, gc.masked_sdpa)


# ------------------------------------------------------------------------------------------------------ report


def _ms(v: Any) -> float:
    return float(v["median_ms"]) if isinstance(v, dict) else float("nan")


def report(results: dict[str, Any]) -> str:
    env = results.get("environment", {})
    peak = results.get("peak", {}).get("bf16_matmul_tflops", float("nan"))
    lines = [
        "# Qwen2.5-VL vision encoder on " + str(env.get("card", "?")),
        "",
        f"Card: {env.get('card')} ({env.get('nvidia_smi')}); torch {env.get('torch')} (CUDA {env.get('cuda')}), "
        f"transformers {env.get('transformers')}; flash-attn package: {env.get('flash_attn_package')}; varlen "
        f"attention: {env.get('varlen_attention')}. Measured bf16 matmul peak (8192³): {peak:.0f} TFLOP/s.",
        "Tower: 7B vision dims, random weights, bf16. Times: median of CUDA-event-timed calls (host work included). "
        "`runner` = our BucketedVisionRunner (pack + dummy pad + graph replay) with the default buckets "
        f"{list(DEFAULT_BUCKETS)}; `exact` = one graph at the exact patch count; `pad` = MLP intermediate "
        "zero-padded 3420 -> 3456.",
        "",
    ]
    corr = results.get("correctness", {})
    names = [n for n in ("base", "pad", "best") if any(f"{n}_graph_vs_fp32" in r for r in corr.get("cases", []))]
    if corr.get("cases"):
        lines += [
            "## Correctness (relative L2 to an fp32 copy of the tower; fresh random inputs; graph outputs poisoned "
            "with NaN before every replay; runner passes packed and padded)",
            "",
            "| case | finite | eager bf16 | MLP-padded eager | "
            + " | ".join(f"runner {n}" for n in names)
            + " | runner base vs eager bf16 | ok |",
            "|---|---|---|---|" + "---|" * len(names) + "---|---|",
        ]
        for r in corr["cases"]:
            lines.append(
                f"| {r['case']} | {r['all_finite_after_poison']} | {r['eager_bf16_vs_fp32']:.2e} | "
                f"{r['mlp_padded_eager_vs_fp32']:.2e} | "
                + " | ".join(f"{r[n + '_graph_vs_fp32']:.2e}" for n in names)
                + f" | {r.get('base_graph_vs_eager_bf16', float('nan')):.2e} | {r['ok']} |"
            )
        lines += [
            "",
            "Pass rule: every runner within 1.25 x (eager bf16 error) + 1e-3, all finite, no eager fallback.",
            "",
        ]
    elif corr.get("error"):
        lines += [f"Correctness section failed: {corr['error']}", ""]
    rows = results.get("sizes", {}).get("rows", [])
    if rows:
        lines += [
            "## Per size (ms per image; speed-up over transformers' eager; TFLOP/s and % of measured peak)",
            "",
            "`best` = MLP-padded tower + torch.compile'd blocks inside the graphs.",
            "",
            "| size | imgs | eager | anchor eager | exact | anchor graph | runner | runner pad | runner best "
            "| exact best | runner best vs eager | runner best TFLOP/s (% peak) | padded patches |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            n = r["images"]
            eager = _ms(r["eager_ms"]) / n
            best = _ms(r.get("best_runner_ms")) / n
            tflops = r["flops"] / n / (best * 1e-3) / 1e12
            bucket_total = sum((b or 0) for b, _ in r["runner_passes"])
            anchor_e = ANCHOR_EAGER.get(r["size"]) if n == 1 else None
            anchor_g = ANCHOR_GRAPH.get(r["size"]) if n == 1 else None
            lines.append(
                f"| {r['size']} | {n} | {eager:.2f} | {anchor_e or '-'} | {_ms(r.get('base_exact_graph_ms')) / n:.2f} "
                f"| {anchor_g or '-'} | {_ms(r.get('base_runner_ms')) / n:.2f} | {_ms(r.get('pad_runner_ms')) / n:.2f} "
                f"| {best:.2f} | {_ms(r.get('best_exact_graph_ms')) / n:.2f} | {eager / best:.2f}x "
                f"| {tflops:.0f} ({100 * tflops / peak:.0f}%) | {bucket_total - r['patches']} of {bucket_total} |"
            )
        lines.append("")
    setup = results.get("setup", {})
    if setup:
        lines += [
            f"Warm-up of the 7 default buckets (largest first, one shared pool): seconds "
            f"{setup.get('capture_default_buckets_s')}, pool MiB {setup.get('default_buckets_shared_pool_mib')}.",
            "",
        ]
    att = results.get("attention", {}).get("rows", [])
    if att:
        lines += ["## Attention inside the graph (exact-shape graph, one image, ms)", ""]
        lines += ["| size | flash varlen (one call per layer) | dense SDPA + block-diagonal mask | rel L2 between |"]
        lines += ["|---|---|---|---|"]
        for r in att:
            lines.append(
                f"| {r['size']} | {_ms(r['varlen']):.2f} | {_ms(r['sdpa_mask']):.2f} | {r['rel_l2_between']:.1e} |"
            )
        lines.append("")
    mixed = results.get("mixed", {})
    if "real_patches" in mixed:
        mixed_peak = mixed.get("peak_tflops", peak)
        if mixed.get("provenance"):
            lines += [f"Mixed-batch numbers: {mixed['provenance']}", ""]
        n = mixed["images"]
        real, padded_p = mixed["real_patches"], mixed.get("planned_bucket_patches", 0)
        lines += [
            f"## Mixed batch: {n} COCO val2017 sizes (`{mixed['csv']}`), {mixed['batch']} images per runner call",
            "",
            f"Planned buckets (optimal 4 over all 5000 COCO images): {mixed['planned_buckets']} (efficiency one "
            f"image per pass {mixed['plan_efficiency_one_image_per_pass']:.3f}); this batch after packing: "
            f"{real} real of {padded_p} bucket patches (efficiency {real / max(padded_p, 1):.3f}, "
            f"1/efficiency {padded_p / max(real, 1):.3f}).",
            "",
            "| variant | ms per image | vs eager one per pass | TFLOP/s (% peak) |",
            "|---|---|---|---|",
        ]
        base_e = _ms(mixed.get("eager_one_per_pass_ms")) / n
        for key, label in [
            ("eager_one_per_pass_ms", "transformers eager, one image per call"),
            ("eager_batched_ms", "transformers eager, whole batch per call"),
            ("base_exact_passes_ms", "exact-shape graphs of the packed passes (no padding)"),
            ("base_runner_planned_ms", "runner, planned buckets"),
            ("base_runner_default_ms", "runner, default buckets"),
            ("pad_exact_passes_ms", "MLP-padded: exact-shape graphs of the packed passes"),
            ("pad_runner_planned_ms", "MLP-padded: runner, planned buckets"),
            ("pad_runner_default_ms", "MLP-padded: runner, default buckets"),
            ("best_exact_passes_ms", "best: exact-shape graphs of the packed passes"),
            ("best_runner_planned_ms", "best: runner, planned buckets"),
            ("best_runner_default_ms", "best: runner, default buckets"),
        ]:
            if key in mixed:
                per = _ms(mixed[key]) / n
                tf = mixed["flops"] / n / (per * 1e-3) / 1e12
                lines.append(f"| {label} | {per:.2f} | {base_e / per:.2f}x | {tf:.0f} ({100 * tf / mixed_peak:.0f}%) |")
        for v in ("base", "pad", "best"):
            if f"{v}_runner_planned_ms" in mixed and f"{v}_exact_passes_ms" in mixed:
                ratio = _ms(mixed[f"{v}_runner_planned_ms"]) / _ms(mixed[f"{v}_exact_passes_ms"])
                lines.append(
                    f"\nPadded cost ({v}): runner / exact-shape passes = {ratio:.3f} (target <= 1/efficiency)."
                )
        lines.append("")
    comp = results.get("compiled", {})
    if "padded_graph_ms" in comp:
        pg, fl = _ms(comp["padded_graph_ms"]), comp["flops"]
        lines += [f"## Fusion: torch.compile of the block inside the graph ({comp['size']})", ""]
        lines.append(
            f"- MLP-padded graph: {pg:.1f} ms, {fl / pg / 1e9:.0f} TFLOP/s ({100 * fl / pg / 1e9 / peak:.0f}%)"
        )
        if "padded_compiled_graph_ms" in comp:
            cg = _ms(comp["padded_compiled_graph_ms"])
            lines.append(
                f"- + compiled blocks: {cg:.1f} ms, {fl / cg / 1e9:.0f} TFLOP/s ({100 * fl / cg / 1e9 / peak:.0f}%); "
                f"compile+capture {comp['compile_and_capture_s']} s; "
                f"rel L2 vs plain {comp['rel_l2_compiled_vs_plain']:.1e}"
            )
        if comp.get("error"):
            lines.append(f"- compiled variant failed: {comp['error']}")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", RESULTS)))
    ap.add_argument("--quick", action="store_true", help="small sizes and few repeats (smoke test)")
    ap.add_argument(
        "--skip", default="", help="comma list of sections to skip: correctness,sizes,attention,mixed,compiled"
    )
    ap.add_argument("--cpu-dry-run", action="store_true", help="tiny tower on CPU, no graphs: tests the script only")
    ap.add_argument("--report", type=Path, help="render an existing JSON result as Markdown next to it and exit")
    args = ap.parse_args()
    if args.report:
        md = report(json.loads(args.report.read_text()))
        args.report.with_suffix(".md").write_text(md + "\n")
        print(md)
        return 0
    if args.cpu_dry_run:
        global DEVICE
        DEVICE = "cpu"
        gc.CudaGraphExecutor = _DryExecutor  # type: ignore[misc,assignment]
    elif not torch.cuda.is_available():
        print("this benchmark needs a CUDA GPU (or --cpu-dry-run to test the script)", file=sys.stderr)
        return 2
    skip = set(filter(None, args.skip.split(",")))
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"environment": environment(), "quick": args.quick}
    print(json.dumps(results["environment"]), flush=True)
    with section(results, "peak", args.out) as part:
        part["bf16_matmul_tflops"] = matmul_peak(args.quick)
    t0 = time.perf_counter()
    tower = build_tower(DEVICE, torch.bfloat16)
    padded = copy.deepcopy(tower)
    pad_vision_mlps(padded)
    towers: dict[str, Any] = {}
    buckets = list(DEFAULT_BUCKETS)
    variants = [("base", tower, False), ("pad", padded, False), ("best", padded, True)]
    for name, t, compiled in variants[: 3 if "best" not in skip else 2]:
        bucketed = gc.CudaGraphExecutor(t, compile_blocks=compiled)
        pools_before = _pool_bytes()
        capture_s = capture_descending(bucketed, buckets)
        towers[name] = {
            "tower": t,
            "compiled": compiled,
            "bucketed": bucketed,
            "exact": gc.CudaGraphExecutor(t, compile_blocks=compiled),
            "runner": BucketedVisionRunner(bucketed, tuple(buckets), OversizePolicy.EAGER),
            "capture_default_buckets_s": round(capture_s, 2),
            "shared_pool_mib": round((_pool_bytes() - pools_before) / 2**20, 1),
        }
    results["setup"] = {
        "build_and_capture_s": round(time.perf_counter() - t0, 1),
        "capture_default_buckets_s": {k: v["capture_default_buckets_s"] for k, v in towers.items()},
        "default_buckets_shared_pool_mib": {k: v["shared_pool_mib"] for k, v in towers.items()},
        "mlp_intermediate": {"base": DIMS["inter"], "pad": int(padded.blocks[0].mlp.gate_proj.out_features)},
    }
    if "correctness" not in skip:
        with section(results, "correctness", args.out) as part:
            check_correctness(part, tower, padded, towers)
    sizes = SIZES[:2] if args.quick else SIZES
    if "sizes" not in skip:
        with section(results, "sizes", args.out) as part:
            bench_sizes(part, towers, sizes, args.quick)
    if "attention" not in skip:
        with section(results, "attention", args.out) as part:
            bench_attention(part, tower, args.quick)
    if "mixed" not in skip:
        with section(results, "mixed", args.out) as part:
            bench_mixed(part, towers, 16 if args.quick else 64, 16, args.quick)
    for t in towers.values():
        t["bucketed"].graphs.clear()
        t["exact"].graphs.clear()
    torch.cuda.empty_cache()
    if "compiled" not in skip:
        with section(results, "compiled", args.out) as part:
            bench_compiled(part, padded, args.quick)
    md = report(results)
    (args.out / "vision_encoder_h100.md").write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The replay's report: configurations side by side (vllm-gaudi's defaults, yours, the planned buckets), as a table
and as one JSON object. A warm-up estimate is the graphs warmed times the plan's seconds per graph
(:func:`vllm_hpu_mm.runtimes.base.warmup_estimate`, the one rule, with its source); under ``VLLM_SKIP_WARMUP=true``
nothing is warmed and every shape that runs compiles on first use."""

from __future__ import annotations

import dataclasses
from typing import Any

from vllm_hpu_mm.buckets.planner import Evaluation
from vllm_hpu_mm.replay.run import ReplayResult
from vllm_hpu_mm.runtimes.base import WarmupEstimate, warmup_estimate

__all__ = ["Report", "result_dict", "to_dict", "to_table"]


@dataclasses.dataclass(frozen=True)
class Report:
    """Replays of one traffic under several configurations."""

    results: tuple[ReplayResult, ...]
    traffic: str
    load: str
    requests: int
    engine: dict[str, int]
    #: The runtime's backend: what the warm-up estimate depends on.
    backend: str
    vision: Evaluation | None
    vision_buckets: tuple[int, ...] | None
    #: What the runtime reads: VLLM_SKIP_WARMUP as set.
    skip_warmup: bool
    notes: tuple[str, ...] = ()


def _warmup(r: Report, graphs: int) -> WarmupEstimate | None:
    return warmup_estimate(r.backend, graphs)


def _seconds(r: Report, graphs: int) -> float | None:
    w = _warmup(r, graphs)
    return None if w is None else round(w.seconds, 1)


def result_dict(res: ReplayResult, report: Report) -> dict[str, Any]:
    warmed = sum(res.warmed)
    return {
        "label": res.label,
        "graphs_warmed": {"prompt": res.warmed[0], "decode": res.warmed[1], "total": warmed},
        "run_time_compiles": {
            "prompt": res.compiles_by_phase[0],
            "decode": res.compiles_by_phase[1],
            "shapes": [[p, list(s)] for p, s in res.compiles],
        },
        "fallback_buckets": [[p, list(b)] for p, b in res.fallbacks],
        "compiles_with_skip_warmup": {"prompt": res.shapes_run[0], "decode": res.shapes_run[1]},
        "prefill_token_efficiency": round(res.prefill_tokens.value, 4),
        "prefill_context_efficiency": round(res.prefill_context.value, 4),
        "decode_slot_efficiency": round(res.decode_slots.value, 4),
        "decode_block_efficiency": round(res.decode_blocks.value, 4),
        "warmup_seconds_estimate": _seconds(report, warmed),
    }


def to_dict(r: Report) -> dict[str, Any]:
    vision = None
    if r.vision is not None:
        vision = {"buckets": list(r.vision_buckets or ()), "patch_efficiency": round(r.vision.efficiency, 4),
                  "images": r.vision.num_images, "above_largest_bucket": r.vision.num_oversize,
                  "shrunk": r.vision.num_shrunk}  # fmt: skip
    return {
        "traffic": r.traffic,
        "load": r.load,
        "requests_replayed": r.requests,
        "engine": r.engine,
        "skip_warmup": r.skip_warmup,
        "configurations": [result_dict(res, r) for res in r.results],
        "warmup_seconds_source": w.source if (w := _warmup(r, 0)) is not None else None,
        "vision": vision,
        "notes": list(r.notes),
    }


def to_table(r: Report) -> str:
    e = r.engine
    lines = [
        f"Replay of {r.traffic}",
        f"  load: {r.load}; {r.requests} requests replayed",
        f"  engine: max_model_len {e['max_model_len']}, max_num_seqs {e['max_num_seqs']}, max_num_batched_tokens "
        f"{e['max_num_batched_tokens']}, block_size {e['block_size']}, KV blocks {e['num_kv_blocks']}",
        "",
    ]
    width = max(16, *(len(res.label) for res in r.results))
    rows: list[tuple[str, list[str]]] = []

    def row(name: str, cells: list[str]) -> None:
        rows.append((name, cells))

    row("graphs warmed (prompt + decode)", [f"{sum(x.warmed)} ({x.warmed[0]} + {x.warmed[1]})" for x in r.results])
    row("run-time compiles", [f"{len(x.compiles)}" for x in r.results])
    row("  of which fallback buckets", [f"{len(x.fallbacks)}" for x in r.results])
    row("compiles under VLLM_SKIP_WARMUP", [f"{sum(x.shapes_run)}" for x in r.results])
    row("prefill token efficiency", [f"{x.prefill_tokens.value:.3f}" for x in r.results])
    row("prefill context efficiency", [f"{x.prefill_context.value:.3f}" for x in r.results])
    row("decode slot efficiency", [f"{x.decode_slots.value:.3f}" for x in r.results])
    row("decode block efficiency", [f"{x.decode_blocks.value:.3f}" for x in r.results])
    estimates = [_seconds(r, sum(x.warmed)) for x in r.results]
    row("warm-up estimate (text graphs)", [f"{s:.0f} s" if s is not None else "unknown" for s in estimates])
    name_width = max(len(n) for n, _ in rows)
    lines.append(f"  {'':<{name_width}}  " + "  ".join(f"{res.label:>{width}}" for res in r.results))
    for name, cells in rows:
        lines.append(f"  {name:<{name_width}}  " + "  ".join(f"{c:>{width}}" for c in cells))
    lines.append("")
    if (w := _warmup(r, 0)) is not None:
        lines.append(f"warm-up estimate: {w.seconds_per_graph:.2f} s per graph, {w.source}")
    for res in r.results:
        if res.compiles:
            shown = ", ".join(f"{p} {s}" for p, s in res.compiles[:6])
            more = f" and {len(res.compiles) - 6} more" if len(res.compiles) > 6 else ""
            lines.append(f"{res.label}: {len(res.compiles)} shapes compile at run time while a request waits: "
                         f"{shown}{more}")  # fmt: skip
    if r.skip_warmup:
        lines.append("VLLM_SKIP_WARMUP=true is set: nothing is warmed, so every shape above compiles on first use")
    if r.vision is not None:
        v = r.vision
        lines.append(f"vision buckets {','.join(map(str, r.vision_buckets or ()))}: patch efficiency "
                     f"{v.efficiency:.3f} over {v.num_images} images; {v.num_oversize} above the largest bucket run at "
                     f"their own size (a compile each), {v.num_shrunk} shrunk")  # fmt: skip
    lines.extend(r.notes)
    return "\n".join(lines)

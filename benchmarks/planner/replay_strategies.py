"""Three strategies, one table: the buckets planned from traffic beside each of vllm-gaudi's built-in strategies
(exp, lin, pad), in time, at every load a server meets: closed loops of 1, a quarter, a half and all of
``max_num_seqs`` clients, Poisson arrivals and a profile of clients over time, every schedule drained (its last
requests finish alone). Per configuration and load: graphs warmed, warm-up estimate, padding over useful time,
added per-token latency p99, compiles at run time; then how far the time model's calibration can move the verdict
"ours pads no more than exp" (efficiencies and overheads scaled, the same schedule re-priced).

Each run is ``buckets replay``'s job (``jobs.replay.replay_traffic``) on this machine's model of vllm-gaudi @
091bbadd (its lookup agrees with vllm-gaudi's own code: benchmarks/agreement/results/vllm_gaudi_lookup_check.md and
vllm_gaudi_replay_agreement.md). No Gaudi is used: every second is the roofline model's. Writes
benchmarks/planner/results/replay_strategies.{md,json}.

    PYTHONPATH=. .venv/bin/python benchmarks/planner/replay_strategies.py [--requests N]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import MACHINE
from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.main import build_parser
from vllm_hpu_mm.jobs.replay import ReplayArgs, replay_traffic
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.replay.report import totals
from vllm_hpu_mm.replay.run import ReplayResult
from vllm_hpu_mm.replay.scheduler import Arrivals
from vllm_hpu_mm.replay.schedules import replay_model

RESULTS = Path(__file__).resolve().parent / "results"


@dataclasses.dataclass(frozen=True)
class Config:
    name: str
    argv: tuple[str, ...]
    max_num_seqs: int
    traffic: str  # "default" | "small"


CONFIGS = (
    Config("main job (7B, Gaudi2, 128000 tokens, 256 seqs), embedded traffic", (), 256, "default"),
    Config("many small requests (7B, Gaudi2, 8k tokens, 256 seqs)", ("--max-model-len", "8192"), 256, "small"),
    Config("32B, Gaudi3, TP 4, 32k tokens, 64 seqs", ("--model", "Qwen/Qwen2.5-VL-32B-Instruct", "--device", "gaudi3",
           "--tensor-parallel-size", "4", "--max-model-len", "32768", "--max-num-seqs", "64"), 64, "default"),
)  # fmt: skip


def small_csv(path: Path) -> Path:
    rng = random.Random(7)
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["width", "height", "text_tokens", "output_tokens", "count"])
        for _ in range(400):
            out.writerow(["", "", rng.randint(30, 400), rng.randint(10, 160), rng.randint(1, 10)])
    return path


def loads(max_num_seqs: int) -> list[tuple[str, list[str]]]:
    levels = sorted({1, max(1, max_num_seqs // 4), max(1, max_num_seqs // 2), max_num_seqs})
    out = [(f"{c} at once", ["--concurrency", str(c)]) for c in levels]
    out.append(("Poisson 2/s", ["--request-rate", "2"]))
    out.append(("profile 10 s x 64, 15 s x 4, 5 s idle, 10 s x 16",
                ["--load-profile", "10:64,15:4,5:0,10:16"]))  # fmt: skip
    return out


def run_one(argv: list[str]) -> Any:
    ns = build_parser().parse_args(["buckets", "replay", *argv])
    arrivals = None
    if ns.request_rate is not None or ns.load_profile is not None:
        arrivals = Arrivals(rate=ns.request_rate, profile=ns.load_profile or (), seed=ns.arrival_seed)
    args = ReplayArgs(None, None, ns.kv_blocks, ns.requests, True, arrivals, True)
    return replay_traffic(SizingArgs.from_namespace(ns), args, envs.load(), {})


def row_of(res: ReplayResult) -> dict[str, Any]:
    t = totals(res)
    assert t is not None
    return {"label": res.label, "graphs": sum(res.warmed), "warmup_s": round(1.28 * sum(res.warmed)),
            "compiles": len(res.compiles), "padding_over_useful": round(t.overhead, 4),
            "padded_s": round(t.padded_s, 2), "real_s": round(t.real_s, 2),
            "added_tpot_p99_ms": round(1000 * t.added_tpot[1], 3),
            "added_ttft_p99_ms": round(1000 * t.added_ttft[1], 2)}  # fmt: skip


#: (compute efficiency x, memory efficiency x, overhead x) the verdict is re-priced under.
VARIANTS = ((1.0, 1.0, 1.0), (0.5, 1.0, 1.0), (1.0, 0.6, 1.0), (1.0, 1.0, 0.0), (1.0, 1.0, 3.0), (0.5, 0.6, 3.0))


def sensitivity(replayed: Any, load: str) -> list[dict[str, Any]]:
    """Ours against the configured strategy (exp), padded time on the replay's own schedules, re-priced under scaled
    efficiencies and overheads."""
    timer, runs, shape, own, planned = replayed.timer, replayed.runs, replayed.shape, replayed.own, replayed.planned
    ours = own.with_text_buckets(planned.prompt, planned.decode) if planned is not None else None
    if timer is None or ours is None:
        return []
    out = []
    base = timer.step
    for ce, me, oh in VARIANTS:
        step = dataclasses.replace(base, compute_efficiency=base.compute_efficiency * ce,
                                   memory_efficiency=min(1.0, base.memory_efficiency * me),
                                   overhead_s=base.overhead_s * oh)  # fmt: skip
        priced = dataclasses.replace(timer, step=step)
        a = totals(replay_model(ours, shape, runs, "ours", priced))
        b = totals(replay_model(own, shape, runs, "exp", priced))
        assert a is not None
        assert b is not None
        out.append({"load": load, "compute_x": ce, "memory_x": me, "overhead_x": oh,
                    "ours_padding": round(a.overhead, 4), "exp_padding": round(b.overhead, 4),
                    "ours_not_slower": a.padded_s <= b.padded_s * (1 + 1e-9)})  # fmt: skip
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--machine", default=MACHINE)
    args = p.parse_args()
    start = time.time()
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for cfg in CONFIGS:
            extra = ["--sizes", str(small_csv(tmp / "small.csv"))] if cfg.traffic == "small" else []
            rows = []
            sens: list[dict[str, Any]] = []
            levels = loads(cfg.max_num_seqs)
            for k, (load, argv) in enumerate(levels):
                began = time.time()
                replayed = run_one([*cfg.argv, *extra, *argv, "--requests", str(args.requests)])
                if k in (0, 1, len(levels) - 3):  # 1, a quarter and all of max_num_seqs at once
                    sens += sensitivity(replayed, load)
                rows.append({"load": load, "seconds": round(time.time() - began, 1),
                             "refused": sum(n for _, n in replayed.report.refused),
                             "configurations": [row_of(r) for r in replayed.report.results]})  # fmt: skip
                print(cfg.name, load, [(c["label"][:14], c["padding_over_useful"]) for c in rows[-1]["configurations"]],
                      flush=True)  # fmt: skip
            out.append({"config": cfg.name, "loads": rows, "sensitivity": sens})
    meta = {"machine": args.machine, "seconds": round(time.time() - start), "requests_per_load": args.requests,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}  # fmt: skip
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "replay_strategies.json").write_text(json.dumps({"meta": meta, "configs": out}, indent=1) + "\n")
    (RESULTS / "replay_strategies.md").write_text(render(out, meta))


def render(out: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# Three strategies, one table: ours beside vllm-gaudi's exp, lin and pad, in time, at every load",
        "",
        f"`benchmarks/planner/replay_strategies.py` on {meta['machine']}, {meta['date']}, {meta['seconds']} s; "
        f"{meta['requests_per_load']} requests per load, every schedule drained. Seconds are the roofline model's",
        "(models/step_time.py, evidence: vendor throughput tables, agreement/results/step_time_check.md), not a",
        "measurement: no Gaudi was used. 'ours' is the buckets `buckets replay` plans from the same traffic (the",
        "planner on this branch). Padding = (busy time with buckets - busy time with real shapes) / real.",
        "",
    ]
    for c in out:
        lines += [f"## {c['config']}", "", "| load | configuration | graphs | warm-up | compiles at run time | "
                  "padding over useful time | added per-token p99 | added TTFT p99 |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for row in c["loads"]:
            for r in row["configurations"]:
                lines.append(f"| {row['load']} | {r['label']} | {r['graphs']} | {r['warmup_s']} s | {r['compiles']} "
                             f"| {r['padding_over_useful']:.1%} | {r['added_tpot_p99_ms']:.2f} ms | "
                             f"{r['added_ttft_p99_ms']:.1f} ms |")  # fmt: skip
        worse = []
        for row in c["loads"]:
            by = {r["label"]: r for r in row["configurations"]}
            ours, exp = by.get("planned from traffic"), by.get("vllm-gaudi's exp bucketing")
            if ours is not None and exp is not None and ours["padded_s"] > exp["padded_s"]:
                worse.append(f"{row['load']} ({ours['padding_over_useful']:.1%} vs {exp['padding_over_useful']:.1%})")
        lines += ["", f"Ours pads more than exp at: {'; '.join(worse) or 'no load'}."]
        if c["sensitivity"]:
            flips = {(s["load"]) for s in c["sensitivity"]}
            lines += ["", "Calibration sensitivity (ours vs exp, same schedules re-priced):", "",
                      "| load | compute eff. x | memory eff. x | overhead x | ours padding | exp padding | ours not "
                      "slower |", "|---:|---:|---:|---:|---:|---:|---|"]  # fmt: skip
            for s in c["sensitivity"]:
                lines.append(f"| {s['load']} | {s['compute_x']} | {s['memory_x']} | {s['overhead_x']} | "
                             f"{s['ours_padding']:.1%} | {s['exp_padding']:.1%} | "
                             f"{'yes' if s['ours_not_slower'] else '**no**'} |")  # fmt: skip
            verdicts: dict[str, set[bool]] = {}
            for s in c["sensitivity"]:
                verdicts.setdefault(s["load"], set()).add(s["ours_not_slower"])
            moved = [str(k) for k in sorted(flips) if len(verdicts[k]) > 1]
            lines.append("")
            lines.append(f"The verdict moves with the calibration at loads: {', '.join(moved) or 'none'}.")
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

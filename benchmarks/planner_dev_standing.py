"""How the default text budget rule's plan stands against vllm-gaudi's exp on its OWN planning traffic, for every
configuration of every set in ``planner_heldout_time.py`` (all development data once run): a quick check of a
planner change before a held-out set is run.

Each configuration is planned as ``serve`` plans it (2,000 requests per load level, every level judged,
``planner_heldout_time.choose``: ``plan/text_buckets.plan_for_traffic`` with the warm-up estimate), and the plan's
own verdicts are reported: the budget, the warm-up share of exp's, the loads where it pads longer than exp and the
loads that miss the margin. Padded time here is the project's lookup model (``buckets/text_budget.padded_time``), not
vllm-gaudi's code, and the traffic is the planning seed: a plan that pads longer than exp here fails its held-out run
too, the converse is not evidence. ``--heavy-batch-share`` sets ``buckets/text.HEAVY_BATCH_SHARE`` (0: the grid's
decode rows alone) to compare the rule with and without rows at heavy batch sizes.

    PYTHONPATH=. .venv/bin/python benchmarks/planner_dev_standing.py [--sets ninth,eighth] [--heavy-batch-share S]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from benchmarks import planner_heldout_time as h
from benchmarks.vllm_gaudi_bucket_counts import MACHINE, RESULTS
from vllm_hpu_mm.buckets import text as text_planner
from vllm_hpu_mm.buckets.text_budget import MARGIN, standing
from vllm_hpu_mm.replay.schedules import DEFAULT_REQUESTS


def stand(c: h.Config, requests: int) -> dict[str, Any]:
    p = h.choose(c, requests)
    chosen, own = p["chosen"], p["strategies"]["exp"]
    longer, missed, worst = standing(chosen.loads)
    return {"name": c.name, "budget": chosen.budget, "exp_graphs": len(own.prefill) + len(own.decode),
            "warmup_share": p["warmup"]["ours"] / p["warmup"]["exp"],
            "decode_rows": sorted({b for b, _, _ in chosen.plan.decode}), "longer": longer, "missed": missed,
            "worst_ratio": worst, "plan_s": p["plan_seconds"],
            "longer_at": {v.load: v.ours.padded_s / v.own.padded_s for v in chosen.loads if v.short}}  # fmt: skip


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    out = [f"# The default rule's plan against exp on its own planning traffic (HEAVY_BATCH_SHARE {meta['share']:g})",
           "", f"Machine: {meta['machine']}. Run {meta['when']}, {meta['seconds']:.0f} s. Padded time: the project's "
           f"lookup model; margin {MARGIN:g} of exp's padded time. Nothing here ran on Gaudi.", "",
           "| set | configuration | graphs ours / exp | warm-up share | decode rows | loads longer than exp | loads "
           "missing the margin | worst ratio |", "|---|---|---|---:|---|---|---:|---:|"]  # fmt: skip
    for r in rows:
        at = ", ".join(f"{k.split()[0]} ({v:.2f})" for k, v in r["longer_at"].items()) or "none"
        out.append(
            f"| {r['set']} | {r['name']} | {r['budget']} / {r['exp_graphs']} | {r['warmup_share']:.3f} | "
            f"{', '.join(map(str, r['decode_rows']))} | {at} | {r['missed']} | {r['worst_ratio']:.3f} |"
        )
    configs = sum(1 for r in rows if r["longer"])
    out += ["", f"Configurations with a load padding longer than exp: {configs} of {len(rows)}; loads: "
            f"{sum(r['longer'] for r in rows)}.", ""]  # fmt: skip
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--sets",
        default=",".join(s for s in h.SETS if s != "tenth"),
        help="comma-separated sets of planner_heldout_time.py (default: every set but the held-out one)",
    )
    p.add_argument(
        "--heavy-batch-share",
        type=float,
        default=text_planner.HEAVY_BATCH_SHARE,
        help="decode batch sizes with at least this share of the weight are candidate rows (0: none)",
    )
    p.add_argument("--requests", type=int, default=DEFAULT_REQUESTS, help="planning requests per load level")
    p.add_argument("--machine", default=MACHINE)
    args = p.parse_args()
    text_planner.HEAVY_BATCH_SHARE = args.heavy_batch_share
    start = time.time()
    rows = []
    for name in args.sets.split(","):
        for c in h.SETS[name]:
            rows.append({"set": name, **stand(c, args.requests)})
            print(rows[-1]["set"], rows[-1]["name"], rows[-1]["longer_at"], flush=True)
    meta = {"share": args.heavy_batch_share, "machine": args.machine, "seconds": time.time() - start,
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}  # fmt: skip
    stem = f"planner_dev_standing_heavy{args.heavy_batch_share:g}"
    (RESULTS / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    (RESULTS / f"{stem}.md").write_text(render(rows, meta))


if __name__ == "__main__":
    main()

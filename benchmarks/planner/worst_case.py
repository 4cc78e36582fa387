"""The planned text buckets' worst shape against vllm-gaudi's ``exp``, on configurations the bound was not tuned on
(issue 35): for every shape the limits allow, the planned bucket's step time over exp's, the graphs against exp's,
the run-time compiles, the traffic-weighted padded time against exp's at every load, and a drifted replay (planned
on one traffic, served another) against the stated worst.

Each configuration is planned by the default rule as ``serve`` plans it (``plan/text_buckets.plan_for_traffic``:
the budget rule, then the corner buckets of ``buckets/text_worst.py``). Its traffic is the embedded default traffic
reshaped (text, answers and prefix hits scaled, images scaled, a share made text-only), the drifted traffic another
reshaping of it. Both are scheduled by our model of vLLM 0.32's scheduler at every load level (the drain kept), and
every step is looked up with the project's model of vllm-gaudi's lookup (``buckets/text_time.LookupTable``, which
agrees with vllm-gaudi's own code on every event: benchmarks/agreement/results/vllm_gaudi_lookup_check.md) and priced
with the step-time model (``models/step_time.py``) at its bucket and at its own shape.

Reported per configuration: the stated worst decode and prefill shape and ratio (and the graphs that reach 1.5x when
the budget does not); graphs, ours against exp's; shapes no bucket holds (run-time compiles) on both traffics; per
load, padded time ours / exp's on the planned traffic and on the drifted one; on the drifted traffic the largest
step ratio of any step that ran and its busy-time ratio, each against the stated worst (never above it, by
construction: every step's bucket is looked up by the same rule the worst was found with).

    PYTHONPATH=. .venv/bin/python -m benchmarks.planner.worst_case [--requests N] [--only K] [--name STEM --note TEXT]

Runs: ``worst_case`` (the first run of these configurations, at the planner it was written for) and
``worst_case_replan`` (after one change made on seeing it: the smaller budget re-planned again from each plan that
keeps its loads; these configurations are development data since).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import load_note, write_results
from vllm_hpu_mm.buckets.text import TextLimits
from vllm_hpu_mm.buckets.text_budget import LoadShapes, padded_time
from vllm_hpu_mm.buckets.text_time import LookupTable
from vllm_hpu_mm.engine import Bucket, EngineShape
from vllm_hpu_mm.models.catalog import catalog_by_id
from vllm_hpu_mm.models.dims import kv_bytes_per_token, weight_bytes
from vllm_hpu_mm.models.step_time import StepTime, step_time
from vllm_hpu_mm.plan.text_buckets import load_shapes, plan_for_traffic, text_warmup
from vllm_hpu_mm.replay.schedules import Images, schedules
from vllm_hpu_mm.runtimes.vllm_gaudi import TRAITS, VllmGaudi
from vllm_hpu_mm.runtimes.vllm_gaudi.exponential import decode_block_ceiling
from vllm_hpu_mm.traffic.default import default_traffic
from vllm_hpu_mm.traffic.requests import Request, Traffic

RESULTS = Path(__file__).resolve().parent / "results"
MACHINE = "2-core dev machine (x86-64, shared with three other sessions and a latency measurement: loaded)"
VISION_BUCKETS = (1600, 3136, 4096, 6400, 7744, 9216, 12544)
#: Card memory (GiB) for the KV estimate: 0.9 utilisation, 10% of it for graphs.
CARD_GIB = {"gaudi2": 96, "gaudi3": 128}
BLOCK = 128


@dataclasses.dataclass(frozen=True)
class Reshape:
    """The default traffic reshaped: prompts, answers and prefix hits scaled, image sides scaled, a share of the
    requests made text-only (every ``1 / text_only``-th distinct request), a fixed prefix added to a share."""

    text: float = 1.0
    answers: float = 1.0
    image: float = 1.0
    text_only: float = 0.0
    prefix: int = 0

    def describe(self) -> str:
        parts = [f"text x{self.text:g}", f"answers x{self.answers:g}", f"image sides x{self.image:g}"]
        if self.text_only:
            parts.append(f"{self.text_only:.0%} of distinct requests text-only")
        if self.prefix:
            parts.append(f"a {self.prefix}-token cached prefix on every other request")
        return "default traffic, " + ", ".join(parts)


@dataclasses.dataclass(frozen=True)
class Config:
    """A model on a device (tensor parallel ``tp``), the engine limits (max_model_len, max_num_seqs,
    max_num_batched_tokens), the traffic planned on and the one served, and the load planned for (None: unknown)."""

    name: str
    model: str
    device: str
    tp: int
    limits: tuple[int, int, int]
    plan: Reshape
    drift: Reshape
    load: int | None = None

    @property
    def max_model_len(self) -> int:
        return self.limits[0]

    @property
    def max_num_seqs(self) -> int:
        return self.limits[1]

    @property
    def max_num_batched_tokens(self) -> int:
        return self.limits[2]


#: Written before their first run; none of them is the main job or a configuration the bound was developed on (the
#: main job's limits and tests/plan's 16k / 32-sequence configuration).
CONFIGS = (
    Config("long contexts, few sequences (7B, Gaudi2, 128k, 8 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2", 1,
           (131072, 8, 8192), Reshape(text=24.0, answers=2.0, text_only=0.3), Reshape(text=4.0, answers=0.5)),
    Config("short requests at high batch (3B, Gaudi3, 4k, 256 seqs)", "Qwen/Qwen2.5-VL-3B-Instruct", "gaudi3", 1,
           (4096, 256, 2048), Reshape(text=0.25, answers=0.3, image=0.5, text_only=0.5),
           Reshape(text=1.0, answers=1.0, image=0.7)),
    Config("prefix-heavy (7B, Gaudi2, 32k, 64 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2", 1, (32768, 64, 4096),
           Reshape(text=1.5, prefix=4096, text_only=0.4), Reshape(text=1.0, prefix=512)),
    Config("large images (7B, Gaudi2, 16k, 32 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2", 1, (16384, 32, 8192),
           Reshape(image=2.5, answers=1.5), Reshape(image=1.0, text=2.0)),
    Config("RAG mix, planned for 64 at once (7B, Gaudi2, 32k, 128 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2",
           1, (32768, 128, 8192), Reshape(text=8.0, answers=0.5, prefix=2048, text_only=0.6),
           Reshape(text=2.0, answers=2.0, text_only=0.2), 64),
    Config("many small requests (7B, Gaudi2, 128k, 256 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2", 1,
           (131072, 256, 2048), Reshape(text=0.5, answers=0.5), Reshape(text=6.0, answers=1.5, text_only=0.5)),
)  # fmt: skip


def reshaped(base: Traffic, r: Reshape) -> Traffic:
    counts: dict[Request, int] = {}
    for k, (req, n) in enumerate(sorted(base.counts.items(), key=lambda kv: kv[0].sort_key())):
        text = max(1, round((req.text_tokens or 1) * r.text))
        cached = min(text - 1, round((req.cached_tokens or 0) * r.text))
        if r.prefix and k % 2 == 0:
            text, cached = text + r.prefix, cached + r.prefix
        image = req.image
        if image is not None and r.text_only and k % round(1 / r.text_only) == 0:
            image = None
        elif image is not None:
            image = (max(28, round(image[0] * r.image)), max(28, round(image[1] * r.image)))
        out = Request(image, text, max(1, round((req.output_tokens or 1) * r.answers)), max(0, cached))
        counts[out] = counts.get(out, 0) + n
    return Traffic(counts, r.describe())


def kv_blocks(c: Config) -> int:
    m = catalog_by_id(c.model)
    assert m is not None
    usable = CARD_GIB[c.device] * 2**30 * 0.9 * 0.9 - weight_bytes(m, 2, c.tp)
    return max(64, int(usable // (kv_bytes_per_token(m, 2, c.tp) * BLOCK)))


def step_ratios(buckets: tuple[tuple[Bucket, ...], tuple[Bucket, ...]], exp: tuple[tuple[Bucket, ...], ...],
                load: LoadShapes, t: StepTime) -> dict[str, float]:  # fmt: skip
    """The largest ratio, over the steps the load ran, of a step's time in our bucket to its time in exp's."""
    out = {}
    for phase, shapes, ours, theirs in (("prefill", load.prefill, buckets[0], exp[0]),
                                        ("decode", load.decode, buckets[1], exp[1])):  # fmt: skip
        if not shapes:
            continue
        a = np.array([s[0] for s in shapes], dtype=np.int64)
        c = np.array([s[1] for s in shapes], dtype=np.int64)
        secs = []
        for table in (LookupTable(ours), LookupTable(theirs)):
            at = table.index(np.ones_like(a), a, c) if phase == "prefill" else table.index(a, np.ones_like(a), c)
            priced = [math.inf if i < 0 else (t.prefill_s(*table.bucket(i)) if phase == "prefill" else
                      t.decode_s(table.bucket(i)[0], table.bucket(i)[2])) for i in at.tolist()]  # fmt: skip
            secs.append(np.array(priced))
        out[phase] = float((secs[0] / secs[1]).max())
    return out


def run(c: Config, requests: int) -> dict[str, Any]:
    m = catalog_by_id(c.model)
    assert m is not None
    shape = EngineShape(max_model_len=c.max_model_len, max_num_seqs=c.max_num_seqs, block_size=BLOCK,
                        max_num_batched_tokens=c.max_num_batched_tokens, num_kv_blocks=kv_blocks(c))  # fmt: skip
    limits = TextLimits.of(shape, decode_block_ceiling(shape), 1)
    t = step_time(m, c.device, block_size=BLOCK, tensor_parallel_size=c.tp)
    images = Images(VISION_BUCKETS)
    base = default_traffic()
    planned, drifted = reshaped(base, c.plan), reshaped(base, c.drift)
    runs = schedules(planned, shape, images, concurrency=c.load, requests=requests, seed=1)
    sweep = None if runs.balanced else schedules(planned, shape, images, concurrency=None, requests=requests, seed=1)
    exp = VllmGaudi().text_shapes(shape)
    exp_buckets = (exp.prefill, tuple((b, 1, k) for b, k in exp.decode))
    start = time.process_time()
    chosen = plan_for_traffic(
        runs, limits, exp, t, budget=None, sweep=sweep, warmup=text_warmup(TRAITS, block_size=BLOCK)
    )
    plan_cpu = time.process_time() - start
    worst = chosen.worst
    assert worst is not None
    ours = (chosen.plan.prompt, chosen.plan.decode)
    drift_runs = schedules(drifted, shape, images, concurrency=None, requests=requests, seed=2)
    drift_loads = []
    for load in load_shapes(drift_runs):
        mine, theirs = padded_time(*ours, load, t), padded_time(*exp_buckets, load, t)
        busy = (mine.bucket_prefill_s + mine.bucket_decode_s) / (theirs.bucket_prefill_s + theirs.bucket_decode_s)
        drift_loads.append({"load": load.load, "padded_ratio": mine.padded_s / theirs.padded_s if theirs.padded_s
                            else None, "busy_ratio": busy, "uncovered": mine.uncovered,
                            "largest_step_ratio": step_ratios(ours, exp_buckets, load, t)})  # fmt: skip
    return {
        "name": c.name, "model": c.model, "device": c.device, "tp": c.tp,
        "limits": {"max_model_len": c.max_model_len, "max_num_seqs": c.max_num_seqs,
                   "max_num_batched_tokens": c.max_num_batched_tokens, "kv_blocks": shape.num_kv_blocks},
        "planned_traffic": planned.source, "drifted_traffic": drifted.source, "planned_load": c.load,
        "graphs": chosen.plan.graphs, "exp_graphs": len(exp.prefill) + len(exp.decode), "budget_reason": chosen.reason,
        "worst": worst.to_dict(),
        "planned_loads": [{"load": v.load, "padded_ratio": v.ours.padded_s / v.own.padded_s if v.own.padded_s else None,
                           "uncovered": v.ours.uncovered} for v in chosen.loads],
        "drifted_loads": drift_loads,
        "plan_cpu_s": plan_cpu,
    }  # fmt: skip


def _f(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# The planned text buckets' worst shape against vllm-gaudi's exp (issue 35)",
        "",
        f"Machine: {meta['machine']}; {meta['load']}; commit {meta['commit']}; {meta['date']}; "
        f"{meta['requests']} requests per load level; CPU {meta['cpu_s']:.0f} s in all. Produced by "
        f"`benchmarks/planner/worst_case.py`; figures as they came ({meta['note']}). Every shape "
        "looked up with the project's model of vllm-gaudi's lookup (agrees with vllm-gaudi's own code on every "
        "event: agreement/results/vllm_gaudi_lookup_check.md) and priced with the step-time model (ratios of two "
        "modelled steps; each ratio's range within the model's held-out interval is in the JSON).",
        "",
        "| configuration | worst decode (x exp) | worst prefill (x exp) | bound 1.5x | graphs (exp) | compiles "
        "(planned / drifted) | padded / exp's per load, planned traffic | drifted: padded / exp's per load | "
        "drifted: largest step / busy ratio (<= worst?) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        w = r["worst"]
        reach = ("met" if w["within_bound"] else
                 f"not met: {w['graphs_reaching_bound'] or 'more than +64'} graphs reach it")  # fmt: skip
        planned = ", ".join(f"{x['load'].split()[0]}: {_f(x['padded_ratio'])}" for x in r["planned_loads"])
        drifted = ", ".join(f"{x['load'].split()[0]}: {_f(x['padded_ratio'])}" for x in r["drifted_loads"])
        step = max((v for x in r["drifted_loads"] for v in x["largest_step_ratio"].values()), default=0.0)
        busy = max(x["busy_ratio"] for x in r["drifted_loads"])
        ok = "yes" if max(step, busy) <= (w["ratio"] or 0) * (1 + 1e-9) else "NO"
        compiles = (
            f"{sum(x['uncovered'] for x in r['planned_loads'])} / {sum(x['uncovered'] for x in r['drifted_loads'])}"
        )
        lines.append(
            f"| {r['name']} | {_f(w['decode']['ratio'] if w['decode'] else None)} | "
            f"{_f(w['prefill']['ratio'] if w['prefill'] else None)} | {reach} | {r['graphs']} ({r['exp_graphs']}) | "
            f"{compiles} | {planned} | {drifted} | {step:.2f} / {busy:.2f} ({ok}) |"
        )
    lines += ["", "Worst shapes, in the plan's words:", ""]
    lines += [f"- {r['name']}: {r['worst']['line']} (plan: {r['plan_cpu_s']:.1f} s CPU)" for r in rows]
    lines += ["", "Planned traffics and drifted traffics:", ""]
    lines += [f"- {r['name']}: planned on {r['planned_traffic']} (load {r['planned_load'] or 'unknown'}); "
              f"served {r['drifted_traffic']}" for r in rows]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=600, help="requests per load level (serve: 2000)")
    parser.add_argument("--only", type=int, default=None, help="run configuration K only (0-based), not written")
    parser.add_argument("--name", default="worst_case", help="results file stem (results/NAME.md, .json)")
    parser.add_argument("--note", default="first run of these configurations", help="what run this is, in words")
    args = parser.parse_args()
    before = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    start = time.process_time()
    configs = CONFIGS if args.only is None else (CONFIGS[args.only],)
    rows = []
    for c in configs:
        rows.append(run(c, args.requests))
        print(f"{c.name}: {rows[-1]['worst']['line']}", flush=True)
    after = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip()  # fmt: skip
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    meta = {"machine": MACHINE, "load": load_note(before, after), "commit": commit, "requests": args.requests,
            "date": date, "cpu_s": time.process_time() - start, "note": args.note}  # fmt: skip
    if args.only is None:
        write_results(args.name, render(rows, meta), {"meta": meta, "rows": rows}, RESULTS)
    else:
        print(render(rows, meta))


if __name__ == "__main__":
    main()

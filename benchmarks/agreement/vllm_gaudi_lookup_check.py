"""Our model of vllm-gaudi's bucket lookup (vllm_hpu_mm.runtimes.vllm_gaudi.runner / common.BucketLookup) against
vllm-gaudi's OWN code, lookup by lookup.

vllm-gaudi's source is extracted from the local mirror as benchmarks/agreement/vllm_gaudi_bucket_counts.py does, and
agreement/vllm_gaudi_driver.py runs, on CPU with VLLM_USE_FAKE_HPU=1, its ``HPUBucketingManager`` (generate_prompt_
buckets / generate_decode_buckets, then find_prompt_bucket / find_decode_bucket / generate_fallback_bucket) fed by
the bodies of its runner methods ``_can_merge_prefill_contents``, ``_bucketize_2d_prompt``,
``_bucketize_merged_prompt``, ``_get_prompt_bucketing_fn`` and its ``BatchContents`` / ``merge_contents`` (taken
from hpu_model_runner.py with ast), over the same lookup events ours replays. Configurations and events are random
(seeded): every strategy, bucket files (random ones and the ones ``serve`` plans), several prefill batch sizes,
merged prefill; events from our scheduler over real traffic and adversarial ones beyond every limit (fallbacks).

Agreement: for every event, the buckets each forward runs in; and at the end, the whole bucket lists (fallbacks
appended). Writes benchmarks/agreement/results/vllm_gaudi_lookup_check.{md,json}.

``--figures``: the replay's figures, ours against vllm-gaudi's own code over the same whole schedule (drain
included: closed loops at several loads, Poisson arrivals, a profile of clients over time), for several models,
devices and strategies. Our side is ``buckets replay``'s path (``replay_model`` over our runner model, in time);
theirs feeds every event of the schedule, in order, to vllm-gaudi's own lookup (the driver) and computes the same
figures from the buckets it returned (one forward per prefill chunk: these configurations leave
VLLM_PROMPT_BS_BUCKET_MAX unset, so vllm-gaudi's runner merges none). Every figure must agree within 0.01 (shares and
efficiencies absolutely; seconds relatively). Writes benchmarks/agreement/results/vllm_gaudi_replay_agreement.{md,json}.

    PYTHONPATH=. .venv/bin/python benchmarks/agreement/vllm_gaudi_lookup_check.py [--cases N] [--seed S] [--figures]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import MACHINE, MIRROR, extract, file_env, run_driver, trace_events
from vllm_hpu_mm.buckets.text import TextLimits
from vllm_hpu_mm.engine import EngineShape, GraphRun, PrefillChunk
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.catalog import CATALOG, DEFAULT_MODEL
from vllm_hpu_mm.models.step_time import step_time
from vllm_hpu_mm.plan.text_buckets import plan_from_traces
from vllm_hpu_mm.replay.run import replay
from vllm_hpu_mm.replay.scheduler import Arrivals, Trace
from vllm_hpu_mm.replay.schedules import Images, replay_model, schedules, timer_for
from vllm_hpu_mm.replay.timing import PHASES
from vllm_hpu_mm.runtimes.vllm_gaudi import model_from_env
from vllm_hpu_mm.runtimes.vllm_gaudi.config import VLLM_GAUDI_COMMIT, config_from_env
from vllm_hpu_mm.runtimes.vllm_gaudi.exponential import decode_block_ceiling
from vllm_hpu_mm.runtimes.vllm_gaudi.file_strategy import bucket_file
from vllm_hpu_mm.runtimes.vllm_gaudi.runner import RunnerLookup
from vllm_hpu_mm.traffic.default import default_traffic
from vllm_hpu_mm.traffic.requests import Request, Traffic

RESULTS = Path(__file__).resolve().parent / "results"

Event = list[Any]
#: Prices the planned buckets (the planner needs a step-time model; the check is of the lookup, not the plan).
PLAN_TIME = step_time(CATALOG[DEFAULT_MODEL], "gaudi2", block_size=128)


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    shape: EngineShape
    env: dict[str, str]
    file_text: str | None
    events: list[Event]
    #: The first this many events come from the scheduler (traffic within the limits); the rest are adversarial.
    scheduled: int = 0


def _adversarial(rng: random.Random, shape: EngineShape, n: int) -> list[Event]:
    """Prefill and decode lookups anywhere in (and beyond) the limits: they exercise the fallback rule."""
    out: list[Event] = []
    for _ in range(n):
        if rng.random() < 0.5:
            chunks = [[rng.randint(1, int(shape.max_num_batched_tokens * 1.3)),
                       rng.choice([0, 0, rng.randint(0, int(shape.max_model_len * 1.2))])]
                      for _ in range(rng.choice([1, 1, 2, 3, 5]))]  # fmt: skip
            out.append(["prefill", chunks])
        else:
            seqs = rng.randint(1, int(shape.max_num_seqs * 1.3))
            out.append(["decode", seqs, rng.randint(seqs, max(seqs, shape.num_kv_blocks * 4))])
    return out


def random_cases(count: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    traffic = default_traffic()
    out = []
    for i in range(count):
        block = rng.choice([64, 128, 256])
        shape = EngineShape(
            max_model_len=rng.choice([2048, 4096, 8192, 16384, 32768, 65536]),
            max_num_seqs=rng.choice([4, 16, 64, 128, 256]),
            max_num_batched_tokens=rng.choice([2048, 4096, 8192]),
            block_size=block,
            num_kv_blocks=rng.randint(300, 12000),
        )
        strategy = rng.choice(["exp", "exp", "pad", "lin", "file", "planned", "planned"])
        env: dict[str, str] = {}
        if strategy in ("exp", "pad", "lin"):
            env["VLLM_BUCKETING_STRATEGY"] = strategy
        if strategy == "lin":  # keep lin's dense grid small enough for this machine
            shape = dataclasses.replace(shape, max_model_len=min(shape.max_model_len, 8192),
                                        max_num_seqs=min(shape.max_num_seqs, 64))  # fmt: skip
        if rng.random() < 0.3:
            env["VLLM_PROMPT_BS_BUCKET_MAX"] = rng.choice(["2", "4"])
        if strategy != "planned" and rng.random() < 0.15:
            env["VLLM_MERGED_PREFILL"] = "true"
        limits = shape
        runs = schedules(traffic, limits, Images((1600, 3136, 4096, 6400, 7744, 9216, 12544)),
                         concurrency=rng.choice([1, 4, 16, shape.max_num_seqs]), requests=300, seed=i)  # fmt: skip
        file_text = None
        if strategy == "planned":
            mnps = int(env.get("VLLM_PROMPT_BS_BUCKET_MAX", "1"))
            text_limits = TextLimits.of(shape, decode_block_ceiling(shape), mnps)
            plan = plan_from_traces(runs, text_limits, rng.choice([60, 80, 120]), time=PLAN_TIME)
            file_text = bucket_file(plan.prompt, plan.decode)
        elif strategy == "file":
            lines = ["(1, [128, 256, 512, 1024, 2048], [0, 2, 8, 32])", "(2, [128, 512], 0)",
                     f"([1, 2, 4, 8, 16], 1, [{block // 64 + 4}, 64, 256, 1024])"]  # fmt: skip
            file_text = "\n".join(rng.sample(lines, rng.randint(2, 3))) + "\n(1, 128, 0)\n(1, 1, 8)\n"
        scheduled = trace_events(runs.traces[0], 600)
        events = scheduled + _adversarial(rng, shape, 150)
        out.append(Case(f"random #{i} ({strategy})", shape, env, file_text, events, len(scheduled)))
    return out


def ours(case: Case) -> dict[str, Any]:
    cfg = config_from_env(case.env)
    if case.file_text is not None:
        cfg = dataclasses.replace(cfg, from_file="buckets.txt", file_text=case.file_text)
    try:
        lookup = RunnerLookup(cfg, case.shape)
    except ConfigError as exc:
        return {"error": str(exc)}
    events: list[Any] = []
    in_limits = 0
    for i, e in enumerate(case.events):
        if i == case.scheduled:
            in_limits = len(lookup.fallbacks())
        if e[0] == "prefill":
            runs = lookup.prefill(tuple(PrefillChunk(q, c) for q, c in e[1]))
            events.append([list(r.bucket) for r in runs])
        else:
            run = lookup.decode(e[1], e[2])
            events.append([run.bucket[0], run.bucket[2]])
    return {"events": events, "prompt": [list(b) for b in lookup.lookup.prompt],
            "decode": [list(b) for b in lookup.lookup.decode], "scheduled_fallbacks": in_limits}  # fmt: skip


def theirs(cases: list[Case], tmp: Path, runner: Path) -> list[dict[str, Any]]:
    payload = [{"env": file_env(case.env, case.file_text, tmp, str(i)), "shape": dataclasses.asdict(case.shape),
                "events": case.events} for i, case in enumerate(cases)]  # fmt: skip
    return run_driver(payload, tmp, runner)


def compare(case: Case, mine: dict[str, Any], their: dict[str, Any]) -> dict[str, Any]:
    if "error" in mine or "driver_error" in their:
        same = "error" in mine and "driver_error" in their
        return {"case": case.name, "events": len(case.events), "agree": 0, "lists_equal": same, "same": same,
                "error": mine.get("error") or their.get("driver_error", "")[-300:]}  # fmt: skip
    agree = sum(1 for a, b in zip(mine["events"], their["events"], strict=True) if a == b)
    first_diff = next((i for i, (a, b) in enumerate(zip(mine["events"], their["events"], strict=True)) if a != b),
                      None)  # fmt: skip
    lists = mine["prompt"] == their["prompt"] and mine["decode"] == their["decode"]
    lookups = sum(len(e[1]) if e[0] == "prefill" else 1 for e in case.events)
    fallbacks = len(their["prompt"]) + len(their["decode"]) - len(ours_generated(case))
    scheduled = mine["scheduled_fallbacks"]
    return {"case": case.name, "env": case.env, "shape": dataclasses.asdict(case.shape), "events": len(case.events),
            "lookups": lookups, "agree": agree, "lists_equal": lists, "same": lists and agree == len(case.events),
            "fallbacks": fallbacks, "scheduled_fallbacks": scheduled,
            "first_difference": None if first_diff is None else {
                "event": case.events[first_diff], "ours": mine["events"][first_diff],
                "theirs": their["events"][first_diff]}}  # fmt: skip


def ours_generated(case: Case) -> list[Any]:
    cfg = config_from_env(case.env)
    if case.file_text is not None:
        cfg = dataclasses.replace(cfg, from_file="buckets.txt", file_text=case.file_text)
    lookup = RunnerLookup(cfg, case.shape)
    return [*lookup.lookup.prompt, *lookup.lookup.decode]


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    events = sum(r["events"] for r in rows)
    agree = sum(r["agree"] for r in rows)
    same = sum(1 for r in rows if r["same"])
    lines = [
        "# vllm-gaudi bucket lookup: our replay model vs vllm-gaudi's own code",
        "",
        f"vllm-gaudi commit {meta['commit']}, its code run on CPU with VLLM_USE_FAKE_HPU=1 (benchmarks/"
        "vllm_gaudi_driver.py): HPUBucketingManager's generate_prompt_buckets / generate_decode_buckets, then",
        "find_prompt_bucket / find_decode_bucket / generate_fallback_bucket, driven by the bodies of",
        "hpu_model_runner.py's",
        "_can_merge_prefill_contents, _bucketize_2d_prompt, _bucketize_merged_prompt and _get_prompt_bucketing_fn",
        f"with its BatchContents / merge_contents. Machine: {meta['machine']}.",
        f"Run {meta['date']}, {meta['seconds']:.0f} s;",
        f"{len(rows)} random configurations (seed {meta['seed']}): strategies exp / lin / pad, hand-written and",
        "planned bucket files, prefill batches up to 4, merged prefill; events from our scheduler over the embedded",
        "traffic plus adversarial lookups beyond every limit (they make vllm-gaudi generate fallback buckets).",
        "",
        f"**{agree} of {events} events agree ({agree / events:.2%}); {same} of {len(rows)} configurations agree on "
        "every "
        "event and on the final bucket lists (fallbacks appended).**",
        "",
        "Fallbacks: buckets generated in all (mostly by the adversarial lookups), and by the scheduler's events alone",
        "(traffic within the limits; a planned bucket file must have none).",
        "",
        "| case | events | lookups | fallbacks generated | of them by scheduled traffic | events agreeing "
        "| lists equal |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(f"| {r['case']} | {r['events']} | {r.get('lookups', '-')} | {r.get('fallbacks', '-')} | "
                     f"{r.get('scheduled_fallbacks', '-')} | {r['agree']} | "
                     f"{'yes' if r['lists_equal'] else '**NO**'} |")  # fmt: skip
    return "\n".join(lines) + "\n"


@dataclasses.dataclass(frozen=True)
class FigureCase:
    name: str
    model: str
    device: str
    tp: int
    shape: EngineShape
    env: dict[str, str]
    load: int | Arrivals
    traffic: str  # "default" | "small"
    requests: int
    #: Replay the bucket file ``serve --dry-run`` plans for the main job (ours) instead of a strategy.
    served_file: bool = False


def served_file() -> tuple[dict[str, str], str]:
    """The environment and the bucket file ``serve --dry-run`` exports for the main job (the buckets we plan)."""
    import contextlib
    import io

    from vllm_hpu_mm.cli.main import main as cli

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = cli(["serve", "--dry-run", "--json", "--plan-runtime", "vllm-gaudi"])
    if code != 0:
        raise RuntimeError(f"serve --dry-run exited {code}")
    report = json.loads(buf.getvalue())
    env = {k: v for k, v in report["environment"].items() if k.startswith("VLLM_") and "BUCKET" in k}
    env.pop("VLLM_BUCKETING_FROM_FILE", None)
    return env, next(iter(report["files"].values()))


def _small_requests() -> Traffic:
    """Many small text requests (the issue's case: 256 sequences, most of them short)."""
    rng = random.Random(7)
    counts: dict[Request, int] = {}
    for _ in range(3000):
        r = Request(None, rng.randint(30, 400), rng.randint(10, 160), 0)
        counts[r] = counts.get(r, 0) + 1
    return Traffic(counts, "many small text requests (30-400 tokens, 10-160 answers; seed 7)")


def figure_cases() -> list[FigureCase]:
    main_job = EngineShape(max_model_len=128000, max_num_seqs=256, max_num_batched_tokens=2048, block_size=128,
                           num_kv_blocks=9588)  # fmt: skip
    mid = EngineShape(max_model_len=32768, max_num_seqs=64, max_num_batched_tokens=4096, block_size=128,
                      num_kv_blocks=4000)  # fmt: skip
    small = EngineShape(max_model_len=8192, max_num_seqs=32, max_num_batched_tokens=2048, block_size=128,
                        num_kv_blocks=2000)  # fmt: skip
    q7, q32, q3 = "Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen2.5-VL-32B-Instruct", "Qwen/Qwen2.5-VL-3B-Instruct"
    exp, pad, lin = ({"VLLM_BUCKETING_STRATEGY": s} for s in ("exp", "pad", "lin"))
    return [
        FigureCase("7B Gaudi2, main job, exp, 1 at once", q7, "gaudi2", 1, main_job, exp, 1, "default", 60),
        FigureCase("7B Gaudi2, main job, exp, 64 at once", q7, "gaudi2", 1, main_job, exp, 64, "default", 300),
        FigureCase("7B Gaudi2, main job, pad, 256 at once", q7, "gaudi2", 1, main_job, pad, 256, "default", 600),
        FigureCase("7B Gaudi2, main job, exp, Poisson 4/s", q7, "gaudi2", 1, main_job, exp,
                   Arrivals(rate=4.0, seed=1), "default", 300),
        FigureCase("7B Gaudi2, 256 seqs, exp, many small requests at 200", q7, "gaudi2", 1, main_job, exp, 200,
                   "small", 800),
        FigureCase("32B Gaudi3 TP4, 32k, pad, profile 64/4/0/32", q32, "gaudi3", 4, mid, pad,
                   Arrivals(profile=((20.0, 64), (20.0, 4), (5.0, 0), (20.0, 32))), "default", 400),
        FigureCase("7B Gaudi2, main job, serve's planned file, 1 at once", q7, "gaudi2", 1, main_job, {}, 1,
                   "default", 60, True),
        FigureCase("7B Gaudi2, main job, serve's planned file, 64 at once", q7, "gaudi2", 1, main_job, {}, 64,
                   "default", 300, True),
        FigureCase("7B Gaudi2, main job, serve's planned file, 256 at once", q7, "gaudi2", 1, main_job, {}, 256,
                   "default", 600, True),
        FigureCase("7B Gaudi2, main job, serve's planned file, Poisson 4/s", q7, "gaudi2", 1, main_job, {},
                   Arrivals(rate=4.0, seed=1), "default", 300, True),
        FigureCase("3B Gaudi2, 8k, lin, 16 at once", q3, "gaudi2", 1, small, lin, 16, "default", 200),
        FigureCase("3B Gaudi2, 8k, lin, Poisson 20/s", q3, "gaudi2", 1, small, lin, Arrivals(rate=20.0, seed=2),
                   "default", 200),
    ]  # fmt: skip


class TheirLookup:
    """vllm-gaudi's own answers (from the driver) replayed in order as a ``TextLookup``: each prefill chunk its own
    forward in the bucket vllm-gaudi returned, each decode in its (batch, blocks) bucket; a shape larger than its
    bucket runs as is (vllm-gaudi pads a block list to its bucket, never cuts it)."""

    warmed: frozenset[tuple[str, tuple[int, int, int]]] = frozenset()
    max_prefill_batch = 1
    decode_block_cap = 0

    def __init__(self, answers: list[Any], block: int) -> None:
        self.answers = iter(answers)
        self.block = block

    def prefill(self, chunks: tuple[PrefillChunk, ...]) -> list[GraphRun]:
        buckets = next(self.answers)
        if len(buckets) != len(chunks):
            raise AssertionError(f"vllm-gaudi ran {len(buckets)} forwards for {len(chunks)} chunks")
        runs = []
        for (bs, q, c), chunk in zip(buckets, chunks, strict=True):
            ctx = math.ceil(chunk.context / self.block)
            runs.append(GraphRun("prompt", (bs, q, c), (bs, max(q, chunk.query), max(c, ctx)), 1, chunk.query, ctx))
        return runs

    def decode(self, sequences: int, blocks: int) -> GraphRun:
        bs, bb = next(self.answers)
        return GraphRun("decode", (bs, 1, bb), (bs, 1, max(bb, blocks)), sequences, sequences, blocks)

    def fallbacks(self) -> list[tuple[str, tuple[int, int, int]]]:
        return []


def figures_of(res: Any) -> dict[str, float]:
    t = res.times[0]
    out = {"prefill token efficiency": res.prefill_tokens.value, "prefill context efficiency":
           res.prefill_context.value, "decode slot efficiency": res.decode_slots.value,
           "decode block efficiency": res.decode_blocks.value, "padding over useful time": t.overhead}  # fmt: skip
    out.update({f"share of busy time padding {p}": t.share(p) for p in PHASES})
    out.update({"busy seconds with buckets": t.padded_s, "busy seconds real shapes": t.real_s,
                "added TTFT p50 s": t.added_ttft[0], "added TTFT p99 s": t.added_ttft[1],
                "added per-token p50 s": t.added_tpot[0], "added per-token p99 s": t.added_tpot[1]})  # fmt: skip
    return out


def _differs(name: str, a: float, b: float) -> float:
    """The disagreement of one figure: absolute for shares and efficiencies, relative for seconds."""
    if name.endswith(" s") or name.startswith("busy seconds"):
        return abs(a - b) / max(abs(b), 1e-12) if (a or b) else 0.0
    return abs(a - b)


def run_figures(args: argparse.Namespace) -> None:
    start = time.time()
    cases = figure_cases()
    prepared = []
    planned_env, planned_text = served_file()
    keep = tempfile.TemporaryDirectory()
    planned_path = Path(keep.name) / "planned_buckets.txt"
    planned_path.write_text(planned_text)
    for case in cases:
        if case.served_file:
            case = dataclasses.replace(case, env=dict(planned_env))
        traffic = _small_requests() if case.traffic == "small" else default_traffic()
        s = case.shape
        limits = s
        images = Images((1600, 3136, 4096, 6400, 7744, 9216, 12544))
        timer = timer_for(CATALOG[case.model], case.device, block_size=s.block_size, tensor_parallel_size=case.tp,
                          dtype_size=2, quantization=None, images=images)  # fmt: skip
        assert timer is not None
        conc = case.load if isinstance(case.load, int) else None
        arrivals = case.load if isinstance(case.load, Arrivals) else None
        runs = schedules(traffic, limits, images, concurrency=conc, arrivals=arrivals, requests=case.requests,
                         timer=timer)  # fmt: skip
        env = {**case.env, "VLLM_BUCKETING_FROM_FILE": str(planned_path)} if case.served_file else case.env
        mine = replay_model(model_from_env(env), s, runs, "ours", timer)
        events = trace_events(runs.traces[0], 10**9)
        prepared.append((case, runs, timer, mine, events))
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        runner = extract(args.mirror, args.commit, tmp)
        payload = [{"env": file_env(c.env, planned_text if c.served_file else None, tmp, str(i)),
                    "shape": dataclasses.asdict(c.shape), "events": ev}
                   for i, (c, _, _, _, ev) in enumerate(prepared)]  # fmt: skip
        their = run_driver(payload, tmp, runner)
    rows = []
    for (case, runs, timer, mine, events), t in zip(prepared, their, strict=True):
        theirs_res = replay(runs.traces, TheirLookup(t["events"], case.shape.block_size), "theirs",
                            balanced=runs.balanced, timer=timer)  # fmt: skip
        ours_f, theirs_f = figures_of(mine), figures_of(theirs_res)
        worst = max(_differs(k, ours_f[k], theirs_f[k]) for k in ours_f)
        trace = runs.traces[0]
        rows.append({"case": case.name, "load": runs.load, "events": len(events), "steps": trace.steps,
                     "requests": trace.completed, "drain_steps": _drain_steps(trace),
                     "ours": ours_f, "theirs": theirs_f, "worst_difference": worst,
                     "agree": worst <= 0.01})  # fmt: skip
    keep.cleanup()
    meta = {"commit": args.commit, "machine": args.machine, "seconds": time.time() - start,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}  # fmt: skip
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "vllm_gaudi_replay_agreement.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) +
                                                               "\n")  # fmt: skip
    text = render_figures(rows, meta)
    (RESULTS / "vllm_gaudi_replay_agreement.md").write_text(text)
    print("\n".join(text.splitlines()[:12]))
    sys.exit(0 if all(r["agree"] for r in rows) else 1)


def _drain_steps(trace: Trace) -> int:
    """Steps after the last request arrived (the drain)."""
    last = max((s.arrival for s in trace.spans), default=0)
    return max(0, trace.steps - last)


def render_figures(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    agree = sum(1 for r in rows if r["agree"])
    lines = [
        "# The replay's figures: ours against vllm-gaudi's own code, over the same whole schedule",
        "",
        f"vllm-gaudi commit {meta['commit']}, its bucketing and runner code run on CPU with VLLM_USE_FAKE_HPU=1",
        "(agreement/vllm_gaudi_driver.py), fed every event of each schedule in order, drain included; our side is",
        "`buckets replay`'s path (our runner model, in time). Both sides' figures come from the same pricing of the",
        f"buckets each returned (models/step_time.py). Machine: {meta['machine']}. Run {meta['date']},",
        f"{meta['seconds']:.0f} s. `benchmarks/agreement/vllm_gaudi_lookup_check.py --figures`.",
        "",
        f"**{agree} of {len(rows)} schedules agree on every figure within 0.01** (efficiencies and shares",
        "absolutely, seconds relatively).",
        "",
        "| case | load | events | steps (of them after the last arrival) | requests | worst difference "
        "| decode block eff. ours / theirs | padding over useful time ours / theirs "
        "| added per-token p99 ours / theirs |",
        "|---|---|---:|---:|---:|---:|---|---|---|",
    ]
    for r in rows:
        o, t = r["ours"], r["theirs"]
        lines.append(f"| {r['case']} | {r['load']} | {r['events']} | {r['steps']} ({r['drain_steps']}) | "
                     f"{r['requests']} | {r['worst_difference']:.2g} | {o['decode block efficiency']:.3f} / "
                     f"{t['decode block efficiency']:.3f} | {o['padding over useful time']:.2%} / "
                     f"{t['padding over useful time']:.2%} | {1000 * o['added per-token p99 s']:.2f} ms / "
                     f"{1000 * t['added per-token p99 s']:.2f} ms |")  # fmt: skip
    lines += ["", "Every figure compared (per schedule, in the json): the four efficiencies, padding over useful",
              "time and its split (prefill query, prefill context, decode, vision), busy seconds with buckets and",
              "with real shapes, added TTFT and per-token latency p50 and p99."]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mirror", type=Path, default=MIRROR)
    p.add_argument("--commit", default=VLLM_GAUDI_COMMIT)
    p.add_argument("--cases", type=int, default=40)
    p.add_argument("--seed", type=int, default=20261127)
    p.add_argument("--machine", default=MACHINE)
    p.add_argument("--figures", action="store_true", help="the replay's figures over whole schedules instead")
    args = p.parse_args()
    if args.figures:
        run_figures(args)
    start = time.time()
    cases = random_cases(args.cases, args.seed)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        runner = extract(args.mirror, args.commit, tmp)
        their = theirs(cases, tmp, runner)
    rows = [compare(c, ours(c), t) for c, t in zip(cases, their, strict=True)]
    meta = {"commit": args.commit, "machine": args.machine, "seed": args.seed, "seconds": time.time() - start,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}  # fmt: skip
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "vllm_gaudi_lookup_check.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    (RESULTS / "vllm_gaudi_lookup_check.md").write_text(render(rows, meta))
    bad = [r for r in rows if not r["same"]]
    print(next(line for line in render(rows, meta).splitlines() if line.startswith("**")))
    for r in bad:
        print("DIFF", r["case"], r.get("first_difference") or r.get("error"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

"""Our model of vllm-gaudi's bucket lookup (vllm_hpu_mm.runtimes.vllm_gaudi.runner / common.BucketLookup) against
vllm-gaudi's OWN code, lookup by lookup.

vllm-gaudi's source is extracted from the local mirror as benchmarks/vllm_gaudi_bucket_counts.py does, and
benchmarks/vllm_gaudi_driver.py runs, on CPU with VLLM_USE_FAKE_HPU=1, its ``HPUBucketingManager`` (generate_prompt_
buckets / generate_decode_buckets, then find_prompt_bucket / find_decode_bucket / generate_fallback_bucket) fed by
the bodies of its runner methods ``_can_merge_prefill_contents``, ``_bucketize_2d_prompt``,
``_bucketize_merged_prompt``, ``_get_prompt_bucketing_fn`` and its ``BatchContents`` / ``merge_contents`` (taken
from hpu_model_runner.py with ast), over the same lookup events ours replays. Configurations and events are random
(seeded): every strategy, bucket files (random ones and the ones ``serve`` plans), several prefill batch sizes,
merged prefill; events from our scheduler over real traffic and adversarial ones beyond every limit (fallbacks).

Agreement: for every event, the buckets each forward runs in; and at the end, the whole bucket lists (fallbacks
appended). Writes benchmarks/results/vllm_gaudi_lookup_check.{md,json}.

    PYTHONPATH=. .venv/bin/python benchmarks/vllm_gaudi_lookup_check.py [--cases N] [--seed S]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.vllm_gaudi_bucket_counts import MACHINE, MIRROR, RESULTS, extract, file_env, run_driver
from vllm_hpu_mm.buckets.text import TextLimits
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.replay.job import Images, plan_from_traces, schedules
from vllm_hpu_mm.replay.scheduler import DecodeRun, Limits, Trace
from vllm_hpu_mm.runtimes.base import EngineShape, PrefillChunk
from vllm_hpu_mm.runtimes.vllm_gaudi.config import VLLM_GAUDI_COMMIT, config_from_env
from vllm_hpu_mm.runtimes.vllm_gaudi.exponential import decode_block_ceiling
from vllm_hpu_mm.runtimes.vllm_gaudi.file_strategy import bucket_file
from vllm_hpu_mm.runtimes.vllm_gaudi.runner import RunnerLookup
from vllm_hpu_mm.traffic.default import default_traffic

Event = list[Any]


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    shape: EngineShape
    env: dict[str, str]
    file_text: str | None
    events: list[Event]
    #: The first this many events come from the scheduler (traffic within the limits); the rest are adversarial.
    scheduled: int = 0


def _events(trace: Trace, limit: int) -> list[Event]:
    out: list[Event] = []
    for e in trace.events:
        if isinstance(e, DecodeRun):
            out.append(["decode", e.sequences, e.blocks])
        else:
            out.append(["prefill", [[c.query, c.context] for c in e]])
        if len(out) >= limit:
            break
    return out


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
        limits = Limits(shape.max_num_seqs, shape.max_num_batched_tokens, shape.max_model_len, block,
                        shape.num_kv_blocks)  # fmt: skip
        runs = schedules(traffic, limits, Images((1600, 3136, 4096, 6400, 7744, 9216, 12544)),
                         concurrency=rng.choice([1, 4, 16, shape.max_num_seqs]), requests=300, seed=i)  # fmt: skip
        file_text = None
        if strategy == "planned":
            mnps = int(env.get("VLLM_PROMPT_BS_BUCKET_MAX", "1"))
            text_limits = TextLimits(shape.max_num_seqs, shape.max_num_batched_tokens, shape.max_model_len, block,
                                     decode_block_ceiling(shape), mnps)  # fmt: skip
            plan = plan_from_traces(runs, text_limits, rng.choice([20, 40, 80]))
            file_text = bucket_file(plan.prompt, plan.decode)
        elif strategy == "file":
            lines = ["(1, [128, 256, 512, 1024, 2048], [0, 2, 8, 32])", "(2, [128, 512], 0)",
                     f"([1, 2, 4, 8, 16], 1, [{block // 64 + 4}, 64, 256, 1024])"]  # fmt: skip
            file_text = "\n".join(rng.sample(lines, rng.randint(2, 3))) + "\n(1, 128, 0)\n(1, 1, 8)\n"
        scheduled = _events(runs.traces[0], 600)
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mirror", type=Path, default=MIRROR)
    p.add_argument("--commit", default=VLLM_GAUDI_COMMIT)
    p.add_argument("--cases", type=int, default=40)
    p.add_argument("--seed", type=int, default=20261127)
    p.add_argument("--machine", default=MACHINE)
    args = p.parse_args()
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

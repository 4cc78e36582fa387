"""Our model of each vllm-gaudi release line (vllm_hpu_mm.runtimes.vllm_gaudi.releases) against that release's OWN
code, tag by tag.

For every tag a line lists (``Release.tags``), vllm-gaudi's source at that tag is extracted from the local mirror and
run on CPU with ``VLLM_USE_FAKE_HPU=1`` by benchmarks/agreement/vllm_gaudi_driver.py, exactly as
benchmarks/agreement/vllm_gaudi_bucket_counts.py does for main; our model is configured for the line
(``config_from_env(env, release)``) and the prompt / decode bucket sets compared exactly (start-up failures must
agree too). The configurations are that benchmark's named ones and seeded random ones; for lines before v0.21.0
(no ``VLLM_BUCKETING_STRATEGY=exp|lin|pad``) a random configuration's strategy is spelled as those releases read
it (``VLLM_EXPONENTIAL_BUCKETING=false`` for lin; pad becomes exp), while the named ones keep theirs (a check that
both sides refuse it). Vision warm-up steps (modality, width, height, items) are compared as well and reported
apart, our model run for the line (``vision_warmup(..., release=)``). Before v0.26.0 the runner passes no per-step
item count (the driver records None): the items of such a step are what that tag's own ``_get_mm_dummy_batch``
batches, run here with stand-ins for the dummy-input helpers and vLLM's own ``MultiModalConfig``.

Writes benchmarks/agreement/results/vllm_gaudi_releases.{md,json}.

    PYTHONPATH=. .venv/bin/python -m benchmarks.agreement.vllm_gaudi_releases [--random N] [--seed S] [--tags T ...]
        [--append]

Lines a release refuses (``Release.not_modelled``) are skipped.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import types
from pathlib import Path
from typing import Any

from benchmarks.common import MACHINE, MIRROR, SHAPE_32K, Case, extract, named_cases, ours, random_cases, theirs
from vllm_hpu_mm.runtimes.vllm_gaudi.releases import LINES, Release

RESULTS = Path(__file__).resolve().parent / "results"

#: Vision-only cases for vision.py's model table, which changed at v0.26.0 (qwen3_5 lost its default buckets;
#: kimi_k25 and gemma4 were added as native-resolution towers): not in benchmarks/agreement/vllm_gaudi_bucket_counts.py.
TABLE_CASES = [
    Case(f"vision {m} (model table), image 2", SHAPE_32K, limit={"image": 2}, model_type=m)
    for m in ("qwen3_5", "kimi_k25", "gemma4")
]


def spelled_for(release: Release, case: Case) -> Case:
    """A random case's strategy as releases before v0.21.0 read it; spec decode only where the release has it."""
    if release.strategy_variable or "VLLM_BUCKETING_STRATEGY" not in case.env:
        return case
    env = dict(case.env)
    strategy = env.pop("VLLM_BUCKETING_STRATEGY")
    env = {k: v for k, v in env.items() if "_PAD_" not in k}
    if strategy == "lin" and "VLLM_EXPONENTIAL_BUCKETING" not in env:
        env["VLLM_EXPONENTIAL_BUCKETING"] = "false"
    return dataclasses.replace(case, env=env)


def _text(result: dict[str, Any]) -> Any:
    if "startup_error" in result:
        return "fails"
    return {p: ("fails" if f"{p}_error" in result else sorted(map(tuple, result.get(p, [])))) for p in
            ("prompt", "decode")}  # fmt: skip


def _count(result: dict[str, Any], phase: str) -> str:
    t = _text(result)
    return "fails" if t == "fails" or t[phase] == "fails" else str(len(t[phase]))


def _vision(result: dict[str, Any]) -> Any:
    return "fails" if "vision_error" in result else result.get("vision_steps")


def their_step_items(runner_source: str, limit: dict[str, Any] | None, modality: str) -> int:
    """The items the tag's own ``_get_mm_dummy_batch`` batches for a non-batch-based step given no count."""
    from vllm.config.multimodal import MultiModalConfig

    from benchmarks.common import add_dummy_options

    add_dummy_options()  # releases before v0.17.0rc1 ask for it
    node = next(n for n in ast.walk(ast.parse(runner_source))
                if isinstance(n, ast.FunctionDef) and n.name == "_get_mm_dummy_batch")  # fmt: skip
    code = "from __future__ import annotations\n" + textwrap.dedent(ast.get_source_segment(runner_source, node) or "")
    namespace: dict[str, Any] = {
        # the batch is the list of (modality, item) pairs it groups: its length is the step's item count
        "group_mm_kwargs_by_modality": lambda items, **_: iter([(None, None, len(items))]),
        # before v0.19.0 it asks vLLM's registry itself (@ 67e4a6b1)
        "ImageDummyOptions": lambda **_: None,
        "VideoDummyOptions": lambda **_: None,
        "MultiModalRegistry": lambda: types.SimpleNamespace(
            get_dummy_mm_inputs=lambda _config, mm_counts: {"mm_kwargs": {m: ["item"] for m in mm_counts}}
        ),
        # v0.14.1 asks vLLM's profiler for the dummy inputs
        "MULTIMODAL_REGISTRY": types.SimpleNamespace(create_processor=lambda _config: None),
        "MultiModalProfiler": lambda _processor: types.SimpleNamespace(
            _get_dummy_mm_inputs=lambda seq_len, mm_counts, mm_options: {"mm_kwargs": {m: ["item"] for m in mm_counts}}
        ),
    }
    exec(compile(code, "hpu_model_runner.py", "exec"), namespace)
    kwargs: dict[str, Any] = {} if limit is None else {"limit_per_prompt": limit}  # vLLM parses the limit
    mm_config = MultiModalConfig(**kwargs)
    model = types.SimpleNamespace(vision_bucket_manager=types.SimpleNamespace(is_batch_based=False))
    runner = types.SimpleNamespace(
        mm_budget=object(), device="cpu", pin_memory=False, get_model=lambda: model, model_config_copy=None,
        model_config=types.SimpleNamespace(get_multimodal_config=lambda: mm_config),
        _get_dummy_mm_inputs_with_options=lambda modality, **_: {"mm_kwargs": {modality: ["item"]}},
    )  # fmt: skip
    items: int = namespace["_get_mm_dummy_batch"](runner, modality, image_args=None, width=1, height=1)
    return items


def _fill_items(result: dict[str, Any], runner_source: str, case: Case) -> dict[str, Any]:
    steps = result.get("vision_steps")
    if not steps or all(s[3] is not None for s in steps):
        return result
    filled = [[m, w, h, their_step_items(runner_source, case.limit, m) if n is None else n] for m, w, h, n in steps]
    return {**result, "vision_steps": filled}


def run_tag(release: Release, tag: str, cases: list[Case]) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="vllm-gaudi-") as tmp_name:
        tmp = Path(tmp_name)
        runner = extract(MIRROR, tag, tmp)
        their = theirs(cases, tmp, runner)
        runner_source = runner.read_text()
    rows = []
    for case, t in zip(cases, their, strict=True):
        if "driver_error" in t:
            raise RuntimeError(f"{tag} {case.name}: the driver failed:\n{t['driver_error']}")
        t = _fill_items(t, runner_source, case)
        o = ours(case, release)
        rows.append({
            "case": case.name, "env": case.env, "shape": dataclasses.asdict(case.shape), "limit": case.limit,
            "model_type": case.model_type, "bucket_file": case.file_text is not None,
            "ours": {"prompt": _count(o, "prompt"), "decode": _count(o, "decode")},
            "theirs": {"prompt": _count(t, "prompt"), "decode": _count(t, "decode")},
            "their_errors": {k: v for k, v in t.items() if k.endswith("error")},
            "text_equal": _text(o) == _text(t),
            "vision_equal": _vision(o) == _vision(t),
        })  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, default=20, help="random configurations per tag (20)")
    parser.add_argument("--seed", type=int, default=20261127, help="seed of the random configurations")
    parser.add_argument("--tags", nargs="*", help="only these tags (default: every tag of every line)")
    parser.add_argument("--machine", default=MACHINE, help="machine description for the results")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--append", action="store_true",
                        help="merge these tags into the results: the JSON's entries for them are replaced, the other "
                             "tags' kept; the .md keeps its text and gains a section for this run")  # fmt: skip
    args = parser.parse_args()
    start = time.perf_counter()
    base = [c for c in named_cases() if not c.env.get("VLLM_MULTIMODAL_BUCKETS", "").startswith("None")]
    base += TABLE_CASES
    rnd = random_cases(args.random, args.seed)
    report: list[dict[str, Any]] = []
    for release in LINES:
        if release.not_modelled:  # refused by release_for: nothing of ours to compare
            continue
        for tag in release.tags:
            if args.tags and tag not in args.tags and tag[:8] not in args.tags:
                continue
            cases = base + [spelled_for(release, c) for c in rnd]
            rows = run_tag(release, tag, cases)
            rev = ["git", "-C", str(MIRROR), "rev-parse", f"{tag}^{{commit}}"]
            commit = subprocess.run(rev, check=True, capture_output=True, text=True).stdout.strip()
            text_ok = sum(r["text_equal"] for r in rows)
            vision_ok = sum(r["vision_equal"] for r in rows)
            print(f"{release.name:28} {tag:14} {commit[:8]} text {text_ok}/{len(rows)} vision {vision_ok}/{len(rows)}",
                  flush=True)  # fmt: skip
            report.append({"line": release.name, "tag": tag, "commit": commit, "rows": rows})
    meta = {"machine": args.machine, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "seconds": time.perf_counter() - start, "loadavg": os.getloadavg(), "random": args.random,
            "seed": args.seed}  # fmt: skip
    text = render(report, meta)
    print(text)
    if args.append and not args.no_write:
        append(report, meta, text)
    elif not args.no_write:
        (RESULTS / "vllm_gaudi_releases.md").write_text(text)
        (RESULTS / "vllm_gaudi_releases.json").write_text(json.dumps({"meta": meta, "tags": report}, indent=1))
    return 0 if all(r["text_equal"] for t in report for r in t["rows"]) else 1


def append(report: list[dict[str, Any]], meta: dict[str, Any], text: str) -> None:
    """--append: this run's tags replace theirs in the JSON (each entry keeps the meta of the run that made it); the
    .md gains this run's table and disagreements under a heading of its own."""
    path = RESULTS / "vllm_gaudi_releases.json"
    old = json.loads(path.read_text())
    ran = {t["tag"] for t in report}
    kept = [t for t in old["tags"] if t["tag"] not in ran]
    added = [{**t, "meta": meta} for t in report]
    path.write_text(json.dumps({"meta": old["meta"], "tags": kept + added}, indent=1))
    body = text.split("\n", 1)[1].lstrip("\n")  # without the title
    md = RESULTS / "vllm_gaudi_releases.md"
    tags = ", ".join(t["tag"] for t in report)
    md.write_text(md.read_text().rstrip("\n") + f"\n\n## Added: {tags}\n\n{body}")


def render(report: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# vllm-gaudi release lines: our model vs each release's own bucketing code",
        "",
        f"Machine: {meta['machine']}. Run {meta['date']}, {meta['seconds']:.0f} s (load average "
        f"{meta['loadavg'][0]:.1f}). Each tag's code from the local mirror, run on CPU with VLLM_USE_FAKE_HPU=1",
        "(benchmarks/agreement/vllm_gaudi_driver.py); nothing ran on Gaudi. Per tag: the named configurations of",
        f"agreement/vllm_gaudi_bucket_counts.py, {len(TABLE_CASES)} model-table vision cases and {meta['random']} "
        f"random ones (seed {meta['seed']}).",
        '"text" = prompt and decode bucket sets equal (or both fail at start-up); "vision" = equal multimodal',
        "warm-up step sequences (modality, width, height, items; our vision model run for the line).",
        "",
        "| line | tag | commit | text agree | vision agree |",
        "|---|---|---|---|---|",
    ]
    for t in report:
        n = len(t["rows"])
        lines.append(f"| {t['line']} | {t['tag']} | {t['commit'][:8]} | {sum(r['text_equal'] for r in t['rows'])}/{n} "
                     f"| {sum(r['vision_equal'] for r in t['rows'])}/{n} |")  # fmt: skip
    lines.append("")
    for t in report:
        bad = [r for r in t["rows"] if not r["text_equal"]]
        if bad:
            lines += [f"Text disagreements at {t['tag']}:", ""]
            lines += [f"- {r['case']}: ours {r['ours']} theirs {r['theirs']} {r['their_errors']}" for r in bad]
            lines.append("")
    for t in report:
        bad = [r["case"] for r in t["rows"] if not r["vision_equal"]]
        if bad:
            lines += [f"Vision disagreements at {t['tag']}: {'; '.join(bad)}", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

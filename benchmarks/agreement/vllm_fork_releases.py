"""Our model of each vllm-fork release line (vllm_hpu_mm.runtimes.vllm_fork.releases) against that release's OWN
bucketing code, tag by tag, on CPU.

For every tag a line lists (``Release.tags``) the bucketing code is taken from the local mirrors: before 1.19 the
fork's in-tree ``vllm/worker/habana_model_runner.py`` (its module-level functions and the runner's
``_setup_buckets``, compiled from the file with ``ast``, run on a stand-in runner holding the engine sizes), from 1.19
the vllm-hpu-extension commit the tag's requirements pin (its ``bucketing`` module files imported as they are, with
stand-ins for the extension's logger, kernels and, at 8211e0b, ``runtime.get_config`` built from the extension's
own ``config.py`` / ``features.py`` user flags). Each tag runs in a subprocess of this file (``--driver``), the
runner's calls made as its ``hpu_model_runner`` / ``hpu_worker`` make them (max_num_prefill_seqs = max_num_seqs,
the decode maximum = the KV blocks). Prompt and decode bucket sets are compared exactly (1.17's decode buckets,
(batch, sequence length), are compared as (batch, batch x blocks per length) on both sides); a start-up failure
must fail on both sides. Configurations: named ones and seeded random ones (shapes and ``VLLM_*_BUCKET_*`` values),
and for the 1.21.x lines a grid of their opt-in exponential strategy (VLLM_EXPONENTIAL_BUCKETING=true: shapes x
``VLLM_CONTIGUOUS_PA`` x ``VLLM_*_BUCKET_LIMIT`` / ignored range values, :func:`exponential_grid`).

    PYTHONPATH=. .venv/bin/python benchmarks/agreement/vllm_fork_releases.py [--random N] [--seed S] [--no-grid]

Writes benchmarks/agreement/results/vllm_fork_releases.{md,json}.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes.vllm_fork import model_from_env
from vllm_hpu_mm.runtimes.vllm_fork.releases import LINES, Release

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"
FORK = Path("/work/.mirror/HabanaAI+vllm-fork/repo")
EXTENSION = Path("/work/.mirror/HabanaAI+vllm-hpu-extension/repo")
MACHINE = "this 2-core CPU dev machine; nothing ran on Gaudi"
BUCKET_VARS = tuple(f"VLLM_{p}_BUCKET_{q}" for p in ("PROMPT_BS", "PROMPT_SEQ", "DECODE_BS", "DECODE_BLOCK",
                                                      "DECODE_SEQ") for q in ("MIN", "STEP", "MAX"))  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    shape: EngineShape
    env: dict[str, str]


def _shape(mml: int, seqs: int, tokens: int, block: int, kv: int) -> EngineShape:
    return EngineShape(max_model_len=mml, max_num_seqs=seqs, max_num_batched_tokens=tokens, block_size=block,
                       num_kv_blocks=kv)  # fmt: skip


def named_cases() -> list[Case]:
    main = _shape(32768, 64, 32768, 128, 8781)
    return [
        Case("main job 32k, 64 seqs, 8781 blocks", main, {}),
        Case("4k, 256 seqs, 8192 tokens", _shape(4096, 256, 8192, 128, 2000), {}),
        Case("128k long context, 16 seqs", _shape(131072, 16, 131072, 128, 4096), {}),
        Case("small 2k, 4 seqs, 64 blocks", _shape(2048, 4, 2048, 128, 64), {}),
        Case("block 16, 4k, 32 seqs", _shape(4096, 32, 4096, 16, 1500), {}),
        Case("linear (VLLM_EXPONENTIAL_BUCKETING=false)", main, {"VLLM_EXPONENTIAL_BUCKETING": "false"}),
        Case("prompt seq max 2048, linear", main, {"VLLM_PROMPT_SEQ_BUCKET_MAX": "2048",
                                                    "VLLM_EXPONENTIAL_BUCKETING": "0"}),
        Case("decode block max 256", main, {"VLLM_DECODE_BLOCK_BUCKET_MAX": "256", "VLLM_EXPONENTIAL_BUCKETING": "no"}),
        Case("no contiguous PA", main, {"VLLM_CONTIGUOUS_PA": "false"}),
        Case("no contiguous PA, linear", main, {"VLLM_CONTIGUOUS_PA": "false", "VLLM_EXPONENTIAL_BUCKETING": "off"}),
        Case("decode bs min 4 step 16", main, {"VLLM_DECODE_BS_BUCKET_MIN": "4", "VLLM_DECODE_BS_BUCKET_STEP": "16"}),
        Case("sliding-window FusedSDPA, 128k", _shape(131072, 16, 131072, 128, 4096),
             {"PT_HPU_SDPA_QKV_SLICE_MODE_FWD": "true", "VLLM_FUSEDSDPA_SLIDE_THLD": "16384"}),
        Case("bad token (fails)", main, {"VLLM_PROMPT_BS_BUCKET_MAX": "x"}),
        Case("bad limit token", main, {"VLLM_PROMPT_SEQ_BUCKET_LIMIT": "1.5"}),
        Case("min above max, linear (fails)", main, {"VLLM_PROMPT_SEQ_BUCKET_MIN": "4096",
                                                     "VLLM_PROMPT_SEQ_BUCKET_MAX": "1024",
                                                     "VLLM_EXPONENTIAL_BUCKETING": "false"}),
        Case("int() spelling ' 16 ', '+32', '1_024'", main, {"VLLM_DECODE_BS_BUCKET_STEP": " 16 ",
                                                            "VLLM_PROMPT_BS_BUCKET_STEP": "+32",
                                                            "VLLM_PROMPT_SEQ_BUCKET_MAX": "1_024",
                                                            "VLLM_EXPONENTIAL_BUCKETING": "false"}),
    ]  # fmt: skip


def random_cases(n: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        block = rng.choice([16, 32, 64, 128, 128, 128])
        mml = rng.choice([1024, 2048, 4096, 8192, 16384, 32768, 65536])
        seqs = rng.choice([1, 2, 3, 8, 16, 24, 32, 64, 100, 128, 256])
        tokens = rng.choice([mml, 2048, 4096, 8192, 16384])
        kv = rng.randint(max(8, block // 8), 6000)
        env: dict[str, str] = {}
        for name in rng.sample(BUCKET_VARS, rng.randint(0, 4)):
            if name.endswith("_MIN"):
                value = rng.choice([1, 2, 4, 8, block, 2 * block]) if "_SEQ_" in name or "_BS_" in name else \
                    rng.choice([1, 16, 32, 64, 128])  # fmt: skip
            elif name.endswith("_STEP"):
                value = rng.choice([block, 256, 512]) if "_SEQ_" in name else rng.choice([8, 16, 32, 64, 128, 256]) \
                    if "_BLOCK_" in name else rng.choice([1, 2, 4, 8, 16, 32, 64, 128])  # fmt: skip
            else:
                value = (
                    rng.choice([512, 1024, 2048, 4096, 8192])
                    if "_SEQ_" in name
                    else rng.choice([64, 256, 1024, 4096])
                    if "_BLOCK_" in name
                    else rng.choice([1, 4, 16, 64, 128, 256])
                )
            env[name] = str(value)
        for var, values in (("VLLM_EXPONENTIAL_BUCKETING", ["false", "true", "0", "1", "False", "yes"]),
                            ("VLLM_CONTIGUOUS_PA", ["false", "true", "True", "0", "1"])):  # fmt: skip
            if rng.random() < 0.4:
                env[var] = rng.choice(values)
        out.append(Case(f"random {i}", _shape(mml, seqs, tokens, block, kv), env))
    return out


#: The 1.21.x exponential grid's extra settings: counts read, range values it does not read, bad counts (fail).
_EXP_ENVS: tuple[dict[str, str], ...] = (
    {},
    {"VLLM_CONTIGUOUS_PA": "false"},
    {"VLLM_PROMPT_SEQ_BUCKET_LIMIT": "4", "VLLM_DECODE_BLOCK_BUCKET_LIMIT": "30"},
    {"VLLM_PROMPT_BS_BUCKET_LIMIT": "1", "VLLM_DECODE_BS_BUCKET_LIMIT": "2", "VLLM_CONTIGUOUS_PA": "false"},
    {"VLLM_PROMPT_SEQ_BUCKET_LIMIT": "200", "VLLM_DECODE_BS_BUCKET_LIMIT": " 9 "},
    {"VLLM_PROMPT_SEQ_BUCKET_MAX": "1024", "VLLM_DECODE_BLOCK_BUCKET_STEP": "x", "VLLM_PROMPT_BS_BUCKET_MIN": "4"},
    {"VLLM_PROMPT_SEQ_BUCKET_LIMIT": "0"},
    {"VLLM_DECODE_BLOCK_BUCKET_LIMIT": "1.5"},
)


def exponential_grid() -> list[Case]:
    """The 1.21.x exponential strategy over max_model_len x max_num_seqs x token budget x block size x KV blocks,
    each with one of :data:`_EXP_ENVS` in turn (a full product would be 8x longer on 2 cores)."""
    out = []
    shapes = [(mml, seqs, tokens, block, kv)
              for mml in (1000, 2048, 4096, 32768, 131072) for seqs in (1, 3, 16, 64, 256)
              for tokens in sorted({mml, 2048, 8192}) for block in (16, 128) for kv in (40, 1500, 8781)]  # fmt: skip
    for i, (mml, seqs, tokens, block, kv) in enumerate(shapes):
        extra = _EXP_ENVS[i % len(_EXP_ENVS)]
        env = {"VLLM_EXPONENTIAL_BUCKETING": "true" if i % 5 else "True", **extra}
        out.append(Case(f"exp grid {mml}/{seqs}/{tokens}/b{block}/kv{kv} {extra or ''}",
                        _shape(mml, seqs, tokens, block, kv), env))  # fmt: skip
    return out


def cases_for(release: Release, every: list[Case], grid: list[Case]) -> list[Case]:
    """Every line takes the named and random cases; the 1.21.x lines the exponential grid as well."""
    return every + grid if release.generation in ("ext1210", "ext1212") else every


# ---------------------------------------------------------------- our side


def _norm(prompt: Any, decode: Any, block: int, by_seq: bool) -> dict[str, Any]:
    p = sorted({(int(t[0]), int(t[1]), int(t[2]) if len(t) > 2 else 0) for t in prompt})
    d = sorted({(int(t[0]), int(t[-1])) for t in decode})
    if by_seq:  # (batch, sequence length) -> (batch, batch x blocks per length)
        d = sorted({(b, b * -(-s // block)) for b, s in d})
    return {"prompt": p, "decode": d}


def ours(case: Case, release: Release) -> Any:
    try:
        shapes = model_from_env(case.env, None, release.spec).text_shapes(case.shape)
    except ConfigError as exc:
        return {"fails": str(exc)}
    return json.loads(json.dumps(_norm(shapes.prefill, shapes.decode, case.shape.block_size, False)))  # as theirs


# ---------------------------------------------------------------- their side (subprocess per tag)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def extension_pin(tag: str) -> str:
    for path in ("requirements/hpu.txt", "requirements-hpu.txt"):
        try:
            text = _git(FORK, "show", f"{tag}:{path}")
        except subprocess.CalledProcessError:
            continue
        for line in text.splitlines():
            if "vllm-hpu-extension" in line and "@" in line:
                return line.rsplit("@", 1)[1].strip()
    raise RuntimeError(f"{tag}: no vllm-hpu-extension pin")


def extract(release: Release, tag: str, tmp: Path) -> str:
    """Their code under ``tmp``; the commit read (fork tag or extension pin)."""
    if release.extension is None:
        (tmp / "runner.py").write_text(_git(FORK, "show", f"{tag}:vllm/worker/habana_model_runner.py"))
        return _git(FORK, "rev-parse", f"{tag}^{{commit}}").strip()
    pin = extension_pin(tag)
    pkg = tmp / "vllm_hpu_extension"
    files = [f for f in _git(EXTENSION, "ls-tree", "-r", "--name-only", pin).split() if
             f.startswith("vllm_hpu_extension/bucketing") or f in ("vllm_hpu_extension/config.py",
                                                                     "vllm_hpu_extension/features.py")]  # fmt: skip
    for f in files:
        (tmp / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp / f).write_text(_git(EXTENSION, "show", f"{pin}:{f}"))
    (pkg / "__init__.py").write_text("")
    (pkg / "logger.py").write_text("import logging\n\ndef logger():\n    return logging.getLogger('ext')\n")
    (pkg / "kernels.py").write_text(
        "def fsdpa():\n    return None\n\ndef block_softmax_adjustment():\n    return None\n"
    )
    # runtime.get_config: the user flags as features.py lists them, parsed (eagerly, as get_config does) by the
    # extension's own config.py; the V0 defaults the fork runs with (no prefix caching, no merged prefill)
    (pkg / "runtime.py").write_text(
        "from vllm_hpu_extension.config import Config, Env, Value, Disabled, boolean\n"
        "def get_config():\n"
        "    from vllm_hpu_extension.features import get_user_flags\n"
        "    flags = get_user_flags()\n"
        "    flags['VLLM_CONTIGUOUS_PA'] = Env('VLLM_CONTIGUOUS_PA', boolean)\n"
        "    c = Config(flags, merged_prefill=False, prefix_caching=False,\n"
        "               use_contiguous_pa=Value('use_contiguous_pa', Disabled('prefix_caching'),\n"
        "                                       env_var='VLLM_CONTIGUOUS_PA'))\n"
        "    c.get_all()\n"
        "    return c\n"
    )
    return _git(EXTENSION, "rev-parse", pin).strip()


def _in_tree(source: str) -> dict[str, Any]:
    """The runner file's module-level functions and ``_setup_buckets``, compiled on their own (nothing else of the
    file is imported: it needs torch and the Habana bridge)."""
    import itertools
    import logging
    import math
    import operator

    tree = ast.parse(source)
    keep: list[ast.stmt] = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            keep += [f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "_setup_buckets"]
    ns: dict[str, Any] = {"itertools": itertools, "operator": operator, "os": os, "math": math, "Set": set,
                          "Any": Any, "Tuple": tuple, "List": list, "logger": logging.getLogger("fork")}  # fmt: skip
    exec(compile(ast.Module(body=keep, type_ignores=[]), "habana_model_runner.py", "exec"), ns)
    return ns


def _run_one(generation: str, case: dict[str, Any], tmp: Path) -> Any:
    import types

    shape = case["shape"]
    seqs, block, tokens, mml, kv = (shape[k] for k in ("max_num_seqs", "block_size", "max_num_batched_tokens",
                                                         "max_model_len", "num_kv_blocks"))  # fmt: skip
    if generation in ("intree2024", "intree118"):
        ns = _in_tree((tmp / "runner.py").read_text())
        runner = types.SimpleNamespace(max_num_seqs=seqs, block_size=block, max_num_batched_tokens=tokens,
                                       lora_config=None)  # fmt: skip
        ns["_setup_buckets"](runner)
        if generation == "intree2024":
            return runner.prompt_buckets, runner.decode_buckets
        prompt, _ = ns["generate_prompt_buckets"](runner.prompt_bs_bucket_cfg, runner.prompt_seq_bucket_cfg, tokens)
        return prompt, ns["generate_decode_buckets"](runner.decode_bs_bucket_cfg, runner.decode_block_bucket_cfg, kv)
    for name in [m for m in sys.modules if m.startswith("vllm_hpu_extension")]:
        del sys.modules[name]  # fresh singletons and module state per case
    if generation == "ext122":
        from vllm_hpu_extension.bucketing.common import HPUBucketingManager  # type: ignore[import-not-found,unused-ignore]

        HPUBucketingManager._instance = None
        manager = HPUBucketingManager()
        manager.initialize(max_num_seqs=seqs, max_num_prefill_seqs=seqs, block_size=block,
                           max_num_batched_tokens=tokens, max_model_len=mml)  # fmt: skip
        manager.num_hpu_blocks = kv
        manager.generate_prompt_buckets()
        manager.generate_decode_buckets()
        return manager.prompt_buckets, manager.decode_buckets
    if generation == "ext119":
        from vllm_hpu_extension.bucketing import HPUBucketingContext  # type: ignore[import-not-found,unused-ignore]

        ctx = HPUBucketingContext(seqs, seqs, block, tokens)
        ctx.generate_prompt_buckets()
    else:
        from vllm_hpu_extension.bucketing.common import get_bucketing_context  # type: ignore[import-not-found,unused-ignore]

        ctx = get_bucketing_context()(seqs, seqs, block, tokens, False, mml)
    ctx.num_hpu_blocks = kv
    ctx.generate_decode_buckets(kv)
    return ctx.prompt_buckets, ctx.decode_buckets


def driver() -> int:
    """``--driver GENERATION TMP``: run their code on each case read from stdin (JSON), one JSON line per case."""
    import logging

    logging.disable(logging.CRITICAL)
    generation, tmp = sys.argv[2], Path(sys.argv[3])
    sys.path.insert(0, str(tmp))
    out = []
    real, sys.stdout = sys.stdout, sys.stderr  # their code prints its bucket lists
    for case in json.load(sys.stdin):
        for k in [k for k in os.environ if k.startswith(("VLLM_", "PT_HPU_"))]:
            del os.environ[k]
        os.environ.update(case["env"])
        try:
            prompt, decode = _run_one(generation, case, tmp)
            out.append(_norm(prompt, decode, case["shape"]["block_size"], generation == "intree2024"))
        except Exception as exc:  # their start-up failure, whatever it raises
            out.append({"fails": f"{type(exc).__name__}: {exc}"[:300]})
    json.dump(out, real)
    return 0


def theirs(release: Release, tag: str, cases: list[Case]) -> tuple[str, list[Any]]:
    with tempfile.TemporaryDirectory(prefix="vllm-fork-") as name:
        commit = extract(release, tag, Path(name))
        payload = json.dumps([{"env": c.env, "shape": dataclasses.asdict(c.shape)} for c in cases])
        done = subprocess.run([sys.executable, __file__, "--driver", release.generation, name], input=payload,
                              capture_output=True, text=True, check=True, timeout=1800)  # fmt: skip
    return commit, json.loads(done.stdout)


def _agree(o: Any, t: Any) -> bool:
    return ("fails" in o and "fails" in t) or o == t


def _count(r: Any, phase: str) -> str:
    return "fails" if "fails" in r else str(len(r[phase]))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--driver":
        return driver()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, default=60, help="random configurations per tag (60)")
    parser.add_argument("--seed", type=int, default=20261128, help="seed of the random configurations")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--no-grid", action="store_true", help="leave out the 1.21.x exponential grid")
    args = parser.parse_args()
    start = time.perf_counter()
    every = named_cases() + random_cases(args.random, args.seed)
    grid = [] if args.no_grid else exponential_grid()
    report: list[dict[str, Any]] = []
    for release in LINES:
        cases = cases_for(release, every, grid)
        for tag in release.tags:
            commit, their = theirs(release, tag, cases)
            rows = []
            for case, t in zip(cases, their, strict=True):
                o = ours(case, release)
                rows.append({"case": case.name, "env": case.env, "shape": dataclasses.asdict(case.shape),
                             "ours": {p: _count(o, p) for p in ("prompt", "decode")},
                             "theirs": {p: _count(t, p) for p in ("prompt", "decode")},
                             "their_error": t.get("fails"), "our_error": o.get("fails"),
                             "equal": _agree(o, t)})  # fmt: skip
            ok = sum(r["equal"] for r in rows)
            print(f"{release.name:52} {tag:28} {commit[:9]} {ok}/{len(rows)}", flush=True)
            exp = [r for r in rows if _picks_exp_121(release, r["env"])]
            report.append({"line": release.name, "tag": tag, "code": commit, "in_tree": release.extension is None,
                           "exponential": [len(exp), sum(r["equal"] for r in exp)], "rows": rows})  # fmt: skip
    meta = {"machine": MACHINE, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "seconds": time.perf_counter() - start, "loadavg": os.getloadavg(), "random": args.random,
            "seed": args.seed, "grid": len(grid), "commit": _model_commit()}  # fmt: skip
    text = render(report, meta)
    print(text)
    if not args.no_write:
        (RESULTS / "vllm_fork_releases.md").write_text(text)
        (RESULTS / "vllm_fork_releases.json").write_text(
            json.dumps({"meta": meta, "tags": report}, separators=(",", ":")) + "\n"
        )
    return 0 if all(r["equal"] for t in report for r in t["rows"]) else 1


def _model_commit() -> str:
    """This checkout's commit (the model checked), with "+dirty" where its tracked files differ from it."""
    repo = ROOT.parents[1]
    head = _git(repo, "rev-parse", "--short=8", "HEAD").strip()
    return head + ("+dirty" if _git(repo, "status", "--porcelain", "--untracked-files=no").strip() else "")


def _picks_exp_121(release: Release, env: dict[str, str]) -> bool:
    raw = env.get("VLLM_EXPONENTIAL_BUCKETING")
    return release.generation in ("ext1210", "ext1212") and raw is not None and raw.lower() == "true"


def render(report: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# vllm-fork release lines: our model vs each release's own bucketing code",
        "",
        f"Machine: {meta['machine']}. Model at commit {meta.get('commit', '?')}. Run {meta['date']}, "
        f"{meta['seconds']:.0f} s (load average {meta['loadavg'][0]:.1f}).",
        "Their code from the local mirrors of HabanaAI/vllm-fork and HabanaAI/vllm-hpu-extension, run on CPU",
        "(agreement/vllm_fork_releases.py --driver); nothing ran on Gaudi.",
        f"Per tag: {len(named_cases())} named configurations and {meta['random']} random ones (seed {meta['seed']});",
        f"the 1.21.x lines also {meta['grid']} cases of their opt-in exponential strategy (exponential_grid: shapes x",
        "VLLM_CONTIGUOUS_PA x VLLM_*_BUCKET_LIMIT, range values it does not read, bad counts). Agree = prompt and",
        "decode bucket lists equal (as sorted sets), or both fail. Last column: 1.21.x cases picking the exponential",
        "strategy (VLLM_EXPONENTIAL_BUCKETING=true), agreeing / compared.",
        "",
        "| line | tag | code read | agree | of which both fail | 1.21 exponential agree |",
        "|---|---|---|---|---|---|",
    ]
    for t in report:
        n = len(t["rows"])
        where = "fork in-tree" if t["in_tree"] else "extension"
        lines.append(f"| {t['line']} | {t['tag']} | {where} {t['code'][:9]} | {sum(r['equal'] for r in t['rows'])}/{n}"
                     f" | {sum(bool(r['their_error'] and r['our_error']) for r in t['rows'])}"
                     f" | {t['exponential'][1]}/{t['exponential'][0]} |")  # fmt: skip
    lines.append("")
    for t in report:
        bad = [r for r in t["rows"] if not r["equal"]]
        if bad:
            lines += [f"Disagreements at {t['tag']}:", ""]
            lines += [f"- {r['case']}: ours {r['ours']} {r['our_error'] or ''} theirs {r['theirs']} "
                      f"{r['their_error'] or ''}" for r in bad]  # fmt: skip
            lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

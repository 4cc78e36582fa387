"""Helpers the benchmark scripts share; no script imports another script, only this module and the package.

Sections, each named for the scripts that use it:

- results and machines: writing a result pair (``.md`` + ``.json``), the machine's load and versions;
- vllm-gaudi's own code: its source extracted from the local mirror, the configurations the agreement checks run,
  our model's answer for one, and the child process (``agreement/vllm_gaudi_driver.py``) that runs theirs on CPU;
- ``serve --dry-run --json`` in this process (the planner evaluations and the scheduler check);
- traffic from public traces (Azure LLM trace, Mooncake prefix hits, the image-size sets): the embedded default
  traffic (``fits/traffic_sources.py``) and the planner evaluations' held-out traffic;
- the stock vLLM CPU server with or without our plugin, and the pre-aligned image requests the CPU runs send;
- the OOM doctor: fitting and cross-validating its rules, and the scorer's tables of what each log's writer reads;
- public Gaudi logs' bucket counts against the release model that produced them.

Importing it loads neither vLLM nor torch (the vllm-gaudi driver imports it in a child process before vLLM is set
up; tests/test_benchmarks_layout.py checks): those imports sit inside the functions that need them.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import functools
import io
import itertools
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.envs import process_environ
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.logs.doctor.decide import REFUSAL_FRAMES, Diagnosis, Judgement, Rules, Source, frame_tokens, judge
from vllm_hpu_mm.logs.doctor.scan import LogFeatures
from vllm_hpu_mm.replay.scheduler import DecodeRun, Trace
from vllm_hpu_mm.runtimes.vllm_fork.linear import warmup_range
from vllm_hpu_mm.runtimes.vllm_gaudi.common import check_startup, decode_buckets, prompt_buckets
from vllm_hpu_mm.runtimes.vllm_gaudi.config import BucketingConfig, config_from_env
from vllm_hpu_mm.runtimes.vllm_gaudi.file_strategy import bucket_file
from vllm_hpu_mm.runtimes.vllm_gaudi.releases import MAIN, Release
from vllm_hpu_mm.runtimes.vllm_gaudi.vision import vision_buckets_from_env, vision_warmup
from vllm_hpu_mm.values import STAGES

#: The repository root.
ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------------------------------------------------------
# Results and machines (performance/*_cpu.py)


def write_results(stem: str, markdown: str, data: dict[str, Any], folder: Path) -> None:
    """``folder/stem.md`` and ``folder/stem.json``, and the Markdown on stdout."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.md").write_text(markdown + "\n")
    (folder / f"{stem}.json").write_text(json.dumps(data, indent=2) + "\n")
    print(markdown)


def load_note(before: str, after: str) -> str:
    """The machine's measured load around a run, and what it means for wall-clock figures: on an oversubscribed
    machine (load average above the core count) wall-clock differences under about 10% are noise."""
    cores = os.cpu_count() or 1
    worst = max(float(x) for x in f"{before} / {after}".split(" / "))
    verdict = (
        f"above the {cores} cores: oversubscribed, so wall-clock differences under about 10% are noise"
        if worst > cores
        else f"within the {cores} cores"
    )
    return f"load average {before} before, {after} after ({verdict})"


def machine_meta(concurrency: int) -> dict[str, Any]:
    import psutil
    import torch
    import vllm

    return {
        "machine": f"CPU: {psutil.cpu_count()}-core {platform.machine()} dev machine, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB",
        "vllm": vllm.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "concurrency": concurrency,
        "model": "tiny random Qwen2.5-VL (tests/e2e/checkpoint.py)",
    }


# ---------------------------------------------------------------------------------------------------------------
# vllm-gaudi's own code (agreement/vllm_gaudi_*.py, planner/replay_heldout.py, planner/planner_heldout_time.py)

#: The child process that runs vllm-gaudi's bucketing on CPU (see :func:`run_driver`).
DRIVER = ROOT / "benchmarks" / "agreement" / "vllm_gaudi_driver.py"
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


def trace_events(trace: Trace, limit: int) -> list[list[Any]]:
    """A schedule's events as the vllm-gaudi driver's lookups take them (a decode run once, as one lookup), at most
    ``limit``."""
    out: list[list[Any]] = []
    for e in trace.events:
        if isinstance(e, DecodeRun):
            out.append(["decode", e.sequences, e.blocks])
        else:
            out.append(["prefill", [[c.query, c.context] for c in e]])
        if len(out) >= limit:
            break
    return out


def run_driver(payload: list[dict[str, Any]], tmp: Path, runner: Path) -> list[dict[str, Any]]:
    """agreement/vllm_gaudi_driver.py over ``payload`` (vllm-gaudi's source extracted under ``tmp``), on CPU. The
    repository root follows ``tmp`` on the child's path: the driver imports this module, and the adapter it checks is
    this checkout's."""
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    path = os.pathsep.join((str(tmp), str(ROOT)))
    child_env.update({"VLLM_USE_FAKE_HPU": "1", "PYTHONPATH": path, "VLLM_LOGGING_LEVEL": "ERROR"})
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


def add_dummy_options() -> None:
    """Releases before v0.17.0rc1 ask vLLM's MultiModalConfig for ``get_dummy_options(modality)``, which vLLM has
    since dropped: as vLLM defined it then, the modality's normalised limit options, or None when not named."""
    from vllm.config.multimodal import MultiModalConfig

    if not hasattr(MultiModalConfig, "get_dummy_options"):
        MultiModalConfig.get_dummy_options = lambda self, modality: self.limit_per_prompt.get(modality)  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------------------------
# serve --dry-run --json in this process (planner/replay_heldout.py, agreement/vllm_scheduler_check.py)


def serve_json(argv: Sequence[str]) -> dict[str, Any]:
    """``vllm-hpu-mm serve --dry-run --json ARGV``'s report, run in this process with no ``VLLM_*`` variable set
    (the caller's environment must not change the plan); RuntimeError where it exits non-zero."""
    from vllm_hpu_mm.cli.main import main as cli

    buf = io.StringIO()
    saved = dict(os.environ)
    for key in [k for k in os.environ if k.startswith("VLLM_")]:
        del os.environ[key]
    try:
        with contextlib.redirect_stdout(buf):
            code = cli(["serve", "--dry-run", "--json", *argv])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if code != 0:
        raise RuntimeError(f"serve --dry-run {' '.join(argv)} exited {code}")
    report: dict[str, Any] = json.loads(buf.getvalue())
    return report


# ---------------------------------------------------------------------------------------------------------------
# Traffic from public traces (fits/traffic_sources.py, planner/replay_heldout.py, planner/planner_heldout_time.py).
# Sources, read at run time from local mirrors (``git show``): fits/traffic_sources.py's docstring.

AZURE = Path("/work/.mirror/Azure+AzurePublicDataset/repo")
AZURE_COMMIT = "b469a11"
MOONCAKE = Path("/work/.mirror/kvcache-ai+Mooncake/repo")
MOONCAKE_COMMIT = "3b5a594"
SHARED_SIZES = ROOT.parent / "shared" / "data" / "image_sizes"
PACKAGE_DATA = ROOT / "vllm_hpu_mm" / "data"
#: Share of text-only requests in the default traffic: an assumption (the public multimodal trace that would tell,
#: Azure's LMM trace 2025, is not in the mirror).
TEXT_ONLY_SHARE = 0.2
SEED = 20261127


def _git_show(repo: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], check=True, capture_output=True,
                          text=True).stdout  # fmt: skip


def azure_text(kind: str = "conv") -> list[tuple[int, int]]:
    """(prompt tokens, answer tokens) per request of the Azure LLM inference trace 2023 (``conv`` or ``code``)."""
    text = _git_show(AZURE, AZURE_COMMIT, f"data/AzureLLMInferenceTrace_{kind}.csv")
    return [(int(r["ContextTokens"]), max(1, int(r["GeneratedTokens"]))) for r in csv.DictReader(io.StringIO(text))]


def mooncake_hit_shares() -> list[float]:
    """Per request of the Mooncake conversation trace: the share of its prompt an unbounded prefix cache holds."""
    seen: set[tuple[int, ...]] = set()
    shares = []
    for line in _git_show(MOONCAKE, MOONCAKE_COMMIT, "FAST25-release/traces/conversation_trace.jsonl").splitlines():
        r = json.loads(line)
        hashes, hit = r["hash_ids"], 0
        for i in range(len(hashes)):
            if tuple(hashes[: i + 1]) not in seen:
                break
            hit = i + 1
        seen.update(tuple(hashes[: i + 1]) for i in range(len(hashes)))
        shares.append(min(1.0, hit * 512 / max(1, r["input_length"])))
    return shares


def image_sizes(path: Path) -> list[tuple[int, int]]:
    with path.open() as f:
        return [(int(r["width"]), int(r["height"])) for r in csv.DictReader(f)]


def build(images: list[tuple[int, int]], texts: list[tuple[int, int]], shares: list[float], *,
          text_only_share: float, seed: int) -> list[tuple[str, str, int, int, int]]:  # fmt: skip
    """Rows (width, height, text, output, cached): every image once plus text-only rows to the given share."""
    rng = random.Random(seed)
    text_only = round(len(images) * text_only_share / (1 - text_only_share))
    rows = []
    for image in [*images, *([None] * text_only)]:
        prompt, answer = rng.choice(texts)
        cached = int(rng.choice(shares) * prompt)
        w, h = ("", "") if image is None else (str(image[0]), str(image[1]))
        rows.append((w, h, prompt, answer, cached))
    rng.shuffle(rows)
    return rows


def write(rows: list[tuple[str, str, int, int, int]], path: Path) -> None:
    with path.open("w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(["width", "height", "text_tokens", "output_tokens", "cached_tokens"])
        out.writerows(rows)


# ---------------------------------------------------------------------------------------------------------------
# The stock vLLM CPU server with or without our plugin (performance/*_cpu.py, performance/server_cpu.py).
# ``VLLM_PLUGINS`` filters every plugin group by entry-point name (``vllm/plugins/__init__.py``): with it set to a
# name no plugin has, no general plugin loads, which is stock vLLM on the same install. On CPU the platform is built
# in, so nothing else is lost.

#: Entry-point name of our general plugin (setup.py); VLLM_PLUGINS without it runs stock vLLM.
PLUGIN_NAME = "hpu_mm"
NO_PLUGINS = "none-stock-vllm"


@dataclasses.dataclass
class Server:
    base_url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    plugin: bool
    startup_s: float

    def rss_bytes(self) -> int:
        """Resident memory of the server and every process it started (engine core, workers)."""
        try:
            root = psutil.Process(self.process.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0
        total = 0
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                total += proc.memory_info().rss
        return total

    def rss_by_process(self) -> dict[str, int]:
        """RSS per process of the tree, keyed ``name:pid`` (which process grows, when the total does)."""
        out: dict[str, int] = {}
        with contextlib.suppress(psutil.NoSuchProcess):
            root = psutil.Process(self.process.pid)
            for proc in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    out[f"{proc.name()}:{proc.pid}"] = proc.memory_info().rss
        return out

    def cpu_seconds(self) -> float:
        """User + system CPU time used so far by the server and every process it started."""
        total = 0.0
        with contextlib.suppress(psutil.NoSuchProcess):
            root = psutil.Process(self.process.pid)
            for proc in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    times = proc.cpu_times()
                    total += times.user + times.system
        return total

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def metrics_text(self) -> str:
        return httpx.get(self.base_url + "/metrics", timeout=10).text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_command(
    model: Path, port: int, *, max_num_seqs: int = 8, max_model_len: int = 8192, extra_args: Sequence[str] = ()
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        "tiny-qwen25vl",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",  # no torch.compile: startup in seconds, and the CPU profile run is skipped
        "--kv-cache-memory-bytes",
        str(512 * 2**20),
        "--max-model-len",
        str(max_model_len),
        "--max-num-seqs",
        str(max_num_seqs),
        "--limit-mm-per-prompt",
        '{"image": 4}',
        "--disable-log-stats",
        "--uvicorn-log-level",
        "warning",
        *extra_args,
    ]


def _stop(process: subprocess.Popen[bytes], grace_s: float = 20.0) -> None:
    """SIGTERM the server's process group (it was started as a session leader), then SIGKILL what is left."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


@contextlib.contextmanager
def running_server(
    model: Path,
    log_path: Path,
    *,
    plugin: bool = True,
    env: Mapping[str, str] | None = None,
    startup_timeout_s: float = 600.0,
    max_num_seqs: int = 8,
    extra_args: Sequence[str] = (),
) -> Iterator[Server]:
    """A ready server (``/health`` answered 200), stopped with its whole process group on exit."""
    port = free_port()
    child_env = process_environ()
    child_env.pop("VLLM_PLUGINS", None)
    if not plugin:
        child_env["VLLM_PLUGINS"] = NO_PLUGINS
    child_env.pop("VLLM_CPU_KVCACHE_SPACE", None)  # it would override --kv-cache-memory-bytes
    prometheus = log_path.parent / f"{log_path.stem}.prometheus"
    shutil.rmtree(prometheus, ignore_errors=True)  # files of a previous run would be summed into /metrics
    prometheus.mkdir(parents=True)
    child_env.update(
        {
            # The tower runs in the engine core; multiprocess mode lets the API server's /metrics show its counters.
            "PROMETHEUS_MULTIPROC_DIR": str(prometheus),
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # the cores are shared: do not pin
            "PYTHONUNBUFFERED": "1",
        }
    )
    child_env.update(env or {})
    base_url = f"http://127.0.0.1:{port}"
    start = time.perf_counter()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            server_command(model, port, max_num_seqs=max_num_seqs, extra_args=extra_args),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_env,
            start_new_session=True,
        )
    server = Server(base_url, process, log_path, plugin, 0.0)
    try:
        deadline = start + startup_timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"server exited with code {process.returncode}:\n{server.log_tail()}")
            if time.perf_counter() > deadline:
                raise RuntimeError(f"server not ready after {startup_timeout_s:.0f} s:\n{server.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(base_url + "/health", timeout=2).status_code == 200:
                    break
            time.sleep(1.0)
        server.startup_s = time.perf_counter() - start
        yield server
    finally:
        _stop(process)


#: Pre-aligned sizes (w, h): the first three fill a default bucket exactly (1600, 3136, 4096 patches); the last
#: two are aligned but padded to the 1600 bucket (768 and 1536 patches).
SIZES = ((560, 560), (784, 784), (896, 896), (448, 336), (672, 448))
MODEL = "tiny-qwen25vl"
NO_CACHES = ("--no-enable-prefix-caching", "--mm-processor-cache-gb", "0")


def image_urls() -> list[str]:
    from tests.support.bad_inputs import synthetic_photo
    from tests.support.data import data_url

    out = []
    for i, (w, h) in enumerate(SIZES):
        buf = io.BytesIO()
        synthetic_photo(w, h, seed=100 + i).save(buf, format="PNG")
        out.append(data_url(buf.getvalue(), "image/png"))
    return out


def payloads(count: int, max_tokens: int) -> list[dict[str, Any]]:
    from tests.support.batch_client import chat_payload

    urls = image_urls()
    return [
        chat_payload(f"Image {i}.", [urls[i % len(urls)]], model=MODEL, max_tokens=max_tokens) for i in range(count)
    ]


# ---------------------------------------------------------------------------------------------------------------
# The OOM doctor's rules: fitting and cross-validating them (fits/doctor_accuracy.py, tests/logs/test_doctor.py).
# What is fitted is what the runtimes' sources do not settle: the order in which the kinds of evidence are trusted
# when they disagree, how close to the end of a log a cut must be, and votes for frame names the phase table does not
# know. What a frame or a log line means (vllm_hpu_mm.logs.doctor.phases, vllm_hpu_mm.logs.patterns) is read from
# the sources and is not fitted. :func:`cross_validate` makes the accuracy figure honest: the logs are dealt into
# ``k`` folds stratified by label; each fold is scored with rules fitted on the other folds only; the deal is repeated
# with other seeds. Everything is deterministic for a given seed.

#: A labelled log: its name, its features, the stage a person read in it.
Example = tuple[str, LogFeatures, str]

#: The choices :func:`fit` tries, the defaults first (ties keep the earlier choice).
ORDERS: tuple[tuple[Source, ...], ...] = tuple(itertools.permutations(Rules().order))
CUT_LINES = (5, 2, 10, 25)
CUT_TRACEBACKS = (True, False)
#: Whether a cut traceback that says nothing of memory is left undecided (first: ties keep it).
CUT_EVIDENCE = (True, False)
#: One labelled log is no evidence: a vote decides only where at least two logs cast it (a threshold of 1 let one
#: log's frame names decide; the held-out rounds' learned verdicts as they came were wrong: runtime_heldout vllm_34643,
#: round 6 vllm_ascend_1617).
MIN_VOTES = (2, 3)


def vote_tokens(example: Example) -> set[str]:
    """The frame tokens a labelled log votes with (its failure's frames, else its open traceback's)."""
    _, features, label = example
    if label not in STAGES:
        return set()
    run = features.run
    tb = run.open_traceback
    return frame_tokens(run.failure.frames if run.failure is not None else tb.frames if tb is not None else ())


def _read(features: LogFeatures) -> set[str]:
    """Every frame token whose votes a judgement of ``features`` can look up (its failure's and open traceback's)."""
    run = features.run
    tb = run.open_traceback
    return frame_tokens((*(run.failure.frames if run.failure is not None else ()), *(tb.frames if tb else ())))


def _votes(examples: Sequence[Example]) -> dict[str, dict[str, int]]:
    votes: dict[str, Counter[str]] = {}
    for example in examples:
        for token in vote_tokens(example):
            votes.setdefault(token, Counter())[example[2]] += 1
    return {t: dict(c) for t, c in votes.items()}


#: What a verdict is scored as: the stage said (:func:`stage_said`), or :func:`honest_cut`'s.
Verdict = Callable[[LogFeatures, Judgement], str]


def said_of(d: Diagnosis) -> str:
    """What a diagnosis is scored as: its stage, or :data:`UNDECIDED` where it claims no out-of-memory failure."""
    return UNDECIDED if d.basis == "undecided" else d.stage


def stage_said(features: LogFeatures, j: Judgement) -> str:
    """The stage the doctor says: what it ships (a cut it leaves undecided claims no out-of-memory failure)."""
    return UNDECIDED if j.basis == "undecided" else j.stage


#: The answer of :func:`honest_cut`: the stage ``unknown`` with no out-of-memory claim. Scored apart from an
#: ``unknown`` that read an out-of-memory line, so that it is right on a log labelled ``unknown`` and never a false
#: alarm.
UNDECIDED = "unknown (no OOM claimed)"


def honest_cut(features: LogFeatures, j: Judgement) -> str:
    """The honest rule for a traceback the log stops inside before its error line (issue 34 item 10): a cut
    traceback with no other out-of-memory evidence answers :data:`UNDECIDED`. Measured beside the shipped doctor
    since round 8 and shipped in round 11's follow-up (``vllm_hpu_mm/logs/doctor/decide.py``: ``silent_cut``), so it
    now agrees with :func:`stage_said` under the shipped rules; kept to score a rule set fitted with the cut rule off
    (``Rules.cut_evidence``). What other evidence can be: an out-of-memory or OOM-killer line is a failure line and a
    negative KV-cache figure a refusal (neither leaves a cut verdict); what is left is a frame that only raises a
    memory refusal (:data:`~vllm_hpu_mm.logs.doctor.decide.REFUSAL_FRAMES`)."""
    tb = features.run.open_traceback
    if j.basis == "undecided":
        return UNDECIDED
    if j.basis != "cut" or j.cut != "traceback" or tb is None:
        return j.stage
    if any(f.func.rsplit(".", 1)[-1] in REFUSAL_FRAMES for f in tb.frames):
        return j.stage
    return UNDECIDED


#: Labels given in words the doctor's stages hold under another name: a profiling pass (vLLM's ``profile_run``,
#: llama.cpp's compute-buffer reservation, labelled ``profile`` in round 7) is part of ``startup`` in the doctor's
#: stages (``vllm_hpu_mm/logs/doctor/phases.py``: the pass that measures or reserves the largest batch's activations
#: before serving); a warm-up (labelled ``warmup`` in round 8: the TPU's ahead-of-time compile of each shape) is
#: ``graph_capture`` (phases.py: the stage that captures or warms the graphs after the KV cache is sized).
LABEL_STAGES = {"profile": "startup", "warmup": "graph_capture"}


def is_right(said: str, label: str) -> bool:
    label = LABEL_STAGES.get(label, label)
    return said == label or (said == UNDECIDED and label == "unknown")


def false_alarm(said: str, label: str) -> bool:
    """An out-of-memory verdict on a log labelled without one (:data:`UNDECIDED` claims none)."""
    return label == "none" and said not in ("none", UNDECIDED)


def candidate_rules(votes: Mapping[str, Mapping[str, int]]) -> Iterator[Rules]:
    """Every rule set :func:`fit` tries with these frame votes (the undecided cut on: :func:`fit` also judges it
    off). None reads a run that stops after a phase line as failing there: a healthy excerpt stops after a phase line
    as often, and a line like ``# GPU blocks`` says its phase finished (the phase-cut rule, fitted from 0 to 5 lines,
    gave the development set's only cross-validated false alarms)."""
    for order, cut_lines, cut_tracebacks, min_votes in itertools.product(ORDERS, CUT_LINES, CUT_TRACEBACKS, MIN_VOTES):
        yield Rules(order, cut_lines, cut_tracebacks, votes, min_votes, True)


def _scores(examples: Sequence[Example], candidates: Sequence[Rules], verdict: Verdict,
            evidence: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Right answers and false alarms (rows: each candidate, then each ``evidence`` choice, in :func:`fit`'s order;
    columns: ``examples``). The undecided cut changes only the judgements it leaves undecided, so those alone are
    judged again with it held off."""
    right = np.zeros((len(candidates) * len(evidence), len(examples)), dtype=np.int8)
    alarms = np.zeros_like(right)
    for c, rules in enumerate(candidates):
        off = dataclasses.replace(rules, cut_evidence=False)
        judged = [(features, judge(features, rules), label) for _, features, label in examples]
        for e, cut_evidence in enumerate(evidence):
            row = c * len(evidence) + e
            for i, (f, j, label) in enumerate(judged):
                said = verdict(f, j if cut_evidence or j.basis != "undecided" else judge(f, off))
                right[row, i], alarms[row, i] = is_right(said, label), false_alarm(said, label)
    return right, alarms


def _best(right: np.ndarray, alarms: np.ndarray, candidates: Sequence[Rules], evidence: Sequence[bool]) -> Rules:
    """The first row with the most right answers, and of those the fewest false alarms (ties keep the earlier)."""
    row = int(np.argmax(right.astype(np.int64) * (int(alarms.max(initial=0)) + 1) - alarms))
    rules = candidates[row // len(evidence)]
    return rules if evidence[row % len(evidence)] else dataclasses.replace(rules, cut_evidence=False)


def fit(examples: Sequence[Example], verdict: Verdict = stage_said, evidence: Sequence[bool] = CUT_EVIDENCE) -> Rules:
    """The rules that get the most of ``examples`` right, and of those the fewest false alarms: frame votes counted
    over them, then every order, cut distance, whether cut tracebacks count, vote threshold and
    ``evidence`` (whether a cut that says nothing of memory is left undecided) tried (ties keep the earlier, default,
    choice). ``verdict`` says what a judgement is scored as."""
    candidates = list(candidate_rules(_votes(examples)))
    right, alarms = _scores(examples, candidates, verdict, evidence)
    return _best(right.sum(axis=1), alarms.sum(axis=1), candidates, evidence)


def fit_leaving_out(examples: Sequence[Example], groups: Sequence[Sequence[int]], verdict: Verdict = stage_said,
                    evidence: Sequence[bool] = CUT_EVIDENCE) -> list[Rules]:  # fmt: skip
    """For each group of indices, ``fit(examples without the group)``, exactly, without refitting from scratch: every
    candidate's answers are counted once over all examples and the group's are taken off. A group that casts frame
    votes changes the candidates' votes, and with them only the judgements of examples whose frames read one of those
    tokens: those alone are judged again (leave-one-log-out over ~800 logs fell from ~1,600 fits of ~3 s)."""
    candidates = list(candidate_rules(_votes(examples)))
    right, alarms = _scores(examples, candidates, verdict, evidence)
    right_all, alarms_all = right.sum(axis=1), alarms.sum(axis=1)
    casts = [vote_tokens(ex) for ex in examples]
    reads = [_read(features) for _, features, _ in examples]
    out = []
    for group in groups:
        idx = list(group)
        r, a = right_all - right[:, idx].sum(axis=1), alarms_all - alarms[:, idx].sum(axis=1)
        cast = set().union(*(casts[i] for i in idx))
        if not cast:
            out.append(_best(r, a, candidates, evidence))
            continue
        members = set(idx)
        rest = [ex for i, ex in enumerate(examples) if i not in members]
        revoted = list(candidate_rules(_votes(rest)))
        touched = [j for j in range(len(examples)) if j not in members and reads[j] & cast]
        if touched:
            again, again_alarms = _scores([examples[j] for j in touched], revoted, verdict, evidence)
            r = r - right[:, touched].sum(axis=1) + again.sum(axis=1)
            a = a - alarms[:, touched].sum(axis=1) + again_alarms.sum(axis=1)
        out.append(_best(r, a, revoted, evidence))
    return out


def folds(labels: Sequence[str], k: int, seed: int) -> list[list[int]]:
    """``k`` folds of the indices of ``labels``, stratified: each label's indices shuffled (by ``seed``) and dealt
    round-robin, continuing from fold to fold, so every fold gets its share of every label."""
    rng = random.Random(seed)
    out: list[list[int]] = [[] for _ in range(k)]
    turn = 0
    for label in sorted(set(labels)):
        members = [i for i, x in enumerate(labels) if x == label]
        rng.shuffle(members)
        for i in members:
            out[turn % k].append(i)
            turn += 1
    return [sorted(fold) for fold in out]


@dataclasses.dataclass(frozen=True)
class CrossValidation:
    k: int
    repeats: int
    seed: int
    #: Share right per repetition (each log scored once per repetition, by rules fitted without it).
    accuracies: tuple[float, ...]
    #: Per log (in the order given): the stage predicted in each repetition.
    predictions: tuple[tuple[str, ...], ...]
    labels: tuple[str, ...]
    names: tuple[str, ...]

    @property
    def accuracy(self) -> float:
        return sum(self.accuracies) / len(self.accuracies)

    @property
    def false_alarms(self) -> int:
        """Predictions of a failure on a log labelled ``none``, over all repetitions."""
        pairs = zip(self.labels, self.predictions, strict=True)
        return sum(false_alarm(p, label) for label, ps in pairs for p in ps)

    def confusion(self) -> dict[tuple[str, str], int]:
        """(label, predicted) -> count over all repetitions."""
        return dict(Counter((label, p) for label, ps in zip(self.labels, self.predictions, strict=True) for p in ps))


def cross_validate(examples: Sequence[Example], k: int = 5, repeats: int = 10, seed: int = 0,
                   verdict: Verdict = stage_said) -> CrossValidation:  # fmt: skip
    """Repeated stratified ``k``-fold cross-validation of :func:`fit` on ``examples`` (both scoring ``verdict``)."""
    labels = [label for _, _, label in examples]
    predictions: list[list[str]] = [[] for _ in examples]
    accuracies = []
    for r in range(repeats):
        right = 0
        tests = folds(labels, k, seed + r)
        for test, rules in zip(tests, fit_leaving_out(examples, tests, verdict), strict=True):
            for i in test:
                said = verdict(examples[i][1], judge(examples[i][1], rules))
                predictions[i].append(said)
                right += is_right(said, labels[i])
        accuracies.append(right / len(examples))
    return CrossValidation(k, repeats, seed, tuple(accuracies), tuple(tuple(p) for p in predictions), tuple(labels),
                           tuple(name for name, _, _ in examples))  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# Is the doctor's advice right for the log's writer? (fits/doctor_accuracy.py, tests/logs/test_doctor_heldout.py)
# The scorer's own tables of what each writer reads, taken from the writers' sources and never from the doctor's
# code; every knob an advice names must be in its writer's table:
# - vLLM (any accelerator): the engine's command-line flags, read from vLLM's own parser when vLLM is installed
#   (``AsyncEngineArgs.add_cli_args``; vLLM 0.32 has 318), else the list below. No ``VLLM_*`` variable of the Gaudi
#   runtimes.
# - vllm-gaudi: those flags, and its variables (``git grep -oh "VLLM_[A-Z0-9_]+"`` over ``vllm_gaudi/`` @ 091bbadd,
#   the ones a memory fix can name).
# - vllm-fork: those flags, ``--weights-load-device`` (the fork's own), and the variables of its Gaudi guide
#   (``README_GAUDI.md``: the graph memory ratios, bucket limits, ``VLLM_SKIP_WARMUP``) and ``VLLM_MULTIMODAL_BUCKETS``
#   (the fork's V0 vision bucketing, as public Gaudi scripts set it with ``VLLM_USE_V1=0``).
# - TGI: its launcher's arguments, as its own ``Args { ... }`` dump names them (tests/data/logs/runtime_dev/
#   tgi_1156_openshift_args.log, tgi_2776_triton_args.log), with dashes.
# - optimum-habana: ``examples/text-generation/run_generation.py``'s arguments and ``gaudi_spawn.py``'s, and
#   ``QUANT_CONFIG``.
# - another framework: nothing (no flag is known to be its).
# The checks: every knob named is the writer's; vision knobs only for a vision model; no larger
# ``--gpu-memory-utilization`` where other processes held the memory; a host-memory failure's first advice is about
# the host, and no device-memory knob is given for it.

#: A knob an advice names: a flag, or an environment variable of the runtimes, Ray or the Gaudi tools.
KNOB = re.compile(r"(?<![\w-])--[a-z][a-z0-9_-]*[a-z0-9]|\b(?:VLLM|RAY|PT_HPU|PYTORCH)_[A-Z0-9_]+|\bQUANT_CONFIG\b")
#: Knobs that only make sense for a vision model.
VISION_KNOBS = frozenset({"--mm-processor-kwargs", "--limit-mm-per-prompt", "--mm-processor-cache-gb",
                          "VLLM_MULTIMODAL_BUCKETS"})  # fmt: skip
#: Knobs that size device memory (not advice for a host-memory failure).
DEVICE_KNOBS = frozenset({"--gpu-memory-utilization", "VLLM_GRAPH_RESERVED_MEM", "--cuda-memory-fraction",
                          "--compilation-config", "VLLM_MULTIMODAL_BUCKETS"})  # fmt: skip

#: vLLM engine flags a memory fix may name, for when vLLM is not installed (all are in vLLM 0.32's parser).
_VLLM_FALLBACK = frozenset({
    "--gpu-memory-utilization", "--max-num-seqs", "--max-num-batched-tokens", "--max-model-len",
    "--tensor-parallel-size", "--pipeline-parallel-size", "--enforce-eager", "--mm-processor-kwargs",
    "--limit-mm-per-prompt", "--compilation-config", "--kv-cache-memory-bytes", "--max-parallel-loading-workers",
    "--cpu-offload-gb", "--mm-processor-cache-gb", "--quantization", "--kv-cache-dtype", "--block-size",
    "--enable-chunked-prefill", "--swap-space", "--num-gpu-blocks-override",
})  # fmt: skip
#: vllm-gaudi's variables a memory fix may name (``vllm_gaudi/`` @ 091bbadd).
VLLM_GAUDI_ENV = frozenset({
    "VLLM_GRAPH_RESERVED_MEM", "VLLM_MULTIMODAL_BUCKETS", "VLLM_SKIP_WARMUP", "VLLM_PROMPT_BS_BUCKET_MAX",
    "VLLM_PROMPT_SEQ_BUCKET_MAX", "VLLM_PROMPT_QUERY_BUCKET_MAX", "VLLM_PROMPT_CTX_BUCKET_MAX",
    "VLLM_DECODE_BS_BUCKET_MAX", "VLLM_DECODE_BLOCK_BUCKET_MAX",
})  # fmt: skip
VLLM_FORK_ENV = frozenset({
    "VLLM_GRAPH_RESERVED_MEM", "VLLM_GRAPH_PROMPT_RATIO", "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO", "VLLM_SKIP_WARMUP",
    "VLLM_MULTIMODAL_BUCKETS", "VLLM_PROMPT_BS_BUCKET_MAX", "VLLM_PROMPT_SEQ_BUCKET_MAX", "VLLM_DECODE_BS_BUCKET_MAX",
    "VLLM_DECODE_BLOCK_BUCKET_MAX",
})  # fmt: skip
#: TGI's launcher arguments (its Args dump), as flags.
TGI_FLAGS = frozenset("--" + name.replace("_", "-") for name in (
    "model_id", "revision", "validation_workers", "sharded", "num_shard", "quantize", "speculate", "dtype",
    "kv_cache_dtype", "trust_remote_code", "max_concurrent_requests", "max_best_of", "max_stop_sequences",
    "max_top_n_tokens", "max_input_tokens", "max_input_length", "max_total_tokens", "waiting_served_ratio",
    "max_batch_prefill_tokens", "max_batch_total_tokens", "max_waiting_tokens", "max_batch_size", "cuda_graphs",
    "hostname", "port", "cuda_memory_fraction", "rope_scaling", "rope_factor",
))  # fmt: skip
#: optimum-habana's text-generation and launcher arguments (run_generation.py, gaudi_spawn.py), and QUANT_CONFIG.
OPTIMUM_HABANA = frozenset({
    "--model_name_or_path", "--batch_size", "--max_new_tokens", "--max_input_tokens", "--use_kv_cache",
    "--use_hpu_graphs", "--limit_hpu_graphs", "--bucket_size", "--bucket_internal", "--reuse_cache", "--bf16",
    "--trim_logits", "--use_flash_attention", "--flash_attention_recompute", "--disk_offload", "--torch_compile",
    "--fp8", "--use_deepspeed", "--world_size", "--per_device_train_batch_size", "--gradient_checkpointing",
    "QUANT_CONFIG",
})  # fmt: skip
#: Ray's memory monitor variables (any writer run under Ray may be told them).
RAY_ENV = frozenset({"RAY_memory_usage_threshold", "RAY_memory_monitor_refresh_ms"})
#: llama.cpp's memory flags (common/arg.cpp: its server and CLI read them; llama-cpp-python takes the same names).
LLAMA_CPP_FLAGS = frozenset({"--n-gpu-layers", "--gpu-layers", "--ctx-size", "--batch-size", "--ubatch-size",
                             "--parallel", "--cache-type-k", "--cache-type-v", "--no-kv-offload", "--split-mode",
                             "--tensor-split", "--main-gpu", "--flash-attn", "--no-mmap", "--mlock"})  # fmt: skip
#: SGLang's server flags that size memory or batches (python/sglang/srt/server_args.py).
SGLANG_FLAGS = frozenset({"--mem-fraction-static", "--chunked-prefill-size", "--max-running-requests",
                          "--max-total-tokens", "--max-prefill-tokens", "--cuda-graph-max-bs", "--disable-cuda-graph",
                          "--context-length", "--tp-size", "--dp-size", "--kv-cache-dtype", "--enable-torch-compile",
                          "--quantization"})  # fmt: skip


@functools.cache
def vllm_flags() -> frozenset[str]:
    """vLLM's engine flags from its own parser when vLLM is installed (else :data:`_VLLM_FALLBACK`)."""
    try:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        return _VLLM_FALLBACK
    parser = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())  # type: ignore[no-untyped-call]
    return frozenset(o for a in parser._actions for o in a.option_strings if o.startswith("--"))


def writer_knobs(writer: str) -> frozenset[str]:
    """What ``writer`` (a label: vllm-gaudi, vllm-fork, vllm-cuda, vllm-rocm, vllm-npu, ..., tgi, optimum-habana,
    llama.cpp, sglang, ollama, other) reads."""
    if writer == "vllm-gaudi":
        return vllm_flags() | VLLM_GAUDI_ENV
    if writer == "vllm-fork":
        return vllm_flags() | VLLM_FORK_ENV | {"--weights-load-device"}
    if writer.startswith("vllm"):
        return vllm_flags()
    if writer in ("tgi", "tgi-gaudi"):
        return TGI_FLAGS
    if writer == "optimum-habana":
        return OPTIMUM_HABANA
    if writer == "llama.cpp":
        return LLAMA_CPP_FLAGS
    if writer == "sglang":
        return SGLANG_FLAGS
    if writer == "lmdeploy":  # `lmdeploy serve api_server`'s engine options (lmdeploy/cli/utils.py ArgumentHelper)
        return frozenset({"--cache-max-entry-count", "--max-batch-size", "--session-len"})
    if writer == "other-fastchat":  # its model worker's own (fastchat/model/model_adapter.py add_model_args,
        # serve/model_worker.py @5f2d8c81); its vLLM worker takes vLLM's engine flags (serve/vllm_worker.py)
        own = {"--max-gpu-memory", "--num-gpus", "--load-8bit", "--cpu-offloading", "--limit-worker-concurrency"}
        return vllm_flags() | frozenset(own)
    if writer == "other-llamaedge":  # LlamaEdge's llama-api-server hands llama.cpp's sizes to WASI-NN's GGML backend
        # under llama.cpp's names (its README's options: --ctx-size, --batch-size, --n-gpu-layers)
        return frozenset({"--ctx-size", "--batch-size", "--n-gpu-layers"})
    if writer == "ms-swift":  # its inference arguments (swift/llm/utils/argument.py InferArguments)
        return frozenset({"--device_map_config_path", "--quantization_bit"})
    return frozenset()  # Ollama's options and MindIE's config keys are no flags: any flag is another writer's


def advice_problems(advice: Sequence[str], writer: str, *, vision: bool, host: bool, others: bool) -> list[str]:
    """What is wrong with ``advice`` for a log of ``writer`` (empty: right)."""
    problems = []
    reads = writer_knobs(writer) | RAY_ENV
    for text in advice:
        for knob in KNOB.findall(text):
            if knob not in reads:
                problems.append(f"{knob} is not read by {writer}")
            if knob in VISION_KNOBS and not vision:
                problems.append(f"{knob} given to a text-only model")
            if host and knob in DEVICE_KNOBS:
                problems.append(f"{knob} (device memory) given for a host-memory failure")
        if "max_pixels" in text and not vision:
            problems.append("max_pixels given to a text-only model")
        if others and re.search(r"raise --gpu-memory-utilization", text):
            problems.append("raises --gpu-memory-utilization while other processes hold the memory")
    if host and advice and "host" not in advice[0]:
        problems.append("a host-memory failure whose first advice is not about the host")
    return problems


# ---------------------------------------------------------------------------------------------------------------
# Public Gaudi logs' bucket counts against the release model that produced them (agreement/gaudi_log_buckets.py,
# tests/logs/test_gaudi_log_buckets.py): the models and the logs are described in that script's docstring.

GAUDI_LOGS = ROOT / "tests" / "data" / "gaudi_logs"
_CONFIG = re.compile(r"(Prompt|Decode) bucket config \(min, step, max_warmup\) bs:\[(\d+), (\d+), (\d+)\], "
                     r"(?:seq|block):\[(\d+), (\d+), (\d+)\]")  # fmt: skip
_GENERATED = re.compile(r"Generated (\d+) (prompt|decode) buckets")
_BUDGET = re.compile(r"Omitted \d+ prompt buckets due to exceeded token budget \(max_num_batched_tokens=(\d+)\)")
_EXP_CONFIG = re.compile(r"(Prompt|Decode) bucket config \(min, step, max_warmup, limit\)")
Range = tuple[int, int, int]
#: What each model is, for the table.
MODELS = {
    "fork-2024-linear": "vllm-fork linear @e30ddc3db (2024-08-07)",
    "fork-2024-budget": "vllm-fork linear + token budget, both phases (#206 aefd33679 / #208 9abadba50)",
    "fork-2024-budget-min": "vllm-fork linear + range minimum (#235 a4e1d5273) + token budget, both phases",
}
FORK_RELEASES = ROOT / "vllm_hpu_mm" / "runtimes" / "vllm_fork" / "releases.py"


def _range(config: Range, *, enforce_min: bool) -> list[int]:
    return warmup_range(config, at_least_min=enforce_min)


def planned(model: str, bs: Range, seq: Range, budget: int | None) -> int:
    """How many buckets ``model`` generates for one phase's (bs, seq) ranges under the token budget."""
    product = [(b, s) for b in _range(bs, enforce_min=model == "fork-2024-budget-min") for s in
               _range(seq, enforce_min=model == "fork-2024-budget-min")]  # fmt: skip
    if model == "fork-2024-linear":
        return len(product)
    assert budget is not None
    kept = [k for k in product if k[0] * k[1] <= budget]
    return len(kept) if kept or model != "fork-2024-budget" else 0


def _ranges(c: tuple[int, ...]) -> tuple[Range, Range]:
    """A logged config's (bs, seq) ranges."""
    return (c[0], c[1], c[2]), (c[3], c[4], c[5])


def _header(text: str) -> dict[str, Any] | None:
    for line in text.splitlines():
        if line.startswith("# buckets:"):
            out: dict[str, Any] = json.loads(line.split(":", 1)[1])
            return out
    return None


def _consistent_budgets(model: str, configs: dict[str, tuple[int, ...]], logged: dict[str, int]) -> str:
    """The token budgets (multiples of 128 up to 2^17) under which ``model`` gives every logged count."""
    shown = [(ph, c) for ph, c in configs.items() if ph in logged]
    fits = [
        b for b in range(128, 2**17 + 1, 128) if all(planned(model, *_ranges(c), b) == logged[ph] for ph, c in shown)
    ]
    return f"{fits[0]}-{fits[-1]}" if fits else "none"


def rows() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(GAUDI_LOGS.rglob("*.log")):
        rel = path.relative_to(GAUDI_LOGS).parts
        text = path.read_text(encoding="utf-8")
        head = _header(text)
        configs = {m.group(1).lower(): tuple(int(x) for x in m.groups()[1:]) for m in _CONFIG.finditer(text)}
        logged = {m.group(2): int(m.group(1)) for m in _GENERATED.finditer(text)}
        budget_m = _BUDGET.search(text)
        budget = int(budget_m.group(1)) if budget_m else (head or {}).get("max_num_batched_tokens")
        base = {"set": rel[-2], "folder": "/".join(rel[:-1]), "log": path.stem}
        model = head["model"] if head else "fork-2024-linear"
        code = head["code"] if head else ("habana_main @e30ddc3db era (2024-08)" if configs else "-")
        if model == "fork-2025-exponential":
            why = ("vllm-fork habana_main snapshot with vllm-hpu-extension's exponential strategy: not a release tag, "
                   f"so no line of {FORK_RELEASES.relative_to(ROOT)} applies (its exponential model is 1.22's, "
                   "extension @8211e0b, whose batch step differs from the logged one), and the log leaves "
                   "max_num_batched_tokens and the KV blocks unstated: not checkable")  # fmt: skip
            for phase in sorted(logged):
                out.append({**base, "phase": phase, "logged": logged[phase], "planned": None, "code": code,
                            "prints_settings": bool(_EXP_CONFIG.search(text)), "why": why})  # fmt: skip
            continue
        if not configs:
            out.append({**base, "phase": "-", "logged": None, "planned": None, "code": code, "prints_settings": False,
                        "why": "prints no bucket settings: not checkable"})  # fmt: skip
            continue
        for phase, c in configs.items():
            row = {**base, "phase": phase, "logged": logged.get(phase), "planned": None, "code": code,
                   "prints_settings": True}  # fmt: skip
            settings = f"bs:{list(c[:3])} seq:{list(c[3:])}"
            if logged.get(phase) is None:
                out.append({**row, "why": f"{settings}: the quoted log gives no count for this phase"})
                continue
            if model != "fork-2024-linear" and budget is None:
                fits = _consistent_budgets(model, configs, logged)
                out.append({**row, "why": f"{MODELS[model]}; {settings}; max_num_batched_tokens not printed: "
                                          f"not checkable (the counts fit a budget of {fits})"})  # fmt: skip
                continue
            n = planned(model, *_ranges(c), budget)
            tail = "" if budget is None or model == "fork-2024-linear" else f", max_num_batched_tokens={budget}"
            if budget is not None and not budget_m:
                tail += " (stated in the header, not printed by this run)"
            out.append({**row, "planned": n, "why": f"{MODELS[model]}; {settings}{tail}"})
    return out

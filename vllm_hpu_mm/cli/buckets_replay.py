"""``vllm-hpu-mm buckets replay``: what would this configuration do with my traffic? The traffic runs through
vllm-gaudi's own bucket lookup (modelled on its code @ 091bbadd, checked against it: benchmarks/results/
vllm_gaudi_lookup_check.md) under continuous batching, for vllm-gaudi's own strategy, your bucket file
(``--bucket-file``, or the environment's VLLM_BUCKETING_FROM_FILE) and the buckets planned from the traffic, side by
side: graphs warmed, shapes compiled at run time (and under VLLM_SKIP_WARMUP=true), fallback buckets, prefill token
and context efficiency, decode slot and block efficiency, vision patch efficiency and a warm-up estimate.

Traffic: ``--sizes`` (a CSV: width,height and optionally text_tokens, output_tokens, cached_tokens, count; empty
width,height = text-only) or a folder of images, ``--from-metrics`` (a server's /metrics: its images, vLLM's prompt
and answer histograms, prefix-cache counters and running requests), else the embedded default traffic. The engine
limits are vLLM's flags (--max-model-len, --max-num-seqs, --max-num-batched-tokens, --block-size) and the plan's KV
blocks estimate (--kv-blocks to give your log's). Exit 1 when your bucket file compiles at run time.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from vllm_hpu_mm import envs
from vllm_hpu_mm.buckets.admission import admit_traffic
from vllm_hpu_mm.cli.common import ExitCode, help_text, on_default_device, print_json
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.plan.args import PLAN_OPTIONS, VLLM_FLAGS, SizingArgs, add_options, positive_int
from vllm_hpu_mm.plan.bucket_choice import read_traffic
from vllm_hpu_mm.plan.inputs import build
from vllm_hpu_mm.plan.pipeline import checked_by_runtime, fit_max_model_len
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.plan.text_choice import replay_report
from vllm_hpu_mm.replay.job import DEFAULT_REQUESTS
from vllm_hpu_mm.replay.report import to_dict, to_table
from vllm_hpu_mm.runtimes import registry
from vllm_hpu_mm.runtimes.base import Runtime
from vllm_hpu_mm.traffic.requests import Traffic

__all__ = ["add_parser"]

FILE_VAR = "VLLM_BUCKETING_FROM_FILE"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("replay", help="replay traffic through vllm-gaudi's bucket lookup: compiles, padding, graphs",
                       description=help_text(__doc__),
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    add_options(p, VLLM_FLAGS)
    add_options(p, [o for o in PLAN_OPTIONS if o.field not in ("keep_buckets", "max_buckets")])
    p.add_argument("--bucket-file", metavar="FILE", help=f"a vllm-gaudi bucket file to replay (default: ${FILE_VAR} "
                   "when set)")  # fmt: skip
    p.add_argument("--from-metrics", metavar="URL|FILE", help="traffic from a running server's /metrics (or a saved "
                   "exposition), added to --sizes")  # fmt: skip
    p.add_argument("--kv-blocks", type=positive_int, metavar="N", help="the KV blocks vllm-gaudi allocated (its log's "
                   "'# HPU blocks'; default: the plan's estimate)")  # fmt: skip
    p.add_argument(
        "--requests",
        type=positive_int,
        default=DEFAULT_REQUESTS,
        metavar="N",
        help=f"requests sampled from the traffic per load level (default {DEFAULT_REQUESTS})",
    )
    p.add_argument("--no-plan", action="store_true", help="do not plan buckets from the traffic (default: plan them)")
    p.add_argument("--plot", metavar="PNG", help="also draw each configuration's padding per bucket to this PNG")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.set_defaults(func=run)


def _traffic(args: argparse.Namespace, sizing: SizingArgs, settings: envs.Settings) -> Traffic:
    """The traffic to replay: only the requests the server serves (a refused image fails its request)."""
    parts = []
    if sizing.sizes is not None:
        parts.append(read_traffic(sizing.sizes, flag=sizing.flag("sizes")))
    if args.from_metrics:
        from vllm_hpu_mm.buckets.live import traffic_from_metrics

        parts.append(traffic_from_metrics(args.from_metrics))
    traffic = Traffic.combine(parts) if parts else read_traffic(None, flag="--sizes")
    return admit_traffic(traffic, max_image_pixels=settings.max_image_pixels,
                         max_aspect_ratio=settings.max_aspect_ratio)  # fmt: skip


def run(args: argparse.Namespace) -> int:
    settings = envs.load()
    sizing = on_default_device(SizingArgs.from_namespace(args))
    if sizing.runtime is None:
        sizing = dataclasses.replace(sizing, runtime=Runtime.VLLM_GAUDI.value)
    env = envs.runtime_environ()
    file_path = args.bucket_file or env.get(FILE_VAR)
    own_env = {k: v for k, v in env.items() if k != FILE_VAR}
    inputs = checked_by_runtime(fit_max_model_len(build(sizing, settings, own_env)), sizing.flag)
    first = plan(inputs)
    yours = None
    if file_path:
        try:
            text = Path(file_path).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            flag = "--bucket-file" if args.bucket_file else FILE_VAR
            raise ConfigError(f"{flag} {file_path}: cannot read it ({exc}); accepted: a vllm-gaudi bucket "
                              "file") from None  # fmt: skip
        model = registry.same_runtime(inputs.runtime, {**own_env, FILE_VAR: file_path}, bucket_file_text=text)
        yours = (model, f"your {Path(file_path).name}")
    report, _ = replay_report(first, _traffic(args, sizing, settings), settings, own=inputs.runtime, yours=yours,
                              plan_buckets=not args.no_plan, budget=sizing.text_graph_budget,
                              concurrency=sizing.concurrency, requests=args.requests,
                              kv_blocks=args.kv_blocks)  # fmt: skip
    if args.plot:
        from vllm_hpu_mm.replay.plot import plot_replay

        plot_replay(report, args.plot)
    if args.json:
        print_json(to_dict(report))
    else:
        print(to_table(report))
        if args.plot:
            print(f"plot written to {args.plot}")
    compiles = yours is not None and bool(report.results[1].compiles)
    return int(ExitCode.NEGATIVE if compiles else ExitCode.OK)

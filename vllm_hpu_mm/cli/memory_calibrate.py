"""'vllm-hpu-mm memory calibrate LOG': measure graph costs from a warm-up log and save them as a profile that
'memory plan' (and 'serve') use, so the next launch plans with measured numbers instead of estimates.

It reads vllm-gaudi / vllm-fork '[Warmup][Graph/...][i/n] ... free_mem:' lines, their 'Graph/... captured:N
used_mem:X' summaries (vllm-fork 1.22: 'Prompt|Decode captured:N (P%) used_mem:X'; vllm-gaudi's and 1.22's with the
'Generated N prompt|decode buckets [bs, query, num_blocks]: [...]' lists, else the phase's own per-graph lines, as
the buckets they covered) and the 'Free device memory: ...' line, and vLLM CUDA's graph-capture memory lines;
a log of several server starts is split into runs as oom-doctor splits it, and only the last run that printed a
memory figure is read (the report says which of how many, a log of one start too). With --metrics, a running
server's /metrics (URL or saved page): a step-time fit from its latency histograms, which the replay's whole
latencies then use.
Exit 0 when a profile was written, 1 when the log measures nothing (no profile written), 2 for invalid input (an
--output that is the log itself is refused: an input is never written over).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.common import ExitCode, add_model_name, help_text, path_value, print_json, runs_read
from vllm_hpu_mm.models.devices import LOG_DEVICES
from vllm_hpu_mm.plan.args import nonempty, positive_int

if TYPE_CHECKING:
    from vllm_hpu_mm.jobs.calibrate import Calibrated

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``calibrate`` action to ``vllm-hpu-mm memory``."""
    p = sub.add_parser(
        "calibrate",
        help="measure graph costs from a warm-up log and save a profile",
        description=help_text(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("log", nargs="?", default=None,
                   help="the server's start-up log (with its warm-up lines), or - for standard input")  # fmt: skip
    p.add_argument("--metrics", type=path_value, metavar="URL_OR_FILE", default=None,
                   help="a running server's /metrics (http://HOST:PORT/metrics, or a saved page): fit the step time "
                   "from its latency histograms")  # fmt: skip
    add_model_name(p, "--metrics")
    p.add_argument(
        "--model",
        default=None,
        help="the model the log ran: a catalog name or a local model folder; needed for the text-graph factors "
        "(default: the log's model='...' when known here)",
    )
    p.add_argument("--device", default=None, help=f"the device the log ran on: {', '.join(LOG_DEVICES)} (default: not "
                   "recorded)", type=nonempty(", ".join(LOG_DEVICES)))  # fmt: skip
    p.add_argument("--dtype", default="auto", help="the log's weight/KV dtype (default auto: bfloat16)")
    p.add_argument("--tensor-parallel-size", type=positive_int, default=1,
                   help="the log's tensor-parallel size (default 1)")  # fmt: skip
    p.add_argument("--block-size", type=positive_int, default=128, help="the log's KV block size (default 128, Gaudi)")
    p.add_argument(
        "--output",
        type=path_value,
        metavar="FILE",
        default=None,
        help="where to write the profile (default: $VLLM_HPU_MM_PROFILE, else "
        "~/.cache/vllm-hpu-mm/memory-profile.json)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (the profile, its report rows and "
                   "source: who wrote the log, as oom-doctor --json gives it)")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # imported here: every ``memory`` action's parser is built, and the log readers are for this one alone (a
    # ``memory plan`` starts without them)
    from vllm_hpu_mm.jobs.calibrate import CalibrateArgs, calibrate_log
    from vllm_hpu_mm.logs.numbers import skipped_json

    job = calibrate_log(CalibrateArgs(args.log, args.model, args.device, args.dtype, args.tensor_parallel_size,
                                      args.block_size, args.output, args.metrics, args.model_name),
                        envs.load())  # fmt: skip
    result, log, path = job.calibration, job.log, job.written_to
    if args.json:
        print_json(_report(job) | {"skipped": skipped_json(log.skipped)})
    else:
        # the writer as the doctor names it: vllm-gaudi and vllm-fork share the hpu backend but read other knobs
        written = "" if job.writer is None else f"written by {job.writer.describe}; "
        print(f"calibration from {job.source} ({written}model: {job.model_from})")
        if args.log is not None:  # a --metrics page alone has no runs
            print(f"  {runs_read(log.run, log.runs)}")
        width = max(len(r[0]) for r in result.rows)
        for name, value, how in result.rows:
            print(f"  {name:<{width}}  {value:>8}  {how}")
        for line in log.skipped.summary(job.source):
            print(line)
        if job.metrics_unmeasured is not None:
            print(f"nothing measured from {job.metrics_unmeasured}")
        if path is None:
            if args.log is not None:
                print("nothing measurable in this log: no warm-up lines with free_mem, no memory split, no CUDA "
                      "graph memory")  # fmt: skip
        elif args.output is None:
            print(f"profile written to {path}; `vllm-hpu-mm memory plan` reads it from there")
        else:
            print(f"profile written to {path}; plan with it: `vllm-hpu-mm memory plan --profile {path}`")
    return int(ExitCode.OK if path is not None else ExitCode.NEGATIVE)


def _report(job: Calibrated) -> dict[str, Any]:
    from vllm_hpu_mm.logs.profile import profile_dict

    c = job.calibration
    return {
        "profile": profile_dict(c),
        "written_to": None if job.written_to is None else str(job.written_to),
        "model_from": job.model_from,
        "source": None if job.writer is None else job.writer.as_json(),
        "rows": [{"name": n, "value": v, "how": h} for n, v, h in c.rows],
        # the run read, as oom-doctor --json names it: a log of several server starts is read one run at a time
        "run": job.log.run,
        "runs": job.log.runs,
        "metrics_unmeasured": job.metrics_unmeasured,
    }

"""``vllm-hpu-mm buckets plan|check``: plan a vision bucket list for your images, or check the one you have.

Sizes come from ``--sizes CSV|DIR`` (header ``width,height``, or a folder read as ``--images`` reads it) and/or
``--images DIR``; with neither, from a synthetic grid when both ``--min-pixels`` and ``--max-pixels`` are given
(assumption printed), else from the real sizes shipped with the package (COCO val2017 + MathVista testmini). Images
are aligned to 112-px multiples (``VLLM_HPU_MM_ALIGN_MODE``, default nearest) under ``min_pixels`` (default 3136,
Qwen2.5-VL) and ``max_pixels`` (``plan``: the default list's largest bucket x 196 = 12544 x 196; ``check``: the
checked list's largest x 196 under the shrink policy, Qwen2.5-VL's own 12845056 under eager and reject, which do not
cap images). ``check`` exits 1 on a coverage problem: a largest bucket below the largest aligned image under
``max_pixels``, a smallest bucket below one image's least count, or (reject) images the server would refuse.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from vllm_hpu_mm import envs
from vllm_hpu_mm.buckets.planner import Evaluation
from vllm_hpu_mm.cli.buckets_replay import add_parser as add_replay_parser
from vllm_hpu_mm.cli.buckets_stale import add_parser as add_stale_parser
from vllm_hpu_mm.cli.common import ExitCode, add_model_name, help_text, path_value, print_json
from vllm_hpu_mm.jobs.buckets import BUCKETS_VAR, DEFAULT_MIN_PIXELS, MAX_PIXELS, SizeSources, check_job, plan_job
from vllm_hpu_mm.jobs.outputs import check_output
from vllm_hpu_mm.plan.args import count_up_to, fraction, positive_int
from vllm_hpu_mm.values import DEFAULT_BUCKETS, PIXELS_PER_PATCH, AlignMode, OversizePolicy

DEFAULT_NUM_BUCKETS = len(DEFAULT_BUCKETS)
#: An image area: at most what the largest bucket holds.
_pixels = count_up_to(MAX_PIXELS, "larger than any image can be aligned to")


def _add_common(p: argparse.ArgumentParser, *, max_default: str) -> None:
    p.add_argument(
        "--sizes",
        type=path_value,
        metavar="CSV|DIR",
        nargs="+",
        action="extend",
        default=[],
        help="CSV file(s) with a 'width,height' header and one row per image, or folder(s) of images read as "
        "--images reads them, as the other commands' --sizes take them (repeatable)",
    )
    p.add_argument(
        "--images",
        type=path_value,
        metavar="DIR",
        nargs="+",
        action="extend",
        default=[],
        help="folder(s) of images (repeatable); sizes from headers, and each image decoded (a JPEG at 1/8 scale) "
        "as the server does, so one it cannot decode is named, not planned",
    )
    p.add_argument(
        "--from-metrics",
        type=path_value,
        metavar="URL|FILE",
        help="plan over the images a running server counted: its /metrics URL (http://HOST:PORT/metrics) or a saved "
        "exposition file (default: not used)",
    )
    add_model_name(p)
    p.add_argument(
        "--min-pixels",
        type=_pixels,
        metavar="N",
        help=f"smallest image area after alignment (default {DEFAULT_MIN_PIXELS}, Qwen2.5-VL)",
    )
    p.add_argument("--max-pixels", type=_pixels, metavar="N", help=f"largest image area ({max_default})")
    p.add_argument(
        "--align-mode",
        choices=[m.value for m in AlignMode],
        help="112-px alignment mode (default: $VLLM_HPU_MM_ALIGN_MODE, else nearest)",
    )
    p.add_argument(
        "--plot",
        type=path_value,
        metavar="PNG",
        help="also draw the patch-count histogram with bucket edges to this PNG",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "buckets",
        help="plan or check a vision bucket list (VLLM_MULTIMODAL_BUCKETS)",
        description="Plan the vision bucket list that wastes the least compute on your images, or check one.",
    )
    sub = p.add_subparsers(dest="buckets_command", metavar="{plan,check,replay,stale}")
    sub.required = True
    plan = sub.add_parser(
        "plan",
        help="compute the optimal bucket list for an image-size distribution",
        description=help_text(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_common(plan, max_default=f"default {DEFAULT_BUCKETS[-1]} x {PIXELS_PER_PATCH}, the default list's largest")
    goal = plan.add_mutually_exclusive_group()
    goal.add_argument(
        "--num-buckets",
        type=positive_int,
        metavar="K",
        help=f"plan exactly K buckets minimising padded patches (default {DEFAULT_NUM_BUCKETS})",
    )
    goal.add_argument(
        "--target-efficiency",
        type=fraction,
        metavar="X",
        help="plan the fewest buckets whose efficiency (real / padded patches) reaches X, e.g. 0.95",
    )
    plan.add_argument(
        "--keep-largest",
        action="store_true",
        help="make the largest bucket cover max_pixels (max_pixels/196 patches, whole tiles) so that no image is "
        "ever shrunk below max_pixels; it takes one of the K buckets",
    )
    plan.set_defaults(func=run_plan)
    check = sub.add_parser(
        "check",
        help="report a bucket list's efficiency and coverage on an image-size distribution (exit 1 on warnings)",
        description=help_text(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument(
        "buckets",
        nargs="?",
        metavar="BUCKETS",
        help=f"comma-separated patch counts (default: ${BUCKETS_VAR}, else the default list)",
    )
    _add_common(
        check, max_default="default: the largest bucket x 196 under the shrink policy, else 12845056, Qwen2.5-VL's own"
    )
    check.set_defaults(func=run_check)
    add_replay_parser(sub)
    add_stale_parser(sub)


def _sources(args: argparse.Namespace) -> SizeSources:
    # The progress bar is for a person watching: piped or captured stderr keeps just the one error line.
    return SizeSources(tuple(args.sizes), tuple(args.images), args.from_metrics, args.min_pixels, args.max_pixels,
                       AlignMode(args.align_mode) if args.align_mode else None, sys.stderr.isatty(),
                       args.model_name)  # fmt: skip


def _check_plot(args: argparse.Namespace) -> None:
    """``--plot`` checked before anything runs: never over an input or a file of the user's that is not a PNG."""
    if args.plot:
        inputs = [*(("--sizes", s) for s in args.sizes), *(("--images", d) for d in args.images)]
        check_output(args.plot, "--plot", "png", [*inputs, ("--from-metrics", args.from_metrics)])


def _table(ev: Evaluation, policy: OversizePolicy = OversizePolicy.SHRINK) -> list[str]:
    lines = [f"  {'bucket':>7}  {'images':>7}  {'share':>6}  {'real patches':>13}  {'padded':>11}  {'efficiency':>10}"]
    for bucket, hits in ev.per_bucket.items():
        real, padded = ev.per_bucket_real[bucket], bucket * hits
        eff = f"{real / padded:.4f}" if padded else "-"
        lines.append(f"  {bucket:>7}  {hits:>7}  {hits / ev.num_images:>6.1%}  {real:>13}  {padded:>11}  {eff:>10}")
    if ev.num_oversize and policy is OversizePolicy.REJECT:
        lines.append(f"  {'oversize':>7}  {ev.num_oversize:>7}  {ev.num_oversize / ev.num_images:>6.1%}  {'-':>13}"
                     f"  {'-':>11}  {'(HTTP 400)':>10}")  # fmt: skip
    elif ev.num_oversize:
        oversize_real = ev.real_patches - sum(ev.per_bucket_real.values())
        lines.append(
            f"  {'oversize':>7}  {ev.num_oversize:>7}  {ev.num_oversize / ev.num_images:>6.1%}  {oversize_real:>13}"
            f"  {oversize_real:>11}  {'(eager)':>10}"
        )
    lines.append(
        f"  {'total':>7}  {ev.num_images:>7}  {'100%':>6}  {ev.real_patches:>13}  {ev.padded_patches:>11}"
        + (f"  {ev.efficiency:>10.4f}" if ev.padded_patches else f"  {'-':>10}")
    )
    return lines


def _efficiency(ev: Evaluation) -> float | None:
    """The efficiency as a report gives it: none where no image was served (every one refused), as buckets replay
    gives its patch efficiency (r13replay 12's note: 1.0 of 0 / 0 patches)."""
    return round(ev.efficiency, 6) if ev.padded_patches else None


def _report(ev: Evaluation, **extra: Any) -> dict[str, Any]:
    return {
        "buckets": list(ev.buckets),
        "efficiency": _efficiency(ev),
        "num_images": ev.num_images,
        "num_shrunk": ev.num_shrunk,
        "num_oversize": ev.num_oversize,
        "per_bucket": {str(b): n for b, n in ev.per_bucket.items()},
        "real_patches": ev.real_patches,
        "padded_patches": ev.padded_patches,
        **extra,
        "export": f"export {BUCKETS_VAR}={','.join(map(str, ev.buckets))}",
    }


def run_plan(args: argparse.Namespace) -> int:
    _check_plot(args)
    job = plan_job(_sources(args), envs.load(), num_buckets=args.num_buckets,
                   target_efficiency=args.target_efficiency, keep_largest=args.keep_largest)  # fmt: skip
    result, admission, sizes = job.result, job.admission, job.sizes
    ev, default_ev, buckets, notes = result.evaluation, result.default, result.buckets, result.warnings
    if args.plot:
        from vllm_hpu_mm.buckets.plot import plot_histogram

        plot_histogram(result.counts, buckets, args.plot, title=sizes.source, reference=DEFAULT_BUCKETS)
    if args.json:
        print_json(
            _report(
                ev,
                source=sizes.source,
                goal=result.goal,
                align_mode=result.mode.value,
                min_pixels=result.min_pixels,
                max_pixels=result.max_pixels,
                default={"buckets": list(DEFAULT_BUCKETS), "efficiency": round(default_ev.efficiency, 6)},
                oversize_policy=job.policy.value,
                num_rejected=job.rejected,
                refused=admission.as_json(),
                warnings=list(notes),
                notes=list(result.notes),
            )
        )
        return int(ExitCode.OK)
    print(f"Bucket plan for {sizes.source}")
    print(
        f"  {ev.num_images} images aligned to 112 px ({result.mode.value}), min_pixels={result.min_pixels}, "
        f"max_pixels={result.max_pixels}; {ev.num_shrunk} shrunk to fit max_pixels"
    )
    print(f"  goal: {result.goal}")
    print()
    print("\n".join(_table(ev, job.policy)))
    print()
    print(
        f"efficiency {ev.efficiency:.4f} with {len(buckets)} buckets; the default list "
        f"{','.join(map(str, DEFAULT_BUCKETS))} reaches {default_ev.efficiency:.4f} on the same images"
    )
    for note in notes:
        print(f"note: {note}" + ("" if args.keep_largest else " (or plan with --keep-largest)"))
    for note in result.notes:
        print(f"note: {note}")
    if args.plot:
        print(f"histogram written to {args.plot}")
    print(f"export {BUCKETS_VAR}={','.join(map(str, buckets))}")
    return int(ExitCode.OK)


def run_check(args: argparse.Namespace) -> int:
    _check_plot(args)
    job = check_job(args.buckets, _sources(args), envs.load())
    checked, admission, sizes, buckets, source = job.result, job.admission, job.sizes, job.buckets, job.source
    mode, policy = job.mode, job.policy
    ev, rejected, warnings = checked.evaluation, checked.rejected, list(checked.warnings)
    min_pixels, max_pixels = checked.min_pixels, checked.max_pixels
    if args.plot:
        from vllm_hpu_mm.buckets.plot import plot_histogram

        plot_histogram(job.counts, buckets, args.plot, title=sizes.source)  # before any shrink
    code = ExitCode.NEGATIVE if warnings else ExitCode.OK
    if args.json:
        print_json(
            _report(
                ev,
                source=sizes.source,
                buckets_from=source,
                align_mode=mode.value,
                oversize_policy=policy.value,
                num_rejected=rejected,
                refused=admission.as_json(),
                min_pixels=min_pixels,
                max_pixels=max_pixels,
                warnings=warnings,
            )
        )
        return int(code)
    print(f"Bucket check of {','.join(map(str, buckets))} (from {source}) on {sizes.source}")
    shrunk = f"{ev.num_shrunk} shrunk to fit max_pixels" + (f", {rejected} rejected" if rejected else "")
    print(
        f"  {ev.num_images} images aligned to 112 px ({mode.value}), min_pixels={min_pixels}, "
        f"max_pixels={max_pixels}, oversize policy {policy.value}; {shrunk}"
    )
    print()
    print("\n".join(_table(ev, policy)))
    print()
    if not ev.padded_patches:
        print("efficiency: none (no image served)")
    else:
        print(f"efficiency {ev.efficiency:.4f}" + (" (of the images served)" if rejected else ""))
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"export {BUCKETS_VAR}={','.join(map(str, buckets))}")
    return int(code)

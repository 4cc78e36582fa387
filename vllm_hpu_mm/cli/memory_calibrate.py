"""'vllm-hpu-mm memory calibrate LOG': measure graph costs from a warm-up log and save them as a profile that
'memory plan' (and 'serve') use, so the next launch plans with measured numbers instead of estimates.

It reads vllm-gaudi / vllm-fork '[Warmup][Graph/...][i/n] ... free_mem:' lines, their 'Graph/... captured:N
used_mem:X' summaries and the 'Free device memory: ...' line, and vLLM CUDA's graph-capture memory lines; with
--metrics, a running server's /metrics (URL or saved page): a step-time fit from its latency histograms, which the
replay's whole latencies then use.
Exit 0 when a profile was written, 1 when the log measures nothing (no profile written), 2 for invalid input.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.common import ExitCode, help_text, print_json
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.logs.calibrate import Calibration, calibrate, parse_warmup
from vllm_hpu_mm.logs.numbers import skipped_json
from vllm_hpu_mm.logs.profile import profile_dict, save_profile
from vllm_hpu_mm.logs.reading import log_lines
from vllm_hpu_mm.logs.server_metrics import fit_from_metrics, server_times
from vllm_hpu_mm.models.devices import KNOWN_DEVICES
from vllm_hpu_mm.models.dims import ModelDims, dtype_bytes
from vllm_hpu_mm.models.lookup import resolve
from vllm_hpu_mm.plan.args import positive_int
from vllm_hpu_mm.plan.profile import default_profile_path

__all__ = ["add_parser"]

#: The devices a profile can be recorded for: those ``memory plan --device`` names (not ``auto``: a log ran on one).
LOG_DEVICES = (*KNOWN_DEVICES, "cpu")


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
    p.add_argument("--metrics", metavar="URL_OR_FILE", default=None,
                   help="a running server's /metrics (http://HOST:PORT/metrics, or a saved page): fit the step time "
                   "from its latency histograms")  # fmt: skip
    p.add_argument(
        "--model",
        default=None,
        help="the model the log ran: a catalog name or a local model folder; needed for the text-graph factors "
        "(default: the log's model='...' when known here)",
    )
    p.add_argument("--device", default=None, help=f"the device the log ran on: {', '.join(LOG_DEVICES)} (default: not "
                   "recorded)")  # fmt: skip
    p.add_argument("--dtype", default="auto", help="the log's weight/KV dtype (default auto: bfloat16)")
    p.add_argument("--tensor-parallel-size", type=positive_int, default=1,
                   help="the log's tensor-parallel size (default 1)")  # fmt: skip
    p.add_argument("--block-size", type=positive_int, default=128, help="the log's KV block size (default 128, Gaudi)")
    p.add_argument(
        "--output",
        metavar="FILE",
        default=None,
        help="where to write the profile (default: $VLLM_HPU_MM_PROFILE, else "
        "~/.cache/vllm-hpu-mm/memory-profile.json)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (the profile and its report rows)")
    p.set_defaults(func=run)


def _model(args: argparse.Namespace, logged: str | None) -> tuple[ModelDims | None, str]:
    if args.model is not None:
        return resolve(args.model, source="--model"), "--model"
    if logged is not None:
        try:
            return resolve(logged, source="the log's model"), "the log's model='...'"
        except ConfigError:
            return None, f"the log's model {logged!r} is not known here (pass --model)"
    return None, "the log names no model (pass --model)"


def _device(raw: str | None, backend: str | None) -> str | None:
    """The device a profile is recorded for: one a plan names (``memory plan --device``), of the log's backend."""
    if raw is None:
        return None
    key = raw.strip().lower()
    if key not in LOG_DEVICES:
        raise ConfigError(f"--device={raw!r} is not a device a plan knows; accepted: {', '.join(LOG_DEVICES)}")
    if backend is not None and backend != _backend(key):
        same = ", ".join(d for d in LOG_DEVICES if _backend(d) == backend)
        raise ConfigError(f"--device={raw!r} is a {_backend(key)} device but the log is a {backend} server's; "
                          f"accepted: a {backend} device: {same}")  # fmt: skip
    return key


def _backend(device: str) -> str:
    return "cpu" if device == "cpu" else KNOWN_DEVICES[device].backend


def run(args: argparse.Namespace) -> int:
    dtype = dtype_bytes(args.dtype, source="--dtype")
    settings = envs.load()
    if args.log is None and args.metrics is None:
        raise ConfigError("memory calibrate needs a warm-up log, --metrics, or both")
    log = parse_warmup(log_lines(args.log) if args.log is not None else [])
    args.device = _device(args.device, log.backend)
    model, model_note = _model(args, log.model)
    result = calibrate(log, model, device=args.device, source=str(args.log or args.metrics), dtype_size=dtype,
                       tensor_parallel_size=args.tensor_parallel_size, block_size=args.block_size,
                       buckets=settings.multimodal_buckets or ())  # fmt: skip
    if args.metrics is not None:
        result = result.with_step_time(fit_from_metrics(server_times(args.metrics), block_size=args.block_size))
    path = Path(args.output).expanduser() if args.output else default_profile_path(settings.profile)
    written = result.measured_anything
    if written:
        save_profile(result, path)
    if args.json:
        print_json(_report(result, path if written else None, model_note) | {"skipped": skipped_json(log.skipped)})
    else:
        print(
            f"calibration from {args.log or args.metrics} (runtime {result.backend or 'unknown'}; model: {model_note})"
        )
        width = max(len(r[0]) for r in result.rows)
        for name, value, how in result.rows:
            print(f"  {name:<{width}}  {value:>8}  {how}")
        for line in log.skipped.summary(str(args.log)):
            print(line)
        if not written:
            print(
                "nothing measurable in this log: no warm-up lines with free_mem, no memory split, no CUDA graph memory"
            )
        elif args.output is None:
            print(f"profile written to {path}; `vllm-hpu-mm memory plan` reads it from there")
        else:
            print(f"profile written to {path}; plan with it: `vllm-hpu-mm memory plan --profile {path}`")
    return int(ExitCode.OK if written else ExitCode.NEGATIVE)


def _report(c: Calibration, path: Path | None, model_note: str) -> dict[str, Any]:
    return {
        "profile": profile_dict(c),
        "written_to": None if path is None else str(path),
        "model_from": model_note,
        "rows": [{"name": n, "value": v, "how": h} for n, v, h in c.rows],
    }

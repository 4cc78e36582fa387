"""The ``memory calibrate`` job as one library function, :func:`calibrate_log`: read a warm-up log, pick the device
it ran on, resolve the model it ran, measure the graph costs and save them as the profile ``memory plan`` reads;
with a server's ``/metrics`` (URL or saved page), also the step-time fit the replay's whole latencies use.
Never over an input or a file of the user's: an output that is the log itself (or the same file under another name),
or an existing file that is not a profile, is refused before anything is read. ``cli/memory_calibrate.py`` parses
and prints it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from pathlib import Path

from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.jobs.outputs import check_output
from vllm_hpu_mm.logs.calibrate import CALIBRATED, Calibration, WarmupLog, calibrate, parse_warmup
from vllm_hpu_mm.logs.doctor.source import LogSource, SourceSniffer, platform_neutral
from vllm_hpu_mm.logs.profile import save_profile
from vllm_hpu_mm.logs.reading import log_records
from vllm_hpu_mm.logs.server_metrics import TooFewSamples, fit_from_metrics, server_times
from vllm_hpu_mm.models.devices import LOG_DEVICES, backend_of
from vllm_hpu_mm.models.dims import ModelDims, dtype_bytes
from vllm_hpu_mm.models.lookup import resolve
from vllm_hpu_mm.plan.profile import default_profile_path
from vllm_hpu_mm.runtimes.registry import TRAITS

__all__ = [
    "CALIBRATED_ACCELERATORS",
    "LOG_DEVICES",
    "PROFILE_VAR",
    "CalibrateArgs",
    "Calibrated",
    "calibrate_log",
    "check_calibrated_writer",
]

#: The variable naming the default profile path (named in the refusal when it points at an input).
PROFILE_VAR = "VLLM_HPU_MM_PROFILE"


@dataclasses.dataclass(frozen=True)
class CalibrateArgs:
    """What ``memory calibrate`` reads: the log (``-``: standard input) and/or a server's ``/metrics``, and what
    they cannot say themselves."""

    log: str | None
    model: str | None = None
    device: str | None = None
    dtype: str = "auto"
    tensor_parallel_size: int = 1
    block_size: int = 128
    #: Where to write the profile (None: ``$VLLM_HPU_MM_PROFILE``, else the default path).
    output: str | None = None
    #: A running server's /metrics: ``http(s)://HOST:PORT/metrics`` or a saved page.
    metrics: str | None = None
    #: The model_name label to read from a page holding several models' series (``--model-name``).
    model_name: str | None = None


@dataclasses.dataclass(frozen=True)
class Calibrated:
    calibration: Calibration
    log: WarmupLog
    #: Where the profile went; None when the log measured nothing (no profile written).
    written_to: Path | None
    #: Where the model came from, in words (``--model``, the log's model='...', or why there is none).
    model_from: str
    #: What was read, in words (the log, the /metrics source, or both).
    source: str = ""
    #: Who wrote the log, as the doctor reads it (vllm-gaudi and vllm-fork apart, not only the backend); None with
    #: --metrics alone.
    writer: LogSource | None = None
    #: Why --metrics measured nothing (a page with too few samples yet); None when it was fitted or not given.
    metrics_unmeasured: str | None = None


#: The accelerators whose vLLM logs calibrate measures: Gaudi's warm-up lines, CUDA's (and ROCm's: the same torch.cuda
#: lines) graph memory, CPU's.
CALIBRATED_ACCELERATORS = ("hpu", "cuda", "rocm", "cpu")


def check_calibrated_writer(writer: LogSource, source: str) -> None:
    """Refuse a log whose own lines name a writer calibrate does not measure (TGI, MindIE, SGLang, vLLM on TPU or an
    NPU): its figures follow that runtime's arithmetic, and a profile from it would move plans it does not
    describe. A log that names no framework is read as vLLM's."""
    if not writer.named:
        return
    if writer.framework == "vllm" and writer.accelerator in (None, *CALIBRATED_ACCELERATORS):
        return
    raise ConfigError(f"log {source!r} was written by {writer.describe}: memory calibrate measures the logs of vLLM "
                      f"on {', '.join(CALIBRATED_ACCELERATORS)} (vllm-gaudi, vllm-fork, vLLM CUDA and CPU); accepted: "
                      "such a log")  # fmt: skip


def _model(name: str | None, logged: str | None) -> tuple[ModelDims | None, str]:
    if name is not None:
        return resolve(name, source="--model"), "--model"
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
    if backend is not None and backend != backend_of(key):
        same = ", ".join(d for d in LOG_DEVICES if backend_of(d) == backend)
        raise ConfigError(f"--device={raw!r} is a {backend_of(key)} device but the log is a {backend} server's; "
                          f"accepted: a {backend} device: {same}")  # fmt: skip
    return key


def calibrate_log(args: CalibrateArgs, settings: Settings) -> Calibrated:
    """Calibrate from ``args.log`` and save the profile when the log measured anything."""
    if args.log is None and args.metrics is None:
        raise ConfigError("memory calibrate needs a warm-up log, --metrics, or both; accepted: LOG and/or "
                          "--metrics URL_OR_FILE")  # fmt: skip
    dtype = dtype_bytes(args.dtype, source="--dtype")
    path = Path(args.output).expanduser() if args.output else default_profile_path(settings.profile)
    inputs = (
        ({"log": args.log} if args.log is not None else {})
        | ({"--metrics": args.metrics} if args.metrics and "://" not in args.metrics else {})
        | ({"--model": args.model} if args.model and Path(args.model).exists() else {})
    )
    flag = "--output" if args.output else (PROFILE_VAR if settings.profile else "the default profile path")
    # before anything is read: never over an input, nor a file of the user's that is not a profile
    check_output(str(path), flag, "profile", inputs.items(), create_folder=not args.output)
    sniffer = SourceSniffer()

    def sniffed(records: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str]]:
        for record in records:
            sniffer.feed(platform_neutral(record[1]))  # bounded: it reads the first lines only
            yield record

    log = parse_warmup(sniffed(log_records(args.log, CALIBRATED)) if args.log is not None else [])
    writer = sniffer.result() if args.log is not None else None
    if writer is not None and args.log is not None:
        check_calibrated_writer(writer, args.log)
    device = _device(args.device, log.backend)
    model, model_from = _model(args.model, log.model)
    source = " and ".join(s for s in (args.log, args.metrics) if s is not None)
    # whether the free memory was read after a profiling pass is the runtime's (RuntimeTraits.profiles_forward:
    # vllm-gaudi reads it right after load, hpu_worker.py:399-406 @091bbadd; vllm-fork after a pass at the longest
    # sequence), as a log whose runtime is not named is taken to
    known = writer.runtime if writer is not None else None
    after_profile_run = TRAITS[known].profiles_forward if known is not None else True
    # the runtime that measured it, only where the log's lines name it (an unmarked Gaudi log may be either's)
    measured_by = known.value if known is not None and writer is not None and writer.runtime_named else None
    result = calibrate(log, model, device=device, source=source, dtype_size=dtype,
                       tensor_parallel_size=args.tensor_parallel_size, block_size=args.block_size,
                       buckets=settings.multimodal_buckets or (), after_profile_run=after_profile_run,
                       measured_by=measured_by)  # fmt: skip
    unmeasured = None
    if args.metrics is not None:
        times = server_times(args.metrics, args.model_name)
        try:
            result = result.with_step_time(fit_from_metrics(times, block_size=args.block_size))
        except TooFewSamples as exc:  # a valid page that measures nothing yet: as a log that measures nothing
            unmeasured = str(exc)
    written = result.measured_anything
    if written:
        save_profile(result, path)
    return Calibrated(result, log, path if written else None, model_from, source, writer, unmeasured)

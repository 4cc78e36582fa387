"""The memory-cost profile file as a plan input: ``memory plan`` and ``serve`` read it back, validated (``--profile``,
``VLLM_HPU_MM_PROFILE``, or the default path). ``memory calibrate`` writes it (:mod:`vllm_hpu_mm.logs.profile`)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.step_fit import FittedStep, step_from_dict
from vllm_hpu_mm.plan.costs import COST_FIELDS, CostProfile
from vllm_hpu_mm.runtimes.base import Runtime

__all__ = ["PROFILE_VERSION", "MeasuredAt", "Profile", "ProfileRead", "default_profile_path", "load_profile",
           "read_profile"]  # fmt: skip

PROFILE_VERSION = 1
#: What a profile file must be (a flag also takes ``none``: the estimated costs alone).
_ACCEPTED = f"accepted: a version-{PROFILE_VERSION} profile file written by `vllm-hpu-mm memory calibrate`"


def default_profile_path(setting: str | None) -> Path:
    """``VLLM_HPU_MM_PROFILE`` when set, else ``~/.cache/vllm-hpu-mm/memory-profile.json``."""
    return Path(setting).expanduser() if setting else Path.home() / ".cache" / "vllm-hpu-mm" / "memory-profile.json"


@dataclasses.dataclass(frozen=True)
class MeasuredAt:
    """What shaped a measured free memory after load besides the model and device: the card's share of the weights
    (tensor- and pipeline-parallel sizes, quantization) and, where the runtime measured it after a profiling pass at
    the longest sequence (``after_profile_run``: vllm-fork), ``max_model_len``. A profile without this record (written
    before it was kept) reads as one card of an unquantized model: ``memory calibrate``'s defaults then."""

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    quantization: str | None = None
    max_model_len: int | None = None
    after_profile_run: bool = False

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


#: Each field of :class:`MeasuredAt`: the check its value must pass, and what is accepted.
_MEASURED_AT_CHECKS = {
    "tensor_parallel_size": (_positive, "a positive integer"),
    "pipeline_parallel_size": (_positive, "a positive integer"),
    "quantization": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "max_model_len": (lambda v: v is None or _positive(v), "a positive integer or null"),
    "after_profile_run": (lambda v: isinstance(v, bool), "true or false"),
}


def _measured_at(raw: object, where: str) -> MeasuredAt:
    if raw is None:
        return MeasuredAt()
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: free_after_load_measured_at={raw!r}; accepted: an object or null")
    values = dataclasses.asdict(MeasuredAt()) | {k: v for k, v in raw.items() if k in _MEASURED_AT_CHECKS}
    for name, (check, accepted) in _MEASURED_AT_CHECKS.items():
        if not check(values[name]):
            raise ConfigError(f"{where}: free_after_load_measured_at.{name}={values[name]!r}; accepted: {accepted}")
    return MeasuredAt(**values)


@dataclasses.dataclass(frozen=True)
class Profile:
    path: Path
    costs: CostProfile
    backend: str | None
    device: str | None
    model: str | None
    free_after_load_bytes: int | None
    #: The step-time model fitted on the user's server (``memory calibrate --metrics``), when the profile has one.
    step_time: FittedStep | None = None
    #: What shaped ``free_after_load_bytes``.
    measured_at: MeasuredAt = MeasuredAt()
    #: vLLM CUDA's captured graph memory (``Graph capturing finished ... took X GiB``), kept: no plan applies it.
    cuda_graph_bytes: int | None = None
    #: The runtime whose log measured it (``vllm-gaudi``, ``vllm-fork``); None where the log did not name it (or the
    #: profile was written before this was kept).
    measured_by: str | None = None


def load_profile(path: Path, flag: str = "--profile") -> Profile:
    """Read and validate a profile; :class:`ConfigError` naming the flag, the file and the bad key."""
    accepted = f"{_ACCEPTED}, or none" if flag.startswith("--") else _ACCEPTED
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot read it ({exc.strerror or exc}); {accepted}") from None
    except ValueError as exc:
        raise ConfigError(f"{flag} {path}: not JSON ({exc}); {accepted}") from None
    if not isinstance(data, dict) or data.get("version") != PROFILE_VERSION or not isinstance(data.get("costs"), dict):
        raise ConfigError(f"{flag} {path}: not a version-{PROFILE_VERSION} profile; {accepted}")
    costs: dict[str, float | None] = {}
    for name in COST_FIELDS:
        value = data["costs"].get(name)
        if value is not None and (
            not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value) or value < 0
        ):
            raise ConfigError(f"{flag} {path}: costs.{name}={value!r}; accepted: a non-negative number or null")
        costs[name] = None if value is None else float(value)
    measured = tuple(n for n in data.get("measured", []) if n in COST_FIELDS and costs.get(n) is not None)
    free = data.get("free_after_load_bytes")
    if free is not None and (not isinstance(free, int) or free < 0):
        raise ConfigError(f"{flag} {path}: free_after_load_bytes={free!r}; accepted: a non-negative integer or null")
    cuda = data.get("cuda_graph_bytes")
    if cuda is not None and (not isinstance(cuda, int) or isinstance(cuda, bool) or cuda < 0):
        raise ConfigError(f"{flag} {path}: cuda_graph_bytes={cuda!r}; accepted: a non-negative integer or null")
    step = data.get("step_time")
    step_time = None if step is None else step_from_dict(step, f"{flag} {path}")
    measured_at = _measured_at(data.get("free_after_load_measured_at"), f"{flag} {path}")
    by = data.get("measured_by")
    runtimes = [r.value for r in Runtime]
    if by is not None and by not in runtimes:
        raise ConfigError(f"{flag} {path}: measured_by={by!r}; accepted: {', '.join(runtimes)} or null")
    return Profile(path, CostProfile(**costs, measured=measured, source=str(data.get("source", path))),  # type: ignore[arg-type]
                   data.get("runtime"), data.get("device"), data.get("model"), free, step_time,
                   measured_at, cuda, by)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class ProfileRead:
    """The profile a command plans with, read and validated once before any work: the profile, or why none."""

    profile: Profile | None
    #: Why no profile applies (``none`` given, or no file at the default location); None when one was read.
    why_none: str | None = None

    @property
    def step_time(self) -> FittedStep | None:
        """The step time fitted on the user's server (``memory calibrate --metrics``), when the profile has one."""
        return self.profile.step_time if self.profile is not None else None


def read_profile(arg: str | None, setting: str | None, flag: str = "--profile") -> ProfileRead:
    """The one rule every command taking ``--profile`` reads it by: ``none`` for the estimated costs alone; a named
    file must be a valid profile (:class:`ConfigError` otherwise, before any planning: a search over shapes must not
    turn an unreadable file into one refusal per shape); without the flag, ``VLLM_HPU_MM_PROFILE`` or the default
    path, when that file exists."""
    if arg is not None and arg.strip().lower() == "none":
        return ProfileRead(None, f"nothing measured ({flag} none)")
    path = Path(arg).expanduser() if arg else default_profile_path(setting)
    if arg is None and not path.is_file():
        # VLLM_HPU_MM_PROFILE is also where `memory calibrate` writes: a file that is not there yet is no error, but
        # the plan says it looked there (a --profile FILE that is not there is a typo: exit 2).
        where = f"VLLM_HPU_MM_PROFILE={setting} does not exist (yet)" if setting else "no profile"
        return ProfileRead(None, f"nothing measured: {where} (run `vllm-hpu-mm memory calibrate LOG` after a warm-up)")
    return ProfileRead(load_profile(path, flag if arg else "VLLM_HPU_MM_PROFILE / default profile"))

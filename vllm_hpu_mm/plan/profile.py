"""The memory-cost profile file as a plan input: ``memory plan`` and ``serve`` read it back, validated (``--profile``,
``VLLM_HPU_MM_PROFILE``, or the default path). ``memory calibrate`` writes it (:mod:`vllm_hpu_mm.logs.profile`)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.step_fit import FittedStep, step_from_dict
from vllm_hpu_mm.plan.costs import COST_FIELDS, CostProfile

__all__ = ["PROFILE_VERSION", "Profile", "calibrated_step", "default_profile_path", "load_profile"]

PROFILE_VERSION = 1
#: What a profile file must be (a flag also takes ``none``: the estimated costs alone).
_ACCEPTED = f"accepted: a version-{PROFILE_VERSION} profile file written by `vllm-hpu-mm memory calibrate`"


def default_profile_path(setting: str | None) -> Path:
    """``VLLM_HPU_MM_PROFILE`` when set, else ``~/.cache/vllm-hpu-mm/memory-profile.json``."""
    return Path(setting).expanduser() if setting else Path.home() / ".cache" / "vllm-hpu-mm" / "memory-profile.json"


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
    step = data.get("step_time")
    step_time = None if step is None else step_from_dict(step, f"{flag} {path}")
    return Profile(path, CostProfile(**costs, measured=measured, source=str(data.get("source", path))),  # type: ignore[arg-type]
                   data.get("runtime"), data.get("device"), data.get("model"), free, step_time)  # fmt: skip


def calibrated_step(costs: Mapping[str, object]) -> FittedStep | None:
    """The step time fitted on the user's server (``memory calibrate --metrics``), from the profile a plan's costs
    name (``--profile`` or ``VLLM_HPU_MM_PROFILE``); None without one."""
    path = costs.get("profile")
    return load_profile(Path(path)).step_time if isinstance(path, str) else None

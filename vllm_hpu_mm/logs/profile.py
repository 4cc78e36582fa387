"""The memory-cost profile file: what ``memory calibrate`` measured from a warm-up log, written as JSON and read
back (validated) by ``memory plan`` and ``serve`` (``--profile``, ``VLLM_HPU_MM_PROFILE``, or the default path)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.logs.calibrate import Calibration
from vllm_hpu_mm.plan.costs import COST_FIELDS, CostProfile

__all__ = ["PROFILE_VERSION", "Profile", "default_profile_path", "load_profile", "profile_dict", "save_profile"]

PROFILE_VERSION = 1


def default_profile_path(setting: str | None) -> Path:
    """``VLLM_HPU_MM_PROFILE`` when set, else ``~/.cache/vllm-hpu-mm/memory-profile.json``."""
    return Path(setting).expanduser() if setting else Path.home() / ".cache" / "vllm-hpu-mm" / "memory-profile.json"


def profile_dict(c: Calibration) -> dict[str, Any]:
    p = c.profile
    return {
        "version": PROFILE_VERSION,
        "runtime": c.backend,  # the backend (hpu, cuda): the file format keeps its key
        "device": c.device,
        "model": c.model,
        "source": p.source,
        "costs": {name: getattr(p, name) for name in COST_FIELDS},
        "measured": list(p.measured),
        "free_after_load_bytes": c.free_after_load_bytes,
        "cuda_graph_bytes": c.cuda_graph_bytes,
        "cuda_capture_sizes": c.cuda_capture_sizes,
    }


def save_profile(c: Calibration, path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(profile_dict(c), indent=2) + "\n")
    except OSError as exc:
        raise ConfigError(f"--output {path}: cannot write the profile ({exc.strerror or exc})") from None


@dataclasses.dataclass(frozen=True)
class Profile:
    path: Path
    costs: CostProfile
    backend: str | None
    device: str | None
    model: str | None
    free_after_load_bytes: int | None


def load_profile(path: Path, flag: str = "--profile") -> Profile:
    """Read and validate a profile; :class:`ConfigError` naming the flag, the file and the bad key."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ConfigError(
            f"{flag} {path}: not JSON ({exc}); expected a profile written by `memory calibrate`"
        ) from None
    if not isinstance(data, dict) or data.get("version") != PROFILE_VERSION or not isinstance(data.get("costs"), dict):
        raise ConfigError(f"{flag} {path}: not a version-{PROFILE_VERSION} profile of `vllm-hpu-mm memory calibrate`")
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
    return Profile(path, CostProfile(**costs, measured=measured, source=str(data.get("source", path))),  # type: ignore[arg-type]
                   data.get("runtime"), data.get("device"), data.get("model"), free)  # fmt: skip

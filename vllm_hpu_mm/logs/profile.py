"""The memory-cost profile file, written: what ``memory calibrate`` measured from a warm-up log (and a step-time fit
from a server's ``/metrics``), as JSON. The plan
reads it back (:mod:`vllm_hpu_mm.plan.profile`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.logs.calibrate import Calibration
from vllm_hpu_mm.models.step_fit import step_to_dict
from vllm_hpu_mm.plan.costs import COST_FIELDS
from vllm_hpu_mm.plan.profile import PROFILE_VERSION

__all__ = ["profile_dict", "save_profile"]


def profile_dict(c: Calibration) -> dict[str, Any]:
    p = c.profile
    return {
        "version": PROFILE_VERSION,
        "runtime": c.backend,  # the backend (hpu, cuda): the file format keeps its key
        "device": c.device,
        "measured_by": c.measured_by,  # the runtime whose log it is (null: the log does not name it)
        "model": c.model,
        "source": p.source,
        "costs": {name: getattr(p, name) for name in COST_FIELDS},
        "measured": list(p.measured),
        "free_after_load_bytes": c.free_after_load_bytes,
        "free_after_load_measured_at": None if c.measured_at is None else c.measured_at.as_dict(),
        "cuda_graph_bytes": c.cuda_graph_bytes,
        "cuda_capture_sizes": c.cuda_capture_sizes,
        "step_time": None if c.step_time is None else step_to_dict(c.step_time),
    }


def save_profile(c: Calibration, path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(profile_dict(c), indent=2) + "\n")
    except OSError as exc:
        raise ConfigError(
            f"--output {path}: cannot write the profile ({exc.strerror or exc}); accepted: a path in a writable folder"
        ) from None

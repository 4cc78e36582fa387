"""The ``oom-doctor`` job as one library function, :func:`diagnose_log`: the model named checked first (an unknown
one is invalid input, not ignored), then the log read and diagnosed. ``cli/oom_doctor.py`` prints it."""

from __future__ import annotations

from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.logs.doctor import Diagnosis, diagnose_file
from vllm_hpu_mm.models.lookup import resolve

__all__ = ["diagnose_log"]


def diagnose_log(log: str, settings: Settings, model: str | None = None) -> Diagnosis:
    """``log`` (a path, or ``-`` for standard input; streamed) diagnosed; ``model``: the model to re-plan with."""
    if model is not None:
        resolve(model, source="--model")
    return diagnose_file(log, settings, model)

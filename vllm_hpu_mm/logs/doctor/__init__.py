"""The OOM doctor: read a vLLM server log (Gaudi, CUDA or CPU) whole, find the out-of-memory failure, say at which
stage it happened (startup, kv_cache, graph_capture, runtime; ``unknown`` when nothing in the log says; ``none``
without a failure), how sure it is, quote the evidence and recommend settings for that runtime.

:mod:`vllm_hpu_mm.logs.patterns` holds what is looked for, :mod:`vllm_hpu_mm.logs.reading` streams and decodes a
log file, :mod:`.scan` gives the verdict in one bounded-memory pass (its docstring states the rules), :mod:`.advice`
the recommendations (re-planning from the log's own memory split).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.logs.doctor.advice import contradictions, recommend
from vllm_hpu_mm.logs.doctor.scan import STAGES, Diagnosis, Evidence, GaudiMemory, diagnose_lines
from vllm_hpu_mm.logs.reading import log_lines

__all__ = [
    "STAGES",
    "Diagnosis",
    "Evidence",
    "GaudiMemory",
    "contradictions",
    "diagnose",
    "diagnose_file",
    "diagnose_lines",
    "recommend",
]


def diagnose(lines: Iterable[str], settings: Settings, model: str | None = None) -> Diagnosis:
    """Classify ``lines`` (streamed: memory stays bounded) and recommend."""
    d = diagnose_lines(lines)
    return dataclasses.replace(d, recommendations=recommend(d, settings, model))


def diagnose_file(path: str, settings: Settings, model: str | None = None) -> Diagnosis:
    """:func:`diagnose` on a log file (or ``-`` for standard input), streamed. Raises
    :class:`~vllm_hpu_mm.errors.ConfigError` for a log that cannot be read, is binary or is empty."""
    return diagnose(log_lines(path), settings, model)

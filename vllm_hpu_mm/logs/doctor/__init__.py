"""The OOM doctor: read a server log (vLLM V0/V1, vllm-gaudi, vllm-fork, TGI; Gaudi, CUDA, ROCm or CPU) whole, find
the out-of-memory failure of its last failing run, say at which stage of the server's life it happened (startup,
kv_cache, graph_capture, runtime; ``unknown`` when nothing in the log says; ``none`` without a failure), how sure it
is, quote the evidence and recommend settings for that runtime.

:mod:`vllm_hpu_mm.logs.reading` streams and decodes a log file, :mod:`vllm_hpu_mm.logs.patterns` holds what is looked
for, :mod:`.scan` keeps a run's features in one bounded-memory pass, :mod:`.phases` says what a traceback's frames
mean, :mod:`.decide` weighs the features under fitted :class:`~.decide.Rules`, :mod:`.source` says which framework,
accelerator and runtime wrote the log, :mod:`.advice` recommends only what that writer reads (re-planning from the
log's own memory split).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.logs.doctor.advice import contradictions, recommend, settings_of
from vllm_hpu_mm.logs.doctor.decide import STAGES, Diagnosis, Evidence, Rules, decide, default_rules
from vllm_hpu_mm.logs.doctor.scan import GaudiMemory, scan
from vllm_hpu_mm.logs.doctor.source import LogSource
from vllm_hpu_mm.logs.reading import log_records
from vllm_hpu_mm.models.lookup import resolve

__all__ = [
    "STAGES",
    "Diagnosis",
    "Evidence",
    "GaudiMemory",
    "LogSource",
    "Rules",
    "contradictions",
    "diagnose",
    "diagnose_file",
    "diagnose_lines",
    "recommend",
]


def diagnose_lines(lines: Iterable[str] | Iterable[tuple[int, str]], rules: Rules | None = None) -> Diagnosis:
    """Classify a log given as lines or ``(line number, text)`` records (no I/O, no advice), streamed."""
    return decide(scan(lines), rules or default_rules())


def diagnose(lines: Iterable[str] | Iterable[tuple[int, str]], settings: Settings, model: str | None = None,
             rules: Rules | None = None) -> Diagnosis:  # fmt: skip
    """Classify ``lines`` (streamed: memory stays bounded) and recommend."""
    d = diagnose_lines(lines, rules)
    advice = recommend(d, settings, model, _is_vision(model))
    return dataclasses.replace(d, recommendations=tuple(a.text for a in advice), settings=settings_of(d, advice))


def _is_vision(model: str | None) -> bool | None:
    """Whether ``--model`` is a vision model (None: not given, or not known here: the log's word stands)."""
    if model is None:
        return None
    try:
        return resolve(model, source="--model").vision.present
    except ConfigError:
        return None


def diagnose_file(path: str, settings: Settings, model: str | None = None) -> Diagnosis:
    """:func:`diagnose` on a log file (or ``-`` for standard input), streamed. Raises
    :class:`~vllm_hpu_mm.errors.ConfigError` for a log that cannot be read, is binary, holds only NUL bytes or is
    empty."""
    return diagnose(log_records(path), settings, model)

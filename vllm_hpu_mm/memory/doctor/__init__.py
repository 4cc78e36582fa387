"""The OOM doctor: read a vLLM server log (Gaudi, CUDA or CPU) whole, find the out-of-memory failure, say at which
stage it happened (startup, kv_cache, graph_capture, runtime; ``unknown`` when nothing in the log says; ``none``
without a failure), how sure it is, quote the evidence and recommend settings for that runtime.

``patterns`` holds what is looked for, ``reading`` streams and decodes a log file, ``scan`` gives the verdict in one
bounded-memory pass (its docstring states the rules), ``advice`` the recommendations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.memory.doctor.advice import contradictions, recommend
from vllm_hpu_mm.memory.doctor.reading import log_lines
from vllm_hpu_mm.memory.doctor.scan import STAGES, Diagnosis, Evidence, GaudiMemory, Scanner, diagnose_lines

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
    """Classify and recommend."""
    d = diagnose_lines(lines)
    return dataclasses.replace(d, recommendations=recommend(d, settings, model))


def diagnose_file(path: str, settings: Settings, model: str | None = None) -> Diagnosis:
    """:func:`diagnose` on a log file (or ``-`` for standard input), streamed. Raises
    :class:`~vllm_hpu_mm.errors.ConfigError` for a log that cannot be read, is binary or is empty."""
    scanner = Scanner()
    for text in log_lines(path):
        scanner.feed(text)
    d = scanner.result()
    return dataclasses.replace(d, recommendations=recommend(d, settings, model))

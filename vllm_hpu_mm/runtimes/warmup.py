"""How long a runtime's start-up warm-up takes, graph by graph: a per-graph time by phase (prompt, decode, vision) and
shape, for the runtime's warm-up era, fitted on public Gaudi logs with per-bucket timestamps by
``benchmarks/fits/warmup_time_fitting.py`` and shipped as data (``data/warmup_times.json``, with its held-out error:
leave one log out).

Two eras, as the runtimes' own code warms (read at the cited commits):

- ``two_pass``: vllm-fork before #1178 (6bac2f76b, 2025-06-12): ``warmup_all_buckets`` runs every bucket eagerly,
  under ``--enforce-eager`` too, then captures HPU graphs.
- ``one_pass``: vllm-fork after #1178, from 1.22 (``vllm/worker/hpu_model_runner.py`` ``warmup_model``
  @2e9b2b3d4:3165, v0.9.0.1+Gaudi-1.22.0) and vllm-gaudi
  (``v1/worker/hpu_model_runner.py`` ``warmup_model`` @091bbadd): ``warmup_graphs`` once per bucket and no text
  warm-up under ``--enforce-eager``; vllm-gaudi still warms its vision buckets then.

A runtime names its era in :attr:`~vllm_hpu_mm.runtimes.base.RuntimeTraits.warmup_era` ("" where no estimate exists:
no public figure for CUDA graph capture or the CPU backend was fitted). The plan reads it through
:mod:`vllm_hpu_mm.runtimes.base`, which re-exports :func:`warmup_estimate` (this module imports nothing of it).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterable
from importlib import resources
from typing import Any, Protocol

from vllm_hpu_mm.errors import ConfigError

__all__ = ["DATA_FILE", "ERAS", "WarmupEra", "WarmupEstimate", "era", "warmup_estimate"]

DATA_FILE = "warmup_times.json"
ERAS = ("two_pass", "one_pass")


class WarmsUp(Protocol):
    """What the estimate reads of a runtime's traits: its warm-up era."""

    @property
    def warmup_era(self) -> str: ...


@dataclasses.dataclass(frozen=True)
class WarmupEra:
    """One era's fitted per-graph seconds: ``coefficients[pass][phase] = (a, b)`` for ``a + b x work``."""

    name: str
    label: str
    eager_pass_always: bool
    coefficients: dict[str, dict[str, tuple[float, float]]]
    dev: tuple[str, ...]
    heldout: tuple[str, ...]
    #: Largest |planned - logged| / logged on the held-out logs, each predicted by a fit on the era's other logs
    #: (None: no held-out log of this era).
    heldout_error: float | None
    max_prompt_tokens_fitted: int
    #: Median of the same errors (None: not recorded).
    heldout_median_error: float | None = None

    def seconds(self, kind: str, phase: str, work: float) -> float:
        a, b = self.coefficients[kind]["prompt" if phase == "vision" else phase]
        return a + b * work


@functools.cache
def _doc() -> dict[str, Any]:
    text = resources.files("vllm_hpu_mm").joinpath("data").joinpath(DATA_FILE).read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def era(name: str) -> WarmupEra:
    """The fitted era ``name`` (one of :data:`ERAS`)."""
    eras = _doc()["eras"]
    if name not in eras:
        raise ConfigError(f"warm-up era {name!r} is unknown; accepted: {', '.join(sorted(eras))}")
    e = eras[name]
    coefficients = {k: {ph: (float(v[0]), float(v[1])) for ph, v in phases.items()}
                    for k, phases in e["coefficients"].items()}  # fmt: skip
    return WarmupEra(name, e["label"], bool(e["eager_pass_always"]), coefficients, tuple(e["dev"]),
                     tuple(e["heldout"]), e["heldout_error"], int(e["max_prompt_tokens_fitted"]),
                     e.get("heldout_median_error"))  # fmt: skip


@dataclasses.dataclass(frozen=True)
class WarmupEstimate:
    """How long warming takes: seconds by phase over the graphs warmed, with the era it was fitted for."""

    graphs: int
    by_phase: dict[str, float]
    era: WarmupEra
    #: The largest prompt graph warmed lies above the fitted token range (the time is an extrapolation).
    extrapolated: bool = False

    @property
    def seconds(self) -> float:
        return sum(self.by_phase.values())

    @property
    def seconds_per_graph(self) -> float:
        return self.seconds / self.graphs if self.graphs else 0.0

    @property
    def source(self) -> str:
        dev, held, median = len(self.era.dev), len(self.era.heldout), self.era.heldout_median_error
        checked = f"median {median:.0%}, " if median is not None else ""
        return (
            f"per graph by phase and shape, {self.era.label}; fitted on {dev} public Gaudi2 log(s), each checked held "
            f"out against a fit on the others ({checked}{held} logs): benchmarks/fits/results/warmup_time_fit.md"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 1), "graphs": self.graphs,
                "seconds_per_graph": round(self.seconds_per_graph, 3),
                "by_phase": {k: round(v, 1) for k, v in self.by_phase.items()}, "era": self.era.name,
                "heldout_error": self.era.heldout_error, "extrapolated": self.extrapolated, "label": "calibrated",
                "source": self.source}  # fmt: skip


def warmup_estimate(
    traits: WarmsUp,
    *,
    prompt: Iterable[tuple[int, int, int]] = (),
    decode: Iterable[tuple[int, int]] = (),
    vision: Iterable[int] = (),
    block_size: int = 128,
    eager: bool = False,
    era_name: str | None = None,
    captured: tuple[list[tuple[int, int, int]], list[tuple[int, int]]] | None = None,
) -> WarmupEstimate | None:
    """The warm-up time of a runtime that warms ``prompt`` buckets (batch, query, context blocks), ``decode`` buckets
    (batch, KV blocks) and ``vision`` buckets (patches); None where the runtime has no fitted era. Under ``eager``
    a one-pass runtime warms no text graph (its vision buckets still warm); a two-pass one still runs every bucket
    once. ``era_name`` overrides the runtime's era (a log of another release); ``captured`` (prompt, decode) names the
    buckets a two-pass runtime captured as graphs where it stopped short of all (a log's summary)."""
    name = era_name or traits.warmup_era
    if not name:
        return None
    e = era(name)
    prompt, decode, vision = list(prompt), list(decode), list(vision)
    passes = ["eager"] if e.eager_pass_always else []
    if not eager:
        passes.append("graph")
    by_phase = {"prompt": 0.0, "decode": 0.0, "vision": 0.0}
    graphs = 0
    for kind in passes:
        if kind not in e.coefficients:
            continue
        p, d = captured if (captured is not None and kind == "graph" and e.eager_pass_always) else (prompt, decode)
        for bs, query, ctx in p:
            by_phase["prompt"] += e.seconds(kind, "prompt", bs * (query + ctx * block_size) / 1e3)
        for _bs, blocks in d:  # a decode bucket's blocks are its batch's total: the work is those tokens
            by_phase["decode"] += e.seconds(kind, "decode", blocks * block_size / 1e6)
        graphs += len(p) + len(d)
    kind = "graph" if "graph" in e.coefficients else "eager"
    for patches in vision:
        by_phase["vision"] += e.seconds(kind, "vision", patches / 1e3)
    graphs += len(vision)
    largest = max((bs * (q + c * block_size) for bs, q, c in prompt), default=0)
    return WarmupEstimate(graphs, by_phase, e, largest > e.max_prompt_tokens_fitted)

"""Replay: a schedule (:mod:`.scheduler`) through a runtime's bucket lookup (``RuntimeModel.text_lookup``), and what
it would do: graphs warmed, shapes compiled at run time (with and without warm-up), fallback buckets, and how much
of each graph is real work.

Efficiencies, each real / padded over every forward, weighted by how often it ran:

- prefill tokens: real query tokens / (bucket batch x bucket query);
- prefill context: real context blocks / (bucket batch x bucket context blocks), where a bucket has context;
- decode slots: real sequences / bucket batch;
- decode blocks: real KV blocks / bucket blocks.

A trace per load level can be replayed together (``balanced``): each level then weighs the same in each phase, so
the figures hold "at every load" rather than at the load that ran the most steps.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from functools import partial

from vllm_hpu_mm.engine import GraphRun, KeptWhileNoFallback, TextLookup
from vllm_hpu_mm.replay.latency import Latency
from vllm_hpu_mm.replay.scheduler import Arrivals, DecodeRun, Trace
from vllm_hpu_mm.replay.timing import Timer, TimeResult, TraceClock, chunk_key

__all__ = ["Efficiency", "ReplayResult", "load_of", "replay", "shape_weights"]

Shape = tuple[int, int, int]
#: Most distinct prefill steps whose forwards a replay keeps (a bound on its memory; past it, it starts again).
FORWARDS_KEPT = 1 << 16


@dataclasses.dataclass(frozen=True)
class Efficiency:
    real: float
    padded: float

    @property
    def value(self) -> float:
        return self.real / self.padded if self.padded else 1.0


@dataclasses.dataclass(frozen=True)
class ReplayResult:
    label: str
    #: Graphs warmed at start-up (prompt, decode).
    warmed: tuple[int, int]
    #: Distinct shapes that ran without a warmed graph: each compiled once, while a request waited.
    compiles: tuple[tuple[str, Shape], ...]
    #: Buckets the lookup generated because none covered a shape.
    fallbacks: tuple[tuple[str, Shape], ...]
    #: Distinct shapes that ran: what compiles on first use under VLLM_SKIP_WARMUP=true.
    shapes_run: tuple[int, int]
    prefill_tokens: Efficiency
    prefill_context: Efficiency
    decode_slots: Efficiency
    decode_blocks: Efficiency
    #: (phase, bucket) -> (weighted runs, real, padded) on the phase's first axis (tokens, slots).
    per_bucket: dict[tuple[str, Shape], tuple[float, float, float]]
    #: The replay in time, one per trace (load), when a time model was given.
    times: tuple[TimeResult, ...] = ()
    #: The shapes warmed at start-up, (phase, shape) sorted: what the warm-up time depends on.
    warmed_shapes: tuple[tuple[str, Shape], ...] = ()
    #: Whole latencies per load on the configuration's own schedule (its steps at its buckets' shapes), when the
    #: replay ran in time (:mod:`vllm_hpu_mm.replay.whole`).
    latency: tuple[Latency, ...] = ()

    @property
    def compiles_by_phase(self) -> tuple[int, int]:
        return (sum(1 for p, _ in self.compiles if p == "prompt"), sum(1 for p, _ in self.compiles if p == "decode"))


def _weights(traces: Sequence[Trace], balanced: bool) -> list[tuple[float, float]]:
    """Per trace: (prefill weight, decode weight) per run, so that each trace weighs the same (balanced) or by what
    ran (not)."""
    out = []
    for t in traces:
        if not balanced:
            out.append((1.0, 1.0))
            continue
        prefills = sum(len(e) for e in t.events if not isinstance(e, DecodeRun))
        decodes = sum(e.steps for e in t.events if isinstance(e, DecodeRun))
        out.append((1.0 / prefills if prefills else 0.0, 1.0 / decodes if decodes else 0.0))
    return out


def load_of(trace: Trace) -> str:
    """A trace's load, in words."""
    arrivals = trace.arrivals if trace.arrivals is not None else Arrivals(concurrency=trace.concurrency)
    return arrivals.describe()


def replay(traces: Sequence[Trace], lookup: TextLookup, label: str, *, balanced: bool = False,
           timer: Timer | None = None) -> ReplayResult:  # fmt: skip
    """Every trace through ``lookup``, in order (its fallback buckets carry from one trace to the next, as on a server
    whose load changes); with a ``timer``, each trace in time too."""
    tally = {k: [0.0, 0.0] for k in ("tokens", "context", "slots", "blocks")}
    per_bucket: dict[tuple[str, Shape], list[float]] = {}
    ran: dict[tuple[str, Shape], None] = {}
    compiles: dict[tuple[str, Shape], None] = {}

    def count(run: GraphRun, weight: float) -> None:
        key = (run.phase, run.shape)
        ran.setdefault(key)
        if key not in lookup.warmed:
            compiles.setdefault(key)
        b, q, c = run.shape
        if run.phase == "prompt":
            first = (run.tokens, b * q)
            tally["tokens"][0] += weight * run.tokens
            tally["tokens"][1] += weight * b * q
            if c:
                tally["context"][0] += weight * run.blocks
                tally["context"][1] += weight * b * c
        else:
            first = (run.requests, b)
            tally["slots"][0] += weight * run.requests
            tally["slots"][1] += weight * b
            tally["blocks"][0] += weight * run.blocks
            tally["blocks"][1] += weight * c
        entry = per_bucket.setdefault((run.phase, run.bucket), [0.0, 0.0, 0.0])
        entry[0] += weight
        entry[1] += weight * first[0]
        entry[2] += weight * first[1]

    # a step's prefill forwards and decode forward, kept while the lookup generates no fallback (the same shapes recur
    # across a trace; the lookup reads a chunk's context in blocks)
    kept = KeptWhileNoFallback[list[GraphRun]](lookup, FORWARDS_KEPT)
    kept_decode = KeptWhileNoFallback[GraphRun](lookup, FORWARDS_KEPT)

    def decode(sequences: int, blocks: int) -> GraphRun:
        return kept_decode((sequences, blocks), lambda: lookup.decode(sequences, blocks))

    # unbalanced, every weight is a whole number (1 per prefill, the steps per decode run) and so is every figure it
    # multiplies: the sums are exact in any order, so a kept answer's runs are counted once, by its summed weight, in
    # the order answers were first seen (the order each bucket first ran in). Balanced weights are fractions: counted
    # as they come.
    later: dict[int, tuple[list[GraphRun] | GraphRun, list[float]]] = {}

    def counted(runs: list[GraphRun] | GraphRun, weight: float) -> None:
        if balanced:
            for run in runs if isinstance(runs, list) else (runs,):
                count(run, weight)
            return
        got = later.get(id(runs))  # the entry holds the answer: its id is not reused while counted
        if got is None:
            later[id(runs)] = (runs, [weight])
        else:
            got[1][0] += weight

    times = []
    for trace, (wp, wd) in zip(traces, _weights(traces, balanced), strict=True):
        clock = TraceClock(timer, trace) if timer is not None else None
        block = trace.limits.block_size
        timer_key = timer is not None and timer.step.block_size == block  # the step model reads the same key
        for i, event in enumerate(trace.events):
            if isinstance(event, DecodeRun):
                run = decode(event.sequences, event.blocks)
                counted(run, wd * event.steps)
                if clock is not None:
                    clock.decode(i, event.steps, event.sequences, event.blocks, run)
            else:
                key = chunk_key(event, block)
                runs = kept(key, partial(lookup.prefill, event))
                counted(runs, wp)
                if clock is not None:
                    clock.prefill(i, event, runs, key if timer_key else None)
        if clock is not None:
            times.append(clock.result(load_of(trace)))
    for answer, (weight,) in later.values():
        for run in answer if isinstance(answer, list) else (answer,):
            count(run, weight)
    warmed = (sum(1 for p, _ in lookup.warmed if p == "prompt"), sum(1 for p, _ in lookup.warmed if p == "decode"))
    return ReplayResult(
        label=label,
        warmed=warmed,
        compiles=tuple(compiles),
        fallbacks=tuple(lookup.fallbacks()),
        shapes_run=(sum(1 for p, _ in ran if p == "prompt"), sum(1 for p, _ in ran if p == "decode")),
        prefill_tokens=Efficiency(*tally["tokens"]),
        prefill_context=Efficiency(*tally["context"]),
        decode_slots=Efficiency(*tally["slots"]),
        decode_blocks=Efficiency(*tally["blocks"]),
        per_bucket={k: (v[0], v[1], v[2]) for k, v in per_bucket.items()},
        times=tuple(times),
        warmed_shapes=tuple(sorted(lookup.warmed)),
    )


def shape_weights(traces: Sequence[Trace], *, balanced: bool = False, scale: float = 1e6,
                  ) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:  # fmt: skip
    """What the traces ran, as a planner reads it: prefill (query, context blocks) -> weight and decode (sequences,
    blocks) -> weight (integers; with ``balanced``, each trace scaled to ``scale`` per phase)."""
    prefill: dict[tuple[int, int], float] = {}
    decode: dict[tuple[int, int], float] = {}
    for trace, (wp, wd) in zip(traces, _weights(traces, balanced), strict=True):
        fp, fd = (wp * scale, wd * scale) if balanced else (1.0, 1.0)
        block = trace.limits.block_size
        for event in trace.events:
            if isinstance(event, DecodeRun):
                key = (event.sequences, event.blocks)
                decode[key] = decode.get(key, 0.0) + fd * event.steps
            else:
                for chunk in event:
                    key = (chunk.query, math.ceil(chunk.context / block))
                    prefill[key] = prefill.get(key, 0.0) + fp
    return ({k: max(1, round(v)) for k, v in prefill.items()}, {k: max(1, round(v)) for k, v in decode.items()})

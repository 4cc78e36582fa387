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
from collections.abc import Callable, Hashable, Sequence
from functools import partial

import numpy as np
import numpy.typing as npt

from vllm_hpu_mm.engine import GraphRun, KeptWhileNoFallback, TextLookup, listed_buckets
from vllm_hpu_mm.replay.latency import Latency
from vllm_hpu_mm.replay.scheduler import Arrivals, DecodeRun, Trace
from vllm_hpu_mm.replay.timing import (
    Timer,
    TimeResult,
    TraceClock,
    added_until,
    chunk_key,
    real_ttft,
    sequential_sum,
    time_result,
)

__all__ = ["Efficiency", "ReplayResult", "load_of", "prepare", "replay", "shape_weights"]

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
    #: Buckets the strategy or bucket file lists (prompt, decode): fewer than ``warmed`` where the runtime adds
    #: decode buckets to them at start-up (speculative decoding; :func:`vllm_hpu_mm.engine.listed_buckets`).
    listed: tuple[int, int] = (0, 0)

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


class _Tally:
    """What a replay counts of the forwards that ran: the efficiencies' sums, each bucket's runs, the shapes that ran
    and those that compiled (each in the order first seen)."""

    def __init__(self, lookup: TextLookup) -> None:
        self.lookup = lookup
        self.sums = {k: [0.0, 0.0] for k in ("tokens", "context", "slots", "blocks")}
        self.per_bucket: dict[tuple[str, Shape], list[float]] = {}
        self.ran: dict[tuple[str, Shape], None] = {}
        self.compiles: dict[tuple[str, Shape], None] = {}

    def count(self, run: GraphRun, weight: float) -> None:
        key = (run.phase, run.shape)
        self.ran.setdefault(key)
        if key not in self.lookup.warmed:
            self.compiles.setdefault(key)
        b, q, c = run.shape
        tally = self.sums
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
        entry = self.per_bucket.setdefault((run.phase, run.bucket), [0.0, 0.0, 0.0])
        entry[0] += weight
        entry[1] += weight * first[0]
        entry[2] += weight * first[1]

    def counted(self, answer: list[GraphRun] | GraphRun, weight: float) -> None:
        for run in answer if isinstance(answer, list) else (answer,):
            self.count(run, weight)

    def result(self, label: str, times: Sequence[TimeResult]) -> ReplayResult:
        lookup, tally = self.lookup, self.sums
        warmed = (sum(1 for p, _ in lookup.warmed if p == "prompt"), sum(1 for p, _ in lookup.warmed if p == "decode"))
        return ReplayResult(
            label=label,
            warmed=warmed,
            compiles=tuple(self.compiles),
            fallbacks=tuple(lookup.fallbacks()),
            shapes_run=(sum(1 for p, _ in self.ran if p == "prompt"), sum(1 for p, _ in self.ran if p == "decode")),
            prefill_tokens=Efficiency(*tally["tokens"]),
            prefill_context=Efficiency(*tally["context"]),
            decode_slots=Efficiency(*tally["slots"]),
            decode_blocks=Efficiency(*tally["blocks"]),
            per_bucket={k: (v[0], v[1], v[2]) for k, v in self.per_bucket.items()},
            times=tuple(times),
            warmed_shapes=tuple(sorted(lookup.warmed)),
            listed=listed_buckets(lookup),
        )


def prepare(traces: Sequence[Trace], *, balanced: bool = False) -> None:
    """What every replay of ``traces`` reads of them worked out now (their events' keys and units), where they are
    replayed by their distinct events: once here, for every configuration replayed after, here or in a child forked
    after."""
    if len(traces) == 1 and not balanced:
        _indexed(traces[0])


def replay(traces: Sequence[Trace], lookup: TextLookup, label: str, *, balanced: bool = False,
           timer: Timer | None = None) -> ReplayResult:  # fmt: skip
    """Every trace through ``lookup``, in order (its fallback buckets carry from one trace to the next, as on a server
    whose load changes); with a ``timer``, each trace in time too. One trace weighed by what ran (a known load, or
    arrivals in time) is replayed by its distinct events (:func:`_replay_indexed`); the same figures, bit for bit."""
    tally = _Tally(lookup)
    if len(traces) == 1 and not balanced and (timer is None or timer.step.block_size == traces[0].limits.block_size):
        return tally.result(label, _replay_indexed(traces[0], lookup, tally, timer))
    return tally.result(label, _replay_steps(traces, lookup, tally, balanced, timer))


def _replay_steps(traces: Sequence[Trace], lookup: TextLookup, tally: _Tally, balanced: bool,
                  timer: Timer | None) -> list[TimeResult]:  # fmt: skip
    """:func:`replay` event by event."""
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
            tally.counted(runs, weight)
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
        tally.counted(answer, weight)
    return times


@dataclasses.dataclass(frozen=True)
class _Indexed:
    """One trace's events as every replay of it reads them, the same for each configuration: each event's key (what
    a lookup and a price read of it: a decode's (sequences, blocks), a step's :func:`chunk_key`) as an index into
    the distinct keys, its steps and start step, and each request's steps (:func:`time_result`)."""

    keys: list[Hashable]
    ids: npt.NDArray[np.int64]
    decode: npt.NDArray[np.bool_]
    steps: npt.NDArray[np.int64]
    starts: npt.NDArray[np.int64]
    spans: npt.NDArray[np.int64]
    real_ttft: tuple[float, float]
    #: The distinct decodes (sequences, blocks) and chunks (query, context blocks), each a unit, numbered in the
    #: order first run (decodes from 0, chunks after them in :attr:`order`); each unit's weight (a decode: its steps;
    #: a chunk: its runs); each decode event's unit; each chunk run's event, unit and place in its step.
    decodes: list[tuple[int, int]]
    chunks: list[tuple[int, int]]
    order: npt.NDArray[np.int64]
    weight: list[float]
    event_unit: npt.NDArray[np.int64]
    chunk_event: npt.NDArray[np.int64]
    chunk_unit: npt.NDArray[np.int64]
    #: The chunk runs at each place in their step (0: every step's first chunk, ...).
    places: list[npt.NDArray[np.int64]]


#: The last trace indexed (every configuration replays the same common schedule, here or in a child forked after).
_INDEXED: list[tuple[Trace, _Indexed]] = []


def _indexed(trace: Trace) -> _Indexed:
    if _INDEXED and _INDEXED[0][0] is trace:
        return _INDEXED[0][1]
    block, ids = trace.limits.block_size, dict[Hashable, int]()
    of: list[int] = []
    decode: list[bool] = []
    steps: list[int] = []
    units: dict[tuple[int, int, int], int] = {}  # (0 decode | 1 chunk, ...) -> unit, numbered as first run
    event_unit: list[int] = []
    chunk_event: list[int] = []
    chunk_unit: list[int] = []
    chunk_place: list[int] = []
    for i, event in enumerate(trace.events):
        if isinstance(event, DecodeRun):
            key: Hashable = (event.sequences, event.blocks)
            decode.append(True)
            steps.append(event.steps)
            event_unit.append(units.setdefault((0, event.sequences, event.blocks), len(units)))
        else:
            key = chunk_key(event, block)
            decode.append(False)
            steps.append(1)
            event_unit.append(-1)
            for place, (query, ctx) in enumerate(key):  # type: ignore[attr-defined]
                chunk_event.append(i)
                chunk_unit.append(units.setdefault((1, query, ctx), len(units)))
                chunk_place.append(place)
        k = ids.get(key)
        if k is None:
            k = ids[key] = len(ids)
        of.append(k)
    n = len(trace.events)
    starts = np.arange(n, dtype=np.int64)
    starts[: min(n, len(trace.starts))] = trace.starts[:n]  # an event past the recorded starts: its own index
    spans = trace.spans
    at = np.array([(s.arrival, s.first + 1, s.finish + 1, s.output) for s in spans], dtype=np.int64).reshape(-1, 4)
    # units renumbered: decodes first, then chunks, each in the order first run; ``order`` lists them as first run
    kinds = np.array([kind for kind, _, _ in units], dtype=np.int64).reshape(-1)
    renumber = np.empty(len(units), dtype=np.int64)
    renumber[kinds == 0] = np.arange(int((kinds == 0).sum()))
    renumber[kinds == 1] = int((kinds == 0).sum()) + np.arange(int((kinds == 1).sum()))
    steps_a = np.array(steps, dtype=np.int64)
    unit_e = np.array(event_unit, dtype=np.int64)
    unit_c = renumber[np.array(chunk_unit, dtype=np.int64)] if chunk_unit else np.zeros(0, dtype=np.int64)
    is_decode = unit_e >= 0
    unit_e[is_decode] = renumber[unit_e[is_decode]]
    weight = np.bincount(np.concatenate((unit_e[is_decode], unit_c)),
                         weights=np.concatenate((steps_a[is_decode], np.ones(len(unit_c)))).astype(np.float64),
                         minlength=len(units))  # fmt: skip
    placed = np.array(chunk_place, dtype=np.int64)
    places = int(placed.max()) + 1 if len(placed) else 0
    got = _Indexed(list(ids), np.array(of, dtype=np.int64), np.array(decode, dtype=bool), steps_a, starts, at,
                   real_ttft([s.first_s - s.arrival_s for s in spans]),
                   [(a, b) for kind, a, b in units if kind == 0], [(a, b) for kind, a, b in units if kind == 1],
                   renumber, weight.tolist(), unit_e, np.array(chunk_event, dtype=np.int64), unit_c,
                   [np.flatnonzero(placed == p) for p in range(places)])  # fmt: skip
    _INDEXED[:] = [(trace, got)]
    return got


def _answers(index: _Indexed, events: Sequence[object], lookup: TextLookup,
             ) -> tuple[list[list[GraphRun] | GraphRun], list[int], npt.NDArray[np.int64]]:  # fmt: skip
    """What ``lookup`` answers for each event as :func:`_replay_steps` asks it: (the answers in the order first used,
    each answer's key, each event's answer). Each key is looked up at its first event, in event order, and its answer
    kept while the lookup generates no fallback; an event whose look-up generates one keeps its own answer, and from
    the event after it every key is looked up again (the lookup's state changed), event by event."""
    counted: Callable[[], int] | None = getattr(lookup, "fallback_count", None)
    count: Callable[[], int] = counted if counted is not None else lambda: len(lookup.fallbacks())
    ids, keys = index.ids, index.keys
    answers: list[list[GraphRun] | GraphRun] = []
    answer_key: list[int] = []

    def ask(k: int, e: int) -> bool:
        """The answer at event ``e`` (key ``k``) appended; False where its look-up generated a fallback."""
        before = count()
        answers.append(lookup.decode(*keys[k]) if index.decode[e] else lookup.prefill(events[e]))  # type: ignore
        answer_key.append(k)
        return count() == before

    # every key at its first event, in order, while no fallback comes
    distinct, first = np.unique(ids, return_index=True)
    slot = np.full(len(keys), -1, dtype=np.int64)
    stop = len(ids)
    for j in np.argsort(first, kind="stable").tolist():
        k, e = int(distinct[j]), int(first[j])
        if not ask(k, e):
            stop = e
            break
        slot[k] = len(answers) - 1
    of_event = slot[ids]
    if stop < len(ids):  # a fallback at ``stop``: its own answer, then the rest event by event
        of_event[stop] = len(answers) - 1
        kept: dict[int, int] = {}
        for e in range(stop + 1, len(ids)):
            k = int(ids[e])
            got = kept.get(k)
            if got is None:
                got = len(answers)
                if ask(k, e):
                    kept[k] = got
                else:
                    kept = {}
            of_event[e] = got
    return answers, answer_key, of_event


def _replay_indexed(trace: Trace, lookup: TextLookup, tally: _Tally, timer: Timer | None) -> list[TimeResult]:
    """:func:`_replay_steps` of one trace weighed by what ran, by its distinct events: each distinct answer counted
    once by its summed weight (whole numbers: exact in any order) and, with a ``timer``, priced once; the sums over
    events added in event order (:func:`sequential_sum`), so every figure is the event-by-event one to the last bit."""
    index = _indexed(trace)
    alone: Callable[..., tuple[list[GraphRun], list[GraphRun]] | None] | None = getattr(lookup, "alone", None)
    units = alone(index.chunks, index.decodes) if alone is not None else None
    if units is not None:
        return _replay_units(trace, index, units, tally, timer)
    answers, answer_key, of_event = _answers(index, trace.events, lookup)
    weights = np.bincount(of_event, weights=index.steps.astype(np.float64), minlength=len(answers)).tolist()
    for answer, weight in zip(answers, weights, strict=True):
        tally.counted(answer, weight)
    if timer is None:
        return []
    real_a, padded_a, context_a = [], [], []
    for answer, k in zip(answers, answer_key, strict=True):
        key = index.keys[k]
        if isinstance(answer, GraphRun):
            real = timer.decode_real(*key)  # type: ignore[misc]
            padded, context = timer.decode_padded(answer), 0.0
        else:
            real = timer.prefill_real((), key)  # type: ignore[arg-type]
            priced = [timer.prefill_padded(r) for r in answer]
            padded = sum(p for p, _ in priced)
            context = min(sum(c for _, c in priced), max(0.0, padded - real))
        real_a.append(real)
        padded_a.append(padded)
        context_a.append(context)
    real_e, padded_e = np.array(real_a)[of_event], np.array(padded_a)[of_event]
    return [_timed(trace, index, timer, real_e, padded_e, np.array(context_a)[of_event])]


def _replay_units(trace: Trace, index: _Indexed, units: tuple[list[GraphRun], list[GraphRun]], tally: _Tally,
                  timer: Timer | None) -> list[TimeResult]:  # fmt: skip
    """:func:`_replay_indexed` where no look-up generated a fallback, by distinct chunk and decode: each counted once
    by its summed weight in the order first run (a step's forwards are its chunks' forwards, each alone), and priced
    once; a step's price is its chunks' prices added in their order (place by place over every step at once)."""
    prefill, decode = units
    runs = decode + prefill
    for u in index.order.tolist():  # the order each unit first ran in: every bucket and shape first seen as stepwise
        tally.count(runs[u], index.weight[u])
    if timer is None:
        return []
    real_u = np.array([timer.decode_real(*key) for key in index.decodes] + [0.0] * len(prefill))
    priced = [(timer.decode_padded(r), 0.0) for r in decode] + [timer.prefill_padded(r) for r in prefill]
    padded_u = np.array([p for p, _ in priced], dtype=np.float64)
    context_u = np.array([c for _, c in priced], dtype=np.float64)
    n = len(index.ids)
    padded_e, context_e = np.zeros(n), np.zeros(n)
    for at in index.places:  # a step's chunks added in their order: place 0 of every step, then place 1, ...
        events, chosen = index.chunk_event[at], index.chunk_unit[at]
        padded_e[events] = padded_e[events] + padded_u[chosen]
        context_e[events] = context_e[events] + context_u[chosen]
    decode_e = index.decode
    real_e = np.zeros(n)
    real_e[decode_e] = real_u[index.event_unit[decode_e]]
    padded_e[decode_e] = padded_u[index.event_unit[decode_e]]
    step_keys = index.ids[~decode_e]
    real_k = {int(k): timer.prefill_real((), index.keys[k]) for k in np.unique(step_keys).tolist()}  # type: ignore
    real_e[~decode_e] = [real_k[k] for k in step_keys.tolist()]
    context_e[~decode_e] = np.minimum(context_e[~decode_e],
                                      np.maximum(0.0, padded_e[~decode_e] - real_e[~decode_e]))  # fmt: skip
    return [_timed(trace, index, timer, real_e, padded_e, context_e)]


def _timed(trace: Trace, index: _Indexed, timer: Timer, real_e: npt.NDArray[np.float64],
           padded_e: npt.NDArray[np.float64], context_e: npt.NDArray[np.float64]) -> TimeResult:  # fmt: skip
    """The trace in time from each event's real and padded seconds of one step and its context padding: the sums
    over events in event order (:func:`sequential_sum`), as the event-by-event clock adds them."""
    steps, decode = index.steps, index.decode
    added = padded_e - real_e
    images = [timer.vision(tokens) for _, tokens in trace.encoded]
    real_v = np.array([r for r, _ in images], dtype=np.float64)
    padded_v = np.array([p for _, p in images], dtype=np.float64)
    padding = {
        "prefill_query": sequential_sum((added - context_e)[~decode]),
        "prefill_context": sequential_sum(context_e[~decode]),
        "decode": sequential_sum((steps * added)[decode]),
        "vision": sequential_sum(padded_v - real_v),
    }
    starts = np.concatenate((index.starts, np.array([s for s, _ in trace.encoded], dtype=np.int64)))
    order = np.argsort(starts, kind="stable")  # the entries sorted by step, as the event-by-event clock sorts them
    entry_steps = np.concatenate((steps, np.ones(len(images), dtype=np.int64)))[order]
    per = np.concatenate((added, padded_v - real_v))[order]
    return time_result(load_of(trace), trace, sequential_sum(np.concatenate((steps * real_e, real_v))),
                       sequential_sum(np.concatenate((steps * padded_e, padded_v))), padding, index.spans,
                       index.real_ttft, partial(added_until, starts[order], entry_steps, per),
                       tuple(padded_e.tolist()))  # fmt: skip


def shape_weights(traces: Sequence[Trace], *, balanced: bool = False, scale: float = 1e6,
                  ) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:  # fmt: skip
    """What the traces ran, as a planner reads it: prefill (query, context blocks) -> weight and decode (sequences,
    blocks) -> weight (integers; with ``balanced``, each trace scaled to ``scale`` per phase)."""
    if len(traces) == 1 and not balanced and _INDEXED and _INDEXED[0][0] is traces[0]:
        index = _INDEXED[0][1]  # its units: the same sums (whole numbers), keys in the order first run
        weight, first = index.weight, len(index.decodes)
        return ({k: max(1, round(w)) for k, w in zip(index.chunks, weight[first:], strict=True)},
                {k: max(1, round(w)) for k, w in zip(index.decodes, weight[:first], strict=True)})  # fmt: skip
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

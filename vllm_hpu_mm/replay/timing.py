"""Replay in time: each forward of a schedule priced by the step-time model
(:mod:`vllm_hpu_mm.models.step_time`) at the shape that ran (the bucket) and at the real shape (no padding), so a
bucket set is judged by what its padding costs: busy time, its split into prefill query, prefill context, decode and
vision, and the time it adds to each request's first token and to each token after it.

Real work is one forward per step running the step's chunks unpadded (``StepTime.chunks_s``) and one decode pass of
the real sequences and blocks; padded work is every forward the runtime's lookup runs, at its shape. A prefill
forward's padding is split in two: context padding is the bucket's time less the same bucket at the real mean
context (``P - T(b, q, real context)``), query padding the rest (batch rows and query tokens, and the extra forwards
a step is split into). Vision: each image encoded at its bucket against its own patches.

Latency: a request's added time to first token is the padding of every step from its arrival to its first token;
its added time per output token is the padding of the steps that decoded it, over its tokens after the first. The
schedule is the same for every bucket set (a padded server would queue more: these are lower bounds of the delay).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from vllm_hpu_mm.engine import GraphRun, PrefillChunk
from vllm_hpu_mm.replay.scheduler import DecodeRun, Trace

__all__ = [
    "PHASES",
    "Clocked",
    "StepModel",
    "TimeResult",
    "Timer",
    "TraceClock",
    "added_until",
    "chunk_key",
    "percentile",
    "real_ttft",
    "sequential_sum",
    "time_result",
]

#: The parts padding time is split into, in the order they are reported.
PHASES = ("prefill_query", "prefill_context", "decode", "vision")
K = TypeVar("K")
V = TypeVar("V")


def chunk_key(chunks: Sequence[PrefillChunk], block_size: int) -> tuple[tuple[int, int], ...]:
    """A step's prefill chunks as (query tokens, context blocks): all that the step model and a runtime's lookup read
    of them (``TextLookup.prefill``), so the key of what they answer."""
    return tuple([(c.query, -(-c.context // block_size)) for c in chunks])


def percentile(values: Sequence[float] | npt.NDArray[np.float64], q: float, *, ordered: bool = False) -> float:
    """The nearest-rank ``q`` quantile (0 < q <= 1) of ``values``; 0 when there are none. ``ordered``: they are
    sorted already."""
    if not len(values):
        return 0.0
    if not ordered:
        values = sorted(values)
    return float(values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))])


class StepModel(Protocol):
    """What a step costs at a shape: the roofline of a named device (``models.step_time.StepTime``) or a model
    fitted on a server's own timings (``models.step_fit.FittedStep``)."""

    @property
    def block_size(self) -> int: ...

    def prefill_s(self, batch: int, query_tokens: int, context_blocks: int) -> float: ...

    def chunks_s(self, chunks: Sequence[tuple[int, int]]) -> float: ...

    def decode_s(self, batch: int, blocks: int) -> float: ...

    def vision_s(self, patches: int) -> float: ...


class Clocked(Protocol):
    """What prices a schedule's steps as it runs (the scheduler's ``clock`` and ``vision_clock``)."""

    def clock(self, event: object) -> float: ...

    def vision_clock(self, tokens: int) -> float: ...


#: Most prices one timer keeps per kind (a long replay asks a few thousand distinct shapes; past it, the memo starts
#: again, so its memory does not grow with the traffic).
PRICES_KEPT = 1 << 16


@dataclasses.dataclass(frozen=True)
class Timer:
    """Prices forwards for one model on one device: the step-time model, the image placeholder tokens -> patches
    rule and the vision bucket an image of so many patches runs in.

    Each distinct shape is priced once (the step model is a function of the shape alone): the common schedule, every
    replay on it and every re-pricing ask the same few thousand shapes. Every memo is keyed by exactly what its price
    reads (``tests/replay/test_replay_timing.py`` pins each key) and holds at most :data:`PRICES_KEPT` prices."""

    step: StepModel
    patches_of: Callable[[int], int]
    vision_bucket: Callable[[int], int]
    #: decode (batch, blocks) -> seconds; prefill chunks as (query, context blocks) -> seconds; a prefill forward's
    #: (shape, real context blocks) -> (seconds, of which context padding); image tokens -> (real, padded) seconds.
    _decode: dict[tuple[int, int], float] = dataclasses.field(default_factory=dict, init=False, repr=False,
                                                              compare=False)  # fmt: skip
    _chunks: dict[tuple[tuple[int, int], ...], float] = dataclasses.field(default_factory=dict, init=False,
                                                                          repr=False, compare=False)  # fmt: skip
    _forwards: dict[tuple[tuple[int, int, int], int], tuple[float, float]] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False)  # fmt: skip
    _images: dict[int, tuple[float, float]] = dataclasses.field(default_factory=dict, init=False, repr=False,
                                                                compare=False)  # fmt: skip

    def prefill_real(self, chunks: Sequence[PrefillChunk], key: tuple[tuple[int, int], ...] | None = None) -> float:
        """``key``: the chunks' :func:`chunk_key` at the step model's block size, when the caller has it."""
        if key is None:
            key = chunk_key(chunks, self.step.block_size)
        got = self._chunks.get(key)
        if got is None:
            got = _kept(self._chunks, key, self.step.chunks_s(key))
        return got

    def prefill_padded(self, run: GraphRun) -> tuple[float, float]:
        """(time of the forward at its shape, of which context padding)."""
        shape = run.shape
        real_context = -(-run.blocks // max(1, run.requests)) if shape[2] else 0
        key = (shape, real_context)
        got = self._forwards.get(key)
        if got is None:
            b, q, c = shape
            padded = self.step.prefill_s(b, q, c)
            context = max(0.0, padded - self.step.prefill_s(b, q, min(c, real_context))) if c else 0.0
            got = _kept(self._forwards, key, (padded, context))
        return got

    def decode_real(self, sequences: int, blocks: int) -> float:
        key = (sequences, blocks)
        got = self._decode.get(key)
        if got is None:
            got = _kept(self._decode, key, self.step.decode_s(sequences, blocks))
        return got

    def decode_padded(self, run: GraphRun) -> float:
        b, _, blocks = run.shape
        return self.decode_real(b, blocks)  # the same step model at the bucket's shape

    def vision(self, tokens: int) -> tuple[float, float]:
        """(real, padded) seconds of encoding one image of ``tokens`` placeholder tokens."""
        got = self._images.get(tokens)
        if got is None:
            patches = self.patches_of(tokens)
            got = self.step.vision_s(patches), self.step.vision_s(max(patches, self.vision_bucket(patches)))
            _kept(self._images, tokens, got)
        return got

    def clock(self, event: object) -> float:
        """Real seconds of one step of a schedule event (the scheduler's clock)."""
        if isinstance(event, DecodeRun):
            return self.decode_real(event.sequences, event.blocks)
        return self.prefill_real(event)  # type: ignore[arg-type]

    def vision_clock(self, tokens: int) -> float:
        return self.vision(tokens)[0]


def _kept(memo: dict[K, V], key: K, value: V) -> V:
    """``value`` kept in ``memo`` under ``key``, the memo emptied first when it holds :data:`PRICES_KEPT`."""
    if len(memo) >= PRICES_KEPT:
        memo.clear()
    memo[key] = value
    return value


@dataclasses.dataclass(frozen=True)
class TimeResult:
    """One trace (one load) replayed in time for one bucket set."""

    load: str
    requests: int
    #: Busy seconds with real shapes and with the buckets (text and vision).
    real_s: float
    padded_s: float
    #: Padding seconds per part of :data:`PHASES`.
    padding: dict[str, float]
    #: Padding's added time to first token and per output token, seconds: (p50, p99) over requests.
    added_ttft: tuple[float, float]
    added_tpot: tuple[float, float]
    #: Real-shape time to first token, seconds (p50, p99): what the padding adds to.
    ttft: tuple[float, float]
    idle_s: float = 0.0
    #: The padded seconds of one step of each event of the trace, in order, as the lookup priced it: what a padded
    #: clock on the same lookup in the same state prices it (:func:`vllm_hpu_mm.replay.whole.strategy_latency`
    #: takes them instead of pricing the common schedule's events again).
    prices: tuple[float, ...] = dataclasses.field(default=(), compare=False, repr=False)

    @property
    def overhead(self) -> float:
        """Padding as a share of the useful (real-shape) busy time."""
        return (self.padded_s - self.real_s) / self.real_s if self.real_s else 0.0

    def share(self, phase: str) -> float:
        """A part's padding as a share of the busy time with the buckets."""
        return self.padding[phase] / self.padded_s if self.padded_s else 0.0


class TraceClock:
    """Accumulates one trace's real and padded time per event, then each request's added latency."""

    def __init__(self, timer: Timer, trace: Trace) -> None:
        self.timer, self.trace = timer, trace
        self.real = self.padded = 0.0
        self.padding = dict.fromkeys(PHASES, 0.0)
        # (start step, steps, added seconds per step) of every event and image, in step order
        self._entries: list[tuple[int, int, float]] = []
        #: Padded seconds of one step of each event, in the trace's order (every event is priced once, in order).
        self._prices: list[float] = []

    def decode(self, index: int, steps: int, sequences: int, blocks: int, run: GraphRun) -> None:
        real, padded = self.timer.decode_real(sequences, blocks), self.timer.decode_padded(run)
        self.real += steps * real
        self.padded += steps * padded
        self.padding["decode"] += steps * (padded - real)
        self._prices.append(padded)
        self._entries.append((self._start(index), steps, padded - real))

    def prefill(self, index: int, chunks: Sequence[PrefillChunk], runs: Sequence[GraphRun],
                key: tuple[tuple[int, int], ...] | None = None) -> None:  # fmt: skip
        real = self.timer.prefill_real(chunks, key)
        priced = [self.timer.prefill_padded(r) for r in runs]
        padded = sum(p for p, _ in priced)
        context = min(sum(c for _, c in priced), max(0.0, padded - real))
        self.real += real
        self.padded += padded
        self.padding["prefill_context"] += context
        self.padding["prefill_query"] += padded - real - context
        self._prices.append(padded)
        self._entries.append((self._start(index), 1, padded - real))

    def _start(self, index: int) -> int:
        return self.trace.starts[index] if index < len(self.trace.starts) else index

    def _until(self, *queries: npt.NDArray[np.int64]) -> list[npt.NDArray[np.float64]]:
        """Added seconds of every step before each step of each query (the entries sorted by step):
        :func:`added_until` over the entries."""
        starts, steps, per = (np.array([e[k] for e in self._entries]) for k in range(3))
        return added_until(starts.astype(np.int64), steps.astype(np.int64), per.astype(np.float64), *queries)

    def result(self, load: str) -> TimeResult:
        for step, tokens in self.trace.encoded:
            real, padded = self.timer.vision(tokens)
            self.real += real
            self.padded += padded
            self.padding["vision"] += padded - real
            self._entries.append((step, 1, padded - real))
        self._entries.sort(key=lambda e: e[0])
        spans = self.trace.spans
        at = np.array([(s.arrival, s.first + 1, s.finish + 1, s.output) for s in spans], dtype=np.int64).reshape(-1, 4)
        return time_result(load, self.trace, self.real, self.padded, dict(self.padding), at,
                           real_ttft([s.first_s - s.arrival_s for s in spans]), self._until,
                           tuple(self._prices) if len(self._prices) == len(self.trace.events) else ())  # fmt: skip


def sequential_sum(values: npt.NDArray[np.float64]) -> float:
    """``values`` added one at a time from 0.0, in order, to the last bit of a Python loop's sum (a cumulative sum
    adds in order; numpy's ``sum`` adds pairwise)."""
    return float(np.cumsum(values)[-1]) if len(values) else 0.0


def added_until(starts: npt.NDArray[np.int64], steps: npt.NDArray[np.int64], per: npt.NDArray[np.float64],
                *queries: npt.NDArray[np.int64]) -> list[npt.NDArray[np.float64]]:  # fmt: skip
    """Added seconds of every step before each step of each query, from entries (start step, steps, added seconds
    per step) sorted by start: the sum of the entries that start before it, less the part of a run of several steps
    that starts before it and ends after. The same floating-point operations in the same order as one step at a
    time: a sum from 0 over the entries in order, then each such run subtracted, the last first (runs of one step
    subtract nothing)."""
    prefix = np.concatenate(([0.0], np.cumsum(steps * per)))
    # a run of several steps overlaps a later step only if it is in the group of entries just before it (the step's
    # insertion point is the group's end); a group holds at most one (a decode stretch's run), else its runs are
    # taken one by one, the last first
    several = np.flatnonzero(steps > 1)
    group = np.searchsorted(starts, starts[several], side="right")
    ends = np.zeros(len(starts) + 1, dtype=np.int64)
    per_step = np.zeros(len(starts) + 1)
    single = np.zeros(len(starts) + 1, dtype=bool)
    shared, counts = np.unique(group, return_counts=True)
    alone = np.isin(group, shared[counts == 1])
    ends[group[alone]] = starts[several[alone]] + steps[several[alone]]
    per_step[group[alone]] = per[several[alone]]
    single[group[alone]] = True
    runs: dict[int, list[int]] = {}
    for end, j in zip(group[~alone].tolist(), several[~alone].tolist(), strict=True):
        runs.setdefault(end, []).insert(0, j)
    out = []
    for at in queries:
        i = np.searchsorted(starts, at, side="left")
        total = prefix[i]
        hit = single[i]
        total[hit] -= per_step[i[hit]] * np.maximum(0, ends[i[hit]] - at[hit])
        for end, js in runs.items():
            where = np.flatnonzero(i == end)
            for j in js:
                total[where] -= per[j] * np.maximum(0, starts[j] + steps[j] - at[where])
        out.append(total)
    return out


def real_ttft(values: Sequence[float]) -> tuple[float, float]:
    """The real-shape time to first token's (p50, p99)."""
    return percentile(values, 0.5), percentile(values, 0.99)


def time_result(load: str, trace: Trace, real: float, padded: float, padding: dict[str, float],
                at: npt.NDArray[np.int64], ttft_real: tuple[float, float],
                until: Callable[..., list[npt.NDArray[np.float64]]],
                prices: tuple[float, ...]) -> TimeResult:  # fmt: skip
    """One trace's :class:`TimeResult` from its sums: ``at`` holds each request's (arrival step, first token's step
    + 1, last token's step + 1, output tokens); ``until`` the added seconds before each step of each query."""
    arrival, first, finish = until(at[:, 0], at[:, 1], at[:, 2])
    several = at[:, 3] > 1
    ttft = np.sort(first - arrival)
    tpot = np.sort((finish[several] - first[several]) / (at[several, 3] - 1))
    return TimeResult(
        load=load,
        requests=len(trace.spans),
        real_s=real,
        padded_s=padded,
        padding=padding,
        added_ttft=(percentile(ttft, 0.5, ordered=True), percentile(ttft, 0.99, ordered=True)),
        added_tpot=(percentile(tpot, 0.5, ordered=True), percentile(tpot, 0.99, ordered=True)),
        ttft=ttft_real,
        idle_s=trace.idle_s,
        prices=prices,
    )

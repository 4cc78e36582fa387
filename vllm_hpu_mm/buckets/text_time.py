"""Text buckets chosen by modelled time: per phase, the rows on the first axis (prompt query lengths, decode batch
sizes) and the values on the second (context blocks, KV blocks) that minimise the seconds a step spends in its
bucket over the seconds it would spend at its own shape, within a graph budget.

Pure: weighted shapes, a step-time model (:class:`StepTimes`, e.g. :func:`vllm_hpu_mm.models.step_time.step_time`)
and the limits in; rows and values out. The lookup planned for is vllm-gaudi's (the first bucket in sorted order at
least as large as the shape in every dimension), so a shape runs in the first row at or above its first value that
holds a value at or above its second, at the smallest such value (:func:`lookup`).

**No gross padding.** A shape never pads its second axis more than :data:`GROSS_FACTOR` times its need, whatever
the traffic, for every shape the limits allow: each row's values climb from its least need by at most that factor
per step (a ladder), a row's first value is at most that factor above the least need of the shapes it takes (for
decode, ``previous row + 1`` blocks: so rows are at most that factor apart as well, since a bucket holds at least as
many blocks as sequences), the last row reaches the limits, and a prompt row always holds context 0 (a fresh prompt
pads no context). Shapes beyond a non-covering ("spill") row's values move to the next row that holds them, whose
ladder keeps the bound. The ladders are hard constraints: a budget that cannot hold them is refused
(:attr:`PhaseOptions.least` says the least).

**Optimisation.** For each number of rows, the rows are the exact optimum of the time with each shape at its own
second value (a dynamic programme over candidate rows on a log grid, with the factor constraint); each row's
values are the exact optimum of its time for each number of values (a dynamic programme over candidate values with
the ladder constraint); the graphs are allocated exactly over the rows' cost curves. The number of rows with the
least time through the real lookup wins. Every programme is over a bounded candidate set
(:data:`CANDIDATES_PER_OCTAVE`, :data:`MAX_VALUES_PER_ROW`, :data:`MAX_ROWS`), so the work is bounded by the limits'
octaves, never by the traffic's size or the budget.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import functools
import itertools
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, cast

import numpy as np
import numpy.typing as npt

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.kept import kept_property

_T = TypeVar("_T")

__all__ = [
    "GROSS_FACTOR",
    "NOT_FOUND",
    "LookupTable",
    "PhaseAxes",
    "PhaseOptions",
    "PhasePlan",
    "Shapes",
    "StepTimes",
    "binned",
    "lookup",
    "moved",
    "phase_options",
    "phase_options_of",
    "phase_seconds",
    "unique_ints",
    "unique_pairs",
    "weighted_sum",
]

_F = npt.NDArray[np.float64]
_I = npt.NDArray[np.int64]

#: No shape the limits allow pads its context / KV blocks beyond this many times its need.
GROSS_FACTOR = 4
#: Candidate rows and values per doubling (plus the traffic's own values, binned, for values).
CANDIDATES_PER_OCTAVE = 8
ROWS_PER_OCTAVE = 4
#: Most values one row gets, and most rows a phase gets (more saves next to nothing and costs planning time).
MAX_VALUES_PER_ROW = 24
MAX_ROWS = 48
#: Most rows added at the traffic's heaviest first values (:attr:`PhaseAxes.heavy_row_share`).
MAX_HEAVY_ROWS = 16
INF = float("inf")


def weighted_sum(weight: _F, seconds: _F) -> float:
    """sum(weight x seconds), summed by numpy (pairwise), not by the BLAS: a BLAS dot of a long vector splits it over
    threads, so its last bits depend on the machine's cores (and on a shared machine its threads spin for the CPU)."""
    return float(np.add.reduce(weight * seconds))


class StepTimes(Protocol):
    """Seconds of one language-model forward at a shape (a roofline estimate, used relatively)."""

    def prefill_s(self, batch: int, query_tokens: int, context_blocks: int) -> float: ...

    def decode_s(self, batch: int, blocks: int) -> float: ...


#: Most step times one :class:`CachedTimes` keeps per phase: a planner prices the same shapes for every candidate plan
#: (the traffic's own shapes and the candidate grid's), so this holds a planning run's at any real limits, and bounds
#: the memory where a traffic holds more distinct shapes.
TIME_CACHE = 1 << 18
#: Most derived results of one kind (e.g. a load's shapes as arrays) one :class:`CachedTimes` keeps by default: a
#: planning run judges a few dozen loads.
KEPT = 64


class CachedTimes:
    """A step-time model whose answers are kept (at most :data:`TIME_CACHE` per phase): one per planning run, so that
    every candidate plan, split and verdict prices a shape once."""

    def __init__(self, time: StepTimes) -> None:
        # the kept answers are the instance's own attributes, not methods calling them: a planning run asks a few
        # hundred thousand times, and a method's frame around each answer cost more than the answer
        self.prefill_s: Callable[[int, int, int], float] = functools.lru_cache(maxsize=TIME_CACHE)(time.prefill_s)
        self.decode_s: Callable[[int, int], float] = functools.lru_cache(maxsize=TIME_CACHE)(time.decode_s)
        self._kept: dict[str, collections.OrderedDict[Hashable, Any]] = {}

    def kept(self, kind: str, key: Hashable, make: Callable[[], _T], *, most: int = KEPT) -> _T:
        """``make()``'s result, kept for this planning run under ``key`` (the ``most`` last used of each ``kind``):
        work derived from the same inputs at every budget and repair round is done once."""
        store = self._kept.setdefault(kind, collections.OrderedDict())
        if key in store:
            store.move_to_end(key)
            return cast(_T, store[key])
        value = make()
        store[key] = value
        if len(store) > most:
            store.popitem(last=False)
        return value


def cached(time: StepTimes) -> CachedTimes:
    """``time`` with its answers kept (itself when it already keeps them)."""
    return time if isinstance(time, CachedTimes) else CachedTimes(time)


#: A phase's least graphs when no ladder can cover its limits at all.
NO_LADDER = 10**9


class BudgetTooSmall(ConfigError):
    """A graph budget too small for the no-gross-padding ladders; ``least`` is the fewest that hold them
    (:data:`NO_LADDER` or more: none does)."""

    def __init__(self, message: str, least: int, *, budget: int | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.least = least
        #: The budget refused and what follows it in the message, where the message names it (``budget`` first).
        self.budget, self.detail = budget, detail

    @classmethod
    def of(cls, budget: int, detail: str, least: int) -> BudgetTooSmall:
        """The planner's refusal of ``budget``, which does not know the flag it came from (:meth:`named`)."""
        return cls(f"text graph budget {budget}{detail}", least, budget=budget, detail=detail)

    def named(self, flag: str) -> BudgetTooSmall:
        """The refusal naming the option as the user typed it (``--text-graph-budget``; serve:
        ``--plan-text-graph-budget``), where the message names a budget; else itself."""
        if self.budget is None:
            return self
        return BudgetTooSmall(f"{flag} {self.budget}{self.detail}", self.least, budget=self.budget, detail=self.detail)


@dataclasses.dataclass(frozen=True)
class PhaseAxes:
    """One phase as the planner sees it: the seconds of a step in bucket ``(row, value)``, the largest row, the
    rows' granule, a row's least and covering values, and the ladder's rules."""

    time: Callable[[int, int], float]
    rows_top: int
    row_round: int
    #: The least value a row may hold (decode: its batch; vllm-gaudi drops a bucket with fewer blocks than sequences).
    floor: Callable[[int], int]
    #: The value a row must reach to cover every shape the limits allow it (row, previous row).
    top: Callable[[int, int], int]
    #: The least positive need of a row's shapes (row, previous row): decode ``previous + 1``, prompt 1.
    need: Callable[[int, int], int]
    #: Only the last row covers the limits; the others hold what their traffic needs (the rest spills onward).
    spill: bool
    #: Every row holds value 0 (prompt: a fresh prompt runs with no context).
    zero: bool
    #: Candidate density and the most rows / values per row, as multiples of the defaults (a large budget buys a
    #: finer grid).
    resolution: int = 1
    #: Most a ladder's value may rise over the one before (times (previous + 1)): at most GROSS_FACTOR, the hard
    #: bound; prompt contexts climb in doublings (a chunk's context pads at most 2x beyond the ladder's first value).
    step_factor: int = GROSS_FACTOR
    #: Candidate rows per doubling (times ``resolution``).
    rows_per_octave: int = ROWS_PER_OCTAVE
    #: A first value holding at least this share of the weight is a candidate row too (up to MAX_HEAVY_ROWS of
    #: them, heaviest first); 0: the grid alone.
    heavy_row_share: float = 0.0
    #: Rows every row set holds (prompt rows where buckets must fit max_model_len: :meth:`~.text.TextLimits.
    #: staircase_queries`).
    required_rows: tuple[int, ...] = ()
    #: Work that depends on the axes alone, kept (:func:`_ladder_grid`); shared with the copies ``replace`` makes.
    memo: dict[Hashable, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class PhasePlan:
    rows: tuple[int, ...]
    values: tuple[tuple[int, ...], ...]
    #: Modelled seconds of the weighted shapes in their buckets (the objective; useful time is constant).
    seconds: float

    @property
    def graphs(self) -> int:
        return sum(len(v) for v in self.values)


@functools.lru_cache(maxsize=4096)
def _log_grid(low: int, high: int, per_octave: int = CANDIDATES_PER_OCTAVE) -> tuple[int, ...]:
    """Integers from ``low`` to ``high``, ``per_octave`` per doubling (kept: every ladder of a row asks again)."""
    if high < low:
        return ()
    low = max(1, low)
    steps = max(1, math.ceil(per_octave * math.log2(max(high, low) / low)))
    return tuple(sorted({min(high, max(low, round(low * (high / low) ** (i / steps)))) for i in range(steps + 1)}))


class _Curve:
    """A row's values for 1..n values (index m - 1; cost INF where the ladder cannot be kept): given, or traced back
    through the ladder's choices when first asked (a plan takes one count per row of the many worked out)."""

    def __init__(self, costs: Sequence[float], values: Sequence[tuple[int, ...]] | None = None, *,
                 trace: Callable[[int], tuple[int, ...]] | None = None) -> None:  # fmt: skip
        self.costs = tuple(costs)
        self.cost_array = np.array(self.costs, dtype=np.float64)
        self._values: list[tuple[int, ...] | None] = list(values) if values is not None else [None] * len(self.costs)
        self._trace = trace

    @property
    def values(self) -> tuple[tuple[int, ...], ...]:
        return tuple(self.value_set(m) for m in range(1, len(self.costs) + 1))

    def value_set(self, m: int) -> tuple[int, ...]:
        """The row's values with ``m`` of them (empty where the ladder cannot be kept)."""
        got = self._values[m - 1]
        if got is None:
            got = self._trace(m) if self._trace is not None and math.isfinite(self.costs[m - 1]) else ()
            self._values[m - 1] = got
        return got


#: Most ladder grids one :class:`PhaseAxes` keeps (a planning run asks a few hundred per phase).
LADDER_GRIDS = 4096


def _axes_kept(axes: PhaseAxes, key: Hashable, make: Callable[[], _T]) -> _T:
    """``make()``, kept in the axes' memo under ``key``: what depends on the axes alone is worked out once for every
    weight set of a planning run (the memo starts over once it holds :data:`LADDER_GRIDS` entries)."""
    got = axes.memo.get(key)
    if got is None:
        got = make()
        if len(axes.memo) >= LADDER_GRIDS:
            axes.memo.clear()
        axes.memo[key] = got
    return cast(_T, got)


def _ladder_grid(axes: PhaseAxes, row: int, low: int, end: int) -> tuple[list[int], _I, _F, _I, npt.NDArray[np.bool_]]:
    """A row's candidate values from ``low`` to ``end``, each one's seconds in the row, and the band of candidates
    each may follow (positions, and which are below it): the same whatever the weights, so kept per axes (every
    re-planned weight set of a planning run asks for the same rows)."""

    def make() -> tuple[list[int], _I, _F, _I, npt.NDArray[np.bool_]]:
        cands = sorted({*_log_grid(low, end, CANDIDATES_PER_OCTAVE * axes.resolution), end})
        c = np.array(cands, dtype=np.int64)
        unit = np.array([axes.time(row, v) for v in cands], dtype=np.float64)
        n = len(c)
        # c[i] may follow c[j] when j < i and c[i] <= step x (c[j] + 1): a band of j's below each i
        step = min(GROSS_FACTOR, axes.step_factor)
        lo = np.searchsorted(step * (c + 1), c, side="left")
        width = max(1, int((np.arange(n) - lo).max()))
        band = lo[:, None] + np.arange(width)[None, :]
        inside = band < np.arange(n)[:, None]
        return cands, c, unit, np.minimum(band, n - 1), inside

    return _axes_kept(axes, ("ladder", row, low, end), make)


@dataclasses.dataclass(frozen=True)
class _Start:
    """A row's ladder before its counts are tried: the candidate values (as ints and as an array), each one's
    seconds in the row, the band of candidates each may follow (positions, and which are below it), each shape's
    least candidate at or above it and its weight, the most the first value may be, and the zero value's cost."""

    cands: list[int]
    c: _I
    unit: _F
    band: _I
    inside: npt.NDArray[np.bool_]
    at: _I
    weight: _F
    first_max: float
    zero_cost: float
    pad: int


def _ladder_start(axes: PhaseAxes, row: int, prev: int, second: _I, weight: _F) -> _Start | _Curve:
    """What :func:`_ladders` needs of one row (the row's values minimising sum(weight x time(row, bucket value)) for
    each number of values, each step at most the axes' step factor (at most GROSS_FACTOR) above the one before, the
    first at most GROSS_FACTOR above the row's least need, the last at the row's top (covering rows) or the largest
    value its shapes hold (spill rows)); the curve itself where no count is to be tried."""
    floor, top = axes.floor(row), axes.top(row, prev)
    zero_w = float(weight[second <= 0].sum()) if axes.zero else 0.0
    pos = second > 0 if axes.zero else np.ones(len(second), dtype=bool)
    vals = np.minimum(np.maximum(second[pos], max(floor, 1)), max(top, 1))  # np.clip, without its wrapper
    end = top if not axes.spill or not len(vals) else int(vals.max())
    zero_cost = zero_w * axes.time(row, 0) if axes.zero else 0.0
    if axes.zero and top <= 0:  # no context fits beside this row's queries: context 0 alone
        return _Curve((zero_cost,), ((0,),))
    cands, c, unit, band, inside = _ladder_grid(axes, row, max(floor, 1), end)
    # each shape's least candidate at or above it (the last candidate holds every shape: the row's top or largest)
    return _Start(cands, c, unit, band, inside, c.searchsorted(vals), weight[pos], GROSS_FACTOR * axes.need(row, prev),
                  zero_cost, 1 if axes.zero else 0)  # the zero value's graph first  # fmt: skip


def _ladders(starts: Sequence[_Start], max_values: int) -> list[_Curve]:
    """Each row's curve for 1..min(``max_values``, its candidates) values, every row worked out together: its
    weights, costs and bands as one array each (a row of fewer candidates or a narrower band padded with unreachable
    steps, which never win a least: ties keep the first), each count one pass over all of them, so a phase's
    hundred-odd ladders cost two dozen passes, not thousands of small ones. Every figure is the one a row's own
    pass gives: the same additions and comparisons, in the same order (each row's weights summed and accumulated
    in its shapes' order)."""
    if not starts:
        return []
    rows, most_n = len(starts), max(len(s.cands) for s in starts)
    width = max(s.band.shape[1] for s in starts)
    values = np.full((rows, most_n), np.iinfo(np.int64).max)  # a padded candidate is never a first value
    unit = np.zeros((rows, most_n))
    band = np.zeros((rows, most_n, width), dtype=np.int64)  # a position in the rows' candidates flattened
    inside = np.zeros((rows, most_n, width), dtype=bool)
    for k, s in enumerate(starts):
        n, w = s.band.shape
        values[k, :n], unit[k, :n] = s.c, s.unit
        band[k, :n, :w] = s.band + k * most_n
        inside[k, :n, :w] = s.inside
    # each candidate's weight (its shapes' summed in their order) and the weight up to it, row by row
    at = np.concatenate([s.at + k * most_n for k, s in enumerate(starts)])
    per = np.bincount(at, weights=np.concatenate([s.weight for s in starts]), minlength=rows * most_n)
    prefix = np.cumsum(per.astype(np.float64).reshape(rows, most_n), axis=1)
    first_max = np.array([s.first_max for s in starts])
    flat = np.where(values <= first_max[:, None], unit * prefix, INF).reshape(-1)
    # the weight between c[j] and c[i], in c[i], for every step j -> i of the band: the same for every count
    span = np.where(inside, unit[:, :, None] * (prefix[:, :, None] - prefix.reshape(-1).take(band)), INF)
    counts = [min(max_values, len(s.cands)) for s in starts]
    lasts = np.array([len(s.cands) - 1 for s in starts], dtype=np.int64) + np.arange(rows) * most_n
    # each row's best step into every candidate, as a position in its band, for each count after the first
    choices: list[_I] = []
    last = [flat.take(lasts)]
    cell_starts = np.arange(rows * most_n) * width
    for _ in range(2, max(counts) + 1):
        total = flat.take(band)
        total += span
        best = total.argmin(axis=2)
        flat = total.reshape(-1).take(cell_starts + best.reshape(-1))
        choices.append(best)
        last.append(flat.take(lasts))
    out = []
    for k, (s, ends) in enumerate(zip(starts, np.stack(last, axis=1).tolist(), strict=True)):
        costs = [x + s.zero_cost if math.isfinite(x) else INF for x in ends[: counts[k]]]
        out.append(_Curve([INF] * s.pad + costs, trace=functools.partial(_trace, s, choices, k)))
    return out


def _trace(start: _Start, choices: Sequence[_I], k: int, count: int) -> tuple[int, ...]:
    """Row ``k``'s values with ``count`` of them (the zero value's graph included), traced back from its top."""
    m = count - start.pad  # the ladder's own values, after the zero value's graph
    cands, band = start.cands, start.band
    i = len(cands) - 1
    picked = [cands[i]]
    for back in reversed(choices[: m - 1]):
        i = int(band[i, back[k, i]])
        picked.append(cands[i])
    return (0,) * start.pad + tuple(reversed(picked))


class _Allocation:
    """The exact allocation of graphs over rows' curves: ``best[g]`` the least cost with exactly ``g`` graphs (each
    row at least one value), ``picks`` how many values each row takes on the way. Worked out only up to the largest
    budget asked (the totals above it never change the ones below)."""

    def __init__(self, curves: Sequence[_Curve]) -> None:
        self.curves = tuple(curves)
        self.graphs = sum(len(c.costs) for c in curves)
        self._cap = -1
        self._best: _F = np.zeros(0)
        self._picks: tuple[_I, ...] = ()
        self._pick_lists: list[list[int]] = []

    @property
    def least(self) -> int | None:
        """The fewest graphs with a finite cost (each row its fewest finite values); None when there are none."""
        firsts = [next((m for m, c in enumerate(curve.costs, start=1) if math.isfinite(c)), 0) for curve in self.curves]
        return sum(firsts) if all(firsts) else None

    @property
    def best(self) -> _F:
        return self._upto(self.graphs)[0]

    def _upto(self, cap: int) -> tuple[_F, tuple[_I, ...]]:
        """``best`` and ``picks`` for totals up to ``cap``. Each row's pass spans only the totals the rows before it
        can reach (beyond them every cost is infinite); a row's counts are tried at once, the fewest values winning a
        tie."""
        if cap <= self._cap:
            return self._best, self._picks
        cap = min(self.graphs, max(cap, 2 * self._cap))  # budgets are asked in rising order: grow geometrically
        best = np.zeros(1)  # the least cost for each total the rows so far can take (0 up to min(reach, cap))
        reach = 0  # the most graphs the rows so far can take
        picks: list[_I] = []
        for curve in self.curves:
            costs = curve.cost_array
            most = len(costs)
            end = min(reach + most, cap) + 1
            # cand[m - 1, g]: the rows before with g - m graphs, this one with m values (INF where they cannot)
            held = np.full(most + end, INF)
            held[most : most + len(best)] = best
            cand = held[_windows(most, end)]
            cand += costs[:, None]
            at = cand.argmin(axis=0)
            best = cand[at, _arange(end)]
            # a row's pick up to its own reach: a finite total never asks beyond it
            picks.append(np.where(np.isfinite(best), at + 1, 0))
            reach += most
        out = np.full(cap + 1, INF)
        out[: len(best)] = best
        self._cap, self._best, self._picks = cap, out, tuple(picks)
        self._pick_lists = [p.tolist() for p in picks]  # the traceback reads one value per row: lists read faster
        return self._best, self._picks

    def counts(self, budget: int) -> tuple[float, list[int]] | None:
        """The least cost within ``budget`` graphs and the values per row; None when none is finite."""
        top = min(budget, self.graphs)
        best, _ = self._upto(top)
        g = int(best[: top + 1].argmin())
        cost = float(best[g])
        if not math.isfinite(cost):
            return None
        out = []
        for pick in reversed(self._pick_lists):
            m = pick[g]
            out.append(m)
            g -= m
        return cost, list(reversed(out))


#: Index matrices kept per (values, totals) shape: an allocation asks the same few hundred again and again.
_WINDOWS: dict[tuple[int, int], _I] = {}
_ARANGES: dict[int, _I] = {}
MOST_WINDOWS = 4096


def _windows(most: int, end: int) -> _I:
    """``[m - 1, g] -> most - m + g``: where the totals ``g - m`` of the rows before sit in an array padded by
    ``most`` (read only)."""
    got = _WINDOWS.get((most, end))
    if got is None:
        if len(_WINDOWS) >= MOST_WINDOWS:
            _WINDOWS.clear()
        got = np.arange(end)[None, :] + (most - np.arange(1, most + 1))[:, None]
        got.flags.writeable = False
        _WINDOWS[(most, end)] = got
    return got


def _arange(n: int) -> _I:
    got = _ARANGES.get(n)
    if got is None:
        if len(_ARANGES) >= MOST_WINDOWS:
            _ARANGES.clear()
        got = np.arange(n)
        got.flags.writeable = False
        _ARANGES[n] = got
    return got


def _allocate(curves: Sequence[_Curve]) -> _Allocation:
    """Values per row, for every total up to the curves' sum: exact over the curves (worked out as budgets ask)."""
    return _Allocation(curves)


#: Packs a (batch, query) row, or a (row, value) bucket, into one sortable integer (each stays far below 2^31).
_PACK = 1 << 31
#: A bucket (batch, query, value) packed into one int64 that sorts as the buckets do, this many bits each (a table
#: with a larger value is not packed: :meth:`LookupTable.found`), and the packed "no bucket".
PACK_BITS = 21
NOT_FOUND = np.iinfo(np.int64).max


class LookupTable:
    """Buckets as vllm-gaudi's lookup reads them (``find_equal_or_closest_greater_config`` @ 091bbadd): (batch,
    query) rows in sorted order, each with its sorted last values. The one lookup rule of the planner and its
    budget."""

    def __init__(self, buckets: Sequence[tuple[int, int, int]]) -> None:
        rows: dict[tuple[int, int], set[int]] = {}
        for b, q, c in buckets:
            rows.setdefault((b, q), set()).add(c)
        keys = sorted(rows)
        self.batch = np.array([k[0] for k in keys], dtype=np.int64)
        self.query = np.array([k[1] for k in keys], dtype=np.int64)
        self.values = [np.array(sorted(rows[k]), dtype=np.int64) for k in keys]
        self.top = np.array([v[-1] for v in self.values], dtype=np.int64)
        self._rows = self.batch * _PACK + self.query
        #: Every bucket in sorted order (row index, value), packed: a shape's bucket is one search away once its row
        #: is known.
        self.row_of = np.repeat(np.arange(len(keys), dtype=np.int64), [len(v) for v in self.values])
        self.value_of = np.concatenate(self.values) if self.values else np.zeros(0, dtype=np.int64)
        self._flat = self.row_of * _PACK + self.value_of
        self._priced: tuple[Callable[[int, int, int], float], _F] | None = None
        self._pack: tuple[_I | None] | None = None

    @classmethod
    def of_rows(cls, rows: Sequence[int], values: Sequence[Sequence[int]]) -> LookupTable:
        """The buckets ``(row, 1, value)`` of rising rows, each with rising values (a phase plan's): the same table
        as from the buckets, without sorting them again."""
        table = cls.__new__(cls)
        table.batch = np.array(rows, dtype=np.int64)
        table.query = np.ones(len(rows), dtype=np.int64)
        table.values = [np.array(v, dtype=np.int64) for v in values]
        table.top = np.array([v[-1] for v in values], dtype=np.int64)
        table._rows = table.batch * _PACK + table.query
        table.row_of = np.repeat(np.arange(len(rows), dtype=np.int64), [len(v) for v in values])
        table.value_of = np.concatenate(table.values)
        table._flat = table.row_of * _PACK + table.value_of
        table._priced = None
        table._pack = None
        return table

    def __len__(self) -> int:
        return len(self._flat)

    def seconds(self, price: Callable[[int, int, int], float]) -> _F:
        """Each bucket's ``price`` (batch, query, value), in the order :meth:`index` counts them; kept for the last
        ``price`` asked (the same callable object), since a table is priced at many shapes."""
        if self._priced is None or self._priced[0] is not price:
            rows, batch, query = self.row_of.tolist(), self.batch.tolist(), self.query.tolist()
            got = np.array([price(batch[r], query[r], v) for r, v in zip(rows, self.value_of.tolist(), strict=True)],
                           dtype=np.float64)  # fmt: skip
            self._priced = (price, got)
        return self._priced[1]

    def found(self, at: _I) -> _I | None:
        """Each shape's bucket (``at``: from :meth:`index`) packed (:data:`NOT_FOUND`: none holds it), for
        :func:`moved`; None where a value is too large to pack."""
        if not len(self):
            return np.full(len(at), NOT_FOUND, dtype=np.int64)
        packed = self._packed()
        if packed is None:
            return None
        return np.where(at >= 0, packed[np.maximum(at, 0)], NOT_FOUND)

    def _packed(self) -> _I | None:
        """Every bucket packed, in the order :meth:`index` counts them (made once per table; None: too large)."""
        if self._pack is None:
            if max(int(self.batch.max()), int(self.query.max()), int(self.value_of.max())) >= 1 << PACK_BITS:
                self._pack = (None,)
            else:
                row = self.row_of
                self._pack = ((self.batch[row] << (2 * PACK_BITS)) | (self.query[row] << PACK_BITS) | self.value_of,)
        return self._pack[0]

    def bucket(self, i: int) -> tuple[int, int, int]:
        """The bucket at index ``i`` of :meth:`index` (batch, query, value)."""
        row = int(self.row_of[i])
        return int(self.batch[row]), int(self.query[row]), int(self.value_of[i])

    def index(self, b: _I, q: _I, c: _I) -> _I:
        """Per shape (b, q, c), the index of the first bucket in sorted order covering it (-1: none does): the first
        row at or after (b, q) whose batch, query and largest value hold it, there the smallest value at or above c.
        Rows are tried one step at a time for the shapes the row before did not hold (most are held by their first)."""
        n = len(self.values)
        chosen = self._rows.searchsorted(b * _PACK + q)  # rows sort by (batch, query)
        inside = chosen < n
        if inside.all():  # every shape has a first row (the usual case): its first round without gathers
            held = (self.batch[chosen] >= b) & (self.query[chosen] >= q) & (self.top[chosen] >= c)
            pending = np.flatnonzero(~held)
            chosen[pending] += 1
            pending = pending[chosen[pending] < n]
        else:
            pending = np.flatnonzero(inside)
        while len(pending):  # at most n rounds: each moves a pending shape one row on
            at = chosen[pending]
            held = (self.batch[at] >= b[pending]) & (self.query[at] >= q[pending]) & (self.top[at] >= c[pending])
            pending = pending[~held]
            chosen[pending] += 1
            pending = pending[chosen[pending] < n]
        found = chosen < n
        if found.all():
            return self._flat.searchsorted(chosen * _PACK + c)
        out = np.full(len(b), -1, dtype=np.int64)
        out[found] = self._flat.searchsorted(chosen[found] * _PACK + c[found])
        return out

    def find(self, b: _I, q: _I, c: _I) -> tuple[_I, _I, _I, npt.NDArray[np.bool_]]:
        """Per shape (b, q, c), the first bucket in sorted order covering it (:meth:`index`), its own shape where
        none does, and whether one does."""
        i = self.index(b, q, c)
        found = i >= 0
        if not len(self):
            return b.copy(), q.copy(), c.copy(), found
        at = np.maximum(i, 0)
        row = self.row_of[at]
        return (np.where(found, self.batch[row], b), np.where(found, self.query[row], q),
                np.where(found, self.value_of[at], c), found)  # fmt: skip


def moved(found: _I, seconds: _F, b: _I, q: _I, c: _I, added: Sequence[tuple[int, int, int]],
          price: Callable[[int, int, int], float]) -> tuple[_I, _F] | None:  # fmt: skip
    """The shapes' buckets (packed, :meth:`LookupTable.found`) and seconds once ``added`` join the buckets they were
    looked up in (``found``, ``seconds``: before), without looking them up again: vllm-gaudi's lookup takes the first
    bucket in sorted order that holds a shape, so a shape moves to an added bucket exactly where that one holds it
    and sorts before its bucket so far. None where an added value is too large to pack."""
    tops: tuple[int, int] | None = None  # the shapes' largest batch and query: an added bucket above both holds all
    for x in sorted(set(added)):
        if max(x) >= 1 << PACK_BITS:
            return None
        packed = (x[0] << (2 * PACK_BITS)) | (x[1] << PACK_BITS) | x[2]
        moves = found > packed
        moves &= c <= x[2]
        if tops is None:
            tops = (int(b.max()), int(q.max())) if len(b) else (0, 0)
        if x[0] < tops[0]:
            moves &= b <= x[0]
        if x[1] < tops[1]:
            moves &= q <= x[1]
        if moves.any():
            found = np.where(moves, packed, found)
            seconds = np.where(moves, price(*x), seconds)
    return found, seconds


def lookup(
    rows: Sequence[int], values: Sequence[Sequence[int]], first: _I, second: _I
) -> tuple[_I, _I, npt.NDArray[np.bool_]]:
    """Per shape, the bucket (row, value) vllm-gaudi's lookup takes in the buckets ``(row, 1, value)``
    (:class:`LookupTable`), and whether one was found (not: a compile)."""
    table = LookupTable([(r, 1, v) for r, vals in zip(rows, values, strict=True) for v in vals])
    rows_of, _, values_of, found = table.find(first, np.ones_like(first), second)
    return rows_of, values_of, found


def _row_candidates(axes: PhaseAxes, first: _I, weight: _F) -> list[int]:
    """The rows tried: a log grid up to the top, the top, and the heaviest first values (``first`` is distinct per
    row granule and value; its weights are summed per first value here)."""
    g = axes.row_round
    grid = {
        min(axes.rows_top, -(-v // g) * g) for v in _log_grid(1, axes.rows_top, axes.rows_per_octave * axes.resolution)
    }
    if axes.heavy_row_share > 0 and len(first):
        values, at = np.unique(first, return_inverse=True)
        mass = np.bincount(at, weights=weight)
        heaviest = np.argsort(-mass, kind="stable")[:MAX_HEAVY_ROWS]
        grid |= {int(values[i]) for i in heaviest if mass[i] >= axes.heavy_row_share * mass.sum()}
    return sorted(grid | {axes.rows_top} | set(axes.required_rows))


def _row_times(axes: PhaseAxes, row: int, distinct: _I, values: bytes) -> _F:
    """A row's seconds at each of the shapes' distinct second values (at least its floor): kept per axes (every
    weight set of a planning run has the same shapes)."""

    def make() -> _F:
        floor = axes.floor(row)
        return np.array([axes.time(row, max(int(v), floor)) for v in distinct])

    return _axes_kept(axes, ("row times", row, values), make)


def _row_steps(axes: PhaseAxes, cands: list[int]) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Which candidate row may follow which (a row's least value within the factor rule over the need just past
    the one before), and which may come first: kept per axes and candidates."""

    def make() -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        r, n = cands, len(cands)
        # a row may follow another only with no required row strictly between them, and come first only at or
        # below the lowest one
        req = sorted(axes.required_rows)
        below = [bisect.bisect_left(req, x) for x in r]  # required rows under each candidate
        upto = [bisect.bisect_right(req, x) for x in r]  # ... at or under it
        need_ok = np.array([[axes.floor(r[i]) <= GROSS_FACTOR * axes.need(r[i], r[j]) and j < i
                             and below[i] == upto[j] for j in range(n)] for i in range(n)])  # fmt: skip
        first_ok = np.array([axes.floor(x) <= GROSS_FACTOR * axes.need(x, 0) and below[k] == 0
                             for k, x in enumerate(r)])  # fmt: skip
        return need_ok, first_ok

    return _axes_kept(axes, ("row steps", tuple(cands)), make)


def _row_sets(axes: PhaseAxes, cands: list[int], first: _I, second: _I, weight: _F, most: int) -> list[tuple[int, ...]]:
    """For 1..most rows, the rows minimising sum(weight x time(row, own second value)) (the values' padding left to
    the ladders), each row's first value reachable under the factor rule from the previous row, the last the top."""
    r = np.array(cands, dtype=np.int64)
    n = len(r)
    order = np.argsort(first, kind="stable")
    a, b, w = first[order], second[order], weight[order]
    at = np.searchsorted(a, r, side="right")  # shapes with first value <= r[j]: a[:at[j]]
    distinct, inverse = np.unique(b, return_inverse=True)
    cum = np.zeros((n, n + 1))  # cum[i, j + 1]: weighted time in row r[i] of the shapes up to r[j]
    values = distinct.tobytes()
    for i, row in enumerate(cands):
        c = np.concatenate([[0.0], np.cumsum(_row_times(axes, row, distinct, values)[inverse] * w)])
        cum[i, 1:] = c[at]
    need_ok, first_ok = _row_steps(axes, cands)
    diag = cum[np.arange(n), np.arange(n) + 1]  # every shape up to the row, in the row
    cost = np.where(first_ok, diag, INF)
    # the shapes above r[j] up to r[i], in row r[i], where r[i] may follow r[j] (INF where not: INF + cost is INF)
    seg = np.where(need_ok, diag[:, None] - cum[:, 1:], INF)
    choices: list[_I] = []
    out: list[tuple[int, ...]] = []
    for k in range(1, min(most, n) + 1):
        if k > 1:
            total = cost[None, :] + seg
            best = total.argmin(axis=1)
            cost = total[np.arange(n), best]
            choices.append(best)
        if not math.isfinite(cost[-1]):
            continue
        picked, i = [int(r[-1])], n - 1
        for back in reversed(choices):
            i = int(back[i])
            picked.append(int(r[i]))
        out.append(tuple(reversed(picked)))
    return out


#: Most entries of a table marking the values (or pairs) present (:func:`unique_ints`, :func:`unique_pairs`; 20 MiB
#: with its running count): above it, a sort.
DENSE_MOST = 1 << 22


def _dense(values: _I) -> tuple[_I, _I] | None:
    """:func:`unique_ints` by marking the values present in a table as long as their range; None where a value is
    negative or the range passes :data:`DENSE_MOST`."""
    low, high = int(values.min()), int(values.max())
    if low < 0 or high - low >= DENSE_MOST:
        return None
    present = np.zeros(high - low + 1, dtype=bool)
    present[values - low] = True
    return np.flatnonzero(present) + low, (np.cumsum(present, dtype=np.int32) - 1)[values - low].astype(np.int64)


def unique_ints(values: _I) -> tuple[_I, _I]:
    """``np.unique(values, return_inverse=True)`` of ints (the distinct values sorted, each value's index among
    them), without sorting them where their range is small: a plan's spread shapes are half a million values of a
    few thousand."""
    got = _dense(values) if len(values) else None
    if got is None:
        distinct, inverse = np.unique(values, return_inverse=True)
        return distinct, inverse.reshape(-1)
    return got


def unique_pairs(first: _I, second: _I) -> tuple[_I, _I, _I]:
    """The distinct (first, second) pairs of ints in lexicographic order (firsts, seconds) and each pair's index
    among them: ``np.unique`` of the pairs packed into one int, with its inverse, without a sort where each axis'
    distinct values are few (:func:`unique_ints`); else one sort of the pairs packed by their ranks."""
    firsts, seconds = unique_ints(first), unique_ints(second)
    width = len(seconds[0])
    if len(firsts[0]) * width >= DENSE_MOST:  # ranks below len(first) ** 2: the packed pair fits an int64
        keys, inverse = np.unique(firsts[1] * width + seconds[1], return_inverse=True)
        return firsts[0][keys // width], seconds[0][keys % width], inverse.reshape(-1)
    pairs = firsts[1] * width + seconds[1]
    present = np.zeros(len(firsts[0]) * width, dtype=bool)
    present[pairs] = True
    at = np.flatnonzero(present)
    inverse = (np.cumsum(present, dtype=np.int32) - 1)[pairs].astype(np.int64)
    return firsts[0][at // width], seconds[0][at % width], inverse


def binned(values: _I) -> _I:
    """Values rounded up to 16 steps per doubling (at most 6.25% above; up to 16 exact)."""
    out = values.copy()
    big = values > 16
    _, exponent = np.frexp(values[big].astype(np.float64))  # value = mantissa x 2^exponent, mantissa in [0.5, 1)
    step = np.left_shift(1, exponent.astype(np.int64) - 5)
    out[big] = -(-values[big] // step) * step
    return out


def _times(axes: PhaseAxes, rows: Sequence[int], values: Sequence[Sequence[int]], first: _I, second: _I, *,
           rising: bool = False) -> _F:  # fmt: skip
    """Each shape's seconds in its bucket (a shape no bucket holds, beyond the limits, runs at its own shape);
    ``rising``: the rows rise, and each row's values."""
    table = (LookupTable.of_rows(rows, values) if rising else
             LookupTable([(r, 1, v) for r, vals in zip(rows, values, strict=True) for v in vals]))  # fmt: skip
    at = table.index(first, np.ones_like(first), second)
    # each bucket priced once (a plan holds at most its budget's graphs; the shapes are thousands)
    priced = np.array([axes.time(r, v) for r, v in zip(table.batch[table.row_of].tolist(), table.value_of.tolist(),
                                                       strict=True)], dtype=np.float64)  # fmt: skip
    t = priced[np.maximum(at, 0)] if len(priced) else np.zeros(len(at))
    missed = np.flatnonzero(at < 0)
    if len(missed):  # runs at its own shape
        t[missed] = [axes.time(int(a), int(b)) for a, b in zip(first[missed].tolist(), second[missed].tolist(),
                                                                strict=True)]  # fmt: skip
    return t


def _seconds(axes: PhaseAxes, rows: Sequence[int], values: Sequence[Sequence[int]], first: _I, second: _I,
             weight: _F) -> float:  # fmt: skip
    """The weighted seconds of the shapes in their buckets (a shape no bucket holds, beyond the limits, runs at its
    own shape: charged so). A plan's rising rows and values are summed as :class:`_Pricer` keeps them: per row, the
    shapes whose lookup starts and ends there (first values sorted, stable), in row order, then the rest."""
    t = _times(axes, rows, values, first, second)
    if not _rising(rows, values):
        return weighted_sum(weight, t)
    order = np.argsort(first, kind="stable")
    by_first, by_second, w, t = first[order], second[order], weight[order], t[order]
    total, lo = 0.0, 0
    rest: list[_I] = []
    for row, vals in zip(rows, values, strict=True):
        hi = int(np.searchsorted(by_first, row, side="right"))
        held = by_second[lo:hi] <= vals[-1]
        total += weighted_sum(w[lo:hi][held], t[lo:hi][held])
        rest.append(np.flatnonzero(~held) + lo)
        lo = hi
    rest.append(np.arange(lo, len(first)))
    at = np.concatenate(rest)
    return total + weighted_sum(w[at], t[at]) if len(at) else total


def _rising(rows: Sequence[int], values: Sequence[Sequence[int]]) -> bool:
    """Whether the rows rise, and each row's values (every phase plan's do): each is its own sorted set."""
    return list(rows) == sorted(set(rows)) and all(len(v) and list(v) == sorted(set(v)) for v in values)


#: No shapes (positions).
_NONE: _I = np.zeros(0, dtype=np.int64)
#: Most rows' slices one :class:`_Pricer` keeps (a planning run asks a few thousand distinct ones per weight set).
PRICED_ROWS = 1 << 14


def _priced(axes: PhaseAxes, row: int, values: tuple[int, ...]) -> tuple[_F, _I]:
    """A row's seconds at each of its values, and the values as an array: kept per axes (most rows priced are
    priced again after another row, or for another weight set)."""

    def make() -> tuple[_F, _I]:
        time = axes.time
        return np.array([time(row, x) for x in values], dtype=np.float64), np.array(values, dtype=np.int64)

    return _axes_kept(axes, ("priced", row, values), make)


class _Pricer:
    """One phase's weighted shapes priced in many plans: :func:`_seconds`'s figure, bit for bit, with each row's
    share of it kept. A shape's lookup starts at the first row at or above its first value; the shapes starting at
    a row that its largest value holds (all but a few that spill onward) take their time from that row alone, so a
    row's weighted seconds are reused by every plan holding the same row, with the same row before it and the same
    values."""

    def __init__(self, axes: PhaseAxes, first: _I, second: _I, weight: _F) -> None:
        self.axes, self.first, self.second, self.weight = axes, first, second, weight
        order = np.argsort(first, kind="stable")
        self.by_first, self.by_second, self.by_weight = first[order], second[order], weight[order]
        self.first_list = self.by_first.tolist()  # a row's shapes are two bisections away
        self.rows: dict[tuple[int, int, tuple[int, ...]], tuple[float, _I, int]] = {}

    def _row(self, prev: int, row: int, values: tuple[int, ...]) -> tuple[float, _I, int]:
        """The weighted seconds of the shapes starting at ``row`` (after ``prev``; -1: the first row) that it holds,
        the ones it does not hold (sorted positions) and where its shapes end."""
        key = (prev, row, values)
        got = self.rows.get(key)
        if got is None:
            lo = bisect.bisect_right(self.first_list, prev) if prev >= 0 else 0
            hi = bisect.bisect_right(self.first_list, row)
            second = self.by_second[lo:hi]
            priced, v = _priced(self.axes, row, values)
            if not len(second) or int(second.max()) <= values[-1]:  # every shape held (the usual row): no masks
                got = (weighted_sum(self.by_weight[lo:hi], priced[v.searchsorted(second)]), _NONE, hi)
            else:
                at = v.searchsorted(second)
                held = at < len(values)
                got = (weighted_sum(self.by_weight[lo:hi][held], priced[at[held]]), np.flatnonzero(~held) + lo, hi)
            if len(self.rows) >= PRICED_ROWS:
                self.rows.clear()
            self.rows[key] = got
        return got

    def seconds(self, rows: Sequence[int], values: Sequence[Sequence[int]]) -> float:
        if not len(self.first) or not _rising(rows, values):  # not a plan's rows: the lookup from scratch
            return _seconds(self.axes, rows, values, self.first, self.second, self.weight)
        total = 0.0
        spilled: list[_I] = []
        prev, end = -1, 0
        for row, vals in zip(rows, values, strict=True):
            part, spill, end = self._row(prev, row, tuple(vals))
            total += part
            if len(spill):
                spilled.append(spill)
            prev = row
        if end < len(self.first):  # above the last row: no bucket holds them
            spilled.append(np.arange(end, len(self.first)))
        if not spilled:
            return total
        # the few shapes their first row does not hold: vllm-gaudi's rule over every row
        at = np.concatenate(spilled)
        t = self._spilled(rows, values, self.by_first[at].tolist(), self.by_second[at].tolist())
        return total + weighted_sum(self.by_weight[at], t)

    def _spilled(self, rows: Sequence[int], values: Sequence[Sequence[int]], first: list[int],
                 second: list[int]) -> _F:  # fmt: skip
        """:func:`_times` of a few shapes in rising rows and values, one shape at a time (no table built): the first
        row at or above a shape's first value whose largest value holds its second, there the least value that does;
        its own shape where no row does."""
        time, n = self.axes.time, len(rows)
        out = []
        for f, v in zip(first, second, strict=True):
            j = bisect.bisect_left(rows, f)
            while j < n and values[j][-1] < v:
                j += 1
            out.append(time(rows[j], values[j][bisect.bisect_left(values[j], v)]) if j < n else time(f, v))
        return np.array(out, dtype=np.float64)


@dataclasses.dataclass(frozen=True)
class Shapes:
    """Weighted shapes of one phase as arrays (first value within the rows' top, second value, weight): made once
    and priced in every candidate plan."""

    first: _I
    second: _I
    weight: _F
    _pricers: list[tuple[PhaseAxes, _Pricer]] = dataclasses.field(default_factory=list, compare=False, repr=False)

    def pricer(self, axes: PhaseAxes) -> _Pricer:
        """These shapes priced under ``axes`` (kept: every candidate plan of a planning run prices them)."""
        for kept, pricer in self._pricers:
            if kept is axes:
                return pricer
        pricer = _Pricer(axes, self.first, self.second, self.weight)
        self._pricers.append((axes, pricer))
        return pricer

    @classmethod
    def of(cls, axes: PhaseAxes, shapes: Mapping[tuple[int, int], float]) -> Shapes:
        return cls.of_arrays(axes, *_arrays(shapes))

    @classmethod
    def of_arrays(cls, axes: PhaseAxes, first: _I, second: _I, weight: _F) -> Shapes:
        keep = weight > 0
        return cls(np.minimum(np.maximum(first[keep], 1), axes.rows_top), second[keep], weight[keep])


def _arrays(shapes: Mapping[tuple[int, int], float]) -> tuple[_I, _I, _F]:
    """The shapes of positive weight as arrays (first, second, weight), in the mapping's order."""
    n = len(shapes)
    keys = np.fromiter(itertools.chain.from_iterable(shapes), dtype=np.int64, count=2 * n).reshape(n, 2)
    weight = np.fromiter(shapes.values(), dtype=np.float64, count=n)
    keep = weight > 0
    return keys[keep, 0], keys[keep, 1], weight[keep]


def phase_seconds(axes: PhaseAxes, plan: PhasePlan, shapes: Mapping[tuple[int, int], float] | Shapes) -> float:
    """The weighted seconds of ``shapes`` in ``plan``'s buckets."""
    s = shapes if isinstance(shapes, Shapes) else Shapes.of(axes, shapes)
    if not len(s.first):
        return 0.0
    return s.pricer(axes).seconds(plan.rows, plan.values)


@dataclasses.dataclass(frozen=True)
class PhaseOptions:
    """A phase's candidate plans (one per number of rows), ready to answer any budget."""

    axes: PhaseAxes
    first: _I
    second: _I
    weight: _F
    candidates: tuple[tuple[tuple[int, ...], tuple[_Curve, ...], _Allocation], ...]
    #: Each candidate's seconds for the values per row asked so far: a budget's plan is often another budget's.
    _timed: dict[tuple[int, tuple[int, ...]], float] = dataclasses.field(default_factory=dict, compare=False,
                                                                           repr=False)  # fmt: skip
    _best: dict[int, PhasePlan] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @kept_property
    def _pricer(self) -> _Pricer:
        return _Pricer(self.axes, self.first, self.second, self.weight)

    @property
    def least(self) -> int:
        """The fewest graphs any plan of this phase needs under the ladder rules."""
        finite = [least for _, _, a in self.candidates if (least := a.least) is not None]
        return min(finite, default=NO_LADDER)

    def reserve(self, budget: int) -> None:
        """Work out every allocation up to ``budget`` at once (the largest budget about to be asked)."""
        for _, _, alloc in self.candidates:
            alloc.counts(budget)

    def best(self, budget: int) -> PhasePlan:
        """The plan with the least modelled time of the phase's shapes within ``budget`` graphs (through the real
        lookup); :class:`ConfigError` when the ladders need more."""
        if budget in self._best:
            return self._best[budget]
        out: PhasePlan | None = None
        for k, (rows, curves, alloc) in enumerate(self.candidates):
            got = alloc.counts(budget)
            if got is None:
                continue
            key = (k, tuple(got[1]))
            seconds = self._timed.get(key)
            # a candidate's values made only where it is priced or taken (most were priced at an earlier split)
            values = None
            if seconds is None:
                values = _value_sets(curves, got[1])
                seconds = self._timed[key] = self._pricer.seconds(rows, values)
            if out is None or seconds < out.seconds - 1e-15:
                out = PhasePlan(rows, values if values is not None else _value_sets(curves, got[1]), seconds)
        if out is None:
            raise BudgetTooSmall(f"a budget of {budget} graphs for this phase cannot keep every shape within "
                                 f"{GROSS_FACTOR}x its need; accepted: at least {self.least}", self.least)  # fmt: skip
        self._best[budget] = out
        return out


def _value_sets(curves: Sequence[_Curve], counts: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """Each row's values at its count."""
    return tuple(c.value_set(m) for c, m in zip(curves, counts, strict=True))


def phase_options(axes: PhaseAxes, shapes: Mapping[tuple[int, int], float], most_rows: int = 1 << 30) -> PhaseOptions:
    """The candidate plans of a phase for ``shapes`` ((first, second) -> weight): for each number of rows up to
    ``most_rows``, the rows and each row's curve of values, and their allocation for every budget."""
    return phase_options_of(axes, *_arrays(shapes), most_rows=most_rows, fallback=shapes)


def phase_options_of(axes: PhaseAxes, first: _I, second: _I, weight: _F, most_rows: int = 1 << 30, *,
                     fallback: Mapping[tuple[int, int], float] | None = None) -> PhaseOptions:  # fmt: skip
    """:func:`phase_options` of shapes as arrays (first, second, weight; those of weight 0 or less are left out)."""
    keep = weight > 0
    first, second, weight = first[keep], second[keep], weight[keep]
    if not len(first):
        weight = np.array([float((fallback or {}).get((axes.rows_top, 0), 1.0))])
        first, second = np.array([axes.rows_top], dtype=np.int64), np.zeros(1, dtype=np.int64)
    first = np.minimum(np.maximum(first, 1), axes.rows_top)
    first = np.minimum(-(-first // axes.row_round) * axes.row_round, axes.rows_top)
    second = binned(second)
    # one entry per (row granule, binned value): the work below is bounded by the limits' octaves
    first, second, inverse = unique_pairs(first, second)
    weight = np.bincount(inverse, weights=weight).astype(np.float64)
    cands = _row_candidates(axes, first, weight)
    # the axes as a spill row and as the last row sees them, made once (a copy per ladder cost more than the ladder's
    # own setup); the copies share the memo
    spilled = {spill: dataclasses.replace(axes, spill=spill) for spill in {False, axes.spill}}
    row_sets = _row_sets(axes, cands, first, second, weight, min(MAX_ROWS * axes.resolution, most_rows))
    # every distinct row (with the row before it and whether it spills) of every row set started, then their ladders
    # worked out together
    started: dict[tuple[int, int, bool], _Start | _Curve] = {}
    keys: list[list[tuple[int, int, bool]]] = []
    firsts = first.tolist()  # in rising order (unique_pairs sorts the pairs): a row's shapes are one slice
    for rows in row_sets:
        keys.append([])
        for i, row in enumerate(rows):
            prev = rows[i - 1] if i else 0
            spill = axes.spill and i < len(rows) - 1
            key = (row, prev, spill)
            if key not in started:  # the shapes the row holds first: above the row before, up to it
                lo, hi = bisect.bisect_right(firsts, prev), bisect.bisect_right(firsts, row)
                started[key] = _ladder_start(spilled[spill], row, prev, second[lo:hi], weight[lo:hi])
            keys[-1].append(key)
    pending = [(key, s) for key, s in started.items() if isinstance(s, _Start)]
    curves = {key: s for key, s in started.items() if isinstance(s, _Curve)}
    curves |= zip([key for key, _ in pending], _ladders([s for _, s in pending], MAX_VALUES_PER_ROW * axes.resolution),
                  strict=True)  # fmt: skip
    out = []
    for rows, row_keys in zip(row_sets, keys, strict=True):
        row_curves = tuple(curves[key] for key in row_keys)
        out.append((rows, row_curves, _allocate(row_curves)))
    return PhaseOptions(axes, first, second, weight, tuple(out))

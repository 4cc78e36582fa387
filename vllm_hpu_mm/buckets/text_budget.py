"""The text graph budget, beside the planner: how many graphs the planned buckets get, judged by modelled time at
every load the server meets.

Pure: the planning weights, what each load ran (:class:`LoadShapes`: one schedule each, its drain included), the
runtime's own buckets and a step-time model in; the plan, its budget and the reason out. No replay is called back:
the padded time of a bucket set at a load is computed here (:func:`padded_time`) through vllm-gaudi's lookup rule
(the first bucket in sorted order at least as large as the shape in every dimension; ``find_equal_or_closest_greater
_config`` @ 091bbadd), each prefill chunk looked up alone (a runner that merges prompts without context pads no
less per chunk than this says, and the benchmark replays the runner's own code).

The default rule (:func:`choose_budget`): from a third of the graphs the runtime's own strategy warms, raised by a
twenty-fourth at a time to at most a half (never above :data:`MAX_DEFAULT_BUDGET`), until the planned buckets'
padded time at every load is at most :data:`MARGIN` of the runtime's own on the planning traffic (a plan that
merely ties on it tips over on traffic it was not planned on); the reason names the loads that needed more, and says
when a half still misses the margin.
At each budget the least-time plan is taken where it meets the margin; where it misses it at a load, the plan is
the one that stands best against the runtime's own (:func:`standing`: fewest loads padding longer, then fewest
missing the margin, then the worst load's ratio) among the other splits between the phases and re-plans with the
losing loads weighed in again (:func:`best_at`): least total time weighs every load alike, while the margin is per
load, and thinnest where the runtime's own pads least. A given budget is taken as it is, up to what the runtime's
largest built-in strategy would warm (:func:`check_budget`).

Warm-up follows the same shares as the graphs: given a warm-up estimate (seconds for a bucket set), a default budget
whose plan warms up longer than its share of the runtime's own warm-up (a third, or a half once raised) is not
taken, since fewer but larger graphs can take longer to warm than their count says.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import math
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
import numpy.typing as npt

from vllm_hpu_mm.buckets.text import (
    TextBucketPlan,
    TextLimits,
    plan_text_buckets,
    prepare_phases,
    text_bucket_splits,
)
from vllm_hpu_mm.buckets.text_time import (
    GROSS_FACTOR,
    NO_LADDER,
    NOT_FOUND,
    BudgetTooSmall,
    CachedTimes,
    LookupTable,
    StepTimes,
    cached,
    moved,
    weighted_sum,
)
from vllm_hpu_mm.buckets.turns import in_turns
from vllm_hpu_mm.engine import Bucket
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.kept import kept_property
from vllm_hpu_mm.values import GRAPH_BUDGET_CEILING

if TYPE_CHECKING:
    from vllm_hpu_mm.buckets.text_worst import WorstCase

__all__ = [
    "BUDGET_STEP_SHARE",
    "DEFAULT_BUDGET_SHARE",
    "MARGIN",
    "MAX_BUDGET_SHARE",
    "MAX_DEFAULT_BUDGET",
    "BudgetedPlan",
    "LoadShapes",
    "LoadVerdict",
    "PaddedTime",
    "Warmup",
    "best_at",
    "boosted",
    "budget_for",
    "budget_steps",
    "check_budget",
    "choose_budget",
    "default_most",
    "grow_from",
    "losing",
    "padded_time",
    "padded_times",
    "shape_arrays",
    "standing",
]

_I = npt.NDArray[np.int64]
_F = npt.NDArray[np.float64]
#: Seconds a runtime takes to warm a bucket set (prompt, decode): the plan's warm-up estimate.
Warmup = Callable[[Sequence[Bucket], Sequence[Bucket]], float]
#: The default budget starts at this share of the graphs the runtime's own strategy warms for the same limits and
#: rises by BUDGET_STEP_SHARE at a time, never above MAX_BUDGET_SHARE, until no load pads longer than under it.
DEFAULT_BUDGET_SHARE = 1 / 3
MAX_BUDGET_SHARE = 1 / 2
BUDGET_STEP_SHARE = 1 / 24
#: The most graphs the default budget takes, whatever the runtime's own count (:func:`default_most`): lin warms a
#: graph per step, thousands at the default max_model_len (16,794 for vllm-gaudi v0.19.0), and the planner's work
#: grows with the budget (the allocation over the rows' curves; the worst-shape search past it), so a third of that
#: planned for minutes. Above every default exp and pad take (at most 543) and a half of lin's at 32,768 tokens
#: (3,235): those plans are the same.
MAX_DEFAULT_BUDGET = 4096
#: The default budget's plan must pad at most this share of the runtime's own padded time at every judged load of
#: the planning traffic (held-out traffic differs from it; chosen on benchmarks/planner/results/planner_dev_time.md).
MARGIN = 0.85
#: Most budgets tried below a third when a third of the graphs warms up longer than a third of the runtime's own.
MAX_WARMUP_STEPS = 8
#: Relative slack in "not slower" (floating-point sums of the same seconds in another order).
TOLERANCE = 1e-9
#: Where the least-time plan at a budget misses the margin at a load (:func:`best_at`): re-plans with the losing
#: loads weighed in again, each round adding REPAIR_WEIGHT times the planning weights' useful seconds, spread over
#: the losing (load, phase) pairs (:func:`losing`). The planning weights give each load the same useful seconds, so a
#: load where the runtime's own buckets pad little (a thin margin) weighs no more there than one where they pad much.
REPAIR_ROUNDS = 2
REPAIR_WEIGHT = 1.0
#: The least padded share of the runtime's own a losing load's emphasis divides by (a load where it pads nothing
#: would otherwise take every weight).
MIN_SHARE = 1e-3


@dataclasses.dataclass(frozen=True)
class LoadShapes:
    """What one load ran (one schedule, drain included): prefill chunks (query tokens, context blocks) -> runs and
    decode steps (sequences, blocks) -> steps."""

    load: str
    prefill: Mapping[tuple[int, int], float]
    decode: Mapping[tuple[int, int], float]


@dataclasses.dataclass(frozen=True)
class PaddedTime:
    """Modelled seconds of a load's steps at their own shapes and in their buckets, per phase."""

    useful_prefill_s: float
    useful_decode_s: float
    bucket_prefill_s: float
    bucket_decode_s: float
    #: Distinct shapes no bucket holds: each compiles while a request waits (and runs at its own shape here).
    uncovered: int

    # kept once worked out: a planning run reads them a few hundred thousand times (standing, losing, the repairs)
    @kept_property
    def useful_s(self) -> float:
        return self.useful_prefill_s + self.useful_decode_s

    @kept_property
    def padded_s(self) -> float:
        return self.bucket_prefill_s + self.bucket_decode_s - self.useful_s

    @property
    def share(self) -> float:
        """Padded time over useful time."""
        return self.padded_s / self.useful_s if self.useful_s else 0.0


#: Most loads whose arrays a planning run keeps (the judged loads, those between and a few hundred steady states).
LOADS_KEPT = 512


@dataclasses.dataclass(frozen=True, eq=False)
class _PhaseArrays:
    """One phase of a load's shapes as arrays with their own modelled seconds: the first and second value, the runs
    and the own seconds, in the mapping's order. Made once per mapping (``shapes`` is kept so that the identity it is
    found by is not reused): loads holding the same mapping (the steady states near one judged load hold its prefill
    chunks) share it, its lookups and its kept times."""

    shapes: Mapping[tuple[int, int], float]
    first: _I
    second: _I
    runs: _F
    own: _F
    #: Each bucket set's (useful, bucketed seconds, shapes left uncovered): a phase's plan recurs across the splits,
    #: budgets and repair rounds of a planning run (at most PRICED_SETS).
    priced: dict[tuple[Bucket, ...], tuple[float, float, int]] = dataclasses.field(default_factory=dict, repr=False)

    @kept_property
    def useful(self) -> float:
        """The seconds at the shapes' own sizes (the same whatever the buckets)."""
        return weighted_sum(self.runs, self.own)


def _phase_arrays(shapes: Mapping[tuple[int, int], float], own: Callable[[int, int], float]) -> _PhaseArrays:
    n = len(shapes)
    # read and priced in C passes (itertools, fromiter): a Python loop per shape cost more than the pricing
    first, second = (
        np.fromiter(itertools.chain.from_iterable(shapes), dtype=np.int64, count=2 * n).reshape(n, 2).T.copy()
    )
    runs = np.fromiter(shapes.values(), dtype=np.float64, count=n)
    return _PhaseArrays(
        shapes, first, second, runs, np.fromiter(itertools.starmap(own, shapes), dtype=np.float64, count=n)
    )


@dataclasses.dataclass(frozen=True)
class _LoadArrays:
    """A load's shapes as arrays, per phase (:class:`_PhaseArrays`), made once per planning run (``load`` is kept so
    that the identity it is found by is not reused)."""

    load: LoadShapes
    prefill: _PhaseArrays
    decode: _PhaseArrays

    @property
    def phases(self) -> tuple[_PhaseArrays, _PhaseArrays]:
        return self.prefill, self.decode


def _load_arrays(load: LoadShapes, time: StepTimes) -> _LoadArrays:
    def phase(index: int, shapes: Mapping[tuple[int, int], float], own: Callable[[int, int], float]) -> _PhaseArrays:
        if not isinstance(time, CachedTimes):
            return _phase_arrays(shapes, own)
        # kept per mapping: the entry holds it, so no id is reused meanwhile
        return time.kept("phase arrays", (index, id(shapes)), functools.partial(_phase_arrays, shapes, own),
                         most=2 * LOADS_KEPT)  # fmt: skip

    return _LoadArrays(load, phase(0, load.prefill, functools.partial(time.prefill_s, 1)),
                       phase(1, load.decode, time.decode_s))  # fmt: skip


@dataclasses.dataclass(frozen=True)
class _LoadSet:
    """Loads' shapes of each phase end to end, so that one lookup prices a bucket set at all of them (a plan is
    judged at every load at once): per phase the (batch, query, value) arrays of the lookup, the runs, the own seconds
    and where each distinct part's shapes start (``bounds[i]:bounds[i + 1]``); a part that several loads share
    (:class:`_PhaseArrays`) is looked up once. ``parts[phase][i]``: the part of load ``i``."""

    arrays: tuple[_LoadArrays, ...]
    phases: tuple[tuple[_I, _I, _I, _F, _F, list[int]], ...]
    #: Per phase, the distinct parts in order, and each load's part.
    distinct: tuple[tuple[_PhaseArrays, ...], ...]
    parts: tuple[tuple[int, ...], ...]
    #: Per phase, the last bucket sets looked up: each shape's bucket (packed, :meth:`~.text_time.LookupTable.found`)
    #: and seconds. A set that grows one of them by a few buckets (a repair's trial) is looked
    #: up from it (:func:`_grown`).
    states: tuple[dict[frozenset[Bucket], tuple[_I, _F]], ...] = dataclasses.field(
        default_factory=lambda: ({}, {}), compare=False, repr=False
    )
    #: Per phase, each bucket set's answer at every load (:func:`_phase_times`), at most PRICED_SETS.
    memo: tuple[dict[tuple[Bucket, ...], list[tuple[float, float, int]]], ...] = dataclasses.field(
        default_factory=lambda: ({}, {}), compare=False, repr=False
    )

    @classmethod
    def of(cls, arrays: Sequence[_LoadArrays]) -> _LoadSet:
        phases, distinct, parts = [], [], []
        for phase in (0, 1):
            where: dict[int, int] = {}
            seen: list[_PhaseArrays] = []
            for a in arrays:
                p = a.phases[phase]
                if id(p) not in where:
                    where[id(p)] = len(seen)
                    seen.append(p)
            first = np.concatenate([p.first for p in seen]).astype(np.int64) if seen else np.zeros(0, dtype=np.int64)
            second = np.concatenate([p.second for p in seen]).astype(np.int64) if seen else np.zeros(0, dtype=np.int64)
            runs: _F = np.concatenate([p.runs for p in seen]) if seen else np.zeros(0)
            own: _F = np.concatenate([p.own for p in seen]) if seen else np.zeros(0)
            bounds = [0, *np.cumsum([len(p.first) for p in seen]).tolist()]
            one = np.ones_like(first)
            b, q = (one, first) if phase == 0 else (first, one)  # prefill (1, query, context); decode (seqs, 1, blocks)
            phases.append((b, q, second, runs, own, bounds))
            distinct.append(tuple(seen))
            parts.append(tuple(where[id(a.phases[phase])] for a in arrays))
        return cls(tuple(arrays), tuple(phases), tuple(distinct), tuple(parts))


def _table(buckets: tuple[Bucket, ...], phase: int, time: StepTimes) -> tuple[LookupTable, _F]:
    """The buckets' lookup table and each bucket's seconds, made once per planning run (a plan is judged at every
    load and recurs across budgets)."""

    def make() -> tuple[LookupTable, _F]:
        table = LookupTable(buckets)
        return table, table.seconds(_price(time, phase))

    return time.kept("lookup table", (phase, buckets), make) if isinstance(time, CachedTimes) else make()


def padded_time(prompt: Sequence[Bucket], decode: Sequence[Bucket], load: LoadShapes, time: StepTimes) -> PaddedTime:
    """The load's modelled seconds at its own shapes and in these buckets (``prompt`` (batch, query, context),
    ``decode`` (batch, 1, blocks))."""
    return padded_times(prompt, decode, (load,), time)[0]


def padded_times(prompt: Sequence[Bucket], decode: Sequence[Bucket], loads: Sequence[LoadShapes],
                 time: StepTimes) -> tuple[PaddedTime, ...]:  # fmt: skip
    """:func:`padded_time` at each of ``loads``: each phase's buckets looked up once for the shapes of every load."""
    loadset = _loadset(loads, time)
    prefill = _phase_times(loadset, 0, tuple(prompt), time)
    dec = _phase_times(loadset, 1, tuple(decode), time)
    return tuple(PaddedTime(up, ud, bp, bd, np_ + nd)
                 for (up, bp, np_), (ud, bd, nd) in zip(prefill, dec, strict=True))  # fmt: skip


def _arrays_of(load: LoadShapes, time: StepTimes) -> _LoadArrays:
    """The load's arrays, kept for the planning run where ``time`` keeps work (the entry holds the load: its id is
    not reused meanwhile)."""
    if not isinstance(time, CachedTimes):
        return _load_arrays(load, time)
    return time.kept("load arrays", id(load), functools.partial(_load_arrays, load, time), most=LOADS_KEPT)


def shape_arrays(load: LoadShapes, phase: int, time: StepTimes) -> tuple[_I, _I, _F]:
    """The load's shapes of a phase (0 prefill, 1 decode) as arrays, in its mapping's order: first values, second
    values and runs (made once per planning run where ``time`` keeps them)."""
    part = _arrays_of(load, time).phases[phase]
    return part.first, part.second, part.runs


def _loadset(loads: Sequence[LoadShapes], time: StepTimes) -> _LoadSet:
    if isinstance(time, CachedTimes):
        # a planning run makes each load's arrays once; the kept entries hold the loads, so no id is reused meanwhile
        def make() -> _LoadSet:
            return _LoadSet.of([_arrays_of(load, time) for load in loads])

        return time.kept("load set", tuple(id(load) for load in loads), make)
    return _LoadSet.of([_load_arrays(load, time) for load in loads])


def grow_from(prompt: Sequence[Bucket], decode: Sequence[Bucket], loads: Sequence[LoadShapes],
              time: StepTimes) -> None:  # fmt: skip
    """Each phase's buckets looked up at the shapes of ``loads`` together and kept, where not yet, for bucket sets
    that add a few to them (a repair's trials) to be looked up from (:func:`_grown`): a set priced before at each
    load alone is answered from each load's kept times, which leaves nothing to grow from. The same times as
    without it, sooner."""
    if not isinstance(time, CachedTimes):
        return
    loadset = _loadset(loads, time)
    for phase, key in ((0, tuple(prompt)), (1, tuple(decode))):
        if frozenset(key) not in loadset.states[phase]:
            _looked_up(loadset, phase, key, time)


#: Most bucket sets of one phase whose times one load keeps (a planning run judges about a thousand per phase).
PRICED_SETS = 4096


def _phase_times(loadset: _LoadSet, phase: int, key: tuple[Bucket, ...],
                 time: StepTimes) -> list[tuple[float, float, int]]:  # fmt: skip
    """Each load's phase (0 prefill, 1 decode) at its own shapes and in the buckets ``key``: useful seconds,
    bucketed seconds and the shapes no bucket holds; kept per part (:class:`_PhaseArrays`) and bucket set."""
    memo = loadset.memo[phase]
    known = memo.get(key)  # the whole set's answer: one hash of the buckets, not one per part
    if known is not None:
        return known
    distinct, parts = loadset.distinct[phase], loadset.parts[phase]
    got = [p.priced.get(key) for p in distinct]
    if any(g is None for g in got):
        _, _, _, runs, _, bounds = loadset.phases[phase]
        bucketed, missing = _looked_up(loadset, phase, key, time)
        # the uncovered shapes counted at each part's bounds (most lookups leave none)
        missed = np.concatenate([[0], np.cumsum(missing)])[bounds].tolist() if missing.any() else [0] * len(bounds)
        for i, part in enumerate(distinct):
            lo, hi = bounds[i], bounds[i + 1]
            one = (part.useful, weighted_sum(runs[lo:hi], bucketed[lo:hi]), missed[i + 1] - missed[i])
            if len(part.priced) >= PRICED_SETS:
                part.priced.clear()
            part.priced[key] = one
            got[i] = one
    out = cast(list[tuple[float, float, int]], [got[i] for i in parts])
    if len(memo) >= PRICED_SETS:
        memo.clear()
    memo[key] = out
    return out


def _looked_up(loadset: _LoadSet, phase: int, key: tuple[Bucket, ...],
               time: StepTimes) -> tuple[_F, npt.NDArray[np.bool_]]:  # fmt: skip
    """Each shape's seconds in the buckets ``key`` (its own where none holds it) and whether none does: grown from a
    set looked up before (:func:`_grown`) or looked up afresh, and kept for sets grown from this one."""
    b, q, c, _, own, _ = loadset.phases[phase]
    grown = _grown(loadset, phase, key, time)
    found: _I | None
    if grown is not None:
        found, bucketed = grown
    else:
        table, seconds = _table(key, phase, time)
        at = table.index(b, q, c)
        # each shape's seconds in the bucket found for it, its own where none is
        bucketed = np.where(at >= 0, seconds[np.maximum(at, 0)], own) if len(seconds) else own
        found = table.found(at)  # None: too large to pack, nothing to grow from
    if found is None:
        return bucketed, at < 0
    states = loadset.states[phase]
    if len(states) >= GROWN_FROM:
        del states[next(iter(states))]
    states[frozenset(key)] = (found, bucketed)
    return bucketed, found == NOT_FOUND


#: Full lookups of a phase a load set keeps to grow from, and the most buckets a set may add to one of them.
GROWN_FROM = 64
GROWN_BY = 8


def _price(time: StepTimes, phase: int) -> Callable[[int, int, int], float]:
    return time.prefill_s if phase == 0 else lambda b, _q, blocks: time.decode_s(b, blocks)


def _grown(loadset: _LoadSet, phase: int, key: tuple[Bucket, ...], time: StepTimes) -> tuple[_I, _F] | None:
    """Each shape's bucket (packed) and seconds in ``key`` where it adds at most GROWN_BY buckets to a set looked up
    before (:func:`~.text_time.moved`). None: no such set (or a value too large to pack)."""
    states = loadset.states[phase]
    if not states:
        return None
    buckets = frozenset(key)
    base = next((s for s in reversed(states) if 0 < len(buckets) - len(s) <= GROWN_BY and s <= buckets), None)
    if base is None:
        return None
    b, q, c, _, _, _ = loadset.phases[phase]
    return moved(*states[base], b, q, c, list(buckets - base), _price(time, phase))


@dataclasses.dataclass(frozen=True)
class LoadVerdict:
    load: str
    ours: PaddedTime
    own: PaddedTime

    @property
    def short(self) -> bool:
        """Ours pads longer than the runtime's own here, or leaves a shape to compile."""
        return self.beyond(1.0)

    def beyond(self, share: float) -> bool:
        """Ours pads longer than ``share`` of the runtime's own here, or leaves a shape to compile."""
        limit = share * self.own.padded_s + TOLERANCE * self.own.useful_s
        return bool(self.ours.uncovered) or self.ours.padded_s > limit


@dataclasses.dataclass(frozen=True)
class BudgetedPlan:
    """The planned buckets, the budget taken and why, and each load's padded time beside the runtime's own."""

    plan: TextBucketPlan
    budget: int
    reason: str
    loads: tuple[LoadVerdict, ...]
    #: The worst shape the limits allow against the runtime's own, once bounded (:mod:`.text_worst`).
    worst: WorstCase | None = None

    @property
    def short(self) -> tuple[str, ...]:
        return tuple(v.load for v in self.loads if v.short)


def budget_for(defaults: int, share: float = DEFAULT_BUDGET_SHARE) -> int:
    """``share`` of the graphs the runtime's own strategy warms (at least 2)."""
    return max(2, math.floor(defaults * share))


def default_most(defaults: int) -> int:
    """The most graphs the default budget takes: a half of the runtime's own ``defaults``, at most
    :data:`MAX_DEFAULT_BUDGET`."""
    return min(budget_for(defaults, MAX_BUDGET_SHARE), MAX_DEFAULT_BUDGET)


def budget_steps(defaults: int) -> list[int]:
    """The default budgets tried in order: a third of the runtime's own graphs, then up by a twenty-fourth of them
    at a time, to a half (never above), none above :data:`MAX_DEFAULT_BUDGET` (:func:`default_most`)."""
    third, most = budget_for(defaults), default_most(defaults)
    steps = range(0, math.ceil((MAX_BUDGET_SHARE - DEFAULT_BUDGET_SHARE) / BUDGET_STEP_SHARE) + 1)
    return sorted({min(most, third + math.ceil(k * BUDGET_STEP_SHARE * defaults)) for k in steps})


def check_budget(budget: int | None, most: int, flag: str, whose: str | None = None) -> None:
    """A given budget: at most ``most`` (the graphs the runtime's largest built-in strategy warms for these limits,
    ``whose`` names it: any warm-up a user of the runtime can configure, while planning work and memory stay
    bounded). Its least is the planner's: the fewest graphs that keep every shape (a smaller budget is refused with
    it, buckets/text.py)."""
    if budget is not None and not 1 <= budget <= max(2, most):
        source = f"what {whose} warms for the limits, the largest built-in strategy" if whose else GRAPH_BUDGET_CEILING
        raise ConfigError(f"{flag} {budget} is invalid; accepted: at most {max(2, most)} ({source}), at least what "
                          "these limits and traffic need")  # fmt: skip


def _plan(weights: tuple[Mapping[tuple[int, int], int], Mapping[tuple[int, int], int]], limits: TextLimits,
          budget: int, time: StepTimes, load_levels: Sequence[int]) -> TextBucketPlan:  # fmt: skip
    return plan_text_buckets(weights[0], weights[1], limits, budget=budget, time=time, load_levels=load_levels)


def _verdicts(plan: TextBucketPlan, loads: Sequence[LoadShapes], own: tuple[Sequence[Bucket], Sequence[Bucket]],
              own_times: Sequence[PaddedTime], time: StepTimes) -> tuple[LoadVerdict, ...]:  # fmt: skip
    return tuple(LoadVerdict(load.load, ours, theirs) for load, ours, theirs in
                 zip(loads, padded_times(plan.prompt, plan.decode, loads, time), own_times, strict=True))  # fmt: skip


def _useful(prefill: Mapping[tuple[int, int], float], decode: Mapping[tuple[int, int], float],
            time: StepTimes) -> float:  # fmt: skip
    return sum(n * time.prefill_s(1, q, c) for (q, c), n in prefill.items()) + sum(
        n * time.decode_s(s, k) for (s, k), n in decode.items()
    )


def _useful_of(weights: tuple[Mapping[tuple[int, int], int], Mapping[tuple[int, int], int]], time: StepTimes) -> float:
    """:func:`_useful` of ``weights``, kept for the planning run where ``time`` keeps work (every repair round at
    every budget boosts the same weights; the entry holds them: their id is not reused meanwhile)."""
    if not isinstance(time, CachedTimes):
        return _useful(*weights, time)
    got = time.kept("useful", id(weights), lambda: (weights, _useful(*weights, time)))
    return got[1] if got[0] is weights else _useful(*weights, time)


def _phase_padded(t: PaddedTime, phase: int) -> float:
    return t.bucket_prefill_s - t.useful_prefill_s if phase == 0 else t.bucket_decode_s - t.useful_decode_s


def boosted(weights: tuple[Mapping[tuple[int, int], int], Mapping[tuple[int, int], int]],
             loads: Sequence[LoadShapes], own_times: Sequence[PaddedTime], boosts: Mapping[tuple[int, int], float],
             time: StepTimes) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:  # fmt: skip
    """``weights`` plus, for each boosted (load, phase), that load's steps of that phase (0 prefill, 1 decode) scaled
    to its boost times the useful seconds of ``weights``."""
    total = _useful_of(weights, time)
    out = (dict(weights[0]), dict(weights[1]))
    for (i, phase), boost in boosts.items():
        t = own_times[i]
        useful = t.useful_prefill_s if phase == 0 else t.useful_decode_s
        if useful <= 0:
            continue
        factor = boost * total / useful
        shapes = loads[i].prefill if phase == 0 else loads[i].decode
        # max(1, round(n x factor)) of every step count at once (rint rounds half to even, as round does)
        added = np.maximum(1.0, np.rint(shape_arrays(loads[i], phase, time)[2] * factor)).astype(np.int64).tolist()
        got = out[phase]
        for key, n in zip(shapes, added, strict=True):
            got[key] = got.get(key, 0) + n
    return out


def losing(verdicts: Sequence[LoadVerdict]) -> dict[tuple[int, int], float]:
    """The (load, phase) pairs of the loads that miss the margin, each phase where ours pads beyond the margin of the
    runtime's own there (every phase of the load where neither does alone), with its emphasis: the load's padded time
    over the runtime's own, divided by the runtime's own padded share there (where the runtime's own pads little,
    the margin is thin and the load needs more of the graphs)."""
    out: dict[tuple[int, int], float] = {}
    for i, v in enumerate(verdicts):
        if not v.beyond(MARGIN):
            continue
        emphasis = min(_ratio(v), 1 / MIN_SHARE) / max(v.own.share, MIN_SHARE)
        phases = [ph for ph in (0, 1) if _phase_padded(v.ours, ph) > MARGIN * _phase_padded(v.own, ph)] or [0, 1]
        for ph in phases:
            out[(i, ph)] = emphasis
    return out


def standing(verdicts: Sequence[LoadVerdict]) -> tuple[int, int, float]:
    """How a plan stands against the runtime's own, least first: loads padding longer, loads missing the margin, the
    worst load's padded time over the runtime's own."""
    worst = max((_ratio(v) for v in verdicts), default=0.0)
    return sum(v.short for v in verdicts), sum(v.beyond(MARGIN) for v in verdicts), worst


def _ratio(v: LoadVerdict) -> float:
    """Ours' padded time over the runtime's own at a load (where the runtime's own pads nothing: 0 if ours does not
    either, else infinite)."""
    if v.own.padded_s > 0:
        return v.ours.padded_s / v.own.padded_s
    return math.inf if v.ours.padded_s > 0 else 0.0


def _warms_within(plan: TextBucketPlan, graphs: int, total: int, warmup: Warmup, own_warmup: float) -> bool:
    """Whether a default budget of ``graphs`` warms up within the share of the runtime's own warm-up its graphs are
    allowed (a third; a half once raised)."""
    third = budget_for(total)
    share = (third if graphs <= third else budget_for(total, MAX_BUDGET_SHARE)) / total
    return warmup(plan.prompt, plan.decode) <= share * own_warmup


def choose_budget(
    weights: tuple[Mapping[tuple[int, int], int], Mapping[tuple[int, int], int]],
    loads: Sequence[LoadShapes],
    limits: TextLimits,
    own: tuple[Sequence[Bucket], Sequence[Bucket]],
    time: StepTimes,
    *,
    budget: int | None = None,
    load_levels: Sequence[int] = (),
    warmup: Warmup | None = None,
) -> BudgetedPlan:
    """The text buckets planned over ``weights`` (prefill, decode: :func:`~.text.plan_text_buckets`): within
    ``budget`` when one is given; otherwise the smallest of :func:`budget_steps` (of the runtime's ``own`` buckets'
    count) whose padded time at every load of ``loads`` is at most :data:`MARGIN` of the runtime's own, or a half
    (the most the default takes) with the loads that miss the margin, and those still short, named. With ``warmup``,
    a default budget whose plan warms up longer than its share of the runtime's own warm-up is not taken: the largest
    budget below it is, and the reason says so."""
    time = cached(time)  # every budget, split and verdict prices the same shapes
    own_times = list(padded_times(own[0], own[1], loads, time))
    total = len(own[0]) + len(own[1])
    if budget is not None:
        plan = _plan(weights, limits, budget, time, load_levels)
        return BudgetedPlan(plan, budget, f"{budget} graphs (given)", _verdicts(plan, loads, own, own_times, time))
    own_warmup = warmup(*own) if warmup is not None else 0.0
    steps = budget_steps(total)
    # each step's plan is worked out beside the one before it (a forked child: the same plan, sooner), both
    # processes starting from the phases prepared for the weights (the child would prepare them again)
    with contextlib.suppress(ConfigError):  # raised again at the step's turn
        prepare_phases(*weights, limits, budget=steps[0], time=time, load_levels=load_levels)
    tries = [functools.partial(best_at, weights, loads, limits, own, own_times, time, load_levels, graphs,
                               functools.partial(_warms_within, graphs=graphs, total=total, warmup=warmup,
                                                 own_warmup=own_warmup) if warmup is not None else None)
             for graphs in steps]  # fmt: skip
    with contextlib.closing(in_turns(tries)) as outcomes:
        return _first_within(steps, outcomes, weights, loads, limits, own, own_times, time, load_levels, warmup,
                             own_warmup, total)  # fmt: skip


def _first_words(graphs: int, total: int) -> str:
    """The default's first budget in words: a third, or the most it takes where a third is more."""
    return "a third" if graphs == budget_for(total) else _most_words(total)


def _most_words(total: int) -> str:
    """The default's largest budget in words: a half, or :data:`MAX_DEFAULT_BUDGET` where a half is more."""
    if default_most(total) < budget_for(total, MAX_BUDGET_SHARE):
        return f"{MAX_DEFAULT_BUDGET}, the most the default takes whatever the runtime's own count"
    return "a half, the most the default takes"


def _first_within(steps: Sequence[int],
                  outcomes: Generator[Callable[[], tuple[TextBucketPlan, tuple[LoadVerdict, ...]] | None], None, None],
                  weights: tuple[Mapping[tuple[int, int], int], Mapping[tuple[int, int], int]],
                  loads: Sequence[LoadShapes], limits: TextLimits, own: tuple[Sequence[Bucket], Sequence[Bucket]],
                  own_times: Sequence[PaddedTime], time: StepTimes, load_levels: Sequence[int],
                  warmup: Warmup | None, own_warmup: float, total: int) -> BudgetedPlan:  # fmt: skip
    """:func:`choose_budget`'s default rule over the steps' plans (``outcomes``: :func:`best_at` at each step)."""
    refused: ConfigError | None = None
    first_short: BudgetedPlan | None = None  # the first budget tried, when it missed the margin
    last_fit: BudgetedPlan | None = None  # the largest budget so far within its warm-up share (margin missed)
    last_missed: list[str] = []
    over: list[int] = []  # budgets whose plan warms up longer than their share of the runtime's own
    margin = f"{MARGIN:g} of the runtime's own padded time"
    for i, (graphs, outcome) in enumerate(zip(steps, outcomes, strict=True)):
        try:
            repaired = outcome()
        except ConfigError as e:  # too small for the ladders: the next step may hold them
            refused = e
            continue
        if repaired is None:
            over.append(graphs)  # a raised budget may still fit: its share is a half
            continue
        plan, verdicts = repaired
        share = f"{graphs} graphs of the runtime's own {total}"
        missed = [v.load for v in verdicts if v.beyond(MARGIN)]
        if not missed:
            why = (
                f"{share} ({_first_words(graphs, total)}): every load pads at most {margin}"
                if i == 0
                else f"{share}: the smallest default budget (from a third) at which every load pads at most {margin}"
                + (
                    f"; {first_short.budget} graphs missed it at "
                    f"{', '.join(v.load for v in first_short.loads if v.beyond(MARGIN))}"
                    if first_short
                    else "; a third cannot hold the no-gross-padding ladders"
                    if refused
                    else f"; {', '.join(map(str, over))} graphs warm up longer than their share of the runtime's own"
                )
            )
            return BudgetedPlan(plan, graphs, why, verdicts)  # fmt: skip
        first_short = BudgetedPlan(plan, graphs, "", verdicts) if first_short is None else first_short
        last_fit = BudgetedPlan(plan, graphs, share, verdicts)
        last_missed = missed
    if last_fit is not None:
        still_short = last_fit.short
        still = (f"; still pads longer than the runtime's own at {', '.join(still_short)}" if still_short else
                 "; no load pads longer than under the runtime's own")  # fmt: skip
        most = (_most_words(total) if last_fit.budget == steps[-1] else
                f"the largest default budget whose warm-up stays within its share of the runtime's own; "
                f"{', '.join(map(str, over))} graphs would warm up longer")  # fmt: skip
        return dataclasses.replace(last_fit, reason=f"{last_fit.reason} ({most}): does not reach {margin} at "
                                   f"{', '.join(last_missed)}{still}")  # fmt: skip
    if warmup is not None and refused is None:
        return _within_warmup(weights, loads, limits, own, own_times, time, load_levels, warmup, own_warmup, steps[0])
    assert refused is not None
    least = refused.least if isinstance(refused, BudgetTooSmall) else NO_LADDER
    if least > max(total, 2):
        raise BudgetTooSmall(f"no default text graph budget up to the runtime's own {total} graphs holds the "
                             f"no-gross-padding ladders: {refused}", least)  # fmt: skip
    plan = _plan(weights, limits, least, time, load_levels)
    verdicts = _verdicts(plan, loads, own, own_times, time)
    short = [v.load for v in verdicts if v.short]
    return BudgetedPlan(plan, least, f"{least} graphs of the runtime's own {total}: the fewest that keep every shape "
                        f"within {GROSS_FACTOR}x its need (above the default's half)"
                        + (f"; pads longer than the runtime's own at {', '.join(short)}" if short else ""),
                        verdicts)  # fmt: skip


def best_at(weights: tuple[Mapping[tuple[int, int], int], Mapping[tuple[int, int], int]],
              loads: Sequence[LoadShapes], limits: TextLimits, own: tuple[Sequence[Bucket], Sequence[Bucket]],
              own_times: Sequence[PaddedTime], time: StepTimes, load_levels: Sequence[int], graphs: int,
              fits: Callable[[TextBucketPlan], bool] | None,
              ) -> tuple[TextBucketPlan, tuple[LoadVerdict, ...]] | None:  # fmt: skip
    """The plan at ``graphs`` (:func:`~.text.text_bucket_splits`' least-time split). Where it misses the margin at a
    load: the best by :func:`standing` of it, the other splits between the phases, and up to :data:`REPAIR_ROUNDS`
    re-plans with the losing loads weighed in again (:func:`losing`, :func:`boosted`) and their splits, among those
    that warm up within their share (``fits``; None: no estimate). None when none does."""
    plans, pick = text_bucket_splits(*weights, limits, budget=graphs, time=time, load_levels=load_levels)
    verdicts = _verdicts(plans[pick], loads, own, own_times, time)
    best = (plans[pick], verdicts) if fits is None or fits(plans[pick]) else None
    boosts: dict[tuple[int, int], float] = {}
    for round_ in range(REPAIR_ROUNDS + 1):
        if not any(v.beyond(MARGIN) for v in verdicts):
            break
        for k, plan in enumerate(plans):
            if k == pick or (fits is not None and not fits(plan)):  # the pick is judged already
                continue
            judged = _verdicts(plan, loads, own, own_times, time)
            if best is None or standing(judged) < standing(best[1]):
                best = (plan, judged)
        if round_ == REPAIR_ROUNDS:
            break
        lost = losing(verdicts)
        spread = sum(lost.values())
        for key, emphasis in lost.items():
            boosts[key] = boosts.get(key, 0.0) + REPAIR_WEIGHT * emphasis / spread
        try:
            plans, pick = text_bucket_splits(*boosted(weights, loads, own_times, boosts, time), limits,
                                             budget=graphs, time=time, load_levels=load_levels)  # fmt: skip
        except ConfigError:  # the boosted weights need longer ladders than this budget holds
            break
        verdicts = _verdicts(plans[pick], loads, own, own_times, time)
        if (fits is None or fits(plans[pick])) and (best is None or standing(verdicts) < standing(best[1])):
            best = (plans[pick], verdicts)
    return best


def _within_warmup(weights: tuple[Mapping[tuple[int, int], int], Mapping[tuple[int, int], int]],
                   loads: Sequence[LoadShapes], limits: TextLimits, own: tuple[Sequence[Bucket], Sequence[Bucket]],
                   own_times: Sequence[PaddedTime], time: StepTimes, load_levels: Sequence[int], warmup: Warmup,
                   own_warmup: float, third: int) -> BudgetedPlan:  # fmt: skip
    """A third of the graphs warms up longer than a third of the runtime's own warm-up: the budget comes down a
    twenty-fourth of the runtime's graphs at a time (at most :data:`MAX_WARMUP_STEPS` tries) until it fits, or to
    the fewest the ladders hold."""
    total = len(own[0]) + len(own[1])
    step = max(1, math.ceil(BUDGET_STEP_SHARE * total))
    graphs, plan = third, _plan(weights, limits, third, time, load_levels)
    fits = _warms_within(plan, graphs, total, warmup, own_warmup)
    for _ in range(MAX_WARMUP_STEPS):
        if fits or graphs - step < 2:
            break
        try:
            plan, graphs = _plan(weights, limits, graphs - step, time, load_levels), graphs - step
        except ConfigError:  # the ladders need more: keep the smallest that held them
            break
        fits = _warms_within(plan, graphs, total, warmup, own_warmup)
    verdicts = _verdicts(plan, loads, own, own_times, time)
    short = [v.load for v in verdicts if v.short]
    how = "stays within" if fits else "comes as close as the ladders allow to"
    return BudgetedPlan(plan, graphs, f"{graphs} graphs of the runtime's own {total}: below a third, so that the "
                        f"warm-up {how} a third of the runtime's own"
                        + (f"; pads longer than the runtime's own at {', '.join(short)}" if short else ""),
                        verdicts)  # fmt: skip

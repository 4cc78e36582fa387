"""Language-model buckets planned from traffic by modelled time: the prompt ``(batch, query, context blocks)`` and
decode ``(batch, blocks)`` buckets that cover every shape the engine limits allow and, within a graph budget, make
the traffic's steps spend the least time beyond what their own shapes take (priced with a step-time model).

Pure: from the weighted shapes a replay of the traffic produced (how often each prefill ``(query, context blocks)``
and each decode ``(sequences, blocks)`` ran), the limits and a step-time model, to the buckets. The phases are planned
by :mod:`.text_time` (rows on the first axis, ladders of values on the second, no shape padded beyond
:data:`~.text_time.GROSS_FACTOR` times its need); the budget is split between them where it saves the most time.

Before planning, the traffic's weight is smoothed (:func:`smoothed`: traffic whose lengths differ a little still
finds values near it), each load level of an unknown load gets full batches (:func:`at_load_levels`), and
:data:`PRIOR_SHARE` of the prefill weight is spread log-uniformly over every shape the limits allow
(:func:`with_prior`). Queries are planned on multiples of :data:`QUERY_GRANULE` (the step vllm-gaudi itself compiles
unprepared prompt shapes at). With more than one prefill sequence per batch (``VLLM_PROMPT_BS_BUCKET_MAX``) rows for
batches 2.. are added at context 0 (only requests without context are merged), covering every query a batch of that
size can hold.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from vllm_hpu_mm.buckets.text_time import (
    GROSS_FACTOR,
    MAX_ROWS,
    NO_LADDER,
    BudgetTooSmall,
    CachedTimes,
    PhaseAxes,
    PhaseOptions,
    PhasePlan,
    Shapes,
    StepTimes,
    binned,
    cached,
    phase_options_of,
    phase_seconds,
    unique_ints,
    unique_pairs,
)
from vllm_hpu_mm.engine import Bucket, EngineShape

__all__ = [
    "QUERY_GRANULE",
    "TextBucketPlan",
    "TextLimits",
    "block_grid",
    "decode_axes",
    "plan_text_buckets",
    "prepare_phases",
    "prompt_axes",
    "text_bucket_splits",
]

#: (first, second) pairs packed into one int64 each (first << 31 | second), or their weights.
_Packed = npt.NDArray[np.int64]
_EMPTY: _Packed = np.zeros(0, dtype=np.int64)
#: Prompt query lengths are rounded up to multiples of this (vllm-gaudi's fallback_seq_base_step @ 091bbadd).
QUERY_GRANULE = 32
#: Share of each phase's weight spread log-uniformly over every shape the limits allow before planning, so that the
#: buckets also serve traffic unlike the one they were planned on (a shape beyond the planned values would otherwise
#: pad to the coverage bucket). Tuned on traffic the reported figures do not use
#: (benchmarks/planner/results/replay_*.md).
PRIOR_SHARE = 0.05
#: Share of the decode weight placed as full batches at each load level when the load is unknown.
LEVEL_SHARE = 0.35
#: Points per doubling of the prior's grid.
PRIOR_STEPS_PER_OCTAVE = 4
#: Each shape's weight is also spread this many doublings around its second-axis value (context or decode blocks):
#: traffic whose lengths differ by up to that factor still finds values near it.
SMOOTH_OCTAVES = 1.0
#: The same around each prefill's query length (a decode's sequences are not smoothed: under a closed loop they sit
#: at the load levels, and a smoothed batch axis pulls every row above its level).
SMOOTH_QUERY = 2.0
#: Prompt graphs tried between each phase's least: the budget goes to the split with the least modelled time.
SPLIT_STEPS = 12
#: Prompt context ladders climb by at most this factor per value (GROSS_FACTOR is the hard bound). 2 (exp's own
#: context steps) was tried: on the held-out proxy it pads less on the RAG mix but more on prefix-heavy traffic
#: (its ladders take the graphs finer query rows need); 4 with finer query rows came out ahead (i22c report).
PROMPT_STEP_FACTOR = 4
#: Candidate query rows per doubling: finer than decode's batch rows (a prompt row's queries pad linear work).
PROMPT_ROWS_PER_OCTAVE = 8
#: Weight sets per phase whose preparation (smoothing, the candidate plans) one planning run keeps: the traffic's own
#: (every budget) and the latest re-planned ones; each holds every candidate plan of its phase.
PREPARED_KEPT = 4
#: Budgets above this plan on a finer grid (twice as fine up to 4x this, four times beyond).
FINE_BUDGET = 300
#: A decode batch size holding at least this share of the decode weight is a candidate row, besides the grid: a
#: steady load runs most of its steps at one batch size, and a row just above it saves what a grid row further above
#: pads (chosen on the development sets, docs/performance.md).
HEAVY_BATCH_SHARE = 0.02


@dataclasses.dataclass(frozen=True, kw_only=True)
class TextLimits(EngineShape):
    """The shapes the engine allows: queries up to ``max_num_batched_tokens`` (and ``max_model_len``), contexts up to
    ``max_model_len``, batches up to ``max_num_seqs`` (prefill: ``max_prefill_batch``), decode blocks up to
    ``decode_block_cap`` in all: the engine's shape and its lookup's two caps (:class:`~vllm_hpu_mm.engine.TextLookup`).
    """

    decode_block_cap: int
    max_prefill_batch: int = 1
    #: The runtime keeps a prompt bucket only when query + context x block_size <= max_model_len (vllm-gaudi before
    #: v0.19.0: common.py generate_buckets @ da2ce404 / 67e4a6b1); else a context up to what the smallest query leaves.
    prompt_fits_model_len: bool = False

    @classmethod
    def of(cls, shape: EngineShape, decode_block_cap: int, max_prefill_batch: int = 1, *,
           prompt_fits_model_len: bool = False) -> TextLimits:  # fmt: skip
        engine = {f.name: getattr(shape, f.name) for f in dataclasses.fields(EngineShape)}
        return cls(**engine, decode_block_cap=decode_block_cap, max_prefill_batch=max_prefill_batch,
                   prompt_fits_model_len=prompt_fits_model_len)  # fmt: skip

    @property
    def top_query(self) -> int:
        return min(self.max_num_batched_tokens, self.max_model_len)

    def top_context(self, smallest_query: int) -> int:
        """Most context blocks a prefill chunk of at least ``smallest_query`` tokens can have (where the runtime keeps
        only buckets within max_model_len, whole blocks: a larger context has no bucket it would keep)."""
        if self.prompt_fits_model_len:
            return max(0, (self.max_model_len - smallest_query) // self.block_size)
        return max(0, math.ceil((self.max_model_len - 1 - smallest_query) / self.block_size))

    def staircase_queries(self) -> tuple[int, ...]:
        """The queries every covering prompt plan needs a row at where buckets must fit max_model_len: a shape of
        ``max_model_len - c x block_size`` tokens beside ``c`` context blocks fits only a bucket of exactly that query
        and context, so each such query is a row (none otherwise)."""
        if not self.prompt_fits_model_len:
            return ()
        mml, blk, top = self.max_model_len, self.block_size, self.top_query
        return tuple(sorted({min(top, mml - c * blk) for c in range(mml // blk + 1) if mml - c * blk >= 1}))

    def top_blocks(self, batch: int) -> int:
        """Most KV blocks a decode batch of ``batch`` sequences can hold (never below the batch: vllm-gaudi drops a
        decode bucket with fewer blocks than sequences)."""
        per_seq = math.ceil(self.max_model_len / self.block_size)
        return max(batch, min(batch * per_seq, self.decode_block_cap))


@dataclasses.dataclass(frozen=True)
class TextBucketPlan:
    prompt: tuple[Bucket, ...]
    decode: tuple[Bucket, ...]
    #: Query rows / batch rows chosen, and the graphs the budget allowed each phase.
    query_rows: int
    batch_rows: int
    budget: tuple[int, int]

    @property
    def graphs(self) -> int:
        return len(self.prompt) + len(self.decode)


def block_grid(value: int) -> int:
    """``value`` rounded up to a multiple of 2^(floor(log2 value) - 4) (at least 1): 16 steps per doubling, at most
    6.25% above the value."""
    if value <= 16:
        return max(0, value)
    step = 1 << (value.bit_length() - 1 - 4)
    return -(-value // step) * step


def _log_grid(low: int, high: int) -> list[int]:
    """Integers from ``low`` to ``high`` (both included, low >= 1), PRIOR_STEPS_PER_OCTAVE per doubling."""
    if high < low:
        return []
    steps = max(1, math.ceil(PRIOR_STEPS_PER_OCTAVE * math.log2(high / low)))
    return sorted({round(low * (high / low) ** (i / steps)) for i in range(steps + 1)})


def _kernel(octaves: float) -> list[tuple[float, int]]:
    """(factor, weight) of a triangular kernel over ``octaves`` doublings each way, PRIOR_STEPS_PER_OCTAVE points per
    doubling."""
    reach = round(octaves * PRIOR_STEPS_PER_OCTAVE)
    return [(2 ** (k / PRIOR_STEPS_PER_OCTAVE), reach + 1 - abs(k)) for k in range(-reach, reach + 1)]


def smoothed(shapes: Mapping[tuple[int, int], int], octaves: float, *, first_octaves: float = 0.0,
             first_top: int = 0, scale_second: bool = False) -> dict[tuple[int, int], int]:  # fmt: skip
    """Each shape's weight spread over values up to ``octaves`` doublings above and below its second value, and
    ``first_octaves`` around its first (capped at ``first_top``; with ``scale_second`` the second value scales with
    it, as a decode batch's blocks do with its sequences): triangular kernels in log scale. Zeros stay zeros."""
    return _as_dict(*_smoothed(shapes, octaves, first_octaves=first_octaves, first_top=first_top,
                               scale_second=scale_second))  # fmt: skip


def _smoothed(shapes: Mapping[tuple[int, int], int], octaves: float, *, first_octaves: float, first_top: int,
              scale_second: bool) -> tuple[_Packed, _Packed]:  # fmt: skip
    """:func:`smoothed` as packed keys (sorted) and their weights."""
    if not shapes:
        return _EMPTY, _EMPTY
    a, b, n = _columns(shapes)
    return _spread_weights(_spread(a, b, octaves, first_octaves=first_octaves, first_top=first_top,
                                   scale_second=scale_second, top=None), n)  # fmt: skip


def _columns(shapes: Mapping[tuple[int, int], int]) -> tuple[_Packed, _Packed, _Packed]:
    """The shapes' first values, second values and weights, in the mapping's order."""
    n = len(shapes)
    # the keys read in one pass of C (a generator per column cost a Python frame per shape)
    a, b = np.fromiter(itertools.chain.from_iterable(shapes), dtype=np.int64, count=2 * n).reshape(n, 2).T.copy()
    return a, b, np.fromiter(shapes.values(), dtype=np.int64, count=n)


def _spread_weights(spread: tuple[_Packed, _Packed, _Packed], n: _Packed) -> tuple[_Packed, _Packed]:
    """The weights ``n`` sent where :func:`_spread` says: the sorted keys and their summed weights."""
    keys, inverse, kernel = spread
    totals = np.zeros(len(keys), dtype=np.int64)
    np.add.at(totals, inverse, (kernel[:, None] * n[None, :]).ravel())
    return keys, totals


def _smoothed_within(shapes: Mapping[tuple[int, int], int], octaves: float, *, first_octaves: float,
                     first_top: int, scale_second: bool, top: Callable[[int], int], time: CachedTimes,
                     tag: Hashable) -> tuple[_Packed, _Packed]:  # fmt: skip
    """:func:`_smoothed`, then :func:`_within` with ``top``: the same keys and weights. Where each shape's weight goes
    depends on the shapes alone, not on their weights, so it is worked out once per planning run for each set of
    shapes (``tag`` names ``top``'s limits): the re-planned weights of a run are the traffic's shapes re-weighed."""
    if not shapes:
        return _EMPTY, _EMPTY
    a, b, n = _columns(shapes)
    key = (tag, octaves, first_octaves, first_top, scale_second, (a << 31 | b).tobytes())
    spread = time.kept("smoothing", key, lambda: _spread(a, b, octaves, first_octaves=first_octaves,
                       first_top=first_top, scale_second=scale_second, top=top), most=2)  # fmt: skip
    return _spread_weights(spread, n)


def _spread(a: _Packed, b: _Packed, octaves: float, *, first_octaves: float, first_top: int, scale_second: bool,
            top: Callable[[int], int] | None) -> tuple[_Packed, _Packed, _Packed]:  # fmt: skip
    """Where :func:`_smoothed` sends the weights of shapes (a, b), the second values cut to ``top`` at their first
    (:func:`_within`; None: not cut): the sorted keys, each spread copy's key index (kernel point by kernel point,
    shape by shape) and each kernel point's weight."""
    firsts, seconds, kernel = [], [], []
    for fa, wa in _kernel(first_octaves):
        na = a if fa == 1 else np.minimum(first_top, np.maximum(1, np.round(a * fa).astype(np.int64)))
        base = np.where(b > 0, b * na / a, b) if scale_second else b.astype(np.float64)
        for fb, wb in _kernel(octaves):
            nb = np.where(b > 0, np.maximum(1, np.round(base * fb).astype(np.int64)), 0)
            if scale_second:
                nb = np.where(nb > 0, np.maximum(nb, na), nb)
            firsts.append(na)
            seconds.append(nb)
            kernel.append(wa * wb)
    first, second = np.concatenate(firsts), np.concatenate(seconds)
    if top is not None:
        distinct, at = unique_ints(first)
        tops = np.array([top(int(x)) for x in distinct.tolist()], dtype=np.int64)  # one call per distinct first
        second = np.minimum(second, tops[at])
    # one int64 key per (first, second): both stay far below 2^31 (tokens, sequences and blocks of one engine)
    firsts_u, seconds_u, inverse = unique_pairs(first, second)
    return firsts_u << 31 | seconds_u, inverse, np.array(kernel, dtype=np.int64)


def at_load_levels(decode: Mapping[tuple[int, int], int], levels: Sequence[int], share: float,
                   cap: int) -> dict[tuple[int, int], int]:  # fmt: skip
    """``decode`` plus ``share`` of its weight as full batches at each load level: ``level`` sequences holding the
    traffic's own blocks per sequence (its distribution, scaled), capped at ``cap``."""
    out = dict(decode)
    total = sum(decode.values())
    if not levels or share <= 0 or not total:
        return out
    per_seq = _per_seq(decode)
    scale = share / (1 - share) * total / (len(levels) * sum(per_seq.values()))
    for level in levels:
        for p, w in per_seq.items():
            key = (level, min(cap, max(level, level * p)))
            out[key] = out.get(key, 0) + max(1, round(w * scale))
    return out


def _per_seq(decode: Mapping[tuple[int, int], int]) -> Counter[int]:
    """The decode weight per KV blocks per sequence (``block_grid(max(1, round(blocks / sequences)))``), the values
    in the order they first come: worked out on arrays (a Python pass over thousands of steps per weight set cost
    more than the rest of the phase's preparation)."""
    n, b, w = _columns(decode)
    per = np.maximum(1.0, np.rint(b / n)).astype(np.int64)  # rint rounds half to even, as round does
    grid = binned(per)  # block_grid's values: 16 steps per doubling above 16
    values, first, inverse = np.unique(grid, return_index=True, return_inverse=True)
    totals = np.bincount(inverse.reshape(-1), weights=w, minlength=len(values))
    order = np.argsort(first, kind="stable")
    return Counter(dict(zip(values[order].tolist(), totals[order].astype(np.int64).tolist(), strict=True)))


def with_prior(shapes: Mapping[tuple[int, int], int], first: Sequence[int],
               second: Callable[[int], Sequence[int]],
               share: float = PRIOR_SHARE) -> dict[tuple[int, int], int]:  # fmt: skip
    """``shapes`` plus ``share`` of their weight spread evenly over the grid ``(a, b)``, ``a`` in ``first``, ``b`` in
    ``second(a)``; with no shapes at all (a traffic without decode steps), the grid alone."""
    grid = [(a, b) for a in first for b in second(a)]
    out = dict(shapes)
    total = sum(shapes.values())
    if not total:
        return dict.fromkeys(grid, 1)
    if not grid or share <= 0:
        return out
    each = max(1, round(share / (1 - share) * total / len(grid)))
    for key in grid:
        out[key] = out.get(key, 0) + each
    return out


def _with_prior(keys: _Packed, totals: _Packed, first: Sequence[int], second: Callable[[int], Sequence[int]],
                share: float) -> tuple[_Packed, _Packed]:  # fmt: skip
    """:func:`with_prior` of sorted packed keys: the same weights in the same order (the keys, then the grid's new
    ones in grid order)."""
    grid = np.array([a << 31 | b for a in first for b in second(a)], dtype=np.int64)
    total = int(totals.sum())
    if not total:
        return grid, np.ones(len(grid), dtype=np.int64)
    if not len(grid) or share <= 0:
        return keys, totals
    each = max(1, round(share / (1 - share) * total / len(grid)))
    at = np.searchsorted(keys, grid)
    held = (at < len(keys)) & (keys[np.minimum(at, len(keys) - 1)] == grid)
    totals = totals.copy()
    totals[at[held]] += each
    new = grid[~held]
    return np.concatenate([keys, new]), np.concatenate([totals, np.full(len(new), each, dtype=np.int64)])


def _within_limits(shapes: Mapping[tuple[int, int], int], top: Callable[[int], int]) -> dict[tuple[int, int], int]:
    """Smoothed shapes with their second value cut to what the limits allow at their first."""
    if not shapes:
        return {}
    pairs = np.array(list(shapes), dtype=np.int64)
    weights = np.fromiter(shapes.values(), dtype=np.int64, count=len(shapes))
    return _as_dict(*_within(pairs[:, 0] << 31 | pairs[:, 1], weights, top))


def _within(keys: _Packed, totals: _Packed, top: Callable[[int], int]) -> tuple[_Packed, _Packed]:
    """:func:`_within_limits` of packed keys: sorted packed keys and their weights."""
    if not len(keys):
        return keys, totals
    first, second = keys >> 31, keys & (2**31 - 1)
    firsts, at = np.unique(first, return_inverse=True)
    tops = np.array([top(int(a)) for a in firsts.tolist()], dtype=np.int64)  # one call per distinct first value
    key = first << 31 | np.minimum(second, tops[at])
    merged, inverse = np.unique(key, return_inverse=True)
    out = np.zeros(len(merged), dtype=np.int64)
    np.add.at(out, inverse, totals)
    return merged, out


def _as_dict(keys: _Packed, totals: _Packed) -> dict[tuple[int, int], int]:
    """Packed (first, second) keys and their weights as a mapping, in the keys' order."""
    pairs = zip((keys >> 31).tolist(), (keys & (2**31 - 1)).tolist(), strict=True)
    return dict(zip(pairs, totals.tolist(), strict=True))


def resolution(budget: int) -> int:
    """The planner's grid density for a budget: finer where many graphs are given (another strategy's count)."""
    return 1 if budget <= FINE_BUDGET else 2 if budget <= 4 * FINE_BUDGET else 4


def prompt_axes(limits: TextLimits, time: StepTimes, res: int = 1) -> PhaseAxes:
    """The prompt phase: rows of query lengths (batch 1), values of context blocks from 0 up to what the row's
    smallest query leaves of max_model_len."""
    return PhaseAxes(
        time=functools.partial(time.prefill_s, 1),  # no Python frame per priced step (a lambda has one)
        rows_top=limits.top_query,
        row_round=QUERY_GRANULE,
        floor=lambda q: 0,
        # within what the row's own query leaves (only binding where buckets must fit max_model_len; the staircase
        # rows then make it reach every shape of the row)
        top=lambda q, prev: (
            max(min(limits.top_context(prev + 1), limits.top_context(q)), 0)
            if limits.prompt_fits_model_len
            else max(limits.top_context(prev + 1), 0)
        ),
        need=lambda q, prev: 1,
        required_rows=limits.staircase_queries(),
        spill=False,
        zero=True,
        resolution=res,
        step_factor=PROMPT_STEP_FACTOR,
        rows_per_octave=PROMPT_ROWS_PER_OCTAVE,
    )


def decode_axes(limits: TextLimits, time: StepTimes, res: int = 1) -> PhaseAxes:
    """The decode phase: rows of batch sizes, values of KV blocks from the batch (a bucket holds at least as many
    blocks as sequences) up to the limits; only the last row covers them (a row holds what its traffic needs)."""
    return PhaseAxes(
        time=lambda n, c: time.decode_s(n, max(c, n)),
        rows_top=limits.max_num_seqs,
        row_round=1,
        floor=lambda n: n,
        top=lambda n, prev: limits.top_blocks(n),
        need=lambda n, prev: prev + 1,
        spill=True,
        zero=False,
        resolution=res,
        heavy_row_share=HEAVY_BATCH_SHARE,
    )


def _splits(budget: int, least: tuple[int, int]) -> list[int]:
    """Prompt graphs tried for a total ``budget``: SPLIT_STEPS shares between each phase's least."""
    low, high = least[0], budget - least[1]
    if high < low:
        return []
    return sorted({low, high, *(low + round((high - low) * k / SPLIT_STEPS) for k in range(SPLIT_STEPS + 1))})


def plan_text_buckets(
    prefill: Mapping[tuple[int, int], int],
    decode: Mapping[tuple[int, int], int],
    limits: TextLimits,
    *,
    budget: int,
    time: StepTimes,
    prior_share: float | None = None,
    smooth_octaves: float | None = None,
    load_levels: Sequence[int] = (),
) -> TextBucketPlan:
    """The plan of :func:`text_bucket_splits` whose split between the phases costs the least modelled time."""
    plans, pick = text_bucket_splits(prefill, decode, limits, budget=budget, time=time, prior_share=prior_share,
                                     smooth_octaves=smooth_octaves, load_levels=load_levels)  # fmt: skip
    return plans[pick]


def text_bucket_splits(
    prefill: Mapping[tuple[int, int], int],
    decode: Mapping[tuple[int, int], int],
    limits: TextLimits,
    *,
    budget: int,
    time: StepTimes,
    prior_share: float | None = None,
    smooth_octaves: float | None = None,
    load_levels: Sequence[int] = (),
) -> tuple[list[TextBucketPlan], int]:
    """The covering buckets for each split of ``budget`` between the phases tried, and the index of the split whose
    steps spend the least modelled time on these shapes: at most ``budget`` graphs
    (batch-1 prompt rows and decode; rows for larger prefill batches come on top), split between the phases where
    it saves the most time, and no shape the limits allow padded beyond :data:`~.text_time.GROSS_FACTOR` times its
    context or KV blocks.

    ``prefill``: (query tokens, context blocks) -> runs; ``decode``: (sequences, blocks) -> steps, on one scale (the
    seconds of the two phases are added). ``time``: the step-time model. ``load_levels``: the loads the decode buckets
    must serve when the load is unknown: each gets :data:`LEVEL_SHARE` of the weight as full batches at that load
    (:func:`at_load_levels`). A budget too small for the ladders is refused (:class:`ConfigError`, with the least).
    """
    time = cached(time)
    res, rows, prior_share, smooth_octaves, prompt_key, dec_key = _keys(prefill, decode, limits, budget, prior_share,
                                                                         smooth_octaves, load_levels)  # fmt: skip
    # a re-plan at a budget tried before (the worst case's smaller budgets) asks for the same weights again
    plans, pick = time.kept("splits", (prompt_key, dec_key, budget),
                            lambda: _splits_of(prefill, decode, limits, budget, time, res, rows, prior_share,
                                               smooth_octaves, load_levels, prompt_key, dec_key))  # fmt: skip
    return list(plans), pick


def prepare_phases(prefill: Mapping[tuple[int, int], int], decode: Mapping[tuple[int, int], int], limits: TextLimits,
                   *, budget: int, time: CachedTimes, load_levels: Sequence[int] = ()) -> None:  # fmt: skip
    """Each phase prepared for :func:`text_bucket_splits` at ``budget`` and kept in ``time`` (the same preparation
    serves every budget of the default's search: their rows are capped alike), e.g. before a fork, so that both
    processes start from it."""
    res, rows, prior_share, smooth_octaves, prompt_key, dec_key = _keys(prefill, decode, limits, budget, None, None,
                                                                         load_levels)  # fmt: skip
    time.kept("prompt", prompt_key,
              lambda: _prepare_prompt(prefill, limits, time, res, rows, prior_share, smooth_octaves),
              most=PREPARED_KEPT)  # fmt: skip
    time.kept("decode", dec_key, lambda: _prepare_decode(decode, limits, time, res, rows, smooth_octaves, load_levels),
              most=PREPARED_KEPT)  # fmt: skip


def _keys(prefill: Mapping[tuple[int, int], int], decode: Mapping[tuple[int, int], int], limits: TextLimits,
          budget: int, prior_share: float | None, smooth_octaves: float | None, load_levels: Sequence[int],
          ) -> tuple[int, int, float, float, Hashable, Hashable]:  # fmt: skip
    """The grid density, the rows, the settings and each phase's key of a planning call."""
    res = resolution(budget)
    prior_share = PRIOR_SHARE if prior_share is None else prior_share
    smooth_octaves = SMOOTH_OCTAVES if smooth_octaves is None else smooth_octaves
    # every budget and repair round of one planning run starts from the same weights, and a re-plan boosts one
    # phase's: each phase is prepared once per run for each of its weight sets
    rows = min(budget, MAX_ROWS * res)
    prompt_key = (_fingerprint(prefill), limits, res, rows, prior_share, smooth_octaves)
    dec_key = (_fingerprint(decode), limits, res, rows, smooth_octaves, tuple(load_levels))
    return res, rows, prior_share, smooth_octaves, prompt_key, dec_key


def _splits_of(prefill: Mapping[tuple[int, int], int], decode: Mapping[tuple[int, int], int], limits: TextLimits,
               budget: int, time: CachedTimes, res: int, rows: int, prior_share: float, smooth_octaves: float,
               load_levels: Sequence[int], prompt_key: Hashable,
               dec_key: Hashable) -> tuple[tuple[TextBucketPlan, ...], int]:  # fmt: skip
    """:func:`text_bucket_splits` once its keys are known: each phase prepared (kept per weights), then the splits."""
    prompt = time.kept("prompt", prompt_key,
                       lambda: _prepare_prompt(prefill, limits, time, res, rows, prior_share, smooth_octaves),
                       most=PREPARED_KEPT)  # fmt: skip
    dec = time.kept("decode", dec_key,
                    lambda: _prepare_decode(decode, limits, time, res, rows, smooth_octaves, load_levels),
                    most=PREPARED_KEPT)  # fmt: skip
    prompt_ax, decode_ax, prompts, decodes = prompt.axes, dec.axes, prompt.options, dec.options
    splits = _splits(budget, (prompts.least, decodes.least))
    if not splits:
        least = prompts.least + decodes.least
        if least >= NO_LADDER and rows < MAX_ROWS * res:  # looked for within the budget's rows: the least needs all
            wide = MAX_ROWS * res
            prompt_least = _prepare_prompt(prefill, limits, time, res, wide, prior_share, smooth_octaves).options.least
            least = prompt_least + _prepare_decode(decode, limits, time, res, wide, smooth_octaves,
                                                   load_levels).options.least  # fmt: skip
        if least >= NO_LADDER:
            raise BudgetTooSmall.of(budget, f": no bucket set keeps every shape these limits allow within "
                                    f"{GROSS_FACTOR}x its need", least)  # fmt: skip
        raise BudgetTooSmall.of(budget, f" is too small to keep every shape within {GROSS_FACTOR}x its need; "
                                f"accepted: at least {least} graphs for these limits and traffic", least)  # fmt: skip
    prompts.reserve(splits[-1])
    decodes.reserve(budget - splits[0])
    plans = [(prompts.best(g), decodes.best(budget - g)) for g in splits]
    # the split is judged on the traffic as planned and on the smoothed weights (the traffic shifted a little), each
    # split's seconds relative to the best split's on each, the least sum winning: judged on the traffic alone it
    # starved the phase that traffic barely needed, and shifted traffic padded longer than under the runtime's own
    # buckets; judged on the smoothed weights alone it starved decode on the main job's own traffic
    # (benchmarks/planner/results/planner_dev_time.md, round 4)
    traffic, smooth = (prompt.traffic, dec.traffic), (prompt.smooth, dec.smooth)
    on_traffic = [phase_seconds(prompt_ax, p, traffic[0]) + phase_seconds(decode_ax, d, traffic[1]) for p, d in plans]
    on_smoothed = [phase_seconds(prompt_ax, p, smooth[0]) + phase_seconds(decode_ax, d, smooth[1]) for p, d in plans]
    low_t, low_s = min(on_traffic) or 1.0, min(on_smoothed) or 1.0
    pick = min(range(len(plans)), key=lambda k: on_traffic[k] / low_t + on_smoothed[k] / low_s)
    return tuple(_buckets(prompt, decode_plan, limits) for prompt, decode_plan in plans), pick


def _fingerprint(shapes: Mapping[tuple[int, int], int]) -> frozenset[tuple[tuple[int, int], int]]:
    """The weights as a key, equal for equal weights in any order (a set: no sort of thousands of shapes per call)."""
    return frozenset(shapes.items())


@dataclasses.dataclass(frozen=True)
class _Prepared:
    """What :func:`text_bucket_splits` derives from one phase's weights before trying any split: the axes, the
    candidate plans, and the traffic's and the smoothed weights as arrays."""

    axes: PhaseAxes
    options: PhaseOptions
    traffic: Shapes
    smooth: Shapes


def _prepare_prompt(prefill: Mapping[tuple[int, int], int], limits: TextLimits, time: StepTimes, res: int,
                    rows: int, prior_share: float, smooth_octaves: float) -> _Prepared:  # fmt: skip
    top_q = limits.top_query
    axes = _kept_axes(prompt_axes, limits, time, res)
    smooth = _smoothed_within(prefill, smooth_octaves, first_octaves=SMOOTH_QUERY, first_top=top_q,
                              scale_second=False, top=lambda q: limits.top_context(min(q, top_q)), time=cached(time),
                              tag=("prompt", limits))  # fmt: skip
    smooth = _with_prior(*smooth, _log_grid(1, top_q), lambda q: [0, *_log_grid(1, limits.top_context(q))],
                         prior_share)  # fmt: skip
    return _prepared(axes, prefill, smooth, rows)


def _prepared(axes: PhaseAxes, shapes: Mapping[tuple[int, int], int], smooth: tuple[_Packed, _Packed],
              rows: int) -> _Prepared:  # fmt: skip
    keys, totals = smooth
    first, second, weight = keys >> 31, keys & (2**31 - 1), totals.astype(np.float64)
    return _Prepared(axes, phase_options_of(axes, first, second, weight, rows), Shapes.of(axes, shapes),
                     Shapes.of_arrays(axes, first, second, weight))  # fmt: skip


def _prepare_decode(decode: Mapping[tuple[int, int], int], limits: TextLimits, time: StepTimes, res: int,
                    rows: int, smooth_octaves: float, load_levels: Sequence[int]) -> _Prepared:  # fmt: skip
    axes = _kept_axes(decode_axes, limits, time, res)
    smooth = at_load_levels(decode, load_levels, LEVEL_SHARE, limits.decode_block_cap)
    packed = _smoothed_within(smooth, smooth_octaves, first_octaves=0.0, first_top=0, scale_second=True,
                              top=lambda n: limits.top_blocks(min(n, limits.max_num_seqs)), time=cached(time),
                              tag=("decode", limits))  # fmt: skip
    return _prepared(axes, decode, packed, rows)


def _kept_axes(make: Callable[[TextLimits, StepTimes, int], PhaseAxes], limits: TextLimits, time: StepTimes,
               res: int) -> PhaseAxes:  # fmt: skip
    """``make``'s axes, one per planning run (kept in ``time``): what depends on the axes alone is worked out once
    for every weight set (:attr:`~.text_time.PhaseAxes.memo`)."""
    if not isinstance(time, CachedTimes):
        return make(limits, time, res)
    return time.kept("axes", (make.__name__, limits, res), lambda: make(limits, time, res))


def _buckets(prompt: PhasePlan, decode_plan: PhasePlan, limits: TextLimits) -> TextBucketPlan:
    """The bucket set of a prompt and a decode plan (rows for larger prefill batches added at context 0)."""
    g = prompt.graphs
    prompt_buckets = [(1, q, c) for q, values in zip(prompt.rows, prompt.values, strict=True) for c in values]
    for b in range(2, min(limits.max_prefill_batch, limits.max_num_seqs) + 1):
        most = min(limits.max_num_batched_tokens // b, limits.max_model_len)
        for q in sorted({q for q in prompt.rows if q <= most} | {most}):
            prompt_buckets.append((b, q, 0))
    decode_buckets = [(b, 1, c) for b, values in zip(decode_plan.rows, decode_plan.values, strict=True) for c in values]
    return TextBucketPlan(tuple(sorted(set(prompt_buckets))), tuple(sorted(set(decode_buckets))),
                          len(prompt.rows), len(decode_plan.rows), (g, decode_plan.graphs))  # fmt: skip

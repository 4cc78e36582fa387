"""Language-model buckets planned from traffic: the prompt ``(batch, query, context blocks)`` and decode
``(batch, blocks)`` buckets that cover every shape the engine limits allow and, within a graph budget, pad the least.

Pure: from the weighted shapes a replay of the traffic produced (how often each prefill ``(query, context blocks)``
and each decode ``(sequences, blocks)`` ran) and the limits, to the buckets. The lookup it plans for takes, in sorted
order, the first bucket at least as large as the shape in every dimension (vllm-gaudi's
``find_equal_or_closest_greater_config``), so the buckets are planned as rows:

- **Prompt.** Query rows ``q_1 < ... < q_k`` (the last is the largest query a step can hold); each row holds context
  values whose largest covers the longest context a query of that row can have (``ceil((max_model_len - 1 - q) /
  block_size)`` for the row's smallest query). A shape then always runs in the first row at or above its query, at
  that row's first context at or above its own: nothing falls back, and the axes separate. The rows are the exact
  optimum of padded query tokens for ``k`` rows (a dynamic programme, :class:`~.planner.CoverTable`); each row's
  contexts are the exact optimum of padded context blocks for its number of values, and the graphs left after one
  per row go to the rows where they save the most (an exact allocation over the rows' cost curves). ``k`` is chosen
  to minimise the sum of the two inefficiencies the replay reports (query tokens, context blocks).
- **Decode.** The same with batch rows (padded sequence slots) and block values per row (padded blocks); a row's
  largest block value is ``min(batch x ceil(max_model_len / block_size), block cap)``. No block value is more than
  :data:`DECODE_MAX_STEP` above the one before it, so traffic with longer sequences than planned pads at most that
  much within its row.
- **The runtime's own rows.** Given the query lengths and decode batch sizes of the runtime's own buckets, every
  plan holds them among its rows (the dynamic programme with forced values): a prefill then pads its query, and a
  decode its batch, no further than under the runtime's own buckets, whatever the traffic (a decode whose blocks
  exceed its row's planned values moves to a larger row).

Before planning, :data:`PRIOR_SHARE` of the weight is spread log-uniformly over every shape the limits allow
(:func:`with_prior`): planning on the traffic alone puts no value between the traffic's largest shapes and the
coverage bucket, so traffic a little unlike it would pad all the way to that bucket.

Values are rounded before planning: queries up to a multiple of :data:`QUERY_GRANULE` (the step vllm-gaudi itself
compiles unprepared prompt shapes at), blocks to a grid 1/16 of their power of two apart (at most 6.25% padding).
With more than one prefill sequence per batch (``VLLM_PROMPT_BS_BUCKET_MAX``) rows for batches 2.. are added at
context 0 (only requests without context are merged), covering every query a batch of that size can hold.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from vllm_hpu_mm.buckets.planner import INFEASIBLE, CoverTable
from vllm_hpu_mm.errors import ConfigError

__all__ = [
    "DECODE_MAX_STEP",
    "QUERY_GRANULE",
    "QWEN25_VL_7B_CONTEXT_COST",
    "TextBucketPlan",
    "TextLimits",
    "block_grid",
    "context_cost",
    "plan_text_buckets",
]

Bucket = tuple[int, int, int]
#: Prompt query lengths are rounded up to multiples of this (vllm-gaudi's fallback_seq_base_step @ 091bbadd).
QUERY_GRANULE = 32
#: Most second-axis values one row gets (more saves next to nothing and costs planning time).
MAX_VALUES_PER_ROW = 24
#: Most rows (prompt query lengths, decode batch sizes) one phase is searched over. vllm-gaudi's own default (exp)
#: strategy warms at most ceil(log2(max_num_batched_tokens)) query rows and ceil(log2(max_num_seqs)) + 1 batch rows
#: (exponential.py @ 091bbadd: 24 and 21 at vLLM's largest limits); 64 rows is three times that. Past it a larger
#: budget (a third of lin's ~18,000 graphs) would only add rows of ever smaller gain, each costing the search
#: rows x values x budget work: the search stops there, whatever budget the runtime's count implies.
MAX_ROWS = 64
#: Share of each phase's weight spread log-uniformly over every shape the limits allow before planning, so that the
#: buckets also serve traffic unlike the one they were planned on (a shape beyond the planned values would otherwise
#: pad to the coverage bucket). Tuned on traffic the reported figures do not use (benchmarks/results/replay_*.md).
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
#: Widest step between a decode row's block values: traffic whose sequences are longer than planned pads its KV
#: blocks at most this much within its row, as under vllm-gaudi's exponential block steps above their first value.
DECODE_MAX_STEP = 2.0
#: Added to a row's cost when its values cannot keep to the widest step: the allocation then gives that row enough
#: values whenever the budget allows.
STEP_PENALTY = 1 << 50
#: Whether only the last row covers the limits (the others spill to it, or to the first larger row that holds the
#: shape), per phase; otherwise every row covers the contexts (blocks) its queries (batches) allow.
SPILL_PROMPT = False
SPILL_DECODE = True


@dataclasses.dataclass(frozen=True)
class TextLimits:
    """The shapes the engine allows: queries up to ``max_num_batched_tokens`` (and ``max_model_len``), contexts up to
    ``max_model_len``, batches up to ``max_num_seqs`` (prefill: ``max_prefill_batch``), decode blocks up to
    ``decode_block_cap`` in all."""

    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    block_size: int
    decode_block_cap: int
    max_prefill_batch: int = 1

    @property
    def top_query(self) -> int:
        return min(self.max_num_batched_tokens, self.max_model_len)

    def top_context(self, smallest_query: int) -> int:
        """Most context blocks a prefill chunk of at least ``smallest_query`` tokens can have."""
        return max(0, math.ceil((self.max_model_len - 1 - smallest_query) / self.block_size))

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


def context_cost(hidden_size: int, intermediate_size: int, num_heads: int, num_kv_heads: int) -> float:
    """FLOPs of one query token attending to one context token (QK and AV: 4 x hidden) over those of one query token
    through a layer's weights (2 x its parameters: attention projections and the gated MLP)."""
    head_dim = hidden_size // num_heads
    params = (
        2 * hidden_size * hidden_size
        + 2 * hidden_size * num_kv_heads * head_dim
        + 3 * hidden_size * (intermediate_size)
    )
    return 4 * hidden_size / (2 * params)


#: :func:`context_cost` of Qwen2.5-VL-7B's language model (hidden 3584, MLP 18944, 28 heads, 4 KV heads): 3.1e-5.
QWEN25_VL_7B_CONTEXT_COST = context_cost(3584, 18944, 28, 4)


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
    if not shapes:
        return {}
    keys = list(shapes)
    a = np.array([k[0] for k in keys], dtype=np.int64)
    b = np.array([k[1] for k in keys], dtype=np.int64)
    n = np.array([shapes[k] for k in keys], dtype=np.int64)
    firsts, seconds, weights = [], [], []
    for fa, wa in _kernel(first_octaves):
        na = a if fa == 1 else np.minimum(first_top, np.maximum(1, np.round(a * fa).astype(np.int64)))
        base = np.where(b > 0, b * na / a, b) if scale_second else b.astype(np.float64)
        for fb, wb in _kernel(octaves):
            nb = np.where(b > 0, np.maximum(1, np.round(base * fb).astype(np.int64)), 0)
            if scale_second:
                nb = np.where(nb > 0, np.maximum(nb, na), nb)
            firsts.append(na)
            seconds.append(nb)
            weights.append(n * (wa * wb))
    # one int64 key per (first, second): both stay far below 2^31 (tokens, sequences and blocks of one engine)
    key = np.concatenate(firsts) << 31 | np.concatenate(seconds)
    keys_out, inverse = np.unique(key, return_inverse=True)
    totals = np.zeros(len(keys_out), dtype=np.int64)
    np.add.at(totals, inverse, np.concatenate(weights))
    return {(k >> 31, k & (2**31 - 1)): t for k, t in zip(keys_out.tolist(), totals.tolist(), strict=True)}


def at_load_levels(decode: Mapping[tuple[int, int], int], levels: Sequence[int], share: float,
                   cap: int) -> dict[tuple[int, int], int]:  # fmt: skip
    """``decode`` plus ``share`` of its weight as full batches at each load level: ``level`` sequences holding the
    traffic's own blocks per sequence (its distribution, scaled), capped at ``cap``."""
    out = dict(decode)
    total = sum(decode.values())
    if not levels or share <= 0 or not total:
        return out
    per_seq: Counter[int] = Counter()
    for (n, b), w in decode.items():
        per_seq[block_grid(max(1, round(b / n)))] += w
    scale = share / (1 - share) * total / (len(levels) * sum(per_seq.values()))
    for level in levels:
        for p, w in per_seq.items():
            key = (level, min(cap, max(level, level * p)))
            out[key] = out.get(key, 0) + max(1, round(w * scale))
    return out


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


@dataclasses.dataclass(frozen=True)
class _Curve:
    """A row's second axis: for m values (index m - 1), the least padded total and the values."""

    costs: tuple[int, ...]
    values: tuple[tuple[int, ...], ...]


def _curve(weights: Mapping[int, int], top: int, floor: int, max_values: int, *, cover: bool = True,
           max_step: float | None = None) -> _Curve:  # fmt: skip
    """The row's values (each from ``floor`` to ``top``; the largest ``top`` with ``cover``, else the largest
    weighted value) minimising sum(weight x value), for 1..max_values values. With ``max_step``, no value is more
    than that factor above the one before it (the covering ``top`` excepted), candidates taken from a log grid; a
    number of values that cannot keep to it costs :data:`STEP_PENALTY` more. Values are shifted by one inside (the
    planner's table takes positive values only: contexts may be 0)."""
    shifted: Counter[int] = Counter()
    for v, n in weights.items():
        shifted[max(floor, min(top, v)) + 1] += n
    if not shifted:
        return _Curve((0,), ((top,),))
    table = CoverTable(shifted, cover=top + 1 if cover else None, granule=1)
    costs, values = [table.best_cost()], [tuple(b - 1 for b in table.buckets())]
    while table.num_buckets < min(max_values, len(table.values)):
        table.grow()
        costs.append(table.best_cost())
        values.append(tuple(b - 1 for b in table.buckets()))
    if max_step is None:
        return _Curve(tuple(costs), tuple(values))
    for g in _log_grid(max(1, floor), max(shifted) - 1):
        shifted[g + 1] += 0
    tight = CoverTable(shifted, cover=top + 1 if cover else None, granule=1, max_ratio=max_step)
    out_costs, out_values = [], []
    for m in range(1, len(costs) + 1):
        while tight.num_buckets < min(m, len(tight.values)):
            tight.grow()
        if tight.best_cost() < INFEASIBLE:
            out_costs.append(tight.best_cost())
            out_values.append(tuple(b - 1 for b in tight.buckets()))
        else:
            out_costs.append(costs[m - 1] + STEP_PENALTY)
            out_values.append(values[m - 1])
    return _Curve(tuple(out_costs), tuple(out_values))


def _allocate(curves: Sequence[_Curve], graphs: int) -> list[int]:
    """Values per row (each >= 1, in all at most ``graphs``) with the least total cost: exact, over the curves."""
    # No row takes more values than its curve holds, so a budget above their sum buys nothing: the table's width
    # (and the work, rows x values x width) stays bounded by the curves whatever budget the runtime's count implies.
    graphs = min(graphs, sum(len(c.costs) for c in curves))
    inf = np.iinfo(np.int64).max // 4
    best = np.full(graphs + 1, inf, dtype=np.int64)
    best[0] = 0
    width = np.arange(graphs + 1)
    choices = []
    for curve in curves:
        costs = np.array(curve.costs[:graphs], dtype=np.int64)
        ms = np.arange(1, len(costs) + 1)
        # cand[m - 1, g] = best[g - m] + cost of m values (inf where g < m or best[g - m] is): a min-plus step
        padded = np.concatenate([np.full(len(costs), inf, dtype=np.int64), best])
        before = padded[len(costs) + width[None, :] - ms[:, None]]
        cand = np.where(before < inf, before + costs[:, None], inf)
        first = np.argmin(cand, axis=0)  # the fewest values among equal costs
        new = cand[first, width]
        best = new
        choices.append(np.where(new < inf, first + 1, 0))
    g = int(np.argmin(best))
    if best[g] >= inf:
        raise ConfigError(f"a budget of {graphs} graphs cannot hold one bucket per row ({len(curves)} rows)")
    out = []
    for pick in reversed(choices):
        m = int(pick[g])
        out.append(m)
        g -= m
    return list(reversed(out))


@dataclasses.dataclass(frozen=True)
class _Phase:
    rows: tuple[int, ...]
    values: tuple[tuple[int, ...], ...]
    loss: float


def _grid(values: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
    """:func:`block_grid` over an array."""
    out = values.copy()
    big = values > 16
    _, exponent = np.frexp(values[big].astype(np.float64))  # values = mantissa x 2^exponent, mantissa in [0.5, 1)
    step = np.left_shift(1, exponent.astype(np.int64) - 5)
    out[big] = -(-values[big] // step) * step
    return out


def _lookup_cost(
    a: np.ndarray,
    b: np.ndarray,
    w: np.ndarray,
    rows: Sequence[int],  # type: ignore[type-arg]
    values: Sequence[tuple[int, ...]],
) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[type-arg]
    """Per shape, the (first, second) values of the bucket the lookup takes: the first row at or above its first
    value holding a second value at or above its own, there the smallest such (a shape above every row's values
    takes the last row's largest)."""
    row_arr = np.array(rows, dtype=np.int64)
    start = np.searchsorted(row_arr, a)
    chosen = np.full(len(a), len(rows) - 1, dtype=np.int64)
    found = np.zeros(len(a), dtype=bool)
    for i, vals in enumerate(values):
        hit = ~found & (start <= i) & (b <= max(vals))
        chosen[hit] = i
        found |= hit
    second = np.empty(len(a), dtype=np.int64)
    for i, vals in enumerate(values):
        sel = chosen == i
        ordered = np.array(sorted(vals), dtype=np.int64)
        second[sel] = ordered[np.minimum(np.searchsorted(ordered, b[sel]), len(ordered) - 1)]
    return row_arr[chosen], second


def _plan_phase(shapes: Mapping[tuple[int, int], int], rows_top: int, row_round: int, budget: int,
                top_of: Callable[[int, int], int], floor_of: Callable[[int], int],
                second_cost: float | None, spill: bool, min_rows: int = 1,
                forced: Sequence[int] = (), max_step: float | None = None) -> _Phase:  # fmt: skip
    """Rows on the first axis (rounded up to ``row_round``, the largest ``rows_top``) and values on the second, within
    ``budget`` graphs. ``top_of(row, previous row)`` is a row's largest second value (its coverage), ``floor_of(row)``
    its least. With ``spill`` only the last row covers (the others hold the values their shapes need, and a shape
    above them spills to the next row that covers it). Minimised, over the lookup's actual choices: padded
    first-axis units + ``second_cost`` x row x padded second-axis units (the work of padding, in first-axis units), or
    without ``second_cost`` (1 - first-axis efficiency) + (1 - second-axis efficiency). ``forced`` rows are in every
    candidate (unless the budget cannot hold them with their coverage values)."""
    keys = [k for k, n in shapes.items() if n > 0]
    forced = sorted({f for f in forced if 0 < f < rows_top})
    if not keys and not forced:  # no traffic: the covering bucket alone
        return _Phase((rows_top,), ((top_of(rows_top, 0),),), 0.0)
    if not keys:
        keys = [(rows_top, 0)]
        shapes = {(rows_top, 0): 1}
    a = np.minimum(np.array([k[0] for k in keys], dtype=np.int64), rows_top)
    b = np.array([k[1] for k in keys], dtype=np.int64)
    w = np.array([shapes[k] for k in keys], dtype=np.int64)
    bg = _grid(b)
    rounded = np.minimum(-(-np.maximum(a, 1) // row_round) * row_round, rows_top)
    first: Counter[int] = Counter()
    for v, n in zip(rounded.tolist(), w.tolist(), strict=True):
        first[v] += n
    table = CoverTable(first, cover=rows_top, granule=1, forced=forced)
    if table.min_buckets > budget:  # the forced rows do not fit the budget: plan without them
        table = CoverTable(first, cover=rows_top, granule=1)
    while table.num_buckets < min(table.min_buckets, len(table.values)):
        table.grow()
    real_first = int((a * w).sum())
    # per row (its value, the previous row's): its curve, its items' weight and real second-axis total
    memo: dict[tuple[int, int, bool], tuple[_Curve, int, int]] = {}
    best: _Phase | None = None
    while True:
        rows = tuple(table.buckets())
        if len(rows) > min(budget, max(MAX_ROWS, table.min_buckets)):
            break
        idx = np.searchsorted(np.array(rows, dtype=np.int64), a)
        spare = min(budget - len(rows) + 1, MAX_VALUES_PER_ROW)
        curves = []
        for i, r in enumerate(rows):
            prev = rows[i - 1] if i else 0
            entry = memo.get((r, prev, spill and i < len(rows) - 1))
            if entry is None or len(entry[0].costs) < spare:
                sel = idx == i
                distinct, inverse = np.unique(bg[sel], return_inverse=True)
                group = dict(zip(distinct.tolist(), np.bincount(inverse, weights=w[sel]).astype(np.int64).tolist(),
                                 strict=True))  # fmt: skip

                covers = not spill or i == len(rows) - 1
                curve = _curve(group, top_of(r, prev), floor_of(r), spare, cover=covers, max_step=max_step)
                entry = memo[(r, prev, not covers)] = (curve, int(w[sel].sum()), int((b[sel] * w[sel]).sum()))
            curve = entry[0]
            scale = 1 if second_cost is None else r  # the padding's work grows with the row's first value
            curves.append(_Curve(tuple(c * scale for c in curve.costs[:spare]), curve.values[:spare]))
        counts = _allocate(curves, budget)
        values = tuple(c.values[m - 1] for c, m in zip(curves, counts, strict=True))
        first_of, second_of = _lookup_cost(a, b, w, rows, values)
        padded_first = int((first_of * w).sum())
        if second_cost is None:
            real_second, padded_second = int((b * w).sum()), int((second_of * w).sum())
            loss = (1 - real_first / padded_first if padded_first else 0.0) + (
                1 - real_second / padded_second if padded_second else 0.0
            )
        else:
            loss = padded_first - real_first + second_cost * float((first_of * (second_of - b) * w).sum())
        enough = len(rows) >= min(min_rows, budget, len(table.values))
        if best is None or (enough and (loss < best.loss - 1e-12 or len(best.rows) < min_rows)):
            best = _Phase(rows, values, loss)
        if table.num_buckets >= len(table.values):
            break
        table.grow()
    assert best is not None
    return best


def plan_text_buckets(
    prefill: Mapping[tuple[int, int], int],
    decode: Mapping[tuple[int, int], int],
    limits: TextLimits,
    *,
    prompt_budget: int,
    decode_budget: int,
    context_cost: float = QWEN25_VL_7B_CONTEXT_COST,
    prior_share: float | None = None,
    smooth_octaves: float | None = None,
    load_levels: Sequence[int] = (),
    query_rows: Sequence[int] = (),
    batch_rows: Sequence[int] = (),
) -> TextBucketPlan:
    """The covering buckets with the least padding on these shapes, at most ``prompt_budget`` prompt and
    ``decode_budget`` decode graphs (batch-1 rows; rows for larger prefill batches come on top).

    ``prefill``: (query tokens, context blocks) -> runs; ``decode``: (sequences, blocks) -> steps.
    ``context_cost``: the work of one query token attending to one context token, in query tokens
    (:func:`context_cost`): what weighs padded context blocks against padded query tokens. ``load_levels``: the loads
    the decode buckets must serve when the load is unknown: each gets a row and :data:`LEVEL_SHARE` of the weight as
    full batches at that load (:func:`at_load_levels`), so that a load the traffic rarely reached is still served.
    ``query_rows`` / ``batch_rows``: prompt query lengths and decode batch sizes every plan holds (those of the
    runtime's own buckets: every prefill then pads its query, and every decode its batch, no further than there).
    """
    if prompt_budget < 1 or decode_budget < 1:
        raise ConfigError(f"text graph budget {prompt_budget} prompt + {decode_budget} decode is invalid; accepted: "
                          "at least one graph per phase")  # fmt: skip
    top_q = limits.top_query
    prior_share = PRIOR_SHARE if prior_share is None else prior_share
    smooth_octaves = SMOOTH_OCTAVES if smooth_octaves is None else smooth_octaves
    prefill = smoothed(prefill, smooth_octaves, first_octaves=SMOOTH_QUERY, first_top=top_q)
    decode = at_load_levels(decode, load_levels, LEVEL_SHARE, limits.decode_block_cap)
    decode = smoothed(decode, smooth_octaves, scale_second=True)
    prefill = with_prior(prefill, _log_grid(1, top_q), lambda q: [0, *_log_grid(1, limits.top_context(q))],
                         prior_share)  # fmt: skip
    per_seq = math.ceil(limits.max_model_len / limits.block_size)
    decode = with_prior(decode, _log_grid(1, limits.max_num_seqs),
                        lambda n: _log_grid(n, min(n * per_seq, max(n, limits.decode_block_cap))),
                        0.0 if SPILL_DECODE else prior_share)  # fmt: skip
    prompt = _plan_phase(
        prefill, top_q, QUERY_GRANULE, prompt_budget,
        lambda q, prev: max(limits.top_context(prev + 1), 0), lambda q: 0, limits.block_size * context_cost,
        SPILL_PROMPT, forced=query_rows,
    )  # fmt: skip
    prompt_buckets = [(1, q, c) for q, values in zip(prompt.rows, prompt.values, strict=True) for c in values]
    for b in range(2, min(limits.max_prefill_batch, limits.max_num_seqs) + 1):
        most = min(limits.max_num_batched_tokens // b, limits.max_model_len)
        for q in sorted({q for q in prompt.rows if q <= most} | {most}):
            prompt_buckets.append((b, q, 0))
    decode_plan = _plan_phase(
        decode,
        limits.max_num_seqs,
        1,
        decode_budget,
        lambda b, prev: limits.top_blocks(b),
        lambda b: b,
        None,
        SPILL_DECODE,
        len(load_levels),
        forced=batch_rows,
        max_step=DECODE_MAX_STEP,
    )
    decode_buckets = [(b, 1, c) for b, values in zip(decode_plan.rows, decode_plan.values, strict=True) for c in values]
    return TextBucketPlan(tuple(sorted(set(prompt_buckets))), tuple(sorted(set(decode_buckets))),
                          len(prompt.rows), len(decode_plan.rows), (prompt_budget, decode_budget))  # fmt: skip

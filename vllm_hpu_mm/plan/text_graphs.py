"""The language-model graphs the plan's runtime warms (its model says which: ``RuntimeModel.text_shapes``), their
estimated costs (:mod:`.text_cost`), and which of them fit the prefill-text and decode pools.

Costs are estimates or calibrations (:mod:`.text_cost`), never readings. Which buckets are kept when not all fit is
:func:`_kept`'s rule; vllm-gaudi's exports hand the kept ones to it as a bucket file.
"""

from __future__ import annotations

import bisect
import dataclasses

from vllm_hpu_mm.plan import text_cost
from vllm_hpu_mm.plan.inputs import PlanInputs
from vllm_hpu_mm.plan.text_cost import TextBucket
from vllm_hpu_mm.plan.vision_cost import PoolMode

__all__ = ["TextGraphFit", "fit"]


@dataclasses.dataclass(frozen=True)
class TextGraphFit:
    #: Every prefill / decode graph the runtime would warm, smallest estimated cost first.
    prefill: tuple[TextBucket, ...]
    decode: tuple[TextBucket, ...]
    #: Those kept within their pool (see :func:`_kept`), in the same order.
    prefill_kept: tuple[TextBucket, ...]
    decode_kept: tuple[TextBucket, ...]
    #: How the lists were obtained, in words.
    source: str
    #: What the runtime does with the configuration the user would not see otherwise (:attr:`TextShapes.notes`).
    notes: tuple[str, ...] = ()
    #: Which of the user's settings the runtime lets win over another (:attr:`TextShapes.resolved`).
    resolved: tuple[str, ...] = ()

    @property
    def prefill_fit(self) -> int:
        return len(self.prefill_kept)

    @property
    def decode_fit(self) -> int:
        return len(self.decode_kept)


def _by_cost(buckets: list[TextBucket]) -> tuple[TextBucket, ...]:
    return tuple(sorted(buckets, key=lambda b: (b.cost_bytes, b.batch, b.size, b.context)))


Shape = tuple[int, int, int]


def _maximal_shapes(buckets: tuple[TextBucket, ...]) -> set[Shape]:
    """The (batch, size, context) shapes no other bucket covers (at least as large on every axis, larger on one).

    Near-linear where the pairwise check was quadratic (vllm-gaudi's ``lin`` strategy warms ~18,000 buckets): the
    batch sizes are swept largest first, each against the (size, context) staircase of the larger batches (a
    prefix maximum of context over sizes, sorted) and against its own batch's shapes; O(batches x n log n)."""
    by_batch: dict[int, set[tuple[int, int]]] = {}
    for b in buckets:
        by_batch.setdefault(b.batch, set()).add((b.size, b.context))
    maximal: set[Shape] = set()
    above: list[tuple[int, int]] = []  # (size, context) of every larger batch
    for batch in sorted(by_batch, reverse=True):
        above.sort(key=lambda p: -p[0])
        sizes = [-size for size, _ in above]  # ascending, for bisect
        best, prefix = -1, []
        for _, context in above:
            best = max(best, context)
            prefix.append(best)
        group = sorted(by_batch[batch], key=lambda p: (-p[0], -p[1]))
        larger_size_best = -1  # most context among this batch's shapes of a larger size
        i = 0
        while i < len(group):
            size = group[i][0]
            j = i
            while j < len(group) and group[j][0] == size:
                j += 1
            top = group[i][1]  # most context at this size
            for _, context in group[i:j]:
                k = bisect.bisect_right(sizes, -size)  # larger batches with size >= this size
                covered_above = k > 0 and prefix[k - 1] >= context
                covered_here = larger_size_best >= context or top > context
                if not (covered_above or covered_here):
                    maximal.add((batch, size, context))
            larger_size_best = max(larger_size_best, top)
            i = j
        above.extend(by_batch[batch])
    return maximal


def _kept(buckets: tuple[TextBucket, ...], pool: int, shared: bool) -> tuple[TextBucket, ...]:
    """The graphs to keep within ``pool`` (private pools add up; a shared pool needs about the largest).

    When the maximal shapes (those no other bucket covers) fit, they are kept first, so every shape up to the
    largest still finds a warmed bucket to pad to (coarser, never a compile); the rest fill what is left, smallest
    first. Otherwise the smallest fit, as a runtime that stops capturing at its budget would keep them.
    """
    if shared:
        return tuple(b for b in buckets if b.cost_bytes <= pool)
    shapes = _maximal_shapes(buckets)
    maximal = tuple(b for b in buckets if (b.batch, b.size, b.context) in shapes)
    used = sum(b.cost_bytes for b in maximal)
    if used > pool:
        return buckets[: text_cost.count_fitting(list(buckets), pool)]
    chosen = set(maximal)
    for b in buckets:
        if b not in chosen and used + b.cost_bytes <= pool:
            chosen.add(b)
            used += b.cost_bytes
    return tuple(b for b in buckets if b in chosen)


def fit(i: PlanInputs, prefill_pool: int, decode_pool: int, num_kv_blocks: int) -> TextGraphFit:
    """The runtime's text graphs for these inputs, their estimated costs, and which fit ``prefill_pool`` /
    ``decode_pool``."""
    if i.pool_mode is PoolMode.NONE or i.enforce_eager:
        return TextGraphFit((), (), (), (), "no graphs (eager)")
    m, size, tp, block, costs = i.model, i.dtype_size, i.tensor_parallel_size, i.block_size, i.costs
    shapes = i.runtime.text_shapes(i.engine(num_kv_blocks))
    prefill = [
        TextBucket(bs, query, text_cost.prefill_cost(m, dtype_size=size, tp=tp, block_size=block, batch=bs, query=query,
                                                     context_blocks=ctx, costs=costs), ctx)
        for bs, query, ctx in shapes.prefill
    ]  # fmt: skip
    decode = [
        TextBucket(bs, blocks, text_cost.decode_cost(m, dtype_size=size, tp=tp, block_size=block, batch=bs,
                                                     blocks=blocks, costs=costs))
        for bs, blocks in shapes.decode
    ]  # fmt: skip
    shared = i.pool_mode is PoolMode.SHARED
    p, d = _by_cost(prefill), _by_cost(decode)
    return TextGraphFit(p, d, _kept(p, prefill_pool, shared), _kept(d, decode_pool, shared), shapes.source,
                        shapes.notes, shapes.resolved)  # fmt: skip

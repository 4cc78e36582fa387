"""The estimated cost of one language-model graph, for counting how many fit the prefill-text and decode pools
(which shapes a runtime warms is its own model's business: ``RuntimeModel.text_shapes``).

Per-graph cost model (an estimate, not a measurement): a graph keeps the activations of one layer's forward for
its shape, ``GRAPH_POOL_FACTOR`` times the eager activations (the vision tower's measured pool/eager ratio):
tokens x (4 x hidden + 2 x intermediate / TP) x dtype bytes, plus for decode the gathered K/V of one layer
(blocks x block_size x 2 x kv_heads x head_dim x dtype bytes / TP) and the logits (batch x vocab x 4 bytes).
Graphs are counted smallest first until the pool is exhausted.
"""

from __future__ import annotations

import dataclasses

from vllm_hpu_mm.models.dims import ModelDims
from vllm_hpu_mm.plan.costs import ESTIMATES, CostProfile

#: Graph pool / eager activations, from the vision tower's H100 measurement (0.0624 / 0.0424 ~ 1.47).
GRAPH_POOL_FACTOR = 1.47


@dataclasses.dataclass(frozen=True)
class TextBucket:
    batch: int
    #: Query length for prefill, KV blocks for decode.
    size: int
    cost_bytes: int
    #: Prefill only: KV blocks of cached context (prefix caching / chunked prefill), 0 for a fresh prompt.
    context: int = 0


def eager_bytes_per_token(m: ModelDims, dtype_size: int, tp: int) -> int:
    """Eager activations of one token in one layer (calibration divides measured graph costs by these)."""
    return (4 * m.hidden_size + 2 * m.intermediate_size // tp) * dtype_size


def graph_factors(costs: CostProfile) -> tuple[float, float]:
    """(prefill, decode) graph / eager factors: measured ones from ``costs``, else :data:`GRAPH_POOL_FACTOR` (the one
    place a calibration enters the text model)."""
    prefill = GRAPH_POOL_FACTOR if costs.text_prefill_factor is None else costs.text_prefill_factor
    decode = GRAPH_POOL_FACTOR if costs.text_decode_factor is None else costs.text_decode_factor
    return prefill, decode


def decode_eager_bytes(m: ModelDims, *, dtype_size: int, tp: int, block_size: int, batch: int, blocks: int) -> int:
    """Eager activations of one decode step: the batch's tokens, one layer's gathered K/V, the logits."""
    kv_heads = max(1, m.num_kv_heads // tp)
    kv_per_block = block_size * 2 * kv_heads * m.head_dim * dtype_size
    return batch * eager_bytes_per_token(m, dtype_size, tp) + blocks * kv_per_block + batch * m.vocab_size * 4


def prefill_eager_bytes(m: ModelDims, *, dtype_size: int, tp: int, block_size: int, batch: int, query: int,
                        context_blocks: int) -> int:  # fmt: skip
    """Eager activations of one prefill shape: ``batch x query`` tokens plus the gathered K/V of ``context_blocks``
    cached blocks per sequence (calibration divides a runtime's measured prefill graphs by these)."""
    kv_heads = max(1, m.num_kv_heads // tp)
    gathered = batch * context_blocks * block_size * 2 * kv_heads * m.head_dim * dtype_size
    return batch * query * eager_bytes_per_token(m, dtype_size, tp) + gathered


def prefill_cost(m: ModelDims, *, dtype_size: int, tp: int, block_size: int, batch: int, query: int,
                 context_blocks: int, costs: CostProfile = ESTIMATES) -> int:  # fmt: skip
    """Graph memory of one prefill shape: its eager activations times the prefill graph factor (estimated or
    measured)."""
    eager = prefill_eager_bytes(m, dtype_size=dtype_size, tp=tp, block_size=block_size, batch=batch, query=query,
                                context_blocks=context_blocks)  # fmt: skip
    return round(eager * graph_factors(costs)[0])


def decode_cost(m: ModelDims, *, dtype_size: int, tp: int, block_size: int, batch: int, blocks: int,
                costs: CostProfile = ESTIMATES) -> int:  # fmt: skip
    """Graph memory of one decode shape: its eager activations times the decode graph factor."""
    eager = decode_eager_bytes(m, dtype_size=dtype_size, tp=tp, block_size=block_size, batch=batch, blocks=blocks)
    return round(eager * graph_factors(costs)[1])


def count_fitting(buckets: list[TextBucket], pool_bytes: int, *, shared: bool = False) -> int:
    """How many buckets, smallest first, fit in ``pool_bytes``: each graph keeps its own memory (private pools, the
    HPU case), or graphs captured into one pool and replayed one at a time need about the largest (``shared``)."""
    ordered = sorted(b.cost_bytes for b in buckets)
    if shared:
        return sum(1 for cost in ordered if cost <= pool_bytes)
    used = 0
    for n, cost in enumerate(ordered):
        used += cost
        if used > pool_bytes:
            return n
    return len(ordered)

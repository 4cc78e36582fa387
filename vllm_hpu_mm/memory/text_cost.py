"""Text (language-model) graph shapes and their estimated cost, for counting how many fit the prefill-text and
decode pools. Which shapes a runtime really warms is :mod:`.text_graphs`' business; the generic grid below is the
HabanaAI/vllm-fork-style bucketing used where no exact model of the runtime exists:

- prefill: batch size 1, 2, 4, ... up to ``min(max_num_seqs, PROMPT_BS_MAX)`` times query length
  ``block_size``, ``2 x block_size``, ... up to ``min(max_model_len, max_num_batched_tokens)``, keeping
  ``batch x length <= max_num_batched_tokens``;
- decode: batch size 1, 2, 4, ... up to ``max_num_seqs`` (and ``max_num_seqs`` itself) times KV blocks 1, 2, 4,
  ... up to what that batch can hold at ``max_model_len`` (and never above the KV cache's blocks).

Per-graph cost model (an estimate, not a measurement): a graph keeps the activations of one layer's forward for
its shape, ``GRAPH_POOL_FACTOR`` times the eager activations (the vision tower's measured pool/eager ratio):
tokens x (4 x hidden + 2 x intermediate / TP) x dtype bytes, plus for decode the gathered K/V of one layer
(blocks x block_size x 2 x kv_heads x head_dim x dtype bytes / TP) and the logits (batch x vocab x 4 bytes).
Graphs are counted smallest first until the pool is exhausted.
"""

from __future__ import annotations

import dataclasses

from vllm_hpu_mm.memory.costs import ESTIMATES, CostProfile
from vllm_hpu_mm.memory.models import ModelDims

#: Largest prefill batch in a bucket (vllm-gaudi caps prompt batch buckets well below max_num_seqs).
PROMPT_BS_MAX = 64
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


def _powers_of_two(limit: int, start: int = 1) -> list[int]:
    out, v = [], start
    while v <= limit:
        out.append(v)
        v *= 2
    return out


def _per_token(m: ModelDims, dtype_size: int, tp: int) -> int:
    return (4 * m.hidden_size + 2 * m.intermediate_size // tp) * dtype_size


#: Public name of the eager activation bytes per token, for calibration against measured graph costs.
eager_bytes_per_token = _per_token


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
    return batch * _per_token(m, dtype_size, tp) + blocks * kv_per_block + batch * m.vocab_size * 4


def prefill_cost(m: ModelDims, *, dtype_size: int, tp: int, block_size: int, batch: int, query: int,
                 context_blocks: int, costs: CostProfile = ESTIMATES) -> int:  # fmt: skip
    """Graph memory of one prefill shape: the activations of ``batch x query`` tokens plus the gathered K/V of
    ``context_blocks`` cached blocks per sequence, times the prefill graph factor (estimated or measured)."""
    kv_heads = max(1, m.num_kv_heads // tp)
    gathered = batch * context_blocks * block_size * 2 * kv_heads * m.head_dim * dtype_size
    return round((batch * query * _per_token(m, dtype_size, tp) + gathered) * graph_factors(costs)[0])


def decode_cost(m: ModelDims, *, dtype_size: int, tp: int, block_size: int, batch: int, blocks: int,
                costs: CostProfile = ESTIMATES) -> int:  # fmt: skip
    """Graph memory of one decode shape: its eager activations times the decode graph factor."""
    eager = decode_eager_bytes(m, dtype_size=dtype_size, tp=tp, block_size=block_size, batch=batch, blocks=blocks)
    return round(eager * graph_factors(costs)[1])


def prefill_buckets(
    m: ModelDims, *, dtype_size: int, tp: int, block_size: int, max_num_seqs: int, max_model_len: int,
    max_num_batched_tokens: int, costs: CostProfile = ESTIMATES,
) -> list[TextBucket]:  # fmt: skip
    """Prefill (batch, length) buckets of the generic grid with their graph cost, smallest first."""
    longest = min(max_model_len, max_num_batched_tokens)
    lengths = _powers_of_two(longest, block_size) or [longest]
    out = [
        TextBucket(
            bs,
            length,
            prefill_cost(
                m,
                dtype_size=dtype_size,
                tp=tp,
                block_size=block_size,
                batch=bs,
                query=length,
                context_blocks=0,
                costs=costs,
            ),
        )
        for bs in _powers_of_two(min(max_num_seqs, PROMPT_BS_MAX))
        for length in lengths
        if bs * length <= max_num_batched_tokens
    ]
    return sorted(out, key=lambda b: (b.cost_bytes, b.batch))


def decode_buckets(
    m: ModelDims, *, dtype_size: int, tp: int, block_size: int, max_num_seqs: int, max_model_len: int,
    num_kv_blocks: int, costs: CostProfile = ESTIMATES,
) -> list[TextBucket]:  # fmt: skip
    """Decode (batch, KV blocks) buckets of the generic grid with their graph cost, smallest first."""
    blocks_per_seq = -(-max_model_len // block_size)
    batches = sorted({*_powers_of_two(max_num_seqs), max_num_seqs})
    out = []
    for bs in batches:
        most = min(bs * blocks_per_seq, max(num_kv_blocks, 1))
        for blocks in sorted({*_powers_of_two(most), most}):
            cost = decode_cost(m, dtype_size=dtype_size, tp=tp, block_size=block_size, batch=bs, blocks=blocks,
                               costs=costs)  # fmt: skip
            out.append(TextBucket(bs, blocks, cost))
    return sorted(out, key=lambda b: (b.cost_bytes, b.batch))


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

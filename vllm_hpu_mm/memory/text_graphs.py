"""Which language-model graphs each runtime warms, and which of them fit the plan's prefill-text and decode pools.

- vllm-gaudi: exactly the prompt and decode buckets its own bucketing generates from its variables (our model of
  ``extension/bucketing/`` at vllm-gaudi@091bbadd, :mod:`.gaudi_warmup`), one HPU graph per bucket (private pools).
- vllm-fork: the fork-style exponential grid of :mod:`.text_cost` (its capture stops when the prompt/decode pool
  is spent, which is what its two ratios are for).
- vLLM CUDA: one CUDA graph per ``cudagraph_capture_sizes`` entry, by token count (decode and mixed batches alike;
  longer prefills run piecewise without a graph of their own), all captured into one shared pool.
- CPU, ``--enforce-eager``: none.

Costs are estimates (:mod:`.text_cost`), never readings. Which buckets are kept when not all fit is
:func:`_kept`'s rule; :mod:`.exports` hands the kept ones to vllm-gaudi as a bucket file.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from vllm_hpu_mm.memory import gaudi_warmup, text_cost
from vllm_hpu_mm.memory.runtimes import VLLM_GAUDI_COMMIT, Runtime
from vllm_hpu_mm.memory.text_cost import TextBucket
from vllm_hpu_mm.memory.vision_cost import PoolMode

if TYPE_CHECKING:
    from vllm_hpu_mm.memory.rules import PlanInputs


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

    @property
    def prefill_fit(self) -> int:
        return len(self.prefill_kept)

    @property
    def decode_fit(self) -> int:
        return len(self.decode_kept)


def cuda_capture_sizes(max_num_seqs: int, max_num_batched_tokens: int) -> list[int]:
    """vLLM 0.32's default ``cudagraph_capture_sizes`` for plain decoding (``VllmConfig._set_cudagraph_sizes``):
    1, 2, 4, multiples of 8 below 256, multiples of 16 from 256, up to min(2 x max_num_seqs, 512,
    max_num_batched_tokens), plus ``max_num_seqs`` when it fits."""
    top = min(2 * max_num_seqs, 512, max_num_batched_tokens)
    sizes = {n for n in (1, 2, 4) if n <= top}
    sizes |= set(range(8, min(top + 1, 256), 8)) | set(range(256, top + 1, 16))
    if max_num_seqs <= top:
        sizes.add(max_num_seqs)
    return sorted(sizes)


def _by_cost(buckets: list[TextBucket]) -> tuple[TextBucket, ...]:
    return tuple(sorted(buckets, key=lambda b: (b.cost_bytes, b.batch, b.size, b.context)))


def _dominated(b: TextBucket, others: tuple[TextBucket, ...]) -> bool:
    return any(o != b and o.batch >= b.batch and o.size >= b.size and o.context >= b.context for o in others)


def _kept(buckets: tuple[TextBucket, ...], pool: int, shared: bool) -> tuple[TextBucket, ...]:
    """The graphs to keep within ``pool`` (private pools add up; a shared pool needs about the largest).

    When the maximal shapes (those no other bucket covers) fit, they are kept first, so every shape up to the
    largest still finds a warmed bucket to pad to (coarser, never a compile); the rest fill what is left, smallest
    first. Otherwise the smallest fit, as a runtime that stops capturing at its budget would keep them.
    """
    if shared:
        return tuple(b for b in buckets if b.cost_bytes <= pool)
    maximal = tuple(b for b in buckets if not _dominated(b, buckets))
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
    """The runtime's text graphs for these inputs and which fit ``prefill_pool`` / ``decode_pool``."""
    runtime = i.effective_runtime
    if i.pool_mode is PoolMode.NONE or i.enforce_eager:
        return TextGraphFit((), (), (), (), "no graphs (eager)")
    m, size, tp, block, costs = i.model, i.dtype_size, i.tensor_parallel_size, i.block_size, i.costs
    shared = i.pool_mode is PoolMode.SHARED

    def prefill_cost(batch: int, query: int, context: int) -> int:
        return text_cost.prefill_cost(m, dtype_size=size, tp=tp, block_size=block, batch=batch, query=query,
                                      context_blocks=context, costs=costs)  # fmt: skip

    def decode_cost(batch: int, blocks: int) -> int:
        return text_cost.decode_cost(m, dtype_size=size, tp=tp, block_size=block, batch=batch, blocks=blocks,
                                     costs=costs)  # fmt: skip

    if runtime is Runtime.VLLM_GAUDI:
        cfg = gaudi_warmup.config_from_env(dict(i.runtime_env))
        if cfg.from_file is not None:
            cfg = dataclasses.replace(cfg, file_text=i.bucket_file_text)
        shape = gaudi_warmup.EngineShape(
            max_model_len=i.max_model_len,
            max_num_seqs=i.max_num_seqs,
            max_num_batched_tokens=i.max_num_batched_tokens,
            block_size=block,
            num_kv_blocks=max(num_kv_blocks, 1),
        )
        prefill = [
            TextBucket(bs, query, prefill_cost(bs, query, ctx), ctx)
            for bs, query, ctx in gaudi_warmup.prompt_buckets(cfg, shape)
        ]
        decode = [TextBucket(bs, n, decode_cost(bs, n)) for bs, _, n in gaudi_warmup.decode_buckets(cfg, shape)]
        source = f"vllm-gaudi's {gaudi_warmup.effective_strategy(cfg)} bucketing (modelled on @{VLLM_GAUDI_COMMIT})"
    elif runtime is Runtime.VLLM_CUDA:
        prefill = []
        decode = [
            TextBucket(n, 0, decode_cost(n, 0)) for n in cuda_capture_sizes(i.max_num_seqs, i.max_num_batched_tokens)
        ]
        source = "vLLM's CUDA graph capture sizes (by token count)"
    else:
        seqs, length = i.max_num_seqs, i.max_model_len
        prefill = text_cost.prefill_buckets(m, dtype_size=size, tp=tp, block_size=block, max_num_seqs=seqs,
                                            max_model_len=length, max_num_batched_tokens=i.max_num_batched_tokens,
                                            costs=costs)  # fmt: skip
        decode = text_cost.decode_buckets(m, dtype_size=size, tp=tp, block_size=block, max_num_seqs=seqs,
                                          max_model_len=length, num_kv_blocks=num_kv_blocks, costs=costs)  # fmt: skip
        source = "fork-style exponential grid"
    p, d = _by_cost(prefill), _by_cost(decode)
    return TextGraphFit(p, d, _kept(p, prefill_pool, shared), _kept(d, decode_pool, shared), source)

"""The memory plan's rules: pure functions of frozen :class:`PlanInputs`, one rule per function.

The split follows the Gaudi guide (vllm-gaudi / HabanaAI vllm-fork README):

1. free memory after weights and profiling -> usable = free x ``gpu_memory_utilization``;
2. graphs = usable x ``VLLM_GRAPH_RESERVED_MEM``; KV cache = the rest (-> blocks, sequences at max_model_len);
3. prefill graphs = graphs x ``VLLM_GRAPH_PROMPT_RATIO``; decode graphs = the rest;
4. prefill text = prefill x ``VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO``; prefill vision = the rest. (The guide's
   reading. The older fork's *code* gave the ratio to vision and the rest to text, the other way round.)
5. vision buckets captured ascending while they fit the vision pool (:mod:`.vision_cost`); the rest are skipped;
6. the runtime's text prefill / decode graphs that fit their pools (:mod:`.text_graphs`);
7. verdict and warnings (:mod:`.findings`), each with the smallest change that fixes it (:mod:`.fixes`);
8. vLLM's encoder-cache size under the bucket cap.

The ratios are the *planning* inputs on every runtime; which knobs make a runtime respect each part is the
runtime's business (vllm-gaudi reads only ``VLLM_GRAPH_RESERVED_MEM``; see :mod:`vllm_hpu_mm.runtimes`). Every size
is per card: weights and KV under tensor x pipeline parallelism, the first pipeline stage (which holds the vision
tower) being the fullest card.
"""

from __future__ import annotations

import dataclasses

from vllm_hpu_mm.models.dims import kv_bytes_per_token, vision_parameters, weight_bytes
from vllm_hpu_mm.plan import text_graphs, vision_cost
from vllm_hpu_mm.plan.inputs import PlanInputs
from vllm_hpu_mm.plan.vision_cost import PoolMode
from vllm_hpu_mm.preprocess.align import QWEN_MAX_PIXELS

__all__ = [
    "STOCK_MAX_IMAGE_TOKENS",
    "Split",
    "encoder_cache_tokens",
    "free_after_load",
    "graph_bytes",
    "kv_blocks",
    "kv_cache_bytes",
    "kv_per_token",
    "max_concurrent_seqs",
    "model_weight_bytes",
    "prefill_decode_split",
    "profile_peak_bytes",
    "split_memory",
    "text_graph_fit",
    "text_vision_split",
    "usable_bytes",
    "vision_fit",
]

#: Tokens of the largest image stock Qwen2.5-VL accepts (its processor's max_pixels / 28²).
STOCK_MAX_IMAGE_TOKENS = QWEN_MAX_PIXELS // (28 * 28)


@dataclasses.dataclass(frozen=True)
class Split:
    usable_bytes: int
    graph_bytes: int
    kv_cache_bytes: int
    prefill_graph_bytes: int
    decode_graph_bytes: int
    prefill_text_graph_bytes: int
    prefill_vision_graph_bytes: int


# --- rules -----------------------------------------------------------------------------------------------------


def model_weight_bytes(i: PlanInputs) -> int:
    """Rule 0: weights held by the fullest card: the language model sharded over TP x PP, the vision tower (on the
    first pipeline stage, never quantized) over TP only."""
    cards = i.cards_per_replica
    everything = weight_bytes(i.model, i.dtype_size, cards, i.quantization)
    vision = vision_parameters(i.model.vision) * i.dtype_size
    return everything + vision // i.tensor_parallel_size - vision // cards


def kv_per_token(i: PlanInputs) -> int:
    """Rule 0c: KV bytes per token on one card: heads over TP, layers over PP (the first stage's share, rounded up)."""
    per_token = kv_bytes_per_token(i.model, i.dtype_size, i.tensor_parallel_size)
    layers = i.model.num_layers
    return per_token * -(-layers // i.pipeline_parallel_size) // layers


def profile_peak_bytes(i: PlanInputs) -> int:
    """Rule 0b: the profiling run's activation peak above weights (an estimate): one text layer's activations for
    ``max_num_batched_tokens`` tokens, the sampler's float32 logits for ``max_num_seqs`` sequences, and the vision
    tower's eager peak at the largest bucket. Zero on runtimes that run no profiling forward pass (vllm-gaudi sizes
    its KV cache after ``profile_run(initialize_only=True)``)."""
    if not i.runtime.traits.profiles_forward:
        return 0
    m = i.model
    tokens = i.max_num_batched_tokens
    text = tokens * (4 * m.hidden_size + 2 * m.intermediate_size // i.tensor_parallel_size) * i.dtype_size
    logits = i.max_num_seqs * m.vocab_size * 4
    largest = max(i.buckets) if i.buckets else 0
    vision = vision_cost.eager_peak_bytes(largest, m.vision, i.dtype_size) if largest else 0
    return text + logits + vision


def free_after_load(i: PlanInputs, weights: int, profile: int) -> int:
    """Rule 1a: free memory after weights and profiling (stated, or free before load minus both)."""
    if i.free_after_load_bytes is not None:
        return i.free_after_load_bytes
    return i.free_before_load_bytes - weights - profile


def usable_bytes(free: int, gpu_memory_utilization: float) -> int:
    """Rule 1: usable = free x gpu_memory_utilization (nothing when nothing is free)."""
    return max(0, round(free * gpu_memory_utilization))


def graph_bytes(usable: int, graph_reserved_mem: float, pool_mode: PoolMode, enforce_eager: bool = False) -> int:
    """Rule 2a: graph memory = usable x VLLM_GRAPH_RESERVED_MEM; none without graphs (CPU, --enforce-eager)."""
    return 0 if pool_mode is PoolMode.NONE or enforce_eager else round(usable * graph_reserved_mem)


def kv_cache_bytes(usable: int, graphs: int, explicit: int | None) -> int:
    """Rule 2b: the KV cache gets the rest of usable memory, unless its size is given (--kv-cache-memory-bytes)."""
    return explicit if explicit is not None else usable - graphs


def kv_blocks(kv_bytes: int, per_token: int, block_size: int) -> int:
    """Rule 2c: whole KV blocks in the KV cache."""
    return kv_bytes // (per_token * block_size) if per_token > 0 else 0


def max_concurrent_seqs(blocks: int, block_size: int, max_model_len: int) -> int:
    """Rule 2d: sequences of full ``max_model_len`` the cache holds at once."""
    return blocks // -(-max_model_len // block_size)


def prefill_decode_split(graphs: int, prompt_ratio: float) -> tuple[int, int]:
    """Rule 3: (prefill, decode) = graphs x VLLM_GRAPH_PROMPT_RATIO and the rest."""
    prefill = round(graphs * prompt_ratio)
    return prefill, graphs - prefill


def text_vision_split(prefill: int, multimodal_prompt_ratio: float) -> tuple[int, int]:
    """Rule 4: (text, vision) = prefill x VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO and the rest (the guide's way)."""
    text = round(prefill * multimodal_prompt_ratio)
    return text, prefill - text


def split_memory(i: PlanInputs, free: int) -> Split:
    """Rules 1-4 together."""
    usable = usable_bytes(free, i.gpu_memory_utilization)
    graphs = graph_bytes(usable, i.graph_reserved_mem, i.pool_mode, i.enforce_eager)
    kv = kv_cache_bytes(usable, graphs, i.kv_cache_memory_bytes)
    prefill, decode = prefill_decode_split(graphs, i.graph_prompt_ratio)
    text, vision = text_vision_split(prefill, i.graph_multimodal_prompt_ratio)
    return Split(usable, graphs, kv, prefill, decode, text, vision)


def vision_fit(i: PlanInputs, vision_pool: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Rule 5: buckets captured ascending until the vision pool is exhausted; the rest are skipped."""
    if not i.buckets or i.enforce_eager:
        return (), ()
    return vision_cost.fit_buckets(i.buckets, vision_pool, i.pool_mode, i.model.vision, i.dtype_size, i.costs)


def text_graph_fit(i: PlanInputs, s: Split, blocks: int) -> text_graphs.TextGraphFit:
    """Rule 6: the text prefill and decode graphs the runtime warms, and which of them fit their pools
    (:mod:`.text_graphs`); nothing without graphs."""
    return text_graphs.fit(i, s.prefill_text_graph_bytes, s.decode_graph_bytes, blocks)


def encoder_cache_tokens(i: PlanInputs) -> tuple[int, int]:
    """Rule 8: (ours, stock) size of vLLM's encoder cache, in tokens.

    vLLM 0.32 sizes it as ``max(max_num_batched_tokens, largest tokens per image)``. Capping images at the largest
    bucket (``shrink``) lowers that maximum, so fewer encoded images stay cached than stock vLLM would keep.
    """
    stock = max(i.max_num_batched_tokens, STOCK_MAX_IMAGE_TOKENS)
    if not i.buckets:
        return stock, stock
    return max(i.max_num_batched_tokens, max(i.buckets) // 4), stock

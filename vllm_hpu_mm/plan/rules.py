"""The memory plan's rules: pure functions of frozen :class:`PlanInputs`, one rule per function.

Rules 1-2 are the runtime's own arithmetic (``RuntimeModel.memory``): vllm-gaudi and vllm-fork take usable = free
after load x ``gpu_memory_utilization`` and graphs = usable x ``VLLM_GRAPH_RESERVED_MEM`` (the Gaudi guide's
split); vLLM on CUDA takes ceil(total x utilisation) less the profiled non-KV memory and its CUDA graphs; vLLM CPU
takes the explicit KV size or its share of host memory. The plan feeds each its estimates of the weights, the
profiling run's peak and the graphs, and the KV cache gets what the runtime would give it (-> blocks, sequences at
max_model_len). Then:

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

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.models.dims import (
    ModelDims,
    VisionDims,
    kv_bytes_per_sequence,
    kv_bytes_per_token,
    vision_parameters,
    weight_bytes,
)
from vllm_hpu_mm.plan import text_cost, text_graphs, vision_cost
from vllm_hpu_mm.plan.inputs import PlanInputs
from vllm_hpu_mm.plan.vision_cost import PoolMode
from vllm_hpu_mm.preprocess.align import QWEN_MAX_PIXELS
from vllm_hpu_mm.runtimes.base import MemoryInputs, MemorySplit, ProfileCosts
from vllm_hpu_mm.values import MIB

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
    "memory_split",
    "model_weight_bytes",
    "prefill_decode_split",
    "profile_costs",
    "profile_costs_of",
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
    """Rule 0: weights held by the fullest card: the language model sharded over TP x PP (routed experts over the
    expert-parallel ranks instead, when on), the vision tower (on the first pipeline stage, never quantized) over TP
    only; no tower where the runtime does not build it (:attr:`PlanInputs.vision_tower_built`)."""
    cards = i.cards_per_replica
    ep = i.expert_parallel_size * i.pipeline_parallel_size if i.expert_parallel_size else 0
    model = i.model if i.vision_tower_built else dataclasses.replace(i.model, vision=VisionDims(depth=0))
    everything = weight_bytes(model, i.dtype_size, cards, i.quantization, expert_parallel_size=ep)
    vision = vision_parameters(model.vision) * i.dtype_size
    return everything + vision // i.tensor_parallel_size - vision // cards


def kv_per_token(i: PlanInputs) -> int:
    """Rule 0c: KV bytes per token on one card: heads over TP (latent attention replicated), layers over PP (the
    first stage's share, rounded up)."""
    per_token = kv_bytes_per_token(i.model, i.kv_dtype_size, i.tensor_parallel_size)
    layers = i.model.num_layers
    return per_token * -(-layers // i.pipeline_parallel_size) // layers


def kv_per_sequence(i: PlanInputs) -> int:
    """Rule 0c': what one sequence holds beyond its tokens (sliding-window layers' window, linear-attention state)."""
    return kv_bytes_per_sequence(i.model, i.kv_dtype_size, i.tensor_parallel_size, i.max_model_len) // (
        i.pipeline_parallel_size
    )


def profile_costs(i: PlanInputs) -> ProfileCosts:
    """Rule 0b': a profiling forward pass by part (an estimate): one text layer's activations per token (the residual
    stream and attention in and out, 4 x hidden, and the MLP's gate and up, 2 x intermediate / TP), a sequence's
    float32 logits, the vision tower's eager peak at the largest bucket; with the engine sizes a runtime shapes its
    pass from."""
    largest = max(i.buckets) if i.buckets and i.vision_tower_built else 0  # no tower: vLLM profiles no encoder
    return profile_costs_of(i.model, i.dtype_size, i.tensor_parallel_size, i.engine(1), largest)


def profile_costs_of(
    m: ModelDims, dtype_size: int, tp: int, engine: EngineShape, largest_bucket: int = 0
) -> ProfileCosts:
    """:func:`profile_costs` from the model and the engine's shape."""
    return ProfileCosts(
        token_bytes=(4 * m.hidden_size + 2 * m.intermediate_size // tp) * dtype_size,
        logits_bytes_per_seq=m.vocab_size * 4,
        vision_bytes=vision_cost.eager_peak_bytes(largest_bucket, m.vision, dtype_size) if largest_bucket else 0,
        engine=engine,
        multimodal=m.vision.present,
    )


def profile_peak_bytes(i: PlanInputs) -> int:
    """Rule 0b: a profiling forward pass's activation peak above weights (an estimate) at vLLM's pass shape:
    ``max_num_batched_tokens`` tokens and ``max_num_seqs`` sequences' logits, plus the vision tower (see
    :func:`profile_costs`). Whether the runtime runs such a pass, at which shape, and what of it stays held, is its
    own arithmetic (``RuntimeModel.memory``: vllm-gaudi runs none, vllm-fork shapes its own)."""
    p = profile_costs(i)
    return i.max_num_batched_tokens * p.token_bytes + i.max_num_seqs * p.logits_bytes_per_seq + p.vision_bytes


def graph_estimate_bytes(i: PlanInputs) -> int:
    """Rule 0d: the graphs a runtime profiles before sizing its KV cache (vLLM on CUDA), as vLLM estimates them
    (``gpu_model_runner.profile_cudagraph_memory``): the first capture (the largest size) plus at least 1 MiB for each
    further size, plus the encoder graphs in their own pool. Zero for runtimes that do not."""
    if not i.runtime.traits.profiles_graphs or i.enforce_eager or i.pool_mode is PoolMode.NONE:
        return 0
    sizes = [bs for bs, _ in i.runtime.text_shapes(i.engine(1)).decode]
    m, size, tp, block = i.model, i.dtype_size, i.tensor_parallel_size, i.block_size
    costs = [text_cost.decode_cost(m, dtype_size=size, tp=tp, block_size=block, batch=n, blocks=0, costs=i.costs)
             for n in sizes]  # fmt: skip
    text = max(costs, default=0) + MIB * max(len(costs) - 1, 0)
    vision = (
        vision_cost.capture_bytes(sorted(i.buckets), PoolMode.SHARED, m.vision, size, i.costs)
        if (i.buckets and i.vision_bucketed)
        else 0
    )
    return text + vision


def memory_inputs(i: PlanInputs, free_after_load: int | None = None) -> MemoryInputs:
    """What the runtime's arithmetic reads, from the plan's inputs and estimates (a stated free memory wins)."""
    per_token = kv_per_token(i)
    return MemoryInputs(
        total_bytes=i.total_bytes,
        free_before_load_bytes=i.free_before_load_bytes,
        weight_bytes=model_weight_bytes(i),
        activation_peak_bytes=profile_peak_bytes(i),
        gpu_memory_utilization=i.gpu_memory_utilization,
        graph_reserved_mem=i.graph_reserved_mem,
        graph_estimate_bytes=graph_estimate_bytes(i),
        kv_block_bytes=per_token * i.block_size,
        graphs=i.pool_mode is not PoolMode.NONE and not i.enforce_eager,
        kv_cache_memory_bytes=i.kv_cache_memory_bytes,
        free_after_load_bytes=free_after_load if free_after_load is not None else i.free_after_load_bytes,
        tensor_parallel_size=i.tensor_parallel_size,
        env=i.runtime_env,
        profile=profile_costs(i),
    )


def memory_split(i: PlanInputs, free_after_load: int | None = None) -> MemorySplit:
    """Rules 1-2: the runtime's own split of the card (``RuntimeModel.memory``)."""
    return i.runtime.memory(memory_inputs(i, free_after_load))


def free_after_load(i: PlanInputs) -> int:
    """Rule 1a: free memory after weights (and profiling, where the runtime profiles), as the runtime finds it."""
    return memory_split(i).free_after_load_bytes


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


def usable_kv_blocks(i: PlanInputs, blocks: int) -> int:
    """Rule 2c': the blocks sequences can hold, the ones the runtime's start-up check counts: all but the null block
    a vLLM V1 block pool keeps aside (:attr:`~vllm_hpu_mm.runtimes.base.RuntimeTraits.null_block`)."""
    return usable_blocks(blocks, null_block=i.runtime.traits.null_block)


def usable_blocks(blocks: int, *, null_block: bool) -> int:
    """Rule 2c' on a block count alone (a server's ``--kv-blocks``): ``blocks`` less the null block where kept."""
    return max(blocks - 1, 0) if null_block else blocks


def max_concurrent_seqs(blocks: int, block_size: int, max_model_len: int, per_seq_blocks: int = 0) -> int:
    """Rule 2d: sequences of full ``max_model_len`` the cache holds at once (each also holding ``per_seq_blocks``
    for its sliding-window and linear-attention layers)."""
    return blocks // (-(-max_model_len // block_size) + per_seq_blocks)


def prefill_decode_split(graphs: int, prompt_ratio: float) -> tuple[int, int]:
    """Rule 3: (prefill, decode) = graphs x VLLM_GRAPH_PROMPT_RATIO and the rest."""
    prefill = round(graphs * prompt_ratio)
    return prefill, graphs - prefill


def text_vision_split(prefill: int, multimodal_prompt_ratio: float) -> tuple[int, int]:
    """Rule 4: (text, vision) = prefill x VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO and the rest (the guide's way)."""
    text = round(prefill * multimodal_prompt_ratio)
    return text, prefill - text


def split_memory(i: PlanInputs, free: int | None = None) -> Split:
    """Rules 1-4 together: the runtime's usable / graphs / KV split (from ``free`` after load when given), then the
    graph memory's prefill / decode / text / vision shares. A runtime that profiles its graphs (CUDA) reserves what
    they take: the encoder graphs for vision, the rest for the decoder graphs."""
    ms = memory_split(i, free)
    graphs = ms.graph_bytes
    if i.runtime.traits.profiles_graphs:
        vision = vision_cost.capture_bytes(sorted(i.buckets), PoolMode.SHARED, i.model.vision, i.dtype_size,
                                           i.costs) if i.buckets and i.vision_bucketed and graphs else 0  # fmt: skip
        return Split(ms.usable_bytes, graphs, ms.kv_cache_bytes, vision, graphs - vision, 0, vision)
    prefill, decode = prefill_decode_split(graphs, i.graph_prompt_ratio)
    # No vision graphs (a text model, or a runtime that warms none): the text prefill graphs take the whole share.
    text, vision = text_vision_split(prefill, i.graph_multimodal_prompt_ratio if i.vision_graphs else 1.0)
    return Split(ms.usable_bytes, graphs, ms.kv_cache_bytes, prefill, decode, text, vision)


def vision_fit(i: PlanInputs, vision_pool: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Rule 5: buckets captured ascending until the vision pool is exhausted; the rest are skipped. None on a
    runtime that warms no vision bucket (vllm-fork before 1.22)."""
    if not i.buckets or i.enforce_eager or not i.vision_bucketed or not i.vision_graphs:
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
    if not i.buckets or i.model.vision.family != "qwen2_5_vl" or i.images_refused:
        return stock, stock
    return max(i.max_num_batched_tokens, max(i.buckets) // 4), stock

"""HabanaAI/vllm-fork (habana_main, the runtime the Gaudi guide describes): what it does with your environment.

- Memory: available = free x ``gpu_memory_utilization``; graphs = available x ``VLLM_GRAPH_RESERVED_MEM``; prefill =
  graphs x ``VLLM_GRAPH_PROMPT_RATIO``; and in its *code* vision = prefill x ``VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO``
  (text the rest), the opposite of its guide. It runs a profiling forward pass before sizing the KV cache.
- Graphs: captured ascending while the per-bucket estimate fits each pool; the rest are skipped. Its text buckets
  are the exponential grid below (batch and query powers of two, decode batch x KV-block powers of two).
- What ``serve`` hands it: :mod:`.exports`.
"""

from __future__ import annotations

import dataclasses

from vllm_hpu_mm.runtimes.arithmetic import gaudi_guide_split
from vllm_hpu_mm.runtimes.base import (
    GRAPH_MULTIMODAL_PROMPT_RATIO,
    GRAPH_PROMPT_RATIO,
    GRAPH_RESERVED_MEM,
    SKIP_WARMUP,
    VISION_BUCKETS,
    BatchDefaults,
    DeviceFacts,
    EngineShape,
    MemoryInputs,
    MemorySplit,
    NoBucketList,
    ProfileCosts,
    Runtime,
    RuntimeEntry,
    RuntimeTraits,
    TextShapes,
    VisionBucketing,
)
from vllm_hpu_mm.values import MIB

__all__ = [
    "ENTRY",
    "PROFILE_RESIDUE_BYTES",
    "PROMPT_BS_MAX",
    "TRAITS",
    "VllmFork",
    "decode_grid",
    "prefill_grid",
    "profile_pass",
    "profile_residue_bytes",
]

#: What the fork's profiling run leaves held when its pass cannot be sized (no engine sizes given): the development
#: log's "Model profiling run took 355 MiB" (tests/data/gaudi_logs/dev/vllm_gaudi_perf_tuning_llama31_8b_gaudi2.log).
PROFILE_RESIDUE_BYTES = 355 * MIB

#: The fork's flag for loading weights on the host before they move to the card.
WEIGHTS_LOAD_DEVICE = "--weights-load-device"


def profile_pass(p: ProfileCosts) -> tuple[int, int]:
    """The fork's profiling pass, (batch, tokens per sequence): ``hpu_model_runner.py`` ``profile_run`` @95af7009
    runs ``max_model_len`` tokens for ``min(max_num_seqs, max_num_batched_tokens // max_model_len)`` sequences, one
    for an mrope / multimodal model (its 2024 runner, c64dc8359: the largest prompt bucket, batch x
    ``min(seq max, max_num_batched_tokens // batch)``, the same shape with the bucket maxima as the engine sizes)."""
    if p.multimodal:
        return 1, p.max_model_len
    return max(1, min(p.max_num_seqs, p.max_num_batched_tokens // max(p.max_model_len, 1))), p.max_model_len


def profile_residue_bytes(p: ProfileCosts | None) -> int:
    """What the profiling pass leaves held before free memory is read (``hpu_worker.determine_num_available_blocks``
    reads ``mem_get_info`` after it: "the maximum workspace for all recipes"): one layer's activations over the
    pass's tokens, the sequences' logits and, for a multimodal model, the vision tower's peak. Without engine sizes
    the development log's 355 MiB."""
    if p is None or not p.token_bytes or not p.max_model_len:
        return PROFILE_RESIDUE_BYTES
    batch, length = profile_pass(p)
    return batch * length * p.token_bytes + batch * p.logits_bytes_per_seq + (p.vision_bytes if p.multimodal else 0)


TRAITS = RuntimeTraits(
    backend="hpu",
    reads=frozenset({GRAPH_RESERVED_MEM, GRAPH_PROMPT_RATIO, GRAPH_MULTIMODAL_PROMPT_RATIO}),
    profiles_forward=True,
    fp32_softmax_default=False,
    fp32_softmax_note="vllm-fork reads VLLM_FP32_SOFTMAX (default off)",
    enforced_by="serve exports the ratios",
    multimodal_ratio_is_vision_share=True,
    own_knobs=frozenset({VISION_BUCKETS, SKIP_WARMUP, WEIGHTS_LOAD_DEVICE}),
    # its V0 worker and executor paths and early names; vLLM V0 on Gaudi is the fork's (vllm-gaudi is a V1 plugin)
    log_marks=r"vllm-fork|vllm/worker/hpu_|vllm/executor/hpu_|habana_main|# HPU blocks"
    r"|habana_(?:model_runner|worker|executor)|Initializing a V0 LLM engine|VllmWorkerProcess",
    warmup_era="one_pass",
    # vllm/config.py CacheConfig.gpu_memory_utilization @95af7009 (habana_main, 2025-10-28)
    default_gpu_memory_utilization=0.9,
)

#: Largest prefill batch in a bucket (the fork caps prompt batch buckets well below max_num_seqs).
PROMPT_BS_MAX = 64


def _powers_of_two(limit: int, start: int = 1) -> list[int]:
    out, v = [], start
    while v <= limit:
        out.append(v)
        v *= 2
    return out


def prefill_grid(shape: EngineShape) -> tuple[tuple[int, int, int], ...]:
    """(batch, query length, 0): batch 1, 2, 4, ... up to ``min(max_num_seqs, PROMPT_BS_MAX)`` times query length
    ``block_size``, ``2 x block_size``, ... up to ``min(max_model_len, max_num_batched_tokens)``, keeping
    ``batch x length <= max_num_batched_tokens``."""
    longest = min(shape.max_model_len, shape.max_num_batched_tokens)
    lengths = _powers_of_two(longest, shape.block_size) or [longest]
    return tuple(
        (bs, length, 0)
        for bs in _powers_of_two(min(shape.max_num_seqs, PROMPT_BS_MAX))
        for length in lengths
        if bs * length <= shape.max_num_batched_tokens
    )


def decode_grid(shape: EngineShape) -> tuple[tuple[int, int], ...]:
    """(batch, KV blocks): batch 1, 2, 4, ... up to ``max_num_seqs`` (and ``max_num_seqs`` itself) times blocks 1,
    2, 4, ... up to what that batch holds at ``max_model_len`` (never above the KV cache's blocks)."""
    blocks_per_seq = -(-shape.max_model_len // shape.block_size)
    out = []
    for bs in sorted({*_powers_of_two(shape.max_num_seqs), shape.max_num_seqs}):
        most = min(bs * blocks_per_seq, max(shape.num_kv_blocks, 1))
        out += [(bs, blocks) for blocks in sorted({*_powers_of_two(most), most})]
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class VllmFork(NoBucketList):
    name: Runtime = Runtime.VLLM_FORK
    traits: RuntimeTraits = TRAITS

    def text_shapes(self, shape: EngineShape) -> TextShapes:
        return TextShapes(prefill_grid(shape), decode_grid(shape), "fork-style exponential grid")

    def memory(self, m: MemoryInputs) -> MemorySplit:
        """``worker/hpu_worker.py`` ``determine_num_available_blocks`` (habana_main, as its logs print it): a
        profiling forward pass, then free = the card's free memory; usable = free x utilisation; graphs = usable x
        VLLM_GRAPH_RESERVED_MEM; the KV cache the rest (``--kv-cache-memory-bytes`` is not read)."""
        residue = profile_residue_bytes(m.profile)
        if m.free_after_load_bytes is not None:
            free, profile = m.free_after_load_bytes, 0
        else:
            profile = residue
            free = m.free_before_load_bytes - m.weight_bytes - profile
        usable, graphs, kv = gaudi_guide_split(free, m)
        batch, length = profile_pass(m.profile) if m.profile is not None else (0, 0)
        shape = f" (batch {batch} x {length} tokens)" if batch else ""
        formula = (
            "vllm-fork hpu_worker.determine_num_available_blocks: (total - weights - profiling residue "
            f"{residue / MIB:.0f} MiB{shape}) x gpu_memory_utilization x (1 - VLLM_GRAPH_RESERVED_MEM)"
        )
        return MemorySplit(free, profile, usable, graphs, kv, formula)

    def batch_defaults(self, device: DeviceFacts) -> BatchDefaults:
        """vLLM V0's scheduler defaults, which the fork's HPU engine runs without chunked prefill: 256 sequences
        and max(max_model_len, 2048) tokens (``config.py`` ``SchedulerConfig``, V0)."""
        return BatchDefaults(256, 2048, "vLLM V0 SchedulerConfig as the fork runs it (no chunked prefill)",
                             at_least_max_model_len=True)  # fmt: skip

    def vision_bucketing(self, model_type: str) -> VisionBucketing:
        if "qwen2_5_vl" in model_type:
            return VisionBucketing(True, False, (1600, 3136, 4096, 6400, 7744, 9216, 12544),
                                   "vllm-fork qwen2_5_vl.py: VLLM_MULTIMODAL_BUCKETS, patches per image")  # fmt: skip
        return VisionBucketing(False, False, (), f"vllm-fork buckets only Qwen2.5-VL's tower, not {model_type}'s")


ENTRY = RuntimeEntry(Runtime.VLLM_FORK, TRAITS, lambda env, spelled, version: VllmFork(), "gaudi2",
                     "vllm_hpu_mm.runtimes.vllm_fork.exports")  # fmt: skip

"""Fix searches: the smallest change that makes a failing part of the plan fit, found by re-running the rules."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from vllm_hpu_mm.plan import vision_cost
from vllm_hpu_mm.plan.inputs import PlanInputs
from vllm_hpu_mm.plan.rules import (
    Split,
    free_after_load,
    kv_blocks,
    kv_per_token,
    max_concurrent_seqs,
    model_weight_bytes,
    split_memory,
    usable_bytes,
    usable_kv_blocks,
)
from vllm_hpu_mm.runtimes.base import GRAPH_MULTIMODAL_PROMPT_RATIO, GRAPH_RESERVED_MEM
from vllm_hpu_mm.values import GIB

__all__ = ["Fix", "kv_fix", "tp_fix", "vision_fix"]


@dataclasses.dataclass(frozen=True)
class Fix:
    """The smallest change that fixes a finding, in words; ``setting`` and ``value`` when it names one target."""

    text: str
    setting: str | None = None
    value: float | None = None


def _ceil2(x: float) -> float:
    return math.ceil(x * 100 - 1e-9) / 100


def _floor2(x: float) -> float:
    return math.floor(x * 100 + 1e-9) / 100


def _search_up(start: float, ok: Callable[[float], bool]) -> float | None:
    """Smallest value in 0.01 steps from ``start`` up to 1.0 for which ``ok`` holds."""
    if not start <= 1.0:  # beyond any ratio (also inf / NaN from a vanishing denominator)
        return None
    v = _ceil2(start)
    while v <= 1.0 + 1e-9:
        if ok(v):
            return v
        v = round(v + 0.01, 2)
    return None


def _search_down(start: float, ok: Callable[[float], bool]) -> float | None:
    """Largest value in 0.01 steps from ``start`` down to 0.0 for which ``ok`` holds."""
    if not start >= 0.0:
        return None
    v = _floor2(start)
    while v >= -1e-9:
        if ok(v):
            return v
        v = round(v - 0.01, 2)
    return None


def _holds_one_seq(i: PlanInputs, s: Split) -> bool:
    blocks = usable_kv_blocks(i, kv_blocks(s.kv_cache_bytes, kv_per_token(i), i.block_size))
    return max_concurrent_seqs(blocks, i.block_size, i.max_model_len) >= 1


def _knob(i: PlanInputs, variable: str) -> str:
    return i.runtime.traits.knobs(i.runtime.name, variable)


def vision_fix(i: PlanInputs, free: int) -> Fix:
    """The smallest VLLM_GRAPH_RESERVED_MEM (or else the largest VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO) that captures
    every bucket while the KV cache still holds one sequence."""
    assert i.buckets
    need = vision_cost.capture_bytes(sorted(i.buckets), i.pool_mode, i.model.vision, i.dtype_size, i.costs)
    # a batch-bucketed tower's buckets are images per pass (VLLM_MULTIMODAL_BUCKETS counts images there)
    per_item = i.vision_patches_per_item
    largest = f"{max(i.buckets) // per_item} images per pass" if per_item else str(max(i.buckets))

    def with_reserved(r: float) -> bool:
        s = split_memory(dataclasses.replace(i, graph_reserved_mem=r), free)
        return s.prefill_vision_graph_bytes >= need and _holds_one_seq(i, s)

    usable = usable_bytes(free, i.gpu_memory_utilization)
    share = i.graph_prompt_ratio * (1 - i.graph_multimodal_prompt_ratio)
    if usable and share:
        r = _search_up(max(i.graph_reserved_mem, need / (usable * share)), with_reserved)
        if r is not None:
            text = (
                f"raise {_knob(i, GRAPH_RESERVED_MEM)} to {r:.2f} to capture bucket {largest} (and every smaller one)"
            )
            return Fix(text, GRAPH_RESERVED_MEM, r)

    def with_mm(m: float) -> bool:
        return (
            split_memory(dataclasses.replace(i, graph_multimodal_prompt_ratio=m), free).prefill_vision_graph_bytes
            >= need
        )

    m = _search_down(i.graph_multimodal_prompt_ratio, with_mm)
    if m is not None:
        return Fix(f"lower {_knob(i, GRAPH_MULTIMODAL_PROMPT_RATIO)} to {m:.2f} to capture bucket {largest}",
                   GRAPH_MULTIMODAL_PROMPT_RATIO, m)  # fmt: skip
    return Fix(f"drop buckets above {largest}, or free device memory (lower --max-model-len or raise TP)")


def kv_fix(i: PlanInputs, free: int, s: Split, per_token: int) -> Fix:
    """Ways to fit one ``max_model_len`` sequence: shorter max_model_len, less graph memory, or more utilization."""
    fixes = []
    tokens = usable_kv_blocks(i, kv_blocks(s.kv_cache_bytes, per_token, i.block_size)) * i.block_size
    if tokens >= i.block_size:
        fixes.append(f"lower --max-model-len to {tokens}")
    if i.kv_cache_memory_bytes is not None and i.runtime.traits.kv_cache_memory_bytes == "read":
        # the sequence's blocks and any the runtime's block pool keeps aside
        blocks = -(-i.max_model_len // i.block_size)
        need = (blocks + blocks - usable_kv_blocks(i, blocks)) * i.block_size * per_token
        if i.kv_cache_memory_source:  # the variable (whole GiB) wins over the flag: only it can raise the size
            var = i.kv_cache_memory_source.split("=", 1)[0]
            fixes.append(f"raise {var} to {-(-need // GIB)}")
        else:
            fixes.append(f"raise --kv-cache-memory-bytes to {need}")
        return Fix("; or ".join(fixes))
    r = _search_down(i.graph_reserved_mem, lambda v: _holds_one_seq(i, split_memory(
        dataclasses.replace(i, graph_reserved_mem=v), free)))  # fmt: skip
    if r is not None and r < i.graph_reserved_mem:
        fixes.append(f"lower {_knob(i, GRAPH_RESERVED_MEM)} to {r:.2f}")
    u = _search_up(i.gpu_memory_utilization, lambda v: _holds_one_seq(i, split_memory(
        dataclasses.replace(i, gpu_memory_utilization=v), free)))  # fmt: skip
    if u is not None and u > i.gpu_memory_utilization:
        fixes.append(f"raise --gpu-memory-utilization to {u:.2f}")
    return Fix("; or ".join(fixes) or "raise --tensor-parallel-size or use a device with more memory")


def tp_fix(i: PlanInputs) -> Fix:
    """The smallest power-of-two TP (dividing the attention heads, and the vision tower's, as vLLM requires) at which
    weights and profiling leave memory free."""
    tp = i.tensor_parallel_size
    while tp <= 64:
        tp *= 2
        if i.model.num_heads % tp or (i.model.vision.present and i.model.vision.num_heads % tp):
            continue
        j = dataclasses.replace(i, tensor_parallel_size=tp)
        if free_after_load(j) > 0:
            text = f"raise --tensor-parallel-size to {tp} (weights per device {model_weight_bytes(j) / GIB:.1f} GiB)"
            return Fix(text, "--tensor-parallel-size", tp)
    return Fix("use a device with more memory, or a quantized model")

"""What ``serve`` hands HabanaAI/vllm-fork: all three of the guide's ratios (the multimodal one inverted, since its
code gives it to vision; :class:`~vllm_hpu_mm.runtimes.exporting.Draft` sets them from the traits) and the vision
buckets that fit."""

from __future__ import annotations

from vllm_hpu_mm.runtimes.base import (
    GRAPH_MULTIMODAL_PROMPT_RATIO,
    GRAPH_PROMPT_RATIO,
    GRAPH_RESERVED_MEM,
    ExportContext,
    Exports,
    Part,
)
from vllm_hpu_mm.runtimes.exporting import Draft, export_buckets

__all__ = ["exports"]


def exports(d: Draft, context: ExportContext) -> Exports:
    kv = d.kv_part()
    if d.plan.inputs.enforce_eager:
        return d.eager(kv)
    vision = export_buckets(d)
    vision_ok = bool(vision) or not d.plan.inputs.buckets
    return d.finish({
        "kv_cache": kv,
        "decode_graphs": Part((GRAPH_RESERVED_MEM, GRAPH_PROMPT_RATIO), True),
        "prefill_text_graphs": Part((GRAPH_PROMPT_RATIO, GRAPH_MULTIMODAL_PROMPT_RATIO), True),
        "prefill_vision_graphs": Part((GRAPH_MULTIMODAL_PROMPT_RATIO, *vision), vision_ok),
    })  # fmt: skip

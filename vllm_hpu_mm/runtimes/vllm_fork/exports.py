"""What ``serve`` hands HabanaAI/vllm-fork: only what the release planned for reads (:func:`.traits_for`, read at each
tag). ``VLLM_GRAPH_RESERVED_MEM`` always; ``VLLM_GRAPH_PROMPT_RATIO`` on 1.17 - 1.21.3, whose warm-up captures
while each pool lasts; on 1.22, which reads no ratio and warms every bucket with no memory check, the vision buckets
that fit (``VLLM_MULTIMODAL_BUCKETS``, read from 1.22 only). No release reads ``VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO``:
it is never exported."""

from __future__ import annotations

from vllm_hpu_mm.runtimes.base import (
    GRAPH_PROMPT_RATIO,
    GRAPH_RESERVED_MEM,
    SKIP_WARMUP,
    ExportContext,
    Exports,
    Part,
)
from vllm_hpu_mm.runtimes.exporting import Draft, export_buckets
from vllm_hpu_mm.runtimes.vllm_fork import VllmFork
from vllm_hpu_mm.runtimes.vllm_fork.releases import NEWEST

__all__ = ["exports"]

OVER_POOL = "the buckets' estimated graphs exceed the pools (all are warmed: none is dropped)"


def exports(d: Draft, context: ExportContext) -> Exports:
    plan, i = d.plan, d.plan.inputs
    kv = d.kv_part()
    if i.enforce_eager:
        return d.eager(kv)
    release = i.runtime.bucketing.release if isinstance(i.runtime, VllmFork) else NEWEST
    if release.reads_vision_buckets:
        vision = export_buckets(d)
        vision_part = Part(vision, bool(vision) or not i.buckets)
    else:
        unbounded = bool(i.buckets) and not i.images_refused
        vision_part = Part((), not unbounded, f"{release.name} reads no VLLM_MULTIMODAL_BUCKETS: nothing bounds its "
                           "vision graphs" if unbounded else "")  # fmt: skip
    unwarmed = i.unwarmed  # a skipped warm-up: the release's own rule (traits.unwarmed_graphs)
    if i.runtime.traits.warms_all_graphs:
        # 1.22's warm-up captures every prompt, then every decode bucket, with no ratio and no memory check
        over = any(f.code == "text_graphs_over_pool" for f in plan.findings)
        if unwarmed is not None:
            why = (f"the buckets' estimated graphs exceed the pools ({unwarmed.words}; none is dropped)" if over
                   else f"its own buckets: serve hands it no bucket list; {unwarmed.words}")  # fmt: skip
        else:
            why = OVER_POOL if over else "its own buckets, all warmed: serve hands it no bucket list"
        text_part = Part((), not over, why)
        d.notes.append(
            f"vllm-fork {release.name} reads neither VLLM_GRAPH_PROMPT_RATIO nor "
            "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO: none exported (they only split the plan's graph pools)"
        )
        decode, prefill_text = text_part, text_part
    elif unwarmed is not None and unwarmed.graphs:
        # the pools bound only what warm-up captures: every bucket is now captured on first use, unchecked, in what
        # the KV cache left free (the reserve, hpu_worker.py determine_num_available_blocks reads it all the same)
        why = (f"{unwarmed.words} ({unwarmed.source}): VLLM_GRAPH_PROMPT_RATIO splits nothing and no capture is "
               "checked; VLLM_GRAPH_RESERVED_MEM only sizes the memory the KV cache leaves them all "
               f"(vllm/worker/hpu_worker.py determine_num_available_blocks @{release.commit})")  # fmt: skip
        decode = prefill_text = Part((), False, why)
    elif unwarmed is not None:
        decode = prefill_text = Part((SKIP_WARMUP,), True, f"{unwarmed.words} ({unwarmed.source})")
    else:
        decode = Part((GRAPH_RESERVED_MEM, GRAPH_PROMPT_RATIO), True)
        prefill_text = Part((GRAPH_PROMPT_RATIO,), True)
    if not i.runtime.traits.warms_all_graphs:
        d.notes.append(f"vllm-fork {release.name} reads VLLM_GRAPH_PROMPT_RATIO, not "
                       "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO (its prefill graphs share one pool): the latter is not "
                       "exported")  # fmt: skip
    return d.finish(
        {"kv_cache": kv, "decode_graphs": decode, "prefill_text_graphs": prefill_text,
         "prefill_vision_graphs": vision_part}
    )  # fmt: skip

"""What ``serve`` hands vLLM's CPU build: the planned KV cache as ``--kv-cache-memory-bytes`` (unless given); no
graph part to bound."""

from __future__ import annotations

from vllm_hpu_mm.runtimes.base import ExportContext, Exports, Part
from vllm_hpu_mm.runtimes.exporting import Draft

__all__ = ["exports"]


def exports(d: Draft, context: ExportContext) -> Exports:
    kv_bytes = d.plan.split.kv_cache_bytes
    if not d.flags.kv_cache_memory_bytes_given:
        d.args += ["--kv-cache-memory-bytes", str(kv_bytes)]
        d.notes.append(f"CPU: passing --kv-cache-memory-bytes {kv_bytes} from the plan")
    none = Part((), True, "no graphs on CPU: nothing to bound")
    return d.finish({"kv_cache": Part(("--kv-cache-memory-bytes",), True), "decode_graphs": none,
                     "prefill_text_graphs": none, "prefill_vision_graphs": none})  # fmt: skip

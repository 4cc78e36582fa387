"""What ``serve`` hands vLLM on CUDA: one ``--compilation-config`` with the vision buckets as the encoder's CUDA-graph
token budgets and the decode graphs that fit as ``cudagraph_capture_sizes``; vLLM measures its graphs and gives the
KV cache the rest. A user's own compilation config is left as it is (the fields to merge are printed)."""

from __future__ import annotations

import json

from vllm_hpu_mm.runtimes.base import ExportContext, Exports, Part
from vllm_hpu_mm.runtimes.exporting import Draft
from vllm_hpu_mm.runtimes.vllm_cuda.encoder_graphs import encoder_cudagraph_config

__all__ = ["exports"]

BUCKETS_VAR = "VLLM_MULTIMODAL_BUCKETS"


def exports(d: Draft, context: ExportContext) -> Exports:
    plan, i = d.plan, d.plan.inputs
    kv = Part(("--gpu-memory-utilization",), True, "vLLM measures its graphs and gives the KV cache the rest: at "
              "least the planned share while the graph parts stay within theirs")  # fmt: skip
    if d.flags.kv_cache_memory_bytes_given:  # gpu_worker.py (0.32): the given size, the utilisation not read
        kv = Part(("--kv-cache-memory-bytes",), True, "the KV cache is the size given; --gpu-memory-utilization is "
                  "not read for it")  # fmt: skip
    if i.enforce_eager:
        return d.eager(kv)
    config: dict[str, object] = {}
    budgets: tuple[str, ...] = ()
    vision = bool(i.buckets) and not i.images_refused  # no image runs: no encoder graph
    if vision:
        graph_buckets = plan.vision_buckets_captured or None
        config.update(encoder_cudagraph_config(graph_buckets))
        budgets = ("--compilation-config encoder_cudagraph_token_budgets",) if graph_buckets else ()
    if BUCKETS_VAR in i.runtime_env and not i.images_refused:  # vLLM reads no such variable: say what the plan made
        given = config.get("encoder_cudagraph_token_budgets")
        made = (
            f"the buckets that fit are the encoder CUDA graphs' token budgets {given} (each bucket / 4: "
            "--compilation-config encoder_cudagraph_token_budgets)"
            if given
            else "no encoder CUDA graph"
        )
        what = "the vision bucket list" if i.buckets else "no vision bucketing"
        d.notes.append(f"your {BUCKETS_VAR}={i.runtime_env[BUCKETS_VAR]}: read as {what} (vLLM itself does not "
                       f"read the variable); {made}")  # fmt: skip
    sizes = sorted(b.batch for b in plan.text_graphs.decode_kept)
    if sizes:
        config["cudagraph_capture_sizes"] = sizes
    capture = ("--compilation-config cudagraph_capture_sizes",)
    if d.flags.compilation_config is not None:
        d.notes.append(f"CUDA: you pass your own compilation config; merge these fields into it: {json.dumps(config)}")
        unmerged = "your --compilation-config is used as it is"
        # the plan sized the graphs the user's capture sizes (or cudagraph_mode NONE) ask for: vLLM captures those
        yours = any(k in d.flags.compilation_config for k in ("cudagraph_capture_sizes", "max_cudagraph_capture_size",
                                                              "cudagraph_mode"))  # fmt: skip
        planned = "planned as your --compilation-config sets them" if yours else unmerged
        return d.finish({"kv_cache": kv, "decode_graphs": Part(capture, yours, planned),
                         "prefill_text_graphs": Part(capture, yours, planned),
                         "prefill_vision_graphs": Part(budgets, not vision, unmerged)})  # fmt: skip
    d.args += ["--compilation-config", json.dumps(config, sort_keys=True)]
    d.notes.append("CUDA: vision buckets as vLLM encoder CUDA graphs, decode graphs that fit as capture sizes")
    return d.finish({
        "kv_cache": kv,
        "decode_graphs": Part(capture, True),
        "prefill_text_graphs": Part(capture, True, "vLLM captures by token count; longer prefills run piecewise"),
        "prefill_vision_graphs": Part(budgets, bool(budgets) or not vision),
    })  # fmt: skip

"""Advice for a diagnosis, for the framework and runtime that wrote the log (:mod:`.source`): each fix names only
knobs its writer reads, at most one target value per setting, computed from the log's own numbers where it states
them (the Gaudi memory split is re-planned, and the plan's structured finding, not its wording, gives the value).

- vLLM: engine flags; on Gaudi, the variables the runtime's traits say it reads (``VLLM_GRAPH_RESERVED_MEM``,
  ``VLLM_MULTIMODAL_BUCKETS``, ``VLLM_SKIP_WARMUP``); CUDA-graph capture sizes on CUDA and ROCm only; image caps only
  for a vision model.
- TGI: its launcher's flags (``--max-batch-prefill-tokens``, ``--max-batch-total-tokens``, ``--num-shard``, ...).
- optimum-habana: its scripts' flags (``--batch_size``, ``--max_new_tokens``, ``--use_hpu_graphs``, DeepSpeed).
- Another framework: what holds for any (fewer tokens per step, more devices, a quantized model), no flags.
- Where the failure shows memory held by other processes, utilisation is never raised (it grows the allocation that
  failed); a host-memory kill gets host advice.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable

from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.logs.doctor.decide import ERROR_FOCUS, Diagnosis, SettingValue, clip
from vllm_hpu_mm.logs.doctor.source import OTHER_DISPLAY, LogSource
from vllm_hpu_mm.logs.numbers import GarbledNumber, number
from vllm_hpu_mm.logs.patterns import (
    CPU_NODE_KV,
    DEVICE_OOM,
    FREE_ON_STARTUP,
    LOAD_FAILED,
    PINNED_FALLBACK,
    RESERVE_FAILED,
    SGLANG_POOL,
    strip_prefix,
)
from vllm_hpu_mm.models.catalog import DEFAULT_MODEL
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.fixes import Fix
from vllm_hpu_mm.plan.inputs import build
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.runtimes import registry
from vllm_hpu_mm.runtimes.base import GRAPH_RESERVED_MEM, SKIP_WARMUP, VISION_BUCKETS
from vllm_hpu_mm.values import GIB, MIB, PIXELS_PER_PATCH

__all__ = ["UTILIZATION", "contradictions", "recommend", "settings_of"]

#: vllm-gaudi's default share of usable memory for graphs (``v1/worker/hpu_worker.py``).
GAUDI_DEFAULT_GRAPH_RESERVED_MEM = 0.1
UTILIZATION = "--gpu-memory-utilization"
#: The fork's flag for loading weights on the host first (a knob only runtimes that list it read).
WEIGHTS_LOAD_DEVICE = "--weights-load-device"
#: Other processes holding less than this (GiB) is the driver's own context, not another user of the device.
_OTHERS_GIB = 0.5
_CAP_IMAGES = Fix(
    "cap images: a lower max_pixels (--mm-processor-kwargs '{\"max_pixels\": 1003520}') or fewer images per prompt "
    "(--limit-mm-per-prompt '{\"image\": 1}')"
)
#: TGI's warm-up refusals name the tokens that did not fit (``flash_causal_lm.py`` ``warmup``).
_TGI_TOKENS = re.compile(r"Not enough memory to handle (?P<n>\d+) (?P<kind>prefill|total) tokens")
#: A CUDA graph's capture named by the evidence (TGI's ``cuda_graph_warmup``, torch's ``capture_begin``/``capture_end``
#: under ``torch.cuda.graph``). TGI's warm-up runs its largest prefill first, sizes the KV cache from what is left, and
#: captures its graphs last (flash_causal_lm.py@db931fcf:1507 ``warmup``): a failure the evidence places in the warm-up
#: without a capture in view came in the passes the token budget sizes, where fewer graphs would not help.
_CAPTURE = re.compile(r"cuda_graph_warmup|capture_(?:begin|end)|cuda\.graph\b|CUDA graph", re.IGNORECASE)


def _texts(d: Diagnosis) -> list[str]:
    return [e.text for e in d.evidence]


def _others(s: LogSource) -> float | None:
    """GiB other processes held on the device when it failed, when that is more than the driver's context."""
    o = s.other_processes_gib
    return o if o is not None and o >= _OTHERS_GIB else None


def _free_the_device(s: LogSource) -> list[Fix]:
    o = _others(s)
    if o is None:
        return []
    return [Fix(f"other processes held {o} GiB of this device when it ran out: stop them or give the server a device "
                "of its own (raising the memory share would grow the allocation that failed)")]  # fmt: skip


# --- vLLM on Gaudi ----------------------------------------------------------------------------------------------


def _plan_graph_fix(d: Diagnosis, settings: Settings, model: str, explicit: bool) -> Fix | None:
    """With the Gaudi memory line, re-plan from the log's own numbers: the plan's vision-bucket finding and its fix."""
    g = d.gaudi_memory
    if g is None:
        return None
    args = SizingArgs(
        model=model,
        device=registry.MAIN_JOB_DEVICE,
        free_memory_gib=g.free_gib,
        gpu_memory_utilization=g.gpu_memory_utilization or None,
        graph_reserved_mem=g.graph_reserved_mem,
    )
    note = ""
    try:
        p = plan(build(args, settings))
    except ConfigError:
        if explicit:  # the CLI checked --model already; anything else here is the log's own numbers
            raise
        # The log's model is not resolvable here (a path on another machine): plan the default, and say so.
        p = plan(build(dataclasses.replace(args, model=DEFAULT_MODEL), settings))
        note = f"; the log's model {model!r} is not known here, so the default was planned (pass --model)"
    vision = next((f for f in p.findings if f.code == "vision_buckets_skipped"), None)
    if vision is None:
        return None
    text = f"plan from this log's numbers (free {g.free_gib} GiB, model {p.inputs.model.name}{note}): {vision.fix.text}"
    return Fix(text, vision.fix.setting, vision.fix.value)


def _gaudi_graph_capture(d: Diagnosis, settings: Settings, model: str, explicit: bool, vision: bool) -> list[Fix]:
    s = d.source
    out = []
    planned = _plan_graph_fix(d, settings, model, explicit) if vision else None
    if planned is not None:
        out.append(planned)
    if s.reads(GRAPH_RESERVED_MEM) and (planned is None or planned.setting != GRAPH_RESERVED_MEM):
        current = d.gaudi_memory.graph_reserved_mem if d.gaudi_memory else GAUDI_DEFAULT_GRAPH_RESERVED_MEM
        raised = min(1.0, round(current + 0.1, 2))
        out.append(Fix(f"raise {GRAPH_RESERVED_MEM} from {current} to {raised} (graphs get more of the usable memory, "
                       "the KV cache less)", GRAPH_RESERVED_MEM, raised))  # fmt: skip
    if d.warmup is not None:
        kind, i, n = d.warmup
        buckets = settings.multimodal_buckets
        if (
            vision
            and s.reads(VISION_BUCKETS)
            and "multimodal" in kind.lower()
            and buckets
            and len(buckets) == n
            and i > 1
        ):
            keep = ",".join(map(str, buckets[: i - 1]))
            out.append(Fix(f"failed at warm-up graph {i}/{n} ({kind}): keep the buckets that captured, "
                           f"{VISION_BUCKETS}={keep}"))  # fmt: skip
        elif "multimodal" in kind.lower() and s.reads(VISION_BUCKETS):
            # the vision tower's warm-up walks the vision buckets (and, from v0.26.0, VLLM_MULTIMODAL_RESOLUTIONS):
            # the text limits shape none of its graphs (vllm-gaudi 091bbadd hpu_model_runner.py
            # warmup_multimodal_graphs)
            out.append(Fix(f"failed at warm-up graph {i}/{n} ({kind}): fewer or smaller vision buckets from there on "
                           f"({VISION_BUCKETS} without its largest; --max-num-seqs and --max-model-len shape no vision "
                           "graph)"))  # fmt: skip
        else:
            out.append(Fix(f"failed at warm-up graph {i}/{n} ({kind}): fewer buckets from there on (a lower "
                           "--max-num-seqs or --max-model-len)"))  # fmt: skip
    if s.reads(SKIP_WARMUP):
        out.append(Fix(f"{SKIP_WARMUP}=true starts without capturing (graphs are then built on first use)"))
    return out


# --- vLLM, any accelerator ---------------------------------------------------------------------------------------


def _vllm_kv_cache(d: Diagnosis) -> list[Fix]:
    s = d.source
    out = _free_the_device(s)
    if d.kv_fit is not None:
        asked, holds = d.kv_fit
        out.append(Fix(f"lower --max-model-len from {asked} to {holds} (what the KV cache holds)", "--max-model-len",
                       holds))  # fmt: skip
    g = d.gaudi_memory
    if s.accelerator == "cpu":
        out.append(Fix("on CPU, give --kv-cache-memory-bytes at least max_model_len x KV bytes per token (see "
                       "`vllm-hpu-mm memory plan --json`: kv_bytes_per_token)"))  # fmt: skip
        return out
    allocation_failed = d.kv_fit is None and any(DEVICE_OOM.search(e.text) for e in d.evidence)
    if allocation_failed:
        # the device refused the KV cache's own allocation (initialize_kv_cache): the cache vLLM sized was larger
        # than what was free by then, so what frees memory helps and a larger cache (more utilisation, a smaller
        # graph reserve) fails the same way
        now = g.gpu_memory_utilization if g is not None else None
        lowered = round(now - 0.05, 2) if now else None
        out.append(Fix(f"lower {UTILIZATION}{f' from {now} to {lowered}' if lowered else ''}: the KV cache's "
                       "allocation failed, so it must ask for less than the device had free",
                       UTILIZATION if lowered else None, lowered))  # fmt: skip
        out.append(Fix("or cap the KV cache: --num-gpu-blocks-override below the log's block count"))
    elif _others(s) is None:
        if g is not None and g.gpu_memory_utilization:
            raised = min(0.98, round(g.gpu_memory_utilization + 0.05, 2))
            out.append(Fix(f"raise {UTILIZATION} from {g.gpu_memory_utilization} to {raised} so the KV cache gets "
                           "more", UTILIZATION, raised))  # fmt: skip
        else:
            out.append(Fix(f"raise {UTILIZATION} (e.g. to 0.95) so the KV cache gets more"))
    if s.reads(GRAPH_RESERVED_MEM) and not allocation_failed:
        current = g.graph_reserved_mem if g else GAUDI_DEFAULT_GRAPH_RESERVED_MEM
        lowered = max(0.0, round(current - 0.05, 2))
        split = f" (the log's split: {g.kv_gib} GiB KV of {g.usable_gib} GiB usable)" if g else ""
        out.append(Fix(f"lower {GRAPH_RESERVED_MEM} from {current} to {lowered} to move graph memory to the KV "
                       f"cache{split}", GRAPH_RESERVED_MEM, lowered))  # fmt: skip
    out.append(Fix("raise --tensor-parallel-size or use a quantized model: the KV cache gets what the weights free"))
    return out


def _refused_share(d: Diagnosis) -> Fix | None:
    """vLLM's refusal to start on a device with less free memory than its share asks: the most the share can be."""
    m = next((m for line in _texts(d) for m in [FREE_ON_STARTUP.search(line)] if m), None)
    if m is None:
        return None
    try:
        free, total, util = number(m["free"]), number(m["total"]), number(m["util"])
    except GarbledNumber:
        return None
    if not 0 < free < total:
        return None
    most = math.floor(free / total * 100) / 100  # rounded down: the share must fit in what is free
    if m["host"]:
        # the CPU worker checks the share only when no KV cache size is given (cpu_worker.py 0.32)
        return Fix(f"vLLM refused to start: the host's memory node had {free:g} of {total:g} GiB available, less "
                   f"than {UTILIZATION} {util:g} asks for; stop what else holds the host's memory, set {UTILIZATION} "
                   f"{most:g} or lower (what is available, as a share of the node), or give --kv-cache-memory-bytes "
                   "(the check is skipped then)", UTILIZATION, most)  # fmt: skip
    return Fix(f"vLLM refused to start: the device had {free:g} of {total:g} GiB free, less than {UTILIZATION} "
               f"{util:g} asks for; stop what else holds the device, or set {UTILIZATION} {most:g} or lower (what is "
               "free, as a share of the device)", UTILIZATION, most)  # fmt: skip


def _vllm_startup(d: Diagnosis, vision: bool) -> list[Fix]:
    s = d.source
    refused = _refused_share(d)
    if refused is not None:  # nothing was loaded: the share itself is the fix
        return [refused]
    out = [
        *_free_the_device(s),
        Fix("raise --tensor-parallel-size if the weights alone nearly fill the device (or use a quantized model)"),
        Fix("lower --max-num-batched-tokens and --max-num-seqs: the profiling run's peak grows with them"),
    ]
    if vision:
        out.append(_CAP_IMAGES)
    if s.reads(WEIGHTS_LOAD_DEVICE):
        out.append(Fix(f"load the weights on the host first ({WEIGHTS_LOAD_DEVICE} cpu) when the card fails while the "
                       "weights move to it"))  # fmt: skip
    return out


def _vllm_graph_capture(d: Diagnosis, settings: Settings, model: str, explicit: bool, vision: bool) -> list[Fix]:
    s = d.source
    if s.accelerator == "hpu":
        return _gaudi_graph_capture(d, settings, model, explicit, vision)
    if s.accelerator == "cpu":
        return [Fix("--enforce-eager (no torch.compile warm-up) or a lower --max-num-batched-tokens")]
    if s.accelerator in (None, "cuda", "rocm"):
        out = [Fix("fewer capture sizes (--compilation-config '{\"cudagraph_capture_sizes\": [1,2,4,8]}') or a lower "
                   "--max-num-seqs")]  # fmt: skip
        if _others(s) is None:
            out.append(Fix(f"a lower {UTILIZATION} leaves the graphs more room"))
        else:
            out = [*_free_the_device(s), *out]
        out.append(Fix("--enforce-eager starts without CUDA graphs"))
        return out
    return [Fix(f"a lower --max-num-seqs and --max-num-batched-tokens: fewer shapes to compile on {s.accelerator}"),
            Fix("--enforce-eager starts without graphs")]  # fmt: skip


def _vllm_runtime(d: Diagnosis, settings: Settings, vision: bool) -> list[Fix]:
    s = d.source
    g = d.gaudi_memory
    buckets = settings.multimodal_buckets
    out = _free_the_device(s)
    if vision and s.reads(VISION_BUCKETS) and buckets and len(buckets) > 1:
        smaller = buckets[:-1]
        # 14 x 14 pixels per patch: images up to the new largest bucket need no larger graph.
        out.append(Fix(f"drop the largest vision bucket: {VISION_BUCKETS}={','.join(map(str, smaller))} with "
                       f"--mm-processor-kwargs '{{\"max_pixels\": {smaller[-1] * PIXELS_PER_PATCH}}}' so no image "
                       f"needs {buckets[-1]} patches"))  # fmt: skip
    elif vision:
        out.append(Fix("a lower max_pixels (--mm-processor-kwargs '{\"max_pixels\": 1003520}') so large images cost "
                       "less"))  # fmt: skip
    tokens = "image tokens" if vision else "tokens"
    out.append(Fix(f"lower --max-num-batched-tokens and --max-num-seqs so one step holds fewer {tokens}"))
    if g is not None:
        lowered = round(g.gpu_memory_utilization - 0.05, 2)
        out.append(Fix(f"lower {UTILIZATION} from {g.gpu_memory_utilization} to {lowered} to leave run-time headroom",
                       UTILIZATION, lowered))  # fmt: skip
    elif s.accelerator != "cpu":
        out.append(Fix(f"lower {UTILIZATION} to leave run-time headroom"))
    return out


# --- other frameworks -------------------------------------------------------------------------------------------


def _tgi(d: Diagnosis) -> list[Fix]:
    s = d.source
    m = next((m for line in _texts(d) for m in [_TGI_TOKENS.search(line)] if m), None)
    out = _free_the_device(s)
    if m is not None and m["kind"] == "total":
        out.append(Fix(f"lower --max-batch-total-tokens below {m['n']} (the tokens the KV cache must hold), or "
                       "--max-batch-prefill-tokens"))  # fmt: skip
    elif m is not None:
        out.append(Fix(f"lower --max-batch-prefill-tokens below {m['n']} (TGI's warm-up prefills that many tokens) "
                       "and --max-input-tokens with it"))  # fmt: skip
    elif d.stage == "runtime":
        out.append(Fix("lower --max-batch-total-tokens and --max-concurrent-requests so a batch holds fewer tokens"))
    else:
        out.append(Fix("lower --max-batch-prefill-tokens and --max-total-tokens: TGI's warm-up runs the largest "
                       "prefill they allow"))  # fmt: skip
    if s.accelerator == "hpu":
        out.append(Fix("fewer warm-up shapes: lower --max-batch-size (tgi-gaudi warms every batch bucket up to it)"))
    elif d.stage == "graph_capture" and _captured(d) and s.accelerator in (None, "cuda", "rocm"):
        out.append(Fix("fewer CUDA graphs: --cuda-graphs 1,2,4 (or 0 to disable them)"))
        # flash_causal_lm.warmup sizes the KV cache to the memory fraction before it captures the graphs
        out.append(Fix("or a lower --cuda-memory-fraction: TGI fills that share with its KV cache before it captures "
                       "the graphs, so a smaller share leaves them room"))  # fmt: skip
    out.append(Fix("shard over more devices (--num-shard) or load a quantized model (--quantize)"))
    return out


def _captured(d: Diagnosis) -> bool:
    """Whether TGI's warm-up failed capturing a CUDA graph (:data:`_CAPTURE` in its evidence), not in its prefill or
    its refusal of the token budget (:data:`_TGI_TOKENS`), which the budget advice answers."""
    texts = _texts(d)
    return any(_CAPTURE.search(t) for t in texts) and not any(_TGI_TOKENS.search(t) for t in texts)


def _optimum_habana(d: Diagnosis) -> list[Fix]:
    out = []
    if d.stage == "startup":
        out.append(Fix("shard the model over more cards with DeepSpeed (python gaudi_spawn.py --use_deepspeed "
                       "--world_size N run_generation.py ...)"))  # fmt: skip
        out.append(Fix("load in bf16 (--bf16) or quantize to fp8 (QUANT_CONFIG with the measurement files)"))
    else:
        out.append(Fix("lower --batch_size, --max_input_tokens and --max_new_tokens: the KV cache and activations "
                       "grow with them"))  # fmt: skip
        out.append(Fix("--bucket_size with --bucket_internal (with --reuse_cache): fewer and smaller graph shapes"))
        if d.stage == "graph_capture":
            out.append(Fix("drop --use_hpu_graphs: run without HPU graphs"))
        out.append(Fix("shard over more cards with DeepSpeed (gaudi_spawn.py --use_deepspeed --world_size N)"))
    return out


#: Other frameworks' own memory settings, by the name :class:`~.source.LogSource` gives them, main one first (their
#: documentation: MindIE Service's config.json, SGLang's and LMDeploy's server flags, llama.cpp's and Ollama's
#: options, TensorRT-LLM's KV-cache config).
OTHER_KNOBS: dict[str, tuple[str, ...]] = {
    "mindie": ("maxPrefillTokens", "maxBatchSize", "maxSeqLen", "maxInputTokenLen", "npuMemSize",
               "maxPrefillBatchSize"),
    # FastChat's model_worker (model/model_adapter.py add_model_args, model_worker.py)
    "fastchat": ("--max-gpu-memory", "--limit-worker-concurrency"),
    "sglang": ("--mem-fraction-static", "--chunked-prefill-size", "--max-running-requests", "--max-total-tokens",
               "--cuda-graph-max-bs"),
    "lmdeploy": ("--cache-max-entry-count", "--max-batch-size", "--session-len"),
    "llama.cpp": ("--n-gpu-layers", "--ctx-size", "--batch-size", "--ubatch-size"),
    "ollama": ("num_ctx", "OLLAMA_NUM_PARALLEL", "num_gpu"),
    "tensorrt_llm": ("free_gpu_memory_fraction", "max_batch_size", "max_num_tokens"),
    # MLC-LLM's settings of the model it runs: keys of its mlc-chat-config.json, which ``mlc_llm serve`` and ``chat``
    # override at run time as keys too ("--overrides 'context_window_size=...;prefill_chunk_size=...'",
    # python/mlc_llm/cli/serve.py@01ced331 ``EngineConfigOverride``), as the older Python API's ChatConfig does; only
    # ``mlc_llm gen_config``, which writes that file ahead of time, takes them as flags. Its own refusal names
    # gpu_memory_utilization (cpp/serve/config.cc), which then leads. Aphrodite's engine arguments
    # (aphrodite/engine/args_tools.py); TabbyAPI's model settings for ExLlamaV2 (config_sample.yml)
    "mlc-llm": ("context_window_size", "prefill_chunk_size", "gpu_memory_utilization"),
    "aphrodite": ("--gpu-memory-utilization", "--max-model-len", "--max-num-seqs"),
    "exllamav2": ("cache_size", "max_seq_len", "chunk_size"),
    # ms-swift's inference arguments (swift/llm/utils/argument.py InferArguments)
    "ms-swift": ("--device_map_config_path", "--quantization_bit"),
    # text-generation-webui's generation parameters, which its API requests and its interface set per request
    # (modules/shared.py settings): the tokens generated and the context kept of the prompt
    "text-generation-webui": ("max_new_tokens", "truncation_length"),
}  # fmt: skip


#: What another framework's failure at one stage asks for: a KV-cache refusal (the cache is sized from what its memory
#: share leaves, so the share is raised, not lowered: MLC-LLM's message itself, cpp/serve/config.cc; Aphrodite's
#: engine as vLLM's).
_OTHER_AT_STAGE = {
    (
        "mlc-llm",
        "kv_cache",
    ): "its weights and temporary buffers leave nothing of gpu_memory_utilization for the KV cache: raise "
    "gpu_memory_utilization, lower prefill_chunk_size or context_window_size (keys of mlc-chat-config.json, or of "
    "mlc_llm serve's overrides), raise tensor_parallel_shards or load a quantized model",
    ("aphrodite", "kv_cache"): "its memory share left nothing for the KV cache: raise --gpu-memory-utilization or "
    "lower --max-model-len",
    ("ms-swift", "startup"): "the weights did not fit while they loaded (its PyTorch backend loads them through "
    "transformers' device map): spread them over every device with --device_map_config_path, or load them quantized "
    "(--quantization_bit)",
}
#: llama.cpp's compute-graph reservation at its largest micro-batch (src/llama-context.cpp), read from the failure's
#: own lines (:data:`~vllm_hpu_mm.logs.patterns.RESERVE_FAILED`).
_LLAMA_RESERVE = ("it could not reserve its compute graph's buffers for the largest micro-batch: lower --ubatch-size "
                  "(and --batch-size) or --ctx-size, or offload fewer layers (--n-gpu-layers)")  # fmt: skip
#: The same reservation for a program that runs llama.cpp, in that program's own settings: Ollama's runner options, set
#: in a Modelfile (``PARAMETER num_ctx 4096``) or a request's ``options`` (api/types.go@00a4cb26 ``Runner``: num_ctx,
#: num_batch, num_gpu, the layers sent to the GPU); where only the library's lines name it, by the library's own
#: parameters (include/llama.h ``llama_context_params`` n_ctx, n_batch, n_ubatch; ``llama_model_params``
#: n_gpu_layers), which each program sets under its own name.
_RESERVE_ON_LLAMA_CPP = {
    "ollama": "it could not reserve llama.cpp's compute buffers for its largest batch: lower num_batch or num_ctx, or "
    "send fewer layers to the GPU (num_gpu), in the model's Modelfile (PARAMETER) or the request's options",
    "text-generation-webui": "it could not reserve llama.cpp's compute buffers for its largest batch: lower its "
    "llama.cpp loader's n_batch or n_ctx, or offload fewer layers (n_gpu_layers)",
}
#: llama.cpp's library lines alone: the program that ran it is not named, so its settings are named by the library's
#: parameters and by Ollama's options (the programs most often found running it).
_LIBRARY_ONLY = ("it holds only llama.cpp's library lines, not the program that ran it (llama.cpp's own server "
                 "or CLI, or a program built on it: Ollama, LM Studio, llama-cpp-python, text-generation-webui), so "
                 "that program's settings are not known here: set these in it under its own names (Ollama: num_batch, "
                 "num_ctx, num_gpu)")  # fmt: skip
_LIBRARY_RESERVE = ("it could not reserve its compute graph's buffers for the largest micro-batch: lower the "
                    "micro-batch and batch (the library's n_ubatch, n_batch) or the context (n_ctx), or offload fewer "
                    "layers (n_gpu_layers)")  # fmt: skip
_LIBRARY_KNOBS = ("n_gpu_layers", "n_ctx", "n_batch")
#: SGLang's KV pool with no slot left for the batch its scheduler built
#: (:data:`~vllm_hpu_mm.logs.patterns.SGLANG_POOL`): the pool is what --mem-fraction-static leaves after the weights,
#: so a smaller share makes it worse.
_SGLANG_POOL_FULL = ("its KV pool had no slot left for the batch of requests it scheduled: lower "
                     "--max-running-requests (fewer requests at once) or --chunked-prefill-size, or raise "
                     "--mem-fraction-static for a larger pool (lowering it shrinks the pool)")  # fmt: skip
#: TensorRT-LLM's model instance that could not be created (:data:`~vllm_hpu_mm.logs.patterns.LOAD_FAILED`): a
#: TensorRT engine's runtime buffers are sized when it is built (trtllm-build's max_batch_size, max_num_tokens).
_TRT_INSTANCE = ("its engine and the runtime buffers sized when it was built did not fit as the model instance was "
                 "created: rebuild the engine with a lower max_batch_size or max_num_tokens, or over more GPUs "
                 "(tensor parallelism)")  # fmt: skip
#: Where a hosted vLLM engine reads its arguments: Triton's vLLM backend from the model's ``model.json``, Ray Serve
#: LLM from the deployment's ``engine_kwargs``.
_HOSTED = {
    "triton": "under Triton Inference Server the vLLM backend reads these engine arguments from the model's "
    "model.json (underscores: gpu_memory_utilization), not from a command line",
    "ray serve": "under Ray Serve these are the deployment's engine_kwargs (underscores: gpu_memory_utilization)",
    # FastChat's vLLM worker passes vLLM's own flags through (fastchat/serve/vllm_worker.py:
    # AsyncEngineArgs.add_cli_args); its transformers worker has its own (model_worker.py, model_adapter.py
    # add_model_args)
    "fastchat": "under FastChat the vLLM worker (fastchat.serve.vllm_worker) takes these flags as they are; its "
    "model_worker has its own: --max-gpu-memory, --num-gpus, --load-8bit, --limit-worker-concurrency",
}


#: Hosts that take the engine's options as keys, not as its command-line flags: Xinference passes extra launch
#: options (``xinference launch ... --gpu_memory_utilization 0.9``, the web UI's additional parameters) to the engine
#: under the engine's own keyword names; LocalAI reads a model's YAML config (core/config: ``gpu_layers``,
#: ``context_size``, ``batch``). Each flag of advice is named by the host's key (:func:`_in_host_terms`).
_HOST_NOTES = {
    "xinference": "Xinference passes these to the engine as the model's launch options, by the engine's keyword names "
    "(underscores)",
    "localai": "LocalAI reads these from the model's YAML config; unload the models loaded before this one, which hold "
    "their memory",
    # OpenLLM builds the engine itself from its own start options (openllm/_runners.py: AsyncEngineArgs, then
    # AsyncLLMEngine.from_engine_args, as the log's own frames show); which of vLLM's arguments it exposes is not
    # known here
    "openllm": "OpenLLM builds the vLLM engine itself, so vLLM's command line does not reach it: these are the "
    "engine's arguments by their keyword names (underscores); set them through OpenLLM's own start options or "
    "configuration "
    "where it exposes them (not known here: its start command's help lists them)",
}
#: The host's key for a flag where it is not the flag's name with underscores.
_HOST_KEYS = {"localai": {"--n-gpu-layers": "gpu_layers", "--gpu-layers": "gpu_layers", "--ctx-size": "context_size",
                          "--batch-size": "batch"}}  # fmt: skip
#: A flag in advice text.
_FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*[a-z0-9])")


def _in_host_terms(host: str, out: list[Fix]) -> list[Fix]:
    """``out`` with each flag named by the key ``host`` reads it under (:data:`_HOST_KEYS`), and where they go."""
    keys = _HOST_KEYS.get(host, {})

    def key(m: re.Match[str]) -> str:
        return keys.get(m.group(0), m.group(1).replace("-", "_"))

    texts = [dataclasses.replace(f, text=_FLAG.sub(key, f.text)) for f in out]
    return [*texts, Fix(f"under {OTHER_DISPLAY[host]}: {_HOST_NOTES[host]}")]


def _other(d: Diagnosis) -> list[Fix]:
    key = d.source.name
    engine = OTHER_DISPLAY.get(key, key) or "a framework this doctor has no settings for"
    who = engine
    if d.source.host in _HOST_NOTES:  # the server that runs it names it, and takes its settings (:func:`_hosted`)
        who = f"{OTHER_DISPLAY[d.source.host]} running {engine}"
    library = d.source.library_only
    knobs = _LIBRARY_KNOBS if library else OTHER_KNOBS.get(key, ())
    named = [k for k in knobs if any(k in line for line in _texts(d))]  # the knob the log itself names leads
    own = [*named, *(k for k in knobs if k not in named)][:3]
    lead = f"the log is from {who}, not a vLLM runtime: vLLM's flags do not apply"
    if not key:
        lead = (
            "the log names no framework and holds no vLLM line, so its writer's own settings are not known here "
            "(diagnose the server's whole log, from its first line, for them)"
        )
    if key == "sglang" and d.stage == "kv_cache":
        # SGLang's static share holds the weights and the KV pool: its refusal asks for more of it (model_runner.py)
        return [*_free_the_device(d.source),
                Fix(f"{lead}; its memory pool left no room for the KV cache: raise --mem-fraction-static (SGLang's "
                    "static share holds the weights and the KV pool), or shard over more devices (--tp-size) or load "
                    "a quantized model (--quantization)")]  # fmt: skip
    at_stage = _OTHER_AT_STAGE.get((key, d.stage))
    if library:
        lead = f"the log is from {engine}'s library, not a vLLM runtime: vLLM's flags do not apply; {_LIBRARY_ONLY}"
    reserve = any(RESERVE_FAILED.search(line) for line in _texts(d))
    if reserve and key == "llama.cpp":
        at_stage = _LIBRARY_RESERVE if library else _LLAMA_RESERVE
    elif reserve and key in _RESERVE_ON_LLAMA_CPP:
        at_stage = _RESERVE_ON_LLAMA_CPP[key]
    if key == "sglang" and any(SGLANG_POOL.search(line) for line in _texts(d)):
        at_stage = _SGLANG_POOL_FULL
    if key == "tensorrt_llm" and d.stage == "startup" and any(LOAD_FAILED.search(line) for line in _texts(d)):
        at_stage = _TRT_INSTANCE
    if at_stage is not None:
        return [*_free_the_device(d.source), Fix(f"{lead}; {at_stage}")]
    if own:
        said = f" (the log names {named[0]})" if named else ""
        owner = engine if who == engine else "the model"
        return [*_free_the_device(d.source),
                Fix(f"{lead}; lower {owner}'s own {', '.join(own)}{said}: fewer tokens per step or in the cache"),
                Fix("or more devices (tensor parallelism), or a quantized model")]  # fmt: skip
    return [*_free_the_device(d.source),
            Fix(f"{lead}; fewer tokens per step (batch size, sequence length), more devices (tensor parallelism) or "
                "a quantized model; its own settings are not known here")]  # fmt: skip


# --- host memory --------------------------------------------------------------------------------------------------

_RAY = re.compile(r"\bRay\b|\bray\b|raylet|memory monitor")


def _cpu_node_kv(d: Diagnosis) -> list[Fix] | None:
    """vLLM CPU's KV cache larger than its memory node had available (cpu_worker.py 0.32 determine_available_memory):
    a given --kv-cache-memory-bytes at most what was available, else one given instead of the utilisation's share."""
    m = next((m for line in _texts(d) for m in [CPU_NODE_KV.search(line)] if m), None)
    if m is None:
        return None
    try:
        free, want = number(m["free"]), number(m["want"])
    except GarbledNumber:
        return None
    most = int(free * GIB) // MIB * MIB  # rounded down to whole MiB: the cache must fit what was available
    node = f"node {m['node']} had {free:g} GiB available"
    if m["asked"] is None:  # the size was given: the same flag, smaller
        text = (f"lower --kv-cache-memory-bytes from {want:g} GiB to {most} ({most / GIB:.2f} GiB) or less: {node}; "
                "or free host memory (other processes, VLLM_CPU_KVCACHE_SPACE)")  # fmt: skip
    else:  # the utilisation's share less what the process holds asked more than was available
        text = (f"give --kv-cache-memory-bytes {most} ({most / GIB:.2f} GiB) or less instead of the share "
                f"--gpu-memory-utilization asked ({want:g} GiB for the KV cache): {node}; or free host "
                "memory")  # fmt: skip
    return [Fix(text, "--kv-cache-memory-bytes", most)]


def _host(d: Diagnosis, vision: bool) -> list[Fix]:
    s = d.source
    refused = _refused_share(d)
    if refused is not None:  # vLLM CPU's start-up check of its share of the host: nothing was loaded
        return [refused]
    node_kv = _cpu_node_kv(d)
    if node_kv is not None:  # vLLM CPU's KV cache above its node's available memory: the cache's size is the fix
        return node_kv
    where = {"startup": " while the model loads", "runtime": " while serving"}.get(d.stage, "")
    out = [Fix(f"the host ran out of memory{where}, not the accelerator: give the process more RAM (container "
               "limit, fewer other processes) or free memory for it")]  # fmt: skip
    ray = any(_RAY.search(line) for line in _texts(d))
    pinned = next(filter(None, map(PINNED_FALLBACK.search, _texts(d))), None)
    if pinned is not None:  # a buffer refused, no process killed: nothing for the kernel log to show
        return [*out, _pinned_host(s, pinned["size"])]
    if not ray:  # a process the kernel killed leaves its reason in the kernel log, not in its own
        out.append(Fix("confirm it in the kernel log: `dmesg -T | grep -iE 'out of memory|killed process'` (or "
                       "`journalctl -k`) names the OOM killer's victim and its memory; in a container, a kill at the "
                       "cgroup limit shows there too (memory.events oom_kill)"))  # fmt: skip
    if ray:
        out.append(
            Fix(
                "Ray's memory monitor killed the worker at its threshold (RAY_memory_usage_threshold, 0.95 of "
                "host memory by default): free host memory, or raise the threshold if the host has room"
            )
        )
    if s.framework == "vllm":
        if d.stage == "startup":
            out.append(Fix("load fewer weight shards at once (--max-parallel-loading-workers 1) and drop "
                           "--cpu-offload-gb"))  # fmt: skip
        elif vision:
            out.append(Fix("a smaller multimodal processor cache (--mm-processor-cache-gb, host memory) and fewer "
                           "concurrent requests (--max-num-seqs)"))  # fmt: skip
        else:
            out.append(Fix("fewer concurrent requests (--max-num-seqs) and API server processes"))
    elif s.framework == "optimum-habana" and d.stage == "startup":
        out.append(Fix("load with DeepSpeed (gaudi_spawn.py --use_deepspeed): each process then builds the model on "
                       "the meta device instead of holding all its weights in host memory"))  # fmt: skip
    return out


#: Fewer of the weights in host memory, in the settings of the program that ran llama.cpp: Ollama's runner options
#: (num_gpu, the layers sent to the GPU: api/types.go ``Runner``) and its server's limit on the models it keeps loaded
#: at once (OLLAMA_MAX_LOADED_MODELS, envconfig/config.go), llama.cpp's own flag, and ggml's switch that skips pinned
#: host buffers (GGML_CUDA_NO_PINNED, read by ggml-cuda.cu ``ggml_cuda_host_malloc``, which returns none then: the
#: buffer is pageable from the start). Where the program is not named, the library's parameter.
_FEWER_ON_HOST = {
    "ollama": "send more layers to the GPU where it has room (num_gpu, in the model's Modelfile PARAMETER or the "
    "request's options) or load a smaller quantization, and keep other models from holding host memory beside it "
    "(OLLAMA_MAX_LOADED_MODELS=1)",
    "llama.cpp": "offload more layers to the GPU where it has room (--n-gpu-layers) or load a smaller quantization; "
    "GGML_CUDA_NO_PINNED=1 has ggml make the host buffer pageable from the start",
}
_FEWER_ON_HOST_LIBRARY = ("offload more layers to the GPU where it has room (the library's n_gpu_layers, under the "
                          "running program's own name for it) or load a smaller quantization")  # fmt: skip


def _pinned_host(s: LogSource, size: str) -> Fix:
    """The advice for a refused pinned host buffer the log shows nothing going on after
    (:data:`~vllm_hpu_mm.logs.patterns.PINNED_FALLBACK`): the host had no room for what the runtime keeps on it, and
    the line is the runtime's, not the kernel's (no OOM-killer record to confirm it by)."""
    fewer = _FEWER_ON_HOST_LIBRARY if s.library_only else _FEWER_ON_HOST.get(s.name, _FEWER_ON_HOST_LIBRARY)
    return Fix(f"the runtime could not pin (page-lock) {size} of host memory for a buffer it keeps on the host, and "
               "nothing after it says the load went on with pageable memory (a buffer refused, not a process "
               f"killed: the kernel log need not show it): keep less of the model in host memory: {fewer}")  # fmt: skip


def recommend(
    d: Diagnosis, settings: Settings, model: str | None = None, vision: bool | None = None
) -> tuple[Fix, ...]:
    """Concrete settings for the diagnosed stage, for the log's writer; ``model`` (``--model``) overrides the log's
    model, and ``vision`` (the model's kind, when known) the log's word on it."""
    explicit = model is not None
    chosen = model or d.model or DEFAULT_MODEL
    is_vision = d.source.multimodal if vision is None else vision
    error = [e for e in d.evidence if e.line in d.error_lines]
    if d.stage == "none" and d.basis == "error" and error:
        # the error itself (not another line of the evidence, such as Gaudi's memory report), without its log prefixes
        # (a timestamp, TGI's relayed "DEBUG text_generation_launcher:"), to the line that closes its message
        said = ", its message closing at ".join(
            f"line {e.line}: {clip(strip_prefix(e.text).strip(), 120, ERROR_FOCUS)}" for e in error
        )
        return (Fix(f"no out-of-memory failure: the log's traceback ends in an error of another kind ({said}); fix "
                    "that error, memory settings will not"),)  # fmt: skip
    if d.stage == "none" and d.basis == "stopped" and d.evidence:
        e = d.evidence[0]
        return (Fix(f"no out-of-memory failure in this log: it stops partway through a phase (line {e.line}: "
                    f"{clip(e.text.strip(), 120)}) with no error line, no traceback and no kill; an excerpt copied "
                    "while the phase ran ends the same way. If the server did stop there, keep its log to the end and "
                    "check the kernel log (dmesg) for the OOM killer before changing memory settings"),)  # fmt: skip
    if d.stage == "none":
        return (Fix("no out-of-memory failure found in this log"),)
    if d.basis == "undecided":
        # the frames name no allocation, only a relayed serving error or Gaudi's weight loading (which compiles graphs)
        return (Fix("the log stops inside a traceback, before its error line, in frames that fail for other reasons as "
                    "often as for memory: nothing says it was out of memory; keep the log to the traceback's end and "
                    "read its last line: OutOfMemoryError, 'out of memory' or 'Allocation failed' is memory (diagnose "
                    "that log), while 'Graph compile failed' / synStatus (Gaudi) or a CUDA error of another kind is "
                    "not, and memory settings will not fix it"),)  # fmt: skip
    if d.memory == "host":
        return tuple(_host(d, is_vision))
    if d.source.framework == "other":
        return tuple(_hosted(d, _cut_note(d, _other(d))))
    if d.stage == "unknown":
        return (Fix("the log shows an out-of-memory error but not the stage it happened in: run again and keep the "
                    "whole server log from its first line, then diagnose that"),)  # fmt: skip
    framework = d.source.framework
    if framework == "tgi":
        out = _tgi(d)
    elif framework == "optimum-habana":
        out = _optimum_habana(d)
    elif d.stage == "startup":
        out = _vllm_startup(d, is_vision)
    elif d.stage == "kv_cache":
        out = _vllm_kv_cache(d)
    elif d.stage == "graph_capture":
        out = _vllm_graph_capture(d, settings, chosen, explicit, is_vision)
    else:
        out = _vllm_runtime(d, settings, is_vision)
    out = _hosted(d, _cut_note(d, out))
    if d.runs > 1:
        out.insert(0, Fix(f"the log holds {d.runs} server starts; this is run {d.run}, the last one that failed"))
    return tuple(out)


def _hosted(d: Diagnosis, out: list[Fix]) -> list[Fix]:
    """``out`` for the server hosting the engine, where the log names one: where it reads the engine's arguments."""
    host = d.source.host
    if host in _HOST_NOTES:
        return _in_host_terms(host, out)
    if host in _HOSTED:
        return [*out, Fix(_HOSTED[host])]
    return out


def _cut_note(d: Diagnosis, out: list[Fix]) -> list[Fix]:
    """``out`` led by what a cut verdict rests on (any writer's: the cut is the log's, not the runtime's)."""
    if d.basis == "cut" and d.cut == "traceback":
        # a traceback is printed by a process handling an exception, not by one the kernel killed: the log (or the
        # excerpt of it) ends before the error line, so nothing says the error was out of memory
        cut = (
            "the log stops inside a traceback, before its error line: the frames place the failure in this phase, "
            "but the log does not say it was out of memory; keep the log to the traceback's end to be sure"
        )
        return [Fix(cut), *out]
    return out


def contradictions(advice: Iterable[Fix]) -> dict[str, set[float]]:
    """Settings given more than one target value: should be empty."""
    seen: dict[str, set[float]] = {}
    for a in advice:
        if a.setting is not None and a.value is not None:
            seen.setdefault(a.setting, set()).add(a.value)
    return {name: values for name, values in seen.items() if len(values) > 1}


#: A command the advice quotes for the user to run (```dmesg -T | grep ...```, ```vllm-hpu-mm memory plan --json```):
#: its flags are that command's, no setting of the server.
_QUOTED_COMMAND = re.compile(r"`[^`]*`")
#: A setting the advice names, with the value it gives where it gives one: a long flag followed by a number, a list
#: of numbers (``--cuda-graphs 1,2,4``), a number it is set to (``--gpu-memory-utilization (e.g. to 0.95)``) or a
#: quoted value (``--mm-processor-kwargs '{"max_pixels": 1003520}'``), or by a word closing a parenthesis
#: (``(--weights-load-device cpu)``); a runtime's variable (``VLLM_*``, ``OLLAMA_*``, ``PT_HPU_*``) with ``=value``.
_NAMED = re.compile(
    r"""(?<![\w-])(?P<flag>--[a-z][a-z0-9_-]*[a-z0-9])(?: (?:'(?P<quoted>[^']*)'"""
    r"""|(?:\(e\.g\. )?(?:to )?(?P<num>-?\d+(?:\.\d+)?(?:,\d+)*)(?![\w.])"""
    r"""|(?P<word>\w+)(?=\))))?"""
    r"""|\b(?P<var>(?:VLLM|OLLAMA|PT_HPU)_[A-Z0-9_]*[A-Z0-9])(?:=(?P<varvalue>[\w.,]+))?"""
)
#: Other frameworks' settings the advice names by their own keys (Ollama's ``num_ctx``, MindIE's ``maxPrefillTokens``,
#: llama.cpp's library parameters), matched as whole words.
_KEYS = frozenset(k for knobs in OTHER_KNOBS.values() for k in knobs if not k.startswith("-")) | {
    *_LIBRARY_KNOBS,
    "num_batch",
    "n_ubatch",
    "n_gpu_layers",
    "tensor_parallel_shards",
}
_KEY = re.compile(r"(?<![\w-])(?:" + "|".join(sorted(map(re.escape, _KEYS), key=len, reverse=True)) + r")(?![\w-])")


def _value(m: re.Match[str]) -> SettingValue:
    """The value a :data:`_NAMED` match gives its setting: a number, a quoted JSON value (parsed), or the text."""
    if m["quoted"] is not None:
        try:
            parsed: SettingValue = json.loads(m["quoted"])
        except ValueError:
            return m["quoted"]
        return parsed
    raw = m["num"] or m["varvalue"] or m["word"]
    if raw is None:
        return None
    try:
        f = float(raw)
    except ValueError:
        return raw
    return int(f) if f.is_integer() and "." not in raw else f


def settings_of(d: Diagnosis, advice: Iterable[Fix]) -> dict[str, SettingValue]:
    """Each setting ``advice`` changes, with its one value: the value a fix computed (``Fix.setting``/``Fix.value``),
    else the one its text gives, else None (the advice names the setting, to raise or lower as its text says, and
    gives no one value; also where two texts give it different values). The one place advice becomes settings. A
    verdict of no out-of-memory failure changes none (its text quotes the log's error, whose words are no advice)."""
    if not d.oom:
        return {}
    fixes = list(advice)
    out: dict[str, SettingValue] = {f.setting: f.value for f in fixes if f.setting is not None and f.value is not None}
    given: dict[str, set[str]] = {}
    for f in fixes:
        text = _QUOTED_COMMAND.sub("", f.text)
        for m in _NAMED.finditer(text):
            name, value = m["flag"] or m["var"], _value(m)
            if name in out and out[name] is not None and name not in given:
                continue  # a computed value stands (the text may quote the log's own value beside it)
            if value is not None:
                given.setdefault(name, set()).add(json.dumps(value, sort_keys=True))
                out[name] = value if len(given[name]) == 1 else None
            else:
                out.setdefault(name, None)
        for m in _KEY.finditer(text):
            out.setdefault(m.group(), None)
    return out

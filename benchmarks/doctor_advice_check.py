"""Is the doctor's advice right for the log's writer? The scorer's own tables of what each writer reads, taken from
the writers' sources and never from the doctor's code, and the checks a labelled log's advice must pass.

What each writer reads (every knob an advice names must be in its writer's table):

- vLLM (any accelerator): the engine's command-line flags, read from vLLM's own parser when vLLM is installed
  (``AsyncEngineArgs.add_cli_args``; vLLM 0.32 has 318), else the list below. No ``VLLM_*`` variable of the Gaudi
  runtimes.
- vllm-gaudi: those flags, and its variables (``git grep -oh "VLLM_[A-Z0-9_]+"`` over ``vllm_gaudi/`` @ 091bbadd,
  the ones a memory fix can name).
- vllm-fork: those flags, ``--weights-load-device`` (the fork's own), and the variables of its Gaudi guide
  (``README_GAUDI.md``: the graph memory ratios, bucket limits, ``VLLM_SKIP_WARMUP``) and ``VLLM_MULTIMODAL_BUCKETS``
  (the fork's V0 vision bucketing, as public Gaudi scripts set it with ``VLLM_USE_V1=0``).
- TGI: its launcher's arguments, as its own ``Args { ... }`` dump names them (tests/data/logs/runtime_dev/
  tgi_1156_openshift_args.log, tgi_2776_triton_args.log), with dashes.
- optimum-habana: ``examples/text-generation/run_generation.py``'s arguments and ``gaudi_spawn.py``'s, and
  ``QUANT_CONFIG``.
- another framework: nothing (no flag is known to be its).

The checks: every knob named is the writer's; vision knobs only for a vision model; no larger
``--gpu-memory-utilization`` where other processes held the memory; a host-memory failure's first advice is about
the host, and no device-memory knob is given for it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

__all__ = ["KNOB", "advice_problems", "writer_knobs"]

#: A knob an advice names: a flag, or an environment variable of the runtimes, Ray or the Gaudi tools.
KNOB = re.compile(r"(?<![\w-])--[a-z][a-z0-9_-]*[a-z0-9]|\b(?:VLLM|RAY|PT_HPU|PYTORCH)_[A-Z0-9_]+|\bQUANT_CONFIG\b")
#: Knobs that only make sense for a vision model.
VISION_KNOBS = frozenset({"--mm-processor-kwargs", "--limit-mm-per-prompt", "--mm-processor-cache-gb",
                          "VLLM_MULTIMODAL_BUCKETS"})  # fmt: skip
#: Knobs that size device memory (not advice for a host-memory failure).
DEVICE_KNOBS = frozenset({"--gpu-memory-utilization", "VLLM_GRAPH_RESERVED_MEM", "--cuda-memory-fraction",
                          "--compilation-config", "VLLM_MULTIMODAL_BUCKETS"})  # fmt: skip

#: vLLM engine flags a memory fix may name, for when vLLM is not installed (all are in vLLM 0.32's parser).
_VLLM_FALLBACK = frozenset({
    "--gpu-memory-utilization", "--max-num-seqs", "--max-num-batched-tokens", "--max-model-len",
    "--tensor-parallel-size", "--pipeline-parallel-size", "--enforce-eager", "--mm-processor-kwargs",
    "--limit-mm-per-prompt", "--compilation-config", "--kv-cache-memory-bytes", "--max-parallel-loading-workers",
    "--cpu-offload-gb", "--mm-processor-cache-gb", "--quantization", "--kv-cache-dtype", "--block-size",
    "--enable-chunked-prefill", "--swap-space", "--num-gpu-blocks-override",
})  # fmt: skip
#: vllm-gaudi's variables a memory fix may name (``vllm_gaudi/`` @ 091bbadd).
VLLM_GAUDI_ENV = frozenset({
    "VLLM_GRAPH_RESERVED_MEM", "VLLM_MULTIMODAL_BUCKETS", "VLLM_SKIP_WARMUP", "VLLM_PROMPT_BS_BUCKET_MAX",
    "VLLM_PROMPT_SEQ_BUCKET_MAX", "VLLM_PROMPT_QUERY_BUCKET_MAX", "VLLM_PROMPT_CTX_BUCKET_MAX",
    "VLLM_DECODE_BS_BUCKET_MAX", "VLLM_DECODE_BLOCK_BUCKET_MAX",
})  # fmt: skip
VLLM_FORK_ENV = frozenset({
    "VLLM_GRAPH_RESERVED_MEM", "VLLM_GRAPH_PROMPT_RATIO", "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO", "VLLM_SKIP_WARMUP",
    "VLLM_MULTIMODAL_BUCKETS", "VLLM_PROMPT_BS_BUCKET_MAX", "VLLM_PROMPT_SEQ_BUCKET_MAX", "VLLM_DECODE_BS_BUCKET_MAX",
    "VLLM_DECODE_BLOCK_BUCKET_MAX",
})  # fmt: skip
#: TGI's launcher arguments (its Args dump), as flags.
TGI_FLAGS = frozenset("--" + name.replace("_", "-") for name in (
    "model_id", "revision", "validation_workers", "sharded", "num_shard", "quantize", "speculate", "dtype",
    "kv_cache_dtype", "trust_remote_code", "max_concurrent_requests", "max_best_of", "max_stop_sequences",
    "max_top_n_tokens", "max_input_tokens", "max_input_length", "max_total_tokens", "waiting_served_ratio",
    "max_batch_prefill_tokens", "max_batch_total_tokens", "max_waiting_tokens", "max_batch_size", "cuda_graphs",
    "hostname", "port", "cuda_memory_fraction", "rope_scaling", "rope_factor",
))  # fmt: skip
#: optimum-habana's text-generation and launcher arguments (run_generation.py, gaudi_spawn.py), and QUANT_CONFIG.
OPTIMUM_HABANA = frozenset({
    "--model_name_or_path", "--batch_size", "--max_new_tokens", "--max_input_tokens", "--use_kv_cache",
    "--use_hpu_graphs", "--limit_hpu_graphs", "--bucket_size", "--bucket_internal", "--reuse_cache", "--bf16",
    "--trim_logits", "--use_flash_attention", "--flash_attention_recompute", "--disk_offload", "--torch_compile",
    "--fp8", "--use_deepspeed", "--world_size", "--per_device_train_batch_size", "--gradient_checkpointing",
    "QUANT_CONFIG",
})  # fmt: skip
#: Ray's memory monitor variables (any writer run under Ray may be told them).
RAY_ENV = frozenset({"RAY_memory_usage_threshold", "RAY_memory_monitor_refresh_ms"})


@functools.cache
def vllm_flags() -> frozenset[str]:
    """vLLM's engine flags from its own parser when vLLM is installed (else :data:`_VLLM_FALLBACK`)."""
    try:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        return _VLLM_FALLBACK
    parser = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())  # type: ignore[no-untyped-call]
    return frozenset(o for a in parser._actions for o in a.option_strings if o.startswith("--"))


def writer_knobs(writer: str) -> frozenset[str]:
    """What ``writer`` (a label: vllm-gaudi, vllm-fork, vllm-cuda, vllm-rocm, vllm-npu, ..., tgi, optimum-habana,
    other) reads."""
    if writer == "vllm-gaudi":
        return vllm_flags() | VLLM_GAUDI_ENV
    if writer == "vllm-fork":
        return vllm_flags() | VLLM_FORK_ENV | {"--weights-load-device"}
    if writer.startswith("vllm"):
        return vllm_flags()
    if writer in ("tgi", "tgi-gaudi"):
        return TGI_FLAGS
    if writer == "optimum-habana":
        return OPTIMUM_HABANA
    return frozenset()


def advice_problems(advice: Sequence[str], writer: str, *, vision: bool, host: bool, others: bool) -> list[str]:
    """What is wrong with ``advice`` for a log of ``writer`` (empty: right)."""
    problems = []
    reads = writer_knobs(writer) | RAY_ENV
    for text in advice:
        for knob in KNOB.findall(text):
            if knob not in reads:
                problems.append(f"{knob} is not read by {writer}")
            if knob in VISION_KNOBS and not vision:
                problems.append(f"{knob} given to a text-only model")
            if host and knob in DEVICE_KNOBS:
                problems.append(f"{knob} (device memory) given for a host-memory failure")
        if "max_pixels" in text and not vision:
            problems.append("max_pixels given to a text-only model")
        if others and re.search(r"raise --gpu-memory-utilization", text):
            problems.append("raises --gpu-memory-utilization while other processes hold the memory")
    if host and advice and "host" not in advice[0]:
        problems.append("a host-memory failure whose first advice is not about the host")
    return problems

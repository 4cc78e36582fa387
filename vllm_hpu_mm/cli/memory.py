"""``vllm-hpu-mm memory plan``: the device-memory plan (KV cache, graph pools, vision buckets) before serving."""

from __future__ import annotations

import argparse
from typing import Any

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.common import ExitCode, help_text, print_json
from vllm_hpu_mm.cli.memory_calibrate import add_parser as add_calibrate_parser
from vllm_hpu_mm.cli.memory_calibrate import add_profile_argument, plan_with_profile
from vllm_hpu_mm.memory import render
from vllm_hpu_mm.memory.bucket_choice import BucketChoice, choose, read_sizes
from vllm_hpu_mm.memory.devices import DEVICE_CHOICES
from vllm_hpu_mm.memory.exports import ServerFlags, exports_for
from vllm_hpu_mm.memory.inputs import Request, build, provenance
from vllm_hpu_mm.memory.models import DEFAULT_MODEL
from vllm_hpu_mm.memory.planner import Plan, PlanInputs
from vllm_hpu_mm.memory.runtimes import RUNTIME_CHOICES
from vllm_hpu_mm.memory.vision_cost import PoolMode


def add_plan_arguments(p: argparse.ArgumentParser) -> None:
    """The planner's own flags (also used by ``serve`` under the ``--plan-`` prefix where vLLM has no equivalent)."""
    p.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help="a local model folder with config.json, or a Hugging Face id: its config.json from the local Hugging "
        "Face cache (never downloaded), else the catalog size named in the id (Qwen2.5-VL 3B/7B/32B/72B, quantization "
        f"from -AWQ/-GPTQ/-FP8) (default: {DEFAULT_MODEL})",
    )
    p.add_argument(
        "--device",
        default="gaudi2",
        help=f"one of {', '.join(DEVICE_CHOICES)} (default: gaudi2); named devices plan against the total their "
        "runtime reports (h100 79.19 GiB, gaudi2 94.62 GiB, h200 139.80 GiB; gaudi3 128 GiB nominal), auto reads the "
        "accelerator, cpu reads host memory (shared by --tensor-parallel-size ranks)",
    )
    p.add_argument(
        "--free-memory-gib",
        type=float,
        default=None,
        help="free device memory after weights and profiling, in GiB (the guide's starting point); "
        "default: estimated from the device",
    )
    p.add_argument("--total-memory-gib", type=float, default=None,
                   help="override the device's total memory, GiB (on cpu: the host's, shared by the TP ranks) "
                   "(default: the device's)")  # fmt: skip
    p.add_argument("--dtype", default="auto",
                   help="vLLM's --dtype: auto (the checkpoint's bfloat16), bfloat16, float16, half, float32, float "
                   "(default: auto)")  # fmt: skip
    p.add_argument(
        "--runtime",
        default="auto",
        help=f"serving runtime to plan for: {', '.join(RUNTIME_CHOICES)} (default auto: the one installed, else the "
        "device's: vllm-gaudi on HPU, vllm-cuda, vllm-cpu); it decides which knobs are exported",
    )
    p.add_argument(
        "--tensor-parallel-size",
        type=int,
        default=1,
        help="tensor-parallel ranks sharing the model; must divide the attention heads (default: 1)",
    )
    p.add_argument("--pipeline-parallel-size", type=int, default=1,
                   help="pipeline stages; the plan is per card of the first stage (default 1)")  # fmt: skip
    p.add_argument("--data-parallel-size", type=int, default=1,
                   help="replicas; each plans the same card, so it changes nothing per card (default 1)")  # fmt: skip
    p.add_argument("--enforce-eager", action="store_true", help="plan for vLLM's --enforce-eager: no graphs at all")
    p.add_argument(
        "--sizes",
        default=None,
        metavar="CSV|DIR",
        help="image sizes (a width,height CSV or a folder of images) to plan the bucket list jointly with the vision "
        "graph pool (default: the embedded real sizes, used when the list does not fit)",
    )
    p.add_argument(
        "--keep-buckets",
        action="store_true",
        help="keep the configured bucket list, only pruning the largest buckets that do not fit (default: re-plan it "
        "jointly with the vision pool when it does not fit)",
    )
    p.add_argument(
        "--max-buckets",
        type=int,
        default=None,
        help="most vision buckets in a jointly planned list (default: as many as the configured list)",
    )
    p.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=None,
        help="share of free memory vLLM may use (default 0.92, vLLM 0.32's)",
    )
    p.add_argument("--max-model-len", type=int, default=None, help="longest sequence (default: the model's 128000)")
    p.add_argument("--max-num-seqs", type=int, default=None, help="most sequences per step (default 256)")
    p.add_argument("--max-num-batched-tokens", type=int, default=None, help="most tokens per step (default 8192)")
    p.add_argument(
        "--block-size",
        type=int,
        default=None,
        help="KV block size; a multiple of 16 on HPU and CUDA (default: 128 on HPU and CPU, 16 on CUDA)",
    )
    p.add_argument(
        "--buckets",
        default=None,
        help="vision buckets in patches, multiples of 64, or None (default: VLLM_MULTIMODAL_BUCKETS)",
    )
    p.add_argument(
        "--graph-reserved-mem",
        type=float,
        default=None,
        help="share of usable memory for graphs (default: VLLM_GRAPH_RESERVED_MEM)",
    )
    p.add_argument(
        "--graph-prompt-ratio",
        type=float,
        default=None,
        help="share of graph memory for prefill graphs (default: VLLM_GRAPH_PROMPT_RATIO)",
    )
    p.add_argument(
        "--graph-multimodal-prompt-ratio",
        type=float,
        default=None,
        help="share of prefill graph memory for text; vision gets the rest "
        "(default: VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO)",
    )
    p.add_argument(
        "--vision-pool",
        choices=[m.value for m in PoolMode],
        default=None,
        help="vision graph memory model: private pools (HPU default), one shared pool (CUDA default), none",
    )
    p.add_argument("--kv-cache-memory-bytes", type=int, default=None,
                   help="explicit KV-cache size in bytes (replaces the ratio split's KV share)")  # fmt: skip
    p.add_argument(
        "--quantization",
        default=None,
        help="vLLM's --quantization method, for the weight size (fp8 family: 1 byte, awq/gptq: 0.5 byte; one of "
        "vLLM's methods) (default: the checkpoint's quantization_config, or the id's -AWQ/-GPTQ/-FP8)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    memory = subparsers.add_parser("memory", help="device-memory planning", description=help_text(__doc__))
    sub = memory.add_subparsers(dest="memory_command", metavar="ACTION")
    sub.required = True
    p = sub.add_parser(
        "plan", help="plan KV cache and graph memory for a model on a device", description=help_text(__doc__)
    )
    add_plan_arguments(p)
    add_profile_argument(p)
    p.set_defaults(func=run)
    add_calibrate_parser(sub)


def request_from_args(args: argparse.Namespace) -> Request:
    return Request(
        model=args.model,
        device=args.device,
        free_memory_gib=args.free_memory_gib,
        total_memory_gib=args.total_memory_gib,
        dtype=args.dtype,
        tensor_parallel_size=args.tensor_parallel_size,
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        block_size=args.block_size,
        buckets=args.buckets,
        graph_reserved_mem=args.graph_reserved_mem,
        graph_prompt_ratio=args.graph_prompt_ratio,
        graph_multimodal_prompt_ratio=args.graph_multimodal_prompt_ratio,
        vision_pool=args.vision_pool,
        kv_cache_memory_bytes=args.kv_cache_memory_bytes,
        quantization=args.quantization,
        runtime=args.runtime,
        pipeline_parallel_size=args.pipeline_parallel_size,
        data_parallel_size=args.data_parallel_size,
        enforce_eager=args.enforce_eager,
        runtime_env=tuple(envs.runtime_environ().items()),
    )


def plan_and_choose(
    inputs: PlanInputs,
    settings: envs.Settings,
    *,
    profile: str | None,
    free_stated: bool,
    sizes: str | None,
    sizes_flag: str,
    max_buckets: int | None,
    keep: bool,
) -> tuple[Plan, BucketChoice | None, dict[str, Any]]:
    """The steps ``memory plan`` and ``serve`` share: measured costs from the profile, then the plan with its bucket
    list chosen over the sizes (:func:`choose`); also the costs report."""
    inputs, costs = plan_with_profile(inputs, profile, settings.profile, free_stated=free_stated)
    sample = read_sizes(sizes, flag=sizes_flag) if sizes is not None else None
    result, choice = choose(inputs, sample, max_buckets=max_buckets, mode=settings.align_mode, keep=keep)
    return result, choice, costs


def run(args: argparse.Namespace) -> int:
    settings = envs.load()
    request = request_from_args(args)
    result, choice, costs = plan_and_choose(
        build(request, settings), settings, profile=args.profile, free_stated=args.free_memory_gib is not None,
        sizes=args.sizes, sizes_flag="--sizes", max_buckets=args.max_buckets, keep=args.keep_buckets,
    )  # fmt: skip
    flags = ServerFlags(user_env=envs.runtime_environ(), skip_warmup=settings.skip_warmup)
    exports = exports_for(result, flags)
    sources = provenance(request, result.inputs)
    if args.json:
        print_json({**render.to_dict(result, exports, choice, sources), "costs": costs})
    else:
        print(render.to_table(result, exports, choice, sources))
        print("\n".join(f"costs: {note}" for note in costs["notes"]))
    return int(ExitCode.OK if result.fits else ExitCode.NEGATIVE)

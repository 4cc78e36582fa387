"""``vllm-hpu-mm memory plan``: the device-memory plan (KV cache, graph pools, vision buckets) before serving."""

from __future__ import annotations

import argparse

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.common import ExitCode, print_json
from vllm_hpu_mm.cli.memory_calibrate import add_parser as add_calibrate_parser
from vllm_hpu_mm.cli.memory_calibrate import add_profile_argument, plan_with_profile
from vllm_hpu_mm.memory import render
from vllm_hpu_mm.memory.devices import DEVICE_CHOICES
from vllm_hpu_mm.memory.inputs import Request, build
from vllm_hpu_mm.memory.models import DEFAULT_MODEL
from vllm_hpu_mm.memory.planner import plan
from vllm_hpu_mm.memory.vision_cost import PoolMode


def add_plan_arguments(p: argparse.ArgumentParser) -> None:
    """The planner's own flags (also used by ``serve`` under the ``--plan-`` prefix where vLLM has no equivalent)."""
    p.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help="a local model folder with config.json, or a catalog name: Qwen/Qwen2.5-VL-{3B,7B,32B,72B}-Instruct",
    )
    p.add_argument(
        "--device",
        default="gaudi2",
        help=f"one of {', '.join(DEVICE_CHOICES)} "
        "(named devices use nominal totals; auto reads the accelerator, cpu reads host memory)",
    )
    p.add_argument(
        "--free-memory-gib",
        type=float,
        default=None,
        help="free device memory after weights and profiling, in GiB (the guide's starting point); "
        "default: estimated from the device",
    )
    p.add_argument("--total-memory-gib", type=float, default=None, help="override the device's total memory, GiB")
    p.add_argument("--dtype", default="auto", help="weight/KV dtype: auto (bfloat16), bfloat16, float16, float32, fp8")
    p.add_argument("--tensor-parallel-size", type=int, default=1, help="tensor-parallel ranks sharing the model")
    p.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=None,
        help="share of free memory vLLM may use (default 0.92, vLLM 0.32's)",
    )
    p.add_argument("--max-model-len", type=int, default=None, help="longest sequence (default: the model's 128000)")
    p.add_argument("--max-num-seqs", type=int, default=None, help="most sequences per step (default 256)")
    p.add_argument("--max-num-batched-tokens", type=int, default=None, help="most tokens per step (default 8192)")
    p.add_argument("--block-size", type=int, default=None, help="KV block size (default: 128 on HPU, 16 elsewhere)")
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
        help="vLLM's --quantization method, for the weight size (fp8-family: 1 byte, awq/gptq: 0.5 byte)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    memory = subparsers.add_parser("memory", help="device-memory planning", description=__doc__)
    sub = memory.add_subparsers(dest="memory_command", metavar="ACTION")
    sub.required = True
    p = sub.add_parser("plan", help="plan KV cache and graph memory for a model on a device", description=__doc__)
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
    )


def run(args: argparse.Namespace) -> int:
    settings = envs.load()
    inputs, costs = plan_with_profile(build(request_from_args(args), settings), args.profile, settings.profile,
                                      free_stated=args.free_memory_gib is not None)  # fmt: skip
    result = plan(inputs)
    if args.json:
        print_json({**render.to_dict(result), "costs": costs})
    else:
        print(render.to_table(result))
        print("\n".join(f"costs: {note}" for note in costs["notes"]))
    return int(ExitCode.OK if result.fits else ExitCode.NEGATIVE)

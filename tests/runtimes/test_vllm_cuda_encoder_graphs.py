"""Bucket -> vLLM encoder CUDA-graph configuration, checked against vLLM 0.32's real config classes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.errors import BucketError, ConfigError
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.inputs import build
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.runtimes.base import ExportContext, ServerFlags
from vllm_hpu_mm.runtimes.exports import exports_for
from vllm_hpu_mm.runtimes.vllm_cuda.encoder_graphs import encoder_cudagraph_config, token_budgets
from vllm_hpu_mm.values import DEFAULT_BUCKETS

vllm_config = pytest.importorskip("vllm.config")
arg_utils = pytest.importorskip("vllm.engine.arg_utils")

pytestmark = pytest.mark.vllm


def parse_cli(value: str) -> Any:
    """What ``--compilation-config VALUE`` becomes: the type function vLLM's argument parser uses for that flag."""
    return arg_utils._compute_kwargs(vllm_config.VllmConfig)["compilation_config"]["type"](value)


def test_default_buckets_become_merged_token_budgets() -> None:
    assert token_budgets(DEFAULT_BUCKETS) == [400, 784, 1024, 1600, 1936, 2304, 3136]
    assert encoder_cudagraph_config(DEFAULT_BUCKETS) == {
        "cudagraph_mm_encoder": True,
        "encoder_cudagraph_token_budgets": [400, 784, 1024, 1600, 1936, 2304, 3136],
        "encoder_cudagraph_max_vision_items_per_batch": 7,  # vLLM's auto rule: min(3136 // 400, 400)
    }


def test_vllm_compilation_config_accepts_the_dict() -> None:
    fields = encoder_cudagraph_config(DEFAULT_BUCKETS, max_items=4, max_frames=0)
    config = vllm_config.CompilationConfig(**fields)
    assert {k: getattr(config, k) for k in fields} == fields


def served_compilation_config(buckets: str) -> str:
    """The ``--compilation-config`` value serve passes vLLM CUDA for the 7B on an H100."""
    i = build(SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", device="h100", runtime="vllm-cuda", buckets=buckets,
                      max_model_len=32768), load({}))  # fmt: skip
    args = exports_for(plan(i), ExportContext(ServerFlags())).args
    return args[args.index("--compilation-config") + 1]


def test_serves_json_round_trips_through_vllms_parser() -> None:
    value = served_compilation_config("1600,4096")
    config = parse_cli(value)
    assert config.cudagraph_mm_encoder is True
    assert config.encoder_cudagraph_token_budgets == [400, 1024]
    assert config.encoder_cudagraph_max_vision_items_per_batch == 2
    assert config.cudagraph_capture_sizes == json.loads(value)["cudagraph_capture_sizes"]


def test_vllm_itself_rejects_a_bad_budget_so_the_check_is_real() -> None:
    fields = encoder_cudagraph_config((1600,))
    fields["encoder_cudagraph_token_budgets"] = [0]
    with pytest.raises(Exception, match="must be positive"):
        vllm_config.CompilationConfig(**fields)


def test_disabled_bucketing_turns_encoder_graphs_off() -> None:
    assert parse_cli(served_compilation_config("None")).cudagraph_mm_encoder is False


def test_max_items_must_respect_vllms_invariant() -> None:
    with pytest.raises(ConfigError, match="smallest token budget"):
        encoder_cudagraph_config((64, 128), max_items=17)  # smallest budget is 16 tokens


def test_bucket_not_divisible_by_merge_unit_is_refused() -> None:
    with pytest.raises(BucketError, match="multiples of merge_size"):
        token_budgets((1602,))

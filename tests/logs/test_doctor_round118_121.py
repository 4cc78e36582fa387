"""Classes development rounds 118-121 saw the doctor miss (issue 34), each pinned on lines composed after the public
logs under tests/data/logs/heldout_round118 and heldout_round121 (not loaded):

- cuBLAS's words for a handle it had no memory for ("CUDA error: the resource allocation failed", its status string of
  CUBLAS_STATUS_ALLOC_FAILED) are device memory; koboldcpp's "Starting model warm up" is its warm-up.
- TensorRT-LLM's KV block manager with no GPU block to free for a step ("mFreePrimaryBlocks list has no GPU blocks")
  is the cache's device blocks exhausted, inside the executor's forward step: serving.
- A process that crashed earlier in the run ("Caught signal 11 (Segmentation fault ...)"), no out-of-memory failure
  before it: a traceback cut after it is the crash's consequence, a failure of another kind.
- A handler named for the API operation a request invoked (``create_embedding``, ``create_chat_completion``): serving,
  though "create" otherwise names what a function makes."""

from __future__ import annotations

import pytest

from tests.support.logs import verdict
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose
from vllm_hpu_mm.logs.doctor.phases import named_stage

_CUBLAS = ["CUDA error: the resource allocation failed",
           "  current device: 1, in function cublas_handle at ggml/src/ggml-cuda/common.cuh:993",
           "  cublasCreate_v2(&cublas_handles[device])"]  # fmt: skip


def test_cublas_failing_to_allocate_its_handle_is_device_memory() -> None:
    d = diagnose(_CUBLAS, load({}))
    assert (d.oom, d.memory) == (True, "device")


def test_koboldcpp_s_model_warm_up_is_the_warm_up() -> None:
    assert verdict(["Starting model warm up, please wait a moment...", *_CUBLAS])[0] == "graph_capture"


def test_tensorrt_llm_finding_no_gpu_block_during_a_step_is_serving() -> None:
    lines = ["[TensorRT-LLM][ERROR] Encountered an error in forwardAsync function: [TensorRT-LLM][ERROR] Assertion "
             "failed: mFreePrimaryBlocks list has no GPU blocks (kvCacheManager.cpp:1012)",
             "2       0x7fc0e2c2fae6 tensorrt_llm::batch_manager::kv_cache_manager::BlockManager::"
             "findBestGPUBlockToFree()"]  # fmt: skip
    assert verdict(lines) == ("runtime", "message")


_CUT = ["(EngineCore_DP0 pid=271) ERROR 02-10 22:56:36 [core.py:866] EngineCore failed to start.",
        "(EngineCore_DP0 pid=271) ERROR 02-10 22:56:36 [core.py:866] Traceback (most recent call last):",
        '(EngineCore_DP0 pid=271) ERROR 02-10 22:56:36 [core.py:866]   File "/usr/local/lib/python3.12/dist-packages/'
        'vllm/v1/executor/multiproc_executor.py", line 172, in _init_executor',
        "(EngineCore_DP0 pid=271) ERROR 02-10 22:56:36 [core.py:866]     self.workers = "
        "WorkerProc.wait_for_ready(unready_workers)"]  # fmt: skip


def test_a_traceback_cut_after_the_process_crashed_is_the_crash_s_consequence() -> None:
    crash = "Caught signal 11 (Segmentation fault: address not mapped to object at address (nil))"
    assert verdict([crash, "==== backtrace (tid: 290) ====", "...", *_CUT]) == ("none", "error")


def test_the_same_cut_traceback_alone_is_left_undecided() -> None:
    assert verdict(_CUT) == ("unknown", "undecided")  # no crash stated: not read as a failure of another kind


@pytest.mark.parametrize("func", ["create_embedding", "create_chat_completion", "create_transcription"])
def test_an_api_operation_s_handler_is_serving(func: str) -> None:
    assert named_stage([("xinference/api/restful_api.py", func)]) == ("runtime", 0)


def test_a_function_creating_anything_else_says_nothing() -> None:
    assert named_stage([("lib/model.py", "create_state_tensors")]) is None

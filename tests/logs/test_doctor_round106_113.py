"""Classes development rounds 106-113 saw the doctor miss (issue 34), pinned on lines composed after the public logs
under tests/data/logs/heldout_round106 to heldout_round113 (not loaded):

- Ollama's report that its runner broke partway through a completion ("Error: an unknown error was encountered while
  running the model CUDA error: out of memory"): only a completion under way returns it, so the model was serving.
- A tool announcing that it calculates over its inputs ("perplexity: calculating perplexity over 565 chunks"): the
  model is built and working through its inputs, as "Embedding 120 sequences" says.
- Ollama's runner dying while it loads, under llama.cpp's server's name ("llama-server process has terminated"); RKNN's
  "failed to malloc npu memory" and OpenCL's buffer results (CL_INVALID_BUFFER_SIZE, CL_MEM_OBJECT_ALLOCATION_FAILURE)
  as device memory; Modular MAX's KV pool too small for its pages; a Rust backtrace's model ``load`` frame; and a load
  reported complete ("Loading of model complete"), which announces no load under way."""

from __future__ import annotations

import pytest

from tests.support.logs import verdict
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose
from vllm_hpu_mm.logs.doctor.phases import announced_stage

_GGML_OOM = [
    "CUDA error: out of memory",
    "  current device: 0, in function alloc at /app/ggml/src/ggml-cuda/ggml-cuda.cu:453",
    "  cuMemCreate(&handle, reserve_size, &prop, 0)",
]


@pytest.mark.parametrize("words", ["an unknown error was encountered", "an error was encountered"])
def test_ollama_s_runner_breaking_during_a_completion_is_serving(words: str) -> None:
    lines = [f"Error: {words} while running the model CUDA error: out of memory", *_GGML_OOM[1:]]
    assert verdict(lines) == ("runtime", "message")


def test_the_same_ggml_oom_alone_says_nothing_of_the_stage() -> None:
    assert verdict(_GGML_OOM)[0] == "unknown"


def test_a_tool_calculating_over_its_inputs_is_serving() -> None:
    line = "perplexity: calculating perplexity over 565 chunks, n_ctx=512, batch_size=2048, n_seq=4"
    assert announced_stage(line) == "runtime"
    assert verdict(["perplexity: tokenizing the input ..", line, *_GGML_OOM]) == ("runtime", "phase")


# --- development rounds 110-113 -------------------------------------------------------------------------------------


def test_ollama_s_runner_terminated_under_llama_server_s_name_is_the_load_s_failure() -> None:
    lines = ["load_tensors: loading model tensors, this can take a while... (load_mode = dio)",
             "load_tensors:    CUDA_Host model buffer size = 2850.75 MiB", "...",
             "Error: 500 Internal Server Error: llama-server process has terminated: signal: killed"]  # fmt: skip
    assert verdict(lines)[0] == "startup"


def test_rknn_refusing_npu_memory_as_the_model_loads_is_startup() -> None:
    lines = ["I rkllm: loading rkllm model from ./language_model_w8a8.rkllm",
             "E RKNN: [09:40:45.140] failed to malloc npu memory, size: 3085697024, flags: 0x2",
             "E RKNN: [09:40:45.148] load model file error!"]  # fmt: skip
    assert verdict(lines)[0] == "startup"


@pytest.mark.parametrize("code", ["-61: CL_INVALID_BUFFER_SIZE", "-4: CL_MEM_OBJECT_ALLOCATION_FAILURE"])
def test_opencl_refusing_a_buffer_is_device_memory(code: str) -> None:
    d = diagnose([f"opencl_device_api.cc:238: InternalError: Check failed: (err_code == CL_SUCCESS) is false: "
                  f"OpenCL Error, code={code}"], load({}))  # fmt: skip
    assert (d.stage, d.memory) == ("unknown", "device")


def test_max_s_kv_pool_too_small_for_its_pages_is_the_kv_cache() -> None:
    lines = ["ValueError: 51.00 MiB is too small to build a pool from the page sizes",
             "(attn.full_group=3.00 MiB, linear_attn/conv=648.00 KiB,"]  # fmt: skip
    assert verdict(lines)[0] == "kv_cache"


def test_a_rust_backtrace_s_model_load_frame_is_startup() -> None:
    lines = ['Error: DriverError(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")',
             "   0: candle_core::error::Error::bt",
             "   5: candle_core::safetensors::MmapedSafetensors::load",
             "  12: candle_transformers::models::falcon::Falcon::load",
             "  13: falcon::main"]  # fmt: skip
    assert verdict(lines) == ("startup", "message")
    assert verdict(lines[:2])[0] == "unknown"


def test_a_load_reported_complete_announces_nothing() -> None:
    assert announced_stage("Loading of model complete") is None
    assert announced_stage("Loading model... done") is None
    assert announced_stage("Loading pygmalion-6b...") == "startup"

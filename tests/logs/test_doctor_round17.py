"""The classes rounds 16 and 17's misses belong to (issue 34), each pinned on lines composed after the vendors' sources
and the public logs under tests/data/logs/heldout_round16/ and heldout_round17/: llama.cpp's loader summary of a
buffer it could not allocate, a ggml backend's own buffer allocation, a backend's device
list as a start-up line, an HTTP client's 500 status line as a served request, and advice in the terms of the server
that hosts the engine (Xinference's launch options, LocalAI's model config)."""

from __future__ import annotations

import re

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose, diagnose_lines

# --- llama.cpp's loader summary -------------------------------------------------------------------------------------


def test_the_loaders_buffer_summary_is_an_oom_at_load_whatever_the_backend_said_before_it() -> None:
    """Ollama relays llama.cpp's load_tensors summary (src/llama-model.cpp): alone, the buffer's allocation failed.
    After the backend's "failed to initialize tensor" line this test pinned no out-of-memory failure until stop 50,
    when the labels of record (a blind relabel of round 13, round 79's labellers) read it as one at start-up too."""
    d = diagnose_lines(["Error: 500 Internal Server Error: llama runner process has terminated:",
                        "error loading model: unable to allocate CUDA0 buffer"])  # fmt: skip
    assert (d.oom, d.memory, d.stage) == (True, "device", "startup")
    d = diagnose_lines(["load_tensors: loading model tensors, this can take a while... (mmap = true)",
                        "alloc_tensor_range: failed to initialize tensor output.weight",
                        "llama_model_load: error loading model: unable to allocate ROCm0 buffer"])  # fmt: skip
    assert (d.oom, d.memory, d.stage) == (True, "device", "startup")


# --- where a failure came, from lines any program prints ------------------------------------------------------------


def test_a_ggml_backends_own_buffer_allocation_is_start_up_unless_serving_had_begun() -> None:
    line = ("3:44PM DBG GRPC(abc-127.0.0.1:44793): stderr ggml_backend_cuda_buffer_type_alloc_buffer: allocating "
            "5563.66 MiB on device 0: cudaMalloc failed: out of memory")  # fmt: skip
    assert diagnose_lines([line]).stage == "startup"
    serving = "slot launch_slot_: id  0 | task 12 | processing task"
    assert diagnose_lines([serving, line]).stage == "runtime"


def test_a_backends_device_list_is_a_start_up_line() -> None:
    # ggml's SYCL backend lists its devices as it initialises (ggml-sycl.cpp), before the failing buffer clear
    d = diagnose_lines(["found 2 SYCL devices:",
                        "| 0| [level_zero:gpu:0]|             Intel Arc A310 LP Graphics|    1.6|     96|",
                        "Native API failed. Native API returns: -6 (PI_ERROR_OUT_OF_HOST_MEMORY)"])  # fmt: skip
    assert (d.memory, d.stage) == ("host", "startup")


def test_an_http_clients_500_status_line_before_the_error_is_a_served_request() -> None:
    d = diagnose_lines(["curl -i localhost:8000/v1/completions -d '{\"prompt\": \"hi\"}'",
                        "HTTP/1.1 500 Internal Server Error",
                        "server: uvicorn",
                        "Internal Server Error",
                        "",
                        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate"])  # fmt: skip
    assert (d.oom, d.stage) == (True, "runtime")


# --- advice in the hosting server's terms ---------------------------------------------------------------------------

FLAG = re.compile(r"(?<![\w-])--[a-z]")


def test_xinference_is_told_its_launch_options_not_vllms_flags() -> None:
    d = diagnose(["(EngineCore_DP0 pid=494) ValueError: To serve at least one request with the models's max seq len "
                  "(262144), (36.0 GiB KV cache is needed, which is larger than the available KV cache memory "
                  "(6.94 GiB). Based on the available memory, the estimated maximum model length is 50512.",
                  "2026-05-20 00:55:15,994 xinference.core.worker 155 ERROR    Failed to load model Qwen3-VL-0"],
                 load({}))  # fmt: skip
    assert d.stage == "kv_cache"
    assert "Xinference" in d.source.describe
    assert not any(FLAG.search(r) for r in d.recommendations)
    assert any("max_model_len" in r for r in d.recommendations)


def test_localai_is_named_and_told_its_model_config_keys_not_llama_cpps_flags() -> None:
    d = diagnose(["3:44PM DBG GRPC(abc-127.0.0.1:44793): stderr ggml_backend_cuda_buffer_type_alloc_buffer: "
                  "allocating 5563.66 MiB on device 0: cudaMalloc failed: out of memory"], load({}))  # fmt: skip
    assert not any(FLAG.search(r) for r in d.recommendations)
    assert "LocalAI" in d.recommendations[0]
    assert "gpu_layers" in d.recommendations[0]

"""The classes rounds 14 and 15's misses belong to (issue 34), each pinned on lines composed after the vendors' sources
and the public logs under tests/data/logs/heldout_round14/ and heldout_round15/: an out-of-memory in a vendor's own
words the doctor did not know, the stage a program's function names give where no runtime's table knows them, a
request's or a device's phase line in a program the doctor does not know, and a failure record a terminal wrapped."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.logs.doctor import diagnose_lines

# --- each vendor's own words for device memory it could not give ---------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        # MLX on Metal (mlx/backend/metal/allocator.cpp), as a client prints the server's answer
        "RuntimeError: [metal::malloc] Attempting to allocate 2147483648000 bytes which is greater than the maximum "
        "allowed buffer size of 17179869184 bytes.",
        "RuntimeError: [malloc] Unable to allocate 4294967296 bytes.",
        # Intel's XPU allocator refusing a block over 4 GB (intel-extension-for-pytorch CachingDeviceAllocator.cpp)
        "RuntimeError: Current platform can NOT allocate memory block with size larger than 4GB! Tried to allocate "
        "4.50 GiB (GPU  0; 7.75 GiB total capacity; 1.00 GiB already allocated; 1.50 GiB reserved in total by PyTorch)",
        # TensorFlow's stream executor on ROCm, HIP's enum printed as a number (1002: before ROCm 3; 2: after)
        "E tensorflow/stream_executor/rocm/rocm_driver.cc:601] failed to allocate 3.00G (3221225472 bytes) from "
        "device: hipError_t(1002)",
        "E hip_allocator.cc:44] hipMalloc returned hipError_t(2)",
        # TensorFlow's error class when its allocator fails
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: failed to allocate memory",
    ],
)
def test_a_vendors_own_words_for_device_memory_it_could_not_give_are_an_oom(line: str) -> None:
    d = diagnose_lines([line])
    assert (d.oom, d.memory) == (True, "device")


@pytest.mark.parametrize(
    "line",
    [
        "E hip_runtime.cc:12] hipLaunchKernel returned hipError_t(1004)",  # a launch failure, not memory
        "ResourceExhaustedError: Quota exceeded for quota metric 'Write requests'",  # a quota, not memory
        "W tensorflow/core/common_runtime/bfc_allocator.cc:271] Allocator (GPU_0_bfc) ran out of memory trying to "
        "allocate 2.00GiB with freed_by_count=0. The caller indicates that this is not a failure",
    ],
)
def test_the_same_vendors_other_codes_and_a_retry_they_recover_from_are_no_oom(line: str) -> None:
    assert not diagnose_lines([line]).oom


# --- the words of function names, in programs no runtime table knows -----------------------------------------------

OOM = "RuntimeError: CUDA error: out of memory"


def _traceback(*frames: tuple[str, str]) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for path, func in frames:
        lines += [f'  File "{path}", line 10, in {func}', "    x = y()"]
    return [*lines, OOM]


def test_a_scripts_generate_reached_before_a_compile_deep_inside_is_serving() -> None:
    # LargeWorldModel/LWM #60's shape (a JAX program): the sampler's generate compiles a new shape and runs out
    lines = _traceback(("/home/u/app/chat.py", "main"), ("/home/u/app/chat.py", "_forward_generate"),
                       ("/opt/lib/python3.10/site-packages/jax/_src/pjit.py", "_pjit_call_impl"))  # fmt: skip
    assert diagnose_lines(lines).stage == "runtime"


def test_a_programs_from_dir_that_allocates_its_session_is_start_up() -> None:
    # TensorRT-LLM #1060's shape: a runner built from an engine folder allocates its session's buffers
    lines = _traceback(("/w/examples/run.py", "main"), ("/w/site-packages/tensorrt_llm/runtime/runner.py", "from_dir"))
    assert diagnose_lines(lines).stage == "startup"


def test_a_traceback_through_a_modules_forward_alone_stays_unknown() -> None:
    # a forward runs at start-up (a profiling pass) and for requests alike: its name says nothing of when
    lines = _traceback(("/x/site-packages/torch/nn/modules/linear.py", "forward"))
    assert diagnose_lines(lines).stage == "unknown"


# --- a request's and a device's phase lines, in programs the doctor does not know ----------------------------------


def test_an_oom_after_a_servers_got_prompt_line_is_serving() -> None:
    # ComfyUI's server takes a prompt into its queue and prints "got prompt" (server.py)
    lines = ["got prompt", "Requested to load SDXL", "!!! Exception during processing !!! XPU out of memory."]
    assert diagnose_lines(lines).stage == "runtime"


def test_an_oom_right_after_a_tensorflow_device_was_created_is_start_up() -> None:
    lines = ["I gpu_device.cc:1189] Created TensorFlow device (/device:GPU:0 with 7524 MB memory) -> physical GPU",
             "E cuda_driver.cc:806] failed to allocate 7.35G (7889485824 bytes) from device: "
             "CUDA_ERROR_OUT_OF_MEMORY"]  # fmt: skip
    assert diagnose_lines(lines).stage == "startup"


def test_a_failed_requests_500_answer_is_serving_unless_it_carries_the_loads_failure() -> None:
    served = "Error: 500 Internal Server Error: runner failed: CUDA error: out of memory"
    assert diagnose_lines([served]).stage == "runtime"
    # Ollama loads a model on its first request: the request's 500 then carries the load's failure, not serving's
    loading = "Error: 500 Internal Server Error: llama runner process has terminated: cudaMalloc failed: out of memory"
    assert diagnose_lines([loading]).stage != "runtime"


# --- a record a terminal wrapped ------------------------------------------------------------------------------------


def test_a_wrapped_instance_creation_record_keeps_its_opening_words() -> None:
    # Triton's TensorRT-LLM backend could not create a model instance; the record wrapped before its error's words
    lines = ["E1103 02:59:01.152656 81041 backend_model.cc:553] ERROR: Failed to create instance: unexpected error "
             "when creating modelInstanceState: [TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMalloc(ptr, n, mSt",
             "ream): out of memory (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:112)"]  # fmt: skip
    assert diagnose_lines(lines).stage == "startup"


# --- a chained traceback after the error the program logged ---------------------------------------------------------


def test_a_chained_traceback_cut_after_a_logged_error_of_another_kind_claims_nothing() -> None:
    # vllm-project/vllm #5901's shape: the engine logs a timeout, then the request handler's traceback it caused is cut
    lines = ["INFO 08-29 02:12:12 metrics.py:406] Avg prompt throughput: 0.0 tokens/s, Running: 27 reqs",
             "ERROR 08-29 02:12:22 async_llm_engine.py:658] Engine iteration timed out. This should never happen!",
             "...", "The above exception was the direct cause of the following exception:", "",
             "Traceback (most recent call last):",
             '  File "/usr/lib/python3/dist-packages/uvicorn/protocols/http/httptools_impl.py", line 399, in run_asgi',
             "    result = await app(", "..."]  # fmt: skip
    d = diagnose_lines(lines)
    assert (d.stage, d.oom) == ("none", False)
    # the same traceback with no error logged before it is still a cut one: unknown, nothing claimed
    d = diagnose_lines([line for line in lines if not line.startswith("ERROR")])
    assert (d.stage, d.oom) == ("unknown", False)

"""Classes the first unseen set of stop 53 (rounds 126-129, development data once scored) saw the doctor miss (issue
34), each pinned on lines composed after the public logs under tests/data/logs/heldout_round126..129 (not loaded):

- ggml's 2023 scratch pool too small ("not enough space in the scratch memory") and MLX's cap on Metal buffers
  reached ("[metal::malloc] Resource limit (499000) exceeded.") are memory refused.
- A runner's progress through a request's prompt ("Prompt processing progress: 99.5%", "Processing Prompt [BLAS]") and
  a chat program's label for the model's answer ("AI: ") say it was serving.
- A debugger's backtrace through a library's init function (gdb's "in rkllm_init ()") is its model's set-up.
- An error a handler caught, named by class ("exception caught: KeyError 'schema'"), and TensorRT's error report by its
  code ("Error Code 3: API Usage Error (...)") state the error a cut traceback after them raised, a web server's 500
  record between them included."""

from __future__ import annotations

from tests.support.logs import verdict
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose


def test_ggml_s_scratch_memory_too_small_while_processing_a_prompt_is_serving() -> None:
    line = "Processing Prompt [BLAS] (1024 / 1301 tokens)ggml_new_tensor_impl: not enough space in the scratch memory"
    assert verdict([line])[0] == "runtime"


def test_mlx_s_metal_buffer_cap_reached_is_device_memory() -> None:
    d = diagnose(["RuntimeError: [metal::malloc] Resource limit (499000) exceeded."], load({}))
    assert (d.oom, d.stage) == (True, "unknown")


def test_a_prompt_s_processing_progress_before_the_failure_is_serving() -> None:
    lines = ["2026-04-18 21:08:47  [INFO]", " [gemma] Prompt processing progress: 99.5%",
             " libc++abi: terminating due to uncaught exception of type std::runtime_error: [METAL] Command "
             "buffer execution failed: Insufficient Memory "
             "(00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)"]  # fmt: skip
    assert verdict(lines)[0] == "runtime"


def test_a_chat_program_s_label_for_the_model_s_answer_is_serving() -> None:
    lines = ["AI: ggml_allocr_alloc: not enough space in the buffer (needed 308691360, largest block available 2816)",
             'GGML_ASSERT: llama.cpp/ggml-alloc.c:173: !"not enough space in the buffer"']  # fmt: skip
    assert verdict(lines)[0] == "runtime"


def test_a_library_s_init_function_in_a_debugger_s_backtrace_is_start_up() -> None:
    lines = ["rkllm init start", "ggml_calloc: failed to allocate   0.00 MB", ":0: fatal error",
             "#7  0x0000007fb1e4840c in ?? () from ./lib/librkllmrt.so",
             "#8  0x0000007fb1e45fe4 in rkllm_init () from ./lib/librkllmrt.so",
             "#9  0x00000055814e23c0 in main ()"]  # fmt: skip
    assert verdict(lines)[0] == "startup"


_ASGI = ["ERROR:    Exception in ASGI application", "Traceback (most recent call last):",
         '  File "/opt/py3/lib/python3.10/site-packages/uvicorn/protocols/http/h11_impl.py", line 403, in run_asgi',
         "    result = await app(  # type: ignore[func-returns-value]", "..."]  # fmt: skip


def test_a_caught_exception_named_by_class_above_a_500_and_a_cut_traceback_is_another_error() -> None:
    lines = ["2025-09-30 15:27:32,716 - lmdeploy - ERROR - async_engine.py:663 - [safe_run] exception caught: "
             "KeyError 'schema'",
             '2025-09-30 15:27:32,716 - lmdeploy - ERROR - async_engine.py:648 - [model_inst] exception caught: '
             "'schema'",
             'INFO:     10.69.1.103:56928 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error',
             *_ASGI]  # fmt: skip
    assert verdict(lines) == ("none", "error")


def test_tensorrt_s_error_report_by_its_code_above_a_cut_traceback_is_another_error() -> None:
    lines = ["[10/31/2023-06:37:02] [TRT] [E] 3: [executionContext.cpp::setInputShape::2288] Error Code 3: API Usage "
             "Error (Parameter check failed at: runtime/api/executionContext.cpp::setInputShape::2288)",
             "Traceback (most recent call last):", '  File "/app/examples/gpt/run.py", line 351, in <module>',
             "    generate(**vars(args))", "..."]  # fmt: skip
    assert verdict(lines) == ("none", "error")

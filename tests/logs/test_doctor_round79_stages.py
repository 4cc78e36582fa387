"""The classes rounds 76-80's stage misses belong to (issue 34): an out-of-memory failure the doctor recognised and
answered ``unknown`` (or ``runtime`` on no evidence) although the program's own lines say when it came, or say
nothing. Each is pinned on lines composed after the public logs under tests/data/logs/heldout_round76/,
heldout_round79/ and heldout_round80/ and on another program that says the same in its own words; lines that do not
say when keep the failure ``unknown``.

- A layer creating its parameters (torch's ``Parameter(...)``, ``register_parameter``) is the model being built:
  start-up, also where the excerpt kept only the statement above the exception line, its frame line cut off.
- ggml's backends list the devices they found as they initialise (CUDA, ROCm, Vulkan, SYCL): a failure after the list
  and before any later phase line is start-up.
- A server's report that it listens at an address is serving; a listener that opens before its model loads (Ollama's
  server and runner, llama.cpp's HTTP thread, gunicorn's arbiter) says nothing.
- A failure's line naming a step of answering a request after "during", "while" or "when" ("exceeded during
  prefill", "Error during chat streaming", "out of memory during inference") is serving; a rehearsal of the step is
  not.
- A worker that fails again and again survived its failures only where it printed other work between them: the same
  failure reported several times back to back (ggml's Metal backend, one line pair per command buffer) is one failure
  with no stage."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

TORCH_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 7.69 GiB "
    "of which 13.94 MiB is free."
)
GGML_OOM = "CUDA error 2 at /home/app/third_party/ggml/src/ggml-cuda.cu:7196: out of memory"


def _stage(lines: list[str]) -> tuple[bool, str]:
    d = diagnose_lines(lines)
    return d.oom, d.stage


# --- a layer creating its parameters --------------------------------------------------------------------------------


def test_a_statement_creating_a_parameter_above_the_error_is_start_up() -> None:
    # ogx-ai/llama-stack-apps #86: fairscale's ColumnParallelLinear allocating its weight, the frame line cut off
    lines = [
        "self.weight = Parameter(torch.Tensor(self.output_size_per_partition, self.in_features))",
        f"  {TORCH_OOM}",
    ]
    assert _stage(lines) == (True, "startup")


def test_a_layer_of_any_program_creating_its_parameters_is_start_up() -> None:
    frame = '  File "/srv/app/nn/blocks.py", line 40, in __init__'
    empty = "    self.weight = nn.Parameter(torch.empty(out_features, in_features))"
    assert _stage(["Traceback (most recent call last):", frame, empty, TORCH_OOM]) == (True, "startup")
    registered = '    self.register_parameter("bias", nn.Parameter(torch.zeros(out_features)))'
    assert _stage(["Traceback (most recent call last):", frame, registered, TORCH_OOM]) == (True, "startup")


def test_a_statement_above_the_error_is_read_for_what_it_calls() -> None:
    assert _stage(["outputs = model.generate(**inputs, max_new_tokens=256)", TORCH_OOM]) == (True, "runtime")
    assert _stage(["x = torch.matmul(a, b)", TORCH_OOM]) == (True, "unknown")
    # a logger's record is no source line, whatever it quotes
    assert _stage(["2024-05-01 10:00:00 INFO main.py:12] self.weight = Parameter(x)", TORCH_OOM]) == (True, "unknown")


# --- ggml listing the devices it found ------------------------------------------------------------------------------


def test_a_failure_right_after_ggml_listed_its_devices_is_start_up() -> None:
    # QwenLM/qwen.cpp #55: the launch, ggml's CUDA device list, then the failure before any prompt
    cuda = ["ggml_init_cublas: found 2 CUDA devices:", "  Device 0: NVIDIA A800 80GB PCIe, compute capability 8.0"]
    assert _stage([*cuda, "", GGML_OOM, "current device: 0"]) == (True, "startup")
    rocm = ["ggml_cuda_init: found 1 ROCm devices:", "  Device 0: AMD Radeon RX 7900 XTX, compute capability 11.0"]
    assert _stage([*rocm, GGML_OOM]) == (True, "startup")
    vulkan = ["ggml_vulkan: Found 1 Vulkan devices:", "ggml_vulkan: 0 = AMD Radeon RX 6600 (RADV NAVI23) | uma: 0"]
    assert _stage([*vulkan, "ggml_vulkan: Device memory allocation of size 1073741824 failed."]) == (True, "startup")


def test_a_later_phase_line_than_the_device_list_wins() -> None:
    devices = "ggml_cuda_init: found 1 CUDA devices:"
    assert _stage([devices, "llama_print_timings:        load time =  1234.00 ms", GGML_OOM]) == (True, "runtime")
    assert _stage([GGML_OOM, "current device: 0"]) == (True, "unknown")


# --- a server listening for requests --------------------------------------------------------------------------------


def test_a_failure_after_the_server_said_it_listens_is_serving() -> None:
    # TabbyML/tabby #541: the server listens once its engine is built; the failure comes two minutes later
    listening = "2023-10-12T12:37:08.293510Z  INFO tabby::serve: mod.rs:183: Listening at 0.0.0.0:8080"
    abort = ["terminate called after throwing an instance of 'std::runtime_error'",
             "  what():  CUDA failed with error out of memory"]  # fmt: skip
    assert _stage([listening, *abort]) == (True, "runtime")
    refused = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert _stage(["Server listening on port 3000", refused]) == (True, "runtime")
    assert _stage(["INFO: listening on http://0.0.0.0:8000", refused]) == (True, "runtime")


def test_a_listener_that_opens_before_its_model_loads_says_nothing() -> None:
    oom = "CUDA error: out of memory"
    ollama = 'level=INFO source=routes.go:1082 msg="Listening on 127.0.0.1:11434 (version 0.1.29)"'
    runner = 'level=INFO source=runner.go:993 msg="Server listening on 127.0.0.1:42893"'
    llama_cpp = "main: HTTP server is listening, hostname: 0.0.0.0, port: 8080, http threads: 23"
    gunicorn = "[2024-01-01 10:00:00 +0000] [1] [INFO] Listening at: http://0.0.0.0:8000 (1)"
    for line in (ollama, runner, llama_cpp, gunicorn):
        assert _stage([line, oom]) == (True, "unknown"), line
    # a load after the listening line is the later phase line
    assert _stage(["Listening at 0.0.0.0:8080", "llm_load_tensors: offloading 32 repeating layers to GPU", oom]) == (
        True,
        "startup",
    )


# --- a failure during a step of answering a request -----------------------------------------------------------------

ASKED = "CUDA out of memory. Tried to allocate 2.00 GiB"


def test_a_failure_during_a_requests_prefill_or_streaming_is_serving() -> None:
    # jundot/omlx #1522: the scheduler's prefill of a request and the server's chat stream, both failed
    lines = ["omlx.scheduler - WARNING - Prefill force-stopped at 1441 tokens: memory 42.8GB exceeds ceiling 42.0GB",
             "omlx.scheduler - ERROR - Prefill failed for <id>: Memory limit exceeded during prefill",
             "omlx.server - ERROR - Error during chat streaming: Memory limit exceeded during prefill"]  # fmt: skip
    assert _stage(lines) == (True, "runtime")
    assert _stage([f"RuntimeError: CUDA out of memory during inference: {ASKED}"]) == (True, "runtime")
    assert _stage([f"ERROR: Error during model inference: {ASKED}"]) == (True, "runtime")


def test_a_rehearsal_of_a_serving_step_is_not_serving() -> None:
    assert _stage([f"ERROR: error during warmup prefill: {ASKED}"]) == (True, "unknown")
    assert _stage([f"ERROR: failed while decoding the dummy batch: {ASKED}"]) == (True, "unknown")


# --- failures reported again are one failure ------------------------------------------------------------------------

METAL = ["error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
         "ggml_metal_graph_compute: command buffer 3 failed with status 5"]  # fmt: skip


def test_the_same_failure_reported_again_back_to_back_has_no_stage() -> None:
    # ollama/ollama #6257: nine pairs of Metal's refusal with nothing between: nothing says the process served
    d = diagnose_lines(METAL * 9)
    assert (d.oom, d.stage, d.basis) == (True, "unknown", "unknown")


def test_failures_with_the_programs_other_work_between_were_survived() -> None:
    served = ['[GIN] 2024/08/08 - 10:00:00 | 200 |  1.2s | 127.0.0.1 | POST "/api/chat"']
    d = diagnose_lines((METAL + served) * 9)
    assert (d.stage, d.basis) == ("runtime", "repeated")

"""The classes held-out rounds 38-41 missed (issue 34), each pinned on lines composed after the programs' sources and
the public logs under tests/data/logs/heldout_round38/ ... heldout_round41/, with guards that keep their neighbours
where they were:

- recognition: an accelerator runtime's "out of resources" result (oneAPI's Unified Runtime, SYCL's plugin interface,
  OpenCL) is the device's memory running out, a CUDA or HIP launch over its register or thread limits is not; a paged
  KV cache too small for one sequence of the configured length (TensorRT-LLM's words) is the KV cache's refusal;
- stage: a serving framework's warm-up of a loaded model with sample requests is the warm-up stage; a paused server
  that fails to take its memory back when resumed was serving; an app's pipeline step over its data that fails after
  the error was running;
- no false precision: a function named for what it makes (``get_decode_mask``) places nothing by the words after its
  verb.
"""

from __future__ import annotations

import pytest

from vllm_hpu_mm.logs.doctor import diagnose_lines

TORCH_OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has 1.02 GiB free."


def traceback(*funcs: str, path: str = "/app/pipeline/model.py", error: str = TORCH_OOM) -> list[str]:
    """A Python traceback through ``funcs`` (all in ``path``), outermost first, ended by ``error``."""
    lines = ["Traceback (most recent call last):"]
    for k, func in enumerate(funcs):
        lines += [f'  File "{path}", line {100 + k}, in {func}', "    x = x + 1"]
    return [*lines, error]


# --- an accelerator runtime's "out of resources" result -------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        # ggml-sycl's check of a Unified Runtime call (intel/ipex-llm #12872)
        "UR backend failed. UR backend returns:40 (UR_RESULT_ERROR_OUT_OF_RESOURCES)Exception caught at file:"
        "/src/ggml/src/ggml-sycl/ggml-sycl.cpp, line:2819",
        "terminate called after throwing an instance of 'sycl::_V1::runtime_error'  what():  Native API failed. "
        "Native API returns: -5 (PI_ERROR_OUT_OF_RESOURCES) -5 (PI_ERROR_OUT_OF_RESOURCES)",
        "clEnqueueWriteBuffer failed with CL_OUT_OF_RESOURCES",
    ],
)
def test_an_accelerator_runtimes_out_of_resources_result_is_the_device_running_out(line: str) -> None:
    d = diagnose_lines([line])
    assert (d.oom, d.memory, d.stage) == (True, "device", "unknown")


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: too many resources requested for launch",
        "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources requested for launch",
        "error: cudaErrorLaunchOutOfResources (701) in fused_moe_kernel",
        "HIP error: hipErrorLaunchOutOfResources",
        "UR_RESULT_ERROR_OUT_OF_RESOURCES: too many resources requested for launch (registers per thread: 255)",
        "clEnqueueNDRangeKernel failed: CL_OUT_OF_RESOURCES (work-group size 1024 needs more local memory)",
    ],
)
def test_a_kernel_launch_over_its_register_or_thread_limits_is_no_out_of_memory_failure(line: str) -> None:
    d = diagnose_lines([line])
    assert (d.oom, d.stage) == (False, "none")


# --- a paged KV cache too small for one sequence -----------------------------------------------------------------

#: Triton's TensorRT-LLM backend (triton-inference-server/tensorrtllm_backend #366): the KV cache it sized holds 29184
#: tokens, one sequence of the engine's maximum length needs 272 blocks of 128.
TRTLLM_KV = [
    "[TensorRT-LLM][INFO] Allocate 956301312 bytes for k/v cache.",
    "[TensorRT-LLM][INFO] Using 29184 total tokens in paged KV cache, and 272 blocks per sequence",
    "E0306 16:40:07.708802 117 backend_model.cc:691] ERROR: Failed to create instance: unexpected error when creating "
    "modelInstanceState: maxTokensInPagedKvCache (29184) must be large enough to process at least 1 sequence to "
    "completion (i.e. must be larger than beam_width (1) * tokensPerBlock (128) * maxBlocksPerSeq (272))",
]


def test_a_paged_kv_cache_too_small_for_one_sequence_of_the_configured_length_is_the_kv_caches_refusal() -> None:
    d = diagnose_lines(TRTLLM_KV)
    assert (d.oom, d.stage, d.basis) == (True, "kv_cache", "kv_refusal")


def test_the_kv_caches_healthy_sizing_lines_alone_stay_none() -> None:
    d = diagnose_lines(TRTLLM_KV[:2])
    assert (d.oom, d.stage) == (False, "none")


# --- a serving framework's warm-up of a loaded model -------------------------------------------------------------

#: Triton's model warm-up (triton-inference-server/server #4330): TensorFlow lists the errors the warm-up sample met.
TRITON_WARMUP = [
    "E0504 19:31:21.415679 91 backend_model_instance.cc:99] warmup error: Internal - 2 root error(s) found.",
    "  (0) Resource exhausted: OOM when allocating tensor with shape[128,3,299,299] and type float on /job:localhost",
]


def test_a_model_warm_up_with_sample_requests_that_runs_out_is_the_warm_up_stage() -> None:
    d = diagnose_lines(TRITON_WARMUP)
    assert (d.oom, d.stage) == (True, "graph_capture")


def test_the_same_root_errors_under_a_requests_error_say_nothing_of_warm_up() -> None:
    d = diagnose_lines(["E0504 19:35:02.100000 91 infer.cc:120] inference failed: Internal - 2 root error(s) found.",
                        TRITON_WARMUP[1]])  # fmt: skip
    assert (d.oom, d.stage) == (True, "unknown")


def test_a_warm_up_that_sizes_memory_before_the_kv_cache_stays_start_up() -> None:
    # MindIE's warm-up measures memory before it sizes the cache, as TGI's does: start-up, however it is worded
    d = diagnose_lines(["Warmup failed, because of CUDA out of memory. Tried to allocate 2.00 GiB"])
    assert d.stage == "startup"


# --- a paused server taking its memory back ------------------------------------------------------------------------

#: SGLang's HTTP server asked to resume the memory it released (sgl-project/sglang #14092).
SGLANG_RESUME = [
    "(SGLangHttpServer pid=250977) [torch_memory_saver.cpp] CUresult error: 2 (out of memory)  file=csrc/utils.h "
    "func=cu_mem_create line=194",
    "(WorkerDict pid=209740) WARNING:2025-11-28 16:00:45,396:Async request to resume_memory_occupation timed out "
    "(attempt 1)",
]


def test_a_paused_server_that_runs_out_as_it_resumes_its_memory_was_serving() -> None:
    d = diagnose_lines(SGLANG_RESUME)
    assert (d.oom, d.stage) == (True, "runtime")


def test_a_sleeping_engines_wake_up_in_a_traceback_is_serving() -> None:
    # vLLM's sleep mode: the worker maps the memory it released again (gpu_worker.py wake_up)
    d = diagnose_lines(traceback("wake_up", path="/site-packages/vllm/v1/worker/gpu_worker.py"))
    assert (d.oom, d.stage) == (True, "runtime")


def test_the_memory_savers_error_alone_leaves_the_stage_unknown() -> None:
    d = diagnose_lines(SGLANG_RESUME[:1])
    assert (d.oom, d.stage) == (True, "unknown")


# --- an app's pipeline step over its data ---------------------------------------------------------------------------

#: Fizgig's text-encoder caching step (shootthesound/Fizgig #95): the encoder's forward fails, then the app reports the
#: step failed.
FIZGIG = [
    '  File "E:\\Fizgig\\venv\\Lib\\site-packages\\torch\\nn\\functional.py", line 2567, in embedding',
    "    return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)",
    "torch.AcceleratorError: CUDA error: out of memory",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    "",
    "Text Encoder Caching process completed.",
    "ERROR: Text Encoder Caching failed with exit code 1. Pipeline stopped.",
]


@pytest.mark.parametrize(
    "report",
    [
        FIZGIG[-1],
        "ERROR: Latent Caching failed with exit code 1.",
        "Image Captioning process failed with exit code 1",
        "[pipeline] Training step failed with exit code -9",
        "Sample generation failed with return code 1",
    ],
)
def test_a_pipeline_step_over_the_apps_data_that_fails_after_the_error_was_running(report: str) -> None:
    d = diagnose_lines([*FIZGIG[:-1], report])
    assert (d.oom, d.stage) == (True, "runtime")


@pytest.mark.parametrize(
    "report",
    ["ERROR: Model Loading failed with exit code 1.", "Environment Setup failed with exit code 1",
     "Inference server failed with exit code 1", "generation worker process failed with exit code 137", ""],
)  # fmt: skip
def test_a_step_that_builds_the_program_or_no_step_report_leaves_the_stage_unknown(report: str) -> None:
    d = diagnose_lines([*FIZGIG[:-1], report])
    assert (d.oom, d.stage) == (True, "unknown")


# --- no stage from what a function makes -------------------------------------------------------------------------

#: tenstorrent/tt-metal #30225: the host allocator refuses a mask inside ``get_decode_mask``, and nothing says when.
TT_METAL = [
    'ERROR 10-06 00:29:54 [engine.py:506]   File "/work/models/tt_transformers/tt/common.py", line 757, in '
    "get_decode_mask",
    "ERROR 10-06 00:29:54 [engine.py:506]     torch.full(",
    "ERROR 10-06 00:29:54 [engine.py:506] RuntimeError: [enforce fail at alloc_cpu.cpp:119] err == 0. "
    "DefaultCPUAllocator: can't allocate memory: you tried to allocate 4398046511104 bytes. Error code 12 (Cannot "
    "allocate memory)",
]


def test_a_function_named_for_what_it_makes_places_nothing_by_the_words_after_its_verb() -> None:
    d = diagnose_lines(TT_METAL)
    assert (d.oom, d.memory, d.stage, d.basis) == (True, "host", "unknown", "unknown")


@pytest.mark.parametrize("func", ["get_decode_mask", "make_sampling_tensors", "build_generation_inputs",
                                  "create_prefill_buffers", "compute_decode_attention_bias"])  # fmt: skip
def test_no_made_things_name_gives_a_stage(func: str) -> None:
    d = diagnose_lines(traceback("main", func))
    assert (d.oom, d.stage) == (True, "unknown")


@pytest.mark.parametrize("func", ["_forward_generate", "decode_step", "run_inference"])
def test_a_name_whose_verb_is_the_running_work_is_still_serving(func: str) -> None:
    d = diagnose_lines(traceback("main", func))
    assert (d.oom, d.stage) == (True, "runtime")


def test_a_made_things_name_under_a_serving_frame_is_serving() -> None:
    # the outermost frame that says wins: a request's generate around the helper
    d = diagnose_lines(traceback("generate_reply", "get_decode_mask"))
    assert (d.oom, d.stage) == (True, "runtime")

"""The doctor's general rules (issue 34 item 10, held-out classes closed by class, not by case): each on a few
composed lines, after the runtimes' own log calls and the public logs under tests/data/logs."""

from __future__ import annotations

import pytest

from benchmarks.common import candidate_rules
from tests.support.logs import cut_read_as_phase
from vllm_hpu_mm.logs.doctor import diagnose_lines
from vllm_hpu_mm.logs.doctor.decide import default_rules, judge
from vllm_hpu_mm.logs.doctor.scan import scan
from vllm_hpu_mm.logs.patterns import own_words

V0 = "INFO 08-19 07:51:03 model_runner.py:732] "
#: A start-up excerpt that stops right after a phase line: the weights loaded, the KV cache sized (a line that says its
#: phase finished), the capture announced. A healthy excerpt stops there as often as a failing one.
STOPS_AFTER_A_PHASE_LINE = [
    [V0 + "Loading model weights took 2.3463 GB"],
    [V0 + "Loading model weights took 2.3463 GB", "INFO 08-19 07:51:08 executor.py:56] # GPU blocks: 22982"],
    [V0 + "Loading model weights took 2.3463 GB", "INFO 08-19 07:51:08 executor.py:56] # GPU blocks: 22982",
     V0 + "Capturing the model for CUDA graphs. This may lead to unexpected consequences"],
]  # fmt: skip


@pytest.mark.parametrize("lines", STOPS_AFTER_A_PHASE_LINE, ids=("loaded", "kv_sized", "capture_started"))
def test_a_run_that_stops_after_a_phase_line_is_no_failure_under_any_fitted_rules(lines: list[str]) -> None:
    features = scan(lines)
    # every rule set the fit may choose, with any votes: none reads the last phase line as where it failed
    for rules in candidate_rules(default_rules().votes):
        assert judge(features, rules).stage == "none", rules


CORE = "(EngineCore_DP0 pid=100) ERROR 07-06 23:22:52 [core.py:1233] "
SITE = "/usr/local/lib/python3.12/dist-packages/"


def _frame(path: str, func: str, call: str = "x()") -> list[str]:
    return [f'{CORE}  File "{SITE}{path}", line 10, in {func}', f"{CORE}    {call}"]


def _cut(*frames: tuple[str, str]) -> list[str]:
    """An engine core's traceback the log stops inside, before its error line."""
    return [CORE + "Traceback (most recent call last):", *(line for f in frames for line in _frame(*f))]


def _stage(lines: list[str]) -> str:
    """What the frames of ``lines`` mean: the shipped rules with a cut read as its frames' phase (the shipped doctor
    claims nothing of a cut: tests/logs/test_doctor_cut.py)."""
    j = judge(scan(lines), cut_read_as_phase())
    return "unknown (no OOM claimed)" if j.basis == "undecided" else j.stage


def test_v1s_execute_model_is_an_engine_step() -> None:
    # heldout_round4/club3090_613: only the engine core's step calls V1's worker / runner execute_model
    lines = _cut(("vllm/v1/worker/gpu_worker.py", "execute_model"), ("vllm/v1/worker/gpu_model_runner.py",
                 "execute_model"), ("vllm/v1/worker/gpu_model_runner.py", "_model_forward"))  # fmt: skip
    assert _stage(lines) == "runtime"


@pytest.mark.parametrize("path", ["vllm/v1/worker/gpu/model_runner.py", "vllm/worker/model_runner.py"])
def test_an_execute_model_that_also_runs_dummy_runs_names_no_phase(path: str) -> None:
    # the V2 runner's dummy run and V0's profile_run call execute_model: the name alone says nothing
    assert _stage(_cut((path, "execute_model"), (path, "_model_forward"))) == "none"


def test_an_execute_model_under_capture_is_capture() -> None:
    lines = _cut(("vllm/v1/worker/gpu_model_runner.py", "capture_model"),
                 ("vllm/v1/worker/gpu_model_runner.py", "execute_model"))  # fmt: skip
    assert _stage(lines) == "graph_capture"


def test_the_web_frameworks_request_handling_is_serving() -> None:
    # heldout/vllm_11251: vLLM's API server serves HTTP only once its engine is built
    lines = _cut(("starlette/middleware/base.py", "coro"), ("starlette/routing.py", "handle"),
                 ("fastapi/routing.py", "run_endpoint_function"))  # fmt: skip
    assert _stage(lines) == "runtime"


def test_an_apps_lifespan_is_not_a_request() -> None:
    lines = _cut(("starlette/routing.py", "lifespan"), ("vllm/model_executor/model_loader/loader.py", "load_model"))
    assert _stage(lines) == "startup"


def test_the_sampler_dummy_run_is_its_warm_up_unless_profiling_is_in_view() -> None:
    sampler = ("vllm/v1/worker/gpu_model_runner.py", "_dummy_sampler_run")
    assert _stage(_cut(sampler)) == "graph_capture"
    assert _stage(_cut(("vllm/v1/worker/gpu_model_runner.py", "profile_run"), sampler)) == "startup"
    assert _stage(_cut(("vllm/v1/worker/gpu_worker.py", "compile_or_warm_up_model"), sampler)) == "graph_capture"


def test_one_logs_frame_names_are_no_evidence() -> None:
    # a token one labelled log voted for decides under no rule set the fit may choose
    oom = [CORE + "Traceback (most recent call last):", *_frame("mylib/engine.py", "build_things"),
           CORE + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]  # fmt: skip
    features = scan(oom)
    for rules in candidate_rules({"build_things": {"startup": 1}}):
        assert judge(features, rules).stage == "unknown", rules
    two = {"build_things": {"startup": 2}}
    assert any(judge(features, rules).stage == "startup" for rules in candidate_rules(two))


#: Each accelerator API's and runtime's own words for running out of device memory (from their sources and docs).
DEVICE_WORDS = [
    "RuntimeError: CUDA driver error: CUDA_ERROR_OUT_OF_MEMORY",
    "cupy.cuda.runtime.CUDARuntimeError: cudaErrorMemoryAllocation: out of memory",
    "ggml_vulkan: Device memory allocation of size 123 failed. vk::Device::allocateMemory: ErrorOutOfDeviceMemory",
    "RuntimeError: UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
    "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "rocBLAS error: rocblas_status_memory_error",
    "RuntimeError: ACL_ERROR_RT_MEMORY_ALLOCATION, error code 207001",
    "EL0004: [PID: 28794] 2025-08-26-03:58:55.257.127 Failed to allocate memory.",
    "[TRT] [E] Requested amount of GPU memory (8589934592 bytes) could not be allocated.",
    "alloc_tensor_range: failed to allocate CUDA0 buffer of size 151851674624",
    # (ggml's own report; llama.cpp's loader summary, "unable to allocate ROCm0 buffer", has its own rule:
    # tests/logs/test_doctor_round13.py)
    "alloc_tensor_range: failed to allocate ROCm0 buffer of size 1073741824",
    "ggml_metal_init: error: failed to allocate buffer, size = 4096.00 MiB",
    "Error: failed to allocate device memory for the model",
    "ValueError: insufficient VRAM to load the model",
    "RuntimeError: not enough GPU memory for the requested batch",
    # any vendor's allocation call reported failed (sophgo/LLM-TPU #8's bmlib, Ascend's, oneAPI's, CUDA's), and the
    # device's memory named in plain words
    "[bmlib_memory][error] bm_alloc_gmem failed, dev_id = 0, size = 0xc0fb4000",
    "[ERROR] aclrtMalloc failed, ret = 207001",
    "zeMemAllocDevice failed with ZE_RESULT_ERROR_UNKNOWN",
    "cnrtMalloc() failed: 632046",
    "E: device memory allocation failed for 2.00 GiB",
    "RuntimeError: out of device memory while creating the model",
    "error: not enough memory on the device to load the model",
    # SGLang's pool configurator: the weights leave nothing for the KV cache (a refusal, read as kv_cache)
    "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88.",
]
#: Not device memory: a host buffer, pinned host memory, the host side of Vulkan, advice about memory.
NOT_DEVICE = [
    # pinned memory refused: ggml's CUDA host buffer falls back to a plain CPU buffer (a warning; the load goes on)
    "warning: failed to allocate 512.00 MiB of pinned memory: invalid argument",
    # host allocations named by their call: pinned host memory, libc's malloc
    "cudaMallocHost failed: out of resources",
    "malloc failed while reading the prompt",
    "INFO gpu_worker.py] Memory profiling takes 5.2 seconds. Allocating 2.1 GiB for the KV cache",
    # TensorRT's engine builder skipping a tactic that needs more memory (a warning; the build goes on)
    "[10/01/2024-10:00:00] [TRT] [W] Requested amount of GPU memory (1073741824 bytes) could not be allocated. There "
    "may not be enough free memory for allocation to succeed.",
    "[W] [TRT] Requested amount of GPU memory (1073741824 bytes) could not be allocated.",
    # gRPC's status for a message over the size limit (TGI's router and shards, Triton)
    "\tstatus = StatusCode.RESOURCE_EXHAUSTED",
]


@pytest.mark.parametrize("line", DEVICE_WORDS)
def test_every_runtimes_device_oom_wording_is_read(line: str) -> None:
    assert judge(scan([line]), default_rules()).memory == "device"


@pytest.mark.parametrize("line", NOT_DEVICE)
def test_host_buffers_and_allocation_notes_are_no_device_oom(line: str) -> None:
    assert judge(scan([line]), default_rules()).stage == "none"


@pytest.mark.parametrize(
    "line",
    ["vk::Device::allocateMemory: ErrorOutOfHostMemory",
     "RuntimeError: [enforce fail at alloc_cpu.cpp:72] data. DefaultCPUAllocator: not enough memory: you tried to "
     "allocate 11534336 bytes.",
     "ggml_backend_cuda_host_buffer_type_alloc_buffer: failed to allocate CUDA_Host buffer of size 1024"],
)  # fmt: skip
def test_host_side_errors_are_host_memory(line: str) -> None:
    # Vulkan's host-side error; torch's CPU allocator (c10/core/impl/alloc_cpu.cpp), vLLM's CPU backend included;
    # a ggml host buffer type refusing its buffer: host memory, as the CPU buffer type's refusal is
    # (ggml/src/ggml-backend.cpp@0054c013), not the device's
    assert judge(scan([line]), default_rules()).memory == "host"


WARMUP_FRAMES = (
    ("vllm_gaudi/v1/worker/hpu_worker.py", "compile_or_warm_up_model"),
    ("vllm_gaudi/v1/worker/hpu_model_runner.py", "warmup_model"),
)


def test_a_failure_stated_with_its_reason_before_a_cut_traceback_explains_it() -> None:
    # held-out CLI round 8, G09: the engine's error line gives the reason (a graph compile failed), the traceback after
    # it is cut; read as a cut in the warm-up, it was an out-of-memory false alarm.
    lines = [CORE + "EngineCore failed to start: synStatus=26 [Generic failure] Graph compile failed.",
             *_cut(*WARMUP_FRAMES)]  # fmt: skip
    assert _stage(lines) == "none"


def test_vllms_bare_failed_to_start_line_states_no_reason_and_the_cut_still_counts() -> None:
    lines = [CORE + "EngineCore failed to start.", *_cut(*WARMUP_FRAMES)]
    assert _stage(lines) == "graph_capture"


# --- a request the runtime echoes ----------------------------------------------------------------------------------

SERVING = ["(APIServer pid=2150) INFO 11-20 09:14:02 [api_server.py:1896] vLLM API server version 0.32.0",
           "(EngineCore_DP0 pid=2211) INFO 11-20 09:15:20 [gpu_worker.py:760] Available KV cache memory: 52.61 GiB",
           "(APIServer pid=2150) INFO:     Application startup complete."]  # fmt: skip
API = "(APIServer pid=2150) {} 11-20 10:03:01 [request_logger.py:{}] "
CUDA_OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
ASKED = (
    'My job printed "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" and then "Killed". Why?'
)
ECHOES = [
    # vLLM 0.32's request logger (vllm/entrypoints/serve/utils/request_logger.py): the prompt at DEBUG, then the params
    API.format("DEBUG", 55) + f"Request chatcmpl-5b2e details: prompt: '<|im_start|>user\\n{ASKED}<|im_end|>\\n', "
    "prompt_token_ids: None, prompt_embeds shape: None.",
    API.format("DEBUG", 75) + 'Request chatcmpl-5b2e JSON body: {"messages": [{"role": "user", "content": "' + ASKED,
    API.format("INFO", 109) + f"Generated response chatcmpl-5b2e (streaming complete): output: '{ASKED}', "
    "finish_reason: stop",
    # earlier releases' one record, prompt and params together
    f"INFO 05-22 02:20:59 logger.py:36] Received request cmpl-9f2-0: prompt: '{ASKED}', params: SamplingParams(n=1)",
    # SGLang under --log-requests, LM Studio's request body
    f"[2025-01-02 10:00:00] Receive: obj=GenerateReqInput(text='{ASKED}', sampling_params={{'max_new_tokens': 64}})",
    f'2025-05-07 18:19:54 [DEBUG] Received request: POST to /v1/chat/completions with body {{"content": "{ASKED}"}}',
]  # fmt: skip


@pytest.mark.parametrize("echo", ECHOES, ids=("details", "json_body", "output", "received", "sglang", "lm_studio"))
def test_a_request_the_runtime_echoes_is_no_failure(echo: str) -> None:
    # held-out CLI round 8, doctor case 12: the user's prompt quoting an OOM and "Killed", answered 200 OK
    lines = [
        *SERVING,
        echo,
        '(APIServer pid=2150) INFO:     127.0.0.1:50420 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    ]
    d = diagnose_lines(lines)
    assert (d.oom, d.stage) == (False, "none")


def test_an_echoed_prompt_over_several_windows_of_one_line_is_no_failure() -> None:
    # an over-long line is read in windows that share its number (logs/reading.py): the prompt's later windows hold no
    # record head of their own
    head = API.format("DEBUG", 55) + "Request chatcmpl-9aa1 details: prompt: '" + "<|image_pad|>" * 600
    d = diagnose_lines([*enumerate(SERVING, 1), (4, head), (4, "<|image_pad|>" * 600 + ASKED + "', prompt_token_ids")])
    assert (d.oom, d.stage) == (False, "none")


def test_a_real_failure_after_an_echoed_request_is_still_read_at_serving() -> None:
    received = (
        API.format("INFO", 66) + "Received request chatcmpl-5b2e: params: SamplingParams(n=1), lora_request: None."
    )
    d = diagnose_lines(
        [*SERVING, received, "(EngineCore_DP0 pid=2211) ERROR 11-20 10:03:02 [core.py:1555] " + CUDA_OOM]
    )
    assert (d.oom, d.stage) == (True, "runtime")


# --- words inside a value the user supplied ------------------------------------------------------------------------

MODEL_PATH = "/mnt/oom-repro/cuda_out_of_memory_case/Qwen2.5-VL-7B-Instruct"
#: A healthy vLLM 0.32 start whose model path, served name and cache folder hold memory words (held-out CLI round 10,
#: doctor case 14): the banner, non-default args and engine config lines (api_server.py, core.py) echo them.
VALUES_START = [
    "(APIServer pid=901) INFO 11-30 11:10:01 [api_server.py:1840] vLLM server version 0.32.0, serving model "
    + MODEL_PATH,
    f"(APIServer pid=901) INFO 11-30 11:10:01 [api_server.py:286] non-default args: {{'model': '{MODEL_PATH}', "
    "'served_model_name': ['qwen-vl-OutOfMemoryError-triage'], 'download_dir': '/scratch/killed_jobs/hf-cache'}",
    f"(EngineCore_DP0 pid=1010) INFO 11-30 11:10:09 [core.py:134] Initializing a V1 LLM engine (v0.32.0) with config: "
    f"model='{MODEL_PATH}', dtype=torch.bfloat16, served_model_name=qwen-vl-OutOfMemoryError-triage",
    f"(EngineCore_DP0 pid=1010) INFO 11-30 11:10:11 [gpu_model_runner.py:5040] Starting to load model {MODEL_PATH}...",
    "(EngineCore_DP0 pid=1010) INFO 11-30 11:11:20 [gpu_worker.py:760] Available KV cache memory: 52.41 GiB",
    "(EngineCore_DP0 pid=1010) INFO 11-30 11:11:39 [gpu_model_runner.py:6582] Graph capturing finished in 18 secs",
    "(APIServer pid=901) INFO:     Application startup complete.",
    '(APIServer pid=901) INFO:     10.1.0.4:50130 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
]  # fmt: skip


def test_memory_words_in_a_model_path_or_served_name_are_no_failure_nor_a_start() -> None:
    d = diagnose_lines(VALUES_START)
    assert (d.oom, d.stage, d.runs) == (False, "none", 1)


def test_a_failed_start_before_a_start_whose_values_hold_memory_words_is_the_one_diagnosed() -> None:
    # held-out CLI round 10, doctor case 16: the second start's values made a third run and an OOM of unknown stage
    failed = [*SERVING[:1], *_cut(("vllm/v1/worker/gpu_model_runner.py", "profile_run")), CORE + CUDA_OOM]
    d = diagnose_lines([*failed, *VALUES_START])
    assert (d.run, d.runs, d.stage) == (1, 2, "startup")


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ("model='/mnt/oom-repro/x' dtype=torch.bfloat16", "/mnt/oom-repro/x"),
        ("{'served_model_name': ['qwen-OutOfMemoryError-triage']}", "qwen-OutOfMemoryError-triage"),
        ("served_model_name=qwen-OutOfMemoryError-triage, seed=0", "qwen-OutOfMemoryError-triage"),
    ],
)
def test_a_value_the_user_supplied_is_blanked_from_the_programs_own_words(line: str, value: str) -> None:
    said = own_words(line)
    assert value not in said
    assert len(said) == len(line)


@pytest.mark.parametrize(
    "line",
    [
        'level=ERROR source=server.go:613 msg="llama runner terminated" error="cudaMalloc failed: out of memory"',
        '{"function":"update_slots","level":"INFO","msg":"slot released"}',
        '127.0.0.1 - - [07/Feb/2026 01:28:11] "POST /v1/chat/completions HTTP/1.1" 200 -',
        "[Warmup][Graph/Multimodal][1/7] batch_size:1 img_size:1600",
        "Check failed: (__e == VK_SUCCESS) is false: Vulkan Error, code=-2: VK_ERROR_OUT_OF_DEVICE_MEMORY",
        "error_type=torch.OutOfMemoryError exit_code=137 signal=-9",
    ],
)
def test_a_programs_messages_names_routes_and_figures_are_its_own_words(line: str) -> None:
    assert own_words(line) == line

"""The classes rounds 24 and 25's misses belong to (issue 34), each pinned on lines composed after the programs' sources
and the public logs under tests/data/logs/heldout_round24/ and heldout_round25/: SGLang's retraction of requests when
its KV pool is full (and SGLang named from its own records), a scope frame whose inner frames an excerpt left out, a
served request's id in the failure's own line, llama.cpp's early loader summary of a buffer it could not allocate
(and LlamaEdge named as its host), and the interpreter's own message printed before a traceback."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

# --- SGLang's retraction: its KV pool exhausted while serving -----------------------------------------------------

RETRACTIONS = (
    # v0.4 (sgl-project/sglang #4184), the first releases, and the wording since check_decode_mem's rename
    "[2025-03-07 21:49:33 TP13] Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.1474 -> 0.1845",
    "[2024-05-01 10:00:00] decode out of memory happened, #retracted_reqs: 2, #new_token_ratio: 0.5000 -> 0.6000",
    "[2025-09-01 12:00:00 DP0 TP3] KV cache pool is full. Retract requests. #retracted_reqs: 8, #new_tokens_gained: 64",
)


def test_sglangs_retraction_of_requests_is_a_serving_time_memory_exhaustion() -> None:
    for line in RETRACTIONS:
        d = diagnose_lines([line, line])
        assert (d.oom, d.memory, d.stage) == (True, "device", "runtime"), line


def test_sglang_is_named_from_its_own_records() -> None:
    d = diagnose_lines([RETRACTIONS[0]])
    assert (d.source.framework, d.source.name) == ("other", "sglang")
    # its logger's prefix alone names it, with no word of memory
    d = diagnose_lines(["[2025-03-07 21:49:30 DP1 TP12] Prefill batch. #new-seq: 1, #new-token: 5"])
    assert d.source.name == "sglang"


def test_a_healthy_sglang_log_stays_none() -> None:
    d = diagnose_lines([
        "[2025-03-07 21:49:30 TP0] Decode batch. #running-req: 4, #token: 2048, token usage: 0.42, gen throughput "
        "(token/s): 120.5, #queue-req: 0",
        "[2025-03-07 21:49:31 TP0] Prefill batch. #new-seq: 1, #new-token: 33, #cached-token: 0, token usage: 0.42",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (False, "none")


# --- a scope frame whose inner frames the excerpt left out --------------------------------------------------------

HIP_OOM = (
    "torch.cuda.OutOfMemoryError: HIP out of memory. Tried to allocate 4.70 GiB. GPU 0 has a total capacty of 63.98 GiB"
)
API_SERVER = [
    "Traceback (most recent call last):",
    'File "/opt/conda/lib/python3.9/site-packages/vllm/entrypoints/api_server.py", line 106, in <module>',
    "  engine = AsyncLLMEngine.from_engine_args(",
    'File "/opt/conda/lib/python3.9/site-packages/vllm/engine/async_llm_engine.py", line 348, in from_engine_args',
]


def test_a_scope_frame_above_an_elision_says_nothing_of_the_stage() -> None:
    # vllm-project/vllm #4121: the engine's constructor loads, profiles, sizes the cache and captures inside it; the
    # frames that would say which are in the lines the excerpt left out
    d = diagnose_lines([HIP_OOM, *API_SERVER, "..."])
    assert (d.oom, d.stage) == (True, "unknown")


def test_a_scope_frame_shown_whole_still_places_the_failure() -> None:
    d = diagnose_lines([*API_SERVER, "  engine = cls(", HIP_OOM])
    assert (d.oom, d.stage) == (True, "startup")


def test_a_phase_frame_above_an_elision_still_places_the_failure() -> None:
    frames = [*API_SERVER, 'File "/x/vllm/worker/worker.py", line 9, in profile_run', "  self.model_runner.run()"]
    d = diagnose_lines([HIP_OOM, *frames, "..."])
    assert (d.oom, d.stage) == (True, "startup")


# --- a served request's id in the failure's own line --------------------------------------------------------------


def test_a_failure_naming_a_served_requests_id_is_at_serving() -> None:
    # vllm-project/tpu-inference #1710: the KV offload connector's gather for a request runs out of HBM
    for rid in ("cmpl-9cbf94ef9250316c-0", "chatcmpl-3f2a9c1e0b7d4e5f"):
        d = diagnose_lines([
            f"(EngineCore_DP0 pid=344) ERROR 02-10 19:23:35 [tpu_offload_connector.py:2498] Error gathering blocks for "
            f"request {rid}: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 832.0K.",
        ])  # fmt: skip
        assert (d.oom, d.stage) == (True, "runtime"), rid


def test_a_request_id_without_a_failure_claims_nothing() -> None:
    d = diagnose_lines(["INFO 02-10 19:23:35 [logger.py:43] Received request cmpl-9cbf94ef9250316c-0: prompt: 'hi'"])
    assert (d.oom, d.stage) == (False, "none")


# --- llama.cpp's early loader summary, under LlamaEdge ------------------------------------------------------------

LLAMAEDGE = [
    "[INFO] Model name: Yi-34Bx2-MoE-60B",
    "[INFO] Number of layers to run on the GPU: 100",
    "llm_load_tensors: ggml ctx size =    0.76 MiB",
    "llama_model_load: error loading model: failed to allocate buffer",
    "llama_load_model_from_file: failed to load model",
    "[2024-03-07 20:57:31.574] [error] [WASI-NN] GGML backend: Error: unable to init model.",
]


def test_the_loaders_failed_buffer_is_an_out_of_memory_failure_at_start_up() -> None:
    # LlamaEdge/LlamaEdge #130: releases of early 2024 threw "failed to allocate buffer" when the weights' buffer
    # could not be allocated
    d = diagnose_lines(LLAMAEDGE)
    assert (d.oom, d.memory, d.stage) == (True, "device", "startup")


def test_llamaedge_is_named_as_the_host_of_llama_cpp() -> None:
    d = diagnose_lines(LLAMAEDGE)
    assert (d.source.name, d.source.host) == ("llama.cpp", "llamaedge")
    assert "LlamaEdge" in d.source.describe


def test_the_loaders_summary_after_a_tensor_it_could_not_initialise_is_an_oom_at_start_up_too() -> None:
    """The early-2024 summary, as the named one (test_doctor_round13.py): this test pinned no out-of-memory failure
    after the backend's "failed to initialize tensor" line until stop 50's labels of record read that case as one."""
    init = "alloc_tensor_range: failed to initialize tensor blk.0.attn_q.weight"
    d = diagnose_lines([init, "llama_model_load: error loading model: failed to allocate buffer"])
    assert (d.oom, d.memory, d.stage) == (True, "device", "startup")


def test_a_healthy_llama_cpp_load_stays_none() -> None:
    d = diagnose_lines([
        "llm_load_tensors: offloaded 61/61 layers to GPU",
        "llm_load_tensors:      CUDA0 buffer size = 20480.00 MiB",
        "llama_new_context_with_model: KV self size  =  120.00 MiB",
        "[2024-03-07 20:57:35.000] [info] [WASI-NN] GGML backend: llama_system_info: AVX = 1",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (False, "none")


# --- the interpreter's own message before a traceback -------------------------------------------------------------

FORK_WARMUP = [
    "INFO 01-26 14:30:11 [hpu_model_runner.py:3943] [Warmup][Graph/mix/decode][1/112] batch_size:16 query_len:1 "
    "num_blocks:8599 free_mem:7.476 GiB",
]
FORK_TRACEBACK = [
    "ERROR 01-26 14:30:12 [engine.py:474] Traceback (most recent call last):",
    'ERROR 01-26 14:30:12 [engine.py:474]   File "/data/vllm-fork/vllm/engine/multiprocessing/engine.py", line 462, in '
    "run_mp_engine",
    "ERROR 01-26 14:30:12 [engine.py:474]     engine = MQLLMEngine.from_vllm_config(",
    "...",
]
PYTHON_MESSAGES = (
    "not enough values to unpack (expected 3, got 2)",
    "too many values to unpack (expected 2)",
    "'NoneType' object has no attribute 'shape'",
    "'int' object is not subscriptable",
    "forward() got an unexpected keyword argument 'attn_metadata'",
    "name 'htorch' is not defined",
    "list index out of range",
)


def test_the_interpreters_message_before_a_traceback_is_an_error_of_another_kind() -> None:
    # HabanaAI/vllm-fork #2223: logger.exception(e) prints the unpack error's message, then its traceback
    for message in PYTHON_MESSAGES:
        d = diagnose_lines([*FORK_WARMUP, f"ERROR 01-26 14:30:12 [engine.py:474] {message}", *FORK_TRACEBACK])
        assert (d.oom, d.stage) == (False, "none"), message


def test_a_preface_before_a_cut_traceback_still_says_nothing() -> None:
    # vLLM's bare "EngineCore failed to start." states no error: the cut traceback stays undecided
    d = diagnose_lines(
        [*FORK_WARMUP, "ERROR 01-26 14:30:12 [engine.py:474] EngineCore failed to start.", *FORK_TRACEBACK]
    )
    assert (d.oom, d.basis) == (False, "undecided")

"""The classes rounds 26 and 27's misses belong to (issue 34), each pinned on lines composed after the programs' sources
and the public logs under tests/data/logs/heldout_round26/ and heldout_round27/: a ggml backend's buffer type refusing
a buffer (the host's, for the CPU's), asyncio's report of an exception nobody retrieved, which names it before its
traceback, and Ascend's runtime failing to get memory as its ACL graph capture begins; and, for logs of runtimes the
rounds have not shown yet, ONNX Runtime's arena, torch-directml's and Windows' own words for memory that ran out."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

# --- a ggml backend's buffer type refusing a buffer ----------------------------------------------------------------

CPU_KV = [
    "llama_new_context_with_model: n_ctx      = 1048576",
    "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 137438953504",
    "llama_kv_cache_init: failed to allocate buffer for kv cache",
    "llama_new_context_with_model: llama_kv_cache_init() failed for self-attention cache",
]


def test_the_kv_caches_cpu_buffer_refused_is_a_kv_cache_failure_of_host_memory() -> None:
    # ggml-org/llama.cpp #8101: the CPU buffer type's aligned malloc returned nothing for the KV cache
    d = diagnose_lines(CPU_KV)
    assert (d.oom, d.memory, d.stage) == (True, "host", "kv_cache")


def test_any_backends_buffer_refused_for_the_kv_cache_is_a_kv_cache_failure() -> None:
    for line in (
        "ggml_backend_opencl_buffer_type_alloc_buffer: failed to allocate 301.75 MiB",
        "ggml_backend_sycl_buffer_type_alloc_buffer: can't allocate 8589934592 Bytes of memory on device",
    ):
        d = diagnose_lines([line, "llama_kv_cache_unified: failed to allocate buffer for kv cache"])
        assert (d.oom, d.memory, d.stage) == (True, "device", "kv_cache"), line


def test_ggml_sycls_pools_and_ascends_host_refusals_name_their_memory() -> None:
    for line, memory in (
        ("ggml_sycl_pool_leg::alloc: can't allocate 1073741824 Bytes of memory on device/GPU", "device"),
        ("ggml_sycl_host_malloc: can't allocate 536870912 Bytes of memory on host", "host"),
        ("[PID: 1119] 2026-10-10-01:49:39.813.031 Resource_Error_Insufficient_Host_Memory(EL0018): Failed to allocate "
         "134217728 bytes host memory requested by the RUNTIME module.", "host"),
    ):  # fmt: skip
        d = diagnose_lines([line])
        assert (d.oom, d.memory) == (True, memory), line


def test_a_buffer_refused_for_the_weights_is_a_start_up_failure() -> None:
    d = diagnose_lines([
        "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 147169738752",
        "alloc_tensor_range: failed to allocate CPU_REPACK buffer of size 147169738752",
        "llama_model_load: error loading model: unable to allocate CPU_REPACK buffer",
    ])  # fmt: skip
    assert (d.oom, d.memory, d.stage) == (True, "host", "startup")


def test_the_kv_caches_summary_alone_is_a_kv_cache_failure() -> None:
    # without ggml's line above it, the summary alone says the cache's buffer could not be made, as the labels of
    # record read it where a program relays only the summary (round 99, LM Studio: test_doctor_round98_101_recognition)
    d = diagnose_lines(CPU_KV[:1] + CPU_KV[2:])
    assert (d.oom, d.stage) == (True, "kv_cache")


def test_a_healthy_llama_cpp_context_with_cpu_buffers_stays_none() -> None:
    d = diagnose_lines([
        "llama_kv_cache_init:        CPU KV buffer size =  1024.00 MiB",
        "llama_new_context_with_model:        CPU  output buffer size =     0.12 MiB",
        "llama_new_context_with_model:        CPU compute buffer size =   164.01 MiB",
        "ggml_backend_cpu_buffer_type_alloc_buffer: allocated buffer of size 1073741824",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (False, "none")


# --- asyncio's report of an exception nobody retrieved ---------------------------------------------------------------

ENGINE_FRAMES = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/engine/async_llm_engine.py", line 939, in run_engine_loop',
    "    result = task.result()",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/engine/async_llm_engine.py", line 868, in engine_step',
    "    request_outputs = await self.engine.step_async(virtual_engine)",
    "...",
]


def test_a_never_retrieved_exception_named_before_its_traceback_is_an_error_of_another_kind() -> None:
    # vllm-project/vllm #8400: the future's repr names the assertion the cut traceback below it raised
    for header in (
        ["Future exception was never retrieved",
         "future: <Future finished exception=AssertionError('seq_len 512 should be equal to N_txt + N_img')>"],
        ["Task exception was never retrieved",
         "future: <Task finished name='Task-7' coro=<run_engine_loop() done, defined at /x/engine.py:9> "
         "exception=ValueError('bad image size')>"],
    ):  # fmt: skip
        d = diagnose_lines([*header, *ENGINE_FRAMES])
        assert (d.oom, d.stage) == (False, "none"), header


def test_a_never_retrieved_out_of_memory_error_is_still_one() -> None:
    d = diagnose_lines([
        "Future exception was never retrieved",
        "future: <Future finished exception=OutOfMemoryError('CUDA out of memory. Tried to allocate 2.00 GiB')>",
        *ENGINE_FRAMES,
    ])  # fmt: skip
    assert d.oom is True


def test_a_cut_traceback_without_the_report_stays_undecided() -> None:
    d = diagnose_lines(ENGINE_FRAMES)
    assert (d.oom, d.basis) == (False, "undecided")


# --- Ascend's runtime failing to get memory as its graph capture begins ---------------------------------------------

ASCEND = "(EngineCore pid=386) ERROR 07-15 13:23:59 [core.py:1136] "
CAPTURE = [
    f"{ASCEND}[Error]: Failed to apply for memory.",
    f"{ASCEND}        Check the remaining storage space in the hardware environment.",
    f"{ASCEND}EE9999: Inner Error!",
    f"{ASCEND}EE9999[PID: 386] [SqCqManage]Alloc sq cq fail, stream_id=1984, retCode=0x7020023.",
    f"{ASCEND}        TraceBack (most recent call last):",
    f"{ASCEND}       rtStreamBeginCapture execution failed, reason=driver error:resource alloc fail",
    f"{ASCEND}       begin capture stream failed, runtime result = 207005",
]


def test_ascends_capture_that_could_not_get_memory_is_a_graph_capture_failure() -> None:
    # vllm-project/vllm-ascend #12113: torch_npu's words for error 207005, then CANN's capture call that failed
    d = diagnose_lines(CAPTURE)
    assert (d.oom, d.memory, d.stage) == (True, "device", "graph_capture")


def capture_call(code: int) -> list[str]:
    return [
        f"{ASCEND}RuntimeError: capture_begin:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:156 NPU function "
        f"error: c10_npu::acl::AclmdlRICaptureBegin(capture_stream_, capture_mode), error code is {code}",
        f"{ASCEND}[ERROR] 2025-08-05-11:23:25 (PID:519998, Device:0, RankID:-1) ERR00100 PTA call acl api failed",
    ]


def test_torch_npus_capture_call_refused_memory_names_the_stage_itself() -> None:
    d = diagnose_lines(capture_call(207001))  # ACL_ERROR_RT_MEMORY_ALLOCATION
    assert (d.oom, d.stage) == (True, "graph_capture")


def test_ascends_other_errors_and_healthy_capture_stay_none() -> None:
    for lines in (
        # the capture's begin refused with a runtime resource's code alone (vllm-project/vllm-ascend #11990), or
        # another error code: no memory named
        capture_call(207005),
        [*capture_call(207000), f"{ASCEND}[Error]: This feature is not supported."],
        # a healthy capture
        ["INFO 07-15 13:23:50 [acl_graph.py:120] Capturing ACL graphs (mixed prefill-decode, PIECEWISE): 100%|| 67/67",
         "INFO 07-15 13:23:58 [model_runner_v1.py:2466] Graph capturing finished in 8 secs, took 0.61 GiB"],
    ):  # fmt: skip
        d = diagnose_lines(lines)
        assert (d.oom, d.stage) == (False, "none"), lines


# --- other runtimes' words for memory that ran out -------------------------------------------------------------------


def test_other_runtimes_words_for_memory_that_ran_out_name_which_memory() -> None:
    for line, memory in (
        ("2024-05-01 10:00:00.1 [E:onnxruntime:, sequential_executor.cc:516 ExecuteKernel] Non-zero status code "
         "returned while running MatMul node. Status Message: /onnxruntime_src/onnxruntime/core/framework/"
         "bfc_arena.cc:376 void* onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, onnxruntime::Stream*) "
         "Failed to allocate memory for requested buffer of size 4531027968", "device"),
        ("RuntimeError: Could not allocate tensor with 4915840 bytes. There is not enough GPU video memory available!",
         "device"),
        ("OSError: [WinError 1455] The paging file is too small for this operation to complete. Error loading "
         "\"C:\\venv\\lib\\site-packages\\torch\\lib\\cudnn_cnn_infer64_8.dll\" or one of its dependencies.", "host"),
        ("Error: SafetensorError: Error while deserializing header: The paging file is too small for this operation "
         "to complete. (os error 1455)", "host"),
    ):  # fmt: skip
        d = diagnose_lines([line])
        assert (d.oom, d.memory) == (True, memory), line


def test_their_healthy_lines_and_other_errors_stay_none() -> None:
    for line in (
        "2024-05-01 10:00:00.1 [I:onnxruntime:, bfc_arena.cc:29 BFCArena] Creating BFCArena for Cuda with following "
        "configs: initial_chunk_size_bytes: 1048576 max_dead_bytes_per_chunk: 134217728",
        'OSError: [WinError 126] The specified module could not be found. Error loading "torch\\lib\\c10.dll"',
        "torch-directml: using device 0: AMD Radeon RX 6600 (8 GB video memory)",
    ):
        d = diagnose_lines([line])
        assert (d.oom, d.stage) == (False, "none"), line

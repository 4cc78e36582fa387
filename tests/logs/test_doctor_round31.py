"""The classes rounds 28 to 31's misses belong to (issue 34), each pinned on lines composed after the programs' sources
and the public logs under tests/data/logs/heldout_round28/ ... heldout_round31/: a scheduler refusing to place a model
whose memory does not fit, TensorRT-LLM's generation step and TensorRT's engine build, a readiness answered before a
failure, and logs that show an error of another kind and no out-of-memory line (a failed check logged before its
traceback, the same failure printed again and cut, a collective's broken connection), which are answered ``none``."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

# --- a scheduler's refusal to place a model where its memory does not fit -----------------------------------------


def test_a_refusal_to_place_a_model_in_too_little_device_memory_is_a_start_up_failure() -> None:
    # helixml/helix #93: the runner refuses before anything loads
    for line in (
        "2024-01-10T10:23:03Z ERR api/pkg/runner/controller.go:221 > error in task loop: cannot fit model requiring "
        "gpu memory 6.29 into available gpu memory -1.17",
        "error: could not place the model (needs 40 GiB) on device memory of 24 GiB",
        "Unable to schedule model llama-70b onto available GPU memory",
    ):
        d = diagnose_lines([line])
        assert (d.oom, d.memory, d.stage) == (True, "device", "startup"), line


def test_a_fit_that_succeeds_or_names_no_memory_stays_none() -> None:
    for line in (
        "🟠 Fitting model requiring gpu memory 6.29 into available gpu memory 20.10",
        "No available slot found for the model",  # a slot refusal (Xinference): not memory
        "cannot fit model name into the column width",
    ):
        d = diagnose_lines([line])
        assert (d.oom, d.stage) == (False, "none"), line


# --- TensorRT-LLM's generation step and TensorRT's engine build ------------------------------------------------------

TLLM_OOM = (
    "[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, mMemPool->getPool(), "
    "mCudaStream->get()): out of memory (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:125)"
)


def test_an_oom_under_the_batch_managers_step_is_a_serving_failure() -> None:
    # NVIDIA/TensorRT-LLM #2857: the native backtrace under the error, one frame a line
    d = diagnose_lines([
        TLLM_OOM,
        "1       0x7f45c6d96865 void tensorrt_llm::common::check<cudaError>(cudaError, char const*, char const*, int)",
        "2       0x7f45c8ab8d23 tensorrt_llm::runtime::BufferManager::gpu(nvinfer1::Dims64, nvinfer1::DataType) const",
        "3       0x7f45c8f82881 tensorrt_llm::batch_manager::RuntimeBuffers::reshape(...)",
        "4       0x7f45c8f84fc7 tensorrt_llm::batch_manager::RuntimeBuffers::prepareStep(...)",
        "5       0x7f45c8fa1234 tensorrt_llm::batch_manager::TrtGptModelInflightBatching::executeStep(...)",
        "6       0x7f45c8fa5678 tensorrt_llm::batch_manager::TrtGptModelInflightBatching::forwardAsync(...)",
        "7       0x7f45c8fb9abc tensorrt_llm::executor::Executor::Impl::forwardAsync(...)",
        "8       0x7f45c8fbdef0 tensorrt_llm::executor::Executor::Impl::executionLoop()",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (True, "runtime")


def test_the_step_wrappers_own_words_on_an_oom_are_a_serving_failure() -> None:
    d = diagnose_lines([f"[TensorRT-LLM][ERROR] Encountered an error in forwardAsync function: {TLLM_OOM}"])
    assert (d.oom, d.stage) == (True, "runtime")


def test_an_oom_while_the_model_is_constructed_is_not_read_as_serving() -> None:
    d = diagnose_lines([
        TLLM_OOM,
        "1       0x7f45c6d96865 void tensorrt_llm::common::check<cudaError>(cudaError, char const*, char const*, int)",
        "2       0x7f45c8ab8d23 tensorrt_llm::batch_manager::kv_cache_manager::KVCacheManager::allocatePools(bool)",
        "3  0x7f45c8f82881 tensorrt_llm::batch_manager::TrtGptModelInflightBatching::TrtGptModelInflightBatching()",
    ])  # fmt: skip
    assert d.stage != "runtime"


def test_the_step_wrapper_on_another_error_stays_none() -> None:
    # NVIDIA/TensorRT-LLM #2714: a missing input tensor, not memory
    d = diagnose_lines(["[TensorRT-LLM][ERROR] Encountered an error in forwardAsync function: Input tensor "
                        "'mrope_rotary_sin_cos' not found; expected shape: (-1, 8192)"])  # fmt: skip
    assert (d.oom, d.stage) == (False, "none")


BUILD = [
    "[11/07/2023-08:45:41] [TRT] [W] Requested amount of GPU memory (33555480576 bytes) could not be allocated. There "
    "may not be enough free memory for allocation to succeed.",
    "[11/07/2023-08:45:41] [TRT] [W] UNSUPPORTED_STATESkipping tactic 2 due to insufficient memory on requested size "
    "of 33555480576 detected for tactic 0x000000000000001e.",
]


def test_an_oom_while_tensorrts_builder_times_its_tactics_is_a_start_up_failure() -> None:
    # NVIDIA/TensorRT-LLM #102: the engine build, before anything is served
    d = diagnose_lines([*BUILD, "[11/07/2023-08:45:41] [TRT] [E] 2: [virtualMemoryBuffer.cpp::resizePhysical::140] "
                                "Error Code 2: OutOfMemory (no further information)"])  # fmt: skip
    assert (d.oom, d.stage) == (True, "startup")


def test_a_tactic_skipped_for_memory_alone_is_no_failure() -> None:
    d = diagnose_lines([*BUILD, "[11/07/2023-08:46:02] [TRT] [I] Total Activation Memory: 33554432000",
                        "[11/07/2023-08:46:02] [TRT-LLM] [I] Engine generation completed in 61.2 sec"])  # fmt: skip
    assert (d.oom, d.stage) == (False, "none")


# --- a readiness answered before the failure -----------------------------------------------------------------------


def test_an_oom_after_tritons_readiness_was_answered_is_a_serving_failure() -> None:
    # triton-inference-server/fastertransformer_backend #157: the client checked, then a request failed
    d = diagnose_lines([
        "all results are True for func <is_server_live()> <is_model_ready()> <is_server_ready()>",
        "terminate called after throwing an instance of 'std::runtime_error'",
        "  what():  [FT][ERROR] CUDA runtime error: out of memory /workspace/build/fastertransformer_backend/build/"
        "_deps/repo-ft-src/src/fastertransformer/utils/allocator.h:220",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (True, "runtime")


def test_a_readiness_check_alone_stays_none() -> None:
    d = diagnose_lines(["print(client.is_server_ready(), client.is_model_ready('fastertransformer'))", "True True"])
    assert (d.oom, d.stage) == (False, "none")


# --- an error of another kind shown, no out-of-memory line: none ----------------------------------------------------

ENGINE = "ERROR 08-16 18:12:26 [engine.py:458] "
MP_TRACEBACK = [
    f"{ENGINE}Traceback (most recent call last):",
    f'{ENGINE}  File "/x/vllm/engine/multiprocessing/engine.py", line 446, in run_mp_engine',
    f"{ENGINE}    engine = MQLLMEngine.from_vllm_config(",
    f'{ENGINE}  File "/x/vllm/worker/model_runner.py", line 1513, in capture_model',
    f"{ENGINE}    graph_runner.capture(**capture_inputs)",
    "...",
]


def test_a_failed_check_logged_before_its_cut_traceback_is_an_error_of_another_kind() -> None:
    # nlzy/vllm-gfx906 #22: logger.exception(e) prints the message, then the traceback the excerpt cuts
    for message in ("size_k must divisible by BLOCK_SIZE_K", "Unsupported head size: 72",
                    "Expected all tensors to be on the same device, but found at least two devices"):  # fmt: skip
        d = diagnose_lines([
            "Capturing CUDA graph shapes:   0%|          | 0/7 [00:00<?, ?it/s]", f"{ENGINE}{message}", *MP_TRACEBACK
        ])  # fmt: skip
        assert (d.oom, d.stage, d.basis) == (False, "none", "error"), message


def test_an_out_of_memory_message_logged_before_its_traceback_is_still_one() -> None:
    d = diagnose_lines([f"{ENGINE}CUDA out of memory. Tried to allocate 2.00 GiB", *MP_TRACEBACK])
    assert (d.oom, d.stage) == (True, "graph_capture")


def test_a_wrapper_message_that_states_no_cause_leaves_the_cut_undecided() -> None:
    # vLLM V1's "EngineCore failed to start." names no cause: the cut traceback may still be an OOM's
    d = diagnose_lines([f"{ENGINE}EngineCore failed to start.", *MP_TRACEBACK])
    assert (d.oom, d.basis) == (False, "undecided")


SCHEDULER = [
    '  File "/x/sglang/srt/managers/scheduler.py", line 2996, in run_scheduler_process',
    "    scheduler.event_loop_normal()",
    '  File "/x/sglang/srt/managers/scheduler.py", line 1105, in event_loop_normal',
    "    self.self_check_during_idle()",
]


def test_the_same_failure_printed_again_and_cut_is_that_error() -> None:
    # sgl-project/sglang #16067: the pool's leak check, then the scheduler's handler prints it again, cut
    d = diagnose_lines([
        "Traceback (most recent call last):", *SCHEDULER,
        '  File "/x/sglang/srt/managers/scheduler_runtime_checker_mixin.py", line 244, in check_memory',
        "    raise_error_or_warn(",
        "ValueError: token_to_kv_pool_allocator memory leak detected! full_available_size=6016",
        "mamba_available_size=315, mamba_evictable_size=138, leaked_full_pages=None, leaked_mamba_pages={191}",
        "",
        "",
        "[2026-01-12 10:57:43 TP3] Scheduler hit an exception: Traceback (most recent call last):", *SCHEDULER[:2],
        "...",
    ])  # fmt: skip
    assert (d.oom, d.stage, d.basis) == (False, "none", "error")


def test_a_cut_traceback_through_other_frames_after_an_error_stays_undecided() -> None:
    d = diagnose_lines([
        "Traceback (most recent call last):", *SCHEDULER, "ValueError: bad request",
        "INFO 08-16 18:12:20 [engine.py:310] restarting", "INFO 08-16 18:12:21 [worker.py:90] profiling",
        "Traceback (most recent call last):",
        '  File "/x/vllm/worker/worker.py", line 1, in determine_num_available_blocks',
        "    self.model_runner.profile_run()",
        '  File "/x/vllm/worker/model_runner.py", line 2, in profile_run',
        "    self.execute_model(model_input, kv_caches, intermediate_tensors)",
    ])  # fmt: skip
    assert (d.oom, d.basis) == (False, "undecided")


def test_an_oom_after_an_error_of_another_kind_is_still_one() -> None:
    d = diagnose_lines([
        "Traceback (most recent call last):", *SCHEDULER, "ValueError: bad request",
        "[TP3] Scheduler hit an exception: Traceback (most recent call last):", *SCHEDULER,
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (True, "runtime")


def test_a_collectives_broken_connection_above_a_cut_traceback_is_an_error_of_another_kind() -> None:
    # intel/ipex-llm #12081: oneCCL's broken pipe, then the worker's report and its traceback, cut
    worker = "(WrapperWithLoadBit pid=35347) ERROR 09-13 11:21:50 worker_base.py:386] "
    d = diagnose_lines([
        "2024:09:13-11:21:50:(31157) |CCL_ERROR| exchange_utils.cpp:202 sendmsg_fd: condition failed",
        "errno: Broken pipe",
        f"{worker}Error executing method init_device. This might cause deadlock in distributed execution.",
        f"{worker}Traceback (most recent call last):",
        f'{worker}  File "/x/vllm/worker/worker_base.py", line 378, in execute_method',
        f"{worker}    return executor(*args, **kwargs)",
        f'{worker}  File "/x/vllm/worker/xpu_worker.py", line 90, in init_device',
        f"{worker}    self.init_worker_distributed_environment()",
    ])  # fmt: skip
    assert (d.oom, d.stage, d.basis) == (False, "none", "error")


def test_nccls_relay_of_an_allocation_failure_is_still_an_oom() -> None:
    d = diagnose_lines([
        "NCCL WARN Cuda failure 'out of memory'",
        "Traceback (most recent call last):",
        '  File "/x/vllm/worker/worker.py", line 1, in init_device',
        "    init_worker_distributed_environment(self.parallel_config, self.rank)",
    ])  # fmt: skip
    assert d.oom is True

"""The classes rounds 32 to 35's misses belong to (issue 34), each pinned on lines composed after the programs' sources
and the public logs under tests/data/logs/heldout_round32/ ... heldout_round35/: a runtime's message wrapped over
several lines by a terminal or an issue form, a cache sized from what memory leaves that holds fewer blocks than the
configuration asks for, TensorRT's builder short of scratch memory, and TensorRT-LLM's runtime made from an engine.
Lines that only sit next to each other, healthy reports and errors of another kind naming the same words stay
``none``."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

# --- a message wrapped over several lines ------------------------------------------------------------------------


def test_vllms_free_memory_refusal_wrapped_over_two_lines_is_a_start_up_failure() -> None:
    # eugr/spark-vllm-docker #257: the poster's terminal broke the line inside "less than desired"
    d = diagnose_lines([
        "ValueError: Free memory on device cuda:0 (36.75/121.63 GiB) on startup is less than",
        "desired GPU memory utilization (0.85, 103.38 GiB).",
    ])  # fmt: skip
    assert (d.oom, d.memory, d.stage) == (True, "device", "startup")


def test_the_same_refusal_wrapped_over_three_lines_is_a_start_up_failure() -> None:
    # vllm-project/vllm-ascend #14628: the next line opens with a capital ("GPU memory utilization")
    d = diagnose_lines([
        "ValueError: Free memory on device (8.0/64.0 GiB) on startup is less than desired",
        "GPU memory utilization (0.9, 57.6 GiB). Decrease GPU memory utilization or",
        "reduce GPU memory used by other processes.",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (True, "startup")


def test_adjacent_lines_that_only_together_name_memory_stay_none() -> None:
    for lines in (
        # the first line ends its record: a sentence, a log record of its own after it
        ["INFO [gpu_worker.py:100] Free memory on device cuda:0 (70.1/79.2 GiB) on startup is less than.",
         "desired GPU memory utilization (0.9, 71.3 GiB)"],
        ["INFO 05-01 10:00:00 [worker.py:88] the worker checked the free memory on startup is less than",
         "INFO 05-01 10:00:01 [worker.py:89] desired GPU memory utilization (0.9, 71.3 GiB) would allow"],
        # a short line is no wrapped one, and an indented one is a frame's or a traceback's own
        ["Free memory on startup is less than", "desired GPU memory utilization (0.9, 71.3 GiB)"],
        ["ValueError: Free memory on device cuda:0 (36.75/121.63 GiB) on startup is less than",
         "    desired GPU memory utilization (0.85, 103.38 GiB)."],
        # the healthy report, wrapped
        ["INFO 05-01 10:00:00 [gpu_worker.py:100] Free memory on device cuda:0 (70.1/79.2 GiB) on startup. Desired",
         "GPU memory utilization is (0.9, 71.3 GiB)."],
    ):  # fmt: skip
        d = diagnose_lines(lines)
        assert (d.oom, d.stage) == (False, "none"), lines


# --- a cache that cannot hold what the configuration asks for ---------------------------------------------------


def test_too_few_mamba_state_blocks_for_max_num_seqs_is_a_kv_cache_failure() -> None:
    # vllm-project/recipes #551: a hybrid model's state blocks sized from the memory left
    d = diagnose_lines([
        "ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (856). Each decode sequence requires one "
        "Mamba cache block, so CUDA graph capture cannot proceed. Please lower max_num_seqs to at most 856 or increase "
        "gpu_memory_utilization.",
    ])  # fmt: skip
    assert d.stage == "kv_cache"


def test_too_little_device_memory_for_the_sized_kv_blocks_is_a_kv_cache_failure() -> None:
    # RBLN-SW/vllm-rbln #1000
    d = diagnose_lines([
        "RuntimeError: SYS_EBUSY: Lack of device memory. (code: -16)",
        "...",
        "Not enough memory for 24 blocks of KV cache.",
        "Try reducing the number of blocks by setting --num-gpu-blocks-override.",
    ])  # fmt: skip
    assert d.stage == "kv_cache"


def test_capture_sizes_capped_to_the_mamba_blocks_stay_none() -> None:
    # vLLM's healthy warning when it lowers its capture sizes to the blocks it has
    d = diagnose_lines([
        "WARNING 05-01 10:00:00 [compilation.py:900] Capping cudagraph capture sizes from max 256 to 136 to fit Mamba "
        "cache blocks (141 blocks available)",
        "INFO 05-01 10:00:09 [api_server.py:1000] Starting vLLM API server 0 on http://0.0.0.0:8000",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (False, "none")


# --- TensorRT's builder and TensorRT-LLM's runtime ----------------------------------------------------------------


def test_a_plugin_short_of_scratch_space_failing_the_engine_build_is_a_start_up_failure() -> None:
    # NVIDIA/TensorRT-LLM #841
    d = diagnose_lines([
        "[01/08/2024-17:57:31] [TRT] [E] 4: [pluginV2Builder.cpp::makeRunner::519] Error Code 4: Internal Error "
        "(Internal error: plugin node L/PLUGIN_V2_MixtureOfExperts_0 requires 2547452477568 bytes of scratch space, "
        "but only 84987740160 is available. Try increasing the workspace size)",
        "[01/08/2024-17:57:31] [TRT-LLM] [E] Engine building failed, please check the error log.",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (True, "startup")


def test_a_scratch_space_warning_alone_is_no_failure() -> None:
    d = diagnose_lines([
        "[TRT] [W] plugin node P requires 2547452477568 bytes of scratch space, but only 84987740160 is available",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (False, "none")


def test_an_oom_while_tensorrt_llms_runtime_loads_the_engine_is_a_start_up_failure() -> None:
    # NVIDIA/TensorRT-LLM #1556: the native backtrace under the error, before any KV cache or request
    d = diagnose_lines([
        "RuntimeError: [TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, mCudaStream->get()): out "
        "of memory (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:118)",
        "1       0x7fb75bc0fca5 void tensorrt_llm::common::check<cudaError>(cudaError, char const*, char const*, int)",
        "2       0x7fb75d7bd004 tensorrt_llm::runtime::BufferManager::gpu(unsigned long, nvinfer1::DataType) const",
        "3       0x7fb75d87e1a1 tensorrt_llm::runtime::TllmRuntime::TllmRuntime(void const*, unsigned long, "
        "nvinfer1::ILogger&) + 593",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (True, "startup")


def test_tensorrt_llms_runtime_loading_without_an_error_stays_none() -> None:
    d = diagnose_lines([
        "[TensorRT-LLM][INFO] Loaded engine size: 45000 MiB",
        "3       0x7fb75d87e1a1 tensorrt_llm::runtime::TllmRuntime::TllmRuntime(void const*, unsigned long) + 593",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (False, "none")

"""Classes stop 57 closed from stop 56's rounds (issue 34; development data since they were scored), each pinned on
lines composed after the public logs (not loaded):

- A Rust backtrace's frame of a weight being quantized in place (candle's ``QTensor::quantize``) is the model's load,
  also where a compose service's prefix stands before each frame.
- A program's own memory guard refusing the context length asked for, before it allocates, is the KV cache not
  fitting; a guard that passes is no failure.
- A log of a Rust engine built on candle (its crates in the frames; vllm.rs, whose name holds "vllm") is not vLLM's.

And from stop 57's own rounds, after they were scored once:

- Apple's OS ending an app for its memory, as Xcode reports it, is the host running out; so are the C library's
  refusals by name (``posix_memalign failed``, ``errno=12``), and a model's load error around them is start-up.
- A Java or Kotlin frame that decodes or answers a request, innermost first under a native engine's error, is serving;
  so is a TensorFlow graph node in a sampling loop's scope.
- A runtime failing to set up its executor is start-up; a device named with its index ("insufficient cuda:0 memory")
  is still memory refused.
- llama.cpp's KV cache announced and then its buffer refused is the KV cache; an error after the compute buffers'
  sizes (the reservation after the cache) is start-up's; vllm-ascend's "Available memory: 0" is no room for the cache.
- A glog record at INFO level is the program going on, not its failure; zsh's job line after a progress bar is a kill.
- A rich log record names the file that logged it at the line's end: Infinity's batch handler is serving.
- A static memory plan's region too small for a tensor (TVM's "storage allocation failure") is not memory running
  out: the labels of record disagree on it (none, unknown, runtime), and none is the answer without a false alarm."""

from __future__ import annotations

from tests.support.logs import verdict
from vllm_hpu_mm.logs.doctor import diagnose_lines

_SVC = "llm-svc0  | "
_CANDLE_OOM = [
    f'{_SVC}[00:48:15] ##-  65/78  On Rank 3  Error: DriverError(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")',
    f"{_SVC}   0: candle_core::error::Error::bt",
    f"{_SVC}   1: candle_core::tensor::Tensor::to_dtype",
]


def test_a_weight_quantized_in_place_ran_out_at_load() -> None:
    lines = [*_CANDLE_OOM, f"{_SVC}   2: candle_core::quantized::QTensor::quantize"]
    assert verdict(lines)[0] == "startup"


def test_a_rust_backtrace_without_a_load_frame_names_no_stage() -> None:
    lines = [*_CANDLE_OOM, f"{_SVC}   2: candle_nn::ops::softmax_last_dim"]
    assert verdict(lines)[0] == "unknown"


def test_a_candle_engine_named_vllm_rs_is_no_vllm_runtime() -> None:
    lines = ["vllm-rs-svc0  | 2026-06-24T16:58:26Z  INFO gguf_helper: vocab_size : 154880", *_CANDLE_OOM]
    source = diagnose_lines(lines).source
    assert source.framework == "other"
    assert "candle" in source.name


_GUARD_FIGURES = "ds4:   required model+graph: 195.91 GiB; guard budget: 110.00 GiB (base 512.00 GiB, fraction 0.99)"


def test_a_memory_guard_refusing_the_context_is_the_kv_cache() -> None:
    lines = ["ds4: GLM memory guard refused ctx=1000000 compact_cap=1000000 before GLM graph allocation",
             _GUARD_FIGURES, "ds4:   use a smaller --ctx, tensor parallelism, or SSD streaming"]  # fmt: skip
    assert verdict(lines)[0] == "kv_cache"


def test_a_memory_guard_that_passes_is_no_failure() -> None:
    lines = ["ds4: GLM memory guard passed ctx=32768 before GLM graph allocation", "ds4: server listening on :8000"]
    assert verdict(lines)[0] == "none"


def test_apple_s_os_ending_an_app_for_its_memory_is_the_host_running_out() -> None:
    killed = "The app \u201cDemo\u201d has been killed by the operating system because it is using too much memory."
    for line in ("Message from debugger: Terminated due to memory issue", killed):
        assert verdict(["The app quit unexpectedly.", line]) == ("unknown", "unknown")


def test_the_c_library_s_refusals_by_name_are_memory_and_a_load_error_around_them_is_startup() -> None:
    metal = ["ggml_metal_host_malloc: error: posix_memalign failed", "GGML_ASSERT: llama.cpp:491: data"]
    assert verdict(metal)[0] != "none"
    line = "Load model error: Failed to initialize engine: UNKNOWN: Unable to map file to memory buffer, errno=12"
    assert verdict([line]) == ("startup", "message")


_TVM_ERROR = "org.apache.tvm.Base$TVMError: TVMError: OpenCL build error for device=0x7c\nError: CL_OUT_OF_HOST_MEMORY"


def test_a_java_frame_that_decodes_under_a_native_engine_s_error_is_serving() -> None:
    lines = ["MLCChat failed", "", "Stack trace:", *_TVM_ERROR.split("\\n"),
             "\tat org.apache.tvm.Base.checkCall(Base.java:173)",
             "\tat org.apache.tvm.Function.invoke(Function.java:130)",
             "\tat ai.mlc.mlcllm.ChatModule.decode(ChatModule.java:71)",
             "\tat ai.mlc.mlcchat.AppViewModel$ChatState.callBackend(AppViewModel.kt:537)"]  # fmt: skip
    assert verdict(lines)[0] == "runtime"


def test_a_java_frame_that_loads_is_startup() -> None:
    lines = ["MLCChat failed", *_TVM_ERROR.split("\\n"), "\tat ai.mlc.mlcllm.ChatModule.reload(ChatModule.java:40)"]
    assert verdict(lines)[0] == "startup"


def test_a_tensorflow_node_in_a_sampling_scope_is_serving() -> None:
    lines = ["ResourceExhaustedError: 2 root error(s) found.",
             "  (0) Resource exhausted: OOM when allocating tensor with shape[20,48,2,25,201,64] and type float on "
             "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
             "\t [[{{node sample_sequence/while/concat}}]]"]  # fmt: skip
    assert verdict(lines)[0] == "runtime"


def test_a_runtime_failing_to_set_up_its_executor_is_startup() -> None:
    line = ("[03/14/2026-18:47:16] [TRT-LLM] [RANK 3] [E] Failed to initialize executor on rank 3: CUDA out of memory. "
            "Tried to allocate 896.00 MiB.")  # fmt: skip
    assert verdict([line])[0] == "startup"


def test_a_device_named_with_its_index_is_still_memory_refused() -> None:
    lines = ["Loading model...", "Error: POST /omni/model/select failed with status 502: insufficient cuda:0 memory: "
             "requested 25850693020"]  # fmt: skip
    assert verdict(lines)[0] == "startup"


_LLAMA = "llama_new_context_with_model:"


def test_llama_cpp_s_kv_cache_announced_then_its_buffer_refused_is_the_kv_cache() -> None:
    lines = ["llama_kv_cache_iswa: creating non-SWA KV cache, size = 128000 cells",
             "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4500.00 MiB on device 0: cudaMalloc failed: "
             "out of memory", "llama_init_from_model: failed to initialize the context"]  # fmt: skip
    assert verdict(lines)[0] == "kv_cache"


def test_an_error_after_the_compute_buffers_sizes_is_the_reservation_at_startup() -> None:
    lines = [f"{_LLAMA} KV self size  = 2048.00 MiB, K (f16): 1024.00 MiB, V (f16): 1024.00 MiB",
             f"{_LLAMA}      CUDA0 compute buffer size =   296.02 MiB", f"{_LLAMA} graph splits (measure): 3",
             "CUDA error: out of memory"]  # fmt: skip
    assert verdict(lines)[0] == "startup"


def test_vllm_ascend_finding_no_memory_for_the_cache_is_the_kv_cache() -> None:
    lines = ["(EngineCore_DP0 pid=4146) INFO 01-15 06:47:41 [worker_v1.py:270] Available memory: 0, total memory: "
             "65452113920",
             "(EngineCore_DP0 pid=4146) ERROR 01-15 06:47:41 [core.py:843] EngineCore failed to start."]  # fmt: skip
    assert verdict(lines)[0] == "kv_cache"


def test_a_glog_info_record_is_the_program_going_on_not_its_failure() -> None:
    lines = ["Loading the parameters from /home/user/gemma/2b-it/",
             "I0224 16:15:27.568676 140378916851712 xla_bridge.py:689] Unable to initialize backend 'tpu': INTERNAL: "
             "Failed to open libtpu.so: libtpu.so: cannot open shared object file", "Killed"]  # fmt: skip
    assert verdict(lines)[0] == "startup"


def test_zsh_s_job_line_after_a_progress_bar_is_a_kill() -> None:
    bar = "Loading checkpoint shards:  88%|███████▊  | 7/8 [00:12<00:01,  1.84s/it]"
    assert verdict([f"{bar}[1]    14875 killed     python main.py --low_vram"])[0] == "startup"


def test_a_rich_record_from_a_batch_handler_is_serving() -> None:
    line = ("ERROR    2024-09-19 16:13:18,115 infinity_emb ERROR: CUDA out of memory. batch_handler.py:47         "
            "Tried to allocate 1.49 GiB.")  # fmt: skip
    assert verdict([line])[0] == "runtime"


def test_a_static_plan_s_region_too_small_is_no_memory_running_out() -> None:
    line = ("InternalError: Check failed: (offset + needed_size <= this->buffer.size) is false: storage allocation "
            "failure, attempted to allocate 16785408 at offset 0 in region that is 16777216bytes")  # fmt: skip
    assert verdict([line])[0] == "none"

"""The doctor names the writer of a log from runtimes the corpus has few or no logs of, reads their own phase lines
and out-of-memory messages, and never gives vLLM's flags to another runtime (issue 34 item 10). Every line is
composed after the runtime's source, cited beside it (not copied from a log):

- TensorRT-LLM (NVIDIA/TensorRT-LLM @ 0004396720054fd8e205cbf616f21f0b57c6b412): the C++ logger's
  ``[TensorRT-LLM][INFO]`` and KV line (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp: "[MemUsageChange] Allocated
  %0.2f GiB for max tokens in paged KV cache (%d)."), the Python logger's ``[TRT-LLM] [I]``, the PyTorch backend's
  profiling line (tensorrt_llm/_torch/pyexecutor/_util.py: "Memory used after loading model weights (inside torch) in
  memory usage profiling") and its server's "Engine loaded and ready to serve...".
- LMDeploy (InternLM/lmdeploy): TurboMind's allocator error ``[TM][ERROR] CUDA runtime error: out of memory``
  (src/turbomind/core/allocator.cc) and the ``- lmdeploy -`` logger.
- MLC-LLM (mlc-ai/mlc-llm, cpp/serve/config.cc ``EstimateMemoryUsageOnMode``, ``InferForRNNState``): "Insufficient GPU
  memory error: The available single GPU memory is ... MB, which is less than the sum of model weight size ... and
  temporary buffer size".
- ExLlamaV2 through TabbyAPI (theroyallab/tabbyAPI @ 004e837412346bc0046655a3de507e28e06190a9,
  common/config_models.py: max_seq_len, cache_size, chunk_size).
- DeepSpeed-MII (deepspeedai/DeepSpeed-MII): its package's frames (``mii/pipeline.py``).
- Aphrodite (aphrodite-engine/aphrodite-engine @ 022aa6364aa2977e30d0a8ffb4abe3d9afe764dd,
  aphrodite/engine/args_tools.py: --max-model-len; its engine keeps vLLM's KV refusal).
- Triton Inference Server (``model_lifecycle.cc`` records) and Ray Serve (``ServeReplica`` actors), hosting vLLM or an
  engine they do not name.
- Ollama (ollama/ollama, llm/server.go): "model requires more system memory (X GiB) than is available (Y GiB)".
- vLLM on XPU (``xpu_worker.py``, torch's "XPU out of memory").
- llama.cpp's server (ggml-org/llama.cpp: src/llama-model.cpp ``load_tensors``, src/llama-kv-cache.cpp "KV buffer
  size", src/llama-context.cpp ``graph_reserve`` "failed to allocate compute buffers", ggml/src/ggml-alloc.c
  ``ggml_gallocr_reserve_n`` "failed to allocate %s buffer of size", tools/server/server.cpp "server is listening on").
- Triton hosting TensorRT-LLM (triton-inference-server/core ``model_lifecycle.cc`` "failed to load '%s' version %d",
  tensorrtllm_backend's "unexpected error when creating modelInstanceState", TensorRT-LLM's ``tllmBuffers.h``
  "CUDA runtime error in ::cudaMallocAsync"); TGI's launcher ("Shard %d failed to start", launcher/src/main.rs).
- TensorRT-LLM's PyTorch executor refusing a component (tensorrt_llm/_torch/pyexecutor/py_executor_creator.py
  ``_ExecutorMemoryMonitor._maybe_explain_if_oom``: "Executor creation failed due to insufficient GPU memory.", "The
  following component could not be created: <component>"), named from the words its stage rule reads.
- MLX's Metal allocator (ml-explore/mlx mlx/backend/metal/allocator.cpp ``MetalAllocator::malloc``: "[metal::malloc]
  Attempting to allocate N bytes which is greater than the maximum allowed buffer size of M bytes.") under mlx-lm's
  frames (``mlx_lm/generate.py``) and LM Studio's MLX engine's (lmstudio-ai/mlx-engine, ``mlx_engine/generate.py``).
"""

from __future__ import annotations

import re

import pytest

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose, diagnose_lines

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
TRT_PY = "[01/02/2026-10:00:00] [TRT-LLM] [I] "
#: vLLM's own flags and variables: never given to another runtime.
LLAMA_KV = "llama_kv_cache:      CUDA0 KV buffer size =  4096.00 MiB"
CUDA_MALLOC = ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating {:.2f} MiB on device 0: cudaMalloc failed: "
               "out of memory")  # fmt: skip
TRITON_LOAD = "E0102 10:00:09.000000 1 model_lifecycle.cc:638] failed to load '{}' version 1: Internal: "
TRT_MALLOC = ("unexpected error when creating modelInstanceState: [TensorRT-LLM][ERROR] CUDA runtime error in "
              "::cudaMallocAsync(ptr, n, mCudaStream->get()): out of memory "
              "(/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:112)")  # fmt: skip
TRT_EXECUTOR = ["RuntimeError: Executor creation failed due to insufficient GPU memory.", "",
                "The following component could not be created: {}", "Total GPU memory (GiB): 80.00"]  # fmt: skip
METAL = ("RuntimeError: [metal::malloc] Attempting to allocate 40000000000 bytes which is greater than the maximum "
         "allowed buffer size of 30000000000 bytes.")  # fmt: skip
SITE = '  File "/Users/me/{}/lib/python3.11/site-packages/{}/generate.py", line 300, in {}'
VLLM_ONLY = re.compile(r"--gpu-memory-utilization|--max-num-seqs|--max-model-len|--max-num-batched-tokens"
                       r"|--tensor-parallel-size|--compilation-config|--enforce-eager|\bVLLM_\w+")  # fmt: skip

CASES = {
    "tensorrt-llm kv cache": (
        ["[TensorRT-LLM][INFO] Number of tokens per block: 64.",
         "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 20.25 GiB for max tokens in paged KV cache (110592).",
         "[TensorRT-LLM][ERROR] CUDA runtime error in cudaMallocAsync(ptr, size, stream): out of memory"],
        "TensorRT-LLM", "kv_cache", "free_gpu_memory_fraction",
    ),
    "tensorrt-llm profiling": (
        [TRT_PY + "Memory used after loading model weights (inside torch) in memory usage profiling: 40.10 GiB", OOM],
        "TensorRT-LLM", "startup", "free_gpu_memory_fraction",
    ),
    "tensorrt-llm serving": (
        [TRT_PY + "Engine loaded and ready to serve...", OOM],
        "TensorRT-LLM", "runtime", "max_num_tokens",
    ),
    "lmdeploy turbomind after its kv blocks": (
        ["2026-01-02 10:00:00,000 - lmdeploy - INFO - turbomind.py:200 - turbomind engine config ready",
         "[TM][INFO] [BlockManager] block_size = 64 MB", "[TM][INFO] [BlockManager] max_block_count = 159",
         "[TM][ERROR] CUDA runtime error: out of memory /opt/lmdeploy/src/turbomind/core/allocator.cc:49"],
        "LMDeploy", "kv_cache", "--cache-max-entry-count",
    ),
    "lmdeploy turbomind": (
        ["2026-01-02 10:00:00,000 - lmdeploy - INFO - turbomind.py:200 - turbomind engine config ready",
         "[TM][ERROR] CUDA runtime error: out of memory /opt/lmdeploy/src/turbomind/core/allocator.cc:49"],
        "LMDeploy", "unknown", "--cache-max-entry-count",
    ),
    "mlc-llm refusal": (
        ['  File "/opt/conda/lib/python3.11/site-packages/mlc_llm/serve/engine_base.py", line 590, in __init__',
         "tvm.error.InternalError: Check failed: Insufficient GPU memory error: The available single GPU memory is "
         "7000.000 MB, which is less than the sum of model weight size (13500.000 MB) and temporary buffer size "
         "(800.000 MB)."],
        # an estimate made as the engine is created, for the weights and buffers: the engine's creation (patterns.py)
        "MLC-LLM", "startup", "prefill_chunk_size",
    ),
    "exllamav2 via tabbyapi": (
        ["INFO:     Loading model /models/Mixtral-exl2 with the exllamav2 backend", OOM],
        "ExLlamaV2", "startup", "cache_size",  # its "Loading model" line is the last phase line
    ),
    "deepspeed-mii": (
        ['  File "/usr/lib/python3.10/site-packages/mii/pipeline.py", line 30, in pipeline',
         "    inference_engine = build_hf_engine(", OOM],
        "DeepSpeed-MII", "startup", "",  # mii.pipeline() builds its engine (load_model -> build_hf_engine)
    ),
    "aphrodite kv refusal": (
        ["INFO 01-02 10:00:00 aphrodite_engine.py:150] Initializing the Aphrodite Engine with config: model='m'",
         "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
         "initializing the engine."],
        "Aphrodite", "kv_cache", "raise --gpu-memory-utilization",
    ),
    "triton, engine not named": (
        ["E0102 10:00:00.000000 1 model_lifecycle.cc:638] failed to load 'llm' version 1: Internal: "
         "CUDA out of memory"],
        "Triton Inference Server", "unknown", "",
    ),
    "ray serve, engine not named": (
        ["(ServeReplica:default:Chat pid=7) ERROR 2026-01-02 10:00:00 replica.py:300 - " + OOM],
        "Ray Serve", "unknown", "",
    ),
    "ollama host refusal": (
        ['time=2026-01-02T10:00:01.000Z level=WARN source=sched.go:600 msg="model request too large for system" '
         'error="model requires more system memory (44.0 GiB) than is available (7.6 GiB)"'],
        "Ollama", "startup", "host ran out of memory",
    ),
    "llama.cpp server, compute buffers": (
        ["load_tensors: offloaded 33/33 layers to GPU",
         "llama_kv_cache: CUDA0 KV buffer size =  4096.00 MiB",
         "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: cudaMalloc failed: out of "
         "memory",
         "graph_reserve: failed to allocate compute buffers"],
        "llama.cpp's library", "startup", "n_ubatch",
    ),
    # (library lines only, no program's: the program that ran llama.cpp is not named, so the library's parameters are)
    # ik_llama.cpp #749's shape: the graph allocator's line and the log stops before the context's own message
    "llama.cpp, compute buffers cut in the allocator": (
        [LLAMA_KV, CUDA_MALLOC.format(279356.51), "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size "
         "292926534144"],
        "llama.cpp's library", "startup", "n_ubatch",
    ),
    # Ollama's runner died while it loaded the model (llm/server.go WaitUntilRunning)
    "ollama runner died loading": (
        ['time=2026-01-02T10:00:01.000Z level=ERROR source=sched.go:455 msg="error loading llama server" '
         'error="llama runner process has terminated: cudaMalloc failed: out of memory"'],
        "Ollama", "startup", "num_ctx",
    ),
    # tensorrtllm_backend #281's shape: the model instance's creation fails as Triton loads the engine
    "tensorrt-llm instance under triton": ([TRITON_LOAD.format("tensorrt_llm") + TRT_MALLOC],
                                           "TensorRT-LLM", "startup", "rebuild the engine with a lower max_batch_size"),
    # TensorRT-LLM#5950's shape: its executor names the component it could not create, which the stage rule reads
    # and the writer is named from
    "tensorrt-llm executor resources": ([line.format("Additional executor resources") for line in TRT_EXECUTOR],
                                        "TensorRT-LLM", "graph_capture", "max_num_tokens"),
    # lmstudio-bug-tracker#2240's shape: the engine's own package in every frame, MLX's allocator refusing a buffer
    "lm studio's mlx engine": (
        ["Traceback (most recent call last):", SITE.format(".lmstudio/extensions/backends/mlx", "mlx_engine",
         "generate"), "    for result in stream_generate(", METAL],
        "LM Studio's MLX engine", "runtime", "",
    ),
    "mlx-lm on metal": (
        [SITE.format("venv", "mlx_lm", "generate_step"), "    mx.eval(y)", METAL],
        "MLX", "runtime", "",
    ),
    "llama.cpp server, serving": (
        ["load_tensors: offloaded 33/33 layers to GPU",
         "main: server is listening on http://127.0.0.1:8080 - starting the main loop",
         "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 900.00 MiB on device 0: cudaMalloc failed: out of "
         "memory"],
        "llama.cpp", "runtime", "--ctx-size",
    ),
    # text-generation-webui reports each request it answered, also one whose generation raised
    # (modules/text_generation.py; oobabooga/textgen #1595): the server outlived the failure, serving
    "text-generation-webui": (
        ["torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 672.00 MiB (GPU 0; 8.00 GiB total "
         "capacity; 6.23 GiB already allocated; 0 bytes free; 6.92 GiB reserved in total by PyTorch)",
         "Output generated in 2.48 seconds (0.00 tokens/s, 0 tokens, context 2096, seed 165012704)"],
        "text-generation-webui", "runtime", "truncation_length",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_another_runtime_is_named_read_and_never_given_vllms_flags(case: str) -> None:
    lines, writer, stage, advice = CASES[case]
    d = diagnose(lines, load({}))
    assert d.source.describe.startswith(writer)
    assert d.source.framework == "other"
    assert d.stage == stage
    text = "\n".join(d.recommendations)
    assert advice in text
    if writer != "Aphrodite":  # Aphrodite's own flags share vLLM's names
        assert not VLLM_ONLY.search(text), text


@pytest.mark.parametrize("component", ["Model", "Sampler", "Initial KV cache (temporary for KV cache size estimation)",
                                       "KV cache", "Drafter", "Additional executor resources"])  # fmt: skip
def test_tensorrt_llms_executor_refusal_names_tensorrt_llm_whichever_component(component: str) -> None:
    # the stage rules read each component as TensorRT-LLM's: the writer is named from the same words
    lines = [line.format(component) for line in TRT_EXECUTOR]
    assert diagnose(lines, load({})).source.describe.startswith("TensorRT-LLM")
    assert diagnose(lines[2:], load({})).source.describe.startswith("TensorRT-LLM")


def test_a_program_on_mlx_outranks_mlx_whose_error_it_relays() -> None:
    # Ollama runs MLX models in its own runner and prints the allocator's error as it is; its records come after
    lines = [METAL, 'time=2026-01-02T10:00:01.000Z level=ERROR source=server.go:800 msg="runner terminated"']
    assert diagnose(lines, load({})).source.name == "ollama"
    lines = [METAL, SITE.format("lms", "mlx_engine", "generate")]
    assert diagnose(lines, load({})).source.name == "mlx-engine"


@pytest.mark.parametrize(
    ("host", "marker", "where"),
    [
        ("Triton Inference Server", "I0102 10:00:00.000000 1 model_lifecycle.cc:469] loading: vllm_model:1",
         "model.json"),
        ("Ray Serve", "(ServeReplica:default:VLLMDeployment pid=9) INFO replica.py:100 - started", "engine_kwargs"),
    ],
)  # fmt: skip
def test_a_hosted_vllm_is_read_as_vllm_and_told_where_its_arguments_go(host: str, marker: str, where: str) -> None:
    lines = [marker, "INFO 01-02 10:00:05 vllm model_runner.py:1008] Loading model weights took 14.99 GB", OOM]
    d = diagnose(lines, load({}))
    assert d.source.framework == "vllm"
    assert f"(under {host})" in d.source.describe
    assert d.stage == "startup"
    assert where in d.recommendations[-1]


def test_vllm_on_xpu_is_vllm_on_xpu() -> None:
    lines = ["INFO 01-02 10:00:00 vllm xpu_worker.py:100] Loading model weights took 14.99 GB",
             "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 1.00 GiB."]  # fmt: skip
    d = diagnose(lines, load({}))
    assert (d.source.framework, d.source.accelerator, d.stage) == ("vllm", "xpu", "startup")


def test_a_vllm_deployment_name_is_not_lmdeploy() -> None:
    # "VLLMDeployment" holds the letters of "lmdeploy": only the word names LMDeploy
    d = diagnose(["(ServeReplica:default:VLLMDeployment pid=9) INFO started", OOM], load({}))
    assert d.source.name != "lmdeploy"


VLLM_BANNER = "(APIServer pid=7) INFO 05-12 08:32:04 [utils.py:299] "


@pytest.mark.parametrize(
    "value",
    [
        # vLLM's banner and its argument dictionary echo the model's path (held-out round 209: a model kept in a
        # TensorRT-LLM release's folder)
        "\u2588\u2584\u2588\u2580 \u2588 \u2588 \u2588 \u2588 model ../TensorRT-LLM-1.2.0/Qwen2-VL-2B-Instruct",
        "non-default args: {'model': '../TensorRT-LLM-1.2.0/Qwen2-VL-2B-Instruct', 'served_model_name': ['sglang-ft']}",
        # the request it echoes: the user's prompt, whatever it asks about
        "Request chatcmpl-1 details: prompt: 'should I serve this with lmdeploy or with ollama?', params: None",
    ],
)
def test_a_frameworks_name_inside_a_value_the_user_supplied_does_not_outrank_vllms_own_lines(value: str) -> None:
    lines = [VLLM_BANNER + "version 0.19.0", VLLM_BANNER + value,
             "(APIServer pid=7) INFO 05-12 08:32:04 [model.py:549] Resolved architecture: Qwen2VL"]  # fmt: skip
    s = diagnose_lines(lines).source
    assert (s.framework, s.name, s.named) == ("vllm", "", True)
    assert s.describe == "vLLM"
    # without the tag that names it, vLLM's logger records still outrank a word inside a value: vLLM's, assumed
    s = diagnose_lines([line.removeprefix("(APIServer pid=7) ") for line in lines]).source
    assert (s.framework, s.name, s.named) == ("vllm", "", False)


def test_a_frameworks_own_line_still_names_it_whatever_value_names_another() -> None:
    # a model kept under text-generation-webui's folder, run by llama.cpp's own binary whose CUDA check fails
    lines = ["./main -m /data/text-generation-webui/models/DeciLM-6b-instruct/DeciLM-6b-instruct_q2.gguf",
             "CUDA error 2 at /data/llama.cpp/ggml-cuda.cu:5509: out of memory"]  # fmt: skip
    assert diagnose_lines(lines).source.name == "llama.cpp"
    # text-generation-webui's folder is a path; its server's first record names it over the llama.cpp it loads
    webui = ["/content/text-generation-webui", "21:47:29-016258 INFO     Starting Text generation web UI",
             '21:48:28-707156 INFO     llama.cpp weights detected: "models/Llama-3.2-3B.Q2_K.gguf"']  # fmt: skip
    assert diagnose_lines(webui).source.name == "text-generation-webui"
    # a framework named only inside a value is all a log without any line of its own says
    assert diagnose_lines(["loading /models/TensorRT-LLM-1.2.0/engine", OOM]).source.name == "tensorrt_llm"


# --- a failure each runtime places by the phase lines before it (held-out round 7's classes) -----------------------


def test_a_compute_buffer_reservation_is_start_up_before_serving_and_runtime_after() -> None:
    # llama.cpp reserves the worst-case micro-batch's activations after the KV cache and before serving (its
    # counterpart of vLLM's profiling pass); ggml re-reserves a graph that grew while serving
    failure = [CUDA_MALLOC.format(9000), "graph_reserve: failed to allocate compute buffers"]
    d = diagnose_lines([LLAMA_KV, *failure])
    assert (d.stage, d.basis) == ("startup", "message")
    assert d.evidence[-1].text == failure[-1]
    for serving in ("main: server is listening on http://127.0.0.1:8080",
                    "slot launch_slot_: id  0 | task 0 | processing task",
                    "slot print_timing: id  0 | task 0 | prompt eval time =     120.50 ms /   512 tokens"):  # fmt: skip
        served = diagnose_lines([LLAMA_KV, serving, *failure])
        assert (served.stage, served.basis) == ("runtime", "message"), serving


def test_a_failed_model_load_is_start_up_only_before_a_later_phase_line() -> None:
    load_failed = TRITON_LOAD.format("tensorrt_llm") + TRT_MALLOC
    kv = "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 20.25 GiB for max tokens in paged KV cache (110592)."
    assert diagnose_lines([kv, load_failed]).stage == "kv_cache"
    # TGI's shard fails to start: it loads the weights; the router's warm-up comes after the shards are up
    shard = ["2024-01-02T10:00:00.000000Z ERROR shard-manager: text_generation_launcher: Shard complete standard "
             "error output:", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB.",
             "2024-01-02T10:00:01.000000Z ERROR text_generation_launcher: Shard 0 failed to start"]  # fmt: skip
    d = diagnose_lines(shard)
    assert (d.source.framework, d.stage, d.basis) == ("tgi", "startup", "message")


def test_a_failed_load_of_an_engine_whose_load_runs_its_whole_start_up_stays_unknown() -> None:
    # vLLM under Triton builds its engine, profiles, allocates the KV cache and captures graphs in the model's load
    vllm = ["I0102 10:00:00.000000 1 model.py:120] vllm engine args: {'model': 'm'}",
            TRITON_LOAD.format("vllm_model") + "CUDA out of memory. Tried to allocate 2.00 GiB."]  # fmt: skip
    d = diagnose_lines(vllm)
    assert (d.source.framework, d.stage) == ("vllm", "unknown")


def test_sglangs_retraction_of_requests_on_a_full_kv_pool_is_an_exhaustion_while_serving() -> None:
    # sglang managers/scheduler.py: a full KV pool retracts requests (both spellings it used); read as no failure
    # until round 24, whose sgl-project/sglang #4184 was labelled runtime from these lines alone
    sgl = "[2025-03-07 21:49:33 TP0] "
    lines = [sgl + "Decode batch. #running-req: 64, #token: 180000, token usage: 0.99, gen throughput (token/s): 900",
             sgl + "Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.5000 -> 0.6000",
             sgl + "decode out of memory happened, #retracted_reqs: 2, #new_token_ratio: 0.6000 -> 0.7000"]  # fmt: skip
    d = diagnose_lines(lines)
    assert (d.stage, d.oom, d.source.name) == ("runtime", True, "sglang")
    crashed = diagnose_lines([*lines, sgl + "Scheduler hit an exception: torch.OutOfMemoryError: CUDA out of memory."])
    assert crashed.stage == "runtime"


def test_a_pinned_host_buffer_llama_cpp_falls_back_from_is_no_failure() -> None:
    # ggml-cuda.cu ggml_cuda_host_malloc: a refused pinned buffer is logged and replaced by pageable memory
    lines = ["ggml_cuda_host_malloc: failed to allocate 1900.00 MiB of pinned memory: out of memory",
             "load_tensors: offloaded 41/41 layers to GPU", LLAMA_KV,
             "main: server is listening on http://127.0.0.1:8080 - starting the main loop"]  # fmt: skip
    assert diagnose_lines(lines).stage == "none"
    assert diagnose_lines([*lines, CUDA_MALLOC.format(900)]).stage == "runtime"


def test_ollamas_estimate_that_no_layer_fits_is_no_failure() -> None:
    # ollama llm/memory.go: it logs the estimate and runs the model on the CPU instead
    line = 'time=2024-11-08T01:05:27Z level=DEBUG source=memory.go:312 msg="insufficient VRAM to load any model layers"'
    assert diagnose_lines([line]).stage == "none"


#: An image request to a LLaVA model served by Ollama's llama.cpp runner: the CLIP encoder's line for the request's
#: image, then ggml's CUDA pool out of memory, in a path holding both names (ollama/ollama #2706, #3237).
LLAVA_REQUEST_OOM = ["encode_image_with_clip: image embedding created: 576 tokens",
                     "encode_image_with_clip: image encoded in  1229.16 ms by CLIP (    2.13 ms per image patch)",
                     "CUDA error: out of memory",
                     "  current device: 0, in function ggml_cuda_pool_malloc_vmm at "
                     "/go/src/github.com/jmorganca/ollama/llm/llama.cpp/ggml-cuda.cu:8658"]  # fmt: skip


def test_an_image_encoded_for_a_request_then_out_of_memory_was_serving_under_ollama() -> None:
    d = diagnose(LLAVA_REQUEST_OOM, load({}))
    assert (d.stage, d.oom) == ("runtime", True)
    # Ollama runs llama.cpp and prints its lines and its sources' paths: Ollama is the writer, and its knobs the advice
    assert d.source.describe.startswith("Ollama")
    assert any("num_ctx" in r for r in d.recommendations)
    assert not any("--n-gpu-layers" in r for r in d.recommendations)
    # a Go slog record names Ollama before any llama.cpp line does
    slog = 'time=2024-02-23T09:49:45.496+01:00 level=INFO source=dyn_ext_server.go:171 msg="loaded 1 images"'
    assert diagnose([slog, *LLAVA_REQUEST_OOM[:3]], load({})).source.describe.startswith("Ollama")


# --- TGI's own lines: its router's client and warm-up span, its launcher's report of a shard that never started ---

#: TGI's router relays a shard's failed warm-up (router/client/src/lib.rs) inside its warm-up span, which names TGI's
#: own limits (huggingface/text-generation-inference #2572).
TGI_WARMUP_SPAN = ("2024-09-25T15:04:34.598137Z ERROR warmup{max_input_length=500 max_prefill_tokens=550 "
                   "max_total_tokens=13107 max_batch_size=None}:warmup: ")  # fmt: skip
CAPTURE_OOM = ['  File "/opt/conda/lib/python3.10/site-packages/torch/cuda/graphs.py", line 82, in capture_end',
               "    super().capture_end()", "RuntimeError: CUDA error: out of memory"]  # fmt: skip


@pytest.mark.parametrize("client", ["text_generation_client: router/client/src/lib.rs:46: ", ""])
def test_tgis_router_lines_name_tgi_and_get_tgis_knobs(client: str) -> None:
    d = diagnose([*CAPTURE_OOM, TGI_WARMUP_SPAN + client + "Server error: CANCELLED"], load({}))
    assert (d.source.framework, d.source.named, d.stage) == ("tgi", True, "graph_capture")
    text = "\n".join(d.recommendations)
    assert "--cuda-graphs" in text
    assert not VLLM_ONLY.search(text), text
    assert "--gpu-memory-utilization" not in text


#: A shard that ran out moving its weights to the device (huggingface/text-generation-inference #574): the
#: allocator's figures, then the launcher's report that the shard never became ready.
SHARD_OOM = ["    tensor = tensor.to(device=self.device)",
             "torch.cuda.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)",
             "Currently allocated     : 8.73 GiB", "Requested               : 157.53 MiB",
             "Device limit            : 9.78 GiB", "Free (according to CUDA): 17.31 MiB",
             "PyTorch limit (set by user-supplied memory fraction)",
             "                        : 17179869184.00 GiB", " rank=0",
             "2023-07-09T15:32:01.279858Z  INFO text_generation_launcher: Waiting for shard 0 to be "
             "ready..."]  # fmt: skip


@pytest.mark.parametrize("report", ["Error: ShardCannotStart",
                                    "2023-07-09T15:32:02.979796Z ERROR text_generation_launcher: Shard 0 failed to "
                                    "start"])  # fmt: skip
def test_a_shard_that_never_started_failed_while_loading(report: str) -> None:
    d = diagnose([*SHARD_OOM, report], load({}))
    assert (d.source.framework, d.stage, d.basis) == ("tgi", "startup", "message")
    assert not VLLM_ONLY.search("\n".join(d.recommendations))
    # without the launcher's report nothing places it
    assert diagnose_lines(SHARD_OOM).stage == "unknown"

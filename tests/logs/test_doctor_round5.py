"""The doctor's round-5 classes (issue 34 item 10, held-out round 5), each pinned on the structure real logs have (the
lines are composed after the public logs and sources cited beside each test; the real excerpts are fixtures under
tests/data/logs/heldout_round5)."""

from __future__ import annotations

import pytest

from tests.support.logs import cut_read_as_phase
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose, diagnose_lines
from vllm_hpu_mm.logs.patterns import strip_prefix

# --- an exception line behind TGI's relay prefix ends its traceback -------------------------------------------------

#: TGI's launcher relays every line a shard prints as a Rust ``tracing`` record, each with its own time (tgi-gaudi issue
#: #54's decode failure).
RELAY = "2024-02-21T05:55:25.3183{:02d}Z DEBUG text_generation_launcher: "
DECODE_FRAMES = [RELAY.format(k) + text for k, text in enumerate([
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.10/dist-packages/text_generation_server/server.py", line 109, in Decode',
    "    generations, next_batch = self.model.generate_token(batch)",
    '  File "/usr/local/lib/python3.10/dist-packages/text_generation_server/models/causal_lm.py", line 704, in '
    "generate_token",
    "    batch.input_ids[:, :token_idx], logits.squeeze(-2)",
])]  # fmt: skip
LAST = RELAY.format(len(DECODE_FRAMES))


def test_a_relayed_exception_line_of_another_kind_is_no_oom() -> None:
    lines = [*DECODE_FRAMES, LAST + "RuntimeError: Graph compile failed. synStatus=synStatus 26 [Generic failure]."]
    d = diagnose(lines, load({}))
    assert d.stage == "none"
    assert d.basis != "cut"
    assert "dmesg" not in "\n".join(d.recommendations)


def test_a_relayed_out_of_memory_line_is_read_with_its_frames() -> None:
    lines = [*DECODE_FRAMES, LAST + "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for "
             "size::1073741824 (1024)MB"]  # fmt: skip
    d = diagnose_lines(lines)
    assert (d.stage, d.basis) == ("runtime", "traceback")


@pytest.mark.parametrize(
    ("line", "body"),
    [
        (LAST + "RuntimeError: x", "RuntimeError: x"),
        (LAST + "    return func(*args, **kwds)", "    return func(*args, **kwds)"),
        # the router's record with its spans and source location (tgi-gaudi issue #216)
        (
            "2024-08-30T02:09:46.039747Z ERROR batch{batch_size=16}:decode:decode{size=16}: text_generation_client: "
            "router/client/src/lib.rs:33: Server error: CANCELLED",
            "Server error: CANCELLED",
        ),
        ("2023-08-22T18:35:50.966384Z  INFO text_generation_launcher: Args { model_id", "Args { model_id"),
        # vLLM's own logger prefix is unchanged
        ("ERROR 03-19 10:55:18 [core.py:340] RuntimeError: y", "RuntimeError: y"),
    ],
)
def test_tgis_tracing_prefix_is_stripped(line: str, body: str) -> None:
    assert strip_prefix(line) == body


# --- llama.cpp's own failure messages name their phase and the writer -------------------------------------------------

#: ggml's allocation failure, as llama.cpp, Ollama and llama-cpp-python print it (ggml-cuda.cu).
CUDA_MALLOC = "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: cudaMalloc failed: " \
              "out of memory"  # fmt: skip


@pytest.mark.parametrize(
    ("after", "stage"),
    [
        # llama_model_load logs "error loading model" when load_tensors fails (llama.cpp src/llama.cpp)
        (["alloc_tensor_range: failed to allocate CUDA0 buffer of size 9437184000",
          "llama_model_load: error loading model: unable to allocate CUDA0 buffer"], "startup"),
        (["llama_load_model_from_file: failed to load model"], "startup"),
        # the KV cache throws "failed to allocate buffer for kv cache" (src/llama-kv-cache.cpp), older builds' caller
        # names llama_kv_cache_init
        (["llama_kv_cache_init: failed to allocate buffer for kv cache",
          "llama_init_from_model: llama_kv_cache_init() failed for self-attention cache"], "kv_cache"),
        (["llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache"],
         "kv_cache"),
    ],
)  # fmt: skip
def test_llama_cpp_messages_name_the_stage_and_the_writer(after: list[str], stage: str) -> None:
    d = diagnose([CUDA_MALLOC, *after], load({}))
    assert (d.stage, d.basis) == (stage, "message")
    assert d.source.framework == "other"
    assert d.source.name == "llama.cpp"
    advice = "\n".join(d.recommendations)
    assert "n_gpu_layers" in advice  # the library's lines alone: its parameter, not one program's flag
    assert "--gpu-memory-utilization" not in advice


def test_an_allocation_failure_alone_is_start_up() -> None:
    # ggml's backend buffers (weights, KV cache, reserved compute graphs) are allocated as the model loads; serving
    # re-reserves only a graph that grew, which the decode call's line or a serving line shows (round 16's LocalAI log;
    # every public log of this line is start-up but the one with llama_decode's line: test_doctor_round17.py)
    assert diagnose_lines([CUDA_MALLOC]).stage == "startup"


def test_a_vllm_log_is_not_read_as_llama_cpp() -> None:
    d = diagnose_lines(["INFO 05-11 12:04:07 [loader.py:447] Loading weights took 2.84 seconds",
                        "Model: meta-llama/Llama-2-7b-hf, llama.py"])  # fmt: skip
    assert d.source.framework == "vllm"


# --- a vLLM CPU log is read as CPU, whatever its KV line calls the cache ---------------------------------------------


@pytest.mark.parametrize(
    ("lines", "accelerator"),
    [
        # vLLM V1 on CPU prints the KV cache as "GPU KV cache size" (vllm pull request #39910's s390x log)
        (["(Worker pid=185) INFO 04-15 13:41:24 [cpu_model_runner.py:116] Warming up model for the compilation...",
          "(EngineCore pid=127) INFO 04-15 13:41:18 [kv_cache_utils.py:1319] GPU KV cache size: 1,126,400 tokens"],
         "cpu"),
        # V0 on CPU counts its cache in "# cpu blocks" (vllm issue #17954)
        (["INFO 05-11 12:04:07 [executor_base.py:112] # cpu blocks: 1170, # CPU blocks: 0"], "cpu"),
        # a GPU log counts its swap space in "# CPU blocks"
        (["INFO 12-20 20:25:46 distributed_gpu_executor.py:57] # GPU blocks: 3852, # CPU blocks: 4096"], "cuda"),
    ],
)  # fmt: skip
def test_the_cpu_runners_lines_name_the_cpu(lines: list[str], accelerator: str) -> None:
    assert diagnose_lines(lines).source.accelerator == accelerator


# --- a traceback cut before its error line is no claim of an OOM kill ------------------------------------------------


def test_a_cut_traceback_does_not_claim_the_process_was_killed() -> None:
    # a TGI decode traceback (as issue #883's), cut before its error line inside the shard's own Decode: the shard
    # was printing an exception, not killed
    lines = ["2023-09-09T18:44:36.094356Z ERROR text_generation_launcher: Method Decode encountered an error.",
             "Traceback (most recent call last):",
             '  File "/opt/conda/bin/text-generation-server", line 8, in <module>',
             "    sys.exit(app())",
             '  File "/opt/conda/lib/python3.9/site-packages/text_generation_server/server.py", line 85, in Decode',
             "    generations, next_batch = self.model.generate_token(batch)"]  # fmt: skip
    d = diagnose(lines, load({}), rules=cut_read_as_phase())
    assert (d.basis, d.cut) == ("cut", "traceback")
    text = "\n".join(d.recommendations)
    assert "dmesg" not in text
    assert "OOM killer" not in text
    assert "does not say it was out of memory" in d.recommendations[0]


def test_a_counted_phase_the_log_stops_in_claims_nothing_and_says_where_to_look() -> None:
    lines = [f"INFO [Warmup][Graph/Multimodal][{i}/7] batch_size:1 img_size:{b}" for i, b in [(1, 1600), (2, 3136)]]
    d = diagnose(lines, load({}))
    assert (d.stage, d.basis, d.cut) == ("none", "stopped", "phase")
    assert "dmesg" in d.recommendations[0]
    assert "--" not in d.recommendations[0]  # no memory flag for a failure the log does not show


# --- SGLang's own lines: its phases, its capture wrapper, its KV refusal, its name ----------------------------------

#: SGLang's scheduler lines (model_runner.py; sgl-project/sglang issue #1751's start-up).
SG = "[2024-10-22 06:31:49 TP0] "
SGLANG_START = [SG + "Load weight begin. avail mem=78.50 GB",
                SG + "Load weight end. type=Phi3ForCausalLM, dtype=torch.bfloat16, avail mem=71.20 GB",
                SG + "Memory pool end. avail mem=8.38 GB"]  # fmt: skip
TORCH_OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of " \
            "79.10 GiB of which 3.06 MiB is free."  # fmt: skip


def test_sglangs_kv_pool_refusal_is_the_kv_cache_and_asks_for_more_static_memory() -> None:
    # model_runner.py raises it when the pool leaves no token for the KV cache (max_total_num_tokens <= 0)
    lines = [*SGLANG_START[:2], "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."]
    d = diagnose(lines, load({}))
    assert d.stage == "kv_cache"
    assert d.source.name == "sglang"
    advice = "\n".join(d.recommendations)
    assert "raise --mem-fraction-static" in advice
    assert "lower SGLang's own --mem-fraction-static" not in advice
    assert "--gpu-memory-utilization" not in advice


@pytest.mark.parametrize(
    "lines",
    [
        # the wrapper's message names the capture (cuda_graph_runner.py: "Capture cuda graph failed: {e}")
        [*SGLANG_START, "Exception: Capture cuda graph failed: " + TORCH_OOM.split(": ", 1)[1]],
        # the phase line before a bare allocator error
        [*SGLANG_START, SG + "Capture cuda graph begin. This can take up to several minutes.", TORCH_OOM],
    ],
)
def test_an_oom_while_sglang_captures_its_graphs_is_graph_capture(lines: list[str]) -> None:
    d = diagnose(lines, load({}))
    assert d.stage == "graph_capture"
    assert d.source.name == "sglang"
    advice = "\n".join(d.recommendations)
    assert "SGLang's own --mem-fraction-static" in advice
    assert "--gpu-memory-utilization" not in advice


def test_an_oom_after_sglang_started_serving_is_runtime() -> None:
    lines = [*SGLANG_START, SG + "Capture cuda graph end. Time elapsed: 7.23 s. avail mem=0.53 GB. mem usage=0.93 GB.",
             "[2024-10-22 06:32:01] The server is fired up and ready to roll!", TORCH_OOM]  # fmt: skip
    assert diagnose_lines(lines).stage == "runtime"
    assert diagnose_lines(lines[:-1]).stage == "none"


# --- the executors' RPC dispatch names no phase; the V1 runner's request bookkeeping is serving ---------------------

#: A V1 worker's traceback as it starts (vllm issue #34643): the multiproc executor's busy loop runs whatever method
#: the engine asks for (load, profile, KV cache, capture, execute).
V1W = "(Worker pid=2371) ERROR 02-16 10:01:11 [multiproc_executor.py:839] "
BUSY_LOOP = [V1W + "Traceback (most recent call last):",
             V1W + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line '
             "847, in worker_busy_loop",
             V1W + "    output = func(*args, **kwargs)"]  # fmt: skip


def test_the_executors_rpc_loop_casts_no_vote() -> None:
    # cut in a function no phase table knows: nothing says which method the loop was running
    lines = [*BUSY_LOOP, V1W + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", '
             "line 700, in some_worker_method"]  # fmt: skip
    assert diagnose_lines(lines).stage == "none"


def test_the_v1_runners_request_bookkeeping_is_serving() -> None:
    # sample_tokens -> _bookkeeping_sync -> _get_prompt_logprobs_dict runs on an engine step's output only
    # (vllm 0.32 v1/worker/gpu_model_runner.py); profiling, capture and the sampler warm-up use dummy runs
    path = "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py"
    lines = [*BUSY_LOOP,
             V1W + f'  File "{path}", line 4477, in sample_tokens',
             V1W + f'  File "{path}", line 3589, in _bookkeeping_sync',
             V1W + f'  File "{path}", line 5320, in _get_prompt_logprobs_dict']  # fmt: skip
    d = diagnose_lines(lines, cut_read_as_phase())
    assert (d.stage, d.basis, d.cut) == ("runtime", "cut", "traceback")

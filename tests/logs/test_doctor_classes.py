"""The doctor's round-4 classes (issue 34 item 10), each pinned on the structure real logs have (the lines are
composed after the public logs cited beside each test; the real excerpts are fixtures under tests/data/logs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.data import LOGS
from tests.support.logs import body_lines, cut_read_as_phase
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose, diagnose_lines
from vllm_hpu_mm.logs.patterns import strip_prefix

V1 = "(Worker_TP0 pid=142964) ERROR 09-17 20:31:15 [multiproc_executor.py:671] "
GAUDI_WARMUP_FRAMES = [
    V1 + "Traceback (most recent call last):",
    V1 + '  File "/vllm-gaudi/vllm_gaudi/v1/worker/hpu_worker.py", line 249, in compile_or_warm_up_model',
    V1 + "    self.model_runner.warmup_model()",
    V1 + '  File "/vllm-gaudi/vllm_gaudi/v1/worker/hpu_model_runner.py", line 3587, in warmup_model',
    V1 + "    self.warmup_graphs(",
]
PROFILE_FRAMES = [
    V1 + "Traceback (most recent call last):",
    V1 + '  File "/opt/conda/lib/python3.11/site-packages/vllm/v1/worker/gpu_worker.py", line 157, in '
    "determine_available_memory",
    V1 + "    self.model_runner.profile_run()",
]
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.88 GiB. GPU 0 has a total capacity of 21.96 "
       "GiB of which 1.29 GiB is free.")  # fmt: skip


def advice(lines: list[str]) -> str:
    return "\n".join(diagnose(lines, load({})).recommendations)


# --- (a) an error printed without its class name is an error, not a cut log ----------------------------------------


@pytest.mark.parametrize("frames", [GAUDI_WARMUP_FRAMES, PROFILE_FRAMES])
def test_a_warm_up_error_without_its_class_name_is_no_oom(frames: list[str]) -> None:
    # vllm-gaudi pull request #192's worker traceback (warm-up frames), ended by the error's message alone
    lines = [*frames, V1 + "Graph compile failed. synStatus=synStatus 26 [Generic failure]."]
    d = diagnose(lines, load({}))
    assert (d.stage, d.basis) == ("none", "error")
    assert [e.line for e in d.evidence] == [len(lines)]
    text = "\n".join(d.recommendations)
    assert "Graph compile failed" in text
    assert "dmesg" not in text
    assert "OOM killer" not in text
    assert "--" not in text


def test_a_traceback_the_excerpt_stops_inside_is_still_a_cut() -> None:
    # the same frames with nothing after them (vllm #17631's stored excerpt): a cut, which claims no out-of-memory
    # failure (its frames are where any error is raised), and which the frames place where the cut rule is held off
    d = diagnose_lines(PROFILE_FRAMES)
    assert (d.stage, d.basis, d.cut) == ("unknown", "undecided", "traceback")
    d = diagnose_lines(PROFILE_FRAMES, cut_read_as_phase())
    assert (d.stage, d.basis) == ("startup", "cut")


def test_another_process_line_after_the_frames_does_not_end_the_traceback() -> None:
    # interleaved workers: the next line comes from another process, so it is not this traceback's message
    other = "(Worker_TP1 pid=142965) ERROR 09-17 20:31:15 [multiproc_executor.py:671] WorkerProc hit an exception."
    d = diagnose_lines([*PROFILE_FRAMES, other], cut_read_as_phase())
    assert (d.stage, d.basis) == ("startup", "cut")


# --- (b) the frame that raised the OOM before the last phase line --------------------------------------------------

V0_START = [
    "INFO 08-07 07:11:28 model_runner.py:736] Loading model weights took 14737.2578 MB",
    "INFO 08-07 07:11:31 gpu_executor.py:103] # GPU blocks: 7877, # CPU blocks: 512",
    "Processed prompts:   0%|          | 0/512 [00:00<?, ?it/s]",
    "[rank0]: Traceback (most recent call last):",
]


@pytest.mark.parametrize(
    ("runner", "stage"),
    [
        (['  File "/opt/conda/lib/python3.11/site-packages/vllm/worker/model_runner.py", line 1363, in execute_model',
          "    hidden_or_intermediate_states = model_executable("], "runtime"),
        (['  File "/usr/local/lib/python3.10/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 1441, in '
          "_dummy_run", "    hidden_states = model("], "graph_capture"),
    ],
)  # fmt: skip
def test_a_forward_oom_after_the_kv_cache_line_is_not_the_kv_cache(runner: list[str], stage: str) -> None:
    # vllm #7261 / #7721 (V0 execute_model -> the model's forward) and gpustack #1897 (V1 _dummy_run): the KV cache
    # was sized already; the model ran for requests or for a graph
    forward = ['  File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1562, in _call_impl',
               "    return forward_call(*args, **kwargs)",
               '  File "/opt/conda/lib/python3.11/site-packages/vllm/model_executor/models/qwen2.py", line 336, in '
               "forward", "    hidden_states = self.model(input_ids, positions, kv_caches,"]  # fmt: skip
    lines = [*V0_START, *("[rank0]: " + x for x in [*runner, *forward]), OOM]
    d = diagnose_lines(lines)
    assert (d.stage, d.basis) == (stage, "traceback")


def test_an_oom_allocating_the_kv_cache_stays_kv_cache() -> None:
    lines = [*V0_START,
             '[rank0]:   File "/usr/local/lib/python3.10/dist-packages/vllm/worker/cache_engine.py", line 90, in '
             "_allocate_kv_cache", OOM]  # fmt: skip
    assert diagnose_lines(lines).stage == "kv_cache"


@pytest.mark.parametrize(
    ("phase", "elided", "stage"),
    [("INFO 12-15 10:18:11 uniproc_executor.py:64] # GPU blocks: 31207", False, "kv_cache"),
     ("INFO 12-15 10:18:11 uniproc_executor.py:64] # GPU blocks: 31207", True, "unknown"),
     ("INFO:     Application startup complete.", True, "runtime")],
)  # fmt: skip
def test_a_phase_line_an_excerpt_elides_after_is_only_the_earliest_stage(phase: str, elided: bool, stage: str) -> None:
    # vllm pull request #11210's excerpt: the KV-cache line, "...", then the OOM of an image request; the lines left
    # out may hold capture or serving, so only the last stage is still known
    for mark in ("...", "[... truncated ...]", "<snip>"):
        lines = [phase, *([mark] if elided else []), OOM]
        assert diagnose_lines(lines).stage == stage, mark


@pytest.mark.parametrize(
    "line",
    ["Encoder cache will be initialized with a budget of 16384 tokens, and profiled with 1 image items of the maximum "
     "feature size.", "Dynamo bytecode transform time: 8.52 s", "torch.compile takes 38.10 s in total"],
)  # fmt: skip
def test_vllm_v1s_profiling_lines_are_start_up(line: str) -> None:
    # a vision model's encoder-cache profiling and the first torch.compile run inside profile_run, before the KV cache
    lines = [f"(EngineCore_DP0 pid=88) INFO 05-02 10:00:00 [gpu_model_runner.py:2200] {line}", OOM]
    d = diagnose_lines(lines)
    assert (d.stage, d.basis) == ("startup", "phase")


@pytest.mark.parametrize(
    "line",
    ["WARNING 04-28 07:43:17 [hpu_model_runner.py:1013] Configuration: ('prompt', 16, 896) was not warmed-up!",
     "INFO 04-28 07:40:02 [hpu_model_runner.py:2800] Skipping warmup..."],
)  # fmt: skip
def test_a_gaudi_shape_the_warm_up_did_not_build_is_serving(line: str) -> None:
    # vllm-fork / vllm-gaudi hpu_model_runner.py warn of an unwarmed shape only outside the warm-up (a request ran it);
    # under VLLM_SKIP_WARMUP warmup_model returns at once and the server serves next, compiling on first use
    lines = [
        "INFO 04-28 07:40:01 [hpu_worker.py:300] Usable num_blocks: 5000, actual allocated num_blocks: 5000",
        line,
        "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::786432000 (750)MB",
    ]
    d = diagnose_lines(lines)
    assert (d.stage, d.basis) == ("runtime", "phase")


@pytest.mark.parametrize(
    ("said", "stage"),
    [("EngineCore encountered a fatal error.", "runtime"), ("EngineCore failed to start.", "unknown")],
)
def test_vllm_v1s_engine_core_says_whether_it_had_started(said: str, stage: str) -> None:
    # v1/engine/core.py run_engine_core: "failed to start" while the engine is built (profile, KV cache, capture),
    # "encountered a fatal error" once its busy loop serves
    lines = [f"(EngineCore_DP0 pid=413) ERROR 11-10 12:30:57 [core.py:710] {said}", OOM]
    assert diagnose_lines(lines).stage == stage


#: A vision tower's attention out of memory while vLLM V1's engine core is built (gpustack/gpustack #4963, vLLM 0.17.1
#: on ROCm: Qwen3.5-0.8B's ViT asking 192 GiB); the excerpt shows no frame between the engine core and the encoder.
ENCODER_CORE = "(EngineCore_DP0 pid=43) ERROR 03-20 17:39:14 [core.py:1100] "
ENCODER_FRAMES = [
    ENCODER_CORE + "Traceback (most recent call last):",
    ENCODER_CORE + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/attention/ops/vit_attn_wrappers.py", '
    "line 236, in torch_sdpa_wrapper",
    ENCODER_CORE + "    output_i = apply_sdpa(q_i, k_i, v_i, scale=scale, enable_gqa=enable_gqa)",
    ENCODER_CORE + "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 192.00 GiB.",
]
ENGINE_INIT_FAILED = ("(APIServer pid=7) RuntimeError: Engine core initialization failed. See root cause above. Failed "
                      "core proc(s): {}")  # fmt: skip


@pytest.mark.parametrize(
    "lines",
    [[ENCODER_CORE + "EngineCore failed to start.", *ENCODER_FRAMES], [*ENCODER_FRAMES, ENGINE_INIT_FAILED]],
    ids=["engine-core-says", "api-server-says"],
)
def test_an_engine_core_that_failed_to_start_in_its_vision_encoder_failed_profiling(lines: list[str]) -> None:
    # while the engine core is built only profile_run runs the encoder (vLLM 0.32 v1/worker/gpu_model_runner.py;
    # the encoder's graphs are opt-in, cudagraph_mm_encoder): start-up
    d = diagnose_lines(lines)
    assert (d.stage, d.basis) == ("startup", "traceback")


def test_a_vision_encoders_failure_names_no_phase_without_the_engine_core_failing_to_start() -> None:
    # a request's images run the same encoder (_execute_mm_encoder): the frames alone do not say which
    assert diagnose_lines(ENCODER_FRAMES).stage == "unknown"


def test_a_failure_in_vllms_vision_encoder_marks_the_model_a_vision_one() -> None:
    # only a multimodal model's encoder calls vLLM's ViT attention: images are capped though no line names the model
    d = diagnose([ENCODER_CORE + "EngineCore failed to start.", *ENCODER_FRAMES], load({}))
    assert d.source.multimodal
    assert "max_pixels" in "\n".join(d.recommendations)


def test_a_vision_encoders_failure_after_the_kv_cache_was_sized_is_not_profiling() -> None:
    sized = "(EngineCore_DP0 pid=43) INFO 03-20 17:39:10 [kv_cache_utils.py:1087] GPU KV cache size: 437,840 tokens"
    lines = [sized, ENCODER_CORE + "EngineCore failed to start.", *ENCODER_FRAMES]
    assert diagnose_lines(lines).stage != "startup"


@pytest.mark.parametrize("what", ["sampler", "pooler (task='embed')"])
def test_vllms_own_warm_up_messages_name_the_warm_up_after_the_kv_cache(what: str) -> None:
    # v1/worker/gpu_model_runner.py _dummy_sampler_run / _dummy_pooler_run re-raise an OOM with these words; the
    # warm-up runs them after the KV cache exists (gpu_worker.py compile_or_warm_up_model)
    line = (f"RuntimeError: CUDA out of memory occurred when warming up {what} with 256 dummy requests. Please try "
            "lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.")  # fmt: skip
    d = diagnose_lines([line])
    assert (d.stage, d.basis) == ("graph_capture", "message")


# --- (c) only the command line's frames: unknown, not a learned guess ---------------------------------------------


def test_a_traceback_of_only_the_command_line_frames_is_unknown() -> None:
    # `vllm serve`'s own frames around an engine that failed (the API server re-raises): asyncio's
    # run_until_complete calls future.result(), which no phase owns
    lines = [
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/vllm", line 8, in <module>',
        "    sys.exit(main())",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/cli/main.py", line 54, in main',
        "    args.dispatch_function(args)",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/cli/serve.py", line 57, in cmd',
        "    uvloop.run(run_server(args))",
        '  File "/usr/lib/python3.12/asyncio/runners.py", line 118, in run',
        "    return self._loop.run_until_complete(task)",
        '  File "/usr/lib/python3.12/asyncio/base_events.py", line 691, in run_until_complete',
        "    return future.result()",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py", line 1069, in '
        "run_server",
        "    async with build_async_engine_client(args) as engine_client:",
        OOM,
    ]
    d = diagnose_lines(lines)
    assert (d.stage, d.basis) == ("unknown", "unknown")


# --- (d) another runtime's log gets that runtime's knob, never vLLM's flags ----------------------------------------


def test_mindie_is_named_and_gets_its_own_knob() -> None:
    path = LOGS / "gpustack_3541_mindie_warmup.log"  # gpustack #3541: MindIE names maxPrefillTokens
    d = diagnose(body_lines(path), load({}))
    assert d.stage == "startup"
    assert d.source.framework == "other"
    assert d.source.describe.startswith("MindIE (not a vLLM runtime)")
    text = "\n".join(d.recommendations)
    assert "not a vLLM runtime" in text
    assert "(the log names maxPrefillTokens)" in text
    assert "--" not in text
    assert "VLLM_" not in text


# --- (e) a serving frame while the log says start-up is under way --------------------------------------------------


def test_a_tgi_prefill_failure_during_the_warm_up_is_the_warm_ups() -> None:
    # TGI's launcher says it is warming up and never that it serves; the shard's error comes from its Prefill method.
    # The warm-up's failure (graph_capture), as the labels of record read every failure in TGI's warm-up since stop
    # 50's blind relabels (until then start-up's: test_doctor_relabel50.py); its advice is still the budget
    lines = [
        "2023-12-15T17:31:43.210000Z  INFO text_generation_router: router/src/main.rs:210: Warming up model",
        "2023-12-15T17:31:49.239172Z ERROR text_generation_launcher: Method Prefill encountered an error.",
        "Traceback (most recent call last):",
        '  File "/opt/conda/lib/python3.9/site-packages/text_generation_server/models/causal_lm.py", line 553, in '
        "generate_token",
        "    logits, past = self.forward(",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.83 GiB",
    ]
    d = diagnose_lines(lines)
    assert d.stage == "graph_capture"
    assert "--max-batch-prefill-tokens" in advice(lines)
    assert "--cuda-graphs" not in advice(lines)  # no graph was being captured


def test_a_tgi_prefill_failure_after_it_served_stays_runtime() -> None:
    path = LOGS / "runtime_dev" / "tgi_1374_prefill_after_warmup.log"
    assert diagnose_lines(body_lines(Path(path))).stage == "runtime"


# --- (f) an XLA compile out of memory is the TPU's warm-up; a log collector's prefix and trimmed frames -------------

TPU = "(EngineCore pid=106339) ERROR 06-03 07:41:11 [core.py:1184] "
COMPILE_FRAMES = [TPU + '  File "/root/tpu-inference/tpu_inference/runner/compilation_manager.py", line 102, in '
                  "_run_compilation",
                  TPU + "    result = fn(*args, **call_kwargs)"]  # fmt: skip
VMEM = (TPU + "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in "
        "memory space vmem. Used 76.58M of 64.00M vmem. Exceeded vmem capacity by 12.58M.")  # fmt: skip


def test_an_xla_compile_out_of_memory_is_the_warm_up_where_the_compilation_manager_says_so() -> None:
    # vllm-project/tpu-inference #2803: the compilation manager precompiles each shape before serving
    d = diagnose_lines([*COMPILE_FRAMES, VMEM])
    assert (d.stage, d.basis) == ("graph_capture", "traceback")
    # alone, the compile error names no phase: XLA compiles a request's first new shape as well (vllm #8318)
    d = diagnose_lines([VMEM])
    assert (d.stage, d.basis) == ("unknown", "unknown")
    # a running program that cannot allocate is no compile
    running = TPU + ("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to "
                     "allocate 1.00G. That was not possible. There are 500.00M free.")  # fmt: skip
    assert diagnose_lines([running]).stage == "unknown"
    # frames of the profiling pass decide first
    assert diagnose_lines([*PROFILE_FRAMES, VMEM]).stage == "startup"


#: vllm-project/vllm #29049: Google Cloud Logging's export of the engine core's lines, their indentation trimmed.
GCP = ("INFO 2025-11-19T20:16:36.096501749Z [resource.labels.containerName: vllm] (EngineCore_DP0 pid=270) ERROR "
       "11-19 12:16:36 [v1/engine/core.py:842] ")  # fmt: skip
SAMPLER = [GCP + 'File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3934, in '
           "_dummy_sampler_run",
           GCP + "sampler_output = self.sampler(",
           GCP + "^^^^^^^^^^^^^",
           GCP + 'File "/usr/local/lib/python3.12/dist-packages/torch/nn/modules/module.py", line 1775, in '
           "_wrapped_call_impl",
           GCP + "return self._call_impl(*args, **kwargs)"]  # fmt: skip


def test_a_log_collectors_prefix_and_trimmed_source_lines_keep_the_traceback() -> None:
    assert strip_prefix(GCP + "sampler_output = self.sampler(") == "sampler_output = self.sampler("
    # the container runtime's own log file (CRI): time stamp, stream, full-line tag
    assert strip_prefix("2025-11-19T20:16:36.096501749Z stderr F     self.sampler(") == "    self.sampler("
    d = diagnose_lines([*SAMPLER, GCP + OOM])
    assert (d.stage, d.basis) == ("graph_capture", "traceback")
    # cut after a trimmed source line: still the open traceback, not an error of another kind
    d = diagnose_lines(SAMPLER[:3], cut_read_as_phase())
    assert (d.stage, d.basis) == ("graph_capture", "cut")
    # a message line with nothing after it still ends the traceback in an error of another kind, and so does one
    # another process's caret line follows
    message = GCP + "Expected all tensors to be on the same device"
    d = diagnose_lines([*SAMPLER[:1], message])
    assert (d.stage, d.basis) == ("none", "error")
    d = diagnose_lines([*SAMPLER[:1], message, SAMPLER[2].replace("pid=270", "pid=271")])
    assert (d.stage, d.basis) == ("none", "error")

"""Stage readings of serving engines after rounds 58-61 (issue 34), each a class any engine's log can show, pinned on
lines composed after the engines' sources (cited in vllm_hpu_mm/logs/patterns.py) and the public logs under
tests/data/logs/heldout_round58/ ... heldout_round61/:

- MLC-LLM's "Insufficient GPU memory error: The available single GPU memory ..." is an estimate made from the model's
  metadata as the engine is created, for the weights and temporary buffers: no KV cache was sized. Read as start-up
  since stop 54: creating the engine loads the model whenever it happens (a load a request sets off is start-up too),
  as both blind labellers of round 143's MLC-LLM log read it.
- vLLM V0's profiling pass for a vision model warns, before its dummy forward, that the profiling sequence cannot hold
  the worst-case embeddings: a start-up phase line.
- SGLang's capture bars ("Capturing batches (bs=...)", the piecewise runner's "Capturing num tokens (...)") show graph
  capture under way.
- Ray's summary of a phase line the other workers printed ("[repeated Nx across cluster]"), right after a failure
  with no phase line before it, names the phase the workers were in.
- An app's own words that the failure came while it loaded the model (WebLLM's "Device was lost during reload",
  GPT4All's "Previous attempt to load model resulted in crash"), or a runtime's report that it could not compile the
  model for its device (OpenVINO Model Server): start-up."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

TORCH_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 800.00 MiB. GPU 0 has a total capacity of "
             "15.56 GiB of which 442.62 MiB is free.")  # fmt: skip


# --- MLC-LLM's estimate as its engine is created ----------------------------------------------------------------------


def test_mlc_llms_memory_estimate_is_the_engine_s_creation() -> None:
    d = diagnose_lines([
        "org.apache.tvm.Base$TVMError: TVMError: Check failed: (output_res.IsOk()) is false: Insufficient GPU memory "
        "error: The available single GPU memory is 4096.000 MB, which is less than the sum of model weight size "
        "(4300.000 MB) and temporary buffer size (600.000 MB).",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (True, "startup")


# --- vLLM V0's profiling warnings are start-up phase lines ---------------------------------------------------------


def test_a_failure_after_vllms_multimodal_profiling_warning_is_startup() -> None:
    d = diagnose_lines([
        "WARNING 04-27 16:27:59 [profiling.py:245] The sequence length used for profiling (max_num_batched_tokens / "
        "max_num_seqs = 20000) is too short to hold the multi-modal embeddings in the worst case (98304 tokens in "
        "total, out of which {'image': 81920} are reserved for multi-modal embeddings).",
        f"ERROR 04-27 16:28:02 [engine.py:448] {TORCH_OOM}",
    ])  # fmt: skip
    assert (d.stage, d.basis) == ("startup", "phase")


def test_a_failure_after_profile_runs_max_num_seqs_warning_is_startup() -> None:
    d = diagnose_lines([
        "WARNING 03-31 16:53:06 [model_runner.py:1296] Computed max_num_seqs (min(64, 16384 // 32768)) to be less "
        "than 1. Setting it to the minimum value of 1.",
        f"ERROR 03-31 16:53:12 [engine.py:448] {TORCH_OOM}",
    ])  # fmt: skip
    assert (d.stage, d.basis) == ("startup", "phase")


# --- SGLang's capture bars show graph capture ----------------------------------------------------------------------


def test_a_failure_under_sglangs_piecewise_capture_bar_is_graph_capture() -> None:
    d = diagnose_lines([
        "[2025-12-01 10:00:00] KV Cache is allocated. #tokens: 100000, K size: 10.00 GB, V size: 10.00 GB",
        "Capturing num tokens (num_tokens=3968 avail_mem=0.05 GB):   2%|▎         | 1/58 [00:00<00:56,  1.01it/s]"
        "Traceback (most recent call last):",
        '  File "/venv/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1786, in _call_impl',
        "    return forward_call(*args, **kwargs)",
        "torch.OutOfMemoryError:",
    ])  # fmt: skip
    assert d.stage == "graph_capture"


def test_a_failure_under_sglangs_batch_capture_bar_is_graph_capture() -> None:
    d = diagnose_lines([
        "[2025-12-01 10:00:00] KV Cache is allocated. #tokens: 100000, K size: 10.00 GB, V size: 10.00 GB",
        "Capturing batches (bs=160 avail_mem=0.10 GB):  40%|████      | 8/20 [00:02<00:03,  3.50it/s]",
        TORCH_OOM,
    ])  # fmt: skip
    assert d.stage == "graph_capture"


def test_a_failure_after_sglangs_piecewise_capture_ended_is_not_capture() -> None:
    d = diagnose_lines([
        "Capturing num tokens (num_tokens=4 avail_mem=24.84 GB): 100%|██████████| 74/74 [00:09<00:00,  7.61it/s]",
        "[2025-12-01 10:00:09] Capture piecewise CUDA graph end. Time elapsed: 9.80 s. mem usage=1.99 GB. avail "
        "mem=24.80 GB.",
        TORCH_OOM,
    ])  # fmt: skip
    assert d.stage == "runtime"


# --- Ray's summary of the workers' phase line ----------------------------------------------------------------------


def test_rays_summary_of_a_phase_line_after_the_failure_names_its_phase() -> None:
    failure = ["RuntimeError: CUDA error: out of memory",
               "CUDA kernel errors might be asynchronously reported at some other API call."]  # fmt: skip
    line = "(RayWorkerVllm pid=74362) INFO 12-18 21:44:36 model_runner.py:394] Capturing the model for CUDA graphs."
    # the summary stands for copies printed before it; the same line untagged, after the failure, came after it
    assert diagnose_lines([*failure, line]).stage == "unknown"
    d = diagnose_lines([*failure, f"{line} [repeated 7x across cluster]"])
    assert (d.stage, d.basis) == ("graph_capture", "phase")


# --- a failure the app says came while it loaded the model ---------------------------------------------------------


def test_a_device_lost_during_webllms_reload_is_startup() -> None:
    d = diagnose_lines([
        "Device was lost during reload. This can happen due to insufficient memory or other GPU constraints. Detailed "
        "error: [object GPUDeviceLostInfo]. Please try to reload WebLLM with a less resource-intensive model.",
    ])  # fmt: skip
    assert (d.stage, d.basis) == ("startup", "message")


def test_gpt4alls_previous_load_crash_is_startup() -> None:
    d = diagnose_lines([
        "[Warning] (Tue Jul 25 13:08:13 2023): ERROR: Previous attempt to load model resulted in crash for "
        "`ggml-model-q4_0.bin` most likely due to out of memory. You should either remove this model or decrease your "
        "system RAM by closing other applications.",
    ])  # fmt: skip
    assert (d.stage, d.basis) == ("startup", "message")


def test_a_model_that_could_not_be_compiled_for_its_device_failed_at_startup() -> None:
    d = diagnose_lines([
        "[GPU] Exceeded max size of memory allocation, check debug message for size info",
        "; model: phi-2-fp16; version: 1; device: GPU",
        "[2024-01-31 14:58:27.798][1][serving][debug][modelversionstatus.cpp:81] setLoading: phi-2-fp16 - 1 (previous "
        "state: LOADING) -> error: UNKNOWN",
        "[2024-01-31 14:58:27.799][1][serving][error][model.cpp:153] Error occurred while loading model: phi-2-fp16; "
        "version: 1; error: Cannot compile model into target device",
    ])  # fmt: skip
    assert (d.stage, d.basis) == ("startup", "message")

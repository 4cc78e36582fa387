"""The classes rounds 36 and 37's stage misses belong to (issue 34): an out-of-memory failure the doctor recognised and
answered ``unknown`` although the program's own lines show it was serving. Each is pinned on lines composed after the
programs' sources and the public logs under tests/data/logs/heldout_round36/ and heldout_round37/, and on another
program that says the same in its own words; lines that do not say when keep the failure ``unknown``.

- A loop or a thread whose name says it runs forward passes, batches or requests again and again is serving (SGLang's
  overlap thread ``forward_thread_func``); a loop of no named work, an event loop or a single forward says nothing.
- The failure's own line naming the work item it failed on (a session, invocation, request or prompt by its id) or
  the input it skips and goes on from (a benchmark's case) is serving; dummy inputs, advice and start-up's own parts
  (a builder's tactics) are not such items."""

from __future__ import annotations

import pytest

from tests.support.logs import DEVELOPMENT_LOGS, HELDOUT_ROUNDS, body_lines, expected_stage
from vllm_hpu_mm.logs.doctor import diagnose_lines

CUDA_ERROR = "RuntimeError: CUDA error: out of memory"
TORCH_OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has 1.02 GiB free."


def traceback(*frames: tuple[str, str], error: str = CUDA_ERROR) -> list[str]:
    """A Python traceback through ``frames`` (path, function), outermost first, ended by ``error``."""
    lines = ["Traceback (most recent call last):"]
    for k, (path, func) in enumerate(frames):
        lines += [f'  File "{path}", line {100 + k}, in {func}', "    x = x + 1"]
    return [*lines, error]


SITE = "/usr/lib/python3.12/site-packages"

# --- a loop or a thread of forward passes, batches or requests ----------------------------------------------------


def test_sglangs_forward_thread_is_serving() -> None:
    # sgl-project/sglang #4547: the overlap worker's thread, which takes batch after batch from the scheduler's queue
    # (managers/tp_worker_overlap_thread.py), fails as it leaves its stream
    d = diagnose_lines(traceback(
        (f"{SITE}/sglang/srt/managers/tp_worker_overlap_thread.py", "forward_thread_func"),
        (f"{SITE}/torch/cuda/__init__.py", "__exit__"),
        (f"{SITE}/torch/cuda/__init__.py", "set_stream"),
    ))  # fmt: skip
    assert (d.oom, d.stage) == (True, "runtime")


@pytest.mark.parametrize("func", ["request_loop", "batch_worker_thread", "_serve_loop", "response_thread"])
def test_any_programs_loop_of_named_work_is_serving(func: str) -> None:
    # a program the phase table does not know, whose loop or thread names the work it repeats
    d = diagnose_lines(traceback(("/srv/app/engine.py", func), ("/srv/app/model.py", "attention"), error=TORCH_OOM))
    assert (d.oom, d.stage) == (True, "runtime")


@pytest.mark.parametrize(
    "frames",
    [
        # vLLM's RPC loop runs whichever worker method is asked (the load too) and a thread's run runs any target
        [(f"{SITE}/vllm/v1/executor/multiproc_executor.py", "worker_busy_loop"), ("/srv/app/model.py", "attention")],
        [(f"{SITE}/threading.py", "_bootstrap_inner"), ("/srv/app/worker.py", "run"), ("/srv/app/model.py", "mlp")],
        # an event loop builds an API server's engine before it serves; one forward runs in profiling as well
        [("/srv/app/server.py", "run_event_loop"), ("/srv/app/model.py", "attention")],
        [("/srv/app/model.py", "forward"), ("/srv/app/model.py", "attention")],
    ],
)
def test_a_loop_of_no_named_work_or_a_single_forward_leaves_the_stage_unknown(frames: list[tuple[str, str]]) -> None:
    d = diagnose_lines(traceback(*frames, error=TORCH_OOM))
    assert (d.oom, d.stage) == (True, "unknown")


# --- the work item the failure's line names ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        # ROCm/legacy-rocm-build #4358: InvokeAI's session processor reports the node of the queued session it ran
        "[2025-02-10 21:49:50,303]::[InvokeAI]::ERROR --> Error while invoking session 18f998d3-635e-40cf-add0-"
        "eb500c4af8e3, invocation fffe4dcd-c763-4a53-85e6-bd23ae48bbc0 (l2i): HIP out of memory. Tried to allocate "
        "4.50 GiB. GPU 0 has a total capacity of 15.98 GiB of which 1.40 GiB is free.",
        # NVIDIA/TensorRT-LLM #1716: its benchmark.py skips the case it could not allocate and goes on
        "[06/04/2024-10:56:23] [TRT-LLM] [E] Exception CUDA out of memory. Tried to allocate 24.00 MiB. GPU  caught "
        "while allocating memory; skipping (1, 1024, 512, 1.0)",
        # vLLM's TPU offload connector names the request by the id its OpenAI server gave it
        "ERROR 02-10 19:23:35 [tpu_offload_connector.py:2498] Error gathering blocks for request cmpl-9cbf94ef9250316c-"
        "0: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 832.0K.",
        # any server that names the request or prompt it failed on
        "ERROR worker.py:212 CUDA out of memory. Tried to allocate 2.00 GiB while handling request 8812",
        "[batch] torch.OutOfMemoryError: CUDA out of memory during prompt #17; skipping prompt 17",
    ],
)
def test_a_failure_that_names_its_work_item_is_serving(line: str) -> None:
    d = diagnose_lines([line])
    assert (d.oom, d.stage, d.basis) == (True, "runtime", "message")


@pytest.mark.parametrize(
    "line",
    [
        # advice naming a setting of requests, with no request of its own
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB. Please set a smaller number for "
        "`--max-running-requests`.",
        # a request without an id says no more than the error does
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB for the requests",
        # a buffer requested is no request (ONNX Runtime's session initializing around it is start-up's:
        # test_doctor_round102.py); a session being created is start-up's; a scheduler's job is the program
        "RUNTIME_EXCEPTION : Failed to allocate memory for requested buffer of size 1073741824 (out of memory)",
        "RuntimeError: CUDA out of memory while creating session 3",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB for job 48213",
    ],
)
def test_a_failure_that_names_no_work_item_leaves_the_stage_unknown(line: str) -> None:
    d = diagnose_lines([line])
    assert (d.oom, d.stage) == (True, "unknown")


@pytest.mark.parametrize("part", ["tactic 3", "layer 59", "download"])
def test_what_start_up_skips_is_its_own_part_not_a_work_item(part: str) -> None:
    # TensorRT's builder skips a tactic it has no memory for (a build's own line: start-up), a loader a layer it
    # cannot offload
    d = diagnose_lines([f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB; skipping {part}"])
    assert d.oom
    assert d.stage != "runtime"


def test_the_sampler_warm_ups_dummy_requests_are_no_work_item() -> None:
    # vLLM's sampler warm-up names how many dummy requests it ran: graph capture's warm-up, not serving
    d = diagnose_lines(["RuntimeError: CUDA out of memory occurred when warming up sampler with 256 dummy requests."])
    assert d.stage == "graph_capture"


# --- what does not show when stays unknown -------------------------------------------------------------------------


#: Logs labelled ``unknown`` (from the excerpt alone, by two blind labellers of three) whose one line is a runtime's
#: message that only one of its phases raises, so the doctor names that phase and is scored wrong: TGI raises "Not
#: enough memory to handle N prefill tokens" only in its warm-up (server/text_generation_server/models/
#: flash_causal_lm.py@db931fcf:1551, ``warmup``; its collector labelled it so). Xinference's model actor records "Model
#: actor is out of memory" only for the calls it serves (xinference/core/model.py@7ecec16b ``_handle_oom_error``, from
#: the request wrapper and the streamed answer's generators; its load is not wrapped): round 138's reranker log, which
#: both of its labellers read as unknown. Ollama reports "llama runner process has terminated" only while it waits for
#: a runner it started to load the model (ollama/ollama llm/server.go ``WaitUntilRunning``; a runner that dies once
#: loaded is "no longer running"): round 170's CLI log, its runner killed, which both labellers read as unknown.
READ_FROM_THE_RUNTIME = {
    "tgi_856_not_enough_memory_prefill_tokens.log": "graph_capture",
    "xinference_4808_reranker_actor_oom.log": "runtime",
    "ollama_6238_cli_runner_killed.log": "startup",
    # round 187's reranker, the same record as round 138's
    "xinference_3837_reranker_model_actor_oom.log": "runtime",
}
#: Logs labelled ``unknown`` by two blind labellers whose failure the doctor places by a rule the labels of other rounds
#: bear out, where these excerpts' labellers would not: a ggml backend's buffer refused with no line around it is read
#: as the load's (the weights, the KV cache and the compute graphs take their buffers as the model loads; round 185's
#: RPC server, round 189's Jan/cortex line); a decode frame that concatenates onto the KV cache is a sequence decoding
#: (round 186's vllm-ascend ``_forward_decode``: ``k_cache = torch.cat(``), which the labellers thought might be a dummy
#: run.
READ_BY_A_RULE = {
    "llama_cpp_7293_rpc_server_cudamalloc_oom.log": "startup",
    "other_jan_3761_cortex_cudamalloc_oom.log": "startup",
    "vllm_ascend_4581_torchair_forward_decode_npu_oom.log": "runtime",
}
#: Logs labelled ``unknown`` by their one collector (before blind labels, round 63) whose failure came in a training
#: call the doctor reads as running the model, as the labels of other rounds do (round 14's gpt-2-simple and round 49's
#: EasyDeL training steps, labelled runtime): a notebook cell's ``----> 8 model.train(...)`` (ultralytics #4057),
#: read since stop 54, when IPython's long arrow was first read as a frame.
TRAINING_READ_AS_RUNNING = {"other_ultralytics_4057_ubuntu_train_oom.log": "runtime"}


def test_no_log_whose_excerpt_does_not_show_when_is_given_a_stage() -> None:
    # every real log of every set that its collector labelled ``unknown``: the stage cues read what a program's lines
    # show, so where they show nothing of when, none of them may name a stage
    paths = [*DEVELOPMENT_LOGS, *(p for logs in HELDOUT_ROUNDS.values() for p in logs)]
    unknown = [p for p in paths if expected_stage(p) == "unknown"]
    staged = {p.name: d.stage for p in unknown if (d := diagnose_lines(body_lines(p))).stage not in ("unknown", "none")}
    assert len(unknown) >= 90
    assert staged == READ_FROM_THE_RUNTIME | TRAINING_READ_AS_RUNNING | READ_BY_A_RULE

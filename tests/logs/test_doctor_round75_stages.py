"""The classes rounds 74-75's stage misses belong to (issue 34): an out-of-memory failure the doctor recognised and
answered ``unknown`` although the program's own lines say when it came. Each is pinned on lines composed after the
public logs under tests/data/logs/heldout_round74/ and heldout_round75/ and on another program that says the same in
its own words; lines that do not say when keep the failure ``unknown``.

- A worker's body that names no work of its own (a tensor-parallel worker's dispatch loop) running a forward pass, a
  batch or a request it was sent is serving; sent a load or a rehearsal (a warm-up, a profiling pass), it is not.
- The runtime's report, on the failure's line or after it, that it could not run the model on its input (MNN's
  "Can't run session because not resized", "Failed to run inference", TensorFlow Lite's "Failed to invoke tflite!")
  is serving; building or resizing a session, or a run that rehearses, is not.
- Ray's out-of-memory kill names an actor by the task that created it (``RayWorkerWrapper.__init__``) whenever the
  actor is killed, at start-up or hours into serving: the name says nothing of when, and the failure stays
  ``unknown``."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

TORCH_OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 114.00 MiB (GPU 0; 23.57 GiB total)"

# --- a worker's body running the work it was sent -------------------------------------------------------------------

EXL3 = "/opt/conda/lib/python3.11/site-packages/exllamav3/model/model_tp_fn.py"


def _worker(callee: str, call: str, path: str = EXL3, body: str = "mp_model_worker") -> list[str]:
    return [
        "Traceback (most recent call last):",
        f'  File "{path}", line 74, in {body}',
        "    result = func(local_context, *args)",
        f'  File "{path}", line 199, in {callee}',
        f"    {call}",
        TORCH_OOM,
    ]


def test_a_tensor_parallel_workers_forward_it_was_sent_is_serving() -> None:
    # turboderp-org/exllamav3 #70: the TP worker's dispatch loop runs the forward pass the model sent it
    d = diagnose_lines(_worker("mp_model_forward", "x = module.forward(x,"))
    assert d.stage == "runtime"
    # another program's worker, sent a batch's forward
    app = "/srv/app/dist/rank_runner.py"
    d = diagnose_lines(_worker("handle_forward_batch", "logits = self.model(x)", app, "rank_worker"))
    assert d.stage == "runtime"


def test_a_worker_sent_a_load_or_a_rehearsal_is_not_serving() -> None:
    assert diagnose_lines(_worker("mp_model_load", "module.load()")).stage == "startup"
    assert diagnose_lines(_worker("mp_warmup_forward", "x = module.forward(x,")).stage == "unknown"
    assert diagnose_lines(_worker("mp_profile_forward", "x = module.forward(x,")).stage == "unknown"


def test_a_forward_with_no_worker_around_it_stays_unknown() -> None:
    lines = _worker("mp_model_forward", "x = module.forward(x,")
    assert diagnose_lines([lines[0], *lines[3:]]).stage == "unknown"


# --- the runtime could not run the model on its input ---------------------------------------------------------------

MNN_OOM = "Out of memory when gamma is acquired in CudaLayerNorm. "


def test_mnns_refusal_to_run_a_session_after_the_failure_is_serving() -> None:
    # wangzhaode/mnn-llm #25: the session's resize for the first question runs out of memory, so its run is refused
    lines = [MNN_OOM, "Out of memory when beta is acquired in CudaLayerNorm. ", "Can't run session because not resized"]
    d = diagnose_lines([*lines, "Segmentation fault "])
    assert d.stage == "runtime"


def test_other_runtimes_words_for_a_run_that_failed_are_serving() -> None:
    assert (
        diagnose_lines(
            ["ERROR: Out of memory: failed to allocate 268435456 bytes", "ERROR: Failed to invoke tflite!"]
        ).stage
        == "runtime"
    )
    line = "RuntimeError: Failed to run inference: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert diagnose_lines([line]).stage == "runtime"


def test_building_a_session_or_a_rehearsing_run_is_not_a_run_over_an_input() -> None:
    assert diagnose_lines([MNN_OOM, "Can't create session"]).stage == "unknown"
    assert diagnose_lines([MNN_OOM, "Failed to resize session"]).stage == "unknown"
    assert diagnose_lines([TORCH_OOM, "Failed to run inference during warm-up, aborting"]).stage == "unknown"


# --- Ray's kill names the actor, not the work -----------------------------------------------------------------------


def _ray_kill(actor: str) -> list[str]:
    return [
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        f"Memory on the node (IP: 10.0.0.4, ID: 3486ef92) where the task (actor ID: 46c8d4da, name={actor}, pid=13378, "
        "memory used=3.37GB) was running was 2152.43GB / 2265.25GB (0.950196), which exceeds the memory usage "
        "threshold of 0.95. Ray killed this worker (ID: 5dd7c3ab) because it was the most recently scheduled task",
    ]


def test_rays_kill_of_an_actor_named_by_its_creation_task_stays_unknown() -> None:
    # vllm-project/vllm #2669 (hours into serving) and #15102 print the same name: the actor's creation task
    assert diagnose_lines(_ray_kill("RayWorkerVllm.__init__")).stage == "unknown"
    assert diagnose_lines(_ray_kill("RayWorkerWrapper.__init__")).stage == "unknown"

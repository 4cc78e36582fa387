"""A traceback an excerpt cuts before its last line, whose error the log states anyway, is that error: a failure of
another kind (``none``), not a cut that may hide an out-of-memory one (issue 34; held-out round 42 as it came,
tests/data/logs/heldout_round42/vllm_cpu_8660_gemma2_sdpa_softcap.log and
vllm_4432_capture_nccl_stream_dependency.log). Where nothing states the error, or what states it speaks of memory, the
cut stays undecided: no out-of-memory claim, no ``none`` either.
"""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

WORKER = "(VllmWorkerProcess pid=143) ERROR 09-20 08:05:48 multiproc_worker_utils.py:226] "
#: The frames of vLLM's worker loading the model, cut after them (what an issue's excerpt keeps).
LOAD_FRAMES = [
    WORKER + '  File "/usr/lib/python3.10/site-packages/vllm/executor/multiproc_worker_utils.py", line 223, in '
    "_run_worker_process",
    WORKER + "    output = executor(*args, **kwargs)",
    WORKER + '  File "/usr/lib/python3.10/site-packages/vllm/worker/cpu_worker.py", line 217, in load_model',
    WORKER + "    self.model_runner.load_model()",
    "...",
]
#: vLLM's runner capturing the model for CUDA graphs, cut after its first frames.
CAPTURE_FRAMES = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.8/site-packages/vllm/worker/model_runner.py", line 921, in capture',
    "    hidden_states = self.model(",
    "...",
]
NCCL = "host-6:56890:56890 [0] "


def opened_with(message: str) -> list[str]:
    """vLLM's worker's record of a failed method: the exception's message, then the traceback, on one line."""
    head = f"Exception in worker VllmWorkerProcess while processing method load_model: {message}Traceback (most "
    return [WORKER + head + "recent call last):", *LOAD_FRAMES]


def test_a_cut_traceback_whose_opening_line_states_its_error_is_that_error() -> None:
    d = diagnose_lines(opened_with("Torch SPDA does not support logits soft cap., "))
    assert (d.stage, d.basis, d.oom) == ("none", "error", False)


def test_a_cut_traceback_opened_by_a_record_with_no_message_stays_undecided() -> None:
    d = diagnose_lines(opened_with(""))
    assert (d.stage, d.basis) == ("unknown", "undecided")


def test_a_cut_traceback_under_nccls_warning_of_a_failed_cuda_call_is_that_failure() -> None:
    lines = [
        NCCL + "enqueue.cc:267 NCCL WARN Cuda failure 'dependency created on uncaptured work in another stream'",
        NCCL + "NCCL INFO enqueue.cc:1045 -> 1",
        *CAPTURE_FRAMES,
    ]
    d = diagnose_lines(lines)
    assert (d.stage, d.basis, d.oom) == ("none", "error", False)


def test_a_cut_traceback_under_nccls_warning_of_a_failed_cuda_allocation_is_that_oom() -> None:
    # NCCL relays a CUDA allocation that failed in the same words: the failure is memory, placed by the frames
    d = diagnose_lines([NCCL + "enqueue.cc:267 NCCL WARN Cuda failure 'out of memory'", *CAPTURE_FRAMES])
    assert (d.stage, d.oom) == ("graph_capture", True)


def test_a_cut_traceback_under_a_cuda_failure_nccl_went_on_from_stays_undecided() -> None:
    # at INFO level NCCL cleared the failure and carried on (its CUDACHECKIGNORE): it is not what the traceback raised
    d = diagnose_lines([NCCL + "NCCL INFO Cuda failure 'operation not permitted when stream is capturing'",
                        *CAPTURE_FRAMES])  # fmt: skip
    assert (d.stage, d.basis) == ("unknown", "undecided")


def test_a_cut_traceback_whose_opening_line_states_an_out_of_memory_error_is_that_oom() -> None:
    d = diagnose_lines(opened_with("CUDA out of memory. Tried to allocate 2.00 GiB. "))
    assert (d.stage, d.oom) == ("startup", True)

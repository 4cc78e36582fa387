"""Failures of another kind that rounds 82-85 (and round 47) saw left undecided (issue 34): the log states the error,
but not where the scanner read it. Each is a class any program's log can show, pinned on lines composed after the
public logs under tests/data/logs/heldout_round47, heldout_round82 and heldout_round84, and on those logs:

- The error stated a few lines above its traceback with only announcements of the failure between: NCCL's "internal
  error" above vLLM's "Error executing method 'init_device'", a request's error body above TGI's "Method Prefill
  encountered an error.", another rank's exception line above SGLang's "Scheduler hit an exception:". A line of other
  work between, a process's death, or memory words in the stated error leave the cut undecided.
- A traceback an excerpt shows without its header, its error quoted first: that error's traceback. Frames alone, or an
  excerpt that begins inside a logger's record (the line above the first frame is the traceback's source line), stay
  undecided."""

from __future__ import annotations

from tests.support.data import LOGS
from tests.support.logs import body_lines
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose

_PREFIX = "ERROR 05-30 22:22:26 [worker_base.py:620] "
_INIT_DEVICE = [
    f"{_PREFIX}Traceback (most recent call last):",
    f'{_PREFIX}  File "/x/vllm/worker/worker_base.py", line 612, in execute_method',
    f"{_PREFIX}    return run_method(self, method, args, kwargs)",
    f'{_PREFIX}  File "/x/vllm/worker/worker.py", line 160, in init_device',
    f"{_PREFIX}    init_worker_distributed_environment(self.vllm_config, self.rank)",
]
_ANNOUNCED = [
    "ERROR 05-30 22:22:26 [pynccl.py:154] Error type: <class 'RuntimeError'>",
    f"{_PREFIX}Error executing method 'init_device'. This might cause deadlock in distributed execution.",
]


def _verdict(lines: list[str]) -> tuple[str, str]:
    d = diagnose(lines, load({}))
    return d.stage, d.basis


def _log(name: str) -> tuple[str, str]:
    return _verdict(body_lines(LOGS / name))


# --- the error stated above the records that announce it ------------------------------------------------------------


def test_an_error_stated_above_the_records_announcing_it_is_the_cut_tracebacks_error() -> None:
    for stated in (
        "ERROR 05-30 22:22:26 [pynccl.py:153] ncclCommInitRank failed with error: NCCL error: internal error - please "
        "report this issue to the NCCL developers",
        "RuntimeError: Expected all tensors to be on the same device, but found at least two devices",
        '{"error":"Request failed during generation: Server error: attention_scores_2d must be a CUDA tensor",'
        '"error_type":"generation"}',
    ):
        assert _verdict([stated, *_ANNOUNCED, *_INIT_DEVICE]) == ("none", "error"), stated


def test_another_ranks_exception_line_above_the_schedulers_report_is_its_error() -> None:
    raised = [
        '  File "/x/sglang/srt/speculative/build_eagle_tree.py", line 149, in build_tree_kernel',
        "    sgl_build_tree_kernel(",
        "NameError: name 'sgl_build_tree_kernel' is not defined. Did you mean: 'build_tree_kernel'?",
        "",
        "[2025-02-18 14:31:01] Received sigquit from a child proces. It usually means the child failed.",
        "[2025-02-18 14:31:01 TP3] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/x/sglang/srt/managers/scheduler.py", line 1827, in run_scheduler_process',
        "    scheduler.event_loop_normal()",
        '  File "/x/sglang/srt/managers/scheduler.py", line 1089, in run_batch',
        "    ) = self.draft_worker.forward_batch_speculative_generation(batch)",
    ]
    assert _verdict(raised) == ("none", "error")


def test_a_cut_traceback_stays_undecided_where_nothing_between_only_announces_the_stated_error() -> None:
    nccl = "ERROR 05-30 22:22:26 [pynccl.py:153] ncclCommInitRank failed with error: NCCL error: internal error"
    assert _verdict([*_ANNOUNCED, *_INIT_DEVICE]) == ("unknown", "undecided")  # announcements alone state nothing
    going_on = "INFO 05-30 22:22:26 [parallel_state.py:1004] rank 3 in world size 16 is assigned as DP rank 0"
    assert _verdict([nccl, going_on, *_ANNOUNCED, *_INIT_DEVICE]) == ("unknown", "undecided")
    served = 'INFO:     127.0.0.1:51234 - "POST /generate HTTP/1.1" 500 Internal Server Error'  # a record of work
    assert _verdict([nccl, served, _ANNOUNCED[1], *_INIT_DEVICE]) == ("unknown", "undecided")
    died = f"{_PREFIX}Worker proc VllmWorker-3 died unexpectedly, shutting down executor."
    assert _verdict([nccl, died, _ANNOUNCED[1], *_INIT_DEVICE]) == ("unknown", "undecided")
    memory = '{"error":"Request failed during generation: Server error: CUDA out of memory. Tried to allocate 2 GiB"}'
    assert _verdict([memory, *_ANNOUNCED, *_INIT_DEVICE])[0] != "none"  # the stated error is memory's


def test_the_public_logs_that_state_their_error_above_its_announcements_are_none() -> None:
    for name in (
        "heldout_round82/vllm_18997_nccl_init_internal.log",
        "heldout_round47/tgi_375_cpu_attention_scores_cuda_tensor.log",
        "heldout_round84/sglang_3582_nextn_build_tree_nameerror.log",
    ):
        assert _log(name) == ("none", "error"), name


# --- a traceback shown without its header, its error quoted first ---------------------------------------------------

_CAPTURE = [
    'File "/x/vllm/v1/worker/gpu_model_runner.py", line 2691, in capture_model',
    "    self._capture_cudagraphs(",
    'File "/x/vllm/v1/worker/gpu_model_runner.py", line 2741, in _capture_cudagraphs',
    "    self._dummy_run(num_tokens,",
    "...",
]


def test_a_headerless_traceback_after_its_quoted_error_is_that_error() -> None:
    assert _verdict(["        ValueError: Invalid type for tensors", "", *_CAPTURE]) == ("none", "error")
    assert _log("heldout_round82/vllm_rocm_44_capture_invalid_type.log") == ("none", "error")


def test_a_traceback_headed_in_its_own_words_after_its_quoted_error_is_that_error() -> None:
    # nlzy/vllm-gfx906 #44 as the thread shows it: the error, a blank line, "Stack Trace:", then the frames (cut)
    for header in ("Stack Trace:", "Stack trace:", "Call stack:", "Backtrace:"):
        assert _verdict(["ValueError: Invalid type for tensors", "", header, *_CAPTURE]) == ("none", "error")
    # the header alone explains nothing: the cut stays undecided
    assert _verdict(["Stack Trace:", *_CAPTURE]) == ("unknown", "undecided")
    # a line of other work between the error and the header still does
    other = ["ValueError: Invalid type for tensors", "INFO 01-02 10:00:00 [core.py:90] Loading model", "Stack Trace:"]
    assert _verdict([*other, *_CAPTURE]) == ("unknown", "undecided")


def test_a_headerless_traceback_with_no_error_stated_above_it_stays_undecided() -> None:
    assert _verdict(_CAPTURE) == ("unknown", "undecided")
    record = "(Worker_TP4 pid=21236) ERROR 10-31 03:29:24 [multiproc_executor.py:671] "
    inside = [f"{record}    self._execute_mm_encoder(scheduler_output)", *(f"{record}  {line}" for line in _CAPTURE)]
    assert _verdict(inside) == ("unknown", "undecided")  # the excerpt began inside the traceback: its source line
    memory = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."
    assert _verdict([memory, "", *_CAPTURE])[0] != "none"

"""A child process's death by SIGKILL in Go's words (issue 34), as rounds 94 and 96 and round 24's relabelled log
show it in Ollama's, pinned on lines composed after the public logs under tests/data/logs/heldout_round94,
heldout_round24, heldout_round96 and heldout_round65:

- Go's os/exec reports a child killed by signal 9 as "signal: killed": a bare kill, which the labels read as the OOM
  killer's where the excerpt shows no other cause, staged as any failure is: Ollama's "error loading llama server" /
  "llama runner process has terminated" is start-up's, and a kill alone says nothing of when.
- Ollama kills its own runner with the same signal when it stops it: after its start timed out, or when it unloads
  it ("llama runner stopped successfully" right after the kill). Those kills are no out-of-memory failure.
- A record of Go's slog opens with ``time=``: a record of its own, not the long line before it wrapped."""

from __future__ import annotations

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose


def _verdict(lines: list[str]) -> tuple[str, str]:
    d = diagnose(lines, load({}))
    return d.stage, d.basis


# --- Go's "signal: killed" is a bare kill --------------------------------------------------------------------------

_TERMINATED = 'time=2025-06-27T14:42:08.637Z level=ERROR source=server.go:415 msg="llama runner terminated" error="{}"'
_OLD_REAPER = "2023/11/19 12:07:14 llama.go:430: {}"


def test_go_s_report_of_a_child_killed_by_sigkill_is_a_kill_with_no_stage_shown() -> None:
    assert _verdict([_TERMINATED.format("signal: killed")]) == ("unknown", "unknown")
    assert _verdict([_OLD_REAPER.format("signal: killed")]) == ("unknown", "unknown")
    # a lookup error logged before it (Ollama's GPU probe) is no cause of the kill
    probe = ('cuda driver library failed to get device context 2time=2025-06-27T14:42:08.465Z level=WARN '
             'source=gpu.go:434 msg="error looking up nvidia GPU memory"')  # fmt: skip
    assert _verdict([probe, _TERMINATED.format("signal: killed")]) == ("unknown", "unknown")


def test_go_s_report_of_a_child_ended_by_another_signal_is_no_kill() -> None:
    for status in ("signal: terminated", "signal: segmentation fault", "signal: interrupt", "exit status 2"):
        assert _verdict([_TERMINATED.format(status)])[0] == "none", status


_LOADING = [
    "ggml_cuda_init: found 1 CUDA devices:",
    'time=2025-03-12T12:11:39.337Z level=INFO source=ggml.go:289 msg="model weights" buffer=CUDA0 size="16.2 GiB"',
    'time=2025-03-12T12:11:39.338Z level=INFO source=ggml.go:289 msg="model weights" buffer=CPU size="1.1 GiB"',
    'time=2025-03-12T12:14:15.838Z level=INFO source=server.go:619 msg="waiting for server to become available" '
    'status="llm server not responding"',
    'time=2025-03-12T12:14:21.512Z level=INFO source=server.go:619 msg="waiting for server to become available" '
    'status="llm server error"',
    'time=2025-03-12T12:14:22.015Z level=ERROR source=sched.go:456 msg="error loading llama server" '
    'error="llama runner process has terminated: signal: killed"',
    '[GIN] 2025/03/12 - 12:14:22 | 500 |         2m48s |       127.0.0.1 | POST     "/api/generate"',
]


def test_ollamas_runner_killed_while_its_model_loads_failed_at_startup() -> None:
    assert _verdict(_LOADING)[0] == "startup"
    # Ollama's report that the load failed places it, with no start-up line of the runner's own above it
    assert _verdict(_LOADING[1:]) == ("startup", "message")


def test_a_go_record_after_a_long_one_is_a_record_of_its_own() -> None:
    # each slog record opens with its time key, lower case: not the long record before it wrapped, so the load's
    # failure is read on its own line
    # (a record a terminal wrapped mid-word is still read whole: test_doctor_round15)
    assert _verdict(_LOADING[3:6]) == ("startup", "message")


# --- Ollama's own kill of its runner --------------------------------------------------------------------------------

_START_TIMEOUT = [
    "llama_new_context_with_model: kv self size  =  256.00 MB",
    "llama_new_context_with_model: compute buffer total size = 162.13 MB",
    "2023/11/19 12:07:13 llama.go:438: error starting llama runner: timed out waiting for llama runner to start",
    "2023/11/19 12:07:14 llama.go:430: signal: killed",
]
_STOPPED = "2023/11/19 12:07:14 llama.go:504: llama runner stopped successfully"


def test_a_runner_ollama_killed_after_its_start_timed_out_is_no_oom() -> None:
    assert _verdict(_START_TIMEOUT)[0] == "none"
    assert _verdict([*_START_TIMEOUT, _STOPPED, '[GIN] 2023/11/19 - 12:07:14 | 500 | 4m32s | 127.0.0.1 | POST '
                     '"/api/generate"'])[0] == "none"  # fmt: skip
    # newer Ollama names the timeout in its load error
    newer = ('time=2024-06-01T10:00:00.000Z level=ERROR source=sched.go:344 msg="error loading llama server" '
             'error="timed out waiting for llama runner to start - progress 0.00 - "')  # fmt: skip
    assert _verdict([newer, _TERMINATED.format("signal: killed")])[0] == "none"


_UNLOADED = [
    "2023-12-28T07:43:12.785400065Z 2023/12/28 07:43:12 routes.go:380: embedding generation failed: POST embedding: "
    'Post "http://127.0.0.1:60641/embedding": context canceled',
    "",
    "... 5 minutes later ...",
    "",
    "2023-12-28T07:47:51.919039564Z 2023/12/28 07:47:51 llama.go:455: signal: killed",
    "2023-12-28T07:47:51.919058517Z 2023/12/28 07:47:51 llama.go:529: llama runner stopped successfully",
]


def test_a_runner_ollama_stopped_itself_is_no_oom() -> None:
    assert _verdict(_UNLOADED)[0] == "none"
    assert _verdict(_UNLOADED[4:])[0] == "none"


def test_a_kill_that_names_memory_is_the_oom_killers_though_ollama_reports_the_runner_stopped() -> None:
    kernel = "[81234.567890] Out of memory: Killed process 4321 (ollama_llama_se) total-vm:20000000kB"
    assert _verdict([kernel, _STOPPED]) == ("unknown", "unknown")
    # the stop report only answers the kill right above it
    assert (
        _verdict([_OLD_REAPER.format("signal: killed"), "[GIN] 2023/11/19 - 12:07:14 | 500 | POST", _STOPPED])[0]
        == "unknown"
    )


def test_a_kill_right_after_a_failure_of_another_kind_is_the_programs_own() -> None:
    # Ollama stops the runner once a request was canceled: the excerpt shows that cause, so the kill is no OOM
    canceled = ('2023/12/28 07:43:12 routes.go:380: embedding generation failed: POST embedding: Post '
                '"http://127.0.0.1:60641/embedding": context canceled')  # fmt: skip
    assert _verdict([canceled, _OLD_REAPER.format("signal: killed")])[0] == "none"
    # a warning or a report of memory before the kill is no such cause
    warned = 'time=2025-06-27T14:42:08.465Z level=WARN source=gpu.go:434 msg="error looking up nvidia GPU memory"'
    assert _verdict([warned, _TERMINATED.format("signal: killed")])[0] == "unknown"

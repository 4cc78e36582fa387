"""Two classes met in held-out rounds 50-53 (issue 34), pinned on lines composed after the programs' sources and the
public logs under tests/data/logs/heldout_round51/ and heldout_round52/.

- A process that kills itself or its children after a failure of another kind is not the OOM killer: SGLang's
  server, whose warm-up request was refused, logs "Initialization failed. warmup error" and kills its own process
  tree, so the shell prints ``Killed``. Neither the program's announcement of its teardown nor an uncaught error of
  another kind just before the kill leaves an out-of-memory failure; a kill with no such failure before it, or after
  an error that reports a process killed, still does.
- torch's account of the allocation it refused ("Tried to allocate N MiB. GPU 0 has a total capacity of ...") is an
  out-of-memory failure by itself, where an excerpt or a wrap cut away its "CUDA out of memory." head."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.logs.doctor import diagnose_lines


def uncaught(error: str, *, head: str = "Traceback (most recent call last):") -> list[str]:
    """A Python traceback through one frame, ended by ``error``."""
    return [head, '  File "/srv/app/server.py", line 548, in wait_and_warmup',
            "    assert res.status_code == 200", error]  # fmt: skip


# --- a program that kills itself -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "teardown",
    [
        # SGLang's HTTP server after its warm-up request failed (sgl-project/sglang #3623)
        uncaught(
            "AssertionError: res=<Response [403]>",
            head="[2025-02-17 11:56:43] Initialization failed. warmup error: Traceback (most recent call last):",
        ),
        # SGLang's launcher, told by a child that failed
        [
            "[2025-03-13 14:24:23] Scheduler hit an exception: see above",
            "[2025-03-13 14:24:23] Received sigquit from a child process. It usually means the child failed.",
        ],
    ],
)
def test_a_kill_after_the_programs_own_teardown_is_no_oom(teardown: list[str]) -> None:
    d = diagnose_lines(["[2025-02-17 11:56:40] The server is fired up and ready to roll!", *teardown, "", "Killed"])
    assert not d.oom


@pytest.mark.parametrize("kill", ["Killed", "Process exited with code 137", "worker exitcode=-9"])
def test_a_kill_right_after_an_uncaught_error_of_another_kind_is_no_oom(kill: str) -> None:
    # whatever a launcher says, if anything, as it tears its tree down after a failure that is not memory
    d = diagnose_lines([*uncaught("ValueError: unknown tokenizer class 'FooTokenizer'"), "", kill])
    assert not d.oom


def test_a_kill_with_no_failure_before_it_is_still_the_oom_killer() -> None:
    d = diagnose_lines(["Loading safetensors checkpoint shards: 50% Completed | 2/4", "Killed"])
    assert d.oom


def test_a_kill_after_an_error_that_reports_a_killed_process_is_still_an_oom() -> None:
    # the error is another process's death (a DataLoader worker the OOM killer took), not a failure of its own
    error = "RuntimeError: DataLoader worker (pid 4321) is killed by signal: Killed."
    d = diagnose_lines([*uncaught(error), "Killed"])
    assert d.oom


def test_a_kill_long_after_an_error_the_program_went_on_from_is_still_an_oom() -> None:
    retries = [f"INFO retrying warm-up, attempt {k}" for k in range(2, 14)]
    d = diagnose_lines([*uncaught("ConnectionError: connection refused"), *retries, "Killed"])
    assert d.oom


# --- torch's account of a refused allocation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lines",
    [
        # wrapped by an issue form, its head cut away (vllm-project/vllm #57595)
        [
            "    Tried to allocate 136.00 MiB. GPU 0 has a total capacity of 22.36 GiB of",
            "    which 120.88 MiB is free. ... If this problem persists, try setting",
        ],
        # before torch 2.1
        ["Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total capacity; 5.80 GiB already allocated; 13.31 MiB free)"],
        # a fork of the allocator, another device's name
        ["Tried to allocate 2.00 GiB. MLU 1 has a total capacity of 47.50 GiB of which 1.20 GiB is free."],
        # cut before the device's name
        ["GPU 0 has a total capacity of 79.25 GiB of which 287.94 MiB is free. Process 1 has 78.9 GiB in use."],
    ],
)
def test_torchs_account_of_a_refused_allocation_is_a_device_oom_without_its_head(lines: list[str]) -> None:
    d = diagnose_lines(lines)
    assert (d.oom, d.stage) == (True, "unknown")


@pytest.mark.parametrize(
    "line",
    [
        "INFO gpu.py:42] GPU 0 has a total capacity of 79.25 GiB",  # a report of the device, no refusal
        "GPU 0: total capacity 23.52 GiB, 70.10 GiB free",
    ],
)
def test_a_devices_capacity_alone_is_no_oom(line: str) -> None:
    assert not diagnose_lines([line]).oom

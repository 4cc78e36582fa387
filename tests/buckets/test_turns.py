"""Tasks taken in turns with a forked child: the results come back in order, as one process gives them."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import threading

import pytest

from vllm_hpu_mm.buckets import turns
from vllm_hpu_mm.buckets.turns import in_turns


def _pid_task(k: int):  # type: ignore[no-untyped-def]
    return lambda: (k, os.getpid())


@pytest.fixture
def forking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fork allowed although pytest-xdist's worker runs threads of its own: the children here run a lambda, pickle
    its result and leave, touching no lock those threads hold."""
    monkeypatch.setattr(turns, "_can_fork", lambda: True)


def _recording_forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every child forked from now on, by pid."""
    started: list[int] = []
    fork = turns._fork

    def recorded(*tasks):  # type: ignore[no-untyped-def]
        child = fork(*tasks)
        if child is not None:
            started.append(child[0])
        return child

    monkeypatch.setattr(turns, "_fork", recorded)
    return started


@pytest.mark.usefixtures("forking")
def test_results_come_in_order_and_the_next_task_runs_in_a_child() -> None:
    got = [outcome() for outcome in in_turns([_pid_task(k) for k in range(5)])]
    assert [k for k, _ in got] == list(range(5))
    here = os.getpid()
    # every other task and the last two of the three left go to the child: the odd task out is not this
    # process's alone; one child for them all (one fork: each makes this process's pages copy-on-write again)
    assert [pid == here for _, pid in got] == [True, False, True, False, False]
    assert got[1][1] == got[3][1] == got[4][1]


@pytest.mark.usefixtures("forking")
@pytest.mark.parametrize(("count", "here"), [(1, [True]), (2, [True, False]), (3, [True, False, False]),
                                             (4, [True, False, True, False])])  # fmt: skip
def test_every_count_of_tasks_comes_back_in_order(count: int, here: list[bool]) -> None:
    got = [outcome() for outcome in in_turns([_pid_task(k) for k in range(count)])]
    assert [k for k, _ in got] == list(range(count))
    assert [pid == os.getpid() for _, pid in got] == here


@pytest.mark.usefixtures("forking")
def test_a_childs_first_result_comes_before_its_second_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child of the last three sends each result as it is worked out: a caller stopping at the first of its two
    is not kept waiting for the second, and the child still on it is killed."""
    started = _recording_forks(monkeypatch)
    with contextlib.closing(in_turns([lambda: 0, lambda: 1, lambda: sum(range(10**10))])) as outcomes:
        assert [next(outcomes)(), next(outcomes)()] == [0, 1]
    assert len(started) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(started[0], os.WNOHANG)
    assert gc.get_freeze_count() == 0


def test_without_fork_every_task_runs_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns, "PROCESSES", 1)
    got = [outcome() for outcome in in_turns([_pid_task(k) for k in range(3)])]
    assert got == [(k, os.getpid()) for k in range(3)]


def test_with_another_thread_running_no_child_is_forked() -> None:
    done = threading.Event()
    waiting = threading.Thread(target=done.wait)
    waiting.start()
    try:
        got = [outcome() for outcome in in_turns([_pid_task(k) for k in range(3)])]
    finally:
        done.set()
        waiting.join()
    assert got == [(k, os.getpid()) for k in range(3)]


@pytest.mark.usefixtures("forking")
def test_a_tasks_error_is_raised_at_its_turn_wherever_it_ran() -> None:
    def boom(k: int):  # type: ignore[no-untyped-def]
        def task() -> int:
            raise ValueError(f"task {k}")

        return task

    outcomes = list(in_turns([boom(0), boom(1), lambda: 2]))
    for k in (0, 1):
        with pytest.raises(ValueError, match=f"task {k}"):
            outcomes[k]()
    assert outcomes[2]() == 2


@pytest.mark.usefixtures("forking")
def test_a_result_that_does_not_pickle_is_worked_out_here() -> None:
    lock = threading.Lock()  # not picklable: the child sends nothing usable
    got = [outcome() for outcome in in_turns([lambda: 0, lambda: lock])]
    assert got == [0, lock]


@pytest.mark.usefixtures("forking")
def test_stopping_early_leaves_no_child_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    started = _recording_forks(monkeypatch)
    with contextlib.closing(in_turns([lambda: 0, lambda: sum(range(10**9))])) as outcomes:
        assert next(outcomes)() == 0
    assert len(started) == 1
    with pytest.raises(ChildProcessError):  # killed and reaped: no such child any more
        os.waitpid(started[0], os.WNOHANG)


@pytest.mark.usefixtures("forking")
def test_tasks_ahead_come_back_in_order_from_one_child() -> None:
    ahead = turns.Ahead([_pid_task(k) for k in range(4)])
    got = ahead.results()
    assert [k for k, _ in got] == list(range(4))
    assert len({pid for _, pid in got}) == 1
    assert got[0][1] != os.getpid()


def test_tasks_ahead_without_fork_run_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns, "PROCESSES", 1)
    assert turns.Ahead([_pid_task(k) for k in range(2)]).results() == [(0, os.getpid()), (1, os.getpid())]


@pytest.mark.usefixtures("forking")
def test_tasks_ahead_stopped_leave_no_child_and_an_error_is_raised_here() -> None:
    ahead = turns.Ahead([lambda: sum(range(10**9))])
    child = ahead._child
    assert child is not None
    ahead.stop()
    with pytest.raises(ChildProcessError):
        os.waitpid(child[0], os.WNOHANG)

    def boom() -> int:
        raise ValueError("ahead")

    with pytest.raises(ValueError, match="ahead"):
        turns.Ahead([boom]).results()


@pytest.mark.usefixtures("forking")
@pytest.mark.parametrize("count", [0, 1, 4, 5])
def test_on_two_gives_every_result_in_order_every_other_from_the_child(count: int) -> None:
    got = turns.on_two([_pid_task(k) for k in range(count)])
    assert [k for k, _ in got] == list(range(count))
    assert [pid == os.getpid() for _, pid in got] == [k % 2 == 0 for k in range(count)]


@pytest.mark.usefixtures("forking")
def test_the_objects_frozen_while_a_child_runs_are_all_given_back_to_the_collector() -> None:
    """gc.freeze() keeps the collector off the pages a child shares while it runs: every way a child ends (its
    results read, the iterator closed early, a task ahead stopped) unfreezes them, or the process would never
    collect them again."""
    assert gc.get_freeze_count() == 0
    assert turns.Ahead([lambda: gc.get_freeze_count()]).results()[0] > 0  # frozen in the child as it ran
    assert gc.get_freeze_count() == 0
    turns.on_two([lambda: 0, lambda: 1, lambda: 2])
    with contextlib.closing(in_turns([lambda: 0, lambda: sum(range(10**9))])) as outcomes:
        next(outcomes)()
        assert gc.get_freeze_count() > 0
    turns.Ahead([lambda: sum(range(10**9))]).stop()
    assert gc.get_freeze_count() == 0


@pytest.mark.usefixtures("forking")
def test_tasks_ahead_are_all_worked_out_while_none_is_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A child whose results outgrow the pipe goes on with its tasks (the results kept until read): results sent
    as they come, yet a guess the parent reads late is not held up by the ones before it."""
    done = tmp_path / "done"
    big = [lambda k=k: bytes([k]) * (1 << 20) for k in range(3)]  # 1 MiB each: well beyond a pipe's 64 KiB
    ahead = turns.Ahead([*big, done.touch])
    try:
        for _ in range(200):  # the last task runs without any result read (within 10 s)
            if done.exists():
                break
            threading.Event().wait(0.05)
        assert done.exists()
        assert [r[:1] for r in ahead.results()[:3]] == [b"\x00", b"\x01", b"\x02"]
    finally:
        ahead.stop()


def test_a_task_ahead_without_a_child_is_worked_out_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns, "PROCESSES", 1)
    ran: list[int] = []

    def task(k: int) -> int:
        ran.append(k)
        return k

    ahead = turns.Ahead([functools.partial(task, k) for k in range(4)])
    assert ahead.result(2) == 2
    assert ran == [2]  # the guesses not asked for cost nothing


@pytest.mark.usefixtures("forking")
def test_a_result_ahead_is_read_before_the_tasks_after_it_end() -> None:
    ahead = turns.Ahead([_pid_task(0), lambda: sum(range(10**10))])
    try:
        k, pid = ahead.result(0)
        assert k == 0
        assert pid != os.getpid()
    finally:
        ahead.stop()
    assert gc.get_freeze_count() == 0

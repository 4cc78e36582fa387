"""Independent planning tasks taken in turns on two cores: while this process works out one task, a forked child
works out the next (the last two, where three remain), and the results come back in order (:func:`in_turns`). A
task's result is the same whichever process computes it (the planner is pure; its kept work only saves time), so the
plan is the same as worked out in one process, only sooner: the default budget search tries its budgets one after
another and stops at the first that meets the margin, and each try takes a few tenths of a second of CPU.

At most one child working at a time (:data:`PROCESSES`), give or take a task's tail: a planning run starts its
:class:`Ahead` tasks where the other core would be idle. No child where fork is missing or unsafe (not Linux, or other
threads running: a forked child would inherit their locks), where the child fails or sends nothing back, or where a
task's result does not pickle: there the task is worked out here, as it would be without turns. A child left
behind when the caller stops early is killed (its work is not needed).

:class:`Ahead` starts tasks in a child now and reads their results later, each as soon as it is sent (work that
does not depend on what this process does meanwhile, or tasks guessed: those not read cost this process nothing);
:func:`on_two` works out a list of tasks on both cores, every other one in the child.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Generator, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["PROCESSES", "Ahead", "in_turns", "on_two"]

_T = TypeVar("_T")

#: Most processes working at once: this one and one forked child (the machines planned on have two cores or more;
#: 1: every task here).
PROCESSES = 2


def _can_fork() -> bool:
    return (PROCESSES > 1 and hasattr(os, "fork") and sys.platform.startswith("linux")
            and threading.active_count() == 1)  # fmt: skip


def _outcome(task: Callable[[], _T]) -> Callable[[], _T]:
    """``task`` worked out here: its result, or its exception raised when the caller reads it."""
    try:
        value = task()
    except Exception as exc:  # raised at the caller's turn, as without turns
        error = exc

        def fail() -> _T:
            raise error

        return fail
    return lambda: value


def _given(value: _T) -> Callable[[], _T]:
    return lambda: value


def _fork(task: Callable[[], Any], *more: Callable[[], Any]) -> tuple[int, int] | None:
    """``task`` (and ``more``, one after another) started in a forked child that pickles each result into a pipe as
    it comes (:func:`_next`): (pid, read end); None where no child could start."""
    if not _can_fork():
        return None
    read, write = os.pipe()
    # the objects made so far left out of the collector's passes while the child runs: a pass writes to every
    # object it visits, and each page so written is then copied, in the child and here (copy-on-write)
    gc.freeze()
    try:
        pid = os.fork()
    except OSError:
        gc.unfreeze()
        os.close(read)
        os.close(write)
        return None
    if pid == 0:  # the child: work, send, and leave without the parent's exit handlers or buffered output
        os.close(read)
        code = 0
        try:
            # each result sent as soon as it is worked out, as much of it as the pipe takes: the rest kept and sent
            # with the next, so that a full pipe (results not yet read) never holds up the tasks after it
            os.set_blocking(write, False)
            pending = b""
            for one in (task, *more):
                try:
                    data = pickle.dumps(("ok", one()), protocol=pickle.HIGHEST_PROTOCOL)
                except BaseException:  # an error, or a result that does not pickle: the parent works it out
                    data = pickle.dumps(("failed", None))
                pending = _send(write, pending + data)
            os.set_blocking(write, True)
            while pending:
                pending = pending[os.write(write, pending) :]
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    return pid, read


def _send(fd: int, data: bytes) -> bytes:
    """As much of ``data`` written to the non-blocking ``fd`` as it takes now: what is left."""
    with contextlib.suppress(BlockingIOError):
        while data:
            data = data[os.write(fd, data) :]
    return data


def _next(stream: io.BufferedReader) -> tuple[bool, Any]:
    """The next result a child sent on ``stream`` as (True, value), or (False, None) where it sent none."""
    try:
        kind, value = pickle.load(stream)
    except Exception:  # nothing (or half) sent: the child died
        return False, None
    return kind == "ok", value


def _stop(child: tuple[int, int]) -> None:
    pid, read = child
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.close(read)
    with contextlib.suppress(OSError):
        os.waitpid(pid, 0)
    gc.unfreeze()


def _reap(child: tuple[int, int]) -> None:
    """A child whose results were all read: its pipe closed, it waited for, the collector's objects given back."""
    pid, read = child
    try:
        os.close(read)
    finally:
        os.waitpid(pid, 0)
        gc.unfreeze()


class Ahead(Generic[_T]):
    """``tasks`` started now in a forked child (where one can start), each result sent as it is worked out and read
    later (:meth:`results`, or one at a time with :meth:`result`): the second core works them out while this process
    goes on. :meth:`stop` kills a child whose results are not all read (call it in a ``finally``): tasks started on a
    guess cost this process nothing where they are not needed."""

    def __init__(self, tasks: Sequence[Callable[[], _T]]) -> None:
        self._tasks = list(tasks)
        self._got: list[Callable[[], _T]] = []  # the outcomes read so far, in order
        self._child = _fork(*self._tasks) if self._tasks else None
        self._stream = None if self._child is None else os.fdopen(self._child[1], "rb", closefd=False)

    def __len__(self) -> int:
        return len(self._tasks)

    def result(self, i: int) -> _T:
        """Task ``i``'s result: the child's (the results before it read in turn), or worked out here where there is
        no child or it sent none (then the task's error is raised here, as without a child); where there is no
        child only this task is worked out."""
        while len(self._got) <= i and self._stream is not None:
            ok, value = _next(self._stream)
            self._got.append(_given(value) if ok else _outcome(self._tasks[len(self._got)]))
            if len(self._got) == len(self._tasks):
                self._done()
        return self._got[i]() if i < len(self._got) else self._tasks[i]()

    def results(self) -> list[_T]:
        """Each task's result in order (:meth:`result`)."""
        return [self.result(i) for i in range(len(self._tasks))]

    def _done(self) -> None:
        child, self._child, stream, self._stream = self._child, None, self._stream, None
        if stream is not None:
            stream.close()
        if child is not None:
            _reap(child)

    def stop(self) -> None:
        child, self._child, stream, self._stream = self._child, None, self._stream, None
        if stream is not None:
            stream.close()
        if child is not None:
            _stop(child)


def in_turns(tasks: Sequence[Callable[[], _T]]) -> Generator[Callable[[], _T], None, None]:
    """Each task's outcome in order (call it: the task's result, or its exception raised), every other task (the
    second, the fourth...) worked out meanwhile by one forked child, and where three remain, the last two by it (an odd
    task out is not left to this process alone while the other core waits). One child for all of them: a fork makes
    every page of this process copy-on-write until each is written again, which costs more than the next task
    gains from the tasks this process worked out before it (and the child's own tasks gain from one another as
    much). Close the iterator (or drop it) to stop early: the child still working is killed."""
    n = len(tasks)
    away = [i for i in range(1, n) if i % 2 or i == n - 1]  # 1, 3, ... and the last
    child = Ahead([tasks[i] for i in away])
    try:
        for i, task in enumerate(tasks):
            yield _outcome(functools.partial(child.result, away.index(i)) if i in away else task)
    finally:
        child.stop()


def on_two(tasks: Sequence[Callable[[], _T]]) -> list[_T]:
    """Each task's result in order, every other one worked out meanwhile by a forked child (one child for all of
    them: one fork, not one per pair)."""
    away = Ahead(tasks[1::2])
    try:
        here = [task() for task in tasks[0::2]]
        there = away.results()
    finally:
        away.stop()
    out: list[_T] = []
    for k, value in enumerate(here):
        out.append(value)
        if k < len(there):
            out.append(there[k])
    return out

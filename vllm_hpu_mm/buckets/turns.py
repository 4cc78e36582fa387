"""Independent planning tasks taken in turns on two cores: while this process works out one task, a forked child
works out the next (the last two, where three remain), and the results come back in order (:func:`in_turns`). A
task's result is the same whichever process computes it (the planner is pure; its kept work only saves time), so the
plan is the same as worked out in one process, only sooner: the default budget search tries its budgets one after
another and stops at the first that meets the margin, and each try takes a few tenths of a second of CPU.

At most one child at a time (:data:`PROCESSES`). No child where fork is missing or unsafe (not Linux, or other
threads running: a forked child would inherit their locks), where the child fails or sends nothing back, or where a
task's result does not pickle: there the task is worked out here, as it would be without turns. A child left
behind when the caller stops early is killed (its work is not needed).

:class:`Ahead` starts tasks in a child now and reads their results later (work that does not depend on what this
process does meanwhile); :func:`on_two` works out a list of tasks on both cores, every other one in the child.
"""

from __future__ import annotations

import contextlib
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
            with os.fdopen(write, "wb") as out:
                for one in (task, *more):
                    try:
                        data = pickle.dumps(("ok", one()), protocol=pickle.HIGHEST_PROTOCOL)
                    except BaseException:  # an error, or a result that does not pickle: the parent works it out
                        data = pickle.dumps(("failed", None))
                    out.write(data)
                    out.flush()  # each result read as soon as it is worked out
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    return pid, read


def _collect(child: tuple[int, int]) -> tuple[bool, Any]:
    """The child's result as (True, value), or (False, None) where it sent none."""
    pid, read = child
    try:
        with os.fdopen(read, "rb") as f:
            data = f.read()
    finally:
        os.waitpid(pid, 0)
        gc.unfreeze()
    try:
        kind, value = pickle.loads(data)
    except Exception:  # nothing (or half) sent: the child died
        return False, None
    return kind == "ok", value


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


def in_turns(tasks: Sequence[Callable[[], _T]]) -> Generator[Callable[[], _T], None, None]:
    """Each task's outcome in order (call it: the task's result, or its exception raised), the task after the one
    worked out here computed meanwhile by a forked child, and where three remain, the last two by it (one after the
    other: an odd task out is not left to this process alone while the other core waits). Close the iterator (or
    drop it) to stop early: the child still working is killed."""
    child: tuple[int, int] | None = None
    try:
        i = 0
        while i < len(tasks):
            away = tasks[i + 1 : i + 3] if len(tasks) - i == 3 else tasks[i + 1 : i + 2]
            child = _fork(*away) if away else None
            yield _outcome(tasks[i])
            if child is None:
                i += 1
                continue
            with os.fdopen(child[1], "rb", closefd=False) as stream:
                for task in away:
                    ok, value = _next(stream)
                    yield _given(value) if ok else _outcome(task)
            _reap(child)
            child = None
            i += 1 + len(away)
    finally:
        if child is not None:
            _stop(child)


def _reap(child: tuple[int, int]) -> None:
    """A child whose results were all read: its pipe closed, it waited for, the collector's objects given back."""
    pid, read = child
    try:
        os.close(read)
    finally:
        os.waitpid(pid, 0)
        gc.unfreeze()


def _all(tasks: Sequence[Callable[[], _T]]) -> list[_T]:
    return [task() for task in tasks]


class Ahead(Generic[_T]):
    """``tasks`` started now in a forked child (where one can start), their results read later with
    :meth:`results`: the second core works them out while this process goes on. :meth:`stop` kills a child whose
    results are not read (call it in a ``finally``)."""

    def __init__(self, tasks: Sequence[Callable[[], _T]]) -> None:
        self._tasks = list(tasks)
        self._child = _fork(lambda: _all(self._tasks)) if self._tasks else None

    def results(self) -> list[_T]:
        """Each task's result in order: the child's, or worked out here where it sent none (then a task's error is
        raised here, as without a child)."""
        child, self._child = self._child, None
        if child is not None:
            ok, value = _collect(child)
            if ok:
                return list(value)
        return _all(self._tasks)

    def stop(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            _stop(child)


def on_two(tasks: Sequence[Callable[[], _T]]) -> list[_T]:
    """Each task's result in order, every other one worked out meanwhile by a forked child (one child for all of
    them: one fork, not one per pair)."""
    away = Ahead(tasks[1::2])
    try:
        here = _all(tasks[0::2])
        there = away.results()
    finally:
        away.stop()
    out: list[_T] = []
    for k, value in enumerate(here):
        out.append(value)
        if k < len(there):
            out.append(there[k])
    return out

"""How often Python's cycle collector runs while a plan is made. Planning makes and drops millions of small
containers (shapes, buckets, candidate plans), nearly all freed by reference counting; at CPython's default (a pass
over the youngest generation every 700 new containers) the collector rescans the survivors hundreds of times: 10-20% of
the text plan's CPU (0.2-0.5 s on the 2-core dev machine), and about 30 ms of the main job's start (importing the
command, reading the traffic, choosing the vision buckets). Only how often it runs changes: no cycle goes
uncollected."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["PLAN_GC_THRESHOLD", "fewer_collections", "fewer_from_now"]

#: Allocations between two passes of the collector's youngest generation while planning (Python's default: 700).
PLAN_GC_THRESHOLD = 100_000


def _fewer() -> tuple[int, int, int]:
    """The thresholds as they were; the youngest generation's raised to :data:`PLAN_GC_THRESHOLD` (never lowered)."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], PLAN_GC_THRESHOLD), *before[1:])
    return before


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """The youngest generation passed over less often until the block ends; the thresholds as they were
    afterwards (a library caller's process keeps its own)."""
    before = _fewer()
    try:
        yield
    finally:
        gc.set_threshold(*before)


def fewer_from_now() -> None:
    """The youngest generation passed over less often for the rest of this process: a command's, which plans and
    ends (``serve`` replaces it with the server's, which starts with Python's default)."""
    _fewer()

"""How often the cycle collector runs while planning: less often, and as before once a library caller's block ends."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator

import pytest

from vllm_hpu_mm.collector import PLAN_GC_THRESHOLD, fewer_collections, fewer_from_now


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def test_the_collector_passes_less_often_while_planning_and_as_before_after(thresholds: tuple[int, int, int]) -> None:
    with fewer_collections():
        assert gc.get_threshold() == (max(thresholds[0], PLAN_GC_THRESHOLD), *thresholds[1:])
    assert gc.get_threshold() == thresholds
    with pytest.raises(ValueError, match="planning failed"), fewer_collections():
        raise ValueError("planning failed")
    assert gc.get_threshold() == thresholds


def test_a_higher_threshold_the_caller_set_is_kept(thresholds: tuple[int, int, int]) -> None:
    gc.set_threshold(4 * PLAN_GC_THRESHOLD, *thresholds[1:])
    fewer_from_now()
    assert gc.get_threshold()[0] == 4 * PLAN_GC_THRESHOLD


def test_a_command_collects_less_often_from_its_start_to_its_end() -> None:
    # the command's own process: its thresholds when main runs (the imports of the command and the plan after them)
    script = ("import gc, sys\n"
              "import vllm_hpu_mm.cli.main as cli\n"
              "cli.main = lambda argv=None: print(gc.get_threshold()[0]) or 0\n"
              "cli.entry()\n")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) == PLAN_GC_THRESHOLD

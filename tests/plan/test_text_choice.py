"""The text bucket choice's own machinery (the plan it makes is tested through the jobs)."""

from __future__ import annotations

import gc

import pytest

from vllm_hpu_mm.plan.text_choice import PLAN_GC_THRESHOLD, fewer_collections


def test_the_collector_passes_less_often_while_planning_and_as_before_after() -> None:
    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold() == (max(before[0], PLAN_GC_THRESHOLD), *before[1:])
    assert gc.get_threshold() == before
    with pytest.raises(ValueError, match="planning failed"), fewer_collections():
        raise ValueError("planning failed")
    assert gc.get_threshold() == before

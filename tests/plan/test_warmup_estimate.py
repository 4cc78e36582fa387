"""The plan reports the warm-up time it can estimate: on Gaudi, every graph the runtime warms x the seconds per graph
calibrated on the development log, labelled with that source; nothing on CUDA (no calibrated figure), and no graph
warmed when warm-up is skipped."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.inputs import build
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.plan.render import to_dict, to_table
from vllm_hpu_mm.runtimes.base import HPU_WARMUP_SECONDS_PER_GRAPH


def test_a_gaudi_plan_estimates_warm_up_from_the_graphs_it_warms() -> None:
    p = plan(build(SizingArgs(device="gaudi2", max_model_len=32768), load({})))
    w = to_dict(p)["warmup"]
    graphs = p.prefill_graphs_total + p.decode_graphs_total + len(p.vision_buckets_captured)
    assert w["graphs"] == graphs > 0
    assert w["seconds"] == pytest.approx(graphs * HPU_WARMUP_SECONDS_PER_GRAPH, abs=0.1)
    assert w["label"] == "calibrated"
    assert "performance_tuning.md" in w["source"]
    assert f"warm-up: ~{w['seconds']:.0f} s ({graphs} graphs" in to_table(p)


def test_skipping_warm_up_warms_no_graph() -> None:
    p = plan(build(SizingArgs(device="gaudi2"), load({"VLLM_SKIP_WARMUP": "true"})))
    assert to_dict(p)["warmup"]["graphs"] == 0


def test_a_cuda_plan_makes_no_warm_up_estimate() -> None:
    p = plan(build(SizingArgs(device="h100"), load({})))
    assert to_dict(p)["warmup"] is None
    assert "warm-up:" not in to_table(p)

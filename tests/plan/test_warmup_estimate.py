"""The plan reports the warm-up time it can estimate: on Gaudi, the runtime's fitted per-graph time by phase and
shape over every graph it warms, with the held-out error beside it; nothing on CUDA (no fitted figure), 0 s marked
skipped when warm-up is skipped, and no text graph under --enforce-eager on a one-pass runtime."""

from __future__ import annotations

import dataclasses

import pytest

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.inputs import build
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.plan.render import to_dict, to_table
from vllm_hpu_mm.runtimes.vllm_fork import TRAITS, VllmFork
from vllm_hpu_mm.runtimes.warmup import era


def test_a_gaudi_plan_estimates_warm_up_by_phase_over_the_graphs_it_warms() -> None:
    p = plan(build(SizingArgs(device="gaudi2", max_model_len=32768), load({})))
    w = to_dict(p)["warmup"]
    graphs = p.prefill_graphs_total + p.decode_graphs_total + len(p.vision_buckets_captured)
    assert w["graphs"] == graphs > 0
    one = era("one_pass")
    a_prompt, _b_prompt = one.coefficients["graph"]["prompt"]
    a_decode, _ = one.coefficients["graph"]["decode"]
    assert w["by_phase"]["decode"] == pytest.approx(p.decode_graphs_total * a_decode, rel=0.05)
    assert w["by_phase"]["prompt"] >= p.prefill_graphs_total * a_prompt - 0.1
    assert w["seconds"] == pytest.approx(sum(w["by_phase"].values()), abs=0.2)
    assert w["era"] == "one_pass"
    assert w["heldout_error"] == one.heldout_error
    assert "warmup_time_fit.md" in w["source"]
    line = next(x for x in to_table(p).splitlines() if x.startswith("warm-up:"))
    assert f"~{w['seconds']:.0f} s" in line
    assert "held-out error" in line
    assert f"{graphs} graphs" in line


def test_skipping_warm_up_is_said_with_no_graph_and_no_second() -> None:
    p = plan(build(SizingArgs(device="gaudi2"), load({"VLLM_SKIP_WARMUP": "true"})))
    w = to_dict(p)["warmup"]
    assert w["skipped"] is True
    assert w["seconds"] == w["graphs"] == 0
    assert "VLLM_SKIP_WARMUP" in w["source"]
    assert "warm-up: skipped (VLLM_SKIP_WARMUP" in to_table(p)


@pytest.mark.parametrize("value", ["1", "t", "y"])
def test_fork_1_22_skips_warm_up_for_every_spelling_its_extension_reads_as_true(value: str) -> None:
    # vllm-hpu-extension config.py:122-124 @8211e0b: x.lower() in ['true', 't', '1', 'yes', 'y', 'on']; the fork's
    # hpu_model_runner.py:1104 takes skip_warmup from it and :3209 returns before any warm-up (@2e9b2b3d4)
    env = {"VLLM_SKIP_WARMUP": value}
    args = SizingArgs(device="gaudi2", runtime="vllm-fork==0.9.0.1", max_model_len=8192)
    p = plan(build(args, load(env), env))
    assert p.inputs.skip_warmup
    true = {"VLLM_SKIP_WARMUP": "true"}
    assert to_dict(p)["warmup"] == to_dict(plan(build(args, load(true), true)))["warmup"]
    assert to_dict(p)["warmup"]["skipped"] is True


@pytest.mark.parametrize("runtime", ["vllm-fork==0.5.3.post1+gaudi.1.18.0", "vllm-fork==0.8.5.post1"])
def test_a_fork_line_before_1_22_reads_skip_warmup_1_as_false_so_the_plan_still_warms(runtime: str) -> None:
    """The V0 runner compares the value with 'true' only (habana_model_runner.py:1505 @84922944d,
    hpu_model_runner.py:837-838 @3bcdfd4af): ``1`` warms, and the plan says so."""
    env = {"VLLM_SKIP_WARMUP": "1"}
    args = SizingArgs(device="gaudi2", runtime=runtime, max_model_len=8192)
    p = plan(build(args, load(env), env))
    unset = plan(build(args, load({}), {}))
    assert not p.inputs.skip_warmup
    assert to_dict(p)["warmup"] == to_dict(unset)["warmup"] is not None
    assert any("VLLM_SKIP_WARMUP='1' is read as false" in f.message for f in p.findings)
    env = {"VLLM_SKIP_WARMUP": "TRUE"}
    assert plan(build(args, load(env), env)).inputs.skip_warmup


@pytest.mark.parametrize("runtime", ["vllm-gaudi", "vllm-fork==0.9.0.1"])
def test_the_extension_s_boolean_reads_skip_warmup_1_as_true(runtime: str) -> None:
    # vllm-gaudi extension/config.py boolean @091bbadd; vllm-hpu-extension config.py boolean @8211e0b (fork 1.22)
    env = {"VLLM_SKIP_WARMUP": "1"}
    p = plan(build(SizingArgs(device="gaudi2", runtime=runtime), load(env), env))
    assert p.inputs.skip_warmup
    assert not p.inputs.reading_notes


def test_enforce_eager_warms_no_text_graph_on_vllm_gaudi() -> None:
    p = plan(build(SizingArgs(device="gaudi2", enforce_eager=True), load({})))
    w = to_dict(p)["warmup"]
    assert w is not None
    assert w["by_phase"]["prompt"] == w["by_phase"]["decode"] == 0


def test_a_cuda_plan_makes_no_warm_up_estimate() -> None:
    p = plan(build(SizingArgs(device="h100"), load({})))
    assert to_dict(p)["warmup"] is None
    assert "warm-up:" not in to_table(p)


def test_enforce_eager_on_a_two_pass_fork_still_warms_every_bucket_once() -> None:
    """vllm-fork before #1178 runs warmup_all_buckets whatever --enforce-eager says (hpu_model_runner.py @d436eede7);
    with its era the eager plan's warm-up is the eager pass over every bucket, not 0 s."""
    fork = VllmFork(traits=dataclasses.replace(TRAITS, warmup_era="two_pass"))
    i = build(SizingArgs(device="gaudi2", runtime="vllm-fork", enforce_eager=True, max_model_len=8192), load({}))
    p = plan(dataclasses.replace(i, runtime=fork))
    w = p.warmup
    assert w is not None
    assert w.by_phase["prompt"] > 0
    assert w.by_phase["decode"] > 0
    shapes = fork.text_shapes(EngineShape(8192, i.max_num_seqs, i.max_num_batched_tokens, 128, p.kv_blocks))
    eager = era("two_pass").coefficients["eager"]
    assert w.by_phase["prompt"] == pytest.approx(len(shapes.prefill) * eager["prompt"][0])
    assert w.by_phase["decode"] == pytest.approx(len(shapes.decode) * eager["decode"][0])


@pytest.mark.parametrize("runtime", ["vllm-fork==0.5.3.post1+gaudi117", "vllm-fork==0.5.3.post1+gaudi118",
                                     "vllm-fork==0.6.4.post2", "vllm-fork==0.8.5.post1"])  # fmt: skip
def test_a_fork_line_before_1_22_is_planned_two_pass_so_enforce_eager_still_warms_every_bucket(runtime: str) -> None:
    """Before #1178 ``warmup_model`` runs ``warmup_all_buckets`` before its ``if not self.enforce_eager`` block
    (1.17 ``habana_model_runner.py:1138-1141`` @1e0e492e1, 1.21.3 ``hpu_model_runner.py:2379-2385`` @3bcdfd4af)."""
    args = SizingArgs(device="gaudi2", runtime=runtime, enforce_eager=True, max_model_len=4096)
    w = to_dict(plan(build(args, load({}), {})))["warmup"]
    assert w["era"] == "two_pass"
    assert w["by_phase"]["prompt"] > 0
    assert w["by_phase"]["decode"] > 0
    assert "before #1178" in w["source"]


def test_fork_1_22_is_planned_one_pass_so_enforce_eager_warms_nothing() -> None:
    args = SizingArgs(device="gaudi2", runtime="vllm-fork==0.9.0.1", enforce_eager=True, max_model_len=8192)
    w = to_dict(plan(build(args, load({}), {})))["warmup"]
    assert (w["era"], w["graphs"], w["seconds"]) == ("one_pass", 0, 0)


def test_a_fork_line_that_captures_while_its_pools_last_times_its_graph_pass_over_the_kept_graphs_only() -> None:
    args = SizingArgs(device="gaudi2", runtime="vllm-fork==0.8.5.post1", max_model_len=8192, free_memory_gib=30)
    p = plan(build(args, load({}), {}))
    t = p.text_graphs
    assert len(t.prefill_kept) + len(t.decode_kept) < len(t.prefill) + len(t.decode)  # some do not fit
    w = p.warmup
    assert w is not None
    # every bucket once eagerly, then only the kept ones as graphs
    assert w.graphs == len(t.prefill) + len(t.decode) + len(t.prefill_kept) + len(t.decode_kept) + len(
        p.vision_buckets_captured
    )


@pytest.mark.parametrize("runtime", ["vllm-fork==0.6.4.post2", "vllm-fork==0.8.5.post1"])
def test_a_fork_line_before_1_22_warms_no_vision_graph_so_its_prompt_graphs_take_the_whole_prefill_share(
    runtime: str,
) -> None:
    # no VisionBuckets before #1178 (6bac2f76b): the warm-up runs text-only dummies and each image runs at its own
    # shape inside the prompt's forward (hpu_model_runner.py execute_model @3bcdfd4af), so nothing is warmed for it
    p = plan(build(SizingArgs(device="gaudi2", runtime=runtime, max_model_len=8192), load({})))
    assert p.vision_buckets_captured == p.vision_buckets_skipped == ()
    assert p.split.prefill_vision_graph_bytes == 0
    assert p.split.prefill_text_graph_bytes == p.split.prefill_graph_bytes > 0
    assert to_dict(p)["warmup"]["by_phase"]["vision"] == 0
    table = to_table(p)
    assert "warms no vision graph" in table
    assert all("VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO" not in f.fix.text for f in p.findings)


def test_fork_1_22_warms_its_vision_buckets_in_their_own_share() -> None:
    p = plan(build(SizingArgs(device="gaudi2", runtime="vllm-fork==0.9.0.1", max_model_len=8192), load({})))
    assert p.vision_buckets_captured
    assert 0 < p.split.prefill_vision_graph_bytes < p.split.prefill_graph_bytes
    assert to_dict(p)["warmup"]["by_phase"]["vision"] > 0

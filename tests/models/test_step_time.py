"""The roofline step-time model's rules: monotonic in every axis, memory-bound decode at small batch, compute-bound
prefill at long query, tensor parallelism divides the work, padding never costs less than the real shape."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.catalog import CATALOG
from vllm_hpu_mm.models.dims import MoE
from vllm_hpu_mm.models.step_time import (
    DEVICE_FITS,
    DEVICE_RATES,
    has_time_model,
    interval_dict,
    interval_text,
    step_time,
    time_interval_lines,
    verdict_note,
)

QWEN7B = CATALOG["Qwen/Qwen2.5-VL-7B-Instruct"]
QWEN72B = CATALOG["Qwen/Qwen2.5-VL-72B-Instruct"]
GAUDI2 = step_time(QWEN7B, "gaudi2", block_size=128)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 256), st.integers(1, 8192), st.integers(0, 256), st.sampled_from(["b", "q", "c"]))
def test_prefill_grows_with_each_axis(batch: int, query: int, context: int, axis: str) -> None:
    bigger = {"b": (batch + 1, query, context), "q": (batch, query + 1, context), "c": (batch, query, context + 1)}
    assert GAUDI2.prefill_s(*bigger[axis]) >= GAUDI2.prefill_s(batch, query, context)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 256), st.integers(1, 30000), st.booleans())
def test_decode_grows_with_batch_and_blocks(batch: int, blocks: int, more_batch: bool) -> None:
    bigger = (batch + 1, blocks) if more_batch else (batch, blocks + 1)
    assert GAUDI2.decode_s(*bigger) >= GAUDI2.decode_s(batch, blocks)
    assert GAUDI2.decode_s(*bigger) > GAUDI2.overhead_s


def test_decode_strictly_costlier_with_more_blocks_and_vision_with_more_patches() -> None:
    assert GAUDI2.decode_s(8, 2000) > GAUDI2.decode_s(8, 100)
    assert GAUDI2.vision_s(16384) > GAUDI2.vision_s(4096) > GAUDI2.vision_s(64) > 0
    assert GAUDI2.vision_s(0) == 0


def test_small_batch_decode_is_memory_bound() -> None:
    # One sequence reads the whole model for one token: doubling the batch costs next to nothing.
    one, two = GAUDI2.decode_s(1, 8), GAUDI2.decode_s(2, 16)
    assert two < one * 1.05
    weights_s = GAUDI2.dense_weight_bytes / (GAUDI2.device.bandwidth * GAUDI2.memory_efficiency)
    assert one == pytest.approx(weights_s + GAUDI2.overhead_s, rel=0.05)


def test_long_prefill_is_compute_bound() -> None:
    # At a long query the time is linear in the tokens (the weights are read once): twice the query, about twice
    # the time, and about the FLOPs over the compute rate.
    t1, t2 = GAUDI2.prefill_s(1, 8192, 0), GAUDI2.prefill_s(1, 16384, 0)
    assert 1.9 < (t2 - GAUDI2.overhead_s) / (t1 - GAUDI2.overhead_s) < 2.5
    flops = 8192 * GAUDI2.linear_flops_per_token
    assert t1 > flops / (GAUDI2.device.bf16_flops * GAUDI2.compute_efficiency)


def test_tensor_parallelism_divides_the_work() -> None:
    one = step_time(QWEN72B, "gaudi2", block_size=128)
    four = step_time(QWEN72B, "gaudi2", block_size=128, tensor_parallel_size=4)
    assert one.allreduces == 0
    assert four.allreduces == 2 * QWEN72B.num_layers
    for shape in ((1, 4096, 0), (4, 1024, 8)):
        work1 = one.prefill_s(*shape) - one.overhead_s
        work4 = four.prefill_s(*shape) - four.overhead_s - four._allreduce_s(shape[0] * shape[1])
        assert work4 == pytest.approx(work1 / 4, rel=0.05)
    decode4 = four.decode_s(1, 8) - four.overhead_s - four._allreduce_s(1)
    assert decode4 == pytest.approx((one.decode_s(1, 8) - one.overhead_s) / 4, rel=0.05)


def test_tensor_parallel_all_reduce_costs_latency_per_layer_and_grows_with_tokens() -> None:
    four = step_time(QWEN72B, "gaudi2", block_size=128, tensor_parallel_size=4)
    assert four._allreduce_s(1) >= four.allreduces * four.allreduce_latency_s
    assert four._allreduce_s(4096) > four._allreduce_s(1)


def test_faster_device_is_faster() -> None:
    gaudi3 = step_time(QWEN7B, "gaudi3", block_size=128)
    assert gaudi3.prefill_s(1, 8192, 0) < GAUDI2.prefill_s(1, 8192, 0)
    assert gaudi3.decode_s(64, 1024) < GAUDI2.decode_s(64, 1024)


def test_moe_reads_only_the_experts_a_step_touches() -> None:
    moe = dataclasses.replace(QWEN7B, moe=MoE(num_experts=64, experts_per_token=4, expert_intermediate_size=1024,
                                              layers=QWEN7B.num_layers))  # fmt: skip
    t = step_time(moe, "gaudi2", block_size=128)
    assert 0 < t.experts_active_share < 1
    assert t.decode_s(1, 8) < t.decode_s(64, 512)  # more tokens touch more experts


def test_unknown_device_and_bad_shapes_are_refused() -> None:
    assert not has_time_model("cpu")
    assert has_time_model("Gaudi2")
    with pytest.raises(ConfigError, match="accepted"):
        step_time(QWEN7B, "cpu", block_size=128)
    with pytest.raises(ConfigError, match="accepted"):
        GAUDI2.decode_s(-1, 4)
    assert all(r.source for r in DEVICE_RATES.values())


def test_unpadded_chunks_cost_at_most_their_padded_bucket_and_one_chunk_equals_its_shape() -> None:
    assert GAUDI2.chunks_s([(1000, 3)]) == pytest.approx(GAUDI2.prefill_s(1, 1000, 3))
    chunks = [(700, 0), (300, 5), (20, 1)]
    assert GAUDI2.chunks_s(chunks) <= GAUDI2.prefill_s(3, 1024, 8)
    assert GAUDI2.chunks_s(chunks) > GAUDI2.chunks_s(chunks[:2])


def test_fitted_devices_carry_their_held_out_interval_and_given_constants_drop_it() -> None:
    """Gaudi 2 and 3 take the constants fitted on public points, with an interval per phase from points the fit
    never saw; a caller's own constants (a calibration) are not what the interval was measured on."""
    model = CATALOG["Qwen/Qwen2.5-VL-7B-Instruct"]
    for device in ("gaudi2", "gaudi3"):
        fit = DEVICE_FITS[device]
        t = step_time(model, device, block_size=128, tensor_parallel_size=2)
        assert t.fit is fit
        assert t.compute_efficiency == fit.compute_efficiency
        assert t.allreduce_latency_s == fit.allreduce_s(2)
        for phase in ("decode", "prefill"):
            low, high, n, evidence = t.interval(phase)
            assert n >= 1
            assert 0 < low <= high < 2
            assert "held-out" in evidence
            # fewer than three held-out points: the range also covers the fitted rows, and the text says so
            assert (fit.intervals[phase].fit_rows > 0) == (n < 3)
            if n < 3:
                assert "widened to the" in interval_text(t)
        assert t.interval("vision")[1] == math.inf  # no public vision point
        own = step_time(model, device, block_size=128, overhead_s=1e-3)
        assert own.fit is None
        assert own.interval("decode")[2] == 0
    assert step_time(model, "h100", block_size=128).fit is None
    with pytest.raises(ConfigError):
        GAUDI2.interval("warmup")


def test_interval_text_and_verdicts_follow_the_interval() -> None:
    t = step_time(CATALOG["Qwen/Qwen2.5-VL-7B-Instruct"], "gaudi2", block_size=128)
    half = max(max(1 - lo, hi - 1) for lo, hi, _, _ in (t.interval(p) for p in ("decode", "prefill")))
    text = interval_text(t)
    assert "decode ±" in text
    assert "prefill ±" in text
    assert "gaudi2" in text
    inside = verdict_note(t, "ours", 100.0, "exp", 100.0 * (1 + half * 0.9))
    outside = verdict_note(t, "ours", 100.0, "exp", 100.0 * (1 + half * 1.1))
    assert "the order holds only if the model errs alike on both" in inside
    assert "ours faster" in outside
    d = interval_dict(t)
    assert d["decode"]["points"] == t.interval("decode")[2]
    assert d["vision"]["high"] is None
    lines = time_interval_lines(t, [("exp", 10.0), ("ours", 10.0 * (1 + half * 2))])
    assert lines[0] == text
    assert lines[1].startswith("ours vs exp: exp faster")


def test_fit_data_declares_every_point_and_the_package_fit_names_it() -> None:
    """The fit's points: every one with a source URL, a phase and a set; each fitted device has held-out points of
    both phases (the split is declared in the data file, before the fit)."""
    root = Path(__file__).resolve().parents[2]
    data = json.loads((root / "benchmarks/fits/data/step_time_points.json").read_text())
    assert data["split"]["rule"]
    assert data["split"]["heldout2"]["rule"]
    for p in data["points"]:
        assert p["source"].startswith("https://")
        assert p["phase"] in ("decode", "prefill")
        assert p["set"] in ("fit", "heldout", "heldout2")
        assert p["precision"] in ("fp8", "bf16")
    # the intervals come from the newest held-out set alone (the first one is fitted since it was scored)
    for device in DEVICE_FITS:
        for phase in ("decode", "prefill"):
            held = [
                p for p in data["points"] if p["device"] == device and p["phase"] == phase and p["set"] == "heldout2"
            ]
            assert len(held) == DEVICE_FITS[device].intervals[phase].n


def test_roofline_exponent_spans_the_ideal_overlap_to_none() -> None:
    """p = infinity: compute and memory time fully overlap (max); p = 1: not at all (sum); between: between, and
    the gap is largest where the two are equal (the ridge)."""
    flops, nbytes = 1e12, 1e9
    c = flops / (GAUDI2.matrix_flops * GAUDI2.compute_efficiency)
    m = nbytes / (GAUDI2.device.bandwidth * GAUDI2.memory_efficiency)
    ideal = dataclasses.replace(GAUDI2, roofline_exponent=math.inf)
    serial = dataclasses.replace(GAUDI2, roofline_exponent=1.0)
    smooth = dataclasses.replace(GAUDI2, roofline_exponent=2.0)
    assert ideal._roof(flops, nbytes) == pytest.approx(max(c, m))
    assert serial._roof(flops, nbytes) == pytest.approx(c + m)
    assert max(c, m) < smooth._roof(flops, nbytes) < c + m
    at_ridge = c * GAUDI2.device.bandwidth * GAUDI2.memory_efficiency  # bytes whose memory time is c
    assert smooth._roof(flops, at_ridge) / c == pytest.approx(2**0.5)
    assert smooth._roof(flops, at_ridge / 100) / c < 1.001
    assert smooth._roof(0.0, 0.0) == 0.0
    with pytest.raises(ConfigError):
        step_time(QWEN7B, "gaudi2", block_size=128, roofline_exponent=0.5)


@pytest.mark.parametrize("doc", ["latency.md", "fleet.md"])
def test_the_docs_state_the_interval_the_plans_print_per_gaudi(doc: str) -> None:
    text = (Path(__file__).parents[2] / "docs" / doc).read_text()
    for device, name in (("gaudi2", "Gaudi 2"), ("gaudi3", "Gaudi 3")):
        widest = max(DEVICE_FITS[device].intervals[p].half_width for p in ("decode", "prefill"))
        assert f"±{widest:.0%} on {name}" in text

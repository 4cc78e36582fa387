"""The per-graph warm-up model (runtimes/warmup.py) as the runtimes' code warms: a two-pass runtime (vllm-fork
before #1178) runs every bucket eagerly, also under --enforce-eager, then captures graphs; a one-pass runtime warms
each bucket once and no text bucket under --enforce-eager; a runtime with no fitted era gets no estimate."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes.base import Runtime
from vllm_hpu_mm.runtimes.registry import model_for
from vllm_hpu_mm.runtimes.warmup import era, warmup_estimate

PROMPT = [(1, 128, 0), (4, 1024, 0)]
DECODE = [(1, 128), (4, 2048)]


def test_the_shipped_eras_carry_their_fit_and_held_out_logs() -> None:
    for name in ("one_pass", "two_pass"):
        e = era(name)
        assert e.dev
        assert e.coefficients["graph"]["prompt"][0] > 0
    assert era("two_pass").heldout == ("vllm_fork_147_two_pass",)


def test_held_out_logs_fit_nothing() -> None:
    # the shipped one-pass fit is what the development logs alone give: the held-out fork #1512 log (one-pass
    # era, habana_main after #1178) is read for its error only
    from benchmarks.fits import warmup_time_fitting as fitting

    held = {p.stem: fitting.read(p) for p in sorted((fitting.LOGS / "heldout").glob("*.log"))}
    segments, total, _ = held["vllm_fork_1512_exponential_2025_07_01"]
    assert fitting.ERAS["vllm_fork_1512_exponential_2025_07_01"] == "one_pass"
    assert total is None
    assert (sum(len(s.buckets) for s in segments), sum(s.seconds for s in segments)) == (96, 258)
    dev = [s for p in (fitting.LOGS / "dev").glob("*.log") if fitting.ERAS[p.stem] == "one_pass"
           for s in fitting.read(p)[0]]  # fmt: skip
    fitted = fitting.fit_one_pass(dev)
    assert {k: {ph: tuple(v) for ph, v in phases.items()} for k, phases in fitted.items()} == era(
        "one_pass"
    ).coefficients
    assert fitting.fit_one_pass(dev + segments) != fitted  # the held-out log would move the fit if it were used


def test_two_pass_warms_every_bucket_eagerly_even_under_enforce_eager() -> None:
    traits = model_for(Runtime.VLLM_FORK).traits
    eager = warmup_estimate(traits, prompt=PROMPT, decode=DECODE, eager=True, era_name="two_pass")
    full = warmup_estimate(traits, prompt=PROMPT, decode=DECODE, era_name="two_pass")
    assert eager is not None
    assert full is not None
    e = era("two_pass").coefficients
    assert eager.seconds == pytest.approx(2 * e["eager"]["prompt"][0] + 2 * e["eager"]["decode"][0])
    assert full.seconds == pytest.approx(eager.seconds + 2 * e["graph"]["prompt"][0] + 2 * e["graph"]["decode"][0])
    assert (eager.graphs, full.graphs) == (4, 8)


def test_two_pass_captures_only_the_buckets_named_as_captured() -> None:
    traits = model_for(Runtime.VLLM_FORK).traits
    some = warmup_estimate(traits, prompt=PROMPT, decode=DECODE, era_name="two_pass", captured=(PROMPT[:1], []))
    assert some is not None
    assert some.graphs == 4 + 1


def test_one_pass_warms_no_text_graph_under_enforce_eager_but_still_its_vision_buckets() -> None:
    traits = model_for(Runtime.VLLM_GAUDI).traits
    w = warmup_estimate(traits, prompt=PROMPT, decode=DECODE, vision=[1600, 6400], eager=True)
    assert w is not None
    assert w.graphs == 2
    assert w.by_phase["prompt"] == w.by_phase["decode"] == 0 < w.by_phase["vision"]


def test_prompt_graphs_beyond_the_fitted_sizes_are_flagged_as_extrapolated() -> None:
    traits = model_for(Runtime.VLLM_GAUDI).traits
    small = warmup_estimate(traits, prompt=[(1, 2048, 0)])
    large = warmup_estimate(traits, prompt=[(1, 32768, 0)])
    assert small is not None
    assert not small.extrapolated
    assert large is not None
    assert large.extrapolated


def test_cuda_has_no_fitted_warm_up() -> None:
    assert warmup_estimate(model_for(Runtime.VLLM_CUDA).traits, prompt=PROMPT) is None


def test_an_unknown_era_is_refused_with_the_accepted_ones() -> None:
    with pytest.raises(ConfigError, match="accepted: one_pass, two_pass"):
        era("three_pass")

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
        # leave one log out: every fitted log is also scored held out, against a fit on the era's others
        assert set(e.heldout) == set(e.dev)
        assert e.heldout_median_error is not None
        assert e.heldout_error is not None
        assert e.heldout_median_error <= e.heldout_error
    assert "vllm_fork_147_two_pass" in era("two_pass").heldout


def test_each_held_out_log_is_predicted_without_itself() -> None:
    """The held-out error is leave-one-log-out: a log's prediction comes from a fit that never read it (the fit on
    every log differs), and the shipped coefficients are the fit on every planned log of the era."""
    from benchmarks.fits import warmup_time_fitting as fitting

    reads = {
        p.stem: fitting.read(p) for split in ("dev", "heldout") for p in sorted((fitting.LOGS / split).glob("*.log"))
    }
    one = {n: r for n, r in reads.items() if fitting.ERAS[n] == "one_pass" and n not in fitting.REFUSED}
    shipped = fitting.fit_era("one_pass", one)
    assert {k: {ph: tuple(v) for ph, v in phases.items()} for k, phases in shipped.items()} == era(
        "one_pass"
    ).coefficients
    rows = {n: (t, p) for n, _, _, t, p in fitting.leave_one_log_out(reads)}
    assert set(era("one_pass").heldout) <= set(rows)
    name = "vllm_fork_1512_exponential_2025_07_01"
    without = fitting.fit_era("one_pass", {n: r for n, r in one.items() if n != name})
    assert without != shipped  # the log would move the fit if it were used
    span = fitting.span(without, reads[name])
    assert span is not None
    assert rows[name] == (span[1], span[2])
    assert span[:2] == (96, 258)
    errors = sorted(abs(p - t) / t for n, (t, p) in rows.items() if n not in fitting.REFUSED)
    assert len(errors) >= 5


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

"""The step model fitted on a server's timings: it recovers the coefficients that made the timings, never goes
negative, states its interval, and round-trips through a profile."""

from __future__ import annotations

import dataclasses
import random

import pytest

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.step_fit import (
    STEP_FIELDS,
    FittedStep,
    Observation,
    causal_pairs,
    fit_step,
    step_from_dict,
    step_to_dict,
)

TRUE = FittedStep(block_size=128, overhead_s=0.02, token_s=4e-5, sequence_s=1e-3, chunk_s=5e-3, pair_s=2e-9,
                  image_s=0.01, patch_s=3e-5, frontend_s=0.015, source="made up", samples=0, interval=0.0,
                  context_s=1e-6)  # fmt: skip


def observations(step: FittedStep, rng: random.Random, noise: float = 0.0) -> list[Observation]:
    out = []
    for _ in range(30):
        tokens = rng.randint(20, 1500)
        images = rng.randint(0, 1)
        patches = images * rng.choice((256, 1024))
        o = Observation(0.0, tokens=tokens, chunks=1, pairs=causal_pairs(tokens, 0), images=images,
                        patches=patches, frontend=1, kind="ttft")  # fmt: skip
        out.append(o)
    for c in (1, 2, 4, 8):
        for context in (100, 900, 2500):
            out.append(Observation(0.0, tokens=c, sequences=c, context=c * context, kind=f"itl at {c}"))
        # a step prefilling c prompts of 100 tokens at once beside 2 decodes
        out.append(Observation(0.0, tokens=100 * c + 2, sequences=2, chunks=c, pairs=c * causal_pairs(100, 0),
                               context=2000, kind="burst"))  # fmt: skip
    return [dataclasses.replace(o, seconds=step.predict(o) * (1 + rng.uniform(-noise, noise))) for o in out]


def test_the_fit_recovers_the_coefficients_that_made_the_timings() -> None:
    fitted = fit_step(observations(TRUE, random.Random(1)), block_size=128, source="synthetic")
    assert fitted.overhead_s == pytest.approx(TRUE.overhead_s, rel=0.01)
    assert fitted.frontend_s == pytest.approx(TRUE.frontend_s, rel=0.01)
    assert fitted.pair_s == pytest.approx(TRUE.pair_s, rel=0.01)
    assert fitted.context_s == pytest.approx(TRUE.context_s, rel=0.01)
    assert fitted.patch_s == pytest.approx(TRUE.patch_s, rel=0.01)
    assert fitted.token_s == pytest.approx(TRUE.token_s, rel=0.01)
    assert fitted.sequence_s == pytest.approx(TRUE.sequence_s, rel=0.01)
    assert fitted.chunk_s == pytest.approx(TRUE.chunk_s, rel=0.01)
    assert fitted.interval < 1e-6
    assert dict(fitted.kinds)["ttft"] == 30


def test_noise_widens_the_interval_and_no_coefficient_goes_negative() -> None:
    obs = observations(TRUE, random.Random(2), noise=0.2)
    fitted = fit_step(obs, block_size=128, source="noisy")
    assert 0.05 < fitted.interval <= 0.25
    assert all(getattr(fitted, n) >= 0 for n in STEP_FIELDS)
    # timings that fall with size would need a negative cost: it is held at zero instead
    falling = [Observation(1.0 - 1e-4 * n, tokens=n, sequences=1) for n in range(10, 5000, 500)]
    flat = fit_step(falling, block_size=16, source="falling")
    assert flat.token_s == 0.0
    assert flat.overhead_s > 0


def test_the_step_prices_shapes_and_one_forward_pays_one_overhead() -> None:
    assert TRUE.decode_s(4, 10) == pytest.approx(0.02 + 4 * (4e-5 + 1e-3) + 1e-6 * 1280)
    two = TRUE.chunks_s([(100, 0), (50, 2)])
    assert two == pytest.approx(0.02 + 150 * 4e-5 + 2 * 5e-3 + 2e-9 * (causal_pairs(100, 0) + causal_pairs(50, 256)))
    assert TRUE.prefill_s(2, 100, 0) == pytest.approx(TRUE.chunks_s([(100, 0), (100, 0)]))
    assert TRUE.vision_s(0) == 0.0
    assert TRUE.vision_s(256) == pytest.approx(0.01 + 256 * 3e-5)
    with pytest.raises(ConfigError):
        TRUE.decode_s(-1, 0)


def test_round_trip_and_bad_profiles() -> None:
    fitted = fit_step(observations(TRUE, random.Random(3), noise=0.05), block_size=128, source="probe")
    back = step_from_dict(step_to_dict(fitted), "profile.json")
    assert back.decode_s(3, 7) == pytest.approx(fitted.decode_s(3, 7), rel=1e-6)
    assert back.samples == fitted.samples
    assert back.kinds == fitted.kinds
    bad = step_to_dict(fitted)
    bad["coefficients"]["token_s"] = -1
    with pytest.raises(ConfigError, match="token_s"):
        step_from_dict(bad, "profile.json")
    with pytest.raises(ConfigError, match="coefficients"):
        step_from_dict({"block_size": 1}, "profile.json")
    with pytest.raises(ConfigError, match="needs"):
        fit_step(observations(TRUE, random.Random(4))[:2], block_size=128, source="few")
    with pytest.raises(ConfigError, match="cannot pin"):
        fit_step(observations(TRUE, random.Random(4)), block_size=128, source="x", fixed={"speed": 1.0})


def test_a_few_timings_caught_by_another_job_do_not_move_the_fit() -> None:
    clean = observations(TRUE, random.Random(5))
    spoiled = [dataclasses.replace(o, seconds=o.seconds * 8) if k % 15 == 0 else o for k, o in enumerate(clean)]
    fitted = fit_step(spoiled, block_size=128, source="spoiled")
    assert fitted.overhead_s == pytest.approx(TRUE.overhead_s, rel=0.02)
    assert fitted.chunk_s == pytest.approx(TRUE.chunk_s, rel=0.02)
    assert dict(fitted.kinds)["left out of the fit"] == len(spoiled) // 10
    assert fitted.samples == len(spoiled)


def test_a_near_zero_timing_does_not_outweigh_the_others() -> None:
    # a client that read several tokens at once recorded gaps of microseconds
    clean = observations(TRUE, random.Random(6))
    bunched = [*clean, *(Observation(1e-6, tokens=4, sequences=4, context=4000, kind="itl at 4") for _ in range(3))]
    fitted = fit_step(bunched, block_size=128, source="bunched")
    assert fitted.decode_s(4, 8) == pytest.approx(TRUE.decode_s(4, 8), rel=0.05)


def test_timed_tower_passes_split_an_images_time_between_the_api_server_and_the_engine() -> None:
    # first tokens of image requests carry both the API server's per-image work and the tower's: alone they cannot
    # tell the two apart; the tower's own passes (the plugin's shape log) can
    true = dataclasses.replace(TRUE, frontend_image_s=0.02)
    rng = random.Random(3)
    ttfts = [o for o in observations(true, rng) if o.kind != "ttft" or o.images == 0]
    for _ in range(12):
        patches = rng.choice((256, 1024))
        ttfts.append(Observation(0.0, tokens=200, chunks=1, pairs=causal_pairs(200, 0), images=1, patches=patches,
                                 frontend=1, frontend_images=1, kind="ttft"))  # fmt: skip
    towers = [Observation(0.0, steps=0, images=1, patches=p, kind="tower") for p in (256, 1024, 256, 1024)]
    obs = [dataclasses.replace(o, seconds=true.predict(o)) for o in ttfts + towers]
    fitted = fit_step(obs, block_size=128, source="synthetic")
    assert fitted.frontend_image_s == pytest.approx(0.02, rel=0.01)
    assert fitted.image_s == pytest.approx(true.image_s, rel=0.01)
    assert fitted.frontend_for(2) == pytest.approx(true.frontend_s + 0.04, rel=0.01)
    assert step_from_dict(step_to_dict(fitted), "a profile").frontend_image_s == fitted.frontend_image_s


def test_a_profile_keeps_the_api_servers_share_and_an_older_one_prices_decodes_as_it_did() -> None:
    shared = dataclasses.replace(TRUE, frontend_share=0.4)
    assert step_from_dict(step_to_dict(shared), "a profile").frontend_share == 0.4
    older = step_to_dict(TRUE)
    del older["coefficients"]["context_s"], older["frontend_share"]
    back = step_from_dict(older, "an older profile")
    assert back.context_s == TRUE.pair_s  # its decodes read their context at the pair cost
    assert back.frontend_share == 0.0
    bad = step_to_dict(shared) | {"frontend_share": 7}
    with pytest.raises(ConfigError, match="frontend_share=7"):
        step_from_dict(bad, "a profile")


def test_the_engine_loses_its_share_of_the_api_servers_work() -> None:
    shared = dataclasses.replace(TRUE, frontend_share=0.5)
    assert TRUE.load_stretch(0.3) == 1.0
    assert shared.load_stretch(0.3) == pytest.approx(1 / (1 - 0.15))
    assert shared.load_stretch(5.0) == 10.0  # capped: the API server is the bottleneck then


def test_a_wake_up_grows_with_the_idle_time_up_to_its_whole_and_is_kept_in_a_profile() -> None:
    woken = dataclasses.replace(TRUE, wake_s=0.008, wake_image_s=0.02, wake_tau_s=0.1)
    assert TRUE.wake_for(5.0, 1) == 0.0  # not measured: none
    assert woken.wake_for(0.0, 1) == 0.0  # right after another request: none
    assert woken.wake_for(0.1, 0) == pytest.approx(0.008 * (1 - 1 / 2.718281828), rel=1e-6)
    assert woken.wake_for(0.05, 1) < woken.wake_for(0.3, 1) < woken.wake_for(5.0, 1) == pytest.approx(0.028)
    back = step_from_dict(step_to_dict(woken), "a profile")
    assert (back.wake_s, back.wake_image_s, back.wake_tau_s) == (0.008, 0.02, 0.1)
    older = step_to_dict(woken)
    del older["wake"]
    assert step_from_dict(older, "an older profile").wake_for(5.0, 1) == 0.0
    with pytest.raises(ConfigError, match=r"wake\.tau_s=-1"):
        step_from_dict(step_to_dict(woken) | {"wake": {"s": 0.01, "tau_s": -1}}, "a profile")

"""The probe reads the engine's steps back from when the client received each token, leaves out what is no step,
and finds the share of the API server's work the steps lose."""

from __future__ import annotations

import dataclasses
import math

import pytest

from tests.support.probe import (
    BenchRun,
    fit_frontend_share,
    fit_wake,
    idle_arrivals,
    probe_observations,
    run_steps,
    speed_against,
)
from vllm_hpu_mm.models.step_fit import FittedStep, Observation, causal_pairs, fit_step

STEP = FittedStep(block_size=128, overhead_s=0.005, token_s=1e-5, sequence_s=0.001, chunk_s=0.002, pair_s=0.0,
                  image_s=0.0, patch_s=0.0, frontend_s=0.01, source="made up", samples=0, interval=0.0)  # fmt: skip


def closed_loop(step: FittedStep, *, requests: int, concurrency: int, prompt: int = 100, output: int = 8,
                share: float = 0.0) -> BenchRun:  # fmt: skip
    """A closed-loop run as an engine priced by ``step`` serves it, one step at a time: each finished request's slot
    goes to the next one, sent then and reaching the engine after the API server's time; a step overlapping the API
    server's work on a request is longer by ``share`` of the overlap."""
    front = step.frontend_s
    wanted = [output + k % 4 for k in range(requests)]  # answers of four lengths: requests finish apart
    sent = dict.fromkeys(range(min(concurrency, requests)), 0.0)
    tokens: dict[int, list[float]] = {}
    t = 0.0
    while len(tokens) < requests or any(len(v) < wanted[k] for k, v in tokens.items()):
        running = [k for k, v in tokens.items() if len(v) < wanted[k]]
        ready = [k for k, s in sent.items() if k not in tokens and s + front <= t]
        if not running and not ready:
            t = min(s + front for k, s in sent.items() if k not in tokens)
            continue
        shape = Observation(0.0, tokens=prompt * len(ready) + len(running), sequences=len(running),
                            chunks=len(ready), context=sum(prompt + len(tokens[k]) for k in running))  # fmt: skip
        seconds = step.predict(shape)
        seconds += share * sum(max(0.0, min(t + seconds, s + front) - max(t, s)) for s in sent.values())
        t += seconds
        for k in running + ready:
            tokens.setdefault(k, []).append(t)
            if len(tokens[k]) == wanted[k] and len(sent) < requests:
                sent[len(sent)] = t
    order = sorted(sent)
    return BenchRun({"input_lens": [prompt] * len(order), "output_lens": [wanted[k] for k in order],
                     "ttfts": [tokens[k][0] - sent[k] for k in order],
                     "itls": [[b - a for a, b in zip(tokens[k], tokens[k][1:], strict=False)] for k in order],
                     "start_times": [sent[k] for k in order], "errors": [""] * len(order)},
                    concurrency=concurrency)  # fmt: skip


def test_every_step_is_read_back_with_its_shape() -> None:
    run = closed_loop(STEP, requests=12, concurrency=4)
    steps = run_steps(run)
    assert steps, "no step read back"
    for o in steps:
        assert o.seconds == pytest.approx(STEP.predict(o), rel=1e-6)
    assert any(o.chunks and o.sequences for o in steps), "no step prefilled beside decodes"


def test_a_request_read_in_one_go_is_no_step() -> None:
    run = closed_loop(STEP, requests=8, concurrency=4)
    r = dict(run.result)
    stalled = list(r["itls"][1])
    r["itls"] = [list(x) for x in r["itls"]]
    r["itls"][1] = [sum(stalled)] + [0.0] * (len(stalled) - 1)  # the client slept, then read the rest at once
    steps = run_steps(dataclasses.replace(run, result=r))
    assert all(o.seconds == pytest.approx(STEP.predict(o), rel=1e-6) for o in steps)
    ttfts = [o for o in probe_observations([dataclasses.replace(run, result=r, concurrency=1)]) if o.kind == "ttft"]
    assert len(ttfts) == 7  # its first token is no prefill timing either


def test_the_api_servers_share_is_found_and_taken_out_of_the_steps() -> None:
    def fit(obs: list[Observation]) -> FittedStep:
        return fit_step(obs, block_size=128, source="synthetic")

    runs = [closed_loop(STEP, requests=40, concurrency=c, prompt=p, share=0.5) for c, p in ((4, 100), (8, 300))]
    # first tokens at concurrency 1 pin the API server's time
    runs.append(closed_loop(STEP, requests=10, concurrency=1, prompt=200, share=0.5))
    found = fit_frontend_share(runs, fit)
    assert found.frontend_share == pytest.approx(0.5, abs=0.1)
    assert found.sequence_s == pytest.approx(STEP.sequence_s, rel=0.1)
    plain = fit_frontend_share([closed_loop(STEP, requests=40, concurrency=4), *runs[2:]], fit)
    assert plain.frontend_share < 0.05


def test_a_slower_machine_reads_as_its_speed() -> None:
    slow = dataclasses.replace(STEP, overhead_s=1.2 * STEP.overhead_s, sequence_s=1.2 * STEP.sequence_s,
                               token_s=1.2 * STEP.token_s, chunk_s=1.2 * STEP.chunk_s)  # fmt: skip
    assert speed_against(closed_loop(slow, requests=16, concurrency=4, output=16), STEP) == pytest.approx(1.2, rel=1e-3)
    assert speed_against(closed_loop(STEP, requests=2, concurrency=1, output=3), STEP) == 1.0  # too few steps


def idle_run(step: FittedStep, *, wake_s: float, tau_s: float, images: int = 0) -> BenchRun:
    """Requests that each find the server idle after gaps of 0.01 to 1.5 s: the first token takes the API server,
    one prefill and the wake-up after that gap; 4 tokens after it."""
    prompt, gaps = 200, [0.01, 0.03, 0.06, 0.1, 0.2, 0.35, 0.5, 0.8, 1.2, 1.5]
    own = step.predict(Observation(0.0, tokens=prompt, chunks=1, pairs=causal_pairs(prompt, 0), images=images,
                                   frontend=1, frontend_images=images))  # fmt: skip
    decode = step.predict(Observation(0.0, tokens=1, sequences=1, context=prompt))
    starts, ttfts, t = [], [], 0.0
    for k, gap in enumerate([0.0, *gaps]):
        t += gap
        ttft = own + (wake_s * -math.expm1(-gap / tau_s) if k else 0.5)  # the first: unknown idle, any time
        starts.append(t)
        ttfts.append(ttft)
        t += ttft + 3 * decode
    n = len(starts)
    return BenchRun({"input_lens": [prompt] * n, "output_lens": [4] * n, "ttfts": ttfts,
                     "itls": [[decode] * 3 for _ in range(n)], "start_times": starts, "errors": [""] * n},
                    concurrency=None, image_patches=(256,) * images, idle=True)  # fmt: skip


def test_the_wake_up_after_idleness_is_found_from_the_idle_arrivals_alone() -> None:
    runs = [idle_run(STEP, wake_s=0.02, tau_s=0.1), closed_loop(STEP, requests=8, concurrency=4)]
    found = fit_wake(runs, STEP)
    assert found.wake_tau_s == 0.1
    assert found.wake_s == pytest.approx(0.02, rel=1e-6)
    assert found.wake_image_s == 0.0
    assert fit_wake([closed_loop(STEP, requests=8, concurrency=4)], STEP) == STEP  # no idle probe: none stated


def test_only_requests_that_found_nothing_in_flight_are_idle_arrivals() -> None:
    run = idle_run(STEP, wake_s=0.02, tau_s=0.1)
    r = dict(run.result)
    r["start_times"] = list(r["start_times"])
    r["start_times"][3] = r["start_times"][2] + 0.001  # sent while the one before it ran
    arrivals = idle_arrivals(dataclasses.replace(run, result=r))
    assert len(arrivals) == len(r["start_times"]) - 2  # neither the first (idle time unknown) nor that one

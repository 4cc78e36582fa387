"""A server's step time from ``vllm bench serve`` runs, and the replay's prediction of another run: the pieces of a
check against a real server (``benchmarks/performance/server_latency.py``, ``tests/e2e/test_latency.py``).

A probe is a few bench runs of known shapes (``--save-result --save-detailed``: per request its prompt and output
lengths, time to first token and gaps between tokens). Each request gives timings of the engine's steps:

- at concurrency 1, its time to first token is the API server's time plus one prefill step of its whole prompt
  (images encoded in it), on an otherwise idle engine (prompts within ``max_num_batched_tokens``: one chunk);
- at concurrency ``c``, the mean gap between its tokens is one decode step of about ``c`` sequences;
- the requests sent together at the start of a run at concurrency ``c`` > 1 get their first tokens in clusters,
  one per step: each gap between clusters is a step prefilling several prompts at once (:func:`_first_wave`);
- each vision-tower pass the plugin's shape log times on the engine is the tower's own cost, apart from the API
  server's per-image work that the same requests' first tokens also carry.

The server bills more prompt tokens than the client counts (the chat template, image placeholders): the offset is
measured per run from ``/metrics`` (``vllm:prompt_tokens_total`` over the run's requests) and added to every
prompt.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.step_fit import FittedStep, Observation, causal_pairs
from vllm_hpu_mm.replay.latency import Latency, StepClock, latency_of, real_clock
from vllm_hpu_mm.replay.scheduler import Arrivals, Prompt, Trace, simulate
from vllm_hpu_mm.replay.timing import Timer

__all__ = ["IMAGE_EXTRA_TOKENS", "BenchRun", "engine_limits", "fitted_timer", "predict", "probe_observations"]

#: vLLM wraps each image's placeholder tokens in <|vision_start|> and <|vision_end|>; a placeholder token is 4
#: patches (Qwen2.5-VL's 2 x 2 merge).
IMAGE_EXTRA_TOKENS = 2
PATCHES_PER_TOKEN = 4
#: Requests sent within this many seconds of a run's first are its first wave; first tokens this close are one
#: step's.
WAVE_S = 0.05
CLUSTER_S = 0.005
#: Seeds of Poisson arrivals a prediction pools (a short run's quantiles move with the draw).
PREDICTION_SEEDS = 16


@dataclasses.dataclass(frozen=True)
class BenchRun:
    """One ``vllm bench serve`` result (its saved JSON, detailed) and what the server billed for it."""

    result: Mapping[str, Any]
    #: Requests sent at once (1 for a prefill probe), or None for arrivals at a rate.
    concurrency: int | None
    #: Server prompt tokens per request less the client's count (chat template, image placeholders).
    prompt_offset: float = 0.0
    #: Patches of each request's images as the tower runs them (bucket-padded where the server pads).
    image_patches: tuple[int, ...] = ()
    #: The tower's passes during the run, timed on the engine (the plugin's shape log): (seconds, images, patches).
    tower: tuple[tuple[float, int, int], ...] = ()

    def _succeeded(self) -> list[int]:
        """Indices of the requests that succeeded: no error, a first token, at least one output token."""
        r = self.result
        ttfts, outputs = r.get("ttfts", []), r.get("output_lens", [])
        errors = r.get("errors", []) or [""] * len(ttfts)
        n = min(len(r.get("input_lens", [])), len(outputs), len(ttfts), len(r.get("itls", [])), len(errors))
        return [i for i in range(n) if not errors[i] and ttfts[i] and ttfts[i] > 0 and outputs[i] > 0]

    def requests(self) -> list[tuple[int, int, float, list[float]]]:
        """(server prompt tokens, output tokens, ttft, itls) of every request that succeeded."""
        r = self.result
        return [(round(r["input_lens"][i] + self.prompt_offset), int(r["output_lens"][i]), float(r["ttfts"][i]),
                 [float(x) for x in r["itls"][i]]) for i in self._succeeded()]  # fmt: skip

    def prompts(self) -> list[Prompt]:
        images = tuple(p // PATCHES_PER_TOKEN + IMAGE_EXTRA_TOKENS for p in self.image_patches)
        return [Prompt(max(n, sum(images) + 1), o, 0, images) for n, o, _, _ in self.requests()]

    def sent(self) -> tuple[list[Prompt], list[float]]:
        """The requests that succeeded in the order the client sent them, and when (seconds from the first)."""
        starts = [float(x) for x in self.result.get("start_times", [])]
        ok = [starts[i] for i in self._succeeded() if i < len(starts)]
        prompts = self.prompts()
        if len(ok) != len(prompts) or not ok:
            return prompts, []
        pairs = sorted(zip(ok, range(len(ok)), strict=True))
        t0 = pairs[0][0]
        return [prompts[i] for _, i in pairs], [t - t0 for t, _ in pairs]


def _first_wave(run: BenchRun) -> list[Observation]:
    """The steps that prefilled the requests sent together at the start of a run: their first tokens come in
    clusters, one per step; a cluster's time since the previous one is a step prefilling its members beside one
    decode of every earlier member (the first cluster: since the requests were sent, the API server included)."""
    r = run.result
    starts = [float(x) for x in r.get("start_times", [])]
    rows = run.requests()
    ok = [i for i, (t, e) in enumerate(zip(r.get("ttfts", []), r.get("errors", []) or [""] * len(starts),
                                           strict=False)) if not e and t and t > 0]  # fmt: skip
    if len(starts) != len(r.get("ttfts", [])) or len(ok) != len(rows) or len(rows) < 2:
        return []
    t0 = min(starts[i] for i in ok)
    wave = sorted((starts[i] + rows[k][2], rows[k][0], rows[k][1]) for k, i in enumerate(ok)
                  if starts[i] - t0 <= WAVE_S)  # fmt: skip
    clusters: list[list[tuple[float, int, int]]] = []
    for item in wave:
        if clusters and item[0] - clusters[-1][0][0] <= CLUSTER_S:
            clusters[-1].append(item)
        else:
            clusters.append([item])
    out, before, decoding = [], t0, 0
    images, patches = len(run.image_patches), sum(run.image_patches)
    for j, members in enumerate(clusters):
        at = members[0][0]
        n = len(members)
        tokens = sum(m[1] for m in members)
        out.append(Observation(at - before, tokens=tokens + decoding, sequences=decoding, chunks=n,
                               pairs=sum(causal_pairs(m[1], 0) for m in members), images=n * images,
                               patches=n * patches, frontend=1 if j == 0 else 0,
                               frontend_images=n * images if j == 0 else 0, kind="burst"))  # fmt: skip
        before = at
        decoding += sum(1 for m in members if m[2] > 1)
    return out


def probe_observations(runs: Iterable[BenchRun]) -> list[Observation]:
    """The step timings in probe runs (see the module docstring)."""
    out: list[Observation] = []
    for run in runs:
        c = run.concurrency
        if c is None:
            raise ConfigError("a probe run sends a known number of requests at once (--max-concurrency)")
        patches = sum(run.image_patches)
        images = len(run.image_patches)
        if c > 1:
            out += _first_wave(run)
        out += [Observation(seconds, steps=0, images=n, patches=p, kind="tower") for seconds, n, p in run.tower]
        for tokens, output, ttft, itl in run.requests():
            if c == 1:
                out.append(Observation(ttft, tokens=tokens, chunks=1, pairs=causal_pairs(tokens, 0),
                                       images=images, patches=patches, frontend=1, frontend_images=images,
                                       kind="ttft"))  # fmt: skip
            if len(itl) >= 2:
                context = tokens + output / 2
                # the mean gap (last token less first, over the gaps): a client that reads several tokens at once
                # records near-zero gaps that a median would take for the step
                out.append(Observation(statistics.fmean(itl), tokens=c, sequences=c, pairs=c * context,
                                       kind=f"itl at {c}"))  # fmt: skip
    return out


def engine_limits(*, max_num_seqs: int, max_num_batched_tokens: int, max_model_len: int, block_size: int,
                  num_kv_blocks: int) -> EngineShape:  # fmt: skip
    """The engine numbers the schedule runs under (the one place the replay's limits type is built here)."""
    return EngineShape(max_model_len=max_model_len, max_num_seqs=max_num_seqs,
                       max_num_batched_tokens=max_num_batched_tokens, block_size=block_size,
                       num_kv_blocks=num_kv_blocks)  # fmt: skip


def fitted_timer(step: FittedStep) -> Timer:
    """The replay's timer on a fitted step model: real shapes (no buckets), placeholder tokens to patches."""
    return Timer(step, lambda tokens: max(0, tokens - IMAGE_EXTRA_TOKENS) * PATCHES_PER_TOKEN, lambda p: p)


def predict(prompts: Sequence[Prompt], limits: EngineShape, step: FittedStep, *, rate: float | None, load: str,
            seeds: int = PREDICTION_SEEDS, times: Sequence[float] = ()) -> Latency:  # fmt: skip
    """What a bench run of ``prompts`` at ``rate`` (Poisson, requests/s; None: all at once) would measure, on the
    fitted step model, pooled over ``seeds`` draws of the arrivals; with ``times`` (when the client sent each
    request, in order), at those arrivals instead of a draw."""
    if not prompts:
        raise ConfigError("nothing to predict: no request in the run")
    clock: StepClock = real_clock(fitted_timer(step), unified=step.unified)
    traces: list[Trace] = []
    draws = [Arrivals(times=tuple(times))] if times else [Arrivals(rate=rate, seed=seed) for seed in range(seeds)]
    for arrivals in draws if rate is not None or times else [Arrivals(concurrency=len(prompts))]:
        traces.append(simulate(prompts, limits, arrivals, clock=clock.clock, vision_clock=clock.vision_clock))
    return latency_of(traces, clock, load=load, frontend_s=step.frontend_s, interval=step.interval,
                      evidence=step.describe(), frontend_image_s=step.frontend_image_s)  # fmt: skip

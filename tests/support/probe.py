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
  server's per-image work that the same requests' first tokens also carry;
- an idle probe (a few requests per second, arrivals at random) times each request that arrived with none in
  flight: what its first token took beyond the fitted step is the server's wake-up after that long idle
  (:func:`fit_wake`).

The server bills more prompt tokens than the client counts (the chat template, image placeholders): the offset is
measured per run from ``/metrics`` (``vllm:prompt_tokens_total`` over the run's requests) and added to every
prompt.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.step_fit import (
    MAX_FRONTEND_SHARE,
    MAX_WAKE_S,
    FittedStep,
    Observation,
    causal_pairs,
    nonnegative_lstsq,
)
from vllm_hpu_mm.replay.latency import Latency, StepClock, latency_of, real_clock
from vllm_hpu_mm.replay.scheduler import Arrivals, Prompt, Trace, simulate
from vllm_hpu_mm.replay.timing import Timer

__all__ = [
    "IMAGE_EXTRA_TOKENS",
    "BenchRun",
    "engine_limits",
    "fit_wake",
    "fitted_timer",
    "predict",
    "probe_observations",
]

#: vLLM wraps each image's placeholder tokens in <|vision_start|> and <|vision_end|>; a placeholder token is 4
#: patches (Qwen2.5-VL's 2 x 2 merge).
IMAGE_EXTRA_TOKENS = 2
PATCHES_PER_TOKEN = 4
#: Requests sent within this many seconds of a run's first are its first wave; first tokens this close are one
#: step's.
WAVE_S = 0.05
CLUSTER_S = 0.005
#: A gap between tokens under this share of the run's median gap is no step: the client read tokens that the server
#: had sent apart in one go (it was descheduled); a request with more than ``BURST_READ_SHARE`` of its gaps such is
#: left out of the fit (its mean gap is the client's stall spread over its tokens, not a step: one such request at
#: ~0 s made a relative-error fit of a whole probe miss by +-1861%).
BURST_GAP_SHARE = 0.1
BURST_READ_SHARE = 0.25
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
    #: An idle probe (arrivals at a low rate): read only for the wake-up (:func:`fit_wake`), not for steps.
    idle: bool = False

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


def _token_times(run: BenchRun) -> list[tuple[float, int, int]]:
    """Every token the client received, as (when, request, its index in the request: 0 the first), over the requests
    that succeeded; empty when the run has no send times."""
    r = run.result
    starts = [float(x) for x in r.get("start_times", [])]
    ok = run._succeeded()
    if not ok or len(starts) < max(ok) + 1:
        return []
    out = []
    for k, i in enumerate(ok):
        t = starts[i] + float(r["ttfts"][i])
        out.append((t, k, 0))
        for j, gap in enumerate(r["itls"][i]):
            t += float(gap)
            out.append((t, k, j + 1))
    out.sort()
    return out


def run_steps(run: BenchRun) -> list[Observation]:
    """The engine steps of a run (:func:`step_windows`)."""
    return [o for o, _, _ in step_windows(run)]


def step_windows(run: BenchRun) -> list[tuple[Observation, float, float]]:
    """Every engine step of a run with requests in flight, read back from when the client received tokens: the
    tokens of one step reach the client together (within :data:`CLUSTER_S`), one per request it ran: a first token
    for a request it prefilled (its whole prompt: one chunk), a next one for each it decoded. A step's time is the
    gap since the previous step's tokens, taken only while the engine stayed busy between them (a request was in
    flight across the gap); the steps while a request the client read in bursts was in flight are left out, as its
    tokens land in the wrong clusters."""
    tokens = _token_times(run)
    rows = run.requests()
    if not tokens or not rows:
        return []
    out: list[tuple[Observation, float, float]] = []
    median_gap = _median_gap(rows)
    bursty = {k for k, (*_, itl) in enumerate(rows) if read_in_bursts(itl, median_gap)}
    last = {k: len(itl) for k, (*_, itl) in enumerate(rows)}
    # while a request read in bursts was in flight, its tokens sit in the wrong clusters: those steps are left out
    times: dict[int, list[float]] = {}
    for t, k, _ in tokens:
        times.setdefault(k, []).append(t)
    stalled = [(min(times[k]), max(times[k])) for k in bursty if k in times]
    clusters: list[list[tuple[float, int, int]]] = []
    for item in tokens:
        if clusters and item[0] - clusters[-1][-1][0] <= CLUSTER_S:
            clusters[-1].append(item)
        else:
            clusters.append([item])
    images, patches = len(run.image_patches), sum(run.image_patches)
    running: set[int] = set()  # requests with a first token and more to come, after the previous cluster
    for j, members in enumerate(clusters):
        carried = bool(running)
        for _, k, n in members:
            if n < last[k]:
                running.add(k)
            else:
                running.discard(k)
        if j == 0 or not carried or any(lo <= members[0][0] <= hi for lo, hi in stalled):
            continue
        firsts = [k for _, k, n in members if n == 0]
        decodes = [(k, n) for _, k, n in members if n > 0]
        if len({k for _, k, _ in members}) != len(members):
            continue  # two tokens of one request in one cluster: the client merged two steps
        prompt = sum(rows[k][0] for k in firsts)
        begin, end = clusters[j - 1][0][0], members[0][0]
        out.append((Observation(
            end - begin, tokens=prompt + len(decodes), sequences=len(decodes),
            chunks=len(firsts), pairs=sum(causal_pairs(rows[k][0], 0) for k in firsts),
            context=sum(rows[k][0] + n for k, n in decodes), images=len(firsts) * images,
            patches=len(firsts) * patches, kind="step with a prefill" if firsts else "step"), begin, end))  # fmt: skip
    return out


#: Rounds of the API server's share (each refits the step without the share it found; two settle it).
SHARE_ROUNDS = 2


def fit_frontend_share(runs: Sequence[BenchRun], fit: Callable[[list[Observation]], FittedStep]) -> FittedStep:
    """The step model ``fit`` makes of the probe's timings, with the share of the API server's work its steps lose
    (:attr:`FittedStep.frontend_share`): each engine step of a run with requests in flight (:func:`step_windows`)
    overlaps the API server's work on the requests sent meanwhile (each request's ``frontend_for`` from when the
    client sent it); the share is the slope of the steps' residuals over that overlap (least squares with an
    intercept, clipped to 0..MAX_FRONTEND_SHARE), and the step is refitted on its timings less that share of the
    overlap."""
    others = [o for o in probe_observations(runs) if not o.kind.startswith("step")]
    steps: list[tuple[Observation, float, float, tuple[float, ...], int]] = []
    for run in runs:
        if run.idle:
            continue
        sent = run.result.get("start_times", [])
        starts = tuple(sorted(float(sent[i]) for i in run._succeeded() if i < len(sent)))
        steps += [(o, begin, end, starts, len(run.image_patches)) for o, begin, end in step_windows(run)]
    step = fit(others + [o for o, *_ in steps])
    share = 0.0
    for _ in range(SHARE_ROUNDS):
        overlap = []
        for _, begin, end, starts, images in steps:
            front = step.frontend_for(images)
            overlap.append(sum(min(end, t + front) - max(begin, t) for t in starts if t < end and t + front > begin))
        x = np.array(overlap)
        if not steps or np.ptp(x) <= 0:
            break
        y = np.array([o.seconds - share * v - step.predict(o) for (o, *_), v in zip(steps, overlap, strict=True)])
        share = min(MAX_FRONTEND_SHARE, max(0.0, share + float(np.polyfit(x, y, 1)[0])))
        step = fit(others + [dataclasses.replace(o, seconds=max(1e-6, o.seconds - share * v))
                             for (o, *_), v in zip(steps, overlap, strict=True)])  # fmt: skip
    return dataclasses.replace(step, frontend_share=share)


#: Ramps a wake-up may take (seconds of idleness to reach 63% of it): the fit keeps the one that fits best.
WAKE_TAUS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
#: The fewest idle arrivals a wake-up is fitted on (fewer: none is stated).
MIN_WAKE_ARRIVALS = 6


def idle_arrivals(run: BenchRun) -> list[tuple[float, int, int, float]]:
    """(idle seconds before it, server prompt tokens, images, time to first token) of each request of ``run`` that
    arrived with no other in flight (sent, last token not yet received), after the run's first (whose idle time
    is unknown); requests read in bursts are left out."""
    r = run.result
    starts = [float(x) for x in r.get("start_times", [])]
    ok = run._succeeded()
    rows = run.requests()
    if not ok or len(starts) < max(ok) + 1:
        return []
    median_gap = _median_gap(rows)
    spans = sorted((starts[i], starts[i] + ttft + sum(itl), tokens, ttft, read_in_bursts(itl, median_gap))
                   for i, (tokens, _, ttft, itl) in zip(ok, rows, strict=True))  # fmt: skip
    out, busy_until = [], math.inf
    for start, end, tokens, ttft, bursty in spans:
        if start >= busy_until and not bursty:
            out.append((start - busy_until, tokens, len(run.image_patches), ttft))
        busy_until = end if busy_until == math.inf else max(busy_until, end)
    return out


def fit_wake(runs: Sequence[BenchRun], step: FittedStep) -> FittedStep:
    """``step`` with the server's wake-up after idleness (:meth:`FittedStep.wake_for`) fitted on the idle probes
    in ``runs``: each idle arrival's time to first token beyond the step's own (the API server and one prefill of
    its prompt and images) against ``1 - exp(-idle / tau)``, per request and per image (non-negative least squares
    for each tau of :data:`WAKE_TAUS`; the tau with the least squared error kept). Unchanged with fewer than
    :data:`MIN_WAKE_ARRIVALS` idle arrivals."""
    rows: list[tuple[float, int, float]] = []
    for run in runs:
        if not run.idle:
            continue
        patches = sum(run.image_patches)
        for gap, tokens, n, ttft in idle_arrivals(run):
            own = step.predict(Observation(ttft, tokens=tokens, chunks=1, pairs=causal_pairs(tokens, 0), images=n,
                                           patches=patches if n else 0, frontend=1, frontend_images=n))  # fmt: skip
            rows.append((gap, n, ttft - own))
    if len(rows) < MIN_WAKE_ARRIVALS:
        return step
    idle = np.array([r[0] for r in rows])
    images = np.array([float(r[1]) for r in rows])
    extra = np.array([r[2] for r in rows])
    varied = bool(images.any() and not images.all())  # with one kind only, the per-request term takes it all
    best: tuple[float, float, float, float] | None = None
    for tau in WAKE_TAUS:
        ramp = -np.expm1(-idle / tau)
        a = np.column_stack([ramp, ramp * images] if varied else [ramp])
        coef = nonnegative_lstsq(a, extra)
        err = float(np.sum((a @ coef - extra) ** 2))
        if best is None or err < best[0]:
            best = (err, float(coef[0]), float(coef[1]) if varied else 0.0, tau)
    assert best is not None
    _, wake_s, wake_image_s, tau = best
    return dataclasses.replace(step, wake_s=min(MAX_WAKE_S, wake_s), wake_image_s=min(MAX_WAKE_S, wake_image_s),
                               wake_tau_s=tau if wake_s + wake_image_s > 0 else 0.0)  # fmt: skip


def _median_gap(rows: Sequence[tuple[int, int, float, list[float]]]) -> float:
    """The median gap between tokens over a run's requests (:meth:`BenchRun.requests`; 0 without any)."""
    gaps = [gap for *_, itl in rows for gap in itl]
    return statistics.median(gaps) if gaps else 0.0


def read_in_bursts(itl: Sequence[float], median_gap: float) -> bool:
    """Whether the client read this request's tokens in bursts (see :data:`BURST_GAP_SHARE`)."""
    short = sum(1 for gap in itl if gap < BURST_GAP_SHARE * median_gap)
    return bool(itl) and short > BURST_READ_SHARE * len(itl)


def probe_observations(runs: Iterable[BenchRun]) -> list[Observation]:
    """The step timings in probe runs (see the module docstring)."""
    out: list[Observation] = []
    for run in runs:
        if run.idle:
            continue
        c = run.concurrency
        if c is None:
            raise ConfigError("a probe run sends a known number of requests at once (--max-concurrency)")
        patches = sum(run.image_patches)
        images = len(run.image_patches)
        if c > 1:
            out += _first_wave(run)[:1]  # its later clusters are steps that run_steps reads too
        out += [Observation(seconds, steps=0, images=n, patches=p, kind="tower") for seconds, n, p in run.tower]
        rows = run.requests()
        median_gap = _median_gap(rows)
        if c == 1:
            out += [Observation(ttft, tokens=tokens, chunks=1, pairs=causal_pairs(tokens, 0), images=images,
                                patches=patches, frontend=1, frontend_images=images, kind="ttft")
                    for tokens, _, ttft, itl in rows if not read_in_bursts(itl, median_gap)]  # fmt: skip
        out += run_steps(run)
    return out


#: The fewest decode steps a speed check reads (:func:`speed_against`).
MIN_SPEED_STEPS = 10


def speed_against(run: BenchRun, step: FittedStep) -> float:
    """How much slower than ``step`` the server ran ``run``'s decode-only steps now (the median of measured over
    modelled time; 1.0 when the run has too few): a short probe run just before a held-out run follows the machine's
    drift (on a shared 2-core VM a fixed matrix product's time moves by ~10% over a minute)."""
    ratios = [o.seconds / p for o in run_steps(run) if o.kind == "step" and (p := step.predict(o)) > 0]
    return statistics.median(ratios) if len(ratios) >= MIN_SPEED_STEPS else 1.0


def scaled_step(step: FittedStep, factor: float) -> FittedStep:
    """``step`` with every engine cost ``factor`` times as large (the API server's own times kept)."""
    engine = ("overhead_s", "token_s", "sequence_s", "chunk_s", "pair_s", "image_s", "patch_s", "context_s")
    return dataclasses.replace(step, **{name: factor * getattr(step, name) for name in engine})


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
    base: StepClock = real_clock(fitted_timer(step), unified=step.unified)
    front = sum(step.frontend_for(len(p.image_tokens)) for p in prompts)  # the API server's work on the run
    draws = [Arrivals(times=tuple(times))] if times else [Arrivals(rate=rate, seed=seed) for seed in range(seeds)]
    if rate is None and not times:
        draws = [Arrivals(concurrency=len(prompts))]

    def schedule(clock: StepClock) -> list[Trace]:
        return [simulate(prompts, limits, a, clock=clock.clock, vision_clock=clock.vision_clock) for a in draws]

    if times and times[-1] > 0:
        per_s = front / len(prompts) * (len(times) - 1) / times[-1]
    elif rate is not None:
        per_s = front / len(prompts) * rate
    else:  # all at once: the API server's work over the engine's busy time, as the plain clock runs it
        busy = [max((sp.finish_s for sp in t.spans), default=0.0) for t in schedule(base)]
        per_s = front / max(1e-9, sum(busy) / len(busy))
    clock = base.stretched(step.load_stretch(per_s))
    return latency_of(schedule(clock), clock, load=load, frontend_s=step.frontend_s, interval=step.interval,
                      evidence=step.describe(), frontend_image_s=step.frontend_image_s,
                      wake=step.wake_for)  # fmt: skip

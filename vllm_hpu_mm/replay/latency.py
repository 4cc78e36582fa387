"""Whole latencies from a schedule in time: what a user of the server measures (``vllm bench serve``'s figures),
queueing included, for one load.

- **TTFT**: a request's first token less its arrival, plus the API server's own time (``frontend_s``, and
  ``frontend_image_s`` per image of the request);
- **TPOT**: (end-to-end less TTFT) / (output tokens - 1), per request with more than one token (vllm bench's
  definition); **ITL**: the gap between two tokens of a request, pooled over every token after a first (each decode
  step is one gap of its whole duration, for every sequence it decodes);
- **E2EL**: a request's last token less its arrival, plus ``frontend_s``;
- a request that arrives with none in flight also waits ``wake(idle seconds, its images)`` (a server's wake-up
  after idleness, :meth:`vllm_hpu_mm.models.step_fit.FittedStep.wake_for`), in its TTFT and E2EL;
- request and output-token throughput over the run (first arrival to last answer; a request refused in its arrival
  slot, as vllm bench serve sends it, counts in neither figure but starts or ends the run there).

Each schedule runs on its own clock (:class:`StepClock`): the step priced at the shape the runtime runs, padded
buckets for a Gaudi strategy (each strategy queues at its own speed), the real shapes on a runtime without buckets
(CPU, CUDA eager). A runtime that runs a step's prefill and decode in one forward (vLLM V1's model runner) pays one
step overhead for both; vllm-gaudi runs each phase as its own graph. The scheduler prices a step's decode and its
prefill chunks in two calls (decode first, marked ``with_prefill``): the clock merges those two only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from vllm_hpu_mm.engine import KeptWhileNoFallback, PrefillChunk, TextLookup
from vllm_hpu_mm.replay.scheduler import DecodeRun, Span, Trace
from vllm_hpu_mm.replay.timing import Timer, chunk_key, percentile, sequential_sum

__all__ = ["QUANTILES", "Latency", "StepClock", "latency_dict", "latency_of", "padded_clock", "real_clock"]

#: The quantiles reported, as vllm bench serve's --metric-percentiles 50,90,99.
QUANTILES = (0.5, 0.9, 0.99)


@dataclasses.dataclass
class StepClock:
    """Prices a schedule's steps (the scheduler's ``clock`` and ``vision_clock``) and re-prices a finished trace
    step by step (:meth:`step_seconds`). ``decode``/``prefill`` price one forward of a phase; ``overhead_s`` is the
    fixed part of one forward, paid once per step when ``unified``."""

    decode: Callable[[int, int], float]
    prefill: Callable[[tuple[PrefillChunk, ...]], float]
    vision: Callable[[int], float]
    overhead_s: float
    unified: bool
    _pending: bool = False

    def clock(self, event: object) -> float:
        if isinstance(event, DecodeRun):
            self._pending = self.unified and event.with_prefill
            return self.decode(event.sequences, event.blocks)
        merged = self._pending
        self._pending = False
        seconds = self.prefill(event)  # type: ignore[arg-type]
        return max(0.0, seconds - self.overhead_s) if merged else seconds

    def vision_clock(self, tokens: int) -> float:
        return self.vision(tokens)

    def stretched(self, factor: float) -> StepClock:
        """This clock with every step ``factor`` times as long (the engine sharing its CPU with the API server's
        work: :meth:`vllm_hpu_mm.models.step_fit.FittedStep.load_stretch`); a fresh clock (nothing pending)."""
        if factor == 1.0:
            return dataclasses.replace(self, _pending=False)
        decode, prefill, vision = self.decode, self.prefill, self.vision
        return StepClock(lambda n, b: factor * decode(n, b), lambda chunks: factor * prefill(chunks),
                         lambda t: factor * vision(t), factor * self.overhead_s, self.unified)  # fmt: skip

    def step_seconds(self, trace: Trace, prices: Sequence[float] | None = None) -> list[tuple[float, int, int]]:
        """(seconds per step, steps, sequences decoding in each) for every group of steps of ``trace``, in order.
        ``prices``: each event's ``decode``/``prefill`` price where known already (each event is priced once, in
        order, either way)."""
        seconds, steps, decoding = self.step_groups(trace, prices)
        return list(zip(seconds.tolist(), steps.tolist(), decoding.tolist(), strict=True))

    def step_groups(self, trace: Trace, prices: Sequence[float] | None = None,
                    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:  # fmt: skip
        """:meth:`step_seconds` as arrays (seconds, steps, decoding): a decode stretch's run of several steps alone;
        else a step's images, then its events' prices added in order (to the last bit of a loop over them), less
        the overhead its merged forwards save."""
        events = trace.events
        n = len(events)
        if prices is None:
            prices = [self.decode(e.sequences, e.blocks) if isinstance(e, DecodeRun) else self.prefill(e)
                      for e in events]  # fmt: skip
        elif len(prices) != n:
            raise ValueError(f"{len(prices)} prices for {n} events")
        if not n:
            return np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        images: dict[int, float] = {}
        for step, tokens in trace.encoded:
            images[step] = images.get(step, 0.0) + self.vision(tokens)
        price = np.array(prices, dtype=np.float64)
        begin = np.asarray(trace.starts if len(trace.starts) == n else range(n), dtype=np.int64)
        runs = np.array([e.steps if isinstance(e, DecodeRun) else 0 for e in events], dtype=np.int64)  # 0: chunks
        sequences = np.array([e.sequences if isinstance(e, DecodeRun) else 0 for e in events], dtype=np.int64)
        head = np.concatenate(([True], begin[1:] != begin[:-1]))
        several = runs > 1
        # a run of several decode steps that heads its group stands alone: the event after it heads the rest
        for i in np.flatnonzero(several[:-1] & ~head[1:]).tolist():
            head[i + 1] |= bool(head[i])
        heads = np.flatnonzero(head)
        size = np.diff(np.append(heads, n))
        first = begin[heads]
        alone = several[heads]
        seconds = np.array([images.get(k, 0.0) for k in first.tolist()]) + price[heads]
        for k in range(1, int(size.max())):
            more = size > k
            seconds[more] = seconds[more] + price[heads[more] + k]
        if self.unified:
            seconds = np.where(size > 1, seconds - (size - 1) * self.overhead_s, seconds)
        decoding = np.add.reduceat(sequences, heads)
        return (np.where(alone, price[heads], np.maximum(0.0, seconds)), np.where(alone, runs[heads], 1),
                decoding)  # fmt: skip


def real_clock(timer: Timer, *, unified: bool) -> StepClock:
    """Every step at its real shape (a runtime without buckets, or the replay's common schedule)."""
    step = timer.step
    return StepClock(step.decode_s, timer.prefill_real, timer.vision_clock, step.prefill_s(0, 0, 0), unified)


#: Most step prices one padded clock keeps (a schedule and its re-pricing ask the same few thousand shapes; a long
#: replay may ask more: the memo then starts again).
PRICES_KEPT = 1 << 16


def padded_clock(timer: Timer, lookup: TextLookup) -> StepClock:
    """Every step at the shapes ``lookup`` (one strategy's buckets) runs it, each phase its own forward; images at
    their vision bucket. The lookup is the clock's own (a fallback it compiles stays).

    A step's price is kept while the lookup compiles nothing new: the lookup answers the same input alike in the
    same state, and its state changes only by a fallback (which empties the memo); a price whose own lookup compiled
    one is not kept, so every fallback the lookup would generate is generated, in order."""
    kept = KeptWhileNoFallback[float](lookup, PRICES_KEPT)

    block = timer.step.block_size  # the engine's, as the lookup's (one engine shape)

    def prefill(chunks: tuple[PrefillChunk, ...]) -> float:
        return kept(chunk_key(chunks, block), lambda: sum(timer.prefill_padded(r)[0] for r in lookup.prefill(chunks)))

    def decode(sequences: int, blocks: int) -> float:
        return kept((sequences, blocks), lambda: timer.decode_padded(lookup.decode(sequences, blocks)))

    return StepClock(decode, prefill, lambda t: timer.vision(t)[1], timer.step.prefill_s(0, 0, 0), False)


@dataclasses.dataclass(frozen=True)
class Latency:
    """What a user measures at one load (seconds; quantiles as :data:`QUANTILES`)."""

    load: str
    requests: int
    ttft: tuple[float, ...]
    tpot: tuple[float, ...]
    itl: tuple[float, ...]
    e2el: tuple[float, ...]
    #: Mean TTFT and TPOT (vllm bench prints both).
    mean_ttft: float
    mean_tpot: float
    duration_s: float
    request_throughput: float
    output_throughput: float
    #: The relative interval of every figure: the step model's (None: a public-data estimate without one).
    interval: float | None = None
    evidence: str = ""


def _weighted(values: npt.NDArray[np.float64], weights: npt.NDArray[np.int64], q: float) -> float:
    """The nearest-rank ``q`` quantile of values with integer weights (values sorted once: among equal values the
    order of their weights does not move which value the rank falls on)."""
    keep = weights > 0
    values, weights = values[keep], weights[keep]
    total = int(weights.sum())
    if not total:
        return 0.0
    order = np.argsort(values, kind="stable")
    rank = max(1, -(-q * total // 1))
    return float(values[order[int(np.searchsorted(np.cumsum(weights[order]), rank, side="left"))]])


def _ranked(values: npt.NDArray[np.float64], q: float) -> float:
    """:func:`~vllm_hpu_mm.replay.timing.percentile` over an array (sorted once per call)."""
    return percentile(np.sort(values), q, ordered=True)


#: The idle time before a run's first request (nothing known before it: long enough for any wake-up's whole ramp).
FIRST_IDLE_S = 3600.0


def _woken(spans: Sequence[Span], wake: Callable[[float, int], float] | None) -> list[float]:
    """Each span's wake-up (in its order): a request arriving with no other in flight (arrived, not finished)
    waits ``wake(seconds since the last finished, its images)``."""
    if wake is None:
        return [0.0] * len(spans)
    out = [0.0] * len(spans)
    busy_until = -FIRST_IDLE_S
    for i in sorted(range(len(spans)), key=lambda k: spans[k].arrival_s):
        s = spans[i]
        if s.arrival_s >= busy_until:
            out[i] = wake(s.arrival_s - busy_until, s.images)
        busy_until = max(busy_until, s.finish_s + out[i])
    return out


def latency_of(traces: Sequence[Trace], clock: StepClock, *, load: str, frontend_s: float = 0.0,
               interval: float | None = None, evidence: str = "", frontend_image_s: float = 0.0,
               wake: Callable[[float, int], float] | None = None,
               prices: Sequence[Sequence[float] | None] = ()) -> Latency:  # fmt: skip
    """The latencies of ``traces`` (one load, scheduled on ``clock``; several traces are seeds of the same load,
    pooled: quantiles over all their requests, throughput their mean): see the module docstring. ``prices``: per
    trace, each event's price on ``clock`` where known (:meth:`StepClock.step_seconds`)."""
    ttft, e2el, tpot, itl, itl_weights = [], [], [], [], []
    durations: list[tuple[float, int, int]] = []  # (seconds, requests, output tokens)
    for k, trace in enumerate(traces):
        spans = trace.spans
        arrival, first, finish = (np.array([getattr(s, f) for s in spans], dtype=np.float64)
                                  for f in ("arrival_s", "first_s", "finish_s"))  # fmt: skip
        output = np.array([s.output for s in spans], dtype=np.int64)
        images = np.array([s.images for s in spans], dtype=np.int64)
        front = frontend_s + frontend_image_s * images + np.array(_woken(spans, wake), dtype=np.float64)
        ttft.append(first - arrival + front)
        e2el.append(finish - arrival + front)
        several = output > 1
        tpot.append((finish[several] - first[several]) / (output[several] - 1))
        seconds, steps, decoding = clock.step_groups(trace, prices[k] if k < len(prices) else None)
        itl.append(seconds)
        itl_weights.append(steps * decoding)
        if spans:  # a request refused in its arrival slot ends there (vllm bench serve's duration spans it)
            start, end = float(arrival.min()), float((finish + front).max())
            if trace.refused_s:
                start, end = min(start, trace.refused_s[0]), max(end, trace.refused_s[1])
            durations.append((end - start, len(spans), int(output.sum())))
    timed = [d for d in durations if d[0] > 0]
    every = {name: np.concatenate(parts) if parts else np.zeros(0) for name, parts in
             (("ttft", ttft), ("e2el", e2el), ("tpot", tpot), ("itl", itl))}  # fmt: skip
    weights = np.concatenate(itl_weights) if itl_weights else np.zeros(0, dtype=np.int64)
    return Latency(
        load=load,
        requests=sum(n for _, n, _ in durations),
        ttft=tuple(_ranked(every["ttft"], q) for q in QUANTILES),
        tpot=tuple(_ranked(every["tpot"], q) for q in QUANTILES),
        itl=tuple(_weighted(every["itl"], weights, q) for q in QUANTILES),
        e2el=tuple(_ranked(every["e2el"], q) for q in QUANTILES),
        mean_ttft=sequential_sum(every["ttft"]) / len(every["ttft"]) if len(every["ttft"]) else 0.0,
        mean_tpot=sequential_sum(every["tpot"]) / len(every["tpot"]) if len(every["tpot"]) else 0.0,
        duration_s=sum(d for d, _, _ in timed) / len(timed) if timed else 0.0,
        request_throughput=sum(n / d for d, n, _ in timed) / len(timed) if timed else 0.0,
        output_throughput=sum(o / d for d, _, o in timed) / len(timed) if timed else 0.0,
        interval=interval,
        evidence=evidence,
    )


def latency_dict(x: Latency) -> dict[str, Any]:
    """One load's latencies as JSON: milliseconds for the per-request figures, as vllm bench serve saves them."""

    def ms(values: tuple[float, ...]) -> dict[str, float]:
        return {f"p{round(100 * q)}": round(1000 * v, 3) for q, v in zip(QUANTILES, values, strict=True)}

    if not x.requests:  # no request ran at this load: quantiles and rates of nothing are null, never a measured 0
        figures = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms", "mean_ttft_ms", "mean_tpot_ms", "duration_s",
                   "request_throughput", "output_throughput")  # fmt: skip
        return {"load": x.load, "requests": 0, **dict.fromkeys(figures), "interval": x.interval,
                "evidence": x.evidence}  # fmt: skip
    return {
        "load": x.load,
        "requests": x.requests,
        "ttft_ms": ms(x.ttft),
        "tpot_ms": ms(x.tpot),
        "itl_ms": ms(x.itl),
        "e2el_ms": ms(x.e2el),
        "mean_ttft_ms": round(1000 * x.mean_ttft, 3),
        "mean_tpot_ms": round(1000 * x.mean_tpot, 3),
        "duration_s": round(x.duration_s, 3),
        # significant figures, not places: a rate of 1.5e-06 requests/s is no 0.0 (r16loads 12)
        "request_throughput": float(f"{x.request_throughput:.4g}"),
        "output_throughput": float(f"{x.output_throughput:.4g}"),
        "interval": None if x.interval is None else round(x.interval, 4),
        "evidence": x.evidence,
    }

"""Each configuration's whole latencies on its own schedule: the traffic scheduled again with every step priced at
the shapes that configuration's lookup runs (:func:`~vllm_hpu_mm.replay.latency.padded_clock`), so a strategy that
pads more also queues more. The padding figures stay on the common real-shape schedule (what the planner compares);
these are what a user of each configuration would measure.
"""

from __future__ import annotations

import math

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.models.step_time import StepTime
from vllm_hpu_mm.replay.latency import Latency, latency_of, padded_clock
from vllm_hpu_mm.replay.run import load_of
from vllm_hpu_mm.replay.scheduler import Arrivals
from vllm_hpu_mm.replay.schedules import Images, schedules
from vllm_hpu_mm.replay.timing import Timer
from vllm_hpu_mm.runtimes.base import RuntimeModel
from vllm_hpu_mm.traffic.requests import Traffic

__all__ = ["latency_interval", "strategy_latency"]


def latency_interval(timer: Timer) -> tuple[float | None, str]:
    """The relative interval of latencies priced on ``timer``'s step model and its evidence: the widest held-out
    error of the fitted step time over prefill and decode (benchmarks/fits/results/step_time_fit.md), or None where
    no public point bounds a phase."""
    step = timer.step
    if not isinstance(step, StepTime):
        return None, "a step model without a public-data interval"
    halves = []
    for phase in ("prefill", "decode"):
        low, high, n, _ = step.interval(phase)
        if not n or not math.isfinite(high):
            return None, f"a public-data estimate on {step.device.name}: {phase} unbounded (no held-out public point)"
        halves.append(max(1.0 - low, high - 1.0))
    return max(halves), (f"a public-data estimate (the roofline above, fitted on vendor tables), ±{max(halves):.0%}: "
                         "its widest held-out error over prefill and decode")  # fmt: skip


def strategy_latency(model: RuntimeModel, shape: EngineShape, timer: Timer, traffic: Traffic, images: Images, *,
                     concurrency: int | None, requests: int,
                     arrivals: Arrivals | None) -> tuple[Latency, ...]:  # fmt: skip
    """One :class:`Latency` per load the replay runs, for ``model``'s buckets (None when it has no lookup)."""
    lookup = model.text_lookup(shape)
    if lookup is None:
        return ()
    clock = padded_clock(timer, lookup)
    interval, evidence = latency_interval(timer)
    runs = schedules(traffic, shape, images, concurrency=concurrency, requests=requests, arrivals=arrivals,
                     timer=clock)  # fmt: skip
    return tuple(latency_of([t], clock, load=load_of(t), interval=interval, evidence=evidence)
                 for t in runs.traces)  # fmt: skip

"""Each configuration's whole latencies on its own schedule: the traffic scheduled again with every step priced at
the shapes that configuration's lookup runs (:func:`~vllm_hpu_mm.replay.latency.padded_clock`), so a strategy that
pads more also queues more. The padding figures stay on the common real-shape schedule (what the planner compares);
these are what a user of each configuration would measure.
"""

from __future__ import annotations

from vllm_hpu_mm.replay.job import Images, schedules
from vllm_hpu_mm.replay.latency import Latency, latency_of, padded_clock
from vllm_hpu_mm.replay.run import load_of
from vllm_hpu_mm.replay.scheduler import Arrivals, Limits
from vllm_hpu_mm.replay.timing import Timer
from vllm_hpu_mm.runtimes.base import EngineShape, RuntimeModel
from vllm_hpu_mm.traffic.requests import Traffic

__all__ = ["ROOFLINE_HELDOUT_ERROR", "strategy_latency"]

#: The roofline's held-out median error on vendor tables (benchmarks/results/step_time_check.md): the interval of
#: a latency priced on it, a public-data estimate.
ROOFLINE_HELDOUT_ERROR = 0.17


def strategy_latency(model: RuntimeModel, shape: EngineShape, timer: Timer, traffic: Traffic, limits: Limits,
                     images: Images, *, concurrency: int | None, requests: int, arrivals: Arrivals | None,
                     evidence: str) -> tuple[Latency, ...]:  # fmt: skip
    """One :class:`Latency` per load the replay runs, for ``model``'s buckets (None when it has no lookup)."""
    lookup = model.text_lookup(shape)
    if lookup is None:
        return ()
    clock = padded_clock(timer, lookup)
    runs = schedules(traffic, limits, images, concurrency=concurrency, requests=requests, arrivals=arrivals,
                     timer=clock)  # fmt: skip
    return tuple(latency_of([t], clock, load=load_of(t), interval=ROOFLINE_HELDOUT_ERROR, evidence=evidence)
                 for t in runs.traces)  # fmt: skip

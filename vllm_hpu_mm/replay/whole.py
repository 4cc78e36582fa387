"""Each configuration's whole latencies on its own schedule: the traffic scheduled again with every step priced at
the shapes that configuration's lookup runs (:func:`~vllm_hpu_mm.replay.latency.padded_clock`), so a strategy that
pads more also queues more. The padding figures stay on the common real-shape schedule (what the planner compares);
these are what a user of each configuration would measure.

A closed loop (a concurrency, or every load level) admits by steps, never by seconds: its events are the same on
every clock, so the common schedule is re-timed on each configuration's clock (:func:`retimed`) instead of scheduled
again; arrivals in time (a rate, a profile) depend on the clock and are scheduled again, until every request has
arrived: where the state then is the common schedule's at the same step, its remaining events are taken and priced on
this clock (``simulate(reference=)``; a saturated server reaches it within its first steps).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from vllm_hpu_mm.engine import EngineShape, TextLookup
from vllm_hpu_mm.models.step_fit import FittedStep
from vllm_hpu_mm.models.step_time import StepTime
from vllm_hpu_mm.replay.latency import Latency, StepClock, latency_of, padded_clock
from vllm_hpu_mm.replay.run import ReplayResult, load_of
from vllm_hpu_mm.replay.scheduler import Arrivals, Clock, Event, Span, Trace, simulate, step_times
from vllm_hpu_mm.replay.schedules import Images, Schedules, schedules
from vllm_hpu_mm.replay.timing import Timer
from vllm_hpu_mm.runtimes.base import RuntimeModel
from vllm_hpu_mm.traffic.requests import Traffic

__all__ = ["latency_interval", "retimed", "strategy_latency"]


def latency_interval(timer: Timer) -> tuple[float | None, str]:
    """The relative interval of latencies priced on ``timer``'s step model and its evidence: a step fitted on the
    user's server, its own fit's interval; the roofline, the widest held-out error of the fitted step time over
    prefill and decode (benchmarks/fits/results/step_time_fit.md), or None where no public point bounds a phase."""
    step = timer.step
    if isinstance(step, FittedStep):  # calibrated on the user's server: its own interval, in its own words
        return step.interval, f"calibrated: {step.describe()}"
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
                     concurrency: int | None, requests: int, arrivals: Arrivals | None,
                     common: Schedules | None = None, replayed: ReplayResult | None = None,
                     ) -> tuple[Latency, ...]:  # fmt: skip
    """One :class:`Latency` per load the replay runs, for ``model``'s buckets (None when it has no lookup).
    ``common``: the replay's schedules of the same traffic and load (any clock), re-timed rather than scheduled again
    where the arrivals do not depend on time; where they do, its requests scheduled again on this clock.
    ``replayed``: ``model``'s replay of ``common`` on ``timer``; where its lookup compiled nothing, its price of each
    common event is this clock's while this lookup has compiled nothing either (the same lookup in the same state),
    and a schedule re-timed or continued from the common one takes them rather than pricing its events again. A
    schedule on
    which the lookup compiled nothing passes its prices on to its latencies (the same prices asked again)."""
    lookup = model.text_lookup(shape)
    if lookup is None:
        return ()
    clock = padded_clock(timer, lookup)
    interval, evidence = latency_interval(timer)
    prices: tuple[Sequence[float] | None, ...] = ()
    traces: tuple[Trace, ...]
    known = _known_prices(replayed, lookup)
    given = known() if known is not None and common is not None and len(common.traces) == 1 else None
    if common is not None and not (arrivals is not None and arrivals.timed) and given is not None:
        traces = (retimed(common.traces[0], clock, prices=given),)  # the replay's prices: this lookup's, unasked
        prices = (given,)
    elif common is not None and not (arrivals is not None and arrivals.timed):
        recorded = [_Recorded(clock, None) for _ in common.traces]
        traces = tuple(retimed(t, clock, price=r) for t, r in zip(common.traces, recorded, strict=True))
        prices = tuple(r.of(t, t, lookup) for t, r in zip(traces, recorded, strict=True))
    elif common is not None and arrivals is not None and common.prompts:  # the same requests, on this clock
        priced = _Recorded(clock, known)
        reference = common.traces[0]
        traces = (simulate(common.prompts, shape, arrivals, clock=priced, vision_clock=clock.vision_clock,
                           reference=reference, reference_prices=priced.take),)  # fmt: skip
        prices = (priced.of(traces[0], reference, lookup),)
    else:
        traces = schedules(traffic, shape, images, concurrency=concurrency, requests=requests, arrivals=arrivals,
                           timer=clock).traces  # fmt: skip
    # a step fitted on the user's server: its API server's time and wake-up after idleness too (a roofline: none)
    server = timer.step if isinstance(timer.step, FittedStep) else None
    return tuple(latency_of([t], clock, load=load_of(t), interval=interval, evidence=evidence,
                            frontend_s=server.frontend_s if server else 0.0,
                            frontend_image_s=server.frontend_image_s if server else 0.0,
                            wake=server.wake_for if server else None, prices=prices[k : k + 1])
                 for k, t in enumerate(traces))  # fmt: skip


def _known_prices(replayed: ReplayResult | None, lookup: TextLookup) -> Callable[[], Sequence[float] | None] | None:
    """The replay's price of each common event, while ``lookup`` (a padded clock's, never unified) is in the state the
    replay priced them in: neither has compiled a fallback."""
    if replayed is None or replayed.fallbacks or len(replayed.times) != 1 or not replayed.times[0].prices:
        return None
    prices = replayed.times[0].prices
    return lambda: None if lookup.fallbacks() else prices


class _Recorded:
    """A padded clock (never unified: an event's price is its ``decode``/``prefill``) that keeps each price it gives,
    in order (the scheduler prices each event it emits once, in order), and the replay's prices a continued schedule
    took for the rest of the reference's events."""

    def __init__(self, clock: StepClock, known: Callable[[], Sequence[float] | None] | None) -> None:
        self.clock, self.known = clock, known
        self.prices: list[float] = []
        self.taken: Sequence[float] | None = None

    def __call__(self, event: Event) -> float:
        price = self.clock.clock(event)
        self.prices.append(price)
        return price

    def take(self) -> Sequence[float] | None:
        self.taken = self.known() if self.known is not None else None
        return self.taken

    def of(self, trace: Trace, reference: Trace, lookup: TextLookup) -> Sequence[float] | None:
        """Each event's price of ``trace`` (scheduled on this clock, continued from ``reference``) as its lookup
        prices it now: None unless the lookup compiled nothing (then every price asked again is the one given)."""
        if self.clock.unified or lookup.fallbacks():
            return None
        prices = self.prices
        if self.taken is not None and reference.resume is not None:
            prices = [*prices, *self.taken[reference.resume.event :]]
        return prices if len(prices) == len(trace.events) else None


def retimed(trace: Trace, clock: StepClock, *, price: Clock | None = None,
            prices: Sequence[float] | None = None) -> Trace:  # fmt: skip
    """A closed-loop ``trace`` with its requests' times and busy time on ``clock``: what scheduling it again on
    ``clock`` gives, bit for bit. The steps are priced in the scheduler's order and summed as it sums them
    (``replay/scheduler.py``: a step's images, its decode, its prefill chunks, then the step; a decode stretch run by
    run), and a request's times are the clock at the steps it arrived before, got its first token and its last in.
    ``price``: ``clock.clock`` as a :class:`_Recorded` keeps its prices; ``prices``: what it answers for each event,
    known already (none is asked)."""
    if trace.arrivals is not None and trace.arrivals.timed:
        raise ValueError("a schedule whose arrivals depend on time is scheduled again, not re-timed")
    events, n = trace.events, len(trace.events)
    starts = trace.starts if len(trace.starts) == n else tuple(range(n))
    at, now = step_times(events, starts, trace.encoded, price or clock.clock, clock.vision_clock, prices=prices)
    spans = tuple([Span(s.arrival, s.first, s.finish, s.output, at[s.arrival], at[s.first + 1], at[s.finish + 1],
                        s.images, s.request) for s in trace.spans])  # fmt: skip
    return dataclasses.replace(trace, spans=spans, busy_s=now - trace.idle_s)

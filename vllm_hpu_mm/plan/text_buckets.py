"""The text buckets planned from a replay's schedules: each schedule as what its load ran
(:class:`~vllm_hpu_mm.buckets.text_budget.LoadShapes`), the planning weights on one time scale, the step-time model
of the plan's model and device, and the planner (:func:`~vllm_hpu_mm.buckets.text.plan_text_buckets`) within the
default budget rule (:func:`~vllm_hpu_mm.buckets.text_budget.choose_budget`) or a given budget.

The schedules come from the replay (what the traffic does at a load); what is planned, and why, is decided here and
in ``buckets/``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from vllm_hpu_mm.buckets.text import TextBucketPlan, TextLimits, plan_text_buckets
from vllm_hpu_mm.buckets.text_budget import BudgetedPlan, LoadShapes, Warmup, check_budget, choose_budget
from vllm_hpu_mm.buckets.text_time import BudgetTooSmall, StepTimes, cached
from vllm_hpu_mm.buckets.text_worst import Between, Sampler, with_bounded_worst
from vllm_hpu_mm.engine import EngineShape, TextShapes
from vllm_hpu_mm.models.dims import ModelDims
from vllm_hpu_mm.models.step_time import StepTime, has_time_model, step_time
from vllm_hpu_mm.replay.run import shape_weights
from vllm_hpu_mm.replay.schedules import MIN_LEVEL_REQUESTS, Images, Schedules, schedules
from vllm_hpu_mm.runtimes import registry
from vllm_hpu_mm.runtimes.base import RuntimeTraits, warmup_estimate
from vllm_hpu_mm.traffic.requests import Traffic

__all__ = [
    "TIME_DEVICE",
    "load_shapes",
    "loads_at",
    "plan_for_traffic",
    "plan_from_traces",
    "planning_weights",
    "text_time",
    "text_warmup",
]

#: The device whose rates price the steps when the plan's device has no time model (the main job's, vllm-gaudi's
#: reference card: the registry's, not a copy).
TIME_DEVICE = registry.MAIN_JOB_DEVICE
#: Each load's weight when every load weighs the same: its steps scaled so its useful seconds sum to this.
LOAD_SCALE = 1e6
#: With a known load (or arrivals), the share of the planning weight it takes; every load level of the sweep shares
#: the rest and is judged as well: a server planned for one load still meets every other (a burst's drain, a quiet
#: hour, twice the load it was planned for).
KNOWN_LOAD_SHARE = 0.5
#: Requests per place of a load between the judged ones (a level runs 4), and the fewest: its steady state weighs as
#: in a long run, not its ramp and drain, and a few heavy requests as often as in a long run (issue 35: fresh3's load
#: 20 padded 0.99x exp's with 200 requests, 1.14x with 600; its prefix-heavy tools at 7 at once 0.97x with 210,
#: 1.07x with 2,000).
BETWEEN_REQUESTS = 30
BETWEEN_LEAST = 600


def text_time(model: ModelDims, device: str, *, block_size: int, tensor_parallel_size: int) -> StepTime:
    """The step-time model the planner prices buckets with: the plan's device, or :data:`TIME_DEVICE`."""
    name = device if has_time_model(device) else TIME_DEVICE
    return step_time(model, name, block_size=block_size, tensor_parallel_size=tensor_parallel_size)


def text_warmup(traits: RuntimeTraits, *, block_size: int, eager: bool = False) -> Warmup | None:
    """The runtime's warm-up estimate of a text bucket set (prompt, decode), the one rule of
    :func:`~vllm_hpu_mm.runtimes.warmup.warmup_estimate`; None where the runtime has none or warms no text graph."""
    if eager or not traits.warmup_era:  # no fitted era: warmup_estimate has no figure for this runtime
        return None

    def seconds(prompt: Sequence[tuple[int, int, int]], decode: Sequence[tuple[int, int, int]]) -> float:
        estimate = warmup_estimate(traits, prompt=prompt, decode=[(b, c) for b, _, c in decode], block_size=block_size)
        return estimate.seconds if estimate is not None else 0.0

    return seconds


def load_shapes(runs: Schedules) -> tuple[LoadShapes, ...]:
    """What each schedule ran, one :class:`LoadShapes` per schedule (its label: the load)."""
    out = []
    for trace in runs.traces:
        prefill, decode = shape_weights([trace])
        out.append(LoadShapes(f"{trace.concurrency} at once", prefill, decode))
    return tuple(out)


def loads_at(traffic: Traffic, shape: EngineShape, images: Images, requests: int,
             seed: int = 0) -> Sampler:  # fmt: skip
    """What the traffic runs at ``n`` requests at once (:data:`BETWEEN_REQUESTS` per place, at least
    :data:`BETWEEN_LEAST`, within the levels' least and ``requests``): the loads between the judged ones that the plan
    is checked at."""

    def at(n: int, sample: int = 0) -> LoadShapes:
        most = max(MIN_LEVEL_REQUESTS, min(requests, max(BETWEEN_LEAST, BETWEEN_REQUESTS * n)))
        runs = schedules(traffic, shape, images, concurrency=n, requests=most, seed=seed + sample)
        return load_shapes(runs)[0]

    return at


def planning_weights(loads: Sequence[LoadShapes], time: StepTimes, *, balanced: bool,
                     shares: Sequence[float] | None = None,
                     ) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:  # fmt: skip
    """The shapes the planner minimises time over: every load's steps as they ran (``balanced`` off), or each load
    scaled to the same useful seconds (times its share in ``shares``, when given)."""
    prefill: dict[tuple[int, int], float] = {}
    decode: dict[tuple[int, int], float] = {}
    for i, load in enumerate(loads):
        factor = 1.0
        if balanced:
            useful = sum(n * time.prefill_s(1, q, c) for (q, c), n in load.prefill.items()) + sum(
                n * time.decode_s(s, k) for (s, k), n in load.decode.items()
            )
            share = 1.0 if shares is None else shares[i] * len(loads)
            factor = LOAD_SCALE * share / useful if useful else 0.0
        for out, shapes in ((prefill, load.prefill), (decode, load.decode)):
            for key, n in shapes.items():
                out[key] = out.get(key, 0.0) + n * factor
    return _ints(prefill), _ints(decode)


def _ints(shapes: Mapping[tuple[int, int], float]) -> dict[tuple[int, int], int]:
    return {k: max(1, round(v)) for k, v in shapes.items() if v > 0}


def _levels(runs: Schedules) -> list[int]:
    return [t.concurrency for t in runs.traces] if runs.balanced else []


def plan_from_traces(runs: Schedules, limits: TextLimits, budget: int, *, time: StepTimes,
                     sweep: Schedules | None = None) -> TextBucketPlan:  # fmt: skip
    """The text buckets planned over the schedules within ``budget`` graphs (batch-1 prompt rows and decode), every
    load level of ``sweep`` weighed in as :func:`plan_for_traffic` does."""
    _, weights, levels = _weights(runs, time, sweep)
    return plan_text_buckets(*weights, limits, budget=budget, time=time, load_levels=levels)


def _weights(runs: Schedules, time: StepTimes, sweep: Schedules | None) -> tuple[
        tuple[LoadShapes, ...], tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]], list[int]]:  # fmt: skip
    """The loads judged, the planning weights and the load levels: ``runs`` alone, or with ``sweep``'s levels taking
    1 - :data:`KNOWN_LOAD_SHARE` of the weight."""
    loads = load_shapes(runs)
    if sweep is None or runs.balanced:
        return loads, planning_weights(loads, time, balanced=runs.balanced), _levels(runs)
    extra = load_shapes(sweep)
    shares = [KNOWN_LOAD_SHARE / len(loads)] * len(loads) + [(1 - KNOWN_LOAD_SHARE) / len(extra)] * len(extra)
    both = (*loads, *extra)
    return both, planning_weights(both, time, balanced=True, shares=shares), _levels(sweep)


def _own_buckets(own: TextShapes) -> tuple[tuple[tuple[int, int, int], ...], tuple[tuple[int, int, int], ...]]:
    return own.prefill, tuple((b, 1, c) for b, c in own.decode)


def plan_for_traffic(runs: Schedules, limits: TextLimits, own: TextShapes, time: StepTimes, *, budget: int | None,
                     budget_flag: str = "--text-graph-budget", sweep: Schedules | None = None,
                     warmup: Warmup | None = None, most: tuple[int, str] | None = None,
                     between: Sampler | None = None) -> BudgetedPlan:  # fmt: skip
    """The text buckets for ``runs``: within ``budget`` when given (at most the runtime's ``own`` graph count), else
    by the default rule, judged at every load of ``runs`` against the runtime's own buckets. With ``sweep`` (every
    load level, when ``runs`` is one known load or an arrival process), its levels are planned for with
    1 - :data:`KNOWN_LOAD_SHARE` of the weight and judged too. ``warmup`` (the runtime's warm-up estimate of a bucket
    set) keeps the default budget's warm-up within its share of the runtime's own. ``most``: the largest budget
    accepted and whose count it is (default: the runtime's own graph count; the plan passes its largest strategy's).
    ``between``: the
    traffic at n requests at once (:func:`loads_at`), for loads between the judged ones: the plan is judged at those
    its decode rows pad most (:class:`~vllm_hpu_mm.buckets.text_worst.Between`)."""
    theirs = _own_buckets(own)
    if most is None:
        most = (len(theirs[0]) + len(theirs[1]), "the runtime's own buckets")
    check_budget(budget, most[0], budget_flag, whose=most[1])
    judged = frozenset(t.concurrency for r in (runs, sweep) if r is not None for t in r.traces)
    off = None if between is None else Between(between, judged, limits.max_num_seqs)
    # the few loads between the judged ones scheduled from now in a forked child (they do not depend on the plan):
    # the second core is otherwise idle until the budget search
    early = None if off is None else off.ahead()
    try:
        loads, weights, levels = _weights(runs, time, sweep)
        limits = held_above_ceiling(limits, loads)
        intervals = _intervals(time)
        time = cached(time)  # the bound prices the shapes the budget rule priced
        try:
            chosen = choose_budget(weights, loads, limits, theirs, time, budget=budget, load_levels=levels,
                                   warmup=warmup)  # fmt: skip
        except BudgetTooSmall as exc:  # a given budget's refusal names the option as the user typed it
            raise (exc if budget is None else exc.named(budget_flag)) from None
        return with_bounded_worst(chosen, weights, loads, limits, theirs, time, given=budget, load_levels=levels,
                                  against=own.source.split(" (")[0], intervals=intervals, between=off,
                                  early=early)  # fmt: skip
    finally:
        if early is not None:
            early.stop()


def held_above_ceiling(limits: TextLimits, loads: Sequence[LoadShapes]) -> TextLimits:
    """``limits`` with the decode cap raised to the most KV blocks a decode step of ``loads`` holds, where that is
    above it. Without contiguous PA a decode step holds the sum of its block tables, a cached prefix once per
    sequence, so it can pass exp's ceiling (3x the KV blocks on main); vllm-gaudi then caps the lookup at its largest
    decode bucket but never cuts the block list (pad_list), so the step runs unpadded: a run-time compile per
    distinct count. A bucket file keeps any decode bucket with at least as many blocks as sequences (cut at the
    sequences' max_model_len blocks) and the cap becomes its largest, so the plan may hold those steps."""
    most = max((k for load in loads for _, k in load.decode), default=0)
    return dataclasses.replace(limits, decode_block_cap=most) if most > limits.decode_block_cap else limits


def _intervals(time: StepTimes) -> tuple[tuple[str, float, float], ...]:
    """Per phase, the step model's held-out (low, high) of published over modelled time (none for another model)."""
    if not isinstance(time, StepTime):
        return ()
    out = []
    for phase in ("decode", "prefill"):
        low, high, _, _ = time.interval(phase)
        out.append((phase, low, high))
    return tuple(out)

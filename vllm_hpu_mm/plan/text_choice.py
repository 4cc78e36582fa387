"""The plan with its text buckets planned from traffic: where the runtime takes a bucket list (vllm-gaudi's bucket
file), the buckets that cover every shape its limits allow and spend the least modelled time padding within a graph
budget (:func:`vllm_hpu_mm.plan.text_buckets.plan_for_traffic`), replayed beside the runtime's own strategy on the
same traffic.

The runtime is read through its model only: ``text_lookup`` (its lookup, for the replay) and ``with_text_buckets``
(the runtime told to warm exactly the planned buckets; None where it cannot be told, or the user gave a file).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from vllm_hpu_mm.buckets.text import TextBucketPlan, TextLimits
from vllm_hpu_mm.buckets.text_budget import (
    MARGIN,
    MAX_BUDGET_SHARE,
    BudgetedPlan,
    budget_for,
    budget_steps,
    default_most,
)
from vllm_hpu_mm.buckets.text_time import GROSS_FACTOR, BudgetTooSmall
from vllm_hpu_mm.buckets.text_worst import Sampler, WorstCase
from vllm_hpu_mm.buckets.turns import in_turns
from vllm_hpu_mm.collector import fewer_collections
from vllm_hpu_mm.engine import EngineShape, prefix_caching_off, prompt_fits_model_len
from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.plan.inputs import PlanInputs
from vllm_hpu_mm.plan.planner import Plan, plan
from vllm_hpu_mm.plan.text_buckets import loads_at, plan_for_traffic, text_time, text_warmup
from vllm_hpu_mm.plan.vision_cost import PoolMode
from vllm_hpu_mm.replay.report import Report, result_dict, to_dict
from vllm_hpu_mm.replay.run import ReplayResult
from vllm_hpu_mm.replay.schedules import (
    Images,
    Schedules,
    TowerImages,
    load_sweep,
    replay_model,
    schedules,
    vision_efficiency,
)
from vllm_hpu_mm.runtimes import registry
from vllm_hpu_mm.runtimes.base import RuntimeModel, RuntimeTraits
from vllm_hpu_mm.traffic.requests import Traffic

__all__ = [
    "PLANNED_LABEL",
    "TextChoice",
    "choose_text",
    "configured_label",
    "images_for",
    "plan_for",
]


@dataclasses.dataclass(frozen=True)
class TextChoice:
    traffic: str
    runs: Schedules
    shape: EngineShape
    #: The configured runtime (its own strategy, or the user's file) replayed on the traffic.
    before: ReplayResult
    #: The planned buckets replayed on the same traffic, None when none were planned.
    after: ReplayResult | None
    planned: TextBucketPlan | None
    budget: int
    replaced: bool
    reason: str
    #: The runtime's traits (its warm-up era: what the warm-up estimate depends on).
    traits: RuntimeTraits
    #: Why the budget is what it is (the default rule's step, or yours).
    budget_reason: str = ""
    #: VLLM_SKIP_WARMUP as set: nothing is warmed at start-up, every shape that runs compiles on first use.
    skip_warmup: bool = False
    #: The planned buckets' worst shape against the runtime's own, for every shape the limits allow.
    worst: WorstCase | None = None
    #: How the served processor made the traffic's images into tokens (its vision buckets): the replay's vision
    #: figure, over the images of the requests that ran, is on them.
    images: Images | None = None

    @property
    def refused(self) -> int:
        """Requests of the traffic the engine refuses, counted as ``buckets replay`` counts them."""
        return sum(n for _, n in self.runs.refusals)

    def to_dict(self) -> dict[str, Any]:
        report = self.report()
        data = to_dict(report)
        data.update({"replaced": self.replaced, "reason": self.reason, "budget": self.budget,
                     "budget_reason": self.budget_reason,
                     "before": result_dict(self.before, report),
                     "after": result_dict(self.after, report) if self.after else None})  # fmt: skip
        return data

    def report(self) -> Report:
        results = (self.before,) if self.after is None else (self.before, self.after)
        worst = self.worst if self.after is not None else None
        vision = vision_efficiency(self.runs, self.images) if self.images is not None else None
        return Report(results, self.traffic, self.runs.load, self.runs.ran, self.shape.limits(), self.traits,
                      vision, self.images.buckets if self.images is not None else None, self.skip_warmup,
                      (worst.line(),) if worst else (), refused=self.runs.refusals, sampled=self.runs.requests,
                      unsent=self.runs.unsent, images_sampled=self.runs.images_sampled,
                      worst_case=worst.to_dict() if worst else None)  # fmt: skip


PLANNED_LABEL = "planned from traffic"


def configured_label(runtime: RuntimeModel, shape: EngineShape) -> str:
    """The configured runtime's buckets in a few words: "vllm-gaudi's exp bucketing"."""
    return runtime.text_shapes(shape).source.split(" (")[0]


def choose_text(first: Plan, traffic: Traffic, settings: Settings, *, budget: int | None, concurrency: int | None,
                requests: int, budget_flag: str = "--text-graph-budget") -> tuple[Plan, TextChoice | None]:  # fmt: skip
    """The plan with the runtime told to warm the planned buckets, and the before/after replay; the plan unchanged
    (and None) where the runtime has no graphs or no modelled lookup."""
    with fewer_collections():
        plan_, choice = _choose_text(first, traffic, settings, budget=budget, concurrency=concurrency,
                                     requests=requests, budget_flag=budget_flag)  # fmt: skip
    if choice is None:
        return plan_, None
    # the images as the replay made them: at the vision buckets the plan keeps (buckets replay's figure, the same)
    images = images_for(first.inputs, first.vision_buckets_captured, settings)
    return plan_, dataclasses.replace(choice, skip_warmup=first.inputs.skip_warmup, images=images)


def _choose_text(first: Plan, traffic: Traffic, settings: Settings, *, budget: int | None, concurrency: int | None,
                 requests: int, budget_flag: str) -> tuple[Plan, TextChoice | None]:  # fmt: skip
    i = first.inputs
    if i.enforce_eager or i.pool_mode is PoolMode.NONE:
        return first, None
    shape = i.engine(first.kv_blocks)
    lookup = i.runtime.text_lookup(shape)
    if lookup is None:
        return first, None
    if prefix_caching_off(lookup) is not None:  # the server computes the cached prefixes too
        traffic = traffic.without_cached_tokens()
    images = images_for(i, first.vision_buckets_captured, settings)
    runs = schedules(traffic, shape, images, concurrency=concurrency, requests=requests)
    label = configured_label(i.runtime, shape)
    before = functools.partial(replay_model, i.runtime, shape, runs, label)  # replayed beside the planned buckets
    traits = i.runtime.traits
    if i.runtime.with_text_buckets(((1, 128, 0),), ((1, 1, 1),)) is None:  # nothing planned could be handed over
        return first, TextChoice(traffic.source, runs, shape, before(), None, None, 0, False,
                                 "the runtime is not given planned buckets (your own bucket file, bucketing off or "
                                 "merged prefill)", traits)  # fmt: skip
    sweep = load_sweep(runs, traffic, shape, images, requests)
    try:
        chosen = plan_for(i, shape, runs, lookup.decode_block_cap, lookup.max_prefill_batch, budget, i.runtime,
                          budget_flag, sweep, loads_at(traffic, shape, images, requests),
                          prompt_fits_model_len=prompt_fits_model_len(lookup))  # fmt: skip
    except BudgetTooSmall as exc:
        if budget is not None:  # the user's budget: invalid input, with the least that would do
            raise
        return first, TextChoice(traffic.source, runs, shape, before(), None, None, 0, False,
                                 f"the runtime keeps its own buckets: {exc}", traits)  # fmt: skip
    runtime = i.runtime.with_text_buckets(chosen.plan.prompt, chosen.plan.decode)
    if runtime is None:
        return first, TextChoice(traffic.source, runs, shape, before(), None, None, chosen.budget, False,
                                 "the runtime is not given planned buckets (your own bucket file, bucketing off or "
                                 "merged prefill)", traits)  # fmt: skip
    second = plan(dataclasses.replace(i, runtime=runtime))
    # the runtime's own buckets and the planned ones replayed side by side (the second in a forked child: the same
    # replay, sooner)
    replayed = [outcome() for outcome in in_turns([before, functools.partial(replay_model, runtime, shape, runs,
                                                                                 PLANNED_LABEL)])]  # fmt: skip
    return second, TextChoice(traffic.source, runs, shape, replayed[0], replayed[1], chosen.plan, chosen.budget, True,
                              f"planned over {traffic.source}", traits, chosen.reason, worst=chosen.worst)  # fmt: skip


def images_for(i: PlanInputs, buckets: tuple[int, ...] | None, settings: Settings) -> Images:
    """How the served processor turns the traffic's images into prompt tokens: ours (Qwen2.5-VL, aligned to the
    buckets) or the family's own."""
    v = i.model.vision
    loader = (settings.served_max_image_pixels, settings.max_aspect_ratio)  # what the served loader refuses
    if not v.present or v.aligned_processor_applies:
        return Images(buckets or None, settings.oversize_policy, settings.align_mode, loader=loader)
    return dataclasses.replace(TowerImages.of(v), loader=loader)


def plan_for(i: PlanInputs, shape: EngineShape, runs: Schedules, block_cap: int, prefill_batch: int, budget: int | None,
             runtime: RuntimeModel, budget_flag: str = "--text-graph-budget",
             sweep: Schedules | None = None,
             between: Sampler | None = None, *, prompt_fits_model_len: bool = False) -> BudgetedPlan:  # fmt: skip
    """The buckets planned over ``runs`` (and every load level of ``sweep``) for ``runtime``, priced with the plan's
    step-time model, by the default budget rule unless ``budget`` is given
    (:func:`~vllm_hpu_mm.plan.text_buckets.plan_for_traffic`); with ``prompt_fits_model_len`` only prompt buckets
    the runtime keeps under that filter (the lookup's own)."""
    limits = TextLimits.of(shape, block_cap, prefill_batch, prompt_fits_model_len=prompt_fits_model_len)
    time = text_time(i.model, i.device, block_size=i.block_size, tensor_parallel_size=i.tensor_parallel_size)
    warmup = text_warmup(runtime.traits, block_size=i.block_size, eager=i.enforce_eager)
    most = None if budget is None else most_graphs(i, shape)

    def planned(listed: int | None, flag: str = budget_flag) -> BudgetedPlan:
        return plan_for_traffic(runs, limits, runtime.text_shapes(shape), time, budget=listed, budget_flag=flag,
                                sweep=sweep, warmup=warmup, most=most, between=between)  # fmt: skip

    def warmed(p: TextBucketPlan) -> int:
        return warmed_graphs(runtime, shape, p)

    if budget is not None:
        return within_warmed(planned, budget, warmed, budget_flag)
    chosen = planned(None)
    if warmed(chosen.plan) <= chosen.plan.graphs:  # the runtime warms what is listed: the default rule counted it
        return chosen
    own = runtime.text_shapes(shape)
    # the default's steps are no option the user typed: a refusal at one names the default budget
    return default_within_warmed(functools.partial(planned, flag=DEFAULT_BUDGET_NAME), chosen,
                                 len(own.prefill) + len(own.decode), warmed, DEFAULT_BUDGET_NAME)  # fmt: skip


#: How a refusal at one of the default rule's budgets names it (a given one names the option).
DEFAULT_BUDGET_NAME = "the default text graph budget"


#: Plans tried at most for a given budget the runtime's expansion passes (the first included): each a few seconds.
MOST_BUDGET_TRIES = 7


def warmed_graphs(runtime: RuntimeModel, shape: EngineShape, p: TextBucketPlan) -> int:
    """The graphs the runtime warms for the planned buckets: more than they list where it expands them (vllm-gaudi
    under speculative decoding adds decode buckets of batch x (1 + tokens) to each: extension/bucketing/common.py
    generate_spec_decode_buckets @ 091bbadd), counted by the runtime's own model."""
    told = runtime.with_text_buckets(p.prompt, p.decode)
    if told is None:
        return len(p.prompt) + len(p.decode)
    shapes = told.text_shapes(shape)
    return len(shapes.prefill) + len(shapes.decode)


def _fit_warmed(
    planned: Callable[[int], BudgetedPlan], budget: int, warmed: Callable[[TextBucketPlan], int], flag: str
) -> tuple[BudgetedPlan, int, int]:
    """(plan, buckets listed, graphs warmed) of the plan whose warmed graphs fit ``budget``: planned at ``budget``
    listed buckets, and where the runtime warms more than it lists, planned again at fewer, the most whose warmed
    graphs fit, searched in at most :data:`MOST_BUDGET_TRIES` plans. Refused (BudgetTooSmall) where the least
    bucket list that keeps every shape warms more than ``budget``."""
    first = planned(budget)
    count = warmed(first.plan)
    if count <= budget:
        return first, first.plan.graphs, count
    best: tuple[BudgetedPlan, int, int] | None = None  # (plan, listed, warmed) of the most warmed that fits
    bad, good, listed = budget, 0, max(2, budget * budget // count)
    for _ in range(MOST_BUDGET_TRIES - 1):
        floor = False
        try:
            chosen = planned(listed)
        except BudgetTooSmall as exc:  # below the least list that keeps every shape: try that one
            floor, listed, chosen = True, exc.least, planned(exc.least)
        count = warmed(chosen.plan)
        if count <= budget:
            good = max(good, listed)
            if best is None or count > best[2]:
                best = (chosen, listed, count)
        else:
            bad = listed
            if floor or listed <= 2:  # no fewer buckets keep every shape
                break
        if bad - good <= 1:
            break
        listed = (good + bad) // 2 if good else max(2, listed * budget // count)
    if best is None:  # even the least list that keeps every shape warms more than the budget
        raise BudgetTooSmall(f"{flag} {budget} is too small to keep every shape within {GROSS_FACTOR}x its need: the "
                             f"runtime warms {count} graphs for the fewest buckets that do ({listed} listed; "
                             f"speculative decoding adds decode buckets to those listed); accepted: at least {count} "
                             "graphs for these limits and traffic", count)  # fmt: skip
    return best


def _counted(chosen: BudgetedPlan, budget: int, count: int, reason: str) -> BudgetedPlan:
    """``chosen`` named with ``budget`` and ``reason``, its worst-shape line counting the ``count`` graphs warmed."""
    worst = None if chosen.worst is None else dataclasses.replace(chosen.worst, graphs=count, budget=budget)
    return dataclasses.replace(chosen, budget=budget, reason=reason, worst=worst)


def within_warmed(
    planned: Callable[[int], BudgetedPlan], budget: int, warmed: Callable[[TextBucketPlan], int], flag: str
) -> BudgetedPlan:
    """The plan for a given ``budget`` of graphs the runtime warms (a given budget is not exceeded): the most listed
    buckets whose warmed graphs fit (:func:`_fit_warmed`)."""
    chosen, listed, count = _fit_warmed(planned, budget, warmed, flag)
    if count <= listed:  # the runtime warms what is listed
        return chosen
    return _counted(chosen, budget, count, f"{budget} graphs (given; the runtime warms {count} for the {listed} "
                    "buckets listed: speculative decoding adds decode buckets to those listed)")  # fmt: skip


def default_within_warmed(planned: Callable[[int], BudgetedPlan], listed_default: BudgetedPlan, total: int,
                          warmed: Callable[[TextBucketPlan], int], flag: str) -> BudgetedPlan:  # fmt: skip
    """The default budget counted as the runtime warms it, where it warms more graphs than the list holds
    (speculative decoding): the default rule's steps (a third of the runtime's own ``total`` graphs, which count its
    expansion too, raised a twenty-fourth at a time to a half), from the one it took over the listed buckets
    (``listed_default``: a smaller one missed its margin already), each held in warmed graphs as a given budget is
    (:func:`_fit_warmed`); the first whose plan pads at most :data:`MARGIN` of the runtime's own at every load, else
    the largest that keeps every shape."""
    start = min(listed_default.budget, default_most(total))
    steps = sorted({start, *(s for s in budget_steps(total) if s >= start)})
    taken: tuple[BudgetedPlan, int, int, int] | None = None  # (plan, budget, listed, warmed)
    refused: BudgetTooSmall | None = None
    for step in steps:
        try:
            chosen, listed, count = _fit_warmed(planned, step, warmed, flag)
        except BudgetTooSmall as exc:  # the least list that keeps every shape warms more: a larger step may hold it
            refused = exc
            continue
        taken = (chosen, step, listed, count)
        if not any(v.beyond(MARGIN) for v in chosen.loads):
            break
    if taken is None:
        assert refused is not None
        raise BudgetTooSmall(f"no default text graph budget up to a half of the runtime's own {total} graphs, counted "
                             f"as it warms them, keeps every shape: {refused}", refused.least)  # fmt: skip
    chosen, step, listed, count = taken
    missed = [v.load for v in chosen.loads if v.beyond(MARGIN)]
    third, half = budget_for(total), budget_for(total, MAX_BUDGET_SHARE)
    share = ("a third" if step == third else "a half, the most the default takes" if step == half else
             f"{step}, the most the default takes" if step == default_most(total) else
             "below a third, as the default rule took it" if step < third else "raised from a third")  # fmt: skip
    how = (f"does not reach {MARGIN:g} of the runtime's own padded time at {', '.join(missed)}" if missed else
           f"every load pads at most {MARGIN:g} of the runtime's own padded time")  # fmt: skip
    if missed:
        short = [v.load for v in chosen.loads if v.short]
        how += (f"; still pads longer than the runtime's own at {', '.join(short)}" if short else
                "; no load pads longer than under the runtime's own")  # fmt: skip
    return _counted(chosen, step, count, f"{step} graphs of the runtime's own {total} ({share}), counted as the "
                    f"runtime warms them: {count} for the {listed} buckets listed (speculative decoding adds decode "
                    f"buckets to those listed): {how}")  # fmt: skip


def most_graphs(i: PlanInputs, shape: EngineShape) -> tuple[int, str]:
    """The most text graphs a given budget may ask for, and whose count it is: what the largest built-in strategy of
    the release planned for (vllm-gaudi's exp and lin, pad from v0.20.0rc0) warms for these limits, so that a user of
    any strategy can ask for the best plan at their own warm-up. A cap at all because planning work grows with the
    budget; the runtime's own strategies are the bound a user can already reach by configuring it, so no budget a
    runtime user could warm is refused."""
    own = i.runtime.text_shapes(shape)
    counts = [(len(own.prefill) + len(own.decode), configured_label(i.runtime, shape))]
    release: str | None = getattr(i.runtime, "version", None)  # a named release: only the strategies it ships
    for m in registry.strategies(i.runtime_name, i.runtime_env, release):
        try:  # a strategy the runtime would refuse at these limits (lin's min above its max) warms nothing to reach
            t = m.text_shapes(shape)
        except ConfigError:
            continue
        counts.append((len(t.prefill) + len(t.decode), configured_label(m, shape)))
    return max(counts, key=lambda c: c[0])

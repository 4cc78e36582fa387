"""The plan with its text buckets planned from traffic: where the runtime takes a bucket list (vllm-gaudi's bucket
file), the buckets that cover every shape its limits allow and spend the least modelled time padding within a graph
budget (:func:`vllm_hpu_mm.plan.text_buckets.plan_for_traffic`), replayed beside the runtime's own strategy on the
same traffic.

The runtime is read through its model only: ``text_lookup`` (its lookup, for the replay) and ``with_text_buckets``
(the runtime told to warm exactly the planned buckets; None where it cannot be told, or the user gave a file).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from vllm_hpu_mm.buckets.text import TextBucketPlan, TextLimits
from vllm_hpu_mm.buckets.text_budget import BudgetedPlan
from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.plan.inputs import PlanInputs
from vllm_hpu_mm.plan.planner import Plan, plan
from vllm_hpu_mm.plan.text_buckets import plan_for_traffic, text_time
from vllm_hpu_mm.plan.vision_cost import PoolMode
from vllm_hpu_mm.replay.job import (
    Images,
    Schedules,
    TowerImages,
    replay_model,
    schedules,
    timer_for,
    vision_efficiency,
)
from vllm_hpu_mm.replay.report import Report, result_dict, to_dict
from vllm_hpu_mm.replay.run import ReplayResult
from vllm_hpu_mm.replay.scheduler import Arrivals, Limits
from vllm_hpu_mm.runtimes.base import EngineShape, RuntimeModel
from vllm_hpu_mm.traffic.requests import Traffic

__all__ = ["PLANNED_LABEL", "TextChoice", "choose_text", "configured_label", "engine_shape", "replay_report"]


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
    #: The runtime's backend (what the warm-up estimate depends on).
    backend: str
    #: Why the budget is what it is (the default rule's step, or yours).
    budget_reason: str = ""

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
        s = self.shape
        return Report(results, self.traffic, self.runs.load, self.runs.requests,
                      {"max_model_len": s.max_model_len, "max_num_seqs": s.max_num_seqs,
                       "max_num_batched_tokens": s.max_num_batched_tokens, "block_size": s.block_size,
                       "num_kv_blocks": s.num_kv_blocks}, self.backend, None, None,
                      False)  # fmt: skip


PLANNED_LABEL = "planned from traffic"


def configured_label(runtime: RuntimeModel, shape: EngineShape) -> str:
    """The configured runtime's buckets in a few words: "vllm-gaudi's exp bucketing"."""
    return runtime.text_shapes(shape).source.split(" (")[0]


def engine_shape(i: PlanInputs, kv_blocks: int) -> EngineShape:
    return EngineShape(max_model_len=i.max_model_len, max_num_seqs=i.max_num_seqs,
                       max_num_batched_tokens=i.max_num_batched_tokens, block_size=i.block_size,
                       num_kv_blocks=max(kv_blocks, 1))  # fmt: skip


def check_budget(budget: int | None, flag: str) -> None:
    if budget is not None and budget < 2:
        raise ConfigError(f"{flag} {budget} is invalid; accepted: an integer >= 2 (a prompt and a decode bucket at "
                          "least)")  # fmt: skip


def choose_text(first: Plan, traffic: Traffic, settings: Settings, *, budget: int | None, concurrency: int | None,
                requests: int, budget_flag: str = "--text-graph-budget") -> tuple[Plan, TextChoice | None]:  # fmt: skip
    """The plan with the runtime told to warm the planned buckets, and the before/after replay; the plan unchanged
    (and None) where the runtime has no graphs or no modelled lookup."""
    i = first.inputs
    if i.enforce_eager or i.pool_mode is PoolMode.NONE:
        return first, None
    shape = engine_shape(i, first.kv_blocks)
    lookup = i.runtime.text_lookup(shape)
    if lookup is None:
        return first, None
    check_budget(budget, budget_flag)
    images = _images(i, first.vision_buckets_captured, settings)
    limits = Limits(i.max_num_seqs, i.max_num_batched_tokens, i.max_model_len, i.block_size, shape.num_kv_blocks)
    runs = schedules(traffic, limits, images, concurrency=concurrency, requests=requests)
    label = configured_label(i.runtime, shape)
    before = replay_model(i.runtime, shape, runs, label)
    backend = i.runtime.traits.backend
    chosen = _plan(i, shape, runs, lookup.decode_block_cap, lookup.max_prefill_batch, budget, i.runtime, budget_flag)
    runtime = i.runtime.with_text_buckets(chosen.plan.prompt, chosen.plan.decode)
    if runtime is None:
        return first, TextChoice(traffic.source, runs, shape, before, None, None, chosen.budget, False,
                                 "the runtime is not given planned buckets (your own bucket file, bucketing off or "
                                 "merged prefill)", backend)  # fmt: skip
    second = plan(dataclasses.replace(i, runtime=runtime))
    after = replay_model(runtime, shape, runs, PLANNED_LABEL)
    return second, TextChoice(traffic.source, runs, shape, before, after, chosen.plan, chosen.budget, True,
                              f"planned over {traffic.source}", backend, chosen.reason)  # fmt: skip


def _images(i: PlanInputs, buckets: tuple[int, ...] | None, settings: Settings) -> Images:
    """How the served processor turns the traffic's images into prompt tokens: ours (Qwen2.5-VL, aligned to the
    buckets) or the family's own."""
    v = i.model.vision
    if not v.present or v.aligned_processor_applies:
        return Images(buckets or None, settings.oversize_policy, settings.align_mode)
    return TowerImages.of(v)


def _plan(i: PlanInputs, shape: EngineShape, runs: Schedules, block_cap: int, prefill_batch: int,
          budget: int | None, runtime: RuntimeModel, budget_flag: str) -> BudgetedPlan:  # fmt: skip
    """The buckets planned over ``runs`` for ``runtime``, priced with the plan's step-time model, by the default
    budget rule unless ``budget`` is given (:func:`~vllm_hpu_mm.plan.text_buckets.plan_for_traffic`)."""
    limits = TextLimits(i.max_num_seqs, i.max_num_batched_tokens, i.max_model_len, i.block_size, block_cap,
                        prefill_batch)  # fmt: skip
    time = text_time(i.model, i.device, block_size=i.block_size, tensor_parallel_size=i.tensor_parallel_size)
    return plan_for_traffic(runs, limits, runtime.text_shapes(shape), time, budget=budget, budget_flag=budget_flag)


def replay_report(first: Plan, traffic: Traffic, settings: Settings, *, own: RuntimeModel,
                  yours: tuple[RuntimeModel, str] | None, plan_buckets: bool, budget: int | None,
                  concurrency: int | None, requests: int, kv_blocks: int | None,
                  budget_flag: str = "--text-graph-budget", arrivals: Arrivals | None = None,
                  strategies: tuple[RuntimeModel, ...] = ()) -> tuple[Report, TextBucketPlan | None]:  # fmt: skip
    """``buckets replay``: the traffic through the runtime's own strategy (``own``), the user's bucket file
    (``yours``: the runtime with it, and its name), the buckets planned from the traffic (unless ``plan_buckets``
    is off) and the runtime's other built-in ``strategies``, side by side, at the plan's limits, in time where the
    device has a time model."""
    check_budget(budget, budget_flag)
    i = first.inputs
    shape = engine_shape(i, kv_blocks if kv_blocks is not None else first.kv_blocks)
    lookup = own.text_lookup(shape)
    if lookup is None:
        raise ConfigError(f"replay models vllm-gaudi's bucket lookup only; the plan's runtime is {own.name.value} "
                          "(name --runtime vllm-gaudi)")  # fmt: skip
    images = _images(i, i.buckets, settings)
    limits = Limits(i.max_num_seqs, i.max_num_batched_tokens, i.max_model_len, i.block_size, shape.num_kv_blocks)
    timer = timer_for(i.model, i.device, block_size=i.block_size, tensor_parallel_size=i.tensor_parallel_size,
                      dtype_size=i.dtype_size, quantization=i.quantization, images=images)  # fmt: skip
    runs = schedules(traffic, limits, images, concurrency=concurrency, requests=requests, arrivals=arrivals,
                     timer=timer)  # fmt: skip
    results = [replay_model(own, shape, runs, configured_label(own, shape), timer)]
    if yours is not None:
        results.append(replay_model(yours[0], shape, runs, yours[1], timer))
    planned = None
    notes = []
    if plan_buckets:
        chosen = _plan(i, shape, runs, lookup.decode_block_cap, lookup.max_prefill_batch, budget, own, budget_flag)
        planned = chosen.plan
        told = own.with_text_buckets(chosen.plan.prompt, chosen.plan.decode)
        if told is not None:
            results.append(replay_model(told, shape, runs, PLANNED_LABEL, timer))
            notes.append(f"planned buckets: budget {chosen.reason}")
    labels = {r.label for r in results}
    for model in strategies:
        label = configured_label(model, shape)
        if label not in labels:
            results.append(replay_model(model, shape, runs, label, timer))
            labels.add(label)
    traits = own.traits
    engine = {"max_model_len": shape.max_model_len, "max_num_seqs": shape.max_num_seqs,
              "max_num_batched_tokens": shape.max_num_batched_tokens, "block_size": shape.block_size,
              "num_kv_blocks": shape.num_kv_blocks}  # fmt: skip
    kv_note = ("KV blocks: given" if kv_blocks is not None else "KV blocks: the plan's estimate (the decode buckets "
               "depend on it; give the log's '# HPU blocks' with --kv-blocks)")  # fmt: skip
    refused: dict[str, int] = {}
    for t in runs.traces:
        for reason, n in t.refusals:
            refused[reason] = refused.get(reason, 0) + n
    time_model = None
    if timer is not None:
        d = timer.step.device
        time_model = (f"roofline of one step on {d.name} ({d.bf16_flops / 1e12:.0f} TFLOPS bf16, "
                      f"{d.bandwidth / 1e12:.2f} TB/s; TP {timer.step.tensor_parallel_size}), schedule drained; "
                      "evidence: vendor throughput tables (benchmarks/results/step_time_check.md); padding shares "
                      "are relative and move little with its efficiencies")  # fmt: skip
    report = Report(tuple(results), traffic.source, runs.load, runs.requests, engine, traits.backend,
                    vision_efficiency(traffic.images(), images), images.buckets,
                    settings.skip_warmup, (kv_note, *notes), tuple(sorted(refused.items())),
                    time_model)  # fmt: skip
    return report, planned

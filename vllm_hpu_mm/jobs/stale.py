"""The ``buckets stale`` job, :func:`check_stale`: has the live traffic moved where the plan's bucket file pads longer
than vllm-gaudi's default ``exp`` strategy?

The traffic is what a running server's ``/metrics`` counted (vLLM's prompt and answer histograms, prefix-cache
counters and running requests, our image counters: :func:`vllm_hpu_mm.buckets.live.traffic_from_metrics`), all of it
or only what came after an earlier page (``since``: the window an alert looks at). It runs under continuous
batching at the plan's limits (``schedules``), through vllm-gaudi's own lookup (modelled) twice, with the bucket
file and with ``exp`` at the same limits, and each forward is priced padded by the step-time model of the planned
device. The verdict compares the two padded busy times; the model's held-out interval says how far the order holds
(:func:`vllm_hpu_mm.models.step_time.verdict_note`). Only those two configurations run: no planning, no other
strategy, no whole latencies, so an alarm run costs a few seconds.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

from vllm_hpu_mm.buckets.admission import admit_traffic
from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.errors import ConfigError, WouldNotStart
from vllm_hpu_mm.jobs.replay import gaudi_device, gaudi_only
from vllm_hpu_mm.jobs.serve import (
    given_blocks_start,
    on_default_device,
    one_block_count,
    plan_inputs,
    with_profile_read,
)
from vllm_hpu_mm.models.step_time import StepTime, verdict_note
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.plan.text_choice import configured_label, images_for
from vllm_hpu_mm.replay.report import totals
from vllm_hpu_mm.replay.schedules import replay_model, schedules, timer_for
from vllm_hpu_mm.replay.timing import TimeResult
from vllm_hpu_mm.runtimes import registry
from vllm_hpu_mm.traffic.metrics import FLAG

__all__ = ["DEFAULT_STALE_REQUESTS", "GAUGES", "StaleArgs", "Staleness", "check_stale", "exposition"]

#: Requests sampled from the live traffic (at an unknown load, per level and at most 4 x the level: schedules()).
#: On tests/data/metrics/drifted.txt at 64 sequences the ratio read 1.1554 at 200, 1.1687 at 600, 2,000 and 6,000
#: (each run under 3 s on the 2-core dev machine, shared/loaded).
DEFAULT_STALE_REQUESTS = 600
#: The strategy the plan is judged against: vllm-gaudi's default.
EXP = "exp"
#: The gauges ``--textfile`` writes (name -> help), the ones docs/metrics.md's alerting rule reads.
GAUGES = {
    "vllm_hpu_mm_stale_plan_ratio": "The live traffic's padded busy time with the plan's bucket file over exp's "
    "(modelled; above 1: the plan pads longer).",
    "vllm_hpu_mm_stale_plan_padded_seconds": "Modelled padded busy seconds of the replayed live traffic, by buckets "
    "(plan, exp).",
    "vllm_hpu_mm_stale_plan_tolerance": "How far above 1 the ratio may go before the plan is called stale.",
    "vllm_hpu_mm_stale_plan_interval": "The step-time model's held-out interval (half-width, a share; +Inf unbounded).",
    "vllm_hpu_mm_stale_plan_requests": "Requests of the live traffic replayed for the verdict.",
    "vllm_hpu_mm_stale_plan_last_run_timestamp_seconds": "When the check last ran (Unix time).",
}


@dataclasses.dataclass(frozen=True)
class StaleArgs:
    """What ``buckets stale`` reads besides the sizing flags (the plan's own: the limits it was planned at)."""

    #: A running server's /metrics URL or a saved exposition.
    from_metrics: str
    #: The plan's bucket file (``--bucket-file``); None: the one the runtime's own variable names.
    bucket_file: str | None = None
    #: An earlier page of the same server: only the requests counted after it are judged.
    since: str | None = None
    kv_blocks: int | None = None
    requests: int = DEFAULT_STALE_REQUESTS
    #: How much longer (a share of exp's padded time) the plan may pad before it is called stale.
    tolerance: float = 0.0
    #: The model_name label to read from a page holding several models' series (``--model-name``).
    model_name: str | None = None


@dataclasses.dataclass(frozen=True)
class Staleness:
    """The live traffic priced padded with the plan's buckets and with exp's."""

    plan_label: str
    exp_label: str
    plan: TimeResult
    exp: TimeResult
    #: Shapes the plan's file leaves to compile at run time on this traffic (exp's own, for comparison).
    plan_compiles: int
    exp_compiles: int
    #: The step model's held-out interval (half-width, a share; inf where a phase has no public point).
    interval: float
    #: The verdict in words, against the interval.
    note: str
    traffic: str
    load: str
    requests: int
    device: str
    tolerance: float

    @property
    def ratio(self) -> float:
        """The plan's padded busy time over exp's on the live traffic (above 1: the plan pads longer)."""
        return self.plan.padded_s / self.exp.padded_s if self.exp.padded_s else 1.0

    @property
    def stale(self) -> bool:
        return self.ratio > 1.0 + self.tolerance


def _interval(step: StepTime) -> float:
    """The wider of the decode and prefill held-out half-widths (inf where either has no public point)."""
    halves = []
    for phase in ("decode", "prefill"):
        low, high, n, _ = step.interval(phase)
        halves.append(max(1.0 - low, high - 1.0) if n else math.inf)
    return max(halves)


#: Another backend's runtime reads no bucket file (registry.model_for refuses one for it): no plan's file to go
#: stale there; its latencies at real shapes are fleet plan's.
_ELSEWHERE = "{runtime} reads no bucket file to go stale; its latencies at real shapes: fleet plan"


def _gaudi_only(sizing: SizingArgs, runtime: str) -> ConfigError:
    """The alarm runs vllm-gaudi's lookup with the plan's bucket file (:func:`~vllm_hpu_mm.jobs.replay.gaudi_only`)."""
    return gaudi_only(sizing, runtime, "the alarm", _ELSEWHERE)


def check_stale(sizing: SizingArgs, args: StaleArgs, settings: Settings, runtime_env: dict[str, str]) -> Staleness:
    """The live traffic of ``args.from_metrics`` replayed with the plan's bucket file and with exp at the plan's
    limits (``sizing``: the flags the plan was made with), on the runtime's reference device unless one is named."""
    # no upper bound: a plan may pad any multiple of exp's time, so any finite share can be what a user tolerates
    if not (math.isfinite(args.tolerance) and args.tolerance >= 0):
        raise ConfigError(f"--tolerance {args.tolerance} is invalid; accepted: a finite share of 0 or more (0.05: 5%)")
    if sizing.runtime is None:
        sizing = dataclasses.replace(sizing, runtime=registry.DEFAULT_RUNTIME["hpu"].value)
    if (other := registry.named_other(sizing.runtime, registry.DEFAULT_RUNTIME["hpu"])) is not None:
        raise _gaudi_only(sizing, other)  # before resolving it: resolve's refusals list every planner's runtimes
    if (off := gaudi_device(sizing, "the alarm", _ELSEWHERE)) is not None:
        raise off
    sizing = with_profile_read(on_default_device(sizing), settings)  # read once, before any work
    own_env, env_file = registry.split_bucket_file(runtime_env)
    file_path = args.bucket_file or env_file
    if not file_path:
        raise ConfigError("no bucket file to judge; accepted: the plan's file with --bucket-file (or the runtime's "
                          "VLLM_BUCKETING_FROM_FILE)")  # fmt: skip
    one_block_count(args.kv_blocks, sizing)
    inputs, _ = plan_inputs(sizing, settings, own_env)
    shape = inputs.engine(args.kv_blocks if args.kv_blocks is not None else plan(inputs).kv_blocks)
    if args.kv_blocks is not None and (
        why := given_blocks_start(args.kv_blocks, shape, null_block=inputs.runtime.traits.null_block)
    ):
        raise WouldNotStart(why)  # as buckets replay says it (exit 1 there and here)
    if inputs.runtime.text_lookup(shape) is None:  # auto found another runtime installed
        raise _gaudi_only(sizing, inputs.runtime.name.value)
    spelled = {"bucket_file": "--bucket-file"} if args.bucket_file else {}
    yours = registry.same_runtime(inputs.runtime, own_env, spelled=spelled, bucket_file=file_path)
    release: str | None = getattr(inputs.runtime, "version", None)
    exp = next((m for m in registry.strategies(inputs.runtime_name, own_env, release)
                if f"'s {EXP} bucketing" in configured_label(m, shape)), None)  # fmt: skip
    if exp is None:
        raise ConfigError(f"the runtime {inputs.runtime.name.value} has no {EXP} strategy to judge the plan against; "
                          f"accepted: a --runtime release with {EXP} bucketing (vllm-gaudi main has it)")  # fmt: skip
    images = images_for(inputs, inputs.buckets, settings)
    timer = timer_for(inputs.model, inputs.device, block_size=inputs.block_size,
                      tensor_parallel_size=inputs.tensor_parallel_size, dtype_size=inputs.dtype_size,
                      quantization=inputs.quantization, images=images)  # fmt: skip
    if timer is None or not isinstance(timer.step, StepTime):
        raise ConfigError(f"{sizing.flag('device')} {inputs.device} has no step-time model, and the alarm compares "
                          "padded time; accepted: the planned accelerator (gaudi2, gaudi3, h100, h200)")  # fmt: skip
    from vllm_hpu_mm.buckets.live import traffic_from_metrics

    traffic = traffic_from_metrics(args.from_metrics, since=args.since, model_name=args.model_name)
    if traffic.text is None:
        raise ConfigError(f"{FLAG} {args.from_metrics}: no vllm:request_prompt_tokens histogram with requests in "
                          "it; expected vLLM's own /metrics page (V1 engine, 0.32 or later) after some "
                          "requests")  # fmt: skip
    traffic = admit_traffic(traffic, max_image_pixels=settings.served_max_image_pixels,
                            max_aspect_ratio=settings.max_aspect_ratio,
                            pixels_var=settings.max_image_pixels_var)  # fmt: skip
    runs = schedules(traffic, shape, images, concurrency=sizing.concurrency, requests=args.requests, timer=timer)
    plan_label = f"your {Path(file_path).name}"
    exp_label = configured_label(exp, shape)
    mine, theirs = (replay_model(m, shape, runs, label, timer) for m, label in ((yours, plan_label), (exp, exp_label)))
    mine_t, theirs_t = totals(mine), totals(theirs)
    if mine_t is None or theirs_t is None or runs.ran == 0:
        raise ConfigError(f"{FLAG} {args.from_metrics}: no request of its traffic runs at the plan's limits "
                          f"({runs.load}); accepted: the flags the plan was made with")  # fmt: skip
    return Staleness(
        plan_label, exp_label, mine_t, theirs_t, len(mine.compiles), len(theirs.compiles), _interval(timer.step),
        verdict_note(timer.step, plan_label, mine_t.padded_s, exp_label, theirs_t.padded_s), traffic.source,
        runs.load, runs.ran, timer.step.device.name, args.tolerance,
    )  # fmt: skip


def exposition(s: Staleness, registry: Any) -> None:
    """Register the verdict's :data:`GAUGES` in a prometheus_client ``CollectorRegistry`` (labelled by the bucket
    file's name and the device that priced it)."""
    from prometheus_client import Gauge

    names = ["bucket_file", "device"]
    values = {"bucket_file": s.plan_label.removeprefix("your "), "device": s.device}
    g = {name: Gauge(name, text, [*names, "buckets"] if name.endswith("padded_seconds") else names,
                     registry=registry) for name, text in GAUGES.items()}  # fmt: skip
    g["vllm_hpu_mm_stale_plan_ratio"].labels(**values).set(s.ratio)
    g["vllm_hpu_mm_stale_plan_padded_seconds"].labels(**values, buckets="plan").set(s.plan.padded_s)
    g["vllm_hpu_mm_stale_plan_padded_seconds"].labels(**values, buckets=EXP).set(s.exp.padded_s)
    g["vllm_hpu_mm_stale_plan_tolerance"].labels(**values).set(s.tolerance)
    g["vllm_hpu_mm_stale_plan_interval"].labels(**values).set(s.interval)
    g["vllm_hpu_mm_stale_plan_requests"].labels(**values).set(s.requests)
    g["vllm_hpu_mm_stale_plan_last_run_timestamp_seconds"].labels(**values).set(time.time())

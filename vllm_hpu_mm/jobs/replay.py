"""The ``buckets replay`` job as one library function, :func:`replay_traffic`: the traffic the server serves, run
through the runtime's own bucket lookup (vllm-gaudi's, modelled) under continuous batching for its own strategy,
the user's bucket file, the buckets planned from the traffic and the runtime's other built-in strategies (exp, lin,
pad), side by side, at the plan's limits, in time where the device has a time model (each schedule drained)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from vllm_hpu_mm.buckets.admission import admit_traffic
from vllm_hpu_mm.buckets.text import TextBucketPlan
from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.jobs.serve import on_default_device
from vllm_hpu_mm.models.step_time import StepTime
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.bucket_choice import read_traffic
from vllm_hpu_mm.plan.inputs import build
from vllm_hpu_mm.plan.pipeline import checked_by_runtime, fit_max_model_len
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.plan.text_choice import (
    PLANNED_LABEL,
    check_budget,
    configured_label,
    engine_shape,
    images_for,
    plan_for,
    replay_limits,
)
from vllm_hpu_mm.replay.job import Schedules, replay_model, schedules, timer_for, vision_efficiency
from vllm_hpu_mm.replay.report import Report
from vllm_hpu_mm.replay.scheduler import Arrivals
from vllm_hpu_mm.replay.timing import Timer
from vllm_hpu_mm.replay.whole import ROOFLINE_HELDOUT_ERROR, strategy_latency
from vllm_hpu_mm.runtimes import registry
from vllm_hpu_mm.runtimes.base import EngineShape, RuntimeModel
from vllm_hpu_mm.runtimes.vllm_gaudi import BUCKET_FILE_VAR
from vllm_hpu_mm.traffic.requests import Traffic

__all__ = ["ReplayArgs", "Replayed", "replay_traffic"]


@dataclasses.dataclass(frozen=True)
class ReplayArgs:
    """What ``buckets replay`` reads besides the sizing flags."""

    #: A bucket file to replay (``--bucket-file``); None: the environment's VLLM_BUCKETING_FROM_FILE, if set.
    bucket_file: str | None = None
    #: A running server's /metrics (or a saved exposition) whose traffic joins ``--sizes``.
    from_metrics: str | None = None
    kv_blocks: int | None = None
    requests: int = 2000
    plan_buckets: bool = True
    #: Arrivals in time (a request rate or a profile of clients), instead of the sizing flags' concurrency.
    arrivals: Arrivals | None = None
    #: Replay vllm-gaudi's other built-in strategies beside the configured one.
    strategies: bool = True
    #: Whole latencies (TTFT, TPOT, ITL, E2EL, throughput) per configuration, each on its own schedule.
    latency: bool = True


@dataclasses.dataclass(frozen=True)
class Replayed:
    report: Report
    planned: TextBucketPlan | None
    #: The user's bucket file was replayed (it is the report's second result).
    has_yours: bool
    #: What the replay ran on, for a caller that re-prices it (the schedules, the engine shape, the configured
    #: runtime and the time model; None without one).
    runs: Schedules | None = None
    shape: EngineShape | None = None
    own: RuntimeModel | None = None
    timer: Timer | None = None

    @property
    def yours_compiles(self) -> bool:
        """The user's bucket file leaves shapes to compile at run time: those no bucket covers, or under
        VLLM_SKIP_WARMUP=true every shape that runs (vllm-gaudi's warmup_model returns before warming any, @091bbadd
        hpu_model_runner.py)."""
        if not self.has_yours:
            return False
        yours = self.report.results[1]
        return bool(yours.compiles) or (self.report.skip_warmup and sum(yours.shapes_run) > 0)

    @property
    def refused(self) -> int:
        """Requests of the traffic the engine would refuse (never run, in no figure)."""
        return sum(n for _, n in self.report.refused)


def _time_model(timer: Timer | None) -> str | None:
    if timer is None or not isinstance(timer.step, StepTime):
        return None
    d = timer.step.device
    return (f"roofline of one step on {d.name} ({d.bf16_flops / 1e12:.0f} TFLOPS bf16, {d.bandwidth / 1e12:.2f} "
            f"TB/s; TP {timer.step.tensor_parallel_size}), every schedule drained; evidence: vendor throughput "
            "tables (benchmarks/results/step_time_check.md); a verdict between two columns moves with its "
            "calibration only where they are within about 1% (benchmarks/results/replay_strategies.md)")  # fmt: skip


def _traffic(sizing: SizingArgs, args: ReplayArgs, settings: Settings) -> Traffic:
    """The traffic to replay: only the requests the server serves (a refused image fails its request)."""
    parts = []
    if sizing.sizes is not None:
        parts.append(read_traffic(sizing.sizes, flag=sizing.flag("sizes")))
    if args.from_metrics:
        from vllm_hpu_mm.buckets.live import traffic_from_metrics

        parts.append(traffic_from_metrics(args.from_metrics))
    traffic = Traffic.combine(parts) if parts else read_traffic(None, flag=sizing.flag("sizes"))
    return admit_traffic(traffic, max_image_pixels=settings.max_image_pixels,
                         max_aspect_ratio=settings.max_aspect_ratio)  # fmt: skip


def replay_traffic(sizing: SizingArgs, args: ReplayArgs, settings: Settings, runtime_env: dict[str, str]) -> Replayed:
    """The replay of ``buckets replay``: the runtime defaults to today's Gaudi runtime (the one whose lookup is
    modelled) on its reference device."""
    if sizing.runtime is None:
        sizing = dataclasses.replace(sizing, runtime=registry.DEFAULT_RUNTIME["hpu"].value)
    sizing = on_default_device(sizing)
    file_path = args.bucket_file or runtime_env.get(BUCKET_FILE_VAR)
    own_env = {k: v for k, v in runtime_env.items() if k != BUCKET_FILE_VAR}
    inputs = checked_by_runtime(fit_max_model_len(build(sizing, settings, own_env)), sizing.flag)
    first = plan(inputs)
    budget = sizing.text_graph_budget
    check_budget(budget, sizing.flag("text_graph_budget"))
    own = inputs.runtime
    shape = engine_shape(inputs, args.kv_blocks if args.kv_blocks is not None else first.kv_blocks)
    lookup = own.text_lookup(shape)
    if lookup is None:
        raise ConfigError(f"replay models vllm-gaudi's bucket lookup only; the plan's runtime is {own.name.value} "
                          f"(name {sizing.flag('runtime')} vllm-gaudi)")  # fmt: skip
    yours = None
    if file_path:
        spelled = {BUCKET_FILE_VAR: "--bucket-file"} if args.bucket_file else {}
        yours = registry.same_runtime(inputs.runtime, {**own_env, BUCKET_FILE_VAR: file_path}, spelled=spelled)
    traffic = _traffic(sizing, args, settings)
    images = images_for(inputs, inputs.buckets, settings)
    limits = replay_limits(inputs, shape)
    if args.arrivals is not None and sizing.concurrency is not None:
        raise ConfigError(f"{sizing.flag('concurrency')} and a request rate or load profile describe the same load; "
                          "accepted: one of them")  # fmt: skip
    timer = timer_for(inputs.model, inputs.device, block_size=inputs.block_size,
                      tensor_parallel_size=inputs.tensor_parallel_size, dtype_size=inputs.dtype_size,
                      quantization=inputs.quantization, images=images)  # fmt: skip
    runs = schedules(traffic, limits, images, concurrency=sizing.concurrency, requests=args.requests,
                     arrivals=args.arrivals, timer=timer)  # fmt: skip
    results = [replay_model(own, shape, runs, configured_label(own, shape), timer)]
    configs = [own]  # the runtime model of each result, for its whole latencies
    notes: list[str] = []
    if yours is not None:
        results.append(replay_model(yours, shape, runs, f"your {Path(file_path or '').name}", timer))
        configs.append(yours)
        notes += yours.text_shapes(shape).notes  # its buckets vllm-gaudi drops without a word
    planned = None
    if args.plan_buckets:
        # a known load or arrivals: every load level is planned for (lightly) and judged as well
        sweep = None if runs.balanced else schedules(traffic, limits, images, concurrency=None, requests=args.requests)
        chosen = plan_for(inputs, shape, runs, lookup.decode_block_cap, lookup.max_prefill_batch, budget, own,
                          sizing.flag("text_graph_budget"), sweep)  # fmt: skip
        planned = chosen.plan
        told = own.with_text_buckets(planned.prompt, planned.decode)
        if told is not None:
            results.append(replay_model(told, shape, runs, PLANNED_LABEL, timer))
            configs.append(told)
            notes.append(f"planned buckets: budget {chosen.reason}")
    labels = {r.label for r in results}
    for model in registry.strategies(inputs.runtime_name, own_env) if args.strategies else ():
        label = configured_label(model, shape)
        if label not in labels:
            results.append(replay_model(model, shape, runs, label, timer))
            configs.append(model)
            labels.add(label)
    if timer is not None and args.latency:
        evidence = (f"a public-data estimate (the roofline above), ±{ROOFLINE_HELDOUT_ERROR:.0%}: its held-out "
                    "median error on vendor tables")  # fmt: skip
        results = [dataclasses.replace(r, latency=strategy_latency(m, shape, timer, traffic, limits, images,
                   concurrency=sizing.concurrency, requests=args.requests, arrivals=args.arrivals, evidence=evidence))
                   for r, m in zip(results, configs, strict=True)]  # fmt: skip
    refused: dict[str, int] = {}
    for t in runs.traces:
        for reason, n in t.refusals:
            refused[reason] = refused.get(reason, 0) + n
    engine = {"max_model_len": shape.max_model_len, "max_num_seqs": shape.max_num_seqs,
              "max_num_batched_tokens": shape.max_num_batched_tokens, "block_size": shape.block_size,
              "num_kv_blocks": shape.num_kv_blocks}  # fmt: skip
    kv_note = ("KV blocks: given" if args.kv_blocks is not None else "KV blocks: the plan's estimate (the decode "
               "buckets depend on it; give the log's '# HPU blocks' with --kv-blocks)")  # fmt: skip
    report = Report(tuple(results), traffic.source, runs.load, runs.requests, engine, own.traits,
                    vision_efficiency(traffic.images(), images), images.buckets,
                    settings.skip_warmup, (kv_note, *notes), tuple(sorted(refused.items())),
                    _time_model(timer))  # fmt: skip
    return Replayed(report, planned, yours is not None, runs, shape, own, timer)

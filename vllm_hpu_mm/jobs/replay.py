"""The ``buckets replay`` job as one library function, :func:`replay_traffic`: the traffic the server serves, run
through the runtime's own bucket lookup (vllm-gaudi's, modelled) under continuous batching for its own strategy,
the user's bucket file, the buckets planned from the traffic and the runtime's other built-in strategies (exp, lin,
pad), side by side, at the plan's limits, in time where the device has a time model (each schedule drained)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
from collections.abc import Iterator
from pathlib import Path

from vllm_hpu_mm.buckets.text import TextBucketPlan
from vllm_hpu_mm.buckets.text_worst import WorstCase
from vllm_hpu_mm.buckets.turns import Ahead, on_two
from vllm_hpu_mm.engine import EngineShape, prefix_caching_off, prompt_fits_model_len
from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.errors import ConfigError, WouldNotStart
from vllm_hpu_mm.jobs.buckets import BUCKETS_VAR
from vllm_hpu_mm.jobs.serve import (
    choose_vision,
    given_blocks_start,
    on_default_device,
    one_block_count,
    plan_inputs,
    profile_of,
    with_profile_read,
)
from vllm_hpu_mm.models import devices
from vllm_hpu_mm.models.step_fit import FittedStep
from vllm_hpu_mm.models.step_time import StepTime
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.bucket_choice import BucketChoice, read_traffic
from vllm_hpu_mm.plan.pipeline import memory_evidence
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.plan.text_buckets import loads_at
from vllm_hpu_mm.plan.text_choice import (
    PLANNED_LABEL,
    configured_label,
    images_for,
    plan_for,
)
from vllm_hpu_mm.replay.report import Report
from vllm_hpu_mm.replay.run import ReplayResult, prepare
from vllm_hpu_mm.replay.scheduler import (
    MAX_CLIENTS,
    MAX_PROFILE_SECONDS,
    MAX_PROFILE_SEGMENTS,
    MAX_RATE,
    MIN_RATE,
    Arrivals,
)
from vllm_hpu_mm.replay.schedules import (
    DEFAULT_REQUESTS,
    MAX_REQUESTS,
    MIN_LEVEL_REQUESTS,
    Schedules,
    load_sweep,
    replay_model,
    schedules,
    timer_for,
    vision_efficiency,
)
from vllm_hpu_mm.replay.timing import Timer
from vllm_hpu_mm.replay.whole import strategy_latency
from vllm_hpu_mm.runtimes import registry
from vllm_hpu_mm.runtimes.base import Runtime, RuntimeModel
from vllm_hpu_mm.traffic.requests import Traffic
from vllm_hpu_mm.values import Backend

#: The bounds and defaults the command declares are the replay's own (its loops' caps), named here for the CLI.
__all__ = ["DEFAULT_REQUESTS", "MAX_CLIENTS", "MAX_PROFILE_SECONDS", "MAX_PROFILE_SEGMENTS", "MAX_RATE", "MAX_REQUESTS",
           "MIN_LEVEL_REQUESTS", "MIN_RATE", "Arrivals", "ReplayArgs", "Replayed", "gaudi_device", "gaudi_only",
           "offered_traffic", "replay_traffic"]  # fmt: skip


@dataclasses.dataclass(frozen=True)
class ReplayArgs:
    """What ``buckets replay`` reads besides the sizing flags."""

    #: A bucket file to replay (``--bucket-file``); None: the one the runtime's own variable names, if set.
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
    #: The model_name label to read from a page holding several models' series (``--model-name``).
    model_name: str | None = None


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
    #: The line the replay stops on: the plan's refusal (:attr:`~vllm_hpu_mm.plan.planner.Plan.refusal`, worded as
    #: memory plan and serve word it: a start-up refusal or a memory shortfall), or why the server would not start
    #: with --kv-blocks or with the bucket file; "" when the plan fits, or when --kv-blocks and the file describe a
    #: server that did.
    refusal: str = ""

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
    if timer is not None and isinstance(timer.step, FittedStep):
        return (f"calibrated on your server (the profile's step time): {timer.step.describe()}; every step at the "
                "shapes each configuration runs, every schedule drained")  # fmt: skip
    if timer is None or not isinstance(timer.step, StepTime):
        return None
    d = timer.step.device
    return (f"roofline of one step on {d.name} ({d.bf16_flops / 1e12:.0f} TFLOPS bf16, {d.bandwidth / 1e12:.2f} "
            f"TB/s; TP {timer.step.tensor_parallel_size}), every schedule drained; evidence: vendor throughput "
            "tables (benchmarks/fits/results/step_time_fit.md); a verdict between two columns moves with its "
            "calibration only where they are within about 1% "
            "(benchmarks/planner/results/replay_strategies.md)")  # fmt: skip


def offered_traffic(sizing: SizingArgs, from_metrics: str | None, model_name: str | None = None) -> Traffic:
    """The traffic as sent (``--sizes``, a server's /metrics, else the embedded default), the requests the server
    refuses included: the replay counts them as refused (:meth:`~vllm_hpu_mm.replay.schedules.Images.refusal`)."""
    parts = []
    if sizing.sizes is not None:
        parts.append(read_traffic(sizing.sizes, flag=sizing.flag("sizes")))
    if from_metrics:
        from vllm_hpu_mm.buckets.live import traffic_from_metrics

        parts.append(traffic_from_metrics(from_metrics, model_name=model_name))
    return Traffic.combine(parts) if parts else read_traffic(None, flag=sizing.flag("sizes"))


def _listed_by_user(sizing: SizingArgs, runtime_env: dict[str, str]) -> str:
    """Where the user gave the vision bucket list (``--buckets``, else VLLM_MULTIMODAL_BUCKETS); "" for none."""
    if sizing.buckets is not None:
        return sizing.flag("buckets")
    return BUCKETS_VAR if BUCKETS_VAR in runtime_env else ""


def _vision_note(yours_listed: str, choice: BucketChoice | None, sizing: SizingArgs) -> str:
    """Which vision list the replay used, and why."""
    if yours_listed:
        return f"vision buckets: yours ({yours_listed}), replayed as given"
    how = "" if choice is None else f" ({'replaced' if choice.replaced else 'kept'}: {choice.reason})"
    return (f"vision buckets: the plan's{how}, as memory plan and serve --dry-run hand them to the runtime; "
            f"{sizing.flag('buckets')} or {BUCKETS_VAR} replays a list of your own")  # fmt: skip


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while the replay runs, on again after (it then collects what is left). The replay
    builds millions of small objects that live until it ends (events, requests, spans, prices): each pass of the
    collector walks them all, a fifth of the CPU at the documented maxima (benchmarks/performance/results/
    replay_bounds.md), and frees none of them. What the paused collector leaves uncollected meanwhile is what the job
    drops in cycles (the planner's), the same whatever the requests: the peak memory is in the same results."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def replay_traffic(sizing: SizingArgs, args: ReplayArgs, settings: Settings, runtime_env: dict[str, str]) -> Replayed:
    """The replay of ``buckets replay``: the runtime defaults to today's Gaudi runtime (the one whose lookup is
    modelled) on its reference device."""
    with _collector_paused():
        return _replay_traffic(sizing, args, settings, runtime_env)


#: The one runtime whose bucket lookup the replay models: the HPU's own.
_GAUDI_BACKEND: Backend = "hpu"
_GAUDI = registry.DEFAULT_RUNTIME[_GAUDI_BACKEND]


def gaudi_only(sizing: SizingArgs, runtime: str, subject: str, instead: str) -> ConfigError:
    """``subject`` (the replay, buckets stale's alarm) runs vllm-gaudi's lookup: another runtime, named or installed,
    is refused naming what the command takes, on a Gaudi device, and ``instead`` (what covers that runtime,
    ``{runtime}`` in it replaced by its name)."""
    flag = sizing.flag("runtime")
    named = f"{flag}={sizing.runtime!r}: " if registry.named_other(sizing.runtime, _GAUDI) == runtime else ""
    what = f"the plan's runtime is {runtime}" if _is_runtime(runtime) else f"{runtime} is not a runtime"
    elsewhere = f"; {instead.format(runtime=runtime)}" if _is_runtime(runtime) else ""
    return ConfigError(f"{named}{subject} models vllm-gaudi's bucket lookup only; {what}; accepted: {flag} vllm-gaudi "
                       f"or vllm-gaudi==X (a release) on a Gaudi {sizing.flag('device')} (gaudi2, gaudi3)"
                       f"{elsewhere}")  # fmt: skip


def gaudi_device(sizing: SizingArgs, subject: str, instead: str) -> ConfigError | None:
    """A device of another backend (h100, h200, cpu; ``auto`` reading one here) for ``subject``, which runs
    vllm-gaudi's lookup alone: refused saying so, which runtime serves that device and ``instead`` (what covers that
    runtime, ``{runtime}`` in it replaced by its name). Checked before :func:`registry.resolve`, whose refusal of a
    runtime serving another backend offers "another runtime", which this command then refuses (r8replay 14)."""
    if sizing.device is None:
        return None
    flag = sizing.flag("device")
    backend = devices.backend_of(sizing.device, source=flag)
    if backend == _GAUDI_BACKEND:
        return None
    serves = registry.DEFAULT_RUNTIME[backend].value
    read = f" (this host's {backend})" if sizing.device.strip().lower() == "auto" else ""
    gaudis = " or ".join(n for n, d in devices.KNOWN_DEVICES.items() if d.backend == _GAUDI_BACKEND)
    return ConfigError(f"{flag}={sizing.device!r}{read}: {subject} models vllm-gaudi's bucket lookup only, on Gaudi; "
                       f"a {backend} device is served by {serves}; accepted: {flag} {gaudis}; "
                       f"{instead.format(runtime=serves)}")  # fmt: skip


def _is_runtime(name: str) -> bool:
    return name in {r.value for r in Runtime}


#: What prices another runtime where the replay does not: fleet plan, at real shapes.
_ELSEWHERE = "{runtime}'s latencies at real shapes: fleet plan"


def _gaudi_only(sizing: SizingArgs, runtime: str) -> ConfigError:
    """The replay is of vllm-gaudi's lookup since it was written (b6daaa59); another runtime's latencies, at real
    shapes, are fleet plan's."""
    return gaudi_only(sizing, runtime, "replay", _ELSEWHERE)


def _two_loads(sizing: SizingArgs, arrivals: Arrivals) -> ConfigError:
    """--concurrency beside --request-rate or --load-profile (the command line's arrivals): both options named."""
    other, form, what = (("--request-rate", "R", "Poisson arrivals") if arrivals.rate is not None
                         else ("--load-profile", "S:C,...", "clients over time"))  # fmt: skip
    flag = sizing.flag("concurrency")
    return ConfigError(f"{flag} and {other} both set the load (clients at once; {what}); accepted: {flag} N or "
                       f"{other} {form}, not both")  # fmt: skip


def _replay_traffic(sizing: SizingArgs, args: ReplayArgs, settings: Settings, runtime_env: dict[str, str]) -> Replayed:
    if sizing.runtime is None:
        sizing = dataclasses.replace(sizing, runtime=registry.DEFAULT_RUNTIME["hpu"].value)
    if (other := registry.named_other(sizing.runtime, _GAUDI)) is not None:
        raise _gaudi_only(sizing, other)  # before resolving it: resolve's refusals list every planner's runtimes
    if (off := gaudi_device(sizing, "replay", _ELSEWHERE)) is not None:
        raise off
    if args.arrivals is not None and sizing.concurrency is not None:
        raise _two_loads(sizing, args.arrivals)  # before any work: nothing is read for a command refused
    sizing = with_profile_read(on_default_device(sizing), settings)  # read once, before any work
    own_env, env_file = registry.split_bucket_file(runtime_env)
    file_path = args.bucket_file or env_file
    one_block_count(args.kv_blocks, sizing)
    inputs, costs = plan_inputs(sizing, settings, own_env)  # the calibrated profile too, as serve's
    # every request sent is scheduled: one whose image the server refuses is counted as refused (never run, in no
    # figure), as the engine's own refusals are; the vision buckets are chosen over the images it serves
    traffic = offered_traffic(sizing, args.from_metrics, args.model_name)
    yours_listed = _listed_by_user(sizing, runtime_env)
    if yours_listed:  # the user's own list is the configuration asked about: replayed as given
        first, choice = plan(inputs), None
    else:  # the list memory plan and serve --dry-run hand the runtime, chosen by their one rule over this traffic
        given = sizing.sizes is not None or bool(args.from_metrics)
        first, choice = choose_vision(inputs, traffic, sizing, settings, given=given)
        inputs = first.inputs
    budget = sizing.text_graph_budget
    own = inputs.runtime
    shape = inputs.engine(args.kv_blocks if args.kv_blocks is not None else first.kv_blocks)
    lookup = own.text_lookup(shape)
    if lookup is None:  # auto found another runtime installed
        raise _gaudi_only(sizing, own.name.value)
    cache_off = prefix_caching_off(lookup) if traffic.has_cached_tokens else None
    if cache_off is not None:  # the server would compute the cached prefixes too
        traffic = traffic.without_cached_tokens()
    yours = None
    if file_path:
        spelled = {"bucket_file": "--bucket-file"} if args.bucket_file else {}
        yours = registry.same_runtime(inputs.runtime, own_env, spelled=spelled, bucket_file=file_path)
    # where no vision graph is captured (eager, no pool) the configured list, which images are still aligned to
    vision = inputs.buckets if yours_listed else (first.vision_buckets_captured or inputs.buckets)
    images = images_for(inputs, vision, settings)
    calibrated = (
        profile_of(sizing, settings).step_time if costs.get("profile") else None
    )  # a step time fitted on the user's server prices every step in its place
    timer = timer_for(inputs.model, inputs.device, block_size=inputs.block_size,
                      tensor_parallel_size=inputs.tensor_parallel_size, dtype_size=inputs.dtype_size,
                      quantization=inputs.quantization, images=images, step=calibrated)  # fmt: skip
    runs = schedules(traffic, shape, images, concurrency=sizing.concurrency, requests=args.requests,
                     arrivals=args.arrivals, timer=timer)  # fmt: skip

    def replayed(model: RuntimeModel, label: str) -> ReplayResult:
        """One configuration replayed on the common schedule, with its whole latencies on its own (pure: the same in
        a child as here)."""
        result = replay_model(model, shape, runs, label, timer)
        if timer is None or not args.latency:
            return result
        latency = strategy_latency(model, shape, timer, traffic, images, concurrency=sizing.concurrency,
                                   requests=args.requests, arrivals=args.arrivals, common=runs,
                                   replayed=result)  # fmt: skip
        return dataclasses.replace(result, latency=latency)

    before = [(own, configured_label(own, shape))]  # each configuration known before planning, in report order
    notes: list[str] = [cache_off] if cache_off is not None else []
    notes += own.text_shapes(shape).resolved  # which of two settings the runtime lets win (the configured column)
    if images.buckets:
        notes.append(_vision_note(yours_listed, choice, sizing))
    if costs["profile"] is not None:
        notes.append(f"memory: {memory_evidence(costs)} (the KV blocks estimate rests on them)")
    file_refusal = ""
    if yours is not None:
        name = Path(file_path or "").name
        try:
            file_shapes = yours.text_shapes(shape)
        except WouldNotStart as exc:  # well-formed, but the server would not start on it (no decode line): as a
            # cache below one sequence, a configuration with no figure of latency (the line below), exit 1
            file_refusal, yours = f"the server would not start: {exc}", None
            notes.append(f"your {name}: not replayed, no request would run on it (the server would not start)")
        else:
            before.append((yours, f"your {name}"))
            notes += (*file_shapes.notes, *file_shapes.resolved)  # buckets its filters drop; the file over a strategy
    labels = {label for _, label in before}  # the planned buckets' label is none of the strategies'
    release: str | None = getattr(own, "version", None)  # a named release shows only the strategies it ships
    for model in registry.strategies(inputs.runtime_name, own_env, release) if args.strategies else ():
        try:
            label = configured_label(model, shape)
        except ConfigError as exc:  # a strategy the runtime refuses at these limits: nothing of it could run
            notes.append(f"a built-in strategy is not replayed, the runtime would refuse it at these limits: {exc}")
            continue
        if label not in labels:
            before.append((model, label))
            labels.add(label)
    tasks = [functools.partial(replayed, model, label) for model, label in before]
    prepare(runs.traces, balanced=runs.balanced)  # once, for the replays here and in the child
    planned = None
    worst: WorstCase | None = None
    mine: list[ReplayResult] = []
    if not args.plan_buckets:
        done = on_two(tasks)
    else:  # every configuration but the planned one replayed on the second core while the buckets are planned
        away = Ahead(tasks)
        try:
            # a known load or arrivals: every load level is planned for (lightly) and judged as well
            sweep = load_sweep(runs, traffic, shape, images, args.requests)
            chosen = plan_for(inputs, shape, runs, lookup.decode_block_cap, lookup.max_prefill_batch, budget, own,
                              sizing.flag("text_graph_budget"), sweep,
                              loads_at(traffic, shape, images, args.requests),
                              prompt_fits_model_len=prompt_fits_model_len(lookup))  # fmt: skip
            planned = chosen.plan
            told = own.with_text_buckets(planned.prompt, planned.decode)
            if told is not None:
                mine.append(replayed(told, PLANNED_LABEL))
                notes.append(f"planned buckets: budget {chosen.reason}")
                worst = chosen.worst
                if worst is not None:
                    notes.append(f"planned buckets: {worst.line()}")
            done = away.results()
        finally:
            away.stop()
    known = 2 if yours is not None else 1  # the report's order: yours, the planned buckets, then the strategies
    results = done[:known] + mine + done[known:]
    kv_note = ("KV blocks: given" if args.kv_blocks is not None else "KV blocks: the plan's estimate (the decode "
               "buckets depend on it; give the log's '# HPU blocks' with --kv-blocks)")  # fmt: skip
    if args.kv_blocks is None:
        refusal = first.refusal or ""
    else:
        refusal = (
            f"the server would not start: {why}"
            if (why := given_blocks_start(args.kv_blocks, shape, null_block=own.traits.null_block))
            else ""
        )
    refusal = refusal or file_refusal  # one line, as memory plan and serve say the first refusal
    report = Report(tuple(results), traffic.source, runs.load, runs.ran, shape.limits(), own.traits,
                    vision_efficiency(runs, images), images.buckets,
                    settings.skip_warmup, (kv_note, *notes), runs.refusals,
                    _time_model(timer), timer.step if timer and isinstance(timer.step, StepTime) else None,
                    sampled=runs.requests, unsent=runs.unsent, images_sampled=runs.images_sampled,
                    worst_case=worst.to_dict() if worst is not None else None, not_started=refusal)  # fmt: skip
    return Replayed(report, planned, yours is not None, runs, shape, own, timer, refusal)

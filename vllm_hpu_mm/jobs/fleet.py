"""The ``fleet plan`` job as one library function, :func:`plan_fleet`: for each candidate replica shape (tensor
parallelism, ``max_num_seqs``, ``max_num_batched_tokens``), that replica planned the way ``serve`` plans it (vision
and text buckets, memory split), its highest Poisson rate within the latency targets on the replay's whole latencies
(:mod:`vllm_hpu_mm.plan.fleet`), the replicas the target rate needs with headroom, the cards and nodes; the choice,
and for it ``serve``'s own plan (:func:`~vllm_hpu_mm.jobs.serve.prepare`: the files and environment each replica
gets) with its deployments (:mod:`vllm_hpu_mm.plan.fleet_deploy`), and over a load profile the replicas of each
period. Pipeline stages are tried where asked, or where no tensor-parallel size within a node holds the model
(:data:`AUTO_PIPELINE`, the first size at which one does). Nothing here writes a file."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping
from pathlib import Path

from vllm_hpu_mm.buckets.text_time import BudgetTooSmall
from vllm_hpu_mm.engine import PrefillChunk
from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.errors import ConfigError, NothingServed
from vllm_hpu_mm.jobs.replay import offered_traffic
from vllm_hpu_mm.jobs.serve import (
    Launch,
    Planned,
    on_default_device,
    plan_and_choose,
    prepare,
    profile_of,
    with_profile_read,
)
from vllm_hpu_mm.models.catalog import DEFAULT_MODEL
from vllm_hpu_mm.models.devices import KNOWN_DEVICES
from vllm_hpu_mm.models.step_fit import FittedStep
from vllm_hpu_mm.models.step_time import has_public_fit
from vllm_hpu_mm.plan.args import VLLM_FLAGS, SizingArgs
from vllm_hpu_mm.plan.fleet import (
    PROBE_REQUESTS,
    PROBE_SEEDS,
    RATE_ITERATIONS,
    Candidate,
    DayPlan,
    Period,
    ReplicaModel,
    ReplicaShape,
    Targets,
    latency_at,
    max_rate,
    over_profile,
    pipelined,
    placement,
    ranked,
    replica_model,
    sized,
)
from vllm_hpu_mm.plan.fleet_deploy import Deployments, deployments
from vllm_hpu_mm.plan.inputs import build
from vllm_hpu_mm.plan.pipeline import memory_evidence
from vllm_hpu_mm.plan.planner import Plan
from vllm_hpu_mm.plan.text_choice import images_for
from vllm_hpu_mm.replay.scheduler import REFUSAL_FIXES, refused_counts
from vllm_hpu_mm.replay.schedules import Images, prompts, served_requests, timer_for
from vllm_hpu_mm.replay.timing import Timer
from vllm_hpu_mm.traffic.requests import Traffic

__all__ = ["AUTO_PIPELINE", "MAX_CANDIDATES", "MAX_CARDS", "MAX_CARDS_PER_NODE", "MAX_PIPELINE", "Fleet", "FleetArgs",
           "plan_fleet"]  # fmt: skip

#: Caps on what the search may be asked: candidate shapes, cards in a cluster, cards in one node.
MAX_CANDIDATES = 32
MAX_CARDS = 65_536
MAX_CARDS_PER_NODE = 64
#: Requests the per-shape bucket planning samples during the search (serve's own plan of the chosen shape samples
#: its default): the search's cost is bounded by it, not by the traffic's size.
SEARCH_PLAN_REQUESTS = 200
#: Pipeline sizes tried, in order, when no tensor-parallel size within a node holds the model (until one does).
AUTO_PIPELINE = (2, 4, 8)
MAX_PIPELINE = 16
#: What is known of pipeline parallelism on Gaudi (read from the mirrors named; re-read before relying on it).
GAUDI_PIPELINE_NOTE = (
    "pipeline parallelism on Gaudi: vllm-gaudi @091bbadd lists pipeline parallel inference and multi-node among its "
    "planned features (docs/features/supported_features.md; its PP page says full support is upcoming, lazy mode "
    "needing PT_HPUGRAPH_DISABLE_TENSOR_CACHE=0); vllm-fork (HabanaAI, README_GAUDI.md) supports it on one or more "
    "nodes. vLLM 0.32 accepts --pipeline-parallel-size for Qwen2.5-VL (SupportsPP)"
)

#: The head address the deployment names when none is given, for the user to replace (docs/fleet.md).
HEAD_PLACEHOLDER = "HEAD_NODE_IP"
#: What the deployment names where the planned runtime has no known image (:attr:`RuntimeTraits.image`).
IMAGE_PLACEHOLDER = "VLLM_IMAGE"


@dataclasses.dataclass(frozen=True)
class FleetArgs:
    """What ``fleet plan`` reads besides the sizing flags (which fix everything the candidates do not vary)."""

    rate: float
    targets: Targets
    headroom: float = 0.2
    cards: int | None = None
    cards_per_node: int = 8
    tensor_parallel_sizes: tuple[int, ...] = (1, 2, 4, 8)
    #: ``--max-num-seqs`` and ``--max-num-batched-tokens`` values tried; no tokens: the runtime's own default for each
    #: shape (:meth:`_Search.default_tokens`).
    seqs_tried: tuple[int, ...] = (64, 256)
    batched_tokens_tried: tuple[int, ...] = ()
    #: Pipeline sizes tried (empty: 1, then :data:`AUTO_PIPELINE` where no TP within a node holds the model).
    pipeline_parallel_sizes: tuple[int, ...] = ()
    #: A load profile over the day (empty: the one ``rate``); ``rate`` is then its peak.
    profile: tuple[Period, ...] = ()
    requests: int = PROBE_REQUESTS
    seeds: int = PROBE_SEEDS
    iterations: int = RATE_ITERATIONS
    plan_requests: int = SEARCH_PLAN_REQUESTS
    from_metrics: str | None = None
    #: The model_name label to read from a page holding several models' series (``--model-name``).
    model_name: str | None = None
    #: Where each replica finds its files (the bucket file): the environment names this folder.
    replica_dir: str = "/etc/vllm-hpu-mm"
    name: str = "vllm"
    #: None: the planned runtime's own image (:attr:`~vllm_hpu_mm.runtimes.base.RuntimeTraits.image`).
    image: str | None = None
    head_address: str = HEAD_PLACEHOLDER

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate) and self.rate > 0):
            raise ConfigError(f"request rate {self.rate:g} is invalid; accepted: above 0 requests/s")
        if not 0 <= self.headroom <= 10:
            raise ConfigError(f"headroom {self.headroom:g} is invalid; accepted: 0 to 10 (0.2 = 20% spare)")
        if not 1 <= self.cards_per_node <= MAX_CARDS_PER_NODE:
            raise ConfigError(f"cards per node {self.cards_per_node} is invalid; accepted: 1 to {MAX_CARDS_PER_NODE}")
        if self.cards is not None and not 1 <= self.cards <= MAX_CARDS:
            raise ConfigError(f"cards {self.cards} is more than a cluster holds; accepted: 1 to {MAX_CARDS:,}")
        if any(not 1 <= p <= MAX_PIPELINE for p in self.pipeline_parallel_sizes):
            raise ConfigError(
                f"pipeline sizes {self.pipeline_parallel_sizes} are invalid; accepted: 1 to {MAX_PIPELINE}"
            )
        if self.profile and abs(max(p.rate for p in self.profile) - self.rate) > 1e-9 * self.rate:
            raise ConfigError(
                "the request rate of a fleet with a load profile is the profile's peak; accepted: "
                "the profile's peak rate, or no rate beside the profile"
            )
        lists = [len(self.tensor_parallel_sizes), len(self.seqs_tried), len(self.batched_tokens_tried) or 1]
        lists += [len(self.pipeline_parallel_sizes)] if self.pipeline_parallel_sizes else []
        count = math.prod(lists)
        if not 1 <= count <= MAX_CANDIDATES:
            names = "--tensor-parallel-sizes x --max-num-seqs x --max-num-batched-tokens" + (
                " x --pipeline-parallel-sizes" if self.pipeline_parallel_sizes else "")  # fmt: skip
            raise ConfigError(f"{count} candidate shapes ({names}: {' x '.join(map(str, lists))}); accepted: 1 to "
                              f"{MAX_CANDIDATES} candidate shapes (fewer values per list)")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Fleet:
    rate: float
    targets: Targets
    headroom: float
    cards: int | None
    cards_per_node: int
    candidates: tuple[Candidate, ...]
    chosen: Candidate | None
    #: When none meets the targets, the best achievable: the fewest cards among the shapes with a capacity, or (none
    #: meets them at any load) the shape closest to them at a light load.
    best: Candidate | None
    #: Serve's own plan of the chosen shape: the files, environment and command each replica gets.
    launch: Launch | None
    deploy: Deployments | None
    #: Which inputs are calibrated on the user's server and which are public-data estimates, by input.
    evidence: dict[str, str]
    #: Why the chosen shape wins, or what would make the targets possible.
    reason: str
    notes: tuple[str, ...]
    seconds: float
    device: str
    model: str
    #: The load profile sized on the chosen shape (None: one rate, or none chosen).
    day: DayPlan | None = None
    profile: tuple[Period, ...] = ()
    #: Where the traffic came from, as the other traffic commands describe it (a folder's unreadable files named).
    traffic: str = ""


def _timer(plan: Plan, images: Images, calibrated: FittedStep | None) -> Timer:
    """The replica's step model: the one fitted on the user's server (the profile's), else the device's roofline."""
    i = plan.inputs
    timer = timer_for(
        i.model,
        i.device,
        block_size=i.block_size,
        tensor_parallel_size=i.tensor_parallel_size,
        dtype_size=i.dtype_size,
        quantization=i.quantization,
        images=images,
        step=calibrated,
    )
    if timer is None:
        raise ConfigError(
            f"device {i.device} has no time model; accepted: gaudi2, gaudi3, h100, h200, or a profile "
            "with a step time fitted on your server (`memory calibrate --metrics URL`, then --profile)"
        )
    return timer


def _below_one_step(targets: Targets, replica: ReplicaModel) -> str | None:
    """A target below what one step of this replica takes: no load meets it."""
    decode = replica.clock.decode(1, 1)
    prefill = replica.clock.prefill((PrefillChunk(1, 0),)) + replica.frontend_s  # the least first token
    for name, value in targets.items():
        floor = decode if name.startswith("tpot") else prefill
        if value < floor:
            return f"--{name.replace('_', '-')} {1000 * value:g} ms is below one step ({1000 * floor:.1f} ms)"
    return None


@dataclasses.dataclass
class _Search:
    sizing: SizingArgs
    args: FleetArgs
    settings: Settings
    runtime_env: Mapping[str, str]
    traffic: Traffic
    notes: list[str]
    below_step: list[str]
    #: The traffic as sent when --from-metrics joins --sizes, which every plan of a shape is made over as serve
    #: would over the same requests (None: serve's own reading of --sizes, the embedded default without it).
    offered: Traffic | None = None
    calibrated: bool = False
    warm_source: str = "none estimated (no graphs warmed)"
    #: The given --text-graph-budget's refusals, by shape: the least graphs each shape's text buckets need.
    budget_refused: dict[ReplicaShape, BudgetTooSmall] = dataclasses.field(default_factory=dict)
    #: The requests of the traffic as sent (before the loader's refusals): the base of each refusal's share.
    sent: int = 0
    #: Shapes whose vision buckets leave the server refusing every request's image (``reject`` above the largest
    #: bucket), with those images; and the note of each other shape counting the requests it refuses ("": none).
    images_refused: dict[ReplicaShape, Images] = dataclasses.field(default_factory=dict)
    images_partly: dict[ReplicaShape, str] = dataclasses.field(default_factory=dict)

    def oversize_notes(self) -> list[str]:
        """The notes counting the requests the shapes' vision buckets refuse under ``reject``: one alone when every
        shape planned refuses the same, else each naming the shapes it holds on."""
        by_note: dict[str, list[str]] = {}
        for shape, note in self.images_partly.items():
            by_note.setdefault(note, []).append(shape.label)
        if list(by_note) == [""] or (len(by_note) == 1 and not self.images_refused):
            return [n for n in by_note if n]
        return [f"{note} (on {', '.join(labels)}: the vision buckets planned for them)"
                for note, labels in by_note.items() if note]  # fmt: skip

    def default_tokens(self, tensor_parallel_size: int, seqs: int, pipeline_parallel_size: int) -> int:
        """The runtime's own ``max_num_batched_tokens`` for a replica of this shape, resolved as ``memory plan``
        resolves it (its ``batch_defaults`` through :func:`~vllm_hpu_mm.plan.derived.scheduler_limits`: e.g. the
        fork's V0 default ``max(max_model_len, 2048)`` without chunked prefill). A shape the runtime refuses on other
        grounds takes the default of one card; its evaluation says why it is refused."""
        base = dataclasses.replace(self.sizing, max_num_seqs=seqs, max_num_batched_tokens=None)
        pp = pipeline_parallel_size if pipeline_parallel_size > 1 else None
        try:
            shaped = dataclasses.replace(base, tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pp)
            return build(shaped, self.settings, self.runtime_env).max_num_batched_tokens
        except ConfigError:
            return build(dataclasses.replace(base, tensor_parallel_size=None), self.settings,
                         self.runtime_env).max_num_batched_tokens  # fmt: skip

    def evaluate(self, shape: ReplicaShape, serves: Planned | None = None) -> Candidate:
        """``shape`` planned for the search (``serves``: serve's own plan of it, re-priced) and sized."""
        a = self.args
        one = _one(self.sizing, shape)
        if serves is None:
            try:
                # the text-bucket budget search is serve's slowest step: the search prices the runtime's own text
                # buckets unless a budget is given; the chosen shape is re-priced on serve's planned ones
                planned = plan_and_choose(
                    one,
                    self.settings,
                    dict(self.runtime_env),
                    requests=a.plan_requests,
                    text=self.sizing.text_graph_budget is not None,
                    traffic=self.offered,
                )
            except ConfigError as exc:  # a shape the runtime refuses (TP not dividing the heads, ...)
                if isinstance(exc, BudgetTooSmall):
                    self.budget_refused[shape] = exc
                return Candidate(shape, None, why_not=str(exc), cards_per_node=a.cards_per_node)
            plan, costs = planned.plan, planned.costs
        else:
            plan, costs = serves.plan, serves.costs
        if not plan.fits:
            error = next(f for f in plan.findings if f.severity == "error")
            return Candidate(shape, None, why_not=error.message, cards_per_node=a.cards_per_node, unheld=True)
        step = profile_of(self.sizing, self.settings).step_time if costs.get("profile") else None
        if step is not None and not self.calibrated and len(set(self.args.tensor_parallel_sizes)) > 1:
            self.notes.append("the calibrated step time is your server's, at its own tensor parallelism: every TP "
                              "size tried is priced with it unchanged")  # fmt: skip
        self.calibrated = self.calibrated or step is not None
        images = images_for(plan.inputs, plan.vision_buckets_captured, self.settings)
        # under reject the server refuses an image above the shape's largest vision bucket: which depends on the
        # buckets planned for the shape (its memory), so it is counted here, by the rule buckets replay counts by
        try:
            traffic, note = _served(self.traffic, images, self.settings, sent=self.sent)
        except NothingServed as exc:
            self.images_refused[shape] = images
            return Candidate(shape, None, why_not=str(exc), cards_per_node=a.cards_per_node)
        self.images_partly[shape] = note
        timer = _timer(plan, images, step)
        engine = plan.inputs.engine(plan.kv_blocks)
        replica = replica_model(timer, engine, plan.inputs.runtime.text_lookup(engine))
        activations = plan.inputs.model.hidden_size * plan.inputs.dtype_size  # one token's, between two stages
        replica = pipelined(replica, shape.pipeline_parallel_size, activations)
        below = _below_one_step(a.targets, replica)
        if below is not None:
            self.below_step.append(f"{shape.label}: {below}")
            return Candidate(shape, None, why_not=below, cards_per_node=a.cards_per_node)
        samples = [prompts(traffic, images, a.requests, seed) for seed in range(a.seeds)]
        # the engine's own refusal rule (scheduler.refused_counts), as plan.fleet's search reads it when none runs
        refused = refused_counts((p for s in samples for p in s), engine).get("prompt_too_long", 0)
        if refused:
            note = (
                f"{refused} of {a.requests * a.seeds} sampled requests have prompts of max_model_len "
                f"({engine.max_model_len}) tokens or more: refused by the engine (not run), and no figure counts them"
            )
            if note not in self.notes:
                self.notes.append(note)
        capacity = max_rate(replica, samples, a.targets, iterations=a.iterations)
        warm = plan.warmup
        if warm is not None:
            self.warm_source = warm.source
        if capacity.rate <= 0:
            return Candidate(
                shape,
                capacity,
                warmup_s=warm.seconds if warm else None,
                why_not="misses " + ", ".join(capacity.limited_by) + " at every load",
                cards_per_node=a.cards_per_node,
            )
        first = sized(shape, capacity, a.rate, a.headroom, cards_per_node=a.cards_per_node)
        latency = latency_at(replica, samples, a.rate / first.replicas)
        lookup = plan.inputs.runtime.text_lookup(engine)
        planned_text = serves is not None or self.sizing.text_graph_budget is not None
        buckets = "none (real shapes)" if lookup is None else "serve's planned" if planned_text else "runtime's own"
        return sized(
            shape,
            capacity,
            a.rate,
            a.headroom,
            cards_per_node=a.cards_per_node,
            latency=latency,
            targets=a.targets,
            warmup_s=warm.seconds if warm else None,
            buckets=buckets,
        )

    def holds(self, shape: ReplicaShape, **change: object) -> bool:
        """Whether memory holds one replica of ``shape`` (with the sizing flags ``change``d), as serve plans it."""
        try:
            one = dataclasses.replace(_one(self.sizing, shape), **change)  # type: ignore[arg-type]
            return plan_and_choose(one, self.settings, dict(self.runtime_env), requests=self.args.plan_requests,
                                   text=False, traffic=self.offered).plan.fits  # fmt: skip
        except ConfigError:  # a value the runtime refuses for this shape (TP not dividing the heads, ...)
            return False

    def tensor_fixes(self, candidates: list[Candidate]) -> tuple[str, ...]:
        """When vLLM refuses every shape tried for its tensor size (TP not dividing the heads, a TP over a node):
        the TP sizes within a node, not tried, at which vLLM takes one of those shapes and memory holds it, found by
        planning it (a refusal's own "accepted" list knows neither the node nor memory)."""
        tried = {c.shape.tensor_parallel_size for c in candidates}
        shapes = list(dict.fromkeys(c.shape for c in candidates))
        sizes = [tp for tp in (1, 2, 4, 8, 16, 32, 64) if tp <= self.args.cards_per_node and tp not in tried
                 and any(self.holds(dataclasses.replace(s, tensor_parallel_size=tp)) for s in shapes)]  # fmt: skip
        if not sizes:
            return ()
        return (f"--tensor-parallel-sizes {','.join(map(str, sizes))} (the sizes within a node of "
                f"{self.args.cards_per_node} at which vLLM takes a shape tried and memory holds it)",)  # fmt: skip

    def memory_fixes(self, candidates: list[Candidate]) -> tuple[str, ...]:
        """When memory holds no shape vLLM takes: each one-flag change under which one of those shapes fits, found
        by planning it (never a change that was already tried, nor the device in use)."""
        a, sizing = self.args, self.sizing
        unheld = [c.shape for c in candidates if c.unheld]
        tried_pp = {c.shape.pipeline_parallel_size for c in candidates}
        tried_tp = {c.shape.tensor_parallel_size for c in candidates}
        out: list[str] = []
        for pp in (p for p in AUTO_PIPELINE if p not in tried_pp):  # stages split the weights across nodes
            fit = next((dataclasses.replace(s, pipeline_parallel_size=pp) for s in unheld
                        if placement(s.tensor_parallel_size, pp, a.cards_per_node) is not None
                        and self.holds(dataclasses.replace(s, pipeline_parallel_size=pp))), None)  # fmt: skip
            if fit is not None:
                out.append(f"--pipeline-parallel-sizes {pp} ({fit.label} fits)")
                break
        for tp in (t for t in (2, 4, 8, 16, 32, 64) if t <= a.cards_per_node and t not in tried_tp):
            fit = next((dataclasses.replace(s, tensor_parallel_size=tp) for s in unheld
                        if self.holds(dataclasses.replace(s, tensor_parallel_size=tp))), None)  # fmt: skip
            if fit is not None:
                out.append(f"--tensor-parallel-sizes {tp} ({fit.label} fits)")
                break
        # a shorter context mends only a KV cache too small for one sequence, never weights and profiling: the
        # longest the cache holds (vLLM refuses prompts of that many tokens or more)
        for c in (c for c in candidates if c.unheld and "cannot hold one sequence" in c.why_not):
            plan = plan_and_choose(_one(sizing, c.shape), self.settings, dict(self.runtime_env),
                                   requests=a.plan_requests, text=False, traffic=self.offered).plan  # fmt: skip
            tokens = plan.kv_blocks * plan.inputs.block_size
            if tokens > 0 and self.holds(c.shape, max_model_len=tokens):
                out.append(f"--max-model-len {tokens} ({c.shape.label} fits)")
                break
        if sizing.quantization is None and "-awq" not in (sizing.model or "").lower():
            for method, words in (("fp8", "8-bit weights"), ("awq", "4-bit weights")):
                fit = next((s for s in unheld if self.holds(s, quantization=method)), None)
                if fit is not None:
                    out.append(f"{words}: a checkpoint quantized so, planned with --quantization {method} "
                               f"({fit.label} fits)")  # fmt: skip
                    break
        here = KNOWN_DEVICES.get(sizing.device or "")
        if here is not None and sizing.total_memory_gib is None and sizing.free_memory_gib is None:
            larger = sorted((d for d in KNOWN_DEVICES.values()
                             if d.backend == here.backend and d.total_bytes > here.total_bytes),
                            key=lambda d: d.total_bytes)  # fmt: skip
            for d in larger:
                fit = next((s for s in unheld if self.holds(s, device=d.name)), None)
                if fit is not None:
                    out.append(f"--device {d.name} ({fit.label} fits)")
                    break
        return tuple(out)


def _one(sizing: SizingArgs, shape: ReplicaShape) -> SizingArgs:
    """The sizing flags of one replica of ``shape`` (PP left out at 1, as a user's own command would)."""
    pp = shape.pipeline_parallel_size
    return dataclasses.replace(
        sizing,
        tensor_parallel_size=shape.tensor_parallel_size,
        max_num_seqs=shape.batch.max_num_seqs,
        max_num_batched_tokens=shape.batch.max_num_batched_tokens,
        pipeline_parallel_size=pp if pp > 1 else None,
    )


def _server_args(sizing: SizingArgs) -> list[str]:
    """The vLLM server arguments of one replica: every sizing flag the plan read, as vLLM spells it (the model
    first), so that the server resolves each value as the plan did."""
    out: list[str] = []
    for o in VLLM_FLAGS:
        value = getattr(sizing, o.field)
        if value is None:
            continue
        if o.boolean:
            out.append(f"--{o.name}" if value else f"--no-{o.name}")
        else:
            out += [f"--{o.name}", json.dumps(value) if isinstance(value, dict | list) else str(value)]
    return out


def _evidence(
    fleet_calibrated: bool, launch: Launch | None, warm_source: str, *, bounded: bool = True
) -> dict[str, str]:
    """``bounded``: the step model has a held-out interval (docs/latency.md: not on H100 / H200, where the roofline
    is not fitted on public points and the interval is printed unbounded)."""
    step = "public-data estimate: the roofline fitted on vendor tables (docs/latency.md), its interval printed"
    if not bounded:
        step = "public-data estimate: the roofline, not fitted on public points for this device (docs/latency.md)"
    if fleet_calibrated:
        step = "calibrated: the step time fitted on your server (the profile's step_time), its own interval"
    costs = memory_evidence(launch.planned.costs if launch is not None else {})
    return {
        "step_time": step,
        "memory": costs,
        "warmup": warm_source,
        "capacity": (
            "the replay's whole latencies under Poisson arrivals (bisection on the rate): as good as the "
            "step model; the API server is a fixed delay, not a queue (docs/latency.md, limits)"
        ),
    }


def _impossible(candidates: list[Candidate], args: FleetArgs, best: Candidate | None,
                memory_fixes: tuple[str, ...] = (), rate_from: Candidate | None = None) -> str:  # fmt: skip
    """Why no fleet is chosen, and what would make one possible. ``memory_fixes``: the one-flag changes planned to
    fit when no shape tried is priced (:meth:`_Search.memory_fixes`, or :meth:`_Search.tensor_fixes` when vLLM
    refuses every shape for its TP size). ``rate_from``: ``best`` on the search's figures
    (default ``best``), which the lower rate named is computed from (:func:`_choose_on_serves_buckets`)."""
    fits = [c for c in candidates if c.capacity is not None]
    unheld = [c for c in candidates if c.unheld]
    if not fits and unheld:  # memory is what stopped the largest shape that vLLM would take
        # only the changes planned to fit (:func:`_memory_fixes`): a fix named must work when followed
        fix = ", or ".join(memory_fixes) or (
            "none found: no pipeline size up to 8, tensor size within a node, context length, quantization or "
            "other device makes a shape tried fit"
        )
        return (
            "the model fits no card count tried ("
            + "; ".join(f"TP{c.shape.tensor_parallel_size}: {c.why_not}" for c in unheld[-1:])
            + f"); fix: {fix}"
        )
    if not fits:  # every shape refused before memory was asked (TP not dividing the heads, a stage over a node)
        tp = all("tensor-parallel" in c.why_not or "TP " in c.why_not for c in candidates)
        # only sizes planned to be taken and to fit (:meth:`_Search.tensor_fixes`), or that none was found
        fix = (
            "the values the refusal accepts"
            if not tp
            else ", or ".join(memory_fixes)
            or "none found: no tensor size within a node makes a shape tried one vLLM takes and memory holds"
        )
        return (
            "no shape tried is one vLLM would serve ("
            + "; ".join(dict.fromkeys(f"TP{c.shape.tensor_parallel_size}: {c.why_not}" for c in candidates[-2:]))
            + f"); fix: {fix}"
        )
    if best is None or best.capacity is None or best.capacity.rate <= 0:
        closest = _closest(candidates, args.targets)
        lat = closest.capacity.latency  # type: ignore[union-attr]
        # name the targets it misses with its own figures: the ones it meets are no help to loosen
        missed = args.targets.misses(lat)
        figures = "; ".join(
            f"{_TARGET_WORDS[n]} {_ms(Targets.value(lat, n))} ms against the {_ms(v)} ms target"
            for n, v in args.targets.items()
            if n in missed
        )
        looser = ", ".join(
            f"--{n.replace('_', '-')} {_bound(1000 * Targets.value(lat, n), up=True)} or more" for n in missed
        )
        return (
            f"at no load does any replica shape meet them: the closest, {closest.shape.label}, has, at a light load "
            f"({lat.load}), {figures}; fix: looser targets ({looser}: the least it reaches, at that light "
            "load only; looser still for fewer replicas), a shorter context (--max-model-len, shorter prompts), or "
            "a faster device"
        )
    need, cards = best.total_cards, args.cards or best.total_cards
    # "at most": rounded down, so that the rate printed needs no more cards than it says
    rated = rate_from.capacity if rate_from is not None and rate_from.capacity is not None else best.capacity
    most = _bound(rated.rate * (cards // best.cards_per_replica) / (1 + args.headroom), up=False)
    return (
        f"the targets need {need} cards ({best.replicas} x {best.shape.label}, {best.capacity.rate:.3g} req/s "
        f"each), above the {args.cards} available; fix: {need} cards, a lower rate (at most {most} req/s on "
        f"{cards}), or looser targets"
    )


#: Each latency target in words, by its name (``Targets.items``).
_TARGET_WORDS = {"ttft_p99": "p99 TTFT", "tpot_p99": "p99 TPOT", "ttft_p50": "p50 TTFT", "tpot_p50": "p50 TPOT",
                 "e2e_p99": "p99 end-to-end"}  # fmt: skip


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:.0f}" if seconds >= 0.1 else f"{1000 * seconds:.1f}"


def _bound(x: float, *, up: bool) -> str:
    """``x`` to 3 significant digits, rounded up (a least value that works) or down (a most value that works)."""
    if x <= 0 or not math.isfinite(x):
        return f"{x:g}"
    exponent = math.floor(math.log10(x)) - 2
    units = x / 10**exponent
    digits = math.ceil(units - 1e-9) if up else math.floor(units + 1e-9)
    return f"{digits * 10**exponent:.{max(0, -exponent)}f}"


def _closest(candidates: list[Candidate] | tuple[Candidate, ...], targets: Targets) -> Candidate:
    """Among shapes that meet the targets at no load, the one closest to them at a light load (the best
    achievable): the least relative miss over every target."""
    fits = [c for c in candidates if c.capacity is not None]
    return max(fits, key=lambda c: targets.margin(c.capacity.latency))  # type: ignore[union-attr]


def _why(chosen: Candidate, candidates: list[Candidate]) -> str:
    rivals = [c for c in candidates if c.meets and c is not chosen]
    same = [c for c in rivals if c.total_cards == chosen.total_cards]
    text = f"{chosen.shape.label}: the fewest cards meeting the targets ({chosen.total_cards})"
    if same:
        text += f"; tied with {len(same)} other(s) on cards, the largest latency margin ({chosen.margin:.0%})"
    cheaper = min((c.total_cards for c in rivals if c.total_cards > chosen.total_cards), default=None)
    if cheaper is not None:
        text += f"; the next shape needs {cheaper}"
    return text


def _candidates(search: _Search, args: FleetArgs, pipeline: tuple[int, ...], *,
                within_node: bool = False) -> list[Candidate]:  # fmt: skip
    """Every shape of ``pipeline`` sizes evaluated (``within_node``: only TP sizes a node holds)."""
    out = []
    for pp in sorted(set(pipeline)):
        for tp in sorted(set(args.tensor_parallel_sizes)):
            if within_node and tp > args.cards_per_node:
                continue
            for m in sorted(set(args.seqs_tried)):
                tried = sorted(set(args.batched_tokens_tried)) or [search.default_tokens(tp, m, pp)]
                for b in tried:
                    shape = ReplicaShape.of(tp, m, b, pp)
                    if placement(tp, pp, args.cards_per_node) is None:
                        why = f"TP {tp} spans nodes of {args.cards_per_node} cards (not planned: a stage per node)"
                        out.append(Candidate(shape, None, why_not=why, cards_per_node=args.cards_per_node))
                    else:
                        out.append(search.evaluate(shape))
    return out


def _choose_on_serves_buckets(search: _Search, candidates: list[Candidate],
                              notes: list[str]) -> tuple[Candidate | None, Launch | None, list[Candidate]]:  # fmt: skip
    """The choice with serve's own plan of it (``None, None`` when none fits ``--cards``), and ``candidates`` with
    the rows re-priced. The search ranks on the runtime's own buckets (:func:`ranked`); a shape chosen is printed and
    deployed on serve's plan of it (its buckets from serve's full sample of the traffic), which may need fewer
    replicas. Re-priced so, in turn until one fits within ``--cards``: the unconstrained choice, then each shape
    within ``--cards`` on the search's figures. So ``--cards`` of the unconstrained choice's cards chooses it, as it
    would be deployed, and a shape within them is not refused on figures other than those it would be deployed on.
    Each re-pricing is a serve plan (seconds): the other shapes over the cards on the search's figures are not."""
    args = search.args
    order = ranked(candidates)
    walk = order[:1] + [c for c in order[1:] if args.cards is not None and c.total_cards <= args.cards]
    for shape in [c.shape for c in walk]:
        searched = next(c for c in candidates if c.shape == shape)
        one = _one(search.sizing, shape)
        launch = prepare(
            one,
            search.settings,
            dict(search.runtime_env),
            server_args=_server_args(one),
            output_dir=Path(args.replica_dir),
            limit_mm_per_prompt=None,
            compilation_config=None,
            traffic=search.offered,
        )
        final = search.evaluate(shape, launch.planned)
        if final.meets:
            candidates = [final if c.shape == shape else c for c in candidates]
        if args.cards is not None and (final if final.meets else searched).total_cards > args.cards:
            continue
        if not final.meets:
            notes.append(
                "on serve's own buckets (planned over its full sample) the chosen shape's capacity is "
                f"{final.capacity.rate if final.capacity else 0:.3g} req/s; the search's figure stands"
            )
        return (final if final.meets else searched), launch, candidates
    return None, None, candidates


def _refused_words(refused: Mapping[str, int], images: Images, settings: Settings) -> tuple[str, str]:
    """The refused requests by reason, and what the server would serve them under, in words: the replay's reasons
    (:meth:`~vllm_hpu_mm.replay.schedules.Images.refusal`), with the limit each one is refused by."""
    said: list[str] = []
    fixes: list[str] = []
    for reason, n in refused.items():
        if reason == "image_oversize":
            said.append(f"{n} above the largest vision bucket ({max(images.buckets or (0,))} patches) under "
                        "VLLM_HPU_MM_OVERSIZE_POLICY=reject")  # fmt: skip
        else:
            said.append(f"{n} over the loader's limits {settings.max_image_pixels_var}="
                        f"{settings.served_max_image_pixels}, "
                        f"VLLM_HPU_MM_MAX_ASPECT_RATIO={settings.max_aspect_ratio:g}")  # fmt: skip
        fixes.append(REFUSAL_FIXES[reason])
    return "; ".join(said), " or ".join(fixes)


def _served(traffic: Traffic, images: Images, settings: Settings, *, sent: int, on: str = "") -> tuple[Traffic, str]:
    """The requests of ``traffic`` the server serves under ``images``, and a note counting those it refuses ("" when
    none): a request whose image the server refuses (over the loader's limits, or under ``reject`` above the largest
    vision bucket) fails at once (HTTP 400), takes no replica time and is in no figure, counted by the rule
    ``buckets replay`` counts it by (:func:`~vllm_hpu_mm.replay.schedules.served_requests`). ``sent``: the requests
    of the traffic as sent (the share's base); ``on``: where the refusal holds (a replica shape), in words.
    :class:`NothingServed` when it would serve none of them."""
    served, refused = served_requests(traffic, images)
    n = sum(refused.values())
    why, fixes = _refused_words(refused, images, settings)
    if served is None:  # e.g. "(20 of 20; 20 above the largest vision bucket (3136 patches) under ...=reject)"
        raise NothingServed(
            f"{traffic.source}: the server refuses the image of every request ({n} of {n}; {why}){on}: no request "
            f"would be served, so there is no fleet to size; accepted: {fixes}, or text-only requests"
        )
    if not n:
        return served, ""
    return served, (f"{n} of {sent} requests of the traffic ({n / sent:.1%}) carry an image the server refuses{on} "
                    f"({why}): they fail at once, take no replica time and no figure counts them; the rate is sized "
                    "as if every request were served")  # fmt: skip


def _loader_images(settings: Settings) -> Images:
    """The served loader's limits alone (no vision bucket): what the server refuses on every replica shape."""
    return Images(None, loader=(settings.served_max_image_pixels, settings.max_aspect_ratio))


def _check_budget_served_some(search: _Search, candidates: list[Candidate]) -> None:
    """A given text-graph budget that kept every shape it refused from being priced, where no other shape was, is the
    user's input to fix (exit 2, with the least one of them needs), not a fleet the targets cannot be met by: the
    other shapes are ones the runtime refuses or memory does not hold."""
    if not search.budget_refused or any(c.capacity is not None for c in candidates):
        return
    least = min(search.budget_refused.items(), key=lambda item: item[1].least)
    flag = search.sizing.flag("text_graph_budget")
    raise ConfigError(
        f"{flag} {search.sizing.text_graph_budget} is too small for the text buckets of every replica shape it was "
        "tried on; "
        f"accepted: at least {least[1].least} graphs (the least of them, {least[0].label}'s)"
    )


def _check_some_shape_serves(search: _Search, candidates: list[Candidate]) -> None:
    """No shape priced, where the vision buckets of those that would start leave the server refusing every request's
    image (``reject``): a negative answer (exit 1) in one line, as when the loader refuses them all, not "nothing to
    size" (the other shapes are ones the runtime refuses or memory does not hold)."""
    if not search.images_refused or any(c.capacity is not None for c in candidates):
        return
    first, images = next(iter(search.images_refused.items()))
    largest = {max(i.buckets or (0,)) for i in search.images_refused.values()}
    where = "" if len(candidates) == 1 else (
        f" on every replica shape that would start ({len(search.images_refused)} of the {len(candidates)} tried"
        + (f"; the largest bucket named is {first.label}'s)" if len(largest) > 1 else ")"))  # fmt: skip
    _served(search.traffic, images, search.settings, sent=search.sent, on=where)  # raises NothingServed


def plan_fleet(sizing: SizingArgs, args: FleetArgs, settings: Settings, runtime_env: Mapping[str, str]) -> Fleet:
    """The fleet for ``args.rate`` within ``args.targets`` (see the module docstring). Raises :class:`ConfigError`
    for invalid input (a target below one step of every replica shape)."""
    started = time.perf_counter()
    if sizing.pipeline_parallel_size is not None or (sizing.data_parallel_size or 1) > 1:
        raise ConfigError(
            f"{sizing.flag('pipeline_parallel_size')} / data parallel: fleet plan sizes data parallelism itself "
            "and tries pipeline sizes from its own list (--pipeline-parallel-sizes); accepted: leave them out"
        )
    # the profile read once, before the search: an invalid file is the user's input to fix (exit 2), not a refusal
    # of each shape in turn; every shape's plan reuses what was read
    sizing = with_profile_read(on_default_device(sizing), settings)
    model = sizing.model or DEFAULT_MODEL
    sizing = dataclasses.replace(sizing, model=model)
    # what every shape shares checked once, at the runtime's own batch limits: a value no shape can mend (a
    # --speculative-config or --kv-cache-dtype vLLM refuses) is invalid input, not a shape that does not fit
    build(dataclasses.replace(sizing, tensor_parallel_size=None, max_num_seqs=None, max_num_batched_tokens=None),
          settings, runtime_env)  # fmt: skip
    offered = offered_traffic(sizing, args.from_metrics, args.model_name)
    # what the loader refuses is refused on every shape: checked once, before the search; what reject refuses
    # above the largest vision bucket depends on each shape's buckets (_Search.evaluate)
    traffic, refused_note = _served(offered, _loader_images(settings), settings, sent=offered.num_requests)
    search = _Search(sizing, args, settings, runtime_env, traffic, [refused_note] if refused_note else [], [],
                     offered=dataclasses.replace(offered, running=None) if args.from_metrics else None,
                     sent=offered.num_requests)  # fmt: skip
    candidates = _candidates(search, args, args.pipeline_parallel_sizes or (1,))
    if not args.pipeline_parallel_sizes:
        in_node = [c for c in candidates if c.shape.tensor_parallel_size <= args.cards_per_node]
        for pp in AUTO_PIPELINE if in_node and all(c.unheld for c in in_node) else ():
            more = _candidates(search, args, (pp,), within_node=True)
            candidates += more
            if not all(c.unheld for c in more):
                break
    gaudi = (sizing.runtime or "").startswith("vllm-gaudi") or (sizing.device or "").startswith("gaudi")
    if gaudi and any(c.shape.pipeline_parallel_size > 1 and c.capacity is not None for c in candidates):
        search.notes.append(GAUDI_PIPELINE_NOTE)
    _check_budget_served_some(search, candidates)
    _check_some_shape_serves(search, candidates)
    if search.below_step and not any(c.capacity is not None for c in candidates):
        raise ConfigError(
            f"latency targets below one step of every replica shape ({search.below_step[0]}); "
            "accepted: targets above one step's time"
        )
    notes = [*search.notes, *search.oversize_notes()]
    searched = candidates
    chosen, launch, candidates = _choose_on_serves_buckets(search, candidates, notes)
    best = None
    deploy = None
    day = None
    if chosen is not None and launch is not None:
        image = args.image or launch.plan.inputs.runtime.traits.image or None
        if image is None:
            notes.append(f"no container image of {launch.plan.inputs.runtime_name.value} is known: the deployment "
                         f"names {IMAGE_PLACEHOLDER}; pass --image")  # fmt: skip
        deploy = deployments(
            launch.server_args,
            launch.exports.env,
            launch.files,
            replicas=chosen.replicas,
            tensor_parallel_size=chosen.shape.tensor_parallel_size,
            pipeline_parallel_size=chosen.shape.pipeline_parallel_size,
            cards_per_node=args.cards_per_node,
            device=launch.plan.inputs.device,
            name=args.name,
            image=image or IMAGE_PLACEHOLDER,
            head_address=args.head_address,
            replica_dir=args.replica_dir,
            warmup_s=chosen.warmup_s,
        )
        reason = _why(chosen, candidates)
        if args.profile and chosen.capacity is not None:
            day = over_profile(args.profile, chosen.capacity.rate, args.headroom, chosen.cards_per_replica)
    else:
        scored = [c for c in candidates if c.capacity is not None and c.capacity.rate > 0]
        best = min(scored, key=lambda c: (c.total_cards, -c.margin)) if scored else None
        if best is None and any(c.capacity is not None for c in candidates):
            best = _closest(candidates, args.targets)  # no load meets the targets: the closest at a light load
        fixes: tuple[str, ...] = ()
        if not any(c.capacity is not None for c in candidates):
            unheld = any(c.unheld for c in candidates)
            fixes = search.memory_fixes(candidates) if unheld else search.tensor_fixes(candidates)
        # the lower rate from the search's figures: a rate at which the shape fits --cards on them is re-priced
        rate_from = next((c for c in searched if best is not None and c.shape == best.shape), best)
        reason = _impossible(candidates, args, best, fixes, rate_from)
    intervals = [c.capacity.interval for c in candidates if c.capacity is not None]
    # no shape priced (every one refused or over memory): whether the device's step model has a public fit
    bounded = any(i is not None for i in intervals) if intervals else has_public_fit(sizing.device or "")
    return Fleet(
        args.rate,
        args.targets,
        args.headroom,
        args.cards,
        args.cards_per_node,
        tuple(candidates),
        chosen,
        best,
        launch,
        deploy,
        _evidence(search.calibrated, launch, search.warm_source, bounded=bounded),
        reason,
        tuple(notes),
        time.perf_counter() - started,
        sizing.device or "?",
        model,
        day,
        args.profile,
        offered.source,
    )

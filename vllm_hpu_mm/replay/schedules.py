"""The schedules a traffic produces: traffic into the engine's requests (images aligned as the served processor
aligns them), the schedule at the load the traffic says or at every load, and a bucket set replayed or planned.

- :func:`schedules`: the traces a traffic produces for an engine (one per load level when the load is unknown).
- :func:`replay_model`: a runtime model's bucket lookup over those traces (what a configuration would do).

What is planned over them, and within which budget, is the planner's (``buckets/text.py``, ``buckets/text_budget.py``,
``plan/text_buckets.py``).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from collections import Counter
from collections.abc import Sequence

from vllm_hpu_mm.buckets.planner import Evaluation, evaluate
from vllm_hpu_mm.buckets.policy import pixel_limits
from vllm_hpu_mm.buckets.sizes import patch_counts
from vllm_hpu_mm.buckets.turns import on_two
from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.dims import ModelDims, VisionDims
from vllm_hpu_mm.models.step_time import has_time_model, step_time
from vllm_hpu_mm.preprocess.align import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, aligned_size, native_size, patch_count
from vllm_hpu_mm.preprocess.limits import dimension_problem
from vllm_hpu_mm.replay.run import ReplayResult, replay
from vllm_hpu_mm.replay.scheduler import Arrivals, Prompt, Trace, simulate
from vllm_hpu_mm.replay.timing import Clocked, StepModel, Timer
from vllm_hpu_mm.runtimes.base import RuntimeModel
from vllm_hpu_mm.traffic.default import default_text
from vllm_hpu_mm.traffic.requests import Request, Size, Traffic
from vllm_hpu_mm.values import AlignMode, OversizePolicy

__all__ = [
    "DEFAULT_REQUESTS",
    "MAX_REQUESTS",
    "Images",
    "Schedules",
    "TowerImages",
    "load_levels",
    "load_sweep",
    "prompts",
    "replay_model",
    "schedules",
    "served_requests",
    "timer_for",
    "vision_efficiency",
]

#: Requests sampled from the traffic per load level (the replay's cost is bounded by it, not by the traffic's size),
#: and the most a replay takes (the whole command in seconds at it: benchmarks/performance/results/replay_bounds.md).
DEFAULT_REQUESTS = 2000
MAX_REQUESTS = 100_000
#: Fewest requests at one load level of the every-load sweep (a level runs max(this, 4 x its load) of them).
MIN_LEVEL_REQUESTS = 200
#: The fewest requests over the load levels that are scheduled on two cores: the main job's 3,760 take 0.09 s of CPU,
#: and halving them with a forked child gained nothing on the idle 2-core machine and lost under load
#: (docs/performance.md, stop 46).
TWO_CORE_REQUESTS = 20_000
#: vLLM wraps each image's placeholder tokens in <|vision_start|> and <|vision_end|>.
IMAGE_EXTRA_TOKENS = 2
TOKENS_PER_PATCH = 1 / 4


@dataclasses.dataclass(frozen=True)
class Images:
    """How the served processor aligns images (the vision buckets, the oversize policy, the pixel limits)."""

    buckets: tuple[int, ...] | None
    policy: OversizePolicy = OversizePolicy.SHRINK
    mode: AlignMode = AlignMode.NEAREST
    min_pixels: int = QWEN_MIN_PIXELS
    max_pixels: int = QWEN_MAX_PIXELS
    #: The served loader's limits (VLLM_HPU_MM_MAX_IMAGE_PIXELS or vLLM's lower one, VLLM_HPU_MM_MAX_ASPECT_RATIO);
    #: None: every image passes them (the traffic was admitted before).
    loader: tuple[int, float] | None = None

    def limits(self) -> tuple[int, int]:
        return pixel_limits(self.min_pixels, self.max_pixels, self.buckets, self.policy)

    def refusal(self, size: Size) -> str | None:
        """Why the server answers a request with an image of ``size`` with HTTP 400 (a key of
        :data:`~vllm_hpu_mm.replay.scheduler.REFUSALS`), or None: the loader's size rule
        (:func:`~vllm_hpu_mm.preprocess.limits.dimension_problem`), then under ``reject`` an aligned image above the
        largest bucket (the plugin's ``check_oversize``, plugin/processor.py)."""
        if self.loader is not None and dimension_problem(*size, max_image_pixels=self.loader[0],
                                                         max_aspect_ratio=self.loader[1]) is not None:  # fmt: skip
            return "image_refused"
        if self.policy is OversizePolicy.REJECT and self.buckets and self.patches(size) > max(self.buckets):
            return "image_oversize"
        return None

    def patches(self, size: Size) -> int:
        low, high = self.limits()
        h, w = aligned_size(size[1], size[0], min_pixels=low, max_pixels=high, mode=self.mode)
        return patch_count(h, w)

    def tokens(self, size: Size) -> int:
        """The placeholder tokens one image of ``size`` takes in the prompt."""
        return round(self.patches(size) * TOKENS_PER_PATCH) + IMAGE_EXTRA_TOKENS


@dataclasses.dataclass(frozen=True)
class TowerImages(Images):
    """Images of a family our aligned processor does not serve: its own processor's grid (``factor`` pixels per
    token side, at the model's pixel limits, no bucket cap), or a fixed token count per image (Gemma 3)."""

    factor: int = 28
    fixed_tokens: int = 0

    def tokens(self, size: Size) -> int:
        if self.fixed_tokens:
            return self.fixed_tokens + IMAGE_EXTRA_TOKENS
        h, w = native_size(size[1], size[0], factor=self.factor, min_pixels=self.min_pixels,
                           max_pixels=self.max_pixels)  # fmt: skip
        return (h // self.factor) * (w // self.factor) + IMAGE_EXTRA_TOKENS  # one token per factor x factor cell

    @classmethod
    def of(cls, vision: VisionDims) -> TowerImages:
        return cls(None, factor=vision.alignment, fixed_tokens=vision.tokens_per_image)


@dataclasses.dataclass(frozen=True)
class Schedules:
    traces: tuple[Trace, ...]
    #: Each trace weighs the same (the load is unknown: every level up to max_num_seqs).
    balanced: bool
    #: The load, in words.
    load: str
    #: Requests sampled from the traffic for the schedules (every trace's together): what was offered, not what ran.
    requests: int
    #: The requests of a schedule under arrivals in time, as sampled: another clock schedules the same ones again
    #: (:func:`vllm_hpu_mm.replay.whole.strategy_latency`) without sampling them again.
    prompts: tuple[Prompt, ...] = dataclasses.field(default=(), repr=False, compare=False)
    #: The images of the requests that ran (every trace's together), by size, and the images sampled: a vision
    #: figure counts only the first (refused and unsent requests are in no figure).
    images_ran: tuple[tuple[Size, int], ...] = ()
    images_sampled: int = 0

    @property
    def ran(self) -> int:
        """Requests that ran to their end: the only ones any figure counts."""
        return sum(t.completed for t in self.traces)

    @property
    def refusals(self) -> tuple[tuple[str, int], ...]:
        """Requests the engine refused, by reason, over every trace (never run, in no figure)."""
        out: dict[str, int] = {}
        for t in self.traces:
            for reason, n in t.refusals:
                out[reason] = out.get(reason, 0) + n
        return tuple(sorted(out.items()))

    @property
    def unsent(self) -> int:
        """Requests sampled that never arrived: the load ended first (a profile's last segment, a rate too low to
        send one). Every schedule drains, so each request that arrived either ran or was refused."""
        return max(0, self.requests - self.ran - sum(n for _, n in self.refusals))


def served_requests(traffic: Traffic, images: Images) -> tuple[Traffic | None, dict[str, int]]:
    """The requests of ``traffic`` the server serves under ``images`` (None: not one), and those whose image it
    answers with HTTP 400, by reason: :meth:`Images.refusal`, the rule the replay counts refusals by, for a caller
    that leaves them out of the traffic instead (``fleet plan``). Text-only requests are always served."""
    refused: Counter[str] = Counter()
    served: dict[Request, int] = {}
    for r, n in traffic.counts.items():
        reason = None if r.image is None else images.refusal(r.image)
        if reason is None:
            served[r] = n
        else:
            refused[reason] += n
    if not refused:
        return traffic, {}
    return (dataclasses.replace(traffic, counts=served) if served else None), dict(sorted(refused.items()))


#: Requests sampled as the engine sees them, with each one's image size (None: text only), in the same order.
_Sample = tuple[tuple[Prompt, ...], tuple[Size | None, ...]]


def _prompt(r: Request, images: Images, cache: dict[Size, int], includes: bool) -> Prompt:
    """One request as the engine sees it (``cache``: image tokens by size, filled as met; ``includes``: the text
    tokens count the image's placeholders, as vLLM's metrics do)."""
    image: tuple[int, ...] = ()
    refused = None
    if r.image is not None:
        refused = images.refusal(r.image)
        if refused is None:
            if r.image not in cache:
                cache[r.image] = images.tokens(r.image)
            image = (cache[r.image],)
    text = r.text_tokens or 0
    tokens = max(text, sum(image) + 1) if includes else text + sum(image)
    return Prompt(tokens, r.output_tokens or 1, min(r.cached_tokens or 0, tokens), image, refused)


def _sample(traffic: Traffic, images: Images, n: int, seed: int) -> _Sample:
    cache: dict[Size, int] = {}
    drawn = traffic.sample(n, seed, default_text())
    out = tuple(_prompt(r, images, cache, traffic.text_includes_images) for r in drawn)
    return out, tuple(r.image for r in drawn)


def prompts(traffic: Traffic, images: Images, n: int, seed: int = 0) -> list[Prompt]:
    """``n`` requests sampled from ``traffic`` (seeded) as the engine sees them (what :func:`schedules` runs)."""
    return list(_sample(traffic, images, n, seed)[0])


def _ran(trace: Trace, sizes: Sequence[Size | None]) -> Counter[Size]:
    """The images of the requests that ran in ``trace`` (its spans name them), by size."""
    return Counter(size for s in trace.spans if (size := sizes[s.request]) is not None)


def load_levels(max_num_seqs: int) -> list[int]:
    """1, 2, 4, ... below max_num_seqs, a quarter, a half and three quarters of it, and max_num_seqs: the loads an
    unknown load is planned and judged at. The quarters are a server's usual operating points; with powers of two
    alone, a limit such as 384 left its quarter and half (96, 192) between the levels, where the planned decode rows
    padded longer than the runtime's own (benchmarks/planner/results/planner_eighth_time.md)."""
    levels, c = {max_num_seqs}, 1
    while c < max_num_seqs:
        levels.add(c)
        c *= 2
    levels |= {max(1, max_num_seqs * k // 4) for k in (1, 2, 3)}
    return sorted(levels)


def timer_for(model: ModelDims, device: str, *, block_size: int, tensor_parallel_size: int, dtype_size: int,
              quantization: str | None, images: Images, step: StepModel | None = None) -> Timer | None:  # fmt: skip
    """The time model of the replay (None for a device without one: a host CPU); ``step``: a step model fitted on
    the user's server, in place of the device's roofline."""
    if step is None:
        if not has_time_model(device):
            return None
        step = step_time(model, device, block_size=block_size, tensor_parallel_size=tensor_parallel_size,
                         dtype_size=dtype_size, quantization=quantization)  # fmt: skip
    buckets = sorted(images.buckets or ())

    def bucket(patches: int) -> int:
        i = bisect.bisect_left(buckets, patches)
        return buckets[i] if i < len(buckets) else patches  # above the largest: its own size

    return Timer(step, lambda tokens: max(0, tokens - IMAGE_EXTRA_TOKENS) * round(1 / TOKENS_PER_PATCH), bucket)


def schedules(traffic: Traffic, limits: EngineShape, images: Images, *, concurrency: int | None,
              requests: int = DEFAULT_REQUESTS, seed: int = 0, arrivals: Arrivals | None = None,
              timer: Clocked | None = None, drain: bool = True) -> Schedules:  # fmt: skip
    """The traffic's schedule: under ``arrivals`` (a rate or a profile over time), at ``concurrency`` (else the
    traffic's running requests) or, with none, one per load level (:func:`load_levels`), each weighing the same.
    Every schedule keeps the drain (``drain``) and, with a ``timer``, runs on its clock."""
    if not 1 <= requests <= MAX_REQUESTS:
        raise ConfigError(f"requests to replay {requests} is invalid; accepted: 1 to {MAX_REQUESTS:,}")

    def run(sample: _Sample, load: int | Arrivals) -> tuple[Trace, Counter[Size], int]:
        """The schedule of ``sample`` at ``load``, the images of its requests that ran and the images sampled."""
        prompts, sizes = sample
        if timer is None:
            trace = simulate(prompts, limits, load, drain=drain)
        else:
            trace = simulate(prompts, limits, load, drain=drain, clock=timer.clock, vision_clock=timer.vision_clock)
        return trace, _ran(trace, sizes), sum(size is not None for size in sizes)

    def made(runs: Sequence[tuple[Trace, Counter[Size], int]], balanced: bool, load: str, sampled: int,
             prompts: tuple[Prompt, ...] = ()) -> Schedules:  # fmt: skip
        ran: Counter[Size] = sum((r[1] for r in runs), Counter())
        return Schedules(tuple(r[0] for r in runs), balanced, load, sampled, prompts, tuple(sorted(ran.items())),
                         sum(r[2] for r in runs))  # fmt: skip

    if arrivals is not None and arrivals.timed:
        sample = _sample(traffic, images, requests, seed)
        return made([run(sample, arrivals)], False, arrivals.describe(), requests, sample[0])
    load = concurrency if concurrency is not None else traffic.running
    if load is not None:
        if load < 1:
            raise ConfigError(f"requests running at once {load} is invalid; accepted: an integer >= 1")
        source = "given" if concurrency is not None else "the server's vllm:num_requests_running"
        return made([run(_sample(traffic, images, requests, seed), load)], False, f"{load} requests at once ({source})",
                    requests)  # fmt: skip
    sizes = [(level, max(MIN_LEVEL_REQUESTS, min(requests, 4 * level))) for level in load_levels(limits.max_num_seqs)]
    # each level's schedule stands alone: with many requests, every other one worked out meanwhile on the second
    # core (the same traces); with few, here (a child's start, its pages copied as it writes them and its traces
    # pickled back, costs as much as it saves)
    tasks = [functools.partial(lambda i, level, n: run(_sample(traffic, images, n, seed + i), level), i, level, n)
             for i, (level, n) in enumerate(sizes)]  # fmt: skip
    many = sum(n for _, n in sizes) >= TWO_CORE_REQUESTS
    done = on_two(tasks) if many else [task() for task in tasks]
    levels = ", ".join(str(r[0].concurrency) for r in done)
    return made(done, True, f"unknown: every load level weighs the same ({levels} at once)", sum(n for _, n in sizes))


def load_sweep(
    runs: Schedules, traffic: Traffic, limits: EngineShape, images: Images, requests: int
) -> Schedules | None:
    """Every load level of ``traffic`` beside ``runs`` at one known load or arrivals (None when ``runs`` already weigh
    every level), whatever load the traffic's source observed: a /metrics page's running gauge is one moment's load,
    and planned buckets serve every load, as for the same traffic from a CSV."""
    if runs.balanced:
        return None
    return schedules(dataclasses.replace(traffic, running=None), limits, images, concurrency=None, requests=requests)


def replay_model(model: RuntimeModel, shape: EngineShape, runs: Schedules, label: str,
                 timer: Timer | None = None) -> ReplayResult:  # fmt: skip
    lookup = model.text_lookup(shape)
    if lookup is None:
        raise ConfigError(f"replay models vllm-gaudi's bucket lookup only; {model.name.value} is not modelled")
    return replay(runs.traces, lookup, label, balanced=runs.balanced, timer=timer)


def vision_efficiency(runs: Schedules, images: Images) -> Evaluation | None:
    """The vision buckets on the images of the requests that ran (each image alone in its bucket; above the largest:
    its own size), as ``buckets check`` reports it: None without buckets (nothing is bucketed); an evaluation of no
    image where none ran, text-only traffic included: the runtime warms these buckets all the same, so the figure
    says they went unused rather than vanishing."""
    if not images.buckets:
        return None
    if not runs.images_ran:
        return evaluate({}, images.buckets)
    low, high = images.limits()
    sample = patch_counts(dict(runs.images_ran), min_pixels=low, max_pixels=high, mode=images.mode)
    return evaluate(sample.counts, images.buckets, num_shrunk=sample.num_shrunk)

"""A step-time model fitted on one server's own timings: what a forward step costs as a linear function of its shape,
for a runtime that runs the real shapes (vLLM on CPU, CUDA eager), where no roofline of the device is known.

One step (one forward of the scheduled tokens, vLLM V1's unified batch: prefill chunks and decodes together) costs

    overhead + token_s x tokens + sequence_s x decodes + chunk_s x prefill chunks + pair_s x (query, key) pairs
             + context_s x cached tokens the decodes read

plus, per image encoded in the step, ``image_s + patch_s x patches``. ``tokens`` are the step's scheduled tokens
(prefill chunks and one per decode), ``decodes`` and ``prefill chunks`` the requests it runs in each phase
(sampling, per-request host work, the CPU attention's loop over sequences), and ``pairs`` the attention work:
every query token of a prefill chunk over its context and the causal part of its own chunk; a decode's attention
reads its whole cache once per step (another kernel: on vLLM's CPU backend about a hundred times a prefill pair's
cost per key), priced apart as ``context_s``. A request also waits ``frontend_s`` in
the API server (HTTP, tokenisation) and ``frontend_image_s`` per image (decoding, the processor) before its first
step, outside the engine's clock: the tower's own passes, timed on the engine (the plugin's shape log), tell the
two per-image costs apart.

A request that finds the server idle pays a wake-up on top (``wake_s``, ``wake_image_s`` per image), growing with
how long it stayed idle: ``(wake_s + wake_image_s x images) x (1 - exp(-idle / wake_tau_s))``. On the 2-core VM
the first token of a request arriving after 0.3 s or more of idleness came 7 ms (text) to 30 ms (one image) later
than one arriving right after another (threads and caches gone cold; a back-to-back probe never sees it).

The coefficients are fitted by non-negative least squares on relative error (:func:`fit_step`), a second time without
the worst tenth of the timings (a shared machine's bursts); the model carries
the samples it was fitted on and its interval (the 90th percentile of the relative residuals). It is a property of
one machine, one model and one server configuration: refit after changing any of them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from vllm_hpu_mm.errors import ConfigError

__all__ = [
    "STEP_FIELDS",
    "FittedStep",
    "Observation",
    "fit_step",
    "load_stretch",
    "nonnegative_lstsq",
    "step_from_dict",
    "step_to_dict",
]

#: The coefficients, in the order of an observation's features.
STEP_FIELDS = (
    "overhead_s",
    "token_s",
    "sequence_s",
    "chunk_s",
    "pair_s",
    "image_s",
    "patch_s",
    "frontend_s",
    "frontend_image_s",
    "context_s",
)
#: Fewest observations a fit takes, and the most it reads (a probe is tens to thousands of points).
MIN_OBSERVATIONS = 4
MAX_OBSERVATIONS = 200_000
#: From this many timings the worst tenth (by relative residual) is left out of a second fit; the interval is still
#: taken over all of them.
MIN_TRIMMED = 10
#: The most engine seconds a second of the API server's work may cost (:attr:`FittedStep.frontend_share`).
MAX_FRONTEND_SHARE = 4.0
#: The longest wake-up a fit or a profile may state (seconds), and the longest idle time it ramps over.
MAX_WAKE_S = 10.0
MAX_WAKE_TAU_S = 60.0
#: Active-set rounds of the non-negative fit (one coefficient is dropped per round at most).
_MAX_ROUNDS = len(STEP_FIELDS) + 1


@dataclasses.dataclass(frozen=True)
class Observation:
    """One timed interval and the work in it: ``steps`` forwards of ``tokens`` scheduled tokens, ``sequences``
    decoding requests, ``chunks`` prefill chunks and ``pairs`` attention pairs in all, ``images`` images of
    ``patches`` patches encoded, and ``frontend`` requests passing the API server (1 for a time to first token, 0
    for a gap between tokens)."""

    seconds: float
    steps: float = 1.0
    tokens: float = 0.0
    sequences: float = 0.0
    chunks: float = 0.0
    pairs: float = 0.0
    images: float = 0.0
    patches: float = 0.0
    frontend: float = 0.0
    #: Images passing the API server with those requests (decoded and processed there, off the engine's clock).
    frontend_images: float = 0.0
    #: Cached tokens the step's decodes read (each decode's whole context).
    context: float = 0.0
    kind: str = ""

    def features(self) -> list[float]:
        return [self.steps, self.tokens, self.sequences, self.chunks, self.pairs, self.images, self.patches,
                self.frontend, self.frontend_images, self.context]  # fmt: skip


def causal_pairs(query: int, context: int) -> float:
    """(query, key) pairs of one chunk of ``query`` new tokens over ``context`` cached ones."""
    return query * context + query * (query + 1) / 2


@dataclasses.dataclass(frozen=True)
class FittedStep:
    """A step-time model fitted on a server's timings (see the module docstring); the interface the replay's timer
    prices steps with (:class:`vllm_hpu_mm.replay.timing.StepModel`)."""

    block_size: int
    overhead_s: float
    token_s: float
    sequence_s: float
    chunk_s: float
    pair_s: float
    image_s: float
    patch_s: float
    frontend_s: float
    #: Where the timings came from, how many were fitted, and the relative interval of one step's time (the 90th
    #: percentile of |measured / fitted - 1| over the fit's observations).
    source: str
    samples: int
    interval: float
    #: The fit's observations by kind (e.g. "ttft": 12, "itl": 40).
    kinds: tuple[tuple[str, int], ...] = ()
    #: Prefill and decode run in one forward per step (vLLM V1's model runner); False: each phase its own forward
    #: (vllm-gaudi), each paying the overhead.
    unified: bool = True
    #: The API server's own time per image of a request (decoding and the processor), beside ``frontend_s``.
    frontend_image_s: float = 0.0
    #: A decode's time per cached token it reads (its attention over its context).
    context_s: float = 0.0
    #: Engine seconds lost per second of the API server's work (``frontend_for``) while it runs: on vLLM's default
    #: CPU binding the API server and the engine core share one core (0: the API server has its own; above 1: its
    #: work also spreads over the engine's cores).
    frontend_share: float = 0.0
    #: A request arriving at an idle server waits this much more (and ``wake_image_s`` per image), ramping up over
    #: ``wake_tau_s`` of idleness (:meth:`wake_for`); 0: not measured.
    wake_s: float = 0.0
    wake_image_s: float = 0.0
    wake_tau_s: float = 0.0

    def wake_for(self, idle_s: float, images: int) -> float:
        """The wake-up of a request of ``images`` images arriving after ``idle_s`` seconds with nothing in flight."""
        if self.wake_tau_s <= 0 or idle_s <= 0:
            return 0.0
        return (self.wake_s + self.wake_image_s * images) * -math.expm1(-idle_s / self.wake_tau_s)

    def load_stretch(self, frontend_per_s: float) -> float:
        """How much longer the engine's steps take while the API server takes in ``frontend_per_s`` seconds of work
        per second (requests/s x :meth:`frontend_for`): the engine loses ``frontend_share`` of it. Capped at 10x
        (the API server then is the bottleneck, which the engine's clock cannot show)."""
        return load_stretch(self.frontend_share, frontend_per_s)

    def frontend_for(self, images: int) -> float:
        """The API server's time for one request of ``images`` images, before the engine sees it."""
        return self.frontend_s + self.frontend_image_s * images

    def _check(self, **values: int) -> None:
        for name, value in values.items():
            if value < 0:
                raise ConfigError(f"step shape {name}={value} is invalid; accepted: an integer >= 0")

    def chunks_s(self, chunks: Sequence[tuple[int, int]]) -> float:
        """One forward running these (query tokens, context blocks) prefill chunks."""
        tokens = pairs = 0.0
        for q, c in chunks:
            self._check(query_tokens=q, context_blocks=c)
            tokens += q
            pairs += causal_pairs(q, c * self.block_size)
        n = sum(1 for q, _ in chunks if q > 0)
        return self.overhead_s + self.token_s * tokens + self.chunk_s * n + self.pair_s * pairs

    def prefill_s(self, batch: int, query_tokens: int, context_blocks: int) -> float:
        self._check(batch=batch)
        return self.chunks_s([(query_tokens, context_blocks)] * batch) if batch else self.overhead_s

    def decode_s(self, batch: int, blocks: int) -> float:
        """One decode forward of ``batch`` sequences holding ``blocks`` KV blocks in all."""
        self._check(batch=batch, blocks=blocks)
        keys = blocks * self.block_size
        return self.overhead_s + (self.token_s + self.sequence_s) * batch + self.context_s * keys

    def vision_s(self, patches: int) -> float:
        """Encoding one image of ``patches`` patches."""
        self._check(patches=patches)
        return self.image_s + self.patch_s * patches if patches else 0.0

    def predict(self, o: Observation) -> float:
        coef = [getattr(self, name) for name in STEP_FIELDS]
        return float(sum(c * f for c, f in zip(coef, o.features(), strict=True)))

    def describe(self) -> str:
        return (f"step time fitted on {self.source}: {self.samples} timings, one step "
                f"±{self.interval:.0%} (90% of the fit's timings)")  # fmt: skip


#: The most a load stretches a step (:func:`load_stretch`): past it the API server is the bottleneck.
MAX_LOAD_STRETCH = 10.0


def load_stretch(share: float, frontend_per_s: float) -> float:
    """How much longer an engine's steps take while its API server takes in ``frontend_per_s`` seconds of work per
    second and the engine loses ``share`` of it (:attr:`FittedStep.frontend_share`); at most
    :data:`MAX_LOAD_STRETCH`."""
    lost = share * max(0.0, frontend_per_s)
    return 1.0 / max(1.0 / MAX_LOAD_STRETCH, 1.0 - lost)


def nonnegative_lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares with every coefficient >= 0: refit without the most negative one until none is (bounded)."""
    active = list(range(a.shape[1]))
    x = np.zeros(a.shape[1])
    for _ in range(_MAX_ROUNDS):
        if not active:
            break
        sol, *_ = np.linalg.lstsq(a[:, active], b, rcond=None)
        if (sol >= 0).all():
            x[:] = 0.0
            x[active] = sol
            return x
        active.pop(int(np.argmin(sol)))
    x[:] = 0.0
    return x


def fit_step(observations: Sequence[Observation], *, block_size: int, source: str,
             fixed: Mapping[str, float] | None = None) -> FittedStep:  # fmt: skip
    """The coefficients that best explain ``observations`` (relative error, all >= 0). ``fixed`` pins coefficients
    by name (e.g. ``{"image_s": 0.0}`` when no observation has an image)."""
    if not MIN_OBSERVATIONS <= len(observations) <= MAX_OBSERVATIONS:
        raise ConfigError(f"a step fit needs {MIN_OBSERVATIONS} to {MAX_OBSERVATIONS:,} timings; got "
                          f"{len(observations)}")  # fmt: skip
    if block_size < 1:
        raise ConfigError(f"block size {block_size} is invalid; accepted: an integer >= 1")
    good = [o for o in observations if o.seconds > 0 and math.isfinite(o.seconds)]
    if len(good) < MIN_OBSERVATIONS:
        raise ConfigError(f"a step fit needs {MIN_OBSERVATIONS} positive timings; got {len(good)}")
    pinned = dict(fixed or {})
    unknown = set(pinned) - set(STEP_FIELDS)
    if unknown:
        raise ConfigError(f"cannot pin {', '.join(sorted(unknown))}; accepted: {', '.join(STEP_FIELDS)}")
    feats = np.array([o.features() for o in good], dtype=float)
    y = np.array([o.seconds for o in good], dtype=float)
    free = [i for i, name in enumerate(STEP_FIELDS) if name not in pinned and feats[:, i].any()]
    known = np.zeros(len(STEP_FIELDS))
    for i, name in enumerate(STEP_FIELDS):
        known[i] = pinned.get(name, 0.0)
    rest = y - feats @ known
    # relative error: each row scaled by its own measurement (at least a tenth of the median one: a near-zero timing
    # would outweigh every other), and each feature by its scale (conditioning)
    y_scale = np.maximum(y, 0.1 * float(np.median(y)))
    scale = np.maximum(np.abs(feats[:, free]).max(axis=0), 1e-30) if free else np.ones(0)

    def solve(rows: np.ndarray) -> np.ndarray:
        coef = known.copy()
        if free:
            a = feats[rows][:, free] / scale / y_scale[rows][:, None]
            sol = nonnegative_lstsq(a, rest[rows] / y_scale[rows]) / scale
            for k, i in enumerate(free):
                coef[i] = sol[k]
        return coef

    coef = solve(np.arange(len(good)))
    trimmed = 0
    if len(good) >= MIN_TRIMMED:  # one round without the worst tenth: a timing caught by another job's burst
        rel = np.abs(feats @ coef - y) / y_scale  # the residual the fit weighs
        trimmed = len(good) // 10
        coef = solve(np.argsort(rel)[: len(good) - trimmed])
    values = dict(zip(STEP_FIELDS, (float(c) for c in coef), strict=True))
    fitted = feats @ coef
    rel = np.abs(y / np.maximum(fitted, 1e-12) - 1.0)
    kinds: dict[str, int] = {}
    for o in good:
        kinds[o.kind or "timing"] = kinds.get(o.kind or "timing", 0) + 1
    if trimmed:
        kinds["left out of the fit"] = trimmed
    return _step(block_size, values, source=source, samples=len(good), interval=float(np.quantile(rel, 0.9)),
                 kinds=tuple(sorted(kinds.items())))  # fmt: skip


def _step(block_size: int, values: Mapping[str, float], *, source: str, samples: int, interval: float,
          kinds: tuple[tuple[str, int], ...], unified: bool = True) -> FittedStep:  # fmt: skip
    v = values
    return FittedStep(block_size, v["overhead_s"], v["token_s"], v["sequence_s"], v["chunk_s"], v["pair_s"],
                      v["image_s"], v["patch_s"], v["frontend_s"], source, samples, interval, kinds,
                      unified, v.get("frontend_image_s", 0.0), v.get("context_s", v["pair_s"]))  # fmt: skip


def step_to_dict(s: FittedStep) -> dict[str, Any]:
    return {
        "block_size": s.block_size,
        "coefficients": {name: getattr(s, name) for name in STEP_FIELDS},
        "source": s.source,
        "samples": s.samples,
        "interval": round(s.interval, 4),
        "kinds": dict(s.kinds),
        "unified": s.unified,
        "frontend_share": s.frontend_share,
        "wake": {"s": s.wake_s, "image_s": s.wake_image_s, "tau_s": s.wake_tau_s},
    }


def step_from_dict(data: object, where: str) -> FittedStep:
    """A fitted step model read back (a profile's ``step_time``); :class:`ConfigError` naming ``where`` and the bad
    key."""
    if not isinstance(data, dict) or not isinstance(data.get("coefficients"), dict):
        raise ConfigError(
            f"{where}: step_time is not an object with coefficients; accepted: the step_time that `memory calibrate "
            "--metrics` writes"
        )
    values: dict[str, float] = {}
    coefficients = data["coefficients"]
    for name in STEP_FIELDS:
        if name not in coefficients:
            # a profile from before the decode's own context cost: its decodes were priced at the pair cost
            coefficients = {**coefficients, name: coefficients.get("pair_s", 0.0) if name == "context_s" else 0.0}
        v = coefficients[name]
        if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
            raise ConfigError(f"{where}: step_time.coefficients.{name}={v!r}; accepted: a non-negative number")
        values[name] = float(v)
    block, samples, interval = data.get("block_size"), data.get("samples"), data.get("interval")
    if not isinstance(block, int) or block < 1 or not isinstance(samples, int) or samples < 0:
        raise ConfigError(f"{where}: step_time needs block_size >= 1 and samples >= 0 (integers)")
    if not isinstance(interval, int | float) or not 0 <= interval < 1e6:
        raise ConfigError(f"{where}: step_time.interval={interval!r}; accepted: a number >= 0")
    kinds = data.get("kinds") or {}
    if not isinstance(kinds, dict) or not all(isinstance(k, str) and isinstance(n, int) for k, n in kinds.items()):
        raise ConfigError(f"{where}: step_time.kinds is not an object of counts; accepted: kind -> integer count")
    share = data.get("frontend_share", 0.0)
    if not isinstance(share, int | float) or isinstance(share, bool) or not 0 <= share <= MAX_FRONTEND_SHARE:
        raise ConfigError(f"{where}: step_time.frontend_share={share!r}; accepted: a number from 0 to "
                          f"{MAX_FRONTEND_SHARE:g}")  # fmt: skip
    wake = data.get("wake", {})  # a profile from before the wake-up was measured: none
    if not isinstance(wake, dict):
        raise ConfigError(
            f"{where}: step_time.wake is not an object; accepted: an object of seconds (s, image_s, tau_s)"
        )
    woke: dict[str, float] = {}
    for key, top in (("s", MAX_WAKE_S), ("image_s", MAX_WAKE_S), ("tau_s", MAX_WAKE_TAU_S)):
        v = wake.get(key, 0.0)
        if not isinstance(v, int | float) or isinstance(v, bool) or not 0 <= v <= top:
            raise ConfigError(f"{where}: step_time.wake.{key}={v!r}; accepted: a number from 0 to {top:g}")
        woke[key] = float(v)
    step = _step(block, values, source=str(data.get("source", where)), samples=samples, interval=float(interval),
                 kinds=tuple(sorted(kinds.items())), unified=bool(data.get("unified", True)))  # fmt: skip
    return dataclasses.replace(step, frontend_share=float(share), wake_s=woke["s"], wake_image_s=woke["image_s"],
                               wake_tau_s=woke["tau_s"])  # fmt: skip

"""A step-time fit from a running server's ``/metrics`` (a URL or a saved exposition, read bounded: deadline and size
cap, :func:`vllm_hpu_mm.traffic.metrics.read_exposition`), for ``memory calibrate --metrics``.

vLLM 0.32 exports (``v1/metrics/loggers.py``) histograms whose sums and counts pin a two-term step model, one step
costing ``overhead + token_s x tokens``:

- ``vllm:inter_token_latency_seconds``: one decode step, at the server's mean decode batch ``B``, taken as the
  generation tokens (``vllm:request_generation_tokens``) over the engine's iterations
  (``vllm:iteration_tokens_total``'s count): ``ITL = overhead + token_s x B``;
- ``vllm:request_prefill_time_seconds`` and ``vllm:request_prompt_tokens``: a prompt of ``T`` tokens (the mean) is
  prefilled in about one step shared with ``B`` decodes: ``prefill = overhead + token_s x (T + B)``;
- ``vllm:time_to_first_token_seconds`` less the queue (``vllm:request_queue_time_seconds``) and the prefill is the
  API server's own time per request (``frontend_s``).

Sums and counts give means only: attention's growth with context and the vision tower are not separated (they are
averaged into the two terms), and the interval is the inter-token histogram's spread (its 10th to 90th percentile
about the mean, as a share, each bounded by its bucket's edges: never narrower than the buckets resolve). A probe of
known shapes (``tests/support/probe.py``, used by the server check) separates more.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.step_fit import FittedStep
from vllm_hpu_mm.traffic.metrics import families, read_exposition

#: The flag that names the page (errors name it as typed).
FLAG = "--metrics"

__all__ = ["ServerTimes", "TooFewSamples", "fit_from_metrics", "server_times"]

ITL = "vllm:inter_token_latency_seconds"
PREFILL = "vllm:request_prefill_time_seconds"
TTFT = "vllm:time_to_first_token_seconds"
QUEUE = "vllm:request_queue_time_seconds"
PROMPT = "vllm:request_prompt_tokens"
GENERATION = "vllm:request_generation_tokens"
ITERATION = "vllm:iteration_tokens_total"
#: Fewest samples each histogram needs before a fit is taken from it.
MIN_SAMPLES = 3


class TooFewSamples(ConfigError):
    """A valid page that measures nothing yet (a server that has served too little): a negative finding for
    ``memory calibrate`` (exit 1, no profile), not invalid input."""


@dataclasses.dataclass(frozen=True)
class Histogram:
    total: float
    count: float
    #: (upper edge, cumulative count), sorted, +Inf last.
    buckets: tuple[tuple[float, float], ...]

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def lower(self, q: float) -> float:
        """The lower edge of the bucket holding the ``q`` quantile (0 for the first bucket): with :meth:`quantile`,
        the bounds the page pins that quantile between."""
        below = 0.0
        for edge, cum in self.buckets:
            if cum >= q * self.count:
                return below
            below = edge if math.isfinite(edge) else below
        return below

    def quantile(self, q: float) -> float:
        """The upper edge of the bucket holding the ``q`` quantile (the last finite edge for +Inf)."""
        finite = [e for e, _ in self.buckets if math.isfinite(e)]
        for edge, cum in self.buckets:
            if cum >= q * self.count:
                return edge if math.isfinite(edge) else (finite[-1] if finite else self.mean)
        return finite[-1] if finite else self.mean


@dataclasses.dataclass(frozen=True)
class ServerTimes:
    """The histograms a fit reads, summed over engines and label sets."""

    source: str
    histograms: dict[str, Histogram]

    def get(self, name: str) -> Histogram | None:
        """A histogram by its name (with or without a ``_total`` suffix: parsers differ on keeping it)."""
        return self.histograms.get(name) or self.histograms.get(name.removesuffix("_total"))


def _histograms(fams: list[Any], source: str) -> dict[str, Histogram]:
    out: dict[str, Histogram] = {}
    for f in fams:
        if f.type != "histogram":
            continue
        name = f.name
        if not name.startswith("vllm:"):
            continue
        total = count = 0.0
        edges: dict[float, float] = {}
        for s in f.samples:
            v = float(s.value)
            if not math.isfinite(v) or v < 0:
                raise ConfigError(f"--metrics {source}: {s.name} has value {s.value}; expected a count or sum >= 0")
            if s.name.endswith("_sum"):
                total += v
            elif s.name.endswith("_count"):
                count += v
            elif s.name.endswith("_bucket"):
                le = float(s.labels.get("le", "inf"))
                edges[le] = edges.get(le, 0.0) + v
        out[name] = Histogram(total, count, tuple(sorted(edges.items())))
    return out


def server_times(source: str, model_name: str | None = None) -> ServerTimes:
    """The histograms of a ``/metrics`` URL or saved exposition (read bounded), of one model's series."""
    fams = families(read_exposition(source, flag=FLAG), source, FLAG, model_name)
    return ServerTimes(source, _histograms(fams, source))


def fit_from_metrics(times: ServerTimes, *, block_size: int) -> FittedStep:
    """The two-term step model of the module docstring; :class:`ConfigError` when the page lacks the histograms or
    has too few samples (a server that served nothing yet)."""
    need = (ITL, PREFILL, PROMPT, GENERATION, ITERATION)
    missing = [n for n in need if times.get(n) is None]
    if missing:
        raise ConfigError(f"--metrics {times.source}: no {', '.join(missing)} histogram; expected vLLM's own /metrics "
                          "page (V1 engine, 0.32 or later)")  # fmt: skip
    itl, prefill, prompt, gen, it = (h for n in need if (h := times.get(n)) is not None)
    few = [f"{n} {h.count:g}" for n, h in zip(need, (itl, prefill, prompt, gen, it), strict=True)
           if h.count < MIN_SAMPLES]  # fmt: skip
    if few:
        raise TooFewSamples(f"--metrics {times.source}: too few samples ({', '.join(few)}; at least {MIN_SAMPLES} "
                            "needed in each); let the server serve some requests first")  # fmt: skip
    batch = gen.total / it.count  # decode tokens per engine iteration
    tokens = prompt.mean
    per_token = max(0.0, (prefill.mean - itl.mean) / tokens) if tokens > 0 else 0.0
    overhead = itl.mean - per_token * batch
    if overhead < 0:  # the decode step is all per-token work
        overhead, per_token = 0.0, itl.mean / max(batch, 1e-9)
    frontend = 0.0
    ttft, queue = times.get(TTFT), times.get(QUEUE)
    if ttft is not None and ttft.count >= MIN_SAMPLES:
        frontend = max(0.0, ttft.mean - (queue.mean if queue is not None else 0.0) - prefill.mean)
    # the page bounds each quantile by its bucket's edges: the 10th percentile from below (its bucket's lower edge),
    # the 90th from above, so a spread inside one bucket is that bucket's width, never 0
    spread = (itl.quantile(0.9) - itl.lower(0.1)) / 2 / itl.mean if itl.mean > 0 else 0.0
    samples = int(itl.count + prefill.count)
    return FittedStep(block_size=block_size, overhead_s=overhead, token_s=per_token, sequence_s=0.0, chunk_s=0.0,
                      pair_s=0.0,
                      image_s=0.0, patch_s=0.0, frontend_s=frontend, source=f"/metrics of {times.source}",
                      samples=samples, interval=spread,
                      kinds=(("inter-token", int(itl.count)), ("prefill", int(prefill.count))))  # fmt: skip

"""Calibrate the plan's graph costs from a warm-up log, save them as a profile, and apply a profile to a plan.

What the runtimes print, and what is measured from it:

- vllm-gaudi and HabanaAI vllm-fork (``hpu_model_runner.py`` ``log_warmup``): ``[Warmup][Graph/Prompt|Graph/Decode]
  [i/n] batch_size:B seq_len:S|query_len:Q num_blocks:K free_mem:X`` is printed *before* each graph is captured, so
  the drop in ``free_mem`` to the next such line is that graph's cost. ``Graph/Prompt captured:N (..%) used_mem:X
  buckets:[(B, S), ...]`` (vllm-fork) gives the total of a phase with its buckets. Each becomes a measured factor:
  measured bytes / the text model's eager estimate for the same shapes (:mod:`.text_cost`).
- vllm-gaudi's multimodal warm-up (``log_warmup_multimodal``): ``[Warmup][Graph/Multimodal...][i/n] batch_size:B
  seq_len:S resolution:WxH free_mem:X`` is printed *after* each image shape ran, so the drop *to* that line is its
  cost. Shapes are grouped by their vision bucket, and a line through the per-bucket costs gives the vision graph's
  MiB per patch and fixed MiB (:mod:`.vision_cost`).
- ``Free device memory: X GiB, ... usable ...`` (both): free memory after weights and profiling, measured.
- vLLM on CUDA: ``Graph capturing finished in N secs, took X GiB`` or ``... and X GiB for CUDAGraph memory``. These
  are kept in the profile as measured totals. They are not applied to the plan, because vLLM sizes its CUDA graphs
  itself.

Lines elided with ``...`` (as in published samples) break a pair: no cost is read across them. When every worker
prints its own lines, only the first worker's are read.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable, Sequence

from vllm_hpu_mm.buckets.packing import bucket_for
from vllm_hpu_mm.logs.numbers import GarbledNumber, SkippedLines, integer, number
from vllm_hpu_mm.logs.patterns import (
    BUCKET_PAIR,
    CUDA_CAPTURE_SIZES,
    CUDA_GRAPH_MEMORY,
    GAUDI_MEMORY,
    MODEL,
    PHASE_TOTAL,
    SHAPE_FIELD,
    WARMUP_FREE_MEM,
    WORKER,
    RuntimeSniffer,
    size_bytes,
)
from vllm_hpu_mm.models.dims import ModelDims
from vllm_hpu_mm.models.step_fit import FittedStep
from vllm_hpu_mm.plan import text_cost, vision_cost
from vllm_hpu_mm.plan.costs import COST_FIELDS, CostProfile
from vllm_hpu_mm.values import DEFAULT_BUCKETS, GIB, MIB

__all__ = ["Calibration", "GraphSample", "PhaseTotal", "WarmupLog", "calibrate", "parse_warmup"]


@dataclasses.dataclass(frozen=True)
class GraphSample:
    """One graph's measured cost: phase (prompt, decode, multimodal), its shape fields and the free-memory drop."""

    phase: str
    fields: tuple[tuple[str, int], ...]
    cost_bytes: int
    line: int

    def get(self, name: str, default: int = 0) -> int:
        return dict(self.fields).get(name, default)


@dataclasses.dataclass(frozen=True)
class PhaseTotal:
    phase: str
    captured: int
    used_bytes: int
    buckets: tuple[tuple[int, int], ...]
    line: int


@dataclasses.dataclass(frozen=True)
class WarmupLog:
    samples: tuple[GraphSample, ...]
    totals: tuple[PhaseTotal, ...]
    free_after_load_bytes: int | None
    gpu_memory_utilization: float | None
    cuda_graph_bytes: int | None
    cuda_capture_sizes: int | None
    model: str | None
    backend: str | None
    #: Lines left out because a figure in them is garbled (interleaved output).
    skipped: SkippedLines = dataclasses.field(default_factory=SkippedLines, compare=False)


def _kind(phase: str) -> str:
    p = phase.lower()
    return "multimodal" if "multimodal" in p else "prompt" if "prompt" in p else "decode" if "decode" in p else p


def parse_warmup(lines: Iterable[str]) -> WarmupLog:
    """Read the warm-up and memory lines of a log (any runtime); see the module docstring."""
    raw: list[tuple[int, str, int, tuple[tuple[str, int], ...], int]] = []  # (line, phase, i, fields, free)
    gaps: list[int] = []
    totals: list[PhaseTotal] = []
    free = util = cuda = sizes = None
    model = None
    worker: str | None = None
    seen: set[tuple[str, int]] = set()
    backend = RuntimeSniffer()
    skipped = SkippedLines()
    for k, text in enumerate(lines):
        if text.strip() in ("...", "…"):
            gaps.append(k)
            continue
        backend.feed(text)
        if model is None and (m := MODEL.search(text)):
            model = m["model"]
        try:
            read = _figures(text)
        except GarbledNumber as exc:
            skipped.add(k + 1, text, exc)
            continue
        if isinstance(read, _Warmup):
            who = WORKER.match(text)
            tag = who["who"] if who else ""
            worker = tag if worker is None else worker
            if tag != worker or (read.phase, read.i) in seen:
                continue  # another worker's copy of the same warm-up
            seen.add((read.phase, read.i))
            raw.append((k, read.phase, read.i, read.fields, read.free))
        elif isinstance(read, PhaseTotal):
            totals.append(dataclasses.replace(read, line=k))
        elif isinstance(read, tuple):
            free, util = read
        elif isinstance(read, int):
            cuda = read
        if sizes is None and (s := CUDA_CAPTURE_SIZES.search(text)) is not None:
            sizes = len([v for v in s["sizes"].split(",") if v.strip()])
    return WarmupLog(tuple(_costs(raw, gaps)), tuple(totals), free, util, cuda, sizes, model, backend.name, skipped)


@dataclasses.dataclass(frozen=True)
class _Warmup:
    phase: str
    i: int
    fields: tuple[tuple[str, int], ...]
    free: int


def _figures(text: str) -> _Warmup | PhaseTotal | tuple[int, float] | int | None:
    """The figures of a warm-up line, a phase total, the memory split (free bytes, utilisation) or the CUDA graph
    bytes, read strictly (a garbled figure raises :class:`GarbledNumber`); None for any other line."""
    if (w := WARMUP_FREE_MEM.search(text)) is not None:
        fields = tuple((name, integer(a) * integer(b) if b else integer(a))
                       for name, a, b in SHAPE_FIELD.findall(w["fields"]))  # fmt: skip
        return _Warmup(w["phase"], integer(w["i"]), fields, size_bytes(w))
    if (t := PHASE_TOTAL.search(text)) is not None:
        buckets = tuple((integer(a), integer(b)) for a, b in BUCKET_PAIR.findall(t["b"] or ""))
        return PhaseTotal(_kind(t["phase"]), integer(t["n"]), size_bytes(t), buckets, -1)
    if (f := GAUDI_MEMORY.search(text)) is not None:
        return round(number(f["free"]) * GIB), number(f["util"])
    if (c := CUDA_GRAPH_MEMORY.search(text)) is not None:
        return round(number(c["gib"] or c["gib2"]) * GIB)
    return None


def _costs(
    raw: Sequence[tuple[int, str, int, tuple[tuple[str, int], ...], int]], gaps: Sequence[int]
) -> list[GraphSample]:
    """Text graphs log free memory before their capture (cost = drop to the next text line); multimodal shapes log
    it after (cost = drop from the previous multimodal line, so the very first shape is not measured). Pairs across
    an elided stretch, or between text and multimodal lines, are not read."""
    out = []
    for (k0, phase0, _i0, fields0, free0), (k1, phase1, _i1, fields1, free1) in itertools.pairwise(raw):
        if any(k0 < g < k1 for g in gaps):
            continue
        kind0, kind1 = _kind(phase0), _kind(phase1)
        if kind0 == kind1 == "multimodal":
            out.append(GraphSample("multimodal", fields1, max(0, free0 - free1), k1))
        elif kind0 in ("prompt", "decode") and kind1 in ("prompt", "decode"):
            out.append(GraphSample(kind0, fields0, max(0, free0 - free1), k0))
    return out


# --- fitting ---------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Calibration:
    """What a log measured, the profile it makes, and how each number was obtained."""

    profile: CostProfile
    #: (name, value, how) rows for the report, measured ones first.
    rows: tuple[tuple[str, str, str], ...]
    free_after_load_bytes: int | None
    cuda_graph_bytes: int | None
    cuda_capture_sizes: int | None
    model: str | None
    backend: str | None
    device: str | None
    #: A step-time model fitted on the server's own timings (``--metrics``), when given.
    step_time: FittedStep | None = None

    @property
    def measured_anything(self) -> bool:
        return (
            bool(self.profile.measured)
            or self.free_after_load_bytes is not None
            or self.cuda_graph_bytes is not None
            or self.step_time is not None
        )

    def with_step_time(self, step: FittedStep) -> Calibration:
        """This calibration with a step-time fit added (a report row saying what it rests on)."""
        row = ("step_time", f"{1000 * step.overhead_s:.2f} ms", f"measured: {step.describe()}; per token "
               f"{1e6 * step.token_s:.1f} us, API server {1000 * step.frontend_s:.1f} ms per request")  # fmt: skip
        return dataclasses.replace(self, step_time=step, rows=(row, *self.rows))


def _prompt_factor(log: WarmupLog, m: ModelDims, dtype: int, tp: int) -> tuple[float, str] | None:
    per_token = text_cost.eager_bytes_per_token(m, dtype, tp)
    total = next((t for t in log.totals if t.phase == "prompt" and t.buckets), None)
    if total is not None:
        tokens = sum(b * s for b, s in total.buckets)
        return total.used_bytes / (
            tokens * per_token
        ), f"{total.captured} prompt graphs, used_mem {total.used_bytes / GIB:.2f} GiB (line {total.line + 1})"
    samples = [s for s in log.samples if s.phase == "prompt" and s.cost_bytes > 0]
    if not samples:
        return None
    tokens = sum(s.get("batch_size", 1) * (s.get("seq_len") or s.get("query_len")) for s in samples)
    if tokens <= 0:
        return None
    cost = sum(s.cost_bytes for s in samples)
    return cost / (tokens * per_token), f"{len(samples)} prompt graphs, free_mem drops totalling {cost / GIB:.2f} GiB"


def _decode_factor(log: WarmupLog, m: ModelDims, dtype: int, tp: int, block: int) -> tuple[float, str] | None:
    def eager(batch: int, blocks: int) -> int:
        return text_cost.decode_eager_bytes(m, dtype_size=dtype, tp=tp, block_size=block, batch=batch, blocks=blocks)

    total = next((t for t in log.totals if t.phase == "decode" and t.buckets), None)
    if total is not None:  # vllm-fork decode buckets are (batch, context length)
        est = sum(eager(b, b * math.ceil(s / block)) for b, s in total.buckets)
        return (
            total.used_bytes / est,
            f"{total.captured} decode graphs, used_mem {total.used_bytes / MIB:.1f} MiB (line {total.line + 1})",
        )
    samples = [s for s in log.samples if s.phase == "decode" and s.cost_bytes > 0]
    if not samples:
        return None
    est = 0
    for s in samples:
        batch = s.get("batch_size", 1)
        blocks = s.get("num_blocks") or batch * math.ceil(s.get("seq_len", block) / block)
        est += eager(batch, blocks)
    cost = sum(s.cost_bytes for s in samples)
    return cost / est, f"{len(samples)} decode graphs, free_mem drops totalling {cost / MIB:.1f} MiB"


def _patches(sample: GraphSample, buckets: Sequence[int]) -> int | None:
    """The vision bucket a multimodal warm-up shape ran in: from seq_len when the runtime logs it, else from the
    resolution (14-px patches)."""
    if sample.get("seq_len"):
        return sample.get("seq_len")
    pixels = sample.get("resolution")
    if not pixels:
        return None
    return bucket_for(math.ceil(pixels / 196), buckets) or None


def _vision_fit(log: WarmupLog, buckets: Sequence[int]) -> tuple[float, float, str] | None:
    per_bucket: dict[int, int] = {}
    for s in log.samples:
        if s.phase == "multimodal" and (b := _patches(s, buckets)) is not None:
            per_bucket[b] = per_bucket.get(b, 0) + s.cost_bytes
    points = [(b, c / MIB) for b, c in sorted(per_bucket.items()) if c > 0]
    if not points:
        return None
    if len(points) == 1:  # one size: scale the built-in line through it
        b, mib = points[0]
        est = vision_cost.graph_pool_bytes(b) / MIB
        k = mib / est
        return (
            vision_cost.GRAPH_POOL_MIB_PER_PATCH * k,
            vision_cost.GRAPH_POOL_FIXED_MIB * k,
            f"1 bucket ({b}: {mib:.0f} MiB), built-in line scaled",
        )
    n = len(points)
    mx = sum(b for b, _ in points) / n
    my = sum(c for _, c in points) / n
    sxx = sum((b - mx) ** 2 for b, _ in points)
    slope = sum((b - mx) * (c - my) for b, c in points) / sxx if sxx else 0.0
    fixed = my - slope * mx
    return slope, fixed, f"least squares over {n} buckets ({', '.join(f'{b}: {c:.0f} MiB' for b, c in points)})"


def calibrate(
    log: WarmupLog,
    model: ModelDims | None,
    *,
    device: str | None,
    source: str,
    dtype_size: int = 2,
    tensor_parallel_size: int = 1,
    block_size: int = 128,
    buckets: Sequence[int] = DEFAULT_BUCKETS,
) -> Calibration:
    """Fit the profile's coefficients to ``log``. Text factors need the model the log ran (``model``)."""
    values: dict[str, float] = {}
    rows: list[tuple[str, str, str]] = []
    if model is not None:
        prompt = _prompt_factor(log, model, dtype_size, tensor_parallel_size)
        decode = _decode_factor(log, model, dtype_size, tensor_parallel_size, block_size)
        for name, found in (("text_prefill_factor", prompt), ("text_decode_factor", decode)):
            if found is not None:
                values[name] = round(found[0], 4)
                rows.append(
                    (name, f"{found[0]:.3f}", f"measured: {found[1]}; built-in estimate {text_cost.GRAPH_POOL_FACTOR}")
                )
    vision = _vision_fit(log, buckets)
    if vision is not None:
        values["vision_mib_per_patch"], values["vision_fixed_mib"] = round(vision[0], 5), round(vision[1], 2)
        rows.append(("vision_mib_per_patch", f"{vision[0]:.4f}", f"measured: {vision[2]}"))
        rows.append(("vision_fixed_mib", f"{vision[1]:.1f}", "measured: same fit"))
    measured = tuple(name for name in COST_FIELDS if name in values)
    profile = CostProfile(
        vision_mib_per_patch=values.get("vision_mib_per_patch"),
        vision_fixed_mib=values.get("vision_fixed_mib"),
        text_prefill_factor=values.get("text_prefill_factor"),
        text_decode_factor=values.get("text_decode_factor"),
        measured=measured,
        source=f"{source} ({device or 'device not stated'}, {model.name if model else 'model unknown'})",
    )
    for name in COST_FIELDS:
        if name not in values:
            why = (
                "the log has no such warm-up lines"
                if model is not None or not name.startswith("text")
                else "the log's model is unknown: pass --model"
            )
            rows.append((name, "-", f"estimated (built-in); not measured: {why}"))
    if log.free_after_load_bytes is not None:
        rows.insert(
            0,
            (
                "free_after_load_gib",
                f"{log.free_after_load_bytes / GIB:.2f}",
                "measured: the 'Free device memory' line",
            ),
        )
    if log.cuda_graph_bytes is not None:
        per = (
            f", {log.cuda_graph_bytes / log.cuda_capture_sizes / MIB:.1f} MiB per capture size "
            f"({log.cuda_capture_sizes} sizes)"
            if log.cuda_capture_sizes
            else ""
        )
        rows.insert(
            0,
            (
                "cuda_graph_gib",
                f"{log.cuda_graph_bytes / GIB:.2f}",
                f"measured: vLLM's CUDA graph memory{per}; kept, not applied",
            ),
        )
    return Calibration(profile, tuple(rows), log.free_after_load_bytes, log.cuda_graph_bytes, log.cuda_capture_sizes,
                       model.name if model else log.model, log.backend, device)  # fmt: skip

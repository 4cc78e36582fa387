"""Calibrate the plan's graph costs from a warm-up log, save them as a profile, and apply a profile to a plan.

What the runtimes print, and what is measured from it:

- vllm-gaudi and HabanaAI vllm-fork (``hpu_model_runner.py`` ``log_warmup``): ``[Warmup][Graph/Prompt|Graph/Decode]
  [i/n] batch_size:B seq_len:S|query_len:Q num_blocks:K free_mem:X`` is printed *before* each graph is captured, so
  the drop in ``free_mem`` to the next such line is that graph's cost. ``Graph/Prompt captured:N (..%) used_mem:X
  buckets:[(B, S), ...]`` (vllm-fork) gives the total of a phase with its buckets. Each becomes a measured factor:
  measured bytes / the text model's eager estimate for the same shapes (:mod:`.text_cost`).
- vllm-gaudi's summary ``Graph/Prompt|Decode captured:N used_mem:X`` (``hpu_model_runner.py``
  ``log_graph_warmup_summary`` @091bbadd) and vllm-fork 1.22's ``Prompt|Decode captured:N (..%) used_mem:X``
  (v0.9.0.1+Gaudi-1.22.0 L3145-3154) name no buckets: they are the runtime's whole list for the phase (``captured``
  is its length), which it prints when it generates them: ``Generated N prompt|decode buckets [bs, query,
  num_blocks]: [...]`` (``extension/bucketing/common.py`` ``log_generate_info``). The summary is measured with that
  list, else with the phase's per-graph lines where there is one for each graph it counted; without either (or with a
  list of another length) the report says which is missing.
- vllm-gaudi's multimodal warm-up (``log_warmup_multimodal``): ``[Warmup][Graph/Multimodal...][i/n] batch_size:B
  seq_len:S resolution:WxH free_mem:X`` is printed *after* each image shape ran (``embed_multimodal`` then the log
  line: ``hpu_model_runner.py`` L6062-6071 @ v0.26.0), so the drop *to* that line is its cost. Each shape runs padded
  to the least bucket of the list the log printed before them (``Multimodal bucket : [...]``), or unpadded above its
  largest (``extension/bucketing/vision.py`` ``get_multimodal_bucket``); a size's cost is the mean of its shapes
  that took memory, and a line through those costs gives the vision graph's MiB per patch and fixed MiB
  (:mod:`.vision_cost`).
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
from typing import cast

from vllm_hpu_mm.logs.doctor.runs import RunSplitter
from vllm_hpu_mm.logs.numbers import GarbledNumber, SkippedLines, integer, number
from vllm_hpu_mm.logs.patterns import (
    BUCKET_PAIR,
    BUCKET_TUPLE,
    CUDA_CAPTURE_SIZES,
    CUDA_GRAPH_MEMORY,
    ENGINE_LENGTH,
    ENGINE_SHAPE,
    GAUDI_MEMORY,
    GENERATED_BUCKETS,
    MODEL,
    MULTIMODAL_BUCKETS,
    PHASE_TOTAL,
    SHAPE_FIELD,
    WARMUP_FREE_MEM,
    WORKER,
    RuntimeSniffer,
    size_bytes,
)
from vllm_hpu_mm.logs.reading import Purpose
from vllm_hpu_mm.models.dims import ModelDims
from vllm_hpu_mm.models.step_fit import FittedStep
from vllm_hpu_mm.plan import text_cost, vision_cost
from vllm_hpu_mm.plan.costs import COST_FIELDS, CostProfile
from vllm_hpu_mm.plan.profile import MeasuredAt
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
    """A phase's summary: graphs captured, their memory, and the buckets they covered: its own ``buckets:[(B, S),
    ...]`` (vllm-fork), or, for a summary without them (vllm-gaudi), the runtime's generated list for the phase that
    the log printed before it (``listed``, ``[bs, query, num_blocks]``; ``listed_n`` the count that line declares,
    None where the log has no such line)."""

    phase: str
    captured: int
    used_bytes: int
    buckets: tuple[tuple[int, int], ...]
    line: int
    listed: tuple[tuple[int, int, int], ...] = ()
    listed_n: int | None = None
    listed_line: int = -1
    #: The summary as the log printed it, up to its used_mem figure (quoted in the report), and that figure.
    printed: str = ""
    used_printed: str = ""
    #: Where ``listed`` came from when the log printed no generated list: its own per-graph warm-up lines (their
    #: first and last line); empty where it came from the generated list on ``listed_line``.
    listed_lines: str = ""

    @property
    def named(self) -> str:
        """The summary's phase as the log spelled it (``Graph/Prompt``; vllm-fork 1.22: ``Prompt``)."""
        return self.printed.split(" captured:")[0] if self.printed else f"Graph/{self.phase.title()}"

    @property
    def listed_from(self) -> str:
        """Where the buckets the summary covered were read: a line number or the per-graph lines."""
        return self.listed_lines or f"line {self.listed_line + 1}"


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
    #: The free memory and the CUDA graph memory as the log printed them, with their lines (quoted in the report).
    free_quote: _Quoted | None = None
    cuda_quote: _Quoted | None = None
    #: Which run (server start) of how many in the log was read: the last that printed a memory figure.
    run: int = 1
    runs: int = 1
    #: The vision bucket list the run printed (``()`` for ``None``: bucketing off; None: no list printed), its line.
    vision_buckets: tuple[int, ...] | None = None
    vision_buckets_line: int = -1
    #: The run's engine config line, the fields that set what a card holds after load as it printed them
    #: (``tensor_parallel_size``, ``pipeline_parallel_size``, ``quantization``, ``max_model_len``); empty without one.
    engine: tuple[tuple[str, str], ...] = ()


def _kind(phase: str) -> str:
    p = phase.lower()
    return "multimodal" if "multimodal" in p else "prompt" if "prompt" in p else "decode" if "decode" in p else p


def parse_warmup(lines: Iterable[str] | Iterable[tuple[int, str]]) -> WarmupLog:
    """Read the warm-up and memory lines of a log (any runtime), given as lines or ``(line number, text)`` records;
    see the module docstring. A log of several server starts is split into runs as the doctor splits it
    (:class:`~vllm_hpu_mm.logs.doctor.runs.RunSplitter`), and only the last run that printed a memory figure is read:
    a restart's figures are never mixed with the start before it (whose shapes it warms again)."""
    splitter = RunSplitter()
    backend = RuntimeSniffer()
    model = None
    run, chosen = _RunReader(1), None
    records = cast(Iterable[str | tuple[int, str]], lines)  # mypy joins the two iterables' items to a Sequence
    for n, item in enumerate(records):
        k, text = (n, item) if isinstance(item, str) else (item[0] - 1, item[1].rstrip("\r\n"))
        if splitter.feed(text, k + 1):
            chosen = run if run.measured else chosen
            run = _RunReader(splitter.runs)
        backend.feed(text)
        if model is None and (m := MODEL.search(text)):
            model = m["model"]
        run.feed(k, text)
    chosen = run if run.measured or chosen is None else chosen
    return chosen.result(model, backend.name, splitter.runs)


class _RunReader:
    """The figures of one run (one server start) of a log."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.raw: list[tuple[int, str, int, tuple[tuple[str, int], ...], int]] = []  # (line, phase, i, fields, free)
        self.gaps: list[int] = []
        self.totals: list[PhaseTotal] = []
        self.free: _Quoted | None = None
        self.util: float | None = None
        self.cuda: _Quoted | None = None
        self.sizes: int | None = None
        self.model: str | None = None
        self.worker: str | None = None
        self.seen: set[tuple[str, int]] = set()
        #: The runtime's latest generated bucket list by phase, with its line (a summary without buckets covered it).
        self.listed: dict[str, tuple[_Listed, int]] = {}
        self.vision: tuple[tuple[int, ...], int] | None = None
        self.skipped = SkippedLines()
        self.engine: tuple[tuple[str, str], ...] = ()

    @property
    def measured(self) -> bool:
        return bool(self.raw or self.totals) or self.free is not None or self.cuda is not None

    def feed(self, k: int, text: str) -> None:
        if text.strip() in ("...", "…"):
            self.gaps.append(k)
            return
        if self.model is None and (m := MODEL.search(text)):
            self.model = m["model"]
            length = ENGINE_LENGTH.search(text)
            self.engine = tuple((f["key"], f["value"]) for f in ENGINE_SHAPE.finditer(text)) + (
                (("max_model_len", length["n"]),) if length else ()
            )
        try:
            read = _figures(text)
        except GarbledNumber as exc:
            self.skipped.add(k + 1, text, exc)
            return
        if isinstance(read, _Warmup):
            who = WORKER.match(text)
            tag = who["who"] if who else ""
            self.worker = tag if self.worker is None else self.worker
            if tag != self.worker or (read.phase, read.i) in self.seen:
                return  # another worker's copy of the same warm-up
            self.seen.add((read.phase, read.i))
            self.raw.append((k, read.phase, read.i, read.fields, read.free))
        elif isinstance(read, PhaseTotal):
            generated, at = self.listed.get(read.phase, (None, -1))
            if not read.buckets and generated is None:
                self.totals.append(self._graphed(dataclasses.replace(read, line=k)))
            elif read.buckets or generated is None:
                self.totals.append(dataclasses.replace(read, line=k))
            else:
                self.totals.append(dataclasses.replace(read, line=k, listed=generated.buckets, listed_n=generated.n,
                                                       listed_line=at))  # fmt: skip
        elif isinstance(read, _Listed):
            self.listed[read.phase] = (read, k)
        elif isinstance(read, _VisionBuckets):
            self.vision = (read.buckets, k)
        elif isinstance(read, _Free):
            self.free, self.util = dataclasses.replace(read.quoted, line=k), read.util
        elif isinstance(read, _Quoted):
            self.cuda = dataclasses.replace(read, line=k)
        if self.sizes is None and (s := CUDA_CAPTURE_SIZES.search(text)) is not None:
            self.sizes = len([v for v in s["sizes"].split(",") if v.strip()])

    def _graphed(self, total: PhaseTotal) -> PhaseTotal:
        """A summary that names no buckets, in a log with no generated list (vllm-fork 1.22 prints none: its
        ``log_graph_warmup_summary`` counts the manager's whole list, v0.9.0.1+Gaudi-1.22.0 hpu_model_runner.py
        L3145-3154): the buckets are the phase's own per-graph lines, one a graph (``[Warmup][Graph/prompt][i/n]
        batch_size:B query_len:Q num_blocks:K``, L3023-3031), where there is one for each graph it counted."""
        lines = [(k, phase, dict(fields)) for k, phase, _i, fields, _free in self.raw if _kind(phase) == total.phase]
        shapes = tuple((f["batch_size"], f["query_len"], f["num_blocks"]) for _, _, f in lines
                       if {"batch_size", "query_len", "num_blocks"} <= f.keys())  # fmt: skip
        if not lines or len(shapes) != len(lines) or len(shapes) != total.captured:
            return total
        first, last = lines[0][0] + 1, lines[-1][0] + 1
        where = f"line {first}" if first == last else f"lines {first}-{last}"
        return dataclasses.replace(total, listed=shapes, listed_n=len(shapes), listed_line=lines[0][0],
                                   listed_lines=f"its [Warmup][{lines[0][1]}] {where}")  # fmt: skip

    def result(self, model: str | None, backend: str | None, runs: int) -> WarmupLog:
        return WarmupLog(tuple(_costs(self.raw, self.gaps)), tuple(self.totals),
                         None if self.free is None else self.free.bytes, self.util,
                         None if self.cuda is None else self.cuda.bytes, self.sizes, self.model or model, backend,
                         self.skipped, self.free, self.cuda, self.index, runs,
                         None if self.vision is None else self.vision[0],
                         -1 if self.vision is None else self.vision[1], self.engine)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class _Quoted:
    """A figure as the log printed it: its bytes, the text that states it (quoted in the report) and its line."""

    bytes: int
    text: str
    line: int = -1

    def cite(self) -> str:
        return _quote(self.line, self.text)


def _quote(line: int, text: str) -> str:
    """A figure's source as the report cites it: its 1-based line and its words as the log printed them."""
    return f"line {line + 1}: '{text}'"


@dataclasses.dataclass(frozen=True)
class _Free:
    quoted: _Quoted
    util: float


@dataclasses.dataclass(frozen=True)
class _Listed:
    """A runtime's list of the buckets it generated for a phase: the count its line declares and the buckets of
    three numbers it lists (``[bs, query, num_blocks]``)."""

    phase: str
    n: int
    buckets: tuple[tuple[int, int, int], ...]


@dataclasses.dataclass(frozen=True)
class _VisionBuckets:
    """vllm-gaudi's vision bucket list (patches), empty when it printed ``None``."""

    buckets: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class _Warmup:
    phase: str
    i: int
    fields: tuple[tuple[str, int], ...]
    free: int


def _figures(text: str) -> _Warmup | PhaseTotal | _Listed | _VisionBuckets | _Free | _Quoted | None:
    """The figures of a warm-up line, a phase total, a generated bucket list, the memory split (free memory,
    utilisation) or the CUDA graph memory, read strictly (a garbled figure raises :class:`GarbledNumber`); None for
    any other line."""
    if (w := WARMUP_FREE_MEM.search(text)) is not None:
        fields = tuple((name, integer(a) * integer(b) if b else integer(a))
                       for name, a, b in SHAPE_FIELD.findall(w["fields"]))  # fmt: skip
        return _Warmup(w["phase"], integer(w["i"]), fields, size_bytes(w))
    if (t := PHASE_TOTAL.search(text)) is not None:
        buckets = tuple((integer(a), integer(b)) for a, b in BUCKET_PAIR.findall(t["b"] or ""))
        printed, used = text[t.start() : t.end("unit")], text[t.start("size") : t.end("unit")]
        return PhaseTotal(_kind(t["phase"]), integer(t["n"]), size_bytes(t), buckets, -1, printed=printed,
                          used_printed=used)  # fmt: skip
    if "Generated " in text and (g := GENERATED_BUCKETS.search(text)) is not None:
        triples = tuple((integer(b[1]), integer(b[2]), integer(b[3])) for b in BUCKET_TUPLE.finditer(g["b"]) if b[3])
        return _Listed(g["phase"], integer(g["n"]), triples)
    if "Multimodal bucket" in text and (v := MULTIMODAL_BUCKETS.search(text)) is not None:
        return _VisionBuckets(() if v["none"] else tuple(sorted(integer(b) for b in v["b"].replace(",", " ").split())))
    if (f := GAUDI_MEMORY.search(text)) is not None:
        quoted = _Quoted(round(number(f["free"]) * GIB), text[f.start() : f.end("free")] + " GiB")
        return _Free(quoted, number(f["util"]))
    if (c := CUDA_GRAPH_MEMORY.search(text)) is not None:
        return _Quoted(round(number(c["gib"] or c["gib2"]) * GIB), c[0])
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
    #: What shaped the measured free memory after load (None without one): a plan of another shape does not use it.
    measured_at: MeasuredAt | None = None
    #: The runtime whose log measured it (``vllm-gaudi``, ``vllm-fork``), where the log's lines name it; None where
    #: they do not: a plan for another runtime uses none of it.
    measured_by: str | None = None

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


#: What calibrate reads a log for, named when the log holds no text.
CALIBRATED = Purpose("calibrate from", "a server's start-up log with its warm-up and memory lines ('[Warmup][Graph/...]"
                     "[i/n] ... free_mem:X', 'Graph/... captured:N used_mem:X', 'Free device memory: ...', vLLM "
                     "CUDA's 'Graph capturing finished in N secs, took X GiB')")  # fmt: skip
#: Why a text factor was not measured when the log has none of the lines it is read from.
NO_WARMUP_LINES = "the log has no such warm-up lines"


def _used(total: PhaseTotal) -> str:
    """The summary's used_mem as the log printed it (``3.912 GiB``)."""
    if total.used_printed:
        return total.used_printed
    return f"{total.used_bytes / GIB:.2f} GiB" if total.phase == "prompt" else f"{total.used_bytes / MIB:.1f} MiB"


def _lines(samples: Sequence[GraphSample]) -> str:
    """The log lines a fit's samples were read from (the line each cost is booked on)."""
    first, last = min(s.line for s in samples) + 1, max(s.line for s in samples) + 1
    return f"line {first}" if first == last else f"lines {first}-{last}"


def _summary(total: PhaseTotal) -> str:
    return f"{total.captured} {total.phase} graphs, used_mem {_used(total)} (line {total.line + 1})"


def _listed(total: PhaseTotal) -> tuple[tuple[int, int, int], ...] | str:
    """The buckets a summary without its own list covered: the runtime's generated list for the phase, every one of
    which it warms (vllm-gaudi's generate_buckets keeps only bs x query <= max_num_batched_tokens, and warmup_graphs
    skips only a query over that); or, in words, what the log lacks to measure the summary."""
    read = (f"the log's {total.named} summary on line {total.line + 1} ({total.captured} graphs, "
            f"used_mem {_used(total)}) was read, but")  # fmt: skip
    where = f"the {total.phase} bucket list on line {total.listed_line + 1}"
    if total.listed_n is None:
        return (f"{read} the buckets it covered are not in the log (the runtime lists them on its 'Generated N "
                f"{total.phase} buckets [bs, query, num_blocks]: [...]' line)")  # fmt: skip
    if len(total.listed) != total.listed_n:
        return (f"{read} {where} gives {len(total.listed)} of the {total.listed_n} [bs, query, num_blocks] buckets "
                "it declares (the line is cut)")  # fmt: skip
    if total.listed_n != total.captured:
        return f"{read} {where} holds {total.listed_n} buckets, not the {total.captured} it captured"
    return total.listed


def _prompt_factor(log: WarmupLog, m: ModelDims, dtype: int, tp: int, block: int) -> tuple[float, str] | str:
    """The prefill factor and how it was measured, or why it was not."""
    per_token = text_cost.eager_bytes_per_token(m, dtype, tp)
    total = next((t for t in log.totals if t.phase == "prompt" and t.buckets), None)
    if total is not None:  # vllm-fork's (batch, length) buckets
        tokens = sum(b * s for b, s in total.buckets)
        return total.used_bytes / (tokens * per_token), _summary(total)
    why = NO_WARMUP_LINES
    total = next((t for t in log.totals if t.phase == "prompt"), None)
    if total is not None:
        listed = _listed(total)
        if not isinstance(listed, str):
            est = sum(text_cost.prefill_eager_bytes(m, dtype_size=dtype, tp=tp, block_size=block, batch=b, query=q,
                                                    context_blocks=ctx) for b, q, ctx in listed)  # fmt: skip
            return total.used_bytes / est, f"{_summary(total)}, its buckets from {total.listed_from}"
        why = listed
    samples = [s for s in log.samples if s.phase == "prompt" and s.cost_bytes > 0]
    if not samples:
        return why
    tokens = sum(s.get("batch_size", 1) * (s.get("seq_len") or s.get("query_len")) for s in samples)
    if tokens <= 0:
        return why
    cost = sum(s.cost_bytes for s in samples)
    return cost / (tokens * per_token), (f"{len(samples)} prompt graphs, free_mem drops totalling {cost / GIB:.2f} GiB "
                                         f"(the [Warmup][Graph/Prompt] {_lines(samples)})")  # fmt: skip


def _decode_factor(log: WarmupLog, m: ModelDims, dtype: int, tp: int, block: int) -> tuple[float, str] | str:
    """The decode factor and how it was measured, or why it was not."""

    def eager(batch: int, blocks: int) -> int:
        return text_cost.decode_eager_bytes(m, dtype_size=dtype, tp=tp, block_size=block, batch=batch, blocks=blocks)

    total = next((t for t in log.totals if t.phase == "decode" and t.buckets), None)
    if total is not None:  # vllm-fork decode buckets are (batch, context length)
        est = sum(eager(b, b * math.ceil(s / block)) for b, s in total.buckets)
        return total.used_bytes / est, _summary(total)
    why = NO_WARMUP_LINES
    total = next((t for t in log.totals if t.phase == "decode"), None)
    if total is not None:
        listed = _listed(total)
        if not isinstance(listed, str):  # [bs, 1, num_blocks]: the blocks of the whole batch, as the plan counts them
            est = sum(eager(b, blocks) for b, _, blocks in listed)
            return total.used_bytes / est, f"{_summary(total)}, its buckets from {total.listed_from}"
        why = listed
    samples = [s for s in log.samples if s.phase == "decode" and s.cost_bytes > 0]
    if not samples:
        return why
    est = 0
    for s in samples:
        batch = s.get("batch_size", 1)
        blocks = s.get("num_blocks") or batch * math.ceil(s.get("seq_len", block) / block)
        est += eager(batch, blocks)
    cost = sum(s.cost_bytes for s in samples)
    return cost / est, (f"{len(samples)} decode graphs, free_mem drops totalling {cost / MIB:.1f} MiB (the "
                        f"[Warmup][Graph/Decode] {_lines(samples)})")  # fmt: skip


def _patches(sample: GraphSample) -> int | None:
    """The patches of a multimodal warm-up shape: seq_len when the runtime logs it, else its resolution's 14-px
    patches."""
    if sample.get("seq_len"):
        return sample.get("seq_len")
    pixels = sample.get("resolution")
    return math.ceil(pixels / 196) if pixels else None


def _vision_fit(log: WarmupLog, buckets: Sequence[int]) -> tuple[float, float, str] | None:
    """The vision graph's line (MiB per patch, fixed MiB) through the measured sizes, and how it was read. Sizes are
    the buckets of the list the log printed (else ``buckets``, what the run is told it used), each shape padded to
    the least that holds it; a shape above the largest (or every shape, bucketing off) runs at its own patches, as
    vllm-gaudi's ``get_multimodal_bucket`` leaves it (``extension/bucketing/vision.py`` L163-168 @ v0.26.0). A size's
    cost is the mean of its shapes' drops: each shape that took memory captured a graph of that size, one that took
    none ran a graph already there."""
    named = tuple(sorted(buckets)) if log.vision_buckets is None else log.vision_buckets
    drops: dict[int, list[int]] = {}
    read = []
    for s in log.samples:
        if s.phase == "multimodal" and (p := _patches(s)) is not None:
            size = next((b for b in named if p <= b), p)
            drops.setdefault(size, [])
            if s.cost_bytes > 0:
                drops[size].append(s.cost_bytes)
            read.append(s)
    points = [(b, sum(c) / len(c) / MIB) for b, c in sorted(drops.items()) if c]
    if not points:
        return None
    listed = (f"the buckets of line {log.vision_buckets_line + 1}" if log.vision_buckets is not None
              else "the log prints no bucket list: VLLM_MULTIMODAL_BUCKETS as set here")  # fmt: skip
    where = f" from the [Warmup][Graph/Multimodal] {_lines(read)} ({listed})"
    inside = [f"{b}: {c:.0f} MiB" for b, c in points if b in named]
    above = [f"{b}: {c:.0f} MiB" for b, c in points if b not in named]
    sizes = f"{len(inside)} bucket{'s' * (len(inside) != 1)} ({', '.join(inside)})" if inside else ""
    if above:
        sizes += (" and " if sizes else "") + (f"{len(above)} shape size{'s' * (len(above) != 1)} run unpadded "
                                               f"({', '.join(above)})")  # fmt: skip
    if len(points) == 1:  # one size: scale the built-in line through it
        b, mib = points[0]
        k = mib / (vision_cost.graph_pool_bytes(b) / MIB)
        return (vision_cost.GRAPH_POOL_MIB_PER_PATCH * k, vision_cost.GRAPH_POOL_FIXED_MIB * k,
                f"{sizes}{where}, built-in line scaled")  # fmt: skip
    n = len(points)
    mx = sum(b for b, _ in points) / n
    my = sum(c for _, c in points) / n
    sxx = sum((b - mx) ** 2 for b, _ in points)
    slope = sum((b - mx) * (c - my) for b, c in points) / sxx if sxx else 0.0
    fixed = my - slope * mx
    how = f"least squares over {sizes}, a mean per size{where}"
    if fixed >= 0 and slope > 0:
        return slope, fixed, how
    # A graph holds no less than nothing and grows with its patches: a free fit below either (two noisy sizes) is
    # held there, as the profile's reader refuses a negative cost (plan/profile.py)
    # held at no fixed cost: the line through the origin, whose slope is positive (every cost read is)
    through = sum(b * c for b, c in points) / sum(b * b for b, _ in points)
    why = f"the free fit's {fixed:.1f} MiB is below zero" if fixed < 0 else "the free fit falls with size"
    return through, 0.0, f"{how}; fixed cost held at 0 ({why})"


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
    after_profile_run: bool = True,
    measured_by: str | None = None,
) -> Calibration:
    """Fit the profile's coefficients to ``log``. Text factors need the model the log ran (``model``).
    ``after_profile_run``: whether the log's writer took its free memory after a profiling pass (vllm-fork), not
    right after load (vllm-gaudi); with the parallel sizes and quantization the log's engine line printed
    (``tensor_parallel_size`` where it printed none), it is recorded as what shaped that figure. ``measured_by``: the
    runtime the log's lines name (None: they name none), recorded so that only its plans use the profile."""
    values: dict[str, float] = {}
    rows: list[tuple[str, str, str]] = []
    why: dict[str, str] = {}
    if model is not None:
        prompt = _prompt_factor(log, model, dtype_size, tensor_parallel_size, block_size)
        decode = _decode_factor(log, model, dtype_size, tensor_parallel_size, block_size)
        for name, found in (("text_prefill_factor", prompt), ("text_decode_factor", decode)):
            if isinstance(found, str):
                why[name] = found
                continue
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
            reason = why.get(name) or (
                NO_WARMUP_LINES
                if model is not None or not name.startswith("text")
                else "the log's model is unknown: pass --model"
            )
            rows.append((name, "-", f"estimated (built-in); not measured: {reason}"))
    # each phase's summary as the log printed it: a measured total even where no factor could be made of it
    for total in reversed(log.totals):
        rows.insert(0, (f"{total.phase}_graphs_used", _used(total), f"measured: {_quote(total.line, total.printed)} "
                        f"(the {total.captured} {total.phase} graphs' total, as the runtime summed it)"))  # fmt: skip
    if log.free_after_load_bytes is not None:
        where = "the 'Free device memory' line" if log.free_quote is None else log.free_quote.cite()
        rows.insert(0, ("free_after_load_gib", f"{log.free_after_load_bytes / GIB:.2f}", f"measured: {where}"))
    if log.cuda_graph_bytes is not None:
        per = (
            f", {log.cuda_graph_bytes / log.cuda_capture_sizes / MIB:.1f} MiB per capture size "
            f"({log.cuda_capture_sizes} sizes)"
            if log.cuda_capture_sizes
            else ""
        )
        where = "" if log.cuda_quote is None else f"{log.cuda_quote.cite()}: "
        rows.insert(0, ("cuda_graph_gib", f"{log.cuda_graph_bytes / GIB:.2f}",
                        f"measured: {where}vLLM's CUDA graph memory{per}; kept, not applied"))  # fmt: skip
    measured_at = None
    if log.free_after_load_bytes is not None:
        engine = dict(log.engine)
        sizes = {k: int(v) for k, v in engine.items() if k != "quantization" and v.isdigit() and int(v) > 0}
        quantization = engine.get("quantization")
        measured_at = MeasuredAt(
            sizes.get("tensor_parallel_size", tensor_parallel_size),
            sizes.get("pipeline_parallel_size", 1),
            None if quantization in (None, "None") else quantization,
            sizes.get("max_model_len"),
            after_profile_run,
        )
    return Calibration(profile, tuple(rows), log.free_after_load_bytes, log.cuda_graph_bytes, log.cuda_capture_sizes,
                       model.name if model else log.model, log.backend, device,
                       measured_at=measured_at, measured_by=measured_by)  # fmt: skip

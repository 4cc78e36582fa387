"""The replay's report: configurations side by side (vllm-gaudi's defaults, yours, the planned buckets), as a table
and as one JSON object. A warm-up estimate is the runtime's per-graph time by phase and shape over the shapes warmed
(:func:`vllm_hpu_mm.runtimes.warmup.warmup_estimate`, the one rule, with its held-out error); under
``VLLM_SKIP_WARMUP=true`` nothing is warmed and every shape that runs compiles on first use."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

from vllm_hpu_mm.buckets.planner import Evaluation
from vllm_hpu_mm.models.step_time import StepTime, interval_dict, time_interval_lines
from vllm_hpu_mm.replay.latency import Latency, latency_dict
from vllm_hpu_mm.replay.run import Efficiency, ReplayResult
from vllm_hpu_mm.replay.scheduler import REFUSAL_FIXES, REFUSALS
from vllm_hpu_mm.replay.timing import PHASES, TimeResult
from vllm_hpu_mm.runtimes.base import RuntimeTraits, WarmupEstimate, warmup_estimate

__all__ = [
    "Report",
    "body_lines",
    "header_lines",
    "no_request_line",
    "refusal_fixes",
    "refusal_reasons",
    "requests_line",
    "result_dict",
    "time_dict",
    "to_dict",
    "to_table",
    "totals",
    "vision_line",
]


@dataclasses.dataclass(frozen=True)
class Report:
    """Replays of one traffic under several configurations."""

    results: tuple[ReplayResult, ...]
    traffic: str
    load: str
    #: Requests that ran to their end (refused and unsent ones are in no figure).
    requests: int
    engine: dict[str, int]
    #: The runtime's traits: its warm-up era is what the warm-up estimate depends on.
    traits: RuntimeTraits
    #: The vision buckets on the images of the requests that ran (none ran: an evaluation of no image); None without
    #: vision buckets or images.
    vision: Evaluation | None
    vision_buckets: tuple[int, ...] | None
    #: What the runtime reads: VLLM_SKIP_WARMUP as set.
    skip_warmup: bool
    notes: tuple[str, ...] = ()
    #: Requests the engine refuses, by reason (:data:`~vllm_hpu_mm.replay.scheduler.REFUSALS`): never run, never in
    #: an efficiency.
    refused: tuple[tuple[str, int], ...] = ()
    #: The time model, in words (device, evidence), when the replay ran in time.
    time_model: str | None = None
    #: The step-time model that priced the replay: its held-out interval bounds each verdict between columns.
    step: StepTime | None = None
    #: Requests sampled from the traffic for the schedules (0: as many as ran), and those the load never sent.
    sampled: int = 0
    unsent: int = 0
    #: Images in the requests sampled (those of refused and unsent requests included; ``vision`` counts the rest).
    images_sampled: int = 0
    #: The planned buckets' worst shape against the runtime's own (``WorstCase.to_dict``), when planned: its line is
    #: among the notes.
    worst_case: dict[str, Any] | None = None
    #: Why the configuration would not start (the line the replay stops on), "" when it would: a server that never
    #: starts serves no request, so no latency or throughput figure is given for it.
    not_started: str = ""

    @property
    def offered(self) -> int:
        return self.sampled or self.requests


def _warmup(r: Report, res: ReplayResult | None) -> WarmupEstimate | None:
    shapes = res.warmed_shapes if res is not None else ()
    return warmup_estimate(r.traits, prompt=[s for p, s in shapes if p == "prompt"],
                           decode=[(s[0], s[2]) for p, s in shapes if p == "decode"],
                           block_size=r.engine["block_size"])  # fmt: skip


def _seconds(r: Report, res: ReplayResult) -> float | None:
    w = _warmup(r, res)
    return None if w is None else round(w.seconds, 1)


def _warmed(res: ReplayResult, report: Report) -> tuple[int, int]:
    """Graphs warmed at start-up: none under VLLM_SKIP_WARMUP=true (warmup_model returns first, vllm-gaudi
    @091bbadd), whatever buckets the configuration lists."""
    return (0, 0) if report.skip_warmup else res.warmed


def totals(res: ReplayResult) -> TimeResult | None:
    """A configuration's time over every load replayed (sums of busy and padding time; latency quantiles over the
    loads' own: the worst of them)."""
    if not res.times:
        return None
    t = res.times
    return TimeResult(
        load="all loads replayed",
        requests=sum(x.requests for x in t),
        real_s=sum(x.real_s for x in t),
        padded_s=sum(x.padded_s for x in t),
        padding={p: sum(x.padding[p] for x in t) for p in PHASES},
        added_ttft=(max(x.added_ttft[0] for x in t), max(x.added_ttft[1] for x in t)),
        added_tpot=(max(x.added_tpot[0] for x in t), max(x.added_tpot[1] for x in t)),
        ttft=(max(x.ttft[0] for x in t), max(x.ttft[1] for x in t)),
        idle_s=sum(x.idle_s for x in t),
    )


def time_dict(t: TimeResult, *, started: bool = True) -> dict[str, Any]:
    """One load's times; ``started`` False (the server would not start): its latencies null, none is served."""
    if not t.requests:  # no request ran at this load: its times are of nothing, null, never a measured 0
        return {"load": t.load, "requests": 0, **dict.fromkeys(_TIME_FIGURES)}
    if not started:
        return {**time_dict(t), **dict.fromkeys(_LATENCY_FIGURES)}
    return {
        "load": t.load,
        "requests": t.requests,
        "busy_seconds_real_shapes": round(t.real_s, 4),
        "busy_seconds_with_buckets": round(t.padded_s, 4),
        "idle_seconds": round(t.idle_s, 4),
        "padding_over_useful_time": round(t.overhead, 4),
        "padding_share_of_busy_time": {p: round(t.share(p), 4) for p in PHASES},
        "added_ttft_seconds": {"p50": round(t.added_ttft[0], 5), "p99": round(t.added_ttft[1], 5)},
        "added_seconds_per_output_token": {"p50": round(t.added_tpot[0], 6), "p99": round(t.added_tpot[1], 6)},
        "ttft_seconds_real_shapes": {"p50": round(t.ttft[0], 4), "p99": round(t.ttft[1], 4)},
    }


#: The figures of :func:`time_dict` (null where no request ran).
_TIME_FIGURES = ("busy_seconds_real_shapes", "busy_seconds_with_buckets", "idle_seconds", "padding_over_useful_time",
                 "padding_share_of_busy_time", "added_ttft_seconds", "added_seconds_per_output_token",
                 "ttft_seconds_real_shapes")  # fmt: skip
#: Those of them a user of the server would measure as latency (null for a server that would not start).
_LATENCY_FIGURES = ("added_ttft_seconds", "added_seconds_per_output_token", "ttft_seconds_real_shapes")


def _compile_stalls(r: Report, res: ReplayResult) -> float | None:
    """The run-time compiles' stalls, each shape at the runtime's warm-up time for it (None: no warm-up model)."""
    w = warmup_estimate(r.traits, prompt=[s for p, s in res.compiles if p == "prompt"],
                        decode=[(s[0], s[2]) for p, s in res.compiles if p == "decode"],
                        block_size=r.engine["block_size"])  # fmt: skip
    return None if w is None else round(w.seconds, 1)


def _first_use_stalls(r: Report, res: ReplayResult) -> float | None:
    """Under VLLM_SKIP_WARMUP every shape that runs compiles on first use: their count at the warmed buckets' mean
    time per graph (the shapes that ran are counted, not kept)."""
    w = _warmup(r, res)
    return None if w is None else round(sum(res.shapes_run) * w.seconds_per_graph, 1)


def _run_time_compiles(r: Report, res: ReplayResult) -> tuple[int, int]:
    """(prompt, decode) shapes compiled while a request waits: under VLLM_SKIP_WARMUP every shape that ran (nothing
    was warmed), else those outside the warmed buckets. The text table and the JSON both read it."""
    return (res.shapes_run[0], res.shapes_run[1]) if r.skip_warmup else res.compiles_by_phase


def _run_time_stalls(r: Report, res: ReplayResult) -> float | None:
    """Those compiles' stalls: the first-use stalls under VLLM_SKIP_WARMUP, else the unwarmed shapes'."""
    return _first_use_stalls(r, res) if r.skip_warmup else _compile_stalls(r, res)


def _efficiency(e: Efficiency) -> float | None:
    """An efficiency where something ran on its axis; None (n/a) where nothing did: 0/0 is no evidence of 1.0."""
    return round(e.value, 4) if e.padded else None


def _eff_cell(e: Efficiency) -> str:
    return f"{e.value:.3f}" if e.padded else "n/a"


def result_dict(res: ReplayResult, report: Report) -> dict[str, Any]:
    warmed = sum(_warmed(res, report))
    total = totals(res)
    timed: dict[str, Any] = {}
    started = not report.not_started
    if total is not None:
        timed = {
            "time": time_dict(total, started=started),
            "time_per_load": [time_dict(t, started=started) for t in res.times],
            "compile_stall_seconds": _run_time_stalls(report, res) if total.requests else None,
            "compile_stall_seconds_with_skip_warmup": _first_use_stalls(report, res) if total.requests else None,
        }
    return {
        "label": res.label,
        "graphs_warmed": {"prompt": _warmed(res, report)[0], "decode": _warmed(res, report)[1], "total": warmed},
        # what the strategy or file lists: under speculative decoding fewer than the graphs it warms
        "buckets_listed": {"prompt": res.listed[0], "decode": res.listed[1]},
        "run_time_compiles": {
            "prompt": _run_time_compiles(report, res)[0],
            "decode": _run_time_compiles(report, res)[1],
            # under VLLM_SKIP_WARMUP every shape that ran compiles; those are counted, not kept: only the shapes
            # outside the listed buckets are named
            "shapes": [[p, list(s)] for p, s in res.compiles],
        },
        "fallback_buckets": [[p, list(b)] for p, b in res.fallbacks],
        "compiles_with_skip_warmup": {"prompt": res.shapes_run[0], "decode": res.shapes_run[1]},
        "prefill_token_efficiency": _efficiency(res.prefill_tokens),
        "prefill_context_efficiency": _efficiency(res.prefill_context),
        "decode_slot_efficiency": _efficiency(res.decode_slots),
        "decode_block_efficiency": _efficiency(res.decode_blocks),
        "warmup_seconds_estimate": 0.0 if report.skip_warmup else _seconds(report, res),
        **timed,
        **({"latency_per_load": [latency_dict(x) for x in res.latency] if started else None} if res.latency else {}),
    }


def _images_left(r: Report) -> str:
    """Where the sampled images that did not run went, by what the report counts: refused, never sent, or either."""
    refused, unsent = bool(r.refused), bool(r.unsent)
    return "refused or never sent" if refused and unsent else "the load never sent" if unsent else "the engine refused"


def vision_line(r: Report) -> str | None:
    """The vision buckets on the images of the requests that ran, and where the other sampled ones went; none ran:
    said so, no efficiency (0/0 is no evidence of 1.0). None without vision buckets."""
    if r.vision is None:
        return None
    v, names = r.vision, ",".join(map(str, r.vision_buckets or ()))
    if not r.images_sampled:
        return (f"vision buckets {names}: no image ran (none of the {r.offered} sampled requests has one): "
                "patch efficiency n/a")  # fmt: skip
    if not v.num_images:
        return (f"vision buckets {names}: no image ran (all {r.images_sampled} sampled were in requests "
                f"{_images_left(r)}): patch efficiency n/a")  # fmt: skip
    left = r.images_sampled - v.num_images
    other = f" (of {r.images_sampled} sampled; the other {left} in requests {_images_left(r)})" if left > 0 else ""
    return (f"vision buckets {names}: patch efficiency {v.efficiency:.3f} over {v.num_images} images{other}; "
            f"{v.num_oversize} above the largest bucket run at their own size (a compile each), {v.num_shrunk} "
            "shrunk")  # fmt: skip


def to_dict(r: Report) -> dict[str, Any]:
    vision = None
    if r.vision is not None:  # the images that ran; none: no efficiency
        v = r.vision
        vision = {"buckets": list(r.vision_buckets or ()),
                  "patch_efficiency": round(v.efficiency, 4) if v.num_images else None, "images": v.num_images,
                  "images_sampled": r.images_sampled, "above_largest_bucket": v.num_oversize,
                  "shrunk": v.num_shrunk}  # fmt: skip
    return {
        "traffic": r.traffic,
        "load": r.load,
        "requests_replayed": r.requests,
        "requests_sampled": r.offered,
        "requests_unsent": r.unsent,
        "requests_refused": {"total": sum(n for _, n in r.refused), **dict(r.refused)},
        "time_model": r.time_model,
        "time_model_intervals": interval_dict(r.step) if r.step is not None else None,
        "engine": r.engine,
        "skip_warmup": r.skip_warmup,
        "configurations": [result_dict(res, r) for res in r.results],
        "warmup_seconds_source": w.source if (w := _warmup(r, None)) is not None else None,
        "warmup_heldout_error": w.era.heldout_error if w is not None else None,
        "vision": vision,
        "notes": list(r.notes),
        "worst_case": r.worst_case,
        "not_started": r.not_started or None,
    }


def header_lines(r: Report) -> list[str]:
    """What the table is of: the traffic, the load and the engine."""
    e = r.engine
    return [
        f"Replay of {r.traffic}",
        f"  load: {r.load}; {requests_line(r)}",
        f"  engine: max_model_len {e['max_model_len']}, max_num_seqs {e['max_num_seqs']}, max_num_batched_tokens "
        f"{e['max_num_batched_tokens']}, block_size {e['block_size']}, KV blocks {e['num_kv_blocks']}",
    ]


def requests_line(r: Report) -> str:
    """What ran, never what was asked for: the requests that ran, and of those sampled, the ones refused and the ones
    the load never sent."""
    refused = sum(n for _, n in r.refused)
    if r.requests == r.offered:
        return f"{r.requests} requests replayed"
    parts = [f"{refused} refused"] if refused else []
    if r.unsent:
        parts.append(f"{r.unsent} never sent: the load ended first")
    return f"{r.requests} requests replayed of {r.offered} sampled ({', '.join(parts)})"


def refusal_reasons(refused: tuple[tuple[str, int], ...]) -> str:
    """The refused requests by reason, in words: "51 an empty prompt, 3 a prompt of max_model_len tokens or more"."""
    return ", ".join(f"{n} {REFUSALS.get(k, k)}" for k, n in refused)


def refusal_fixes(refused: tuple[tuple[str, int], ...], fixes: Mapping[str, str] = REFUSAL_FIXES) -> list[str]:
    """What lets the refused requests run: each reason present its own fix, none for a reason absent (a larger
    --max-model-len does nothing for an empty prompt)."""
    return [fixes.get(k, k) for k, _ in refused]


def refused_by(refused: Iterable[tuple[str, int]]) -> str:
    """Who refuses these: the server answers a request whose image it refuses (HTTP 400) before the engine sees it;
    every other reason is the engine's."""
    images = {k.startswith("image_") for k, _ in refused}
    return "the server" if images == {True} else "the engine" if images == {False} else "the server or the engine"


def refused_line(refused: tuple[tuple[str, int], ...], sampled: int, *, see: str,
                 fixes: Mapping[str, str] = REFUSAL_FIXES, default_flag: str | None = None) -> str:  # fmt: skip
    """The one line every command that counts refused requests says them in (buckets replay, serve --dry-run, memory
    plan): of the requests sampled, by reason, with each reason's fix; ``default_flag``: the traffic is the embedded
    default (the flag that gives the user's own), no finding about the user's server, said so instead of a fix."""
    head = (f"{sum(n for _, n in refused)} of the {sampled} requests sampled from the traffic are refused by "
            f"{refused_by(refused)} ({refusal_reasons(refused)}")  # fmt: skip
    if default_flag is not None:
        return (f"{head}): the embedded default traffic's, not yours (give yours: {default_flag}), so no finding: "
                "the exit code does not count them")  # fmt: skip
    return f"{head}; see {see}); fix: {'; or '.join(refusal_fixes(refused, fixes))}"


def no_request_line(r: Report) -> str:
    """Why no request ran and what makes them run, by what stopped them: the engine's refusals (each reason its own
    fix) and the load that ended before sending any."""
    causes = [f"{n} refused as {REFUSALS.get(k, k)}" for k, n in r.refused]
    fixes = refusal_fixes(r.refused)
    blocks, mml, block = (r.engine.get(k, 0) for k in ("num_kv_blocks", "max_model_len", "block_size"))
    need = -(-mml // block) if block else 0
    if "kv_blocks" in dict(r.refused) and blocks < need:  # what vLLM itself requires to start
        causes.append(f"the cache's {blocks} KV blocks are below the {need} one request of max_model_len {mml} "
                      "needs (vLLM would not start with them)")  # fmt: skip
    if r.unsent:
        causes.append(f"{r.unsent} never sent: the load ended first")
        fixes.append("a load that sends requests (a higher --request-rate, a profile segment with clients)")
    fix = "; or ".join(fixes) or "a load that sends requests"
    return f"no request ran under {r.load} (0 of {r.offered} sampled): {'; '.join(causes)}; fix: {fix}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _ms(x: float) -> str:
    return f"{1000 * x:.1f} ms"


def _time_rows(r: Report, row: Any) -> None:
    """Rows of the replay in time: padding per load, its split, latency, stalls."""
    results = r.results
    for k, t in enumerate(results[0].times):
        row(
            f"padding over useful time, {t.load}",
            [_ran(x.times[k], _pct(x.times[k].overhead)) if k < len(x.times) else "-" for x in results],
        )
    tot = [totals(x) for x in results]
    if any(t is None for t in tot):
        return
    # every printed time figure carries its model's interval (r19replay 15: the busy times carried none): the step
    # model's for the busy times, the warm-up model's for the compile stalls
    band = _band(r)
    row(f"busy time, real shapes{band} (all loads)", [_ran(t, f"{t.real_s:.1f} s") for t in tot if t is not None])
    row(f"busy time with buckets{band} (all loads)", [_ran(t, f"{t.padded_s:.1f} s") for t in tot if t is not None])
    names = {"prefill_query": "prefill query", "prefill_context": "prefill context", "decode": "decode",
             "vision": "vision"}  # fmt: skip
    for p in PHASES:
        row(f"  share of busy time padding {names[p]}", [_ran(t, _pct(t.share(p))) for t in tot if t is not None])
    if not r.not_started:  # a server that would not start serves no request: no latency (a line below says why)
        # the padding's added time is priced by the same step model as the busy times and the whole latencies
        row(f"added TTFT p50 / p99{band} (worst load)",
            [_ran(t, f"{_ms(t.added_ttft[0])} / {_ms(t.added_ttft[1])}") for t in tot if t is not None])  # fmt: skip
        row(f"added per-token p50 / p99{band} (worst load)",
            [_ran(t, f"{_ms(t.added_tpot[0])} / {_ms(t.added_tpot[1])}") for t in tot if t is not None])  # fmt: skip
        _latency_rows(results, row)
    if r.traits.warmup_era:
        ran = [t for t in tot if t is not None]
        warm = _warm_band(r)
        row(f"compile stalls at run time{warm}",
            [_ran(t, f"{_run_time_stalls(r, x) or 0:.0f} s") for x, t in zip(results, ran, strict=True)])  # fmt: skip
        row(f"first-use stalls, VLLM_SKIP_WARMUP{warm}",
            [_ran(t, f"{_first_use_stalls(r, x) or 0:.0f} s") for x, t in zip(results, ran, strict=True)])  # fmt: skip


def _ran(t: TimeResult | Latency, cell: str) -> str:
    """A time figure's cell, n/a where no request ran (quantiles and shares of nothing are no measured 0)."""
    return cell if t.requests else "n/a"


def _warm_band(r: Report) -> str:
    """The warm-up model's held-out error as a time row prints it (it prices warm-up and compile stalls alike);
    empty without one."""
    w = _warmup(r, None)
    held = w.era.heldout_error if w is not None else None
    return f" (±{held:.0%})" if held is not None else ""


def _band(r: Report) -> str:
    """The step model's interval as the time rows print it: the whole latencies' own, else the widest of the model's
    held-out decode and prefill intervals; empty without a time model."""
    loads = r.results[0].latency if r.results else ()
    share = loads[0].interval if loads else None
    if share is None and r.step is not None:
        halves = [max(1.0 - low, high - 1.0) for low, high, n, _ in map(r.step.interval, ("decode", "prefill")) if n]
        share = max(halves) if halves and all(math.isfinite(h) for h in halves) else None
        if share is None:
            return " (unbounded: no held-out public point)"
    return f" (±{share:.0%})" if share is not None else ""


#: Loads whose whole latencies the table shows (the JSON has every one): the first, the middle and the last.
_SHOWN_LOADS = 3


def _latency_rows(results: tuple[ReplayResult, ...], row: Any) -> None:
    """Whole latencies per load, each configuration on its own schedule, with the time model's interval."""
    loads = results[0].latency
    if not loads:
        return
    shown = sorted({0, len(loads) // 2, len(loads) - 1}) if len(loads) > _SHOWN_LOADS else range(len(loads))

    def cell(x: Latency | None, what: str) -> str:
        if x is None:
            return "-"
        if not x.requests:
            return "n/a"
        if what in ("ttft", "tpot", "itl"):  # the quantiles the JSON has (QUANTILES: p50, p90, p99)
            return " / ".join(_ms(q) for q in getattr(x, what))
        if what == "e2el":
            return " / ".join(f"{q:.2f}" for q in x.e2el) + " s"
        return f"{x.request_throughput:.2f} / {x.output_throughput:.0f}"

    for k in shown:
        load = loads[k]
        band = f" (±{load.interval:.0%})" if load.interval is not None else ""
        for what, name in (("ttft", "TTFT p50 / p90 / p99"), ("tpot", "TPOT p50 / p90 / p99"),
                           ("itl", "ITL p50 / p90 / p99"), ("e2el", "E2EL p50 / p90 / p99"),
                           ("rate", "req/s / output tok/s")):  # fmt: skip
            row(f"{name}{band}, {load.load}",
                [cell(x.latency[k] if k < len(x.latency) else None, what) for x in results])  # fmt: skip


def body_lines(r: Report) -> list[str]:
    """The table of configurations side by side and the notes under it (what a plan's render shows)."""
    lines: list[str] = []
    width = max(16, *(len(res.label) for res in r.results))
    rows: list[tuple[str, list[str]]] = []

    def row(name: str, cells: list[str]) -> None:
        rows.append((name, cells))

    warmed = [_warmed(x, r) for x in r.results]
    row("graphs warmed (prompt + decode)", [f"{sum(w)} ({w[0]} + {w[1]})" for w in warmed])
    listed = [f"{sum(x.listed)} ({x.listed[0]} + {x.listed[1]})" for x in r.results]
    if r.skip_warmup:
        row("buckets listed, none warmed", listed)
    elif any(x.listed != x.warmed for x in r.results):  # speculative decoding adds decode buckets to those listed
        row("buckets listed (prompt + decode)", listed)
    row("run-time compiles", [f"{sum(_run_time_compiles(r, x))}" for x in r.results])
    row("  of which fallback buckets", [f"{len(x.fallbacks)}" for x in r.results])
    row("compiles under VLLM_SKIP_WARMUP", [f"{sum(x.shapes_run)}" for x in r.results])
    row("prefill token efficiency", [_eff_cell(x.prefill_tokens) for x in r.results])
    row("prefill context efficiency", [_eff_cell(x.prefill_context) for x in r.results])
    row("decode slot efficiency", [_eff_cell(x.decode_slots) for x in r.results])
    row("decode block efficiency", [_eff_cell(x.decode_blocks) for x in r.results])
    # under VLLM_SKIP_WARMUP nothing is warmed at start-up: the first-use stalls are said instead
    estimates = [0.0 if r.skip_warmup else _seconds(r, x) for x in r.results]
    # the interval in the row's label, as the other modelled rows carry theirs (r14text 2: only a footnote said it)
    warm = _warmup(r, None)
    held = warm.era.heldout_error if warm is not None else None
    label = f"warm-up estimate (text graphs, ±{held:.0%})" if held is not None else "warm-up estimate (text graphs)"
    row(label, [f"{s:.0f} s" if s is not None else "unknown" for s in estimates])
    _time_rows(r, row)
    name_width = max(len(n) for n, _ in rows)
    lines.append(f"  {'':<{name_width}}  " + "  ".join(f"{res.label:>{width}}" for res in r.results))
    for name, cells in rows:
        lines.append(f"  {name:<{name_width}}  " + "  ".join(f"{c:>{width}}" for c in cells))
    lines.append("")
    if r.requests == 0:
        lines.append(
            f"no request ran ({requests_line(r)}): every figure of the traffic above is n/a, none measures anything"
        )
    refused = sum(n for _, n in r.refused)
    if refused:
        # "refused", the noun of buckets replay's count ("(K refused)"), in every command that counts them
        lines.append(f"{refused} requests refused by {refused_by(r.refused)} ({refusal_reasons(r.refused)}): not run, "
                     "in no figure above")  # fmt: skip
    if r.time_model is not None:
        lines.append(f"time: {r.time_model}")
    if r.step is not None:
        lines += time_interval_lines(r.step, [(x.label, t.padded_s) for x in r.results if (t := totals(x))])
    if r.not_started:
        lines.append(f"no latency or throughput figures: {r.not_started}")
    elif r.results and r.results[0].latency:
        evidence = r.results[0].latency[0].evidence or "an estimate"
        lines.append("whole latencies (TTFT, TPOT, ITL, E2EL, throughput): each configuration scheduled again on its "
                     f"own buckets' step times, queueing included; {evidence}")  # fmt: skip
    if (w := _warmup(r, None)) is not None:
        held = w.era.heldout_error
        error = f"held-out error ±{held:.0%}" if held is not None else "no held-out log"
        lines.append(f"warm-up estimate ({error}): {w.source}")
    for res in r.results:
        if res.compiles:
            shown = ", ".join(f"{p} {s}" for p, s in res.compiles[:6])
            more = f" and {len(res.compiles) - 6} more" if len(res.compiles) > 6 else ""
            lines.append(f"{res.label}: {len(res.compiles)} shapes compile at run time while a request waits: "
                         f"{shown}{more}")  # fmt: skip
    if r.skip_warmup:
        lines.append("VLLM_SKIP_WARMUP is set to a value the runtime reads as true: nothing is warmed, so every shape "
                     "above compiles on first use")  # fmt: skip
    if (line := vision_line(r)) is not None:
        lines.append(line)
    lines.extend(r.notes)
    return lines


def to_table(r: Report) -> str:
    return "\n".join([*header_lines(r), "", *body_lines(r)])

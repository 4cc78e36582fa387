"""A :class:`~vllm_hpu_mm.plan.planner.Plan` as a JSON-ready dict and as a text table."""

from __future__ import annotations

from typing import Any

from vllm_hpu_mm.models.step_time import interval_text
from vllm_hpu_mm.plan.bucket_choice import BucketChoice
from vllm_hpu_mm.plan.bucket_fit import BucketFit
from vllm_hpu_mm.plan.findings import text_cost_evidence
from vllm_hpu_mm.plan.inputs import PlanInputs
from vllm_hpu_mm.plan.planner import Plan
from vllm_hpu_mm.plan.text_buckets import text_time
from vllm_hpu_mm.plan.text_choice import TextChoice
from vllm_hpu_mm.runtimes.base import (
    GRAPH_MULTIMODAL_PROMPT_RATIO,
    GRAPH_PROMPT_RATIO,
    GRAPH_RESERVED_MEM,
    PARTS,
    SKIP_WARMUP,
    Exports,
    listed_text_shapes,
)
from vllm_hpu_mm.values import GIB


def _fit_dict(f: BucketFit | None) -> dict[str, Any] | None:
    if f is None:
        return None
    e = f.evaluation
    return {
        "buckets": list(f.buckets),
        "efficiency": round(e.efficiency, 4),
        "num_images": e.num_images,
        "num_shrunk": e.num_shrunk,
        "shrunk_share": round(f.shrunk_share, 4),
        "capture_bytes": f.capture_bytes,
    }


def choice_dict(c: BucketChoice) -> dict[str, Any]:
    return {"sizes": c.sizes.source, "replaced": c.replaced, "reason": c.reason, "before": _fit_dict(c.before),
            "after": _fit_dict(c.after)}  # fmt: skip


def to_dict(
    p: Plan,
    exports: Exports | None = None,
    choice: BucketChoice | None = None,
    sources: dict[str, str] | None = None,
    text_choice: TextChoice | None = None,
) -> dict[str, Any]:
    """The plan as one JSON-ready object; ``sources`` (``inputs.provenance``) says where the model dimensions and the
    device total came from."""
    i, s = p.inputs, p.split
    return {
        **(sources or {}),
        "verdict": p.verdict,
        "runtime": i.runtime.name.value,
        "runtime_release": i.runtime_release,
        "runtime_found": i.runtime_found,
        "enforcement": exports.enforcement_dict() if exports is not None else None,
        "precision": exports.precision if exports is not None else None,
        "model": i.model.name,
        "device": i.device,
        "backend": i.backend,
        "tensor_parallel_size": i.tensor_parallel_size,
        "pipeline_parallel_size": i.pipeline_parallel_size,
        "data_parallel_size": i.data_parallel_size,
        "per_card": f"one card of TP {i.tensor_parallel_size} x PP {i.pipeline_parallel_size} (first stage); "
        f"each of the {i.data_parallel_size} replica(s) plans the same card",
        # "none" where no vision graph is warmed (no graphs, or vllm-fork before 1.22): no pool holds one
        "vision_pool_mode": i.pool_mode.value if i.vision_graphs or not i.model.vision.present else "none",
        "total_bytes": i.total_bytes,
        "weight_bytes": p.weight_bytes,
        "weights_source": weights_source(i),
        "profile_bytes": p.profile_bytes,
        "free_after_load_bytes": p.free_after_load_bytes,
        "memory_formula": p.memory_formula,
        "non_torch_bytes": p.non_torch_bytes,
        "defaults_source": i.defaults_source,
        "vision": _vision_dict(p),
        "free_after_load_stated": i.free_after_load_bytes is not None and i.free_after_load_measured_by is None,
        "free_after_load_measured_by": i.free_after_load_measured_by,
        "usable_bytes": s.usable_bytes,
        "kv_cache_bytes": s.kv_cache_bytes,
        "kv_bytes_per_token": p.kv_bytes_per_token,
        "kv_blocks": p.kv_blocks,
        "block_size": i.block_size,
        "max_model_len": i.max_model_len,
        "max_num_seqs": i.max_num_seqs,
        "max_num_batched_tokens": i.max_num_batched_tokens,
        "max_concurrent_seqs": p.max_concurrent_seqs,
        "warmup": _warmup_dict(p),
        "graph_bytes": s.graph_bytes,
        "prefill_graph_bytes": s.prefill_graph_bytes,
        "decode_graph_bytes": s.decode_graph_bytes,
        "prefill_text_graph_bytes": s.prefill_text_graph_bytes,
        "prefill_vision_graph_bytes": s.prefill_vision_graph_bytes,
        "vision_buckets": list(i.buckets or ()) if _vision_padded(i) else [],
        "vision_buckets_captured": list(p.vision_buckets_captured),
        "vision_buckets_skipped": list(p.vision_buckets_skipped),
        "vision_capture_bytes": p.vision_capture_bytes,
        "prefill_graphs_fit": p.prefill_graphs_fit,
        "prefill_graphs_total": p.prefill_graphs_total,
        "decode_graphs_fit": p.decode_graphs_fit,
        "decode_graphs_total": p.decode_graphs_total,
        "text_graphs_source": p.text_graphs.source,
        "bucket_plan": choice_dict(choice) if choice is not None else None,
        "prefill_text_graph_cost_bytes": sum(b.cost_bytes for b in p.text_graphs.prefill),
        "decode_graph_cost_bytes": sum(b.cost_bytes for b in p.text_graphs.decode),
        "text_graph_costs": text_cost_evidence(i),
        "text_bucket_plan": _text_plan_dict(p, text_choice) if text_choice is not None else None,
        "settings": {
            "gpu_memory_utilization": i.gpu_memory_utilization,
            "VLLM_GRAPH_RESERVED_MEM": i.graph_reserved_mem,
            "VLLM_GRAPH_PROMPT_RATIO": i.graph_prompt_ratio,
            "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO": i.graph_multimodal_prompt_ratio,
            "tensor_parallel_size": i.tensor_parallel_size,
            "dtype_bytes": i.dtype_size,
            "quantization": i.quantization,
        },
        "settings_not_read": list(i.knobs_not_read),
        "warnings": [
            {"severity": f.severity, "stage": f.stage, "code": f.code, "message": f.message, "fix": f.fix.text}
            for f in p.findings
        ],
    }


def weights_source(i: PlanInputs) -> str:
    """What the planned weights hold: the whole model, or the language model only where the runtime builds no tower."""
    if not i.model.vision.present:
        return "the model's weights"
    if i.vision_tower_built:
        return "the language model and the vision tower"
    return ("the language model only: with every modality of the tower at --limit-mm-per-prompt 0 (or "
            "--language-model-only) vLLM builds no vision tower (model_executor/models/interfaces.py "
            "_mark_tower_model)")  # fmt: skip


def _vision_padded(i: PlanInputs) -> bool:
    """Whether the plan's vision buckets are used: not when no image runs, nor on a runtime that warms no vision graph
    (vllm-fork before 1.22 reads no list: each image runs at its own shape); ``vision_buckets`` is then empty."""
    return not i.images_refused and (i.vision_graphs or not i.model.vision.present)


def _vision_dict(p: Plan) -> dict[str, Any] | None:
    """The model's vision tower as the plan sees it: family, patch, merge, alignment, tokens per image, and whether
    the runtime buckets it and this project's 112-px processor applies."""
    i = p.inputs
    v = i.model.vision
    if not v.present:
        return None
    vb = i.runtime.vision_bucketing(i.model.model_type, model=i.model.name)
    return {"family": v.family, "patch_size": v.patch_size, "spatial_merge_size": v.spatial_merge_size,
            "alignment_px": v.alignment, "tokens_per_image": v.tokens_per_image or None,
            "bucketed_on_runtime": vb.bucketed, "bucketing": vb.note,
            "aligned_processor_applies": v.aligned_processor_applies}  # fmt: skip


def _gib(n: int) -> str:
    return f"{n / GIB:10.2f} GiB"


def _choice_lines(c: BucketChoice) -> list[str]:
    def line(name: str, f: BucketFit | None) -> str:
        if f is None:
            return f"  {name}: none fits"
        e = f.evaluation
        shrunk = f"shrunk {e.num_shrunk}/{e.num_images} ({f.shrunk_share:.1%})"
        return f"  {name}: {','.join(map(str, f.buckets))}  efficiency {e.efficiency:.3f}, {shrunk}, graphs " + (
            f"{f.capture_bytes / GIB:.2f} GiB"
        )

    verdict = "replaced" if c.replaced else "kept"
    head = f"vision buckets over {c.sizes.source}: {verdict} ({c.reason})"
    return [head, line("before", c.before), line("after", c.after)] if c.planned else [head]


def _text_choice_lines(c: TextChoice) -> list[str]:
    from vllm_hpu_mm.replay.report import body_lines

    verdict = "planned" if c.replaced else "kept"
    body = [line for line in body_lines(c.report()) if line]  # the first line here says what the header says
    budget = f"budget {c.budget_reason}" if c.budget_reason else f"budget {c.budget} graphs"
    return [f"text buckets: {verdict} ({c.reason}; load {c.runs.load}; {budget}); replayed through the runtime's own "
            "lookup:", *body]  # fmt: skip


def _text_plan_dict(p: Plan, c: TextChoice) -> dict[str, Any]:
    data = c.to_dict()
    data["notes"] = [*data.get("notes", []), *graph_count_notes(p, c)]
    return data


def graph_count_notes(p: Plan, c: TextChoice) -> list[str]:
    """What the graph count of the exported text buckets owes to the runtime rather than to the list: the decode
    buckets speculative decoding adds to each listed one, and a warm-up above the text-graph budget (why, by how
    much). A budget, given or the default's, counts the graphs warmed (:func:`~vllm_hpu_mm.plan.text_choice.plan_for`),
    so the note on a warm-up above it is for buckets not planned against it (a budget kept from elsewhere)."""
    spec = speculative_graphs(p)
    exported = c.after if c.after is not None else c.before
    warmed = 0 if c.skip_warmup else sum(exported.warmed)
    over = over_budget_note(exported.label, warmed, c.budget, spec[1] - spec[0] if spec else 0)
    return [note for note in (speculative_note(p, spec), over) if note]


def speculative_graphs(p: Plan) -> tuple[int, int] | None:
    """(decode buckets listed, decode graphs warmed) where speculative decoding makes the runtime warm more decode
    graphs than its list has (vllm-gaudi: batch x (1 + tokens) buckets added to each); None elsewhere."""
    i = p.inputs
    decode = len(p.text_graphs.decode)
    if not i.num_speculative_tokens or not i.runtime.traits.warms_all_graphs:
        return None
    seeds = len(listed_text_shapes(i.runtime, i.engine(p.kv_blocks)).decode)
    return (seeds, decode) if seeds != decode else None


def speculative_note(p: Plan, spec: tuple[int, int] | None) -> str | None:
    if spec is None:
        return None
    n = p.inputs.num_speculative_tokens
    return (f"speculative decoding ({n} tokens per step) changes the decode graphs: {spec[0]} listed decode buckets "
            f"warm {spec[1]} graphs, the runtime adding buckets of batch x {1 + n} (batch and blocks) to each "
            f"({p.text_graphs.source})")  # fmt: skip


def over_budget_note(label: str, warmed: int, budget: int, spec_graphs: int) -> str | None:
    """A warm-up above the text-graph budget: by how much and why (None within it)."""
    if warmed <= budget:
        return None
    why = (f"the {spec_graphs} speculative decode graphs come on top of the listed buckets the budget counts"
           if spec_graphs else "the runtime warms more graphs than the listed buckets the budget counts")  # fmt: skip
    return (
        f"the exported text buckets ({label}) warm {warmed} graphs, {warmed - budget} over the text-graph budget "
        f"of {budget} ({why}); the warm-up estimate counts all {warmed}"
    )


def _graph_note(p: Plan, phase: str) -> str:
    text = p.text_graphs
    graphs = text.prefill if phase == "prefill" else text.decode
    fit = text.prefill_fit if phase == "prefill" else text.decode_fit
    cost = sum(b.cost_bytes for b in graphs) / GIB
    unwarmed = p.inputs.unwarmed
    if unwarmed is not None and not unwarmed.graphs:
        return f"{len(graphs)} buckets, no graph ({unwarmed.words}: {unwarmed.source}; {text.source})"
    if unwarmed is not None:
        return (f"{len(graphs)} graphs ({cost:.2f} GiB if all run), {unwarmed.words} ({unwarmed.source}; "
                f"{text.source})")  # fmt: skip
    if p.inputs.runtime.traits.warms_all_graphs:
        return f"{len(graphs)} graphs warmed, all ({cost:.2f} GiB {text_cost_evidence(p.inputs)}; {text.source})"
    return f"{fit}/{len(graphs)} graphs fit ({text.source})"


def _warmup_dict(p: Plan) -> dict[str, Any] | None:
    """The warm-up time estimate by phase, labelled with its source and held-out error (Gaudi runtimes only); under
    VLLM_SKIP_WARMUP (as the runtime reads it) 0 s and 0 graphs, marked skipped and saying why."""
    i = p.inputs
    unwarmed = i.runtime.traits.unwarmed_graphs
    if i.skip_warmup and i.runtime.traits.warmup_era:
        return {"seconds": 0.0, "graphs": 0, "seconds_per_graph": 0.0,
                "by_phase": {"prompt": 0.0, "decode": 0.0, "vision": 0.0}, "skipped": True,
                "source": f"{SKIP_WARMUP} is set to a value {i.runtime_words} reads as true: "
                f"{unwarmed.what if unwarmed is not None else 'it warms no graph at start-up'}"}  # fmt: skip
    w = p.warmup
    return None if w is None else {**w.to_dict(), "skipped": False}


def warmup_line(w: dict[str, Any]) -> str:
    """One line for a warm-up estimate: the total, by phase, and the held-out error beside it."""
    if w.get("skipped"):
        return f"skipped ({w['source']})"
    phases = ", ".join(f"{k} {v:.0f} s" for k, v in w["by_phase"].items() if v)
    held = w["heldout_error"]
    error = f"±{held:.0%} held-out error" if held is not None else "no held-out log"
    extra = "; above the fitted prompt sizes: extrapolated" if w["extrapolated"] else ""
    return (
        f"~{w['seconds']:.0f} s ({error}; {w['graphs']} graphs"
        + (f": {phases}" if phases else "")
        + f"{extra}; {w['source']})"
    )


def _share(i: PlanInputs, variable: str, value: float) -> str:
    """Where a graph row's share comes from: the variable where the runtime reads it; else the plan's own split,
    the variable named as not read (:attr:`PlanInputs.knobs_not_read`), never shown as applied."""
    if variable not in i.knobs_not_read:
        return f"x {variable} {value}"
    if i.enforce_eager:
        return f"none: {i.eager_by} ({variable} {value} not read by {i.runtime_words})"
    how = "as profiled" if i.runtime.traits.profiles_graphs else f"the plan's share {value}"
    return f"{how} ({variable} not read by {i.runtime_words})"


def _enforcement_lines(e: Exports) -> list[str]:
    out = ["enforcement (what makes the runtime respect each part):"]
    for name in PARTS:
        part = e.enforcement[name]
        state = "honoured" if part.honoured else "NOT honoured"
        how = f" by {', '.join(part.by)}" if part.by else ": nothing to set"
        out.append(f"  {name:<22} {state}{how}" + (f" ({part.note})" if part.note else ""))
    prec = e.precision
    out.append(f"precision: fp32 softmax {'on' if prec['fp32_softmax'] else 'off'} ({prec['set_by']}; {prec['note']})")
    return out


def _profiling_note(p: Plan) -> str:
    if p.profile_bytes:
        return "estimate"
    if p.profile_in_free:
        given = "measured" if p.inputs.free_after_load_measured_by else "stated"
        return (
            f"inside free after load ({given}): the runtime reads its free memory after its profiling forward "
            "pass, so what that pass leaves held is not counted again"
        )
    return "none: the runtime runs no profiling forward pass"


def to_table(
    p: Plan,
    exports: Exports | None = None,
    choice: BucketChoice | None = None,
    sources: dict[str, str] | None = None,
    text_choice: TextChoice | None = None,
) -> str:
    i, s = p.inputs, p.split
    src = sources or {}
    free_note = (f"measured ({i.free_after_load_measured_by})" if i.free_after_load_measured_by else
                 "stated" if i.free_after_load_bytes is not None else
                 "the runtime's, from estimated weights/profiling")  # fmt: skip
    captured = i.vision_listed(p.vision_buckets_captured) or (
        "none: no image runs (--limit-mm-per-prompt sets image to 0)" if i.images_refused else "-"
    )
    skipped = i.vision_listed(p.vision_buckets_skipped) or "-"
    if i.vision_patches_per_item:
        captured += f" images per pass ({i.vision_patches_per_item} patches each)"
    graphs = i.pool_mode.value != "none"
    text_share = _share(i, GRAPH_MULTIMODAL_PROMPT_RATIO, i.graph_multimodal_prompt_ratio)
    vision_note = (
        f"{i.pool_mode.value} pool; captured {captured} ({p.vision_capture_bytes / GIB:.2f} GiB); skipped {skipped}"
    )
    if i.unwarmed is not None and i.unwarmed.graphs and p.vision_buckets_captured:
        vision_note = (f"{i.pool_mode.value} pool; buckets {captured} ({p.vision_capture_bytes / GIB:.2f} GiB), none "
                       f"warmed at start-up, each compiled on its first use; skipped {skipped}")  # fmt: skip
    if i.model.vision.present and not i.vision_graphs:  # vllm-fork before 1.22
        text_share = "the whole prefill share (no vision graph is warmed)"
        vision_note = (
            f"none: {i.runtime_words} warms no vision graph (each image runs at its own shape inside "
            "the prompt's forward pass)"
        )
    rows = [
        ("runtime", i.runtime.name.value, i.runtime_found),
        ("model", i.model.name,
         f"TP {i.tensor_parallel_size} x PP {i.pipeline_parallel_size} (per card: the first stage), "
         f"DP {i.data_parallel_size}, {i.dtype_size}-byte dtype" + (f", {i.quantization}" if i.quantization else "")),
        ("device", f"{i.device} ({i.backend})",
         f"{i.total_bytes / GIB:.2f} GiB total" + (f" ({src['device_source']})" if "device_source" in src else "")),
        ("weights", _gib(p.weight_bytes), "per card" + ("" if i.vision_tower_built else f"; {weights_source(i)}")),
        ("profiling peak", _gib(p.profile_bytes), _profiling_note(p)),
        ("free after load", _gib(p.free_after_load_bytes), free_note),
        ("usable", _gib(s.usable_bytes), f"x gpu_memory_utilization {i.gpu_memory_utilization}"),
        ("KV cache", _gib(s.kv_cache_bytes if i.num_gpu_blocks_override is None else
                          p.kv_blocks * i.block_size * p.kv_bytes_per_token),
         f"{p.kv_blocks} blocks of {i.block_size}" + ("" if i.num_gpu_blocks_override is None else
         f" (--num-gpu-blocks-override; the memory left holds {s.kv_cache_bytes / GIB:.2f} GiB)") +
         f"; {p.max_concurrent_seqs} seqs at max_model_len {i.max_model_len}"),
        ("graphs", _gib(s.graph_bytes),
         ("profiled by the runtime (estimate)" if i.runtime.traits.profiles_graphs else
          _share(i, GRAPH_RESERVED_MEM, i.graph_reserved_mem)) if graphs else "none: eager (no graph pool)"),
        ("  decode", _gib(s.decode_graph_bytes), _graph_note(p, "decode")),
        ("  prefill", _gib(s.prefill_graph_bytes), _share(i, GRAPH_PROMPT_RATIO, i.graph_prompt_ratio)),
        ("    text", _gib(s.prefill_text_graph_bytes), f"{text_share}; {_graph_note(p, 'prefill')}"),
        ("    vision", _gib(s.prefill_vision_graph_bytes), vision_note),
    ]  # fmt: skip
    width = max(len(r[0]) for r in rows)
    lines = [f"{name:<{width}}  {value:>16}  {note}" for name, value, note in rows]
    if "model_source" in src:
        lines.append(f"model dimensions: {src['model_source']}")
    lines.append(f"memory: {p.memory_formula}")
    lines.append(
        f"max_num_seqs {i.max_num_seqs}, max_num_batched_tokens {i.max_num_batched_tokens}: {i.defaults_source}"
    )
    vision = _vision_dict(p)
    if vision is not None:
        applies = "applies" if vision["aligned_processor_applies"] else "does not apply (Qwen2.5-VL only)"
        lines.append(
            f"vision tower: {vision['family']}, patch {vision['patch_size']} x merge "
            f"{vision['spatial_merge_size']} = {vision['alignment_px']} px per token; "
            f"{'bucketed' if vision['bucketed_on_runtime'] else 'not bucketed'} on {i.runtime.name.value} "
            f"({vision['bucketing']}); the 112-px processor {applies}"
        )
    warm = _warmup_dict(p)
    if warm is not None:
        lines.append(f"warm-up: {warmup_line(warm)}")
    if "max_model_len_source" in src:
        lines.append(f"max_model_len: {src['max_model_len_source']}")
    if choice is not None:
        lines += _choice_lines(choice)
    if text_choice is not None:
        lines += _text_choice_lines(text_choice)
        lines += [f"text buckets: {note}" for note in graph_count_notes(p, text_choice)]
        i = p.inputs  # the planned buckets were chosen on this model's seconds: say how far they are trusted
        lines.append(interval_text(text_time(i.model, i.device, block_size=text_choice.shape.block_size,
                                             tensor_parallel_size=i.tensor_parallel_size)))  # fmt: skip
    if exports is not None:
        lines += _enforcement_lines(exports)
    lines.append(f"verdict: {p.verdict}")
    for f in p.findings:
        lines.append(f"{f.severity} [{f.stage}]: {f.message}")
        lines.append(f"  fix: {f.fix.text}")
    return "\n".join(lines)

"""The pieces every runtime's exports share: the guide's variables the runtime reads (from its traits), the
vision buckets that fit, the language model's precision, and one way to assemble :class:`~.base.Exports`."""

from __future__ import annotations

import dataclasses
import math

from vllm_hpu_mm.plan.planner import Plan
from vllm_hpu_mm.runtimes.base import (
    FP32_SOFTMAX,
    GRAPH_MULTIMODAL_PROMPT_RATIO,
    GRAPH_PROMPT_RATIO,
    GRAPH_RESERVED_MEM,
    SKIP_WARMUP,
    Exports,
    Part,
    PartName,
    ServerFlags,
)

__all__ = ["Draft", "export_buckets"]


@dataclasses.dataclass
class Draft:
    """Exports being built for one plan: what is set so far and the notes that explain it."""

    plan: Plan
    flags: ServerFlags
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    args: list[str] = dataclasses.field(default_factory=list)
    files: dict[str, str] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)

    @classmethod
    def start(cls, plan: Plan, flags: ServerFlags) -> Draft:
        """A draft holding the guide's variables that the plan's runtime reads (its traits; under --enforce-eager
        none: :attr:`~vllm_hpu_mm.plan.inputs.PlanInputs.knobs_not_read`), and a note naming each one set in the
        environment that it does not read."""
        draft = cls(plan, flags)
        i = plan.inputs
        unread = i.knobs_not_read
        values = {GRAPH_RESERVED_MEM: i.graph_reserved_mem, GRAPH_PROMPT_RATIO: i.graph_prompt_ratio,
                  GRAPH_MULTIMODAL_PROMPT_RATIO: i.graph_multimodal_prompt_ratio}  # fmt: skip
        for name, value in values.items():
            if name not in unread:
                draft.env[name] = str(value)
        if i.enforce_eager and GRAPH_RESERVED_MEM in i.runtime.traits.reads:
            draft.notes.append(f"{i.eager_by}: {i.runtime_words} reserves no graph memory (it reads no "
                               f"{GRAPH_RESERVED_MEM} then: 0): not exported")  # fmt: skip
        # a skip the user set is exported as given, as their reserve is: the environment handed over lists what the
        # server reads, so that a copy of it (a replica's env file) starts the same (r20agree 13, r20fork 6)
        if i.runtime.traits.unwarmed_graphs is not None and SKIP_WARMUP in i.runtime_env:
            draft.env[SKIP_WARMUP] = i.runtime_env[SKIP_WARMUP]
        # one note per variable, as docs/oom-tuning.md promises each one set (`your VAR=V: not read by ...`)
        for name in (n for n in unread if n in values and n in i.runtime_env):
            draft.notes.append(_not_read_note(plan, name, i.runtime_env[name], values[name]))
        return draft

    def kv_part(self) -> Part:
        """The KV cache is bounded by the graph share (where the runtime reads it) and the utilisation."""
        read = GRAPH_RESERVED_MEM not in self.plan.inputs.knobs_not_read
        return Part((*((GRAPH_RESERVED_MEM,) if read else ()), "--gpu-memory-utilization"), True)

    def precision(self) -> dict[str, object]:
        """The language model's fp32-softmax setting: the user's VLLM_FP32_SOFTMAX, else the runtime's default."""
        traits = self.plan.inputs.runtime.traits
        default = traits.fp32_softmax_for(self.plan.inputs.model.model_type)
        if self.flags.fp32_softmax is None:
            return {"fp32_softmax": default, "set_by": "runtime default", "note": traits.fp32_softmax_note}
        if not traits.reads_fp32_softmax:
            return {"fp32_softmax": default, "set_by": "runtime default; VLLM_FP32_SOFTMAX is set but the runtime "
                    "planned for does not read it: ignored", "note": traits.fp32_softmax_note}  # fmt: skip
        i = self.plan.inputs
        value, read = traits.boolean_as_read(FP32_SOFTMAX, i.runtime_env, self.flags.fp32_softmax, i.runtime_words)
        return {"fp32_softmax": value, "set_by": read or "VLLM_FP32_SOFTMAX",
                "note": traits.fp32_softmax_note}  # fmt: skip

    def finish(self, parts: dict[PartName, Part]) -> Exports:
        return Exports(self.env, tuple(self.args), self.files, parts, tuple(self.notes), self.precision())

    def eager(self, kv: Part) -> Exports:
        """No graphs (--enforce-eager, or what else turned them off): no graph part to bound."""
        none = Part((self.plan.inputs.eager_by,), True, "no graphs: nothing to bound")
        return self.finish(
            {"kv_cache": kv, "decode_graphs": none, "prefill_text_graphs": none, "prefill_vision_graphs": none}
        )


def _not_read_note(plan: Plan, name: str, raw: str, planned: float) -> str:
    """What the plan does with a ratio of the shell's that the runtime does not read: the split it does make (a
    prompt ratio in the shell changes nothing planned, :func:`vllm_hpu_mm.plan.inputs.build`), none where it has no
    graph pools or the runtime profiles them (no share), or that it splits by the value while no figure of the
    runtime's follows it."""
    i = plan.inputs
    head = f"your {name}={raw}: not read by {i.runtime_words}{f' under {i.eager_by}' if i.enforce_eager else ''}"
    if not plan.split.graph_bytes:
        return f"{head}, so it changes nothing planned: the plan has no graph pools"
    if i.runtime.traits.profiles_graphs:  # vLLM on CUDA: its graphs take what its profiling measures, no share
        return f"{head}, so it changes nothing planned: the runtime profiles its graphs' memory itself"
    if math.isclose(float(raw), planned):
        return f"{head}; the plan still splits its graph pools by it (no figure of the runtime's follows it)"
    return f"{head}, so it changes nothing planned: the plan splits its graph pools at {planned:g}"


def export_buckets(d: Draft) -> tuple[str, ...]:
    """Export the captured vision buckets (never ``None`` while vllm-gaudi's warm-up is on); the knobs used, () when
    none can be."""
    plan = d.plan
    i = plan.inputs
    captured = plan.vision_buckets_captured
    if not i.buckets:
        if not d.flags.skip_warmup and i.runtime.traits.none_buckets_fail_warmup:
            return ()
        d.env["VLLM_MULTIMODAL_BUCKETS"] = "None"
        if i.runtime.traits.none_buckets_fail_warmup:
            # None starts only because warm-up is skipped: the environment handed over carries the skip too, so
            # that it is whole when copied (the user's own spelling, which the runtime reads as true)
            d.env[SKIP_WARMUP] = i.runtime_env.get(SKIP_WARMUP, "true")
            d.notes.append(f"VLLM_MULTIMODAL_BUCKETS=None starts only with warm-up skipped: {SKIP_WARMUP}="
                           f"{d.env[SKIP_WARMUP]} exported with it")  # fmt: skip
        return ("VLLM_MULTIMODAL_BUCKETS",)
    if i.images_refused:  # no image runs: nothing to warm (the exporter's note says why)
        return ()
    if not captured:
        d.notes.append("no vision bucket's graph fits the vision pool: VLLM_MULTIMODAL_BUCKETS not exported")
        return ()
    d.env["VLLM_MULTIMODAL_BUCKETS"] = i.vision_listed(captured)
    if i.vision_patches_per_item:  # the runtime reads images per pass
        if plan.vision_buckets_skipped:
            d.notes.append(
                f"pruned vision passes of {i.vision_listed(plan.vision_buckets_skipped)} images "
                f"(do not fit the vision graph pool): VLLM_MULTIMODAL_BUCKETS={d.env['VLLM_MULTIMODAL_BUCKETS']}"
            )
        return ("VLLM_MULTIMODAL_BUCKETS",)
    if plan.vision_buckets_skipped:
        d.notes.append(
            f"pruned vision buckets {','.join(map(str, plan.vision_buckets_skipped))} (do not fit the vision graph "
            f"pool): VLLM_MULTIMODAL_BUCKETS={d.env['VLLM_MULTIMODAL_BUCKETS']}; larger images follow "
            "VLLM_HPU_MM_OVERSIZE_POLICY (default shrink: resized to the largest kept bucket)"
        )
    return ("VLLM_MULTIMODAL_BUCKETS",)

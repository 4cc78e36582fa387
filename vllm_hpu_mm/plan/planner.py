"""The memory plan: every rule of :mod:`.rules` run on frozen :class:`~.inputs.PlanInputs`, into a frozen
:class:`Plan` with its findings (:mod:`.findings`). Pure: no device, no environment."""

from __future__ import annotations

import dataclasses
from typing import Literal

from vllm_hpu_mm.plan import rules, vision_cost
from vllm_hpu_mm.plan.findings import Finding, findings
from vllm_hpu_mm.plan.inputs import PlanInputs
from vllm_hpu_mm.plan.rules import Split
from vllm_hpu_mm.plan.text_graphs import TextGraphFit

__all__ = ["Plan", "Verdict", "plan"]

Verdict = Literal["fits", "fits_with_warnings", "does_not_fit"]


@dataclasses.dataclass(frozen=True)
class Plan:
    inputs: PlanInputs
    weight_bytes: int
    profile_bytes: int
    free_after_load_bytes: int
    split: Split
    kv_bytes_per_token: int
    kv_blocks: int
    max_concurrent_seqs: int
    vision_buckets_captured: tuple[int, ...]
    vision_buckets_skipped: tuple[int, ...]
    vision_capture_bytes: int
    text_graphs: TextGraphFit
    findings: tuple[Finding, ...]

    @property
    def prefill_graphs_fit(self) -> int:
        return self.text_graphs.prefill_fit

    @property
    def prefill_graphs_total(self) -> int:
        return len(self.text_graphs.prefill)

    @property
    def decode_graphs_fit(self) -> int:
        return self.text_graphs.decode_fit

    @property
    def decode_graphs_total(self) -> int:
        return len(self.text_graphs.decode)

    @property
    def verdict(self) -> Verdict:
        if any(f.severity == "error" for f in self.findings):
            return "does_not_fit"
        return "fits_with_warnings" if any(f.severity == "warning" for f in self.findings) else "fits"

    @property
    def fits(self) -> bool:
        return self.verdict != "does_not_fit"


def plan(i: PlanInputs) -> Plan:
    """Run every rule."""
    weights = rules.model_weight_bytes(i)
    profile = rules.profile_peak_bytes(i)
    free = rules.free_after_load(i, weights, profile)
    s = rules.split_memory(i, max(free, 0))
    per_token = rules.kv_per_token(i)
    blocks = rules.kv_blocks(s.kv_cache_bytes, per_token, i.block_size)
    seqs = rules.max_concurrent_seqs(blocks, i.block_size, i.max_model_len)
    captured, skipped = rules.vision_fit(i, s.prefill_vision_graph_bytes)
    text = rules.text_graph_fit(i, s, blocks)
    return Plan(
        inputs=i,
        weight_bytes=weights,
        profile_bytes=profile,
        free_after_load_bytes=free,
        split=s,
        kv_bytes_per_token=per_token,
        kv_blocks=blocks,
        max_concurrent_seqs=seqs,
        vision_buckets_captured=captured,
        vision_buckets_skipped=skipped,
        vision_capture_bytes=vision_cost.capture_bytes(captured, i.pool_mode, i.model.vision, i.dtype_size, i.costs),
        text_graphs=text,
        findings=findings(i, free, s, skipped, per_token, seqs, text),
    )

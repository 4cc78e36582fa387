"""The memory plan: every rule of :mod:`.rules` run on frozen :class:`~.inputs.PlanInputs`, into a frozen
:class:`Plan` with its findings (:mod:`.findings`). Pure: no device, no environment."""

from __future__ import annotations

import dataclasses
from typing import Literal

from vllm_hpu_mm.plan import rules, vision_cost
from vllm_hpu_mm.plan.findings import Finding, findings
from vllm_hpu_mm.plan.fixes import Fix
from vllm_hpu_mm.plan.inputs import PlanInputs
from vllm_hpu_mm.plan.rules import Split
from vllm_hpu_mm.plan.text_graphs import TextGraphFit
from vllm_hpu_mm.runtimes.base import WarmupEstimate, warmup_estimate
from vllm_hpu_mm.values import GIB

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
    #: The runtime's formula for the split, in words, with where it is in its source.
    memory_formula: str = ""
    #: The runtime's non-torch memory (vLLM CUDA), estimated.
    non_torch_bytes: int = 0
    #: The runtime's profiling pass is inside the given free memory after load (:attr:`MemorySplit.profile_in_free`).
    profile_in_free: bool = False

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
    def graphs_warmed(self) -> int:
        """Graphs the runtime warms at start-up: every prompt and decode graph and each captured vision bucket."""
        if self.inputs.enforce_eager or self.inputs.skip_warmup:
            return 0
        return len(self.text_graphs.prefill) + len(self.text_graphs.decode) + len(self.vision_buckets_captured)

    @property
    def warmup(self) -> WarmupEstimate | None:
        """The warm-up time of the graphs the runtime warms, by phase and shape (its fitted era, with the held-out
        error), where one exists; None under VLLM_SKIP_WARMUP."""
        i = self.inputs
        if i.skip_warmup:
            return None
        t = self.text_graphs
        prompt = [(b.batch, b.size, b.context) for b in t.prefill]
        decode = [(b.batch, b.size) for b in t.decode]
        # a runtime that captures while its pools last (vllm-fork 1.17 - 1.21.3) captures the kept graphs only, after
        # its eager pass over every bucket
        captured = (
            None
            if i.runtime.traits.warms_all_graphs
            else ([(b.batch, b.size, b.context) for b in t.prefill_kept], [(b.batch, b.size) for b in t.decode_kept])
        )
        if i.enforce_eager and i.backend == "hpu":  # no graphs, but a two-pass runtime still runs every bucket once
            shapes = i.runtime.text_shapes(i.engine(self.kv_blocks))
            prompt, decode = list(shapes.prefill), list(shapes.decode)
        return warmup_estimate(
            i.runtime.traits,
            prompt=prompt,
            decode=decode,
            vision=self.vision_buckets_captured if i.vision_bucketed else (),
            block_size=i.block_size,
            eager=i.enforce_eager,
            captured=captured,
        )

    @property
    def verdict(self) -> Verdict:
        if any(f.severity == "error" for f in self.findings):
            return "does_not_fit"
        return "fits_with_warnings" if any(f.severity == "warning" for f in self.findings) else "fits"

    @property
    def fits(self) -> bool:
        return self.verdict != "does_not_fit"

    @property
    def refusal(self) -> str | None:
        """The line memory plan and serve stop on when the plan does not fit (its first error), else None."""
        return next((f.refusal for f in self.findings if f.severity == "error"), None)


def _override_finding(i: PlanInputs, blocks: int, room: int, per_token: int) -> tuple[Finding, ...]:
    """``--num-gpu-blocks-override`` above the blocks the memory left holds: vLLM allocates them anyway."""
    if i.num_gpu_blocks_override is None or blocks <= room:
        return ()
    need = blocks * per_token * i.block_size / GIB
    message = (
        f"--num-gpu-blocks-override {blocks} asks for {need:.2f} GiB of KV cache where the memory left holds "
        f"{room} blocks: vLLM allocates the override regardless, out of memory when the KV cache is allocated"
    )
    fix = Fix(f"--num-gpu-blocks-override {room} or less, or drop it", "--num-gpu-blocks-override", room)
    return (Finding("error", "kv_cache", "kv_cache_too_small", message, fix),)


def plan(i: PlanInputs) -> Plan:
    """Run every rule."""
    weights = rules.model_weight_bytes(i)
    ms = rules.memory_split(i)
    free = ms.free_after_load_bytes
    s = rules.split_memory(i, max(free, 0)) if free < 0 else rules.split_memory(i)
    per_token = rules.kv_per_token(i)
    blocks = room = rules.kv_blocks(s.kv_cache_bytes, per_token, i.block_size)
    if i.num_gpu_blocks_override is not None:
        blocks = i.num_gpu_blocks_override  # vLLM 0.32 v1/core/kv_cache_utils.py:1230-1236 may_override_num_blocks
    per_seq_blocks = -(-rules.kv_per_sequence(i) // (per_token * i.block_size)) if per_token else 0
    # vLLM's "Maximum concurrency" counts every block (get_max_concurrency_for_kv_cache_config), but its start-up
    # check leaves the null block out: 0 when that check refuses one sequence
    starts = rules.max_concurrent_seqs(rules.usable_kv_blocks(i, blocks), i.block_size, i.max_model_len, per_seq_blocks)
    seqs = rules.max_concurrent_seqs(blocks, i.block_size, i.max_model_len, per_seq_blocks) if starts else 0
    captured, skipped = rules.vision_fit(i, s.prefill_vision_graph_bytes)
    text = rules.text_graph_fit(i, s, blocks)
    return Plan(
        inputs=i,
        weight_bytes=weights,
        profile_bytes=ms.profile_bytes,
        free_after_load_bytes=free,
        split=s,
        kv_bytes_per_token=per_token,
        kv_blocks=blocks,
        max_concurrent_seqs=seqs,
        vision_buckets_captured=captured,
        vision_buckets_skipped=skipped,
        vision_capture_bytes=vision_cost.capture_bytes(captured, i.pool_mode, i.model.vision, i.dtype_size, i.costs),
        text_graphs=text,
        findings=findings(i, free, s, skipped, per_token, seqs, text) + _override_finding(i, blocks, room, per_token),
        memory_formula=ms.formula,
        non_torch_bytes=ms.non_torch_bytes,
        profile_in_free=ms.profile_in_free,
    )

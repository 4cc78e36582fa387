"""A stand-in step-time model for planner tests: a plain roofline of a 7B decoder on a 400 TFLOP/s, 2.4 TB/s card
(the planner only needs seconds that grow with the shape; the product uses vllm_hpu_mm.models.step_time)."""

from __future__ import annotations

import dataclasses

PARAMS = 7.0e9
LAYERS = 28
HIDDEN = 3584
#: KV bytes of one 128-token block over every layer (4 KV heads x 128 dims x K and V x bf16).
BLOCK_BYTES = LAYERS * 128 * 2 * 4 * 128 * 2


@dataclasses.dataclass(frozen=True)
class Roofline:
    peak_flops: float = 4.0e14
    bandwidth: float = 2.4e12
    block_tokens: int = 128

    def _step(self, flops: float, moved: float) -> float:
        return max(flops / self.peak_flops, moved / self.bandwidth)

    def prefill_s(self, batch: int, query_tokens: int, context_blocks: int) -> float:
        ctx = context_blocks * self.block_tokens
        attn = 4 * HIDDEN * LAYERS * batch * query_tokens * (ctx + query_tokens / 2)
        return self._step(2 * PARAMS * batch * query_tokens + attn, 2 * PARAMS + batch * context_blocks * BLOCK_BYTES)

    def decode_s(self, batch: int, blocks: int) -> float:
        attn = 4 * HIDDEN * LAYERS * blocks * self.block_tokens
        return self._step(2 * PARAMS * batch + attn, 2 * PARAMS + blocks * BLOCK_BYTES)

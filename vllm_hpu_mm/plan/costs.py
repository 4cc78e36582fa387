"""The cost coefficients of the memory plan, as one frozen value that a calibration can replace.

Every field left at None means "the estimate built into the cost modules" (:mod:`.vision_cost`, :mod:`.text_cost`);
a calibration (``vllm-hpu-mm memory calibrate``) fills in what a warm-up log measured and names those fields in
``measured``. The plan takes it through one input, :attr:`~vllm_hpu_mm.plan.planner.PlanInputs.costs`.
"""

from __future__ import annotations

import dataclasses

__all__ = ["COST_FIELDS", "ESTIMATES", "CostProfile"]


@dataclasses.dataclass(frozen=True)
class CostProfile:
    #: One vision graph's pool: MiB per patch and fixed MiB (for the reference Qwen2.5-VL tower, bf16).
    vision_mib_per_patch: float | None = None
    vision_fixed_mib: float | None = None
    #: Text graph memory / eager activation estimate, for prefill and for decode graphs.
    text_prefill_factor: float | None = None
    text_decode_factor: float | None = None
    #: Names of the fields above that were measured, and where (device, model, log).
    measured: tuple[str, ...] = ()
    source: str = ""


#: The coefficient fields, in the order they are reported.
COST_FIELDS = ("vision_mib_per_patch", "vision_fixed_mib", "text_prefill_factor", "text_decode_factor")

#: Every coefficient at its built-in estimate (nothing measured): the plan's default.
ESTIMATES = CostProfile()

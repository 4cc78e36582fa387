"""The cost coefficients of the memory plan, as one frozen value that a calibration can replace.

Every field left at None means "the estimate built into the cost modules" (:mod:`.vision_cost`, :mod:`.text_cost`);
a calibration (``vllm-hpu-mm memory calibrate``) fills in what a warm-up log measured and names those fields in
``measured``. The plan takes it through one input, :attr:`~vllm_hpu_mm.plan.planner.PlanInputs.costs`.
"""

from __future__ import annotations

import dataclasses

__all__ = [
    "COST_FIELDS",
    "ESTIMATES",
    "HPU_LAZY_GRAPHS",
    "CostProfile",
    "label",
    "with_measured",
]


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
    #: Names of the fields above fitted to public logs of another deployment (built in), and those logs.
    calibrated: tuple[str, ...] = ()
    calibrated_source: str = ""


#: The coefficient fields, in the order they are reported.
COST_FIELDS = ("vision_mib_per_patch", "vision_fixed_mib", "text_prefill_factor", "text_decode_factor")

#: Every coefficient at its built-in estimate (nothing measured): the plan's default.
ESTIMATES = CostProfile()


#: HPU graph memory of the language model, lazy HPU graphs (vllm-fork after its PR 252, the mode vllm-gaudi's
#: ``PT_HPU_LAZY_MODE=1`` runs): graph pool / eager activations fitted to the development log
#: tests/data/gaudi_logs/dev/vllm_gaudi_perf_tuning_llama31_8b_gaudi2.log (vllm-gaudi
#: docs/configuration/performance_tuning.md @091bbadd, Llama-3.1-8B on one Gaudi2: 24 prompt graphs 67.72 MiB, one
#: decode graph 64 KiB). The held-out PR 147 log predates PR 252 (15 prompt graphs held 14.03 GiB: 16.7x / 0.30x);
#: no public torch.compile (vllm-gaudi's default) warm-up log with per-graph memory was found: on that path these
#: are estimates.
HPU_LAZY_GRAPHS = CostProfile(
    text_prefill_factor=0.024,
    text_decode_factor=0.015,
    calibrated=("text_prefill_factor", "text_decode_factor"),
    calibrated_source=(
        "public Gaudi2 log: vllm-gaudi docs/configuration/performance_tuning.md @091bbadd (lazy HPU graphs)"
    ),
)


def label(costs: CostProfile, field: str) -> str:
    """How one coefficient was obtained: measured (your log), calibrated (public logs, built in) or estimated."""
    if field in costs.measured:
        return "measured"
    return "calibrated" if field in costs.calibrated else "estimated"


def with_measured(base: CostProfile, profile: CostProfile) -> CostProfile:
    """``base`` (the plan's costs without a profile) with the fields ``profile`` measured replaced by its values.
    Every field it did not measure keeps ``base``'s value and label: a profile of a log whose warm-up was skipped, or
    of a ``/metrics`` page alone, leaves the public calibration where it was."""
    measured = (*profile.measured, *(n for n in base.measured if n not in profile.measured))
    values = {n: getattr(profile if n in profile.measured else base, n) for n in COST_FIELDS}
    return CostProfile(**values, measured=measured, source=profile.source if profile.measured else base.source,
                       calibrated=tuple(n for n in base.calibrated if n not in measured),
                       calibrated_source=base.calibrated_source)  # fmt: skip

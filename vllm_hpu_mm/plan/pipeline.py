"""Steps of the plan that the jobs compose (:mod:`vllm_hpu_mm.jobs`): apply the measured costs of a profile, fit
``--max-model-len auto`` as vLLM does, and check the inputs against the runtime's own bucketing (naming the flag to
change when it refuses them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.plan.costs import COST_FIELDS, label, with_measured
from vllm_hpu_mm.plan.inputs import PlanInputs
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.plan.profile import Profile, ProfileRead
from vllm_hpu_mm.plan.rules import usable_kv_blocks
from vllm_hpu_mm.runtimes.base import BatchLimits, DeviceFacts
from vllm_hpu_mm.runtimes.registry import TRAITS
from vllm_hpu_mm.values import GIB

__all__ = ["apply_profile", "checked_by_runtime", "fit_max_model_len", "memory_evidence", "plan_with_profile"]


def apply_profile(inputs: PlanInputs, profile: Profile, *, free_stated: bool) -> tuple[PlanInputs, list[str]]:
    """The plan inputs with the profile's measured costs, and what was (not) applied and why.

    The profile applies when it was measured on the plan's backend (HPU costs on an HPU plan) and by the plan's
    runtime, where the log named it (:func:`_runtimes_differ`: a vllm-gaudi profile is no input to a vllm-fork
    plan). The measured free memory after load applies only when no free memory was stated on the command line, and
    only to a plan of the shape it was measured at (:func:`_other_shape`); otherwise the plan estimates it and says
    why.
    """
    notes: list[str] = []
    if profile.backend not in (None, inputs.backend):
        # the costs keep the labels they have without a profile (a Gaudi plan's text factors stay calibrated)
        on = f"{profile.device} ({profile.backend})" if profile.device else profile.backend
        return inputs, [f"not applied (profile {profile.path}): measured on {on}, this plan is for {inputs.device} "
                        f"({inputs.backend}): graph costs and free memory measured on one backend do not hold on "
                        "another, so none of it is used", *_labels(inputs)]  # fmt: skip
    ours = inputs.runtime.name.value
    if profile.measured_by not in (None, ours):
        return inputs, [f"not applied (profile {profile.path}): measured by {profile.measured_by}, this plan is for "
                        f"{ours}: {_runtimes_differ(profile.measured_by, inputs)}", *_labels(inputs)]  # fmt: skip
    out = dataclasses.replace(inputs, costs=with_measured(inputs.costs, profile.costs))
    if profile.cuda_graph_bytes is not None:
        # vLLM 0.32 profiles its CUDA graphs at start at the plan's own capture sizes (v1/worker/gpu_worker.py:700-743
        # determine_available_memory); the profile keeps one total at the log's sizes, not the shape it was taken at
        alone = "" if profile.costs.measured or profile.free_after_load_bytes is not None else (
            "; it holds no other memory cost (no graph cost factor, no free memory after load)")  # fmt: skip
        notes.append(f"not applied (profile {profile.path}): CUDA graph memory {profile.cuda_graph_bytes / GIB:.2f} "
                     f"GiB measured by {profile.costs.source}: the profile does not record the capture sizes and "
                     "shape it was taken at, so the graphs row stays the plan's estimate of what vLLM profiles at "
                     f"start{alone}")  # fmt: skip
    if profile.costs.measured:
        notes.append(f"measured (profile {profile.path}): {', '.join(profile.costs.measured)}")
    elif profile.free_after_load_bytes is None and profile.cuda_graph_bytes is None:
        held = " (a step time only, from /metrics)" if profile.step_time is not None else ""
        notes.append(f"nothing measured (profile {profile.path}): it holds no memory cost{held}")
    if profile.free_after_load_bytes is not None and not free_stated:
        measured = f"free after load {profile.free_after_load_bytes / GIB:.2f} GiB"
        other = _other_shape(profile, inputs)
        if other:
            notes.append(f"not applied (profile): {measured}, measured at {other}: estimated instead")
        else:
            # the one place that decides the figure is the profile's: the row, the JSON and ``measured`` read it here
            out = dataclasses.replace(
                out,
                free_after_load_bytes=profile.free_after_load_bytes,
                free_after_load_measured_by=f"profile {profile.path}: {profile.costs.source}",
            )
            notes.append(f"measured (profile {profile.path}): {measured}")
    notes += _labels(out)
    return out, notes


def _reads_free(profiles_forward: bool) -> str:
    return "after its profiling forward pass" if profiles_forward else "right after load, with no profiling pass"


def _runtimes_differ(measured_by: str, inputs: PlanInputs) -> str:
    """Why one runtime's profile is no input to another's plan on the same backend. Its free memory after load is
    that runtime's own reading: vllm-gaudi reads it right after load (``profile_run(initialize_only=True)`` returns at
    once, v1/worker/hpu_worker.py:401-408 @091bbadd), vllm-fork after a profiling forward pass at the longest
    sequence (vllm/worker/hpu_worker.py determine_num_available_blocks, as runtimes/vllm_fork models it). Its graph
    costs are what that runtime's own model runner held after warming its own buckets: vllm-gaudi's V1 runner
    (batch, query, context blocks) with HPU graphs in lazy mode only and torch.compile otherwise
    (v1/worker/hpu_model_runner.py _maybe_wrap_in_hpu_graph, :4949-5004 @091bbadd), the fork's V0 runner lazy HPU
    graphs of (batch, sequence) buckets; the fork before 1.22 warms no vision graph."""
    theirs = next(t for r, t in TRAITS.items() if r.value == measured_by)
    return (
        f"its free memory after load is {measured_by}'s own reading ({_reads_free(theirs.profiles_forward)}; "
        f"{inputs.runtime.name.value} reads it {_reads_free(inputs.runtime.traits.profiles_forward)}) and its "
        "graph costs are what that runtime's own model runner captured, so none of it is used"
    )


def _other_shape(profile: Profile, inputs: PlanInputs) -> str:
    """How the shape a profile's free memory after load was measured at differs from the plan's, in words ("" when
    it is the plan's). That figure is the card's total less what it holds after load: the model's weights, split
    over the tensor- and pipeline-parallel ranks and sized by the quantization (vllm-gaudi hpu_worker.py:399-406
    @091bbadd), and on vllm-fork also a profiling pass's peak at the longest sequence (its hpu_worker.py
    determine_num_available_blocks), so it is the free memory of that shape alone and is not rescaled."""
    at = profile.measured_at
    pairs = [
        ("model", profile.model, inputs.model.name),
        ("device", profile.device or inputs.device, inputs.device),
        ("TP", at.tensor_parallel_size, inputs.tensor_parallel_size),
        ("PP", at.pipeline_parallel_size, inputs.pipeline_parallel_size),
        ("quantization", at.quantization, inputs.quantization),
    ]
    if at.after_profile_run and at.max_model_len is not None:
        pairs.append(("max-model-len", at.max_model_len, inputs.max_model_len))
    differ = [f"{what} {theirs}, this plan {ours}" for what, theirs, ours in pairs if theirs != ours]
    if profile.measured_by is None and at.after_profile_run != inputs.runtime.traits.profiles_forward:
        # a log that does not name its runtime: what calibrate recorded of how it was read must be this plan's
        differ.append(
            f"a free memory read {_reads_free(at.after_profile_run)}, this plan's "
            f"{inputs.runtime.name.value} reads it {_reads_free(inputs.runtime.traits.profiles_forward)}"
        )
    return "; ".join(differ)


def _labels(inputs: PlanInputs) -> list[str]:
    """Every cost coefficient labelled measured, calibrated (public logs, with the source) or estimated."""
    out = []
    calibrated = [n for n in COST_FIELDS if label(inputs.costs, n) == "calibrated"]
    if calibrated:
        out.append(f"calibrated ({inputs.costs.calibrated_source}): {', '.join(calibrated)}")
    estimated = [n for n in COST_FIELDS if label(inputs.costs, n) == "estimated"]
    if estimated:
        out.append(f"estimated (built-in): {', '.join(estimated)}")
    return out


def plan_with_profile(inputs: PlanInputs, read: ProfileRead, *, free_stated: bool) -> tuple[PlanInputs, dict[str, Any]]:
    """Apply the profile read for the command (:func:`~vllm_hpu_mm.plan.profile.read_profile`) to the plan inputs;
    the ``costs`` report."""
    if read.profile is None:
        return inputs, {"profile": None, "notes": [*_labels(inputs), read.why_none]}
    profile = read.profile
    out, notes = apply_profile(inputs, profile, free_stated=free_stated)
    measured = list(out.costs.measured) + (["free_after_load"] if out.free_after_load_measured_by else [])
    return out, {"profile": str(profile.path), "measured": measured, "notes": notes}


def memory_evidence(costs: dict[str, Any]) -> str:
    """What a plan's memory figures rest on, from its ``costs`` report: "calibrated" only for what the profile
    measured and this plan used (a profile from ``/metrics`` alone measures no memory cost), the rest estimates."""
    profile, measured = costs.get("profile"), costs.get("measured") or []
    if not profile:
        return "built-in estimates (no `memory calibrate` profile)"
    if not measured:
        return f"built-in estimates: the profile {profile} measured no memory cost this plan uses"
    return (
        f"calibrated: measured costs from the profile {profile} ({', '.join(measured)}); the others built-in estimates"
    )


def fit_max_model_len(inputs: PlanInputs) -> PlanInputs:
    """``--max-model-len auto`` as vLLM 0.32 resolves it (``vllm/v1/core/kv_cache_utils.py``
    ``_auto_fit_max_model_len``): the longest sequence whose blocks fit the KV cache less the one block the block
    pool holds back, at most the model's maximum. The KV cache does not depend on ``max_model_len``, so one plan at
    the model's maximum gives it. When not even one block is left, the maximum stays (vLLM refuses to start, and
    the plan says the KV cache is too small)."""
    if not inputs.max_model_len_auto:
        return inputs
    blocks = usable_kv_blocks(inputs, plan(inputs).kv_blocks)
    if blocks < 1:
        return inputs
    return dataclasses.replace(inputs, max_model_len=min(inputs.max_model_len, blocks * inputs.block_size))


def _runtime_defaults(i: PlanInputs) -> BatchLimits:
    facts = DeviceFacts(i.backend, i.total_bytes, i.device, i.tensor_parallel_size * i.pipeline_parallel_size)
    return i.runtime.batch_defaults(facts)


#: The sizing inputs a runtime builds its graph buckets from, and the value that is theirs when unset (the runtime's
#: own default for the device, the model's maximum length).
_BUCKETING_INPUTS: dict[str, Callable[[PlanInputs], int]] = {
    "max_num_batched_tokens": lambda i: _runtime_defaults(i).max_num_batched_tokens,
    "max_model_len": lambda i: i.model.max_model_len,
    "max_num_seqs": lambda i: _runtime_defaults(i).max_num_seqs,
}


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def checked_by_runtime(inputs: PlanInputs, flag: Callable[[str], str] = _flag) -> PlanInputs:
    """``inputs`` once the runtime's model has built its graph buckets from them. When it refuses them (vllm-gaudi
    generating no bucket, or a bucket count of 0), the error names the sizing flag to change and the values the
    runtime accepts, found by re-planning with that input alone changed (the runtime's own message otherwise)."""
    try:
        plan(inputs)
    except ConfigError as exc:
        raise _refused_input(inputs, exc, flag) from None
    return inputs


def _accepts(inputs: PlanInputs, **values: Any) -> bool:
    try:
        plan(dataclasses.replace(inputs, **values))
    except ConfigError:
        return False
    return True


def _refused_input(inputs: PlanInputs, exc: ConfigError, flag: Callable[[str], str]) -> ConfigError:
    runtime = inputs.runtime.name.value
    typed = [f for f in _BUCKETING_INPUTS if f in inputs.given]
    for field in typed:
        value, good = getattr(inputs, field), _BUCKETING_INPUTS[field](inputs)
        if value == good or not _accepts(inputs, **{field: good}):
            continue
        # the accepted values lie towards the default: bisect for the nearest one
        bad = value
        while abs(good - bad) > 1:
            mid = (good + bad) // 2
            good, bad = (mid, bad) if _accepts(inputs, **{field: mid}) else (good, mid)
        bound = f"at least {good}" if good > value else f"at most {good}"
        return ConfigError(f"{flag(field)}={value}: {runtime} would refuse it ({exc}); accepted: {bound} with "
                           "these settings")  # fmt: skip
    # a refusal that names the runtime's variables is theirs: the flags are not listed beside it as if to blame
    given = [] if "VLLM_" in str(exc) else [f"{flag(f)}={getattr(inputs, f)}" for f in typed]
    return ConfigError(f"{runtime} would refuse these settings{' (' + ', '.join(given) + ')' if given else ''}: {exc}")

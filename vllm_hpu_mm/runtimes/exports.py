"""What ``serve`` hands the plan's runtime so that it respects the plan, and which parts it then honours.

The guide's ratios are the planning inputs everywhere; what reaches the server is chosen per runtime, because each
reads different knobs (its :class:`~.base.RuntimeTraits`; each runtime's ``exports`` module says what it gets).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vllm_hpu_mm import envs
from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.plan.planner import Plan
from vllm_hpu_mm.runtimes.base import Exports, Runtime, ServerFlags
from vllm_hpu_mm.runtimes.exporting import Draft
from vllm_hpu_mm.runtimes.vllm_cpu import exports as cpu
from vllm_hpu_mm.runtimes.vllm_cuda import exports as cuda
from vllm_hpu_mm.runtimes.vllm_fork import exports as fork
from vllm_hpu_mm.runtimes.vllm_gaudi import exports as gaudi

__all__ = ["exports_for", "flags_from_environment"]


def flags_from_environment(settings: Settings, **given: Any) -> ServerFlags:
    """What the environment says about the knobs the exports might set; ``given``: what the server arguments say
    (``limit_mm_per_prompt``, ``compilation_config``, ``kv_cache_memory_bytes_given``)."""
    return ServerFlags(
        user_env=envs.runtime_environ(),
        skip_warmup=settings.skip_warmup,
        fp32_softmax=envs.read_if_set("VLLM_FP32_SOFTMAX"),
        **given,
    )


def exports_for(
    plan: Plan, flags: ServerFlags, *, resolutions: Sequence[tuple[int, int]] = (), bucket_file_path: str = ""
) -> Exports:
    """The environment, extra server arguments and files that make the plan's runtime respect ``plan``, with each
    part's enforcement. ``resolutions`` and ``bucket_file_path`` are vllm-gaudi's (its warm-up shapes, where its
    bucket file will be written)."""
    draft = Draft.start(plan, flags)
    runtime = plan.inputs.runtime.name
    if runtime is Runtime.VLLM_GAUDI:
        return gaudi.exports(draft, resolutions=resolutions, bucket_file_path=bucket_file_path)
    if runtime is Runtime.VLLM_FORK:
        return fork.exports(draft)
    if runtime is Runtime.VLLM_CUDA:
        return cuda.exports(draft)
    return cpu.exports(draft)

"""What ``serve`` hands the plan's runtime so that it respects the plan, and which parts it then honours.

The guide's ratios are the planning inputs everywhere; what reaches the server is chosen per runtime, because each
reads different knobs (its :class:`~.base.RuntimeTraits`; each runtime's ``exports`` module says what it gets).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from vllm_hpu_mm import envs
from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.plan.planner import Plan
from vllm_hpu_mm.runtimes.base import ExportContext, Exports, ServerFlags
from vllm_hpu_mm.runtimes.exporting import Draft
from vllm_hpu_mm.runtimes.registry import ENTRIES

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


def exports_for(plan: Plan, context: ExportContext) -> Exports:
    """The environment, extra server arguments and files that make the plan's runtime respect ``plan``, with each
    part's enforcement: its registry entry's exporter."""
    exporter: Callable[[Draft, ExportContext], Exports] = importlib.import_module(
        ENTRIES[plan.inputs.runtime.name].exporter
    ).exports
    return exporter(Draft.start(plan, context.flags), context)

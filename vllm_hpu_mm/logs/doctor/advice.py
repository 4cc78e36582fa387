"""Advice for a diagnosis: settings for the runtime the log comes from (Gaudi, CUDA, CPU), at most one target value
per setting, computed from the log's own numbers where it states them (the Gaudi memory split is re-planned)."""

from __future__ import annotations

import dataclasses
import re

from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.logs.doctor.scan import Diagnosis
from vllm_hpu_mm.models.catalog import DEFAULT_MODEL
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.inputs import build
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.runtimes.base import GRAPH_RESERVED_MEM
from vllm_hpu_mm.values import PIXELS_PER_PATCH

__all__ = ["contradictions", "recommend"]

#: vllm-gaudi's default share of usable memory for graphs (``v1/worker/hpu_worker.py``).
GAUDI_DEFAULT_GRAPH_RESERVED_MEM = 0.1
_CAP_IMAGES = (
    "cap images: a lower max_pixels (--mm-processor-kwargs '{\"max_pixels\": 1003520}') or fewer images per prompt "
    "(--limit-mm-per-prompt '{\"image\": 1}')"
)


def _plan_graph_fix(d: Diagnosis, settings: Settings, model: str, explicit: bool) -> tuple[str | None, float | None]:
    """With the Gaudi memory line, re-plan from the log's own numbers: (advice, VLLM_GRAPH_RESERVED_MEM it names)."""
    g = d.gaudi_memory
    if g is None:
        return None, None
    args = SizingArgs(
        model=model,
        device="gaudi2",
        free_memory_gib=g.free_gib,
        gpu_memory_utilization=g.gpu_memory_utilization or None,
        graph_reserved_mem=g.graph_reserved_mem,
    )
    note = ""
    try:
        p = plan(build(args, settings))
    except ConfigError:
        if explicit:  # the CLI checked --model already; anything else here is the log's own numbers
            raise
        # The log's model is not resolvable here (a path on another machine): plan the default, and say so.
        p = plan(build(dataclasses.replace(args, model=DEFAULT_MODEL), settings))
        note = f"; the log's model {model!r} is not known here, so the default was planned (pass --model)"
    vision = next((f for f in p.findings if f.code == "vision_buckets_skipped"), None)
    if vision is None:
        return None, None
    value = vision.fix.value if vision.fix.setting == GRAPH_RESERVED_MEM else None
    advice = (
        f"plan from this log's numbers (free {g.free_gib} GiB, model {p.inputs.model.name}{note}): {vision.fix.text}"
    )
    return advice, value


def _graph_reserved_step(d: Diagnosis) -> tuple[float, float]:
    """(current, raised) VLLM_GRAPH_RESERVED_MEM when no plan names a value: one step of 0.1 up from the log's."""
    current = d.gaudi_memory.graph_reserved_mem if d.gaudi_memory else GAUDI_DEFAULT_GRAPH_RESERVED_MEM
    return current, min(1.0, round(current + 0.1, 2))


def _gaudi_graph_capture(d: Diagnosis, settings: Settings, model: str, explicit: bool) -> list[str]:
    out = []
    fix, planned = _plan_graph_fix(d, settings, model, explicit)
    if fix:
        out.append(fix)
    if planned is None:
        current, raised = _graph_reserved_step(d)
        out.append(f"raise VLLM_GRAPH_RESERVED_MEM from {current} to {raised} (graphs get more of the usable memory, "
                   "the KV cache less)")  # fmt: skip
    if d.warmup is not None:
        kind, i, n = d.warmup
        buckets = settings.multimodal_buckets
        if "multimodal" in kind.lower() and buckets and len(buckets) == n and i > 1:
            keep = ",".join(map(str, buckets[: i - 1]))
            out.append(f"failed at warm-up graph {i}/{n} ({kind}): keep the buckets that captured, "
                       f"VLLM_MULTIMODAL_BUCKETS={keep}")  # fmt: skip
        else:
            out.append(f"failed at warm-up graph {i}/{n} ({kind}): fewer buckets from there on (a lower "
                       "--max-num-seqs or --max-model-len, or the VLLM_*_BUCKET_MAX settings)")  # fmt: skip
    out.append("VLLM_SKIP_WARMUP=true starts without capturing (graphs are then built on first use)")
    return out


def _kv_cache(d: Diagnosis) -> list[str]:
    out = []
    if d.kv_fit is not None:
        asked, holds = d.kv_fit
        out.append(f"lower --max-model-len from {asked} to {holds} (what the KV cache holds)")
    g = d.gaudi_memory
    if d.backend == "cpu":
        out.append("on CPU, give --kv-cache-memory-bytes at least max_model_len x KV bytes per token (see "
                   "`vllm-hpu-mm memory plan --json`: kv_bytes_per_token)")  # fmt: skip
        return out
    util = g.gpu_memory_utilization if g else None
    out.append("raise --gpu-memory-utilization" + (f" from {util} to {min(0.98, round(util + 0.05, 2))}" if util
               else " (e.g. to 0.95)") + " so the KV cache gets more")  # fmt: skip
    if d.backend == "hpu":
        current = g.graph_reserved_mem if g else GAUDI_DEFAULT_GRAPH_RESERVED_MEM
        lowered = max(0.0, round(current - 0.05, 2))
        split = f" (the log's split: {g.kv_gib} GiB KV of {g.usable_gib} GiB usable)" if g else ""
        out.append(f"lower VLLM_GRAPH_RESERVED_MEM from {current} to {lowered} to move graph memory to the KV "
                   f"cache{split}")  # fmt: skip
    return out


def _startup(d: Diagnosis) -> list[str]:
    out = [
        "raise --tensor-parallel-size if the weights alone nearly fill the device (or use a quantized model)",
        "lower --max-num-batched-tokens and --max-num-seqs: the profiling run's peak grows with them",
        _CAP_IMAGES,
    ]
    if d.backend == "hpu":
        out.append("on Gaudi, load the weights on the host first (--weights-load-device cpu, vllm-fork) when the "
                   "card fails while the weights move to it")  # fmt: skip
    return out


def _runtime(d: Diagnosis, settings: Settings) -> list[str]:
    g = d.gaudi_memory
    buckets = settings.multimodal_buckets
    if buckets and len(buckets) > 1:
        smaller = buckets[:-1]
        # 14 x 14 pixels per patch: images up to the new largest bucket need no larger graph.
        first = (f"drop the largest vision bucket: VLLM_MULTIMODAL_BUCKETS={','.join(map(str, smaller))} with "
                 f"--mm-processor-kwargs '{{\"max_pixels\": {smaller[-1] * PIXELS_PER_PATCH}}}' so no image needs "
                 f"{buckets[-1]} patches")  # fmt: skip
    else:
        first = "a lower max_pixels (--mm-processor-kwargs '{\"max_pixels\": 1003520}') so large images cost less"
    lower = f" from {g.gpu_memory_utilization} to {round(g.gpu_memory_utilization - 0.05, 2)}" if g else ""
    return [first, "lower --max-num-batched-tokens so one step holds fewer image tokens",
            f"lower --gpu-memory-utilization{lower} to leave run-time headroom"]  # fmt: skip


def _host(d: Diagnosis) -> list[str]:
    where = {"startup": "while the model loads", "runtime": "while serving"}.get(d.stage, "")
    out = [f"the host ran out of memory {where}, not the accelerator: give the process more RAM (container limit, "
           "fewer other processes) or free memory for it".replace("  ", " ")]  # fmt: skip
    if d.stage == "startup":
        out.append("load fewer weight shards at once (--max-parallel-loading-workers 1) and drop --cpu-offload-gb")
    else:
        out.append("lower --max-num-seqs and --swap-space (host KV swap), and the API server count")
    return out


def recommend(d: Diagnosis, settings: Settings, model: str | None = None) -> tuple[str, ...]:
    """Concrete settings for the diagnosed stage; ``model`` (``--model``) overrides the log's model."""
    explicit = model is not None
    chosen = model or d.model or DEFAULT_MODEL
    if d.stage == "none":
        return ("no out-of-memory failure found in this log",)
    if d.memory == "host":
        return tuple(_host(d))
    if d.stage == "unknown":
        return ("the log shows an out-of-memory error but not the stage it happened in: run again and keep the "
                "whole server log from its first line, then diagnose that",)  # fmt: skip
    if d.stage == "startup":
        out = _startup(d)
    elif d.stage == "kv_cache":
        out = _kv_cache(d)
    elif d.stage == "graph_capture":
        if d.backend == "hpu":
            out = _gaudi_graph_capture(d, settings, chosen, explicit)
        elif d.backend == "cpu":
            out = ["--enforce-eager (no torch.compile warm-up) or a lower --max-num-batched-tokens"]
        else:
            out = ["fewer capture sizes (--compilation-config '{\"cudagraph_capture_sizes\": [1,2,4,8]}') or a "
                   "lower --max-num-seqs", "a lower --gpu-memory-utilization leaves the graphs more room",
                   "--enforce-eager starts without CUDA graphs"]  # fmt: skip
    else:
        out = _runtime(d, settings)
    if d.basis == "cut":
        out.insert(0, "the log stops in this phase without an error line: the process most likely died there (a "
                   "device or host out-of-memory kill); check the kernel log (dmesg) for the OOM killer")  # fmt: skip
    return tuple(out)


_TARGET = re.compile(r"(?P<name>--[a-z-]+|VLLM_[A-Z_]+)\b[^;,]*?\bto (?P<value>\d+(?:\.\d+)?)\b")


def contradictions(recommendations: tuple[str, ...]) -> dict[str, set[str]]:
    """Settings given more than one target value ("raise X to 0.2" next to "raise X to 0.4"): should be empty."""
    seen: dict[str, set[str]] = {}
    for text in recommendations:
        for m in _TARGET.finditer(text):
            seen.setdefault(m["name"], set()).add(m["value"])
    return {name: values for name, values in seen.items() if len(values) > 1}

"""Advice for a diagnosis: settings for the runtime the log comes from (Gaudi, CUDA, CPU), at most one target value
per setting, computed from the log's own numbers where it states them (the Gaudi memory split is re-planned, and
the plan's structured finding, not its wording, gives the value)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.logs.doctor.decide import Diagnosis
from vllm_hpu_mm.models.catalog import DEFAULT_MODEL
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.inputs import build
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.runtimes import registry
from vllm_hpu_mm.runtimes.base import GRAPH_RESERVED_MEM
from vllm_hpu_mm.values import PIXELS_PER_PATCH

__all__ = ["Advice", "contradictions", "recommend"]

#: vllm-gaudi's default share of usable memory for graphs (``v1/worker/hpu_worker.py``).
GAUDI_DEFAULT_GRAPH_RESERVED_MEM = 0.1
_CAP_IMAGES = (
    "cap images: a lower max_pixels (--mm-processor-kwargs '{\"max_pixels\": 1003520}') or fewer images per prompt "
    "(--limit-mm-per-prompt '{\"image\": 1}')"
)


@dataclasses.dataclass(frozen=True)
class Advice:
    """One recommendation: its words, and the setting it changes with the value it names (when it names one)."""

    text: str
    setting: str | None = None
    value: float | None = None


def _plan_graph_fix(d: Diagnosis, settings: Settings, model: str, explicit: bool) -> Advice | None:
    """With the Gaudi memory line, re-plan from the log's own numbers: the plan's vision-bucket finding and its fix."""
    g = d.gaudi_memory
    if g is None:
        return None
    args = SizingArgs(
        model=model,
        device=registry.MAIN_JOB_DEVICE,
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
        return None
    text = f"plan from this log's numbers (free {g.free_gib} GiB, model {p.inputs.model.name}{note}): {vision.fix.text}"
    return Advice(text, vision.fix.setting, vision.fix.value)


def _gaudi_graph_capture(d: Diagnosis, settings: Settings, model: str, explicit: bool) -> list[Advice]:
    out = []
    planned = _plan_graph_fix(d, settings, model, explicit)
    if planned is not None:
        out.append(planned)
    if planned is None or planned.setting != GRAPH_RESERVED_MEM:
        current = d.gaudi_memory.graph_reserved_mem if d.gaudi_memory else GAUDI_DEFAULT_GRAPH_RESERVED_MEM
        raised = min(1.0, round(current + 0.1, 2))
        out.append(Advice(f"raise {GRAPH_RESERVED_MEM} from {current} to {raised} (graphs get more of the usable "
                          "memory, the KV cache less)", GRAPH_RESERVED_MEM, raised))  # fmt: skip
    if d.warmup is not None:
        kind, i, n = d.warmup
        buckets = settings.multimodal_buckets
        if "multimodal" in kind.lower() and buckets and len(buckets) == n and i > 1:
            keep = ",".join(map(str, buckets[: i - 1]))
            out.append(Advice(f"failed at warm-up graph {i}/{n} ({kind}): keep the buckets that captured, "
                              f"VLLM_MULTIMODAL_BUCKETS={keep}"))  # fmt: skip
        else:
            out.append(Advice(f"failed at warm-up graph {i}/{n} ({kind}): fewer buckets from there on (a lower "
                              "--max-num-seqs or --max-model-len, or the VLLM_*_BUCKET_MAX settings)"))  # fmt: skip
    out.append(Advice("VLLM_SKIP_WARMUP=true starts without capturing (graphs are then built on first use)"))
    return out


def _kv_cache(d: Diagnosis) -> list[Advice]:
    out = []
    if d.kv_fit is not None:
        asked, holds = d.kv_fit
        out.append(Advice(f"lower --max-model-len from {asked} to {holds} (what the KV cache holds)",
                          "--max-model-len", holds))  # fmt: skip
    g = d.gaudi_memory
    if d.backend == "cpu":
        out.append(Advice("on CPU, give --kv-cache-memory-bytes at least max_model_len x KV bytes per token (see "
                          "`vllm-hpu-mm memory plan --json`: kv_bytes_per_token)"))  # fmt: skip
        return out
    if g is not None and g.gpu_memory_utilization:
        raised = min(0.98, round(g.gpu_memory_utilization + 0.05, 2))
        out.append(Advice(f"raise --gpu-memory-utilization from {g.gpu_memory_utilization} to {raised} so the KV "
                          "cache gets more", "--gpu-memory-utilization", raised))  # fmt: skip
    else:
        out.append(Advice("raise --gpu-memory-utilization (e.g. to 0.95) so the KV cache gets more"))
    if d.backend == "hpu":
        current = g.graph_reserved_mem if g else GAUDI_DEFAULT_GRAPH_RESERVED_MEM
        lowered = max(0.0, round(current - 0.05, 2))
        split = f" (the log's split: {g.kv_gib} GiB KV of {g.usable_gib} GiB usable)" if g else ""
        out.append(Advice(f"lower {GRAPH_RESERVED_MEM} from {current} to {lowered} to move graph memory to the KV "
                          f"cache{split}", GRAPH_RESERVED_MEM, lowered))  # fmt: skip
    return out


def _startup(d: Diagnosis) -> list[Advice]:
    out = [
        Advice("raise --tensor-parallel-size if the weights alone nearly fill the device (or use a quantized model)"),
        Advice("lower --max-num-batched-tokens and --max-num-seqs: the profiling run's peak grows with them"),
        Advice(_CAP_IMAGES),
    ]
    if d.backend == "hpu":
        out.append(Advice("on Gaudi, load the weights on the host first (--weights-load-device cpu, vllm-fork) when "
                          "the card fails while the weights move to it"))  # fmt: skip
    return out


def _graph_capture(d: Diagnosis, settings: Settings, model: str, explicit: bool) -> list[Advice]:
    if d.backend == "hpu":
        return _gaudi_graph_capture(d, settings, model, explicit)
    if d.backend == "cpu":
        return [Advice("--enforce-eager (no torch.compile warm-up) or a lower --max-num-batched-tokens")]
    return [Advice("fewer capture sizes (--compilation-config '{\"cudagraph_capture_sizes\": [1,2,4,8]}') or a lower "
                   "--max-num-seqs"),
            Advice("a lower --gpu-memory-utilization leaves the graphs more room"),
            Advice("--enforce-eager starts without CUDA graphs")]  # fmt: skip


def _runtime(d: Diagnosis, settings: Settings) -> list[Advice]:
    g = d.gaudi_memory
    buckets = settings.multimodal_buckets
    out = []
    if buckets and len(buckets) > 1:
        smaller = buckets[:-1]
        # 14 x 14 pixels per patch: images up to the new largest bucket need no larger graph.
        out.append(Advice(f"drop the largest vision bucket: VLLM_MULTIMODAL_BUCKETS={','.join(map(str, smaller))} "
                          f"with --mm-processor-kwargs '{{\"max_pixels\": {smaller[-1] * PIXELS_PER_PATCH}}}' so no "
                          f"image needs {buckets[-1]} patches"))  # fmt: skip
    else:
        out.append(Advice("a lower max_pixels (--mm-processor-kwargs '{\"max_pixels\": 1003520}') so large images "
                          "cost less"))  # fmt: skip
    out.append(Advice("lower --max-num-batched-tokens so one step holds fewer image tokens"))
    if g is not None:
        lowered = round(g.gpu_memory_utilization - 0.05, 2)
        out.append(Advice(f"lower --gpu-memory-utilization from {g.gpu_memory_utilization} to {lowered} to leave "
                          "run-time headroom", "--gpu-memory-utilization", lowered))  # fmt: skip
    else:
        out.append(Advice("lower --gpu-memory-utilization to leave run-time headroom"))
    return out


def _host(d: Diagnosis) -> list[Advice]:
    where = {"startup": " while the model loads", "runtime": " while serving"}.get(d.stage, "")
    out = [Advice(f"the host ran out of memory{where}, not the accelerator: give the process more RAM (container "
                  "limit, fewer other processes) or free memory for it")]  # fmt: skip
    if d.stage == "startup":
        out.append(Advice("load fewer weight shards at once (--max-parallel-loading-workers 1) and drop "
                          "--cpu-offload-gb"))  # fmt: skip
    else:
        out.append(Advice("lower --max-num-seqs and --swap-space (host KV swap), and the API server count"))
    return out


def recommend(d: Diagnosis, settings: Settings, model: str | None = None) -> tuple[Advice, ...]:
    """Concrete settings for the diagnosed stage; ``model`` (``--model``) overrides the log's model."""
    explicit = model is not None
    chosen = model or d.model or DEFAULT_MODEL
    if d.stage == "none":
        return (Advice("no out-of-memory failure found in this log"),)
    if d.memory == "host":
        return tuple(_host(d))
    if d.stage == "unknown":
        return (Advice("the log shows an out-of-memory error but not the stage it happened in: run again and keep "
                       "the whole server log from its first line, then diagnose that"),)  # fmt: skip
    if d.stage == "startup":
        out = _startup(d)
    elif d.stage == "kv_cache":
        out = _kv_cache(d)
    elif d.stage == "graph_capture":
        out = _graph_capture(d, settings, chosen, explicit)
    else:
        out = _runtime(d, settings)
    if d.basis == "cut":
        out.insert(0, Advice("the log stops in this phase without an error line: the process most likely died there "
                             "(a device or host out-of-memory kill); check the kernel log (dmesg) for the OOM "
                             "killer"))  # fmt: skip
    if d.runs > 1:
        out.insert(0, Advice(f"the log holds {d.runs} server starts; this is run {d.run}, the last one that failed"))
    return tuple(out)


def contradictions(advice: Iterable[Advice]) -> dict[str, set[float]]:
    """Settings given more than one target value: should be empty."""
    seen: dict[str, set[float]] = {}
    for a in advice:
        if a.setting is not None and a.value is not None:
            seen.setdefault(a.setting, set()).add(a.value)
    return {name: values for name, values in seen.items() if len(values) > 1}

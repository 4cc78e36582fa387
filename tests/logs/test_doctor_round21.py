"""The classes rounds 20 and 21's misses belong to (issue 34), each pinned on lines composed after the programs' sources
and the public logs under tests/data/logs/heldout_round20/ and heldout_round21/: servers' own lines that say they
serve (mistral.rs listening, Ollama's runner taking a request into a cache slot, OpenVINO's inference request),
OpenVINO's GPU allocation refusals, vllm-ascend's request step, Xinference's model actor failing a request (round 9),
TensorRT-LLM's checkpoint conversion; and the
lines with memory words that are no failure (a command or comment the user typed, a flag naming the OOM killer, a
SIGKILL a supervisor sends, advice naming the error it is for)."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

CUDA_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "23.64 GiB of which 1.02 GiB is free.")  # fmt: skip

# --- servers' own lines that say they serve ---------------------------------------------------------------------


def test_a_server_listening_on_http_after_its_model_loaded_places_a_later_oom_at_serving() -> None:
    for listening in (
        "Serving on http://0.0.0.0:1234.",  # mistral.rs, 2024
        "2025-06-01T10:00:00.000000Z  INFO mistralrs_server: OpenAI-compatible server listening on http://0.0.0.0:1234.",
    ):
        d = diagnose_lines(["Loading model on Cuda(CudaDevice(DeviceId(1)))...", "Model loaded.", listening,
                            "thread '<unnamed>' panicked at mistralrs-core/src/pipeline/mod.rs:409:17:",
                            'Model failed: `DriverError(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")`.'])  # fmt: skip
        assert (d.oom, d.stage) == (True, "runtime"), listening


def test_ollamas_runner_taking_a_request_into_a_cache_slot_is_serving_when_a_buffer_then_fails() -> None:
    d = diagnose_lines([
        'time=2025-05-18T08:36:01.003Z level=DEBUG source=cache.go:136 msg="loading cache slot" id=0 cache=57 '
        "prompt=1227 used=20 remaining=1207",
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 1953.40 MiB on device 1: cudaMalloc failed: out of "
        "memory",
        "ggml_gallocr_reserve_n: failed to allocate CUDA1 buffer of size 2048290048",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (True, "runtime")


# --- OpenVINO -------------------------------------------------------------------------------------------------------

OPENVINO_REFUSAL = ("[GPU] Exceeded max size of memory object allocation: requested 11271610368 bytes, but max alloc "
                    "size supported by device is 4294959104 bytes.Please try to reduce batch size or use lower "
                    "precision.")  # fmt: skip


def test_openvinos_gpu_refusing_an_allocation_is_an_oom_placed_by_the_file_its_exception_left() -> None:
    request = diagnose_lines(["RuntimeError: Exception from src/inference/src/cpp/infer_request.cpp:223:",
                              "Check '!exceed_allocatable_mem_size' failed at src/plugins/intel_gpu/src/runtime/ocl/"
                              "ocl_engine.cpp:142:", OPENVINO_REFUSAL])  # fmt: skip
    assert (request.oom, request.memory, request.stage) == (True, "device", "runtime")
    compiling = diagnose_lines(["RuntimeError: Exception from src/inference/src/cpp/core.cpp:109:",
                                "[GPU] Exceeded max size of memory allocation: Required 17179869184 bytes, already "
                                "occupied : 0 bytes, but available memory size is 16106127360 bytes"])  # fmt: skip
    assert (compiling.oom, compiling.stage) == (True, "startup")


# --- vllm-ascend's request step -----------------------------------------------------------------------------------


def test_vllm_ascends_runner_preparing_scheduled_requests_is_serving() -> None:
    prefix = "(VllmWorker rank=3 pid=230220) ERROR 11-04 09:45:23 [multiproc_executor.py:522] "
    runner = "/vllm-workspace/vllm-ascend/vllm_ascend/worker/model_runner_v1.py"
    for step in ("_process_reqs", "_prepare_inputs", "execute_model"):
        d = diagnose_lines([prefix + f'  File "{runner}", line 988, in {step}',
                            prefix + "    self.attn_mask = self._make_attention_mask(",
                            prefix + f'  File "{runner}", line 701, in _make_attention_mask',
                            prefix + "RuntimeError: NPU out of memory. Tried to allocate 23.16 GiB (NPU 3; 60.96 GiB "
                            "total capacity; 53.27 GiB already allocated)"])  # fmt: skip
        assert (d.basis, d.stage) == ("traceback", "runtime"), step


def test_vllm_ascends_dummy_run_is_no_request() -> None:
    runner = "/vllm-workspace/vllm-ascend/vllm_ascend/worker/model_runner_v1.py"
    d = diagnose_lines([f'  File "{runner}", line 2065, in profile_run',
                        f'  File "{runner}", line 1913, in _dummy_run',
                        "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB"])  # fmt: skip
    assert d.stage == "startup"


# --- Xinference -----------------------------------------------------------------------------------------------


def test_xinferences_model_actor_out_of_memory_is_a_request_re_raised_by_the_workers_lookup() -> None:
    site = "/usr/local/lib/python3.10/dist-packages"
    d = diagnose_lines([f'  File "{site}/xoscar/backends/pool.py", line 370, in _run_coro',
                        "    return await coro",
                        f'  File "{site}/xinference/core/worker.py", line 1059, in get_model',
                        "    raise Exception(model_status.last_error)",
                        "Exception: [address=0.0.0.0:35864, pid=77] Model actor is out of memory, model id: qwen2-vl, "
                        "error: CUDA out of memory. Tried to allocate 6.91 GiB."])  # fmt: skip
    assert (d.oom, d.stage) == (True, "runtime")


def test_an_engines_own_get_model_still_loads() -> None:
    loader = "/usr/local/lib/python3.10/dist-packages/vllm/model_executor/model_loader/__init__.py"
    d = diagnose_lines([f'  File "{loader}", line 12, in get_model', CUDA_OOM])
    assert d.stage == "startup"


# --- TensorRT-LLM's checkpoint conversion -------------------------------------------------------------------------


def test_tensorrt_llms_checkpoint_conversion_killed_is_start_up() -> None:
    d = diagnose_lines(["[TensorRT-LLM] TensorRT-LLM version: 0.12.0", "286it [00:50, 5.63it/s]",
                        "Total time of reading and converting 52.12702465057373 s", "Killed"])  # fmt: skip
    assert (d.oom, d.memory, d.stage) == (True, "host", "startup")


# --- a counted phase under way -------------------------------------------------------------------------------------


def test_an_oom_while_transformers_loads_its_checkpoint_shards_is_start_up() -> None:
    for count in ("0/4", "2/4"):
        bar = f"Loading checkpoint shards:  50%|#####     | {count} [00:10<00:10,  5.00s/it]"
        assert diagnose_lines([bar, CUDA_OOM]).stage == "startup", count
    # once every shard is in, the load is over: what failed next, the log does not say
    done = "Loading checkpoint shards: 100%|##########| 4/4 [00:20<00:00,  5.00s/it]"
    assert diagnose_lines([done, CUDA_OOM]).stage == "unknown"


# --- memory words that are no failure -----------------------------------------------------------------------------

STARTED = ["INFO 05-01 10:00:00 api_server.py:100] vLLM API server version 0.8.0",
           "INFO 05-01 10:00:01 model_runner.py:1] Loading model weights took 14.99 GB",
           "INFO 05-01 10:00:09 launcher.py:1] Application startup complete."]  # fmt: skip


def test_commands_and_comments_the_user_typed_are_no_failure() -> None:
    for typed in (
        "$ docker run --gpus all --oom-kill-disable -p 8000:8000 vllm/vllm-openai --model x",
        "user@gpu-box:~$ dmesg | grep -i oom-kill",
        "(venv) root@4f2a:/workspace# grep -c 'CUDA out of memory' server.log",
        "# avoid OOMKilled: give the pod a memory limit above the model's size",
    ):
        d = diagnose_lines([*STARTED[:2], typed, STARTED[2]])
        assert (d.oom, d.stage) == (False, "none"), typed


def test_the_oom_killers_name_in_a_setting_is_no_kill() -> None:
    d = diagnose_lines([*STARTED[:2], "HostConfig: {Memory: 68719476736, OomKillDisable: false, oom-kill-disable: "
                        "false}", STARTED[2]])  # fmt: skip
    assert not d.oom
    # the kernel's own report still is one
    assert diagnose_lines(["python3 invoked oom-killer: gfp_mask=0x140cca, order=0, oom_score_adj=0"]).memory == "host"


def test_a_sigkill_a_supervisor_sends_after_a_graceful_stop_timed_out_is_no_oom() -> None:
    d = diagnose_lines([*STARTED, "INFO Shutting down", "WARNING worker did not exit after SIGTERM, sending SIGKILL"])
    assert not d.oom
    assert diagnose_lines([*STARTED, "ERROR worker pid=412 died with SIGKILL"]).memory == "host"


def test_advice_naming_the_error_it_is_for_is_no_failure() -> None:
    for advice in (
        "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512  # recommended when you see 'CUDA out of memory' errors",
        "INFO set --max-num-seqs lower to avoid CUDA out of memory errors on long prompts",
    ):
        assert not diagnose_lines([*STARTED[:2], advice, STARTED[2]]).oom, advice
    # the error, then its hint, still counts
    assert diagnose_lines([CUDA_OOM + " If reserved but unallocated memory is large try setting "
                           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."]).oom  # fmt: skip


def test_a_warning_of_what_a_setting_may_cause_is_no_failure() -> None:
    for warning in (
        "WARNING 05-01 10:00:02 config.py:1] Capturing large graphs may cause out of memory; lower the capture sizes",
        "WARNING 05-01 10:00:02 arg_utils.py:1] a large max_num_batched_tokens could lead to CUDA out of memory",
    ):
        assert not diagnose_lines([*STARTED[:2], warning, STARTED[2]]).oom, warning


def test_a_pasted_handler_for_the_error_is_no_failure() -> None:
    d = diagnose_lines([*STARTED, "try:", "    out = llm.generate(prompts)", "except torch.cuda.OutOfMemoryError:",
                        "    torch.cuda.empty_cache()"])  # fmt: skip
    assert not d.oom


def test_llama_cpps_page_lock_refused_is_a_warning_it_loads_through() -> None:
    d = diagnose_lines(["load_tensors: offloaded 33/33 layers to GPU",
                        "warning: failed to mlock 4294967296-byte buffer (after previously locking 0 bytes): Cannot "
                        "allocate memory",
                        "Try increasing RLIMIT_MEMLOCK ('ulimit -l' as root).",
                        "main: server is listening on http://127.0.0.1:8080 - starting the main loop"])  # fmt: skip
    assert (d.oom, d.stage) == (False, "none")
    # the same errno from an allocation that failed is one
    assert diagnose_lines(["load_tensors: loading model tensors", "mmap failed: Cannot allocate memory"]).oom


def test_the_oom_error_class_named_as_a_missing_symbol_is_no_oom() -> None:
    handler = '  File "/srv/app/worker.py", line 30, in generate_stream_gate'
    for missing in (
        [handler, "    except torch.cuda.OutOfMemoryError as e:",
         "AttributeError: module 'torch.cuda' has no attribute 'OutOfMemoryError'"],
        ['  File "/srv/app/model.py", line 3, in <module>', "    from torch.cuda import OutOfMemoryError",
         "ImportError: cannot import name 'OutOfMemoryError' from 'torch.cuda' (/opt/torch/cuda/__init__.py)"],
    ):  # fmt: skip
        d = diagnose_lines([*STARTED, "Traceback (most recent call last):", *missing])
        assert not d.oom, missing[-1]
    # the handler failing while it handled a real one: the real one counts
    d = diagnose_lines([*STARTED, "RuntimeError: CUDA out of memory. Tried to allocate 2.25 GiB (GPU 0; 11.17 GiB "
                        "total capacity)", "", "During handling of the above exception, another exception occurred:",
                        "", "Traceback (most recent call last):", handler,
                        "AttributeError: module 'torch.cuda' has no attribute 'OutOfMemoryError'"])  # fmt: skip
    assert (d.oom, d.memory) == (True, "device")

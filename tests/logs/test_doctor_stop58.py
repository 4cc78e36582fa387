"""Classes stop 58 closed before its rounds were scored (issue 34), from a survey of how the systems that run a model
say memory ran out (a scheduler, a container platform, a phone's OS, a browser's heap, a Chinese, Japanese or Korean
program), each pinned on lines composed after the systems' documented messages:

- A batch scheduler ending a job at its memory limit (PBS, LSF, Slurm's cgroup handler, srun's killed task), the
  kubelet evicting a pod under memory pressure, Cloud Run's memory limit, Colab's crashed session and Kaggle's
  restarted notebook, Docker's exit 137, macOS's "Killed: 9", a DataLoader worker killed by signal and Windows's
  memory errors by number are the host running out.
- Android's low-memory killer ending an app and a WebAssembly heap that cannot grow are the host running out.
- A Chinese, Japanese or Korean program's own words for memory running out are an out-of-memory failure: the video
  memory's (显存) the device's, the RAM's (内存) the host's; so are Windows's STATUS_NO_MEMORY as an exit status (the
  host's) and COM's E_OUTOFMEMORY from DirectML (the device's).
- TorchServe's "Load model failed" after its worker died is start-up; a router's 500 answer (LiteLLM's) carrying the
  engine's out-of-memory error is serving.
- A memory limit written in a pod's spec and a clean exit are no failure.

And from stop 58's own rounds, after they were scored once:

- A container's state that says it was not OOM-killed (``docker inspect``'s ``"OOMKilled": false``) is no kill.
- The shell's kill printed on a line the program left open ("Loading model... Killed"), or in the host's language
  ("已杀死"), is a kill.
- oMLX's refusals say what they refused: a model's weights over its per-model budget is start-up, a request's prefill
  over the Metal ceiling is serving.
- A Windows build's source file named with backslashes still names its phase (OpenVINO's inference request is
  serving); an old llama.cpp server's JSON records of its request slots are serving.
- olmOCR's "KV cache is needed, available N" is the KV cache; TGI's or LoRAX's cache manager allocating in the
  warm-up is the KV cache; TVM's paged KV cache with no free page is serving.
- A JavaScript frame that loads the model, under ONNX Runtime Web's allocation error, is start-up."""

from __future__ import annotations

import pytest

from tests.support.logs import verdict
from vllm_hpu_mm.logs.doctor import diagnose_lines

_LOADING = "Loading checkpoint shards:  50%|█████     | 2/4 [00:20<00:20, 10.0s/it]"

_HOST_KILLS = (
    "=>> PBS: job killed: mem 68719476736b exceeded limit 64gb",
    "=>> PBS: job killed: vmem 34359738368b exceeded limit 32212254720b",
    "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.",
    "slurmstepd: error: Some of your processes may have been killed by the cgroup out-of-memory handler.",
    "srun: error: gpu-node07: task 0: Killed",
    "The node was low on resource: memory. Threshold quantity: 100Mi, available: 82Mi.",
    "Memory limit of 8192 MiB exceeded with 8201 MiB used. Consider increasing the memory limit.",
    "Your session crashed after using all available RAM.",
    'a1b2c3d4e5f6   vllm/vllm-openai:v0.9.0   "python3 -m vllm.entrypoints..."   Exited (137) 2 minutes ago',
    "RuntimeError: DataLoader worker (pid 4321) is killed by signal: Killed.",
    "lowmemorykiller: Kill 'com.example.llmchat' (8123), uid 10245, oom_score_adj 0 to free 2457600kB",
    "lmkd: Kill 'com.example.llmchat' (8123), uid 10245, oom_score_adj 0 to free 2400000kB rss, 0kB swap",
    "Aborted(Cannot enlarge memory arrays to size 2281701376 bytes (OOM). Either (1) compile with -sINITIAL_MEMORY=X)",
    "错误：内存不足，模型加载中断",
    "Error: llama runner process has terminated: exit status 0xc0000017",
    "Process finished with exit code -1073741801",
    "OSError: [WinError 8] Not enough memory resources are available to process this command",
    "Message:          The node had condition: [MemoryPressure].",
    "Your notebook tried to allocate more memory than is available. It has restarted.",
    "Killed: 9",
)


@pytest.mark.parametrize("line", _HOST_KILLS)
def test_a_system_ending_the_program_for_its_memory_is_the_host_running_out(line: str) -> None:
    d = diagnose_lines([_LOADING, line])
    assert (d.oom, d.memory, d.stage) == (True, "host", "startup")


_DEVICE_WORDS = (
    "错误：显存不足，无法加载模型",
    "模型推理时爆显存",
    "CUDA メモリ不足です",
    "GPU 메모리 부족",
    "DmlExecutionProvider: CreateCommittedResource failed with E_OUTOFMEMORY",
    "Ошибка: недостаточно видеопамяти для загрузки модели",
)


@pytest.mark.parametrize("line", _DEVICE_WORDS)
def test_words_for_video_memory_running_out_are_the_device_s(line: str) -> None:
    d = diagnose_lines([line])
    assert (d.oom, d.memory) == (True, "device")


def test_torchserve_s_failed_load_after_its_worker_died_is_startup() -> None:
    lines = [
        "2024-06-01T10:00:00,000 [INFO ] W-9000-llama_1.0-stdout MODEL_LOG - torch.cuda.OutOfMemoryError: CUDA out of"
        " memory. Tried to allocate 224.00 MiB (GPU 0; 14.75 GiB total capacity; 13.90 GiB already allocated)",
        "2024-06-01T10:00:00,100 [INFO ] W-9000-llama_1.0 org.pytorch.serve.wlm.WorkerThread - Backend worker process"
        " died.",
        "2024-06-01T10:00:00,200 [WARN ] W-9000-llama_1.0 org.pytorch.serve.wlm.WorkerLifeCycle - Load model failed:"
        " llama, error: Worker died.",
    ]
    assert verdict(lines)[0] == "startup"


def test_a_router_s_500_answer_carrying_the_engine_s_oom_is_serving() -> None:
    body = "{'object': 'error', 'message': 'CUDA out of memory. Tried to allocate 2.00 GiB.'}"
    for head in ("litellm.InternalServerError: OpenAIException - Error code: 500 - ",
                 "litellm.APIError: APIError: OpenAIException - Error code: 500 - "):  # fmt: skip
        assert verdict([head + body])[0] == "runtime"


@pytest.mark.parametrize(
    "lines",
    [
        ["resources:", "  limits:", "    memory: 32Gi", "    nvidia.com/gpu: 1"],
        ['a1b2c3d4e5f6   vllm/vllm-openai:v0.9.0   "python3 -m vllm.entrypoints..."   Exited (0) 2 minutes ago'],
        ["Error: llama runner process has terminated: exit status 0xc0000409"],
        ["2024-06-01T10:00:00,000 [INFO ] main org.pytorch.serve.ModelServer - Loading initial models: llama.mar"],
    ],
)
def test_a_memory_limit_in_a_spec_and_a_clean_exit_are_no_failure(lines: list[str]) -> None:
    assert verdict(lines)[0] == "none"


def test_a_container_state_that_says_it_was_not_oom_killed_is_no_kill() -> None:
    lines = [
        "slot update_slots: id  2 | task 1950 | new prompt, n_ctx_slot = 131072",
        "libggml-base.so(ggml_abort+0x152)",
        '    "State": {',
        '        "Status": "exited",',
        '        "OOMKilled": false,',
        '        "ExitCode": 139,',
    ]
    assert verdict(lines)[0] == "none"
    assert verdict([*lines[:4], '        "OOMKilled": true,'])[0] != "none"


@pytest.mark.parametrize("kill", ["Loading model... Killed", "已杀死", "強制終了"])
def test_the_shell_s_kill_on_an_open_line_or_in_the_host_s_language_is_a_kill(kill: str) -> None:
    d = diagnose_lines(["Using model: LLaMA2_7B_chat", "load model begin.", _LOADING, kill])
    assert (d.oom, d.memory, d.stage) == (True, "host", "startup")


def test_omlx_s_refusals_name_what_they_refused() -> None:
    load = 'Error: {"error":{"message":"Model \'Qwen3\' (218.08GB) exceeds max-model-memory (25.00GB)"}}'
    prefill = (
        "Prefill would require ~52.38 GB peak (current 44.85 GB + KV+SDPA 7.53 GB) but metal_cap ceiling is 50.00 GB."
    )
    assert verdict([load])[0] == "startup"
    assert verdict([prefill])[0] == "runtime"


def test_a_windows_source_path_still_names_its_phase() -> None:
    lines = ["RuntimeError: Exception from src\\inference\\src\\cpp\\infer_request.cpp:224:",
             "[CL ext] Can not allocate 16049884928 bytes for USM Device. ptr: 0000000000000000, error: 0"]  # fmt: skip
    assert verdict(lines)[0] == "runtime"


def test_an_old_llama_cpp_server_s_json_slot_records_are_serving() -> None:
    slot = '{"function":"launch_slot_with_data","level":"INFO","line":829,"msg":"slot is processing task","slot_id":0}'
    rm = '{"function":"update_slots","level":"INFO","line":1834,"msg":"kv cache rm [p0, end)","p0":3,"slot_id":0}'
    lines = [slot, rm, "CUDA error: out of memory", "  current device: 0, in function alloc at ggml-cuda.cu:532"]
    assert verdict(lines)[0] == "runtime"


def test_kv_cache_refusals_and_allocations_in_other_words() -> None:
    assert verdict(["ValueError: 1.75 GiB KV cache is needed, available 0.13 GiB"])[0] == "kv_cache"
    warmup = [
        "ERROR lorax_launcher: interceptor.py:41 Method Warmup encountered an error.",
        "Traceback (most recent call last):",
        '  File "/opt/conda/lib/python3.10/site-packages/lorax_server/models/flash_causal_lm.py", line 775, in warmup',
        "    cache_manager = set_cache_manager(",
        '  File "/opt/conda/lib/python3.10/site-packages/lorax_server/models/cache_manager.py", line 29, in __init__',
        "    self.kv_cache = [",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 320.00 MiB. GPU 0 has a total capacity of"
        " 39.39 GiB of which 197.62 MiB is free.",
    ]
    assert verdict(warmup)[0] == "kv_cache"
    paged = ["MLCChat failed", "TVMError: Check failed: (!free_page_ids_.empty()) is false: The",
             "KV cache is full. No page can be", "allocated"]  # fmt: skip
    assert verdict(paged)[0] == "runtime"


def test_a_javascript_frame_that_loads_the_model_is_startup() -> None:
    lines = [
        "Uncaught Error: Can't create a session. Failed to allocate a buffer of size 2079238052.",
        "    at jt (ort.webgpu.bundle.min.mjs:2603:25061)",
        "    at mn.loadModel (ort.webgpu.bundle.min.mjs:2603:36389)",
        "    at fn.createInferenceSessionHandler (ort.webgpu.bundle.min.mjs:2603:38145)",
    ]
    assert verdict(lines)[0] == "startup"
    assert verdict([lines[0], lines[1]])[0] == "unknown"

"""Classes stop 56 closed from stop 55's rounds (issue 34; development data since they were scored), each pinned on
lines composed after the public logs (not loaded):

- A runtime call's failure stated by its error number and the runtime's string for it ("Error 804: forward
  compatibility was attempted on non supported HW") states the error a cut traceback after it raised.
- Triton refusing a kernel whose block needs more shared memory than the hardware gives one block is a kernel's
  configuration over a fixed limit, not memory running out: a cut traceback after it is that error's.
- NCCL's warning that its shared-memory transport could not create its segment states the error; NCCL's trace of the
  code returning up its calls ("NCCL INFO init.cc:1117 -> 2") is that failure's report, not other work.
- IPython's arrow at a frame's current line is a traceback's own line whatever its length.

And from stop 56's own rounds, after they were scored once:

- An allocator's mapping "failed with OOM on device 0" is the device running out.
- A client's report that the server closed the connection under it ("...: EOF") is no failure that caused the kill
  after it: the kill is the failure.
- The engine core's busy loop throwing is serving.
- llama.cpp's server retrying a batch with smaller and smaller sizes because the KV cache has no room, the excerpt
  stopping inside the retries, ran out while serving; one retry and then other work is no failure."""

from __future__ import annotations

from tests.support.logs import verdict
from vllm_hpu_mm.logs.doctor.scan import _error_message, _goes_on

_VLLM = "ERROR 03-26 05:25:01 engine.py:389]"
_CUT = [f"{_VLLM} Traceback (most recent call last):",
        f'{_VLLM}   File "/usr/lib/vllm/engine/multiprocessing/engine.py", line 380, in run_mp_engine',
        f"{_VLLM}     engine = MQLLMEngine.from_engine_args(engine_args=engine_args,"]  # fmt: skip


def test_an_error_number_and_its_reason_above_a_cut_traceback_is_that_error() -> None:
    lines = ["INFO 03-26 05:25:01 cuda.py:230] Using Flash Attention backend.",
             f"{_VLLM} Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
             "NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted "
             "on non supported HW", *_CUT]  # fmt: skip
    assert verdict(lines) == ("none", "error")


def test_an_error_number_whose_reason_is_memory_is_no_other_error() -> None:
    lines = [f"{_VLLM} Unexpected error from cudaMalloc(). Error 2: out of memory", *_CUT]
    assert verdict(lines)[0] != "none"


_SCHEDULER = [
    "[2024-12-07 02:54:42 TP7] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1493, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
]


def test_triton_s_shared_memory_limit_above_a_cut_traceback_is_that_error() -> None:
    lines = ['  File "/opt/conda/lib/python3.9/site-packages/triton/compiler/compiler.py", line 385, in _init_handles',
             '    raise OutOfResources(self.metadata.shared, max_shared, "shared memory")',
             "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 131072, Hardware limit: "
             "65536. Reducing block sizes or `num_stages` may help.", "", *_SCHEDULER]  # fmt: skip
    assert verdict(lines) == ("none", "error")


def test_device_memory_running_out_above_a_cut_traceback_is_still_no_other_error() -> None:
    lines = ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.", "", *_SCHEDULER]
    assert verdict(lines)[0] != "none"


_NCCL = "a46f6c76528f:2777:5429 [0]"
_INIT_DEVICE = [
    "ERROR 04-26 01:59:07 worker_base.py:157] Error executing method init_device. This might cause deadlock in "
    "distributed execution.",
    "ERROR 04-26 01:59:07 worker_base.py:157] Traceback (most recent call last):",
    'ERROR 04-26 01:59:07 worker_base.py:157]   File "/usr/lib/python3.10/site-packages/vllm/worker/worker.py", '
    "line 110, in init_device",
]


def test_nccl_s_shared_memory_segment_error_and_its_trace_above_a_cut_traceback_is_that_error() -> None:
    trail = [f"{_NCCL} NCCL INFO {where} -> 2" for where in
             ("transport/shm.cc:114", "transport.cc:33", "transport.cc:97", "init.cc:1117", "init.cc:1396",
              "group.cc:64")]  # fmt: skip
    lines = [f"{_NCCL} misc/shmutils.cc:113 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-v2jS20 "
             "(size 9637888)", *trail, *_INIT_DEVICE]  # fmt: skip
    assert verdict(lines) == ("none", "error")


def test_nccl_s_relayed_cuda_allocation_failure_is_still_out_of_memory() -> None:
    lines = [f"{_NCCL} include/alloc.h:125 NCCL WARN Cuda failure 'out of memory'",
             f"{_NCCL} NCCL INFO init.cc:1117 -> 1", *_INIT_DEVICE]  # fmt: skip
    assert verdict(lines)[0] != "none"


def test_an_ipython_arrow_of_any_length_is_neither_other_work_nor_a_traceback_s_message() -> None:
    for arrow in ("-->", "--->", "---->", "----->"):
        line = f"{arrow} 7 out = llm.generate(prompts, sampling)"
        assert not _goes_on(line)
        assert not _error_message(line)


def test_a_mapping_that_failed_with_oom_on_a_device_is_out_of_memory() -> None:
    lines = ["expandable_segments: memory mapping failed with OOM on device 0 while trying to",
             "map 20971520 bytes (free: 20578304, total: 25272516608)"]  # fmt: skip
    assert verdict(lines)[0] == "unknown"


def test_a_client_s_eof_before_the_runner_s_kill_is_no_cause_of_it() -> None:
    lines = ['Error: Post "http://127.0.0.1:11434/api/chat": EOF', "...",
             "Error: llama runner process has terminated: signal: killed"]  # fmt: skip
    assert verdict(lines)[0] != "none"


def test_a_stated_error_before_a_kill_is_still_its_cause() -> None:
    lines = ["Error: llama-server: unknown model architecture: 'glm5'",
             "Error: llama runner process has terminated: signal: killed"]  # fmt: skip
    assert verdict(lines)[0] == "none"


def test_the_engine_core_s_busy_loop_throwing_is_serving() -> None:
    lines = ["engine-fatal: EngineCore busy loop threw: vt rocm: hipMalloc: out of memory",
             "async-llm: output handler saw engine death: EngineCore encountered an issue."]  # fmt: skip
    assert verdict(lines)[0] == "runtime"


def _retry(n_batch: int) -> str:
    return (
        "W srv        decode: failed to find free space in the KV cache, retrying with smaller batch size - try "
        f"increasing it via total context size or enabling defragmentation, n_batch = {n_batch}, ret = 1"
    )


def test_llama_cpp_s_kv_retries_the_excerpt_stops_inside_ran_out_while_serving() -> None:
    lines = []
    for n_batch in (64, 32, 16, 8):
        lines += [_retry(n_batch), "E init_batch: failed to prepare attention ubatches"]
    assert verdict([*lines, "..."])[0] == "runtime"


def test_one_kv_retry_then_other_work_is_no_failure() -> None:
    lines = [_retry(256), "E llama_decode: failed to decode, ret = 1",
             "I slot update_slots: id  0 | task 12 | prompt done, n_past = 512, n_tokens = 256",
             "I slot      release: id  0 | task 12 | stop processing: n_past = 700, truncated = 0"]  # fmt: skip
    assert verdict(lines)[0] == "none"


def test_retries_that_a_smaller_batch_ends_are_no_failure() -> None:
    lines = [_retry(64), _retry(32), "I slot update_slots: id  0 | task 12 | prompt done, n_past = 512"]
    assert verdict(lines)[0] == "none"

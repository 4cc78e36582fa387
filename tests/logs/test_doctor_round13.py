"""The classes round 13's misses belong to (issue 34), each pinned on lines composed after the runtimes' sources and
the public logs under tests/data/logs/heldout_round13/: a loader's summary of a buffer it could not make, whatever
failed in the backend before it, an out-of-memory named only as a possible cause, SGLang's KV pool out of slots while
serving, and a framework's name in the folders a package is installed under."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose, diagnose_lines

# --- a loader's summary of a buffer it could not make is an out-of-memory failure as the model loads -------------


def test_the_loaders_summary_after_a_tensor_that_failed_to_initialise_is_a_start_up_oom() -> None:
    """ollama/ollama #11265: the loader could not make the ROCm0 buffer for the weights after the backend failed to
    place a tensor in it. This test pinned ``none`` until stop 50 (commit b19da0a read the summary after that line as
    no exhaustion, to fit round 13's label then); two blind labellers read round 13's log as an out-of-memory failure
    at start-up, as round 79's three read the same lines in ollama/ollama #11865: the labels of record."""
    lines = ["load_tensors: loading model tensors, this can take a while... (mmap = true)",
             "alloc_tensor_range: failed to initialize tensor output.weight",
             "llama_model_load: error loading model: unable to allocate ROCm0 buffer"]  # fmt: skip
    d = diagnose_lines(lines)
    assert (d.oom, d.memory, d.stage) == (True, "device", "startup")


def test_the_same_summary_after_the_backends_allocation_failure_is_a_start_up_oom() -> None:
    lines = ["load_tensors: loading model tensors, this can take a while... (mmap = true)",
             "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 24289.03 MiB on device 0: cudaMalloc failed: out "
             "of memory",
             "alloc_tensor_range: failed to allocate CUDA0 buffer of size 25468862464",
             "llama_model_load: error loading model: unable to allocate CUDA0 buffer"]  # fmt: skip
    d = diagnose_lines(lines)
    assert (d.stage, d.memory) == ("startup", "device")


# --- an out-of-memory offered as one possible cause claims nothing -------------------------------------------------

RAYLET = ("(raylet) A worker died or was killed while executing a task by an unexpected system error. Worker exit "
          "type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. "
          "End of file. "
          "There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory "
          "usage. (2) ray stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other "
          "unexpected errors.")  # fmt: skip


def test_a_list_of_possible_causes_naming_the_oom_killer_is_no_oom() -> None:
    # vllm-project/vllm #13535: an NCCL watchdog timed out; the raylet lists the OOM killer among its usual suspects
    lines = ["(RayWorkerWrapper pid=270291) [rank3]:[E219 08:58:32 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught "
             "collective operation timeout: WorkNCCL(SeqNum=31, OpType=ALLREDUCE) ran for 600031 milliseconds before "
             "timing out.", RAYLET]  # fmt: skip
    d = diagnose_lines(lines)
    assert (d.stage, d.oom) == ("none", False)
    # a hint after the error still leaves the error: the out-of-memory line before it counts
    hinted = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. This may be caused by X"
    assert diagnose_lines([hinted]).oom


# --- SGLang's KV pool with no slot for the batch it scheduled: serving -------------------------------------------


@pytest.mark.parametrize("error", ["Decode out of memory", "Prefill out of memory", "Out of memory"])
def test_sglangs_pool_out_of_slots_is_a_serving_oom_with_its_own_advice(error: str) -> None:
    # sgl-project/sglang #4602 (mem_cache/common.py alloc_token_slots and its paged variants)
    lines = [f"RuntimeError: {error}. Try to lower your batch size.",
             "Try to allocate 148 tokens.", "Available tokens: 2048 (available_size=2048 + evictable_size=0)",
             "self.token_to_kv_pool_allocator.available_size()=2048"]  # fmt: skip
    d = diagnose(lines, load({}))
    assert (d.stage, d.memory, d.source.name) == ("runtime", "device", "sglang")
    assert "--max-running-requests" in d.recommendations[-1]
    assert "lower --mem-fraction-static" not in " ".join(d.recommendations)


def test_sglangs_retraction_of_requests_from_a_full_pool_is_the_same_exhaustion_while_serving() -> None:
    # read as no failure until round 24, whose sgl-project/sglang #4184 was labelled runtime from these lines alone
    # (tests/logs/test_doctor_round25.py holds the class)
    line = "Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.5000 -> 0.6000"
    d = diagnose_lines([line])
    assert (d.stage, d.memory) == ("runtime", "device")


# --- the folders above site-packages are the user's -------------------------------------------------------------


def test_a_framework_named_only_by_the_folder_a_virtual_environment_sits_in_is_not_the_writer() -> None:
    # vllm-project/vllm #13535: vLLM's Ray workers, run from a virtual environment under /root/project/sglang
    lines = ["(RayWorkerWrapper pid=2667395) /root/project/sglang/venv/lib/python3.11/site-packages/torch/lib/"
             "libtorch_cuda.so(+0xe427c9) [0x7fd15b3007c9] c10d::ProcessGroupNCCL::ncclCommWatchdog()", RAYLET,
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]  # fmt: skip
    assert diagnose_lines(lines).source.framework == "vllm"
    # the package after site-packages still names its framework
    sglang = '  File "/root/vllm/venv/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 1, in run'
    assert diagnose_lines([sglang, *lines[1:]]).source.name == "sglang"

"""The classes round 11's misses belong to (issue 34), each pinned on lines composed after the runtimes' sources and
the public logs under tests/data/logs/heldout_round11/: an allocation failure in any vendor's words, the phase a
runtime-independent line names (a load, an ahead-of-time engine build, a decode-time re-reservation, an engine's
model instance created as it is set up), a compile error that names no phase, and a writer the log does not name."""

from __future__ import annotations

import pytest

from tests.support.logs import cut_read_as_phase
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose, diagnose_lines

# --- allocation failures in any runtime's words ---------------------------------------------------------------


def test_a_vendor_allocation_call_that_failed_while_the_model_loads_is_a_start_up_oom() -> None:
    # sophgo/LLM-TPU #8: bmrt loads the model file, bmlib cannot allocate the card's global memory
    lines = ["[BMRT][load_bmodel:1573] INFO:Loading bmodel from [../../bmodels/rwkv6-1b5_bf16_1dev.bmodel].",
             "[BMRT][load_bmodel:1501] INFO:pre net num: 0, load net num: 1",
             "[bmlib_memory][error] bm_alloc_gmem failed, dev_id = 0, size = 0xc0fb4000"]  # fmt: skip
    d = diagnose_lines(lines)
    assert (d.stage, d.memory, d.basis) == ("startup", "device", "phase")


@pytest.mark.parametrize("line", ["cudaMallocHost failed: out of resources", "malloc failed: 1024 bytes"])
def test_a_host_allocation_call_is_not_the_devices(line: str) -> None:
    assert diagnose_lines([line]).stage == "none"


# --- the phase a line names, whatever the runtime ---------------------------------------------------------------


def test_llama_cpps_compute_buffers_re_reserved_inside_decode_are_serving() -> None:
    # ggml-org/llama.cpp #11476: the KV cache's update (a shift or defragmentation) runs inside llama_decode and
    # re-reserves the compute graph; no serving line is printed before it
    lines = ["ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9866.00 MiB on device 1: cudaMalloc failed: out "
             "of memory",
             "ggml_gallocr_reserve_n: failed to allocate CUDA1 buffer of size 10345253120",
             "llama_kv_cache_update_impl: failed to allocate compute buffers"]  # fmt: skip
    assert diagnose_lines(lines).stage == "runtime"
    # the same reservation while the context is created stays start-up (its profiling pass)
    at_start = [*lines[:2], "llama_new_context_with_model: failed to allocate compute buffers"]
    assert diagnose_lines(at_start).stage == "startup"


def test_tensorrts_ahead_of_time_engine_build_is_start_up() -> None:
    # NVIDIA/TensorRT-LLM #346: the builder runs out of memory making the engine the server will load; the lead's rule
    # at stop 46 reads a build before serving as start-up, as the load of a built engine is (it was read as a warm-up)
    lines = ["[11/10/2023-06:30:19] [TRT] [I] Detected 49 inputs and 41 output network tensors.",
             "[11/10/2023-06:30:40] [TRT] [E] 2: [virtualMemoryBuffer.cpp::resizePhysical::140] Error Code 2: "
             "OutOfMemory (no further information)",
             "[11/10/2023-06:30:40] [TRT-LLM] [E] Engine building failed, please check the error log."]  # fmt: skip
    assert diagnose_lines(lines).stage == "startup"
    assert diagnose_lines(lines[1:]).stage == "startup"  # the build's own failure line alone


TM = "/home/u/.local/lib/python3.8/site-packages/lmdeploy/turbomind/turbomind.py"
THREAD = ['  File "/usr/lib/python3.8/threading.py", line 870, in run',
          "    self._target(*self._args, **self._kwargs)"]  # fmt: skip
TM_OOM = "RuntimeError: [TM][ERROR] CUDA runtime error: out of memory /lmdeploy/src/turbomind/utils/allocator.h:231"


def test_turbominds_model_instance_created_as_the_engine_is_set_up_is_start_up() -> None:
    """InternLM/lmdeploy #1019: createModelInstance builds the batch, its sequence manager and the block manager, the
    KV blocks among what it allocates, before any request. This test pinned ``kv_cache`` until stop 50, when two blind
    labellers read rounds 11's and 54's logs of it as start-up (round 74's three had too): the labels of record."""
    lines = ["Traceback (most recent call last):", *THREAD,
             f'  File "{TM}", line 486, in _create_model_instance',
             "    model_inst = self.tm_model.model_comm.create_model_instance(", TM_OOM]  # fmt: skip
    d = diagnose_lines(lines)
    assert (d.stage, d.basis) == ("startup", "traceback")


def test_turbominds_weight_threads_are_loading_and_threadings_target_casts_no_vote() -> None:
    # InternLM/lmdeploy #1593: the weights' thread; the thread's own frames (Thread.run -> _target) run every phase
    lines = ["Traceback (most recent call last):", *THREAD, f'  File "{TM}", line 199, in _create_weight_func',
             "    model_comm.create_shared_weights(device_id, rank)", TM_OOM]  # fmt: skip
    assert diagnose_lines(lines).stage == "startup"
    assert diagnose_lines(["Traceback (most recent call last):", *THREAD, TM_OOM]).stage == "unknown"


def test_an_xla_compile_out_of_memory_alone_names_no_phase() -> None:
    # vllm-project/vllm #8318: XLA compiles each new shape at warm-up and on a request's first new shape alike
    line = ("RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory "
            "in memory space smem. Used 1.00M of 1.00M smem.")  # fmt: skip
    d = diagnose_lines([line])
    assert (d.stage, d.basis, d.memory) == ("unknown", "unknown", "device")


# --- a cut traceback claims nothing ------------------------------------------------------------------------------


def test_a_cut_load_claims_no_oom_and_its_frames_are_kept_for_the_old_rule() -> None:
    path = "/usr/lib/python3.12/site-packages/vllm/model_executor/model_loader/loader.py"
    lines = ["Traceback (most recent call last):", f'  File "{path}", line 300, in load_model',
             "    model = _initialize_model(vllm_config=vllm_config)"]  # fmt: skip
    d = diagnose(lines, load({}))
    assert (d.stage, d.basis, d.oom) == ("unknown", "undecided", False)
    assert diagnose_lines(lines, cut_read_as_phase()).stage == "startup"


# --- a writer the log does not name ------------------------------------------------------------------------------


def test_a_log_naming_no_framework_and_holding_no_vllm_line_has_an_unknown_writer() -> None:
    # xorbitsai/inference #3230-like: a plain traceback and a CUDA OOM, nothing of vLLM's
    lines = ["Traceback (most recent call last):", '  File "/srv/app/serve.py", line 10, in handle',
             "    out = model.chat(prompt)",
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]  # fmt: skip
    d = diagnose(lines, load({}))
    assert (d.source.framework, d.source.name, d.source.named) == ("other", "", False)
    assert d.source.describe.startswith("an unknown writer")
    text = "\n".join(d.recommendations)
    assert "--gpu-memory-utilization" not in text
    assert "--max-num-seqs" not in text
    assert "writer's own settings are not known" in text or d.stage == "unknown"


def test_vllms_own_logger_line_keeps_the_log_vllms() -> None:
    lines = ["INFO 08-19 07:51:03 model_runner.py:732] Loading model weights took 2.3463 GB",
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]  # fmt: skip
    d = diagnose(lines, load({}))
    assert (d.source.framework, d.source.named) == ("vllm", False)
    assert "assumed" in d.source.describe

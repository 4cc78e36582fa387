"""The classes round 37's misses belong to (issue 34), each pinned on lines composed after the programs' sources and the
public logs under tests/data/logs/heldout_round37/: a host buffer llama.cpp could not allocate as the model loads, and
a KV cache with no free cell left for a batch of requests; and the general rule behind both, written once: a failure
line that says a memory resource could not be provided is an out-of-memory failure in any program's words, while a
warning the run goes past, a retry, an information line, an allocator's bookkeeping, a configuration echo or a healthy
free-memory report stays ``none``."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.logs.doctor import diagnose_lines

# --- a host buffer refused as the model loads --------------------------------------------------------------------


def test_a_host_buffer_refused_as_the_model_loads_is_a_start_up_failure_of_host_memory() -> None:
    # continuedev/continue #11223: Ollama relays llama.cpp's loader summary of the pinned host buffer it could not get
    line = '"llama runner process has terminated: error loading model: unable to allocate CUDA_Host buffer"'
    d = diagnose_lines([line])
    assert (d.oom, d.memory, d.stage) == (True, "host", "startup")


@pytest.mark.parametrize("buffer", ["CPU", "CPU_REPACK", "ROCm_Host", "backend CPU"])
def test_the_loaders_summary_of_any_host_buffer_type_is_host_memory(buffer: str) -> None:
    d = diagnose_lines([f"llama_model_load: error loading model: unable to allocate {buffer} buffer"])
    assert (d.oom, d.memory, d.stage) == (True, "host", "startup")


def test_a_host_buffers_summary_after_a_tensor_that_could_not_be_initialised_is_the_hosts_oom_at_start_up() -> None:
    """The loader's summary reads the same whatever the backend said before it (test_doctor_round13.py): this test
    pinned ``none`` after a tensor's failed initialisation until stop 50's labels of record read that case as an
    out-of-memory failure at start-up; the buffer type still says whose memory."""
    d = diagnose_lines([
        "alloc_tensor_range: failed to initialize tensor blk.0.attn_q.weight",
        "llama_model_load: error loading model: unable to allocate CUDA_Host buffer",
    ])  # fmt: skip
    assert (d.oom, d.memory, d.stage) == (True, "host", "startup")


# --- a KV cache with no free cell for a batch of requests ------------------------------------------------------------

#: llamafile's server (mozilla-ai/llamafile #244): llama_decode found no KV slot, the batch was halved down to one.
NO_FREE_CELL = [
    *(f"[1707364943] update_slots : failed to find free space in the KV cache, retrying with smaller n_batch = {n}"
      for n in (256, 64, 4, 1)),
    "[1707364943] update_slots : failed to decode the batch, n_batch = 1, ret = 1",
]  # fmt: skip


def test_a_kv_cache_with_no_free_cell_for_a_batch_of_requests_is_a_runtime_failure() -> None:
    d = diagnose_lines(NO_FREE_CELL)
    assert (d.oom, d.stage) == (True, "runtime")
    assert d.evidence[0].text == NO_FREE_CELL[-1]


@pytest.mark.parametrize(
    "line",
    ["srv  update_slots: failed to decode the batch: KV cache is full - try increasing it via the context size, i = 0, "
     "n_batch = 1, ret = 1",
     "srv  update_slots: failed to decode the batch: Context size has been exceeded., i = 0, n_batch = 1, ret = 1"],
)  # fmt: skip
def test_llama_cpps_later_words_for_the_same_failure_are_a_runtime_failure(line: str) -> None:
    # ggml-org/llama.cpp examples/server/server.cpp@03d4bccb update_slots, and its successor's "Context size ..."
    d = diagnose_lines([line])
    assert (d.oom, d.stage) == (True, "runtime")


def test_a_batch_that_failed_otherwise_stays_none() -> None:
    # ret = -1 is an invalid batch (llama.h), not a full cache
    d = diagnose_lines(["update_slots : failed to decode the batch, n_batch = 1, ret = -1"])
    assert (d.oom, d.stage) == (False, "none")


def test_retries_the_excerpt_stops_inside_are_the_cache_full_while_serving() -> None:
    # The server goes on from one retry; a series the excerpt stops inside, nothing after it, had not fit a batch: the
    # labels of record of held-out rounds 149 and 175 (two blind labellers each) read it so, and none reads it none
    # (stop 56; this test pinned ``none`` before).
    d = diagnose_lines(NO_FREE_CELL[:-1])
    assert (d.oom, d.stage) == (True, "runtime")


# --- the general rule: a memory resource that could not be provided, on a failure line ------------------------------

#: Failure lines of programs the rounds have not shown, each saying a memory resource could not be provided, and the
#: memory they name.
REFUSED = [
    ("RuntimeError: Failed to allocate memory for the KV cache", "device"),
    ("Error: insufficient memory to load model", "device"),
    ("ERROR: not enough system memory to load the model", "host"),
    ("fatal error: failed to reserve memory arena of 4.00 GiB", "device"),
    ("E1130 12:00:00.000 1234 runner.cc:12] Lack of host memory", "host"),
    ("[E] workspace allocation failed: requested 2147483648 bytes", "device"),
    ("  what():  no free KV cache blocks for the batch", "device"),
    ("ValueError: available memory (3.2 GiB) is less than required (7.5 GiB) for the model weights", "device"),
    ("Exception: the model requires more GPU memory (20.1 GiB) than is available (15.8 GiB)", "device"),
    ("ERROR 11-30 10:00:00 engine.py:10] scratch space exhausted while building the engine", "device"),
    ("RuntimeError: memory pool exhausted", "device"),
    ('time=2025-01-01T00:00:00Z level=ERROR source=server.go:10 msg="not enough VRAM for the model"', "device"),
    ("[rank0]:[E529 15:05:55.365237348 Alloc.cpp:454] no free HBM left for a workspace of 216.00 MiB", "device"),
    ("RuntimeError: SYS_EBUSY: Lack of device memory. (code: -16)", "device"),
    # Rust's allocator (rust-lang/rust library/std/src/alloc.rs@00e208e3 default_alloc_error_hook), then an abort
    ("memory allocation of 1073741824 bytes failed", "host"),
]


@pytest.mark.parametrize(("line", "memory"), REFUSED)
def test_a_failure_line_that_says_memory_could_not_be_provided_is_an_oom(line: str, memory: str) -> None:
    d = diagnose_lines([line])
    assert (d.oom, d.memory) == (True, memory)


#: The same words where nothing failed for want of memory.
NOT_REFUSED = [
    # warnings the run goes past, retries, fallbacks, skipped steps
    "[2025-07-03 12:45:23,599] LMCache WARNING: Failed to allocate memory for the KV cache.",
    "WARNING 10-28 11:16:41 scheduler.py:1483] Sequence group 0 is preempted by PreemptionMode.SWAP mode because there "
    "is not enough KV cache space.",
    "update_slots : failed to find free space in the KV cache, retrying with smaller n_batch = 64",
    "[TRT] [W] Skipping tactic 3 due to insufficient memory on requested size of 33555480576",
    # (a pinned buffer refused for want of memory, alone, is a failure since round 96: test_doctor_round94_97_pinned.py)
    "ggml_cuda_host_malloc: failed to allocate 1900.00 MiB of pinned memory: invalid argument",
    "UserWarning: not enough memory to cache the dataset; streaming it",
    "INFO: Not enough VRAM to load all layers, offloading 10 to CPU",
    # an allocator's bookkeeping (its free-block list full), a shared-memory queue waiting for its reader
    'GGML_ASSERT: ggml-alloc.c:230: alloc->n_free_blocks < MAX_FREE_BLOCKS && "out of free blocks"',
    "(EngineCore pid=127) INFO 04-15 13:42:25 [shm_broadcast.py:681] No available shared memory broadcast block found "
    "in 60 seconds.",
    # configuration echoes, metric lines, healthy free-memory reports
    "non-default args: {'model': 'x', 'gpu_memory_utilization': 0.95, 'kv_cache_memory_bytes': None}",
    "WARNING 07-07 00:42:34 [config.py:1632] Possibly too large swap space. 8.00 GiB out of the 19.53 GiB total CPU "
    "memory is allocated for the swap space.",
    "INFO 11-30 10:00:00 metrics.py:10] GPU KV cache usage: 100.0%, CPU KV cache usage: 0.0%, no free blocks: 0",
    "INFO 05-01 10:00:00 [gpu_worker.py:100] Free memory on device cuda:0 (70.1/79.2 GiB) on startup. Desired GPU "
    "memory utilization is (0.9, 71.3 GiB).",
    # advice, and errors of another kind that name memory or a resource
    "common_init_from_params: failed to load model 'x.gguf', try reducing --n-gpu-layers if you're running out of VRAM",
    "ERROR 11-30 10:00:00 serving.py:10] request 12 failed: prompt (9000 tokens) exceeds the available context size",
    "error: insufficient permissions to access shared memory",
    "ERROR: failed to get device memory info",
    "2024-04-01 14:19:20,431 xinference.api.restful_api 1 ERROR    No available slot found for the model",
]  # fmt: skip


@pytest.mark.parametrize("line", NOT_REFUSED)
def test_warnings_retries_bookkeeping_echoes_and_healthy_reports_stay_none(line: str) -> None:
    d = diagnose_lines([line])
    assert (d.oom, d.stage) == (False, "none")

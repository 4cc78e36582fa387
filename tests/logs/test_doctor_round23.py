"""The classes rounds 22 and 23's misses belong to (issue 34), each pinned on lines composed after the programs' sources
and the public logs under tests/data/logs/heldout_round22/ and heldout_round23/: a bare kill that ends the program's own
shutdown after a failure of another kind (no OOM killer), llama.cpp's server on its request path, tinygrad's weight
load (which exo loads through) and exo named as the writer, and the stop-46 rule that TensorRT-LLM's engine build is
start-up (tests/logs/test_doctor_round11.py)."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

# --- a bare kill after the program's own fatal shutdown -----------------------------------------------------------

#: vLLM V1's client after a worker's error of another kind: it logs its fatal signal and kills its own process tree
#: with SIGKILL, so the shell prints "Killed" (Qwen2.5-Omni #288).
WORKER_ERROR = [
    "ERROR 05-19 22:17:53 [core.py:386] RuntimeError: ('Worker failed with error %s, please check the stack trace "
    "above for the root cause', \"'tuple' object has no attribute 'ndim'\")",
    "ERROR 05-19 22:17:53 [core.py:386] ",
]
SHUTDOWNS = (
    "CRITICAL 05-19 22:17:53 [core_client.py:359] Got fatal signal from worker processes, shutting down. See stack "
    "trace above for root cause issue.",
    "CRITICAL 04-27 01:29:53 [multiproc_executor.py:49] MulitprocExecutor got fatal signal from worker processes, "
    "shutting down. See stack trace above for root cause issue.",
    "ERROR 06-01 10:00:00 [multiproc_executor.py:140] Worker proc VllmWorker-1 died unexpectedly, shutting down "
    "executor.",
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
)
TRACKER = [
    "(VllmWorker rank=3 pid=1150) /usr/lib/python3.10/multiprocessing/resource_tracker.py:104: UserWarning: "
    "resource_tracker: process died unexpectedly, relaunching.  Some resources might leak.",
    "(VllmWorker rank=3 pid=1150)   warnings.warn('resource_tracker: process died unexpectedly, '",
]


def test_a_bare_kill_that_ends_the_programs_own_fatal_shutdown_is_no_out_of_memory() -> None:
    for shutdown in SHUTDOWNS:
        for kill in ("Killed", "Process exited with code 137"):
            d = diagnose_lines([*WORKER_ERROR, shutdown, *TRACKER, kill])
            assert (d.oom, d.stage) == (False, "none"), (shutdown, kill)


def test_a_bare_kill_with_no_shutdown_before_it_is_still_the_oom_killer() -> None:
    # TensorRT-LLM #2539: the checkpoint conversion is killed with nothing of its own before the kill
    converting = "Total time of reading and converting 52.12702465057373 s"
    d = diagnose_lines(["286it [00:50, 5.63it/s]", converting, "Killed"])
    assert (d.oom, d.memory, d.stage) == (True, "host", "startup")
    # and the kernel's own record names the memory, whatever came before it
    d = diagnose_lines([*WORKER_ERROR, SHUTDOWNS[0], "Out of memory: Killed process 1150 (python3) total-vm:9GB"])
    assert (d.oom, d.memory) == (True, "host")


def test_an_out_of_memory_error_before_the_shutdown_stays_the_failure() -> None:
    d = diagnose_lines([
        "ERROR 04-14 03:35:21 [core.py:386] RuntimeError: NPU out of memory. Tried to allocate 322.00 MiB (NPU 0; "
        "60.97 GiB total capacity; 57.51 GiB already allocated)",
        SHUTDOWNS[0],
        "Killed",
    ])  # fmt: skip
    assert (d.oom, d.memory) == (True, "device")


# --- llama.cpp's server on its request path -----------------------------------------------------------------------

GGML_OOM = [
    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4514.05 MiB on device 0: cudaMalloc failed: out of memory",
    "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 4733328896",
]


def test_llama_cpp_servers_request_records_place_a_later_buffer_failure_at_serving() -> None:
    # ggml-org/llama.cpp #13414: a request's image is encoded (server_tokens::process_chunk) when the buffer fails
    for serving in (
        "srv  process_chun: processing image...",
        "slot launch_slot_: id  0 | task 0 | processing task",
        "slot update_slots: id  0 | task 0 | new prompt, n_ctx_slot = 4096, n_keep = 0, n_prompt_tokens = 1033",
        "srv  update_slots: all slots are idle",
        "srv  params_from_: Chat format: Content-only",
        "srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200",
    ):
        d = diagnose_lines([serving, *GGML_OOM])
        assert (d.oom, d.stage) == (True, "runtime"), serving


def test_llama_cpp_servers_start_up_records_leave_a_buffer_failure_at_start_up() -> None:
    # its model's load and its slots' creation print the same "srv"/"slot" records before it serves
    for starting in (
        "srv    load_model: loading model '/models/gemma-3-27b-it-Q4_K_M.gguf'",
        "slot         init: id  0 | task -1 | new slot n_ctx_slot = 4096",
    ):
        d = diagnose_lines([starting, *GGML_OOM])
        assert (d.oom, d.stage) == (True, "startup"), starting


# --- tinygrad's weight load, exo -----------------------------------------------------------------------------------

SHARD = "Shard(model_id='mlabonne/Meta-Llama-3.1-8B-Instruct-abliterated', start_layer=0, end_layer=31, n_layers=32)"


def test_tinygrads_weight_bar_not_finished_places_the_oom_in_the_load_and_names_exo() -> None:
    # exo-explore/exo #140: exo loads a shard's weights (tinygrad's load_state_dict) on its first request
    bar = "ram used: 11.98 GB, layers.27.feed_forward.w2.weight                  :  85%|████▌ | 249/292 [00:05<00:00]"
    d = diagnose_lines([f"Excluded model param keys for shard={SHARD}: set()", bar,
                        f"Error processing tensor for shard {SHARD}: CUDA Error 2, out of memory"])  # fmt: skip
    assert (d.oom, d.stage, d.basis) == (True, "startup", "phase")
    assert d.source.name == "exo"

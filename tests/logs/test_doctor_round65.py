"""Failure lines after rounds 62-65 (issue 34), each a class any program's log can show, pinned on lines composed after
the programs' sources (cited in vllm_hpu_mm/logs/patterns.py) and the public logs under tests/data/logs/heldout_round62/
... heldout_round65/:

- A message worded as out of memory that its program raises for any failure of the pass it wraps (TGI 1.0's warm-up,
  "Not enough memory to handle N prefill tokens") is no out-of-memory failure where the failure it wrapped is named
  as a device fault (an illegal memory access).
- A launcher's report that its child died of signal 9 is a kill, as the shell's "Killed" is.
- A refusal printed without a failure mark (ggml's memory pool, Metal's buffer maximum) is the failure when the next
  line states one or the process crashed there (ggml's memory pool is one by itself since rounds 78-81:
  test_doctor_round81_recognition.py); a refusal of vLLM's CPU swap space is the host's memory."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

# --- a catch-all wrapper over a device fault -----------------------------------------------------------------------


def test_a_warmups_memory_claim_over_an_illegal_memory_access_is_no_oom() -> None:
    d = diagnose_lines([
        '  File "/opt/conda/lib/python3.9/site-packages/text_generation_server/models/flash_causal_lm.py", line 755, '
        "in warmup",
        "    raise RuntimeError(",
        "RuntimeError: Not enough memory to handle 2048 prefill tokens. You need to decrease "
        "`--max-batch-prefill-tokens`",
        "",
        "2024-01-02T10:00:00.000000Z ERROR warmup{max_prefill_tokens=2048}:warmup: text_generation_client: "
        "router/client/src/lib.rs:33: Server error: Unexpected <class 'RuntimeError'>: CUDA error: an illegal memory "
        "access was encountered",
    ])  # fmt: skip
    assert not d.oom


def test_the_same_warmup_claim_alone_is_still_an_oom() -> None:
    d = diagnose_lines([
        '  File "/opt/conda/lib/python3.9/site-packages/text_generation_server/models/flash_causal_lm.py", line 755, '
        "in warmup",
        "    raise RuntimeError(",
        "RuntimeError: Not enough memory to handle 2048 prefill tokens. You need to decrease "
        "`--max-batch-prefill-tokens`",
    ])  # fmt: skip
    assert d.oom


# --- a launcher's word for a child killed by signal 9 ----------------------------------------------------------------


def test_a_shard_signaled_with_signal_9_is_a_host_oom_kill() -> None:
    d = diagnose_lines([
        "2024-01-02T10:00:00.000000Z ERROR shard-manager: text_generation_launcher: Shard process was signaled to "
        "shutdown with signal 9 rank=1",
        "2024-01-02T10:00:00.100000Z ERROR text_generation_launcher: Shard 1 crashed",
    ])  # fmt: skip
    assert (d.oom, d.memory) == (True, "host")


# --- refusals printed without a failure mark -------------------------------------------------------------------------


def test_a_memory_pool_out_of_space_then_a_crash_is_an_oom() -> None:
    d = diagnose_lines([
        "ggml_new_tensor_impl: not enough space in the context's memory pool (needed 20000000, available 10000000)",
        "run.sh: line 1:   77 Segmentation fault      python -m llama_cpp.server --n_ctx 4096",
    ])  # fmt: skip
    assert d.oom


def test_a_buffer_over_the_devices_maximum_then_a_failed_load_is_an_oom() -> None:
    d = diagnose_lines([
        "ggml_metal_add_buffer: buffer 'data' size 7000000000 is larger than buffer maximum of 5726666752",
        "llama_init_from_file: failed to add buffer",
    ])  # fmt: skip
    assert d.oom


def test_a_refusal_the_program_goes_on_from_is_no_oom() -> None:
    d = diagnose_lines([
        "load_tensors: not enough free VRAM for all 33 layers, offloading 20 of them",
        "llama_print_timings:        load time =  1000.00 ms",
    ])  # fmt: skip
    assert not d.oom


def test_vllms_cpu_swap_space_running_out_is_the_hosts_memory() -> None:
    d = diagnose_lines([
        "RuntimeError: Aborted due to the lack of CPU swap space. Please increase the swap space to avoid this error.",
    ])  # fmt: skip
    assert (d.oom, d.memory) == (True, "host")

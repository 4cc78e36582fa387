"""Out-of-memory failures in wordings the doctor had not met, which rounds 42-44 answered ``none`` (issue 34), each
pinned on lines composed after the public logs under tests/data/logs/heldout_round42/ ... heldout_round44/ and the
programs that print them, with guards that keep lines of the same words that state no failure where they were.

The general reading (:data:`~vllm_hpu_mm.logs.patterns.MEMORY_REFUSED`) recognises a failure line that states a memory
resource could not be provided; these classes widen what it counts as such a statement:

- what a resource has left set against what a request asks of it, around a "but" (vllm.rs: "Remaining N kvcache
  tokens, but your prompt requires M new tokens");
- a resource below, lower or smaller than what is required (vLLM on ROCm: "Available memory on device ... is below
  required GPU memory utilization"), or too small;
- no room to allocate a size or a buffer (tt-metal: "Not enough space to allocate N B DRAM buffer"), and other verbs
  of a refused allocation (apply for, obtain), a size an allocation failed for, a size over the allowed buffer;
- a message quoted inside another's repr, whose line breaks are written out as backslash-n: a word after one starts a
  word.

Which stage the failure came at is the stage reading's, unchanged here: these tests pin recognition only.
"""

from __future__ import annotations

import pytest

from vllm_hpu_mm.logs.doctor import diagnose_lines
from vllm_hpu_mm.logs.doctor.scan import refused_memory


def assert_device_oom(line: str) -> None:
    d = diagnose_lines([line])
    assert (d.oom, d.memory) == (True, "device"), line


# --- what is left set against what is asked ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        # vllm.rs's engine refusing a request its free KV cache blocks cannot hold (EricLBuehler/vllm.rs #278)
        "2026-04-01T02:59:00.655654Z ERROR vllm_rs::server::server: Stream generation failed: Remaining 1406272 "
        "kvcache tokens, but your prompt requires 1717120 new tokens, please request later!",
        "ERROR [engine.py:88] RuntimeError: the request needs 4096 KV cache blocks, but only 1024 are free",
    ],
)
def test_a_failure_that_sets_what_a_memory_resource_has_left_against_what_is_asked_is_an_out_of_memory_failure(
    line: str,
) -> None:
    assert_device_oom(line)


# --- a resource below what is required ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        # vLLM's free-memory check in the words of a ROCm build (ROCm/vllm #16)
        "(EngineCore_DP0 pid=727) ERROR 02-12 15:44:57 [core.py:966] ValueError: Available memory on device cuda:0 "
        "(28.49/124.0 GiB) is below required GPU memory utilization (0.95, 117.8 GiB). Reduce GPU memory utilization "
        "or decrease GPU memory used by other processes.",
        "ERROR: free HBM (10.2 GiB) is lower than the required 16.0 GiB",
        "ERROR: the KV cache is too small for one sequence of 32768 tokens",
    ],
)
def test_a_failure_that_says_memory_is_below_what_is_required_or_too_small_is_an_out_of_memory_failure(
    line: str,
) -> None:
    assert_device_oom(line)


# --- no room to allocate, and other refused allocations ----------------------------------------------------------


def test_no_room_to_allocate_a_device_buffer_is_an_out_of_memory_failure() -> None:
    # tt-metal's bank manager (tt_metal/impl/allocator/bank_manager.cpp) for an L1 buffer, as pytest shows it
    assert_device_oom("E   RuntimeError: Not enough space to allocate 55444480 B L1 buffer across 70 banks")


@pytest.mark.parametrize(
    "line",
    [
        "[Error]: Failed to apply for memory.",
        "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::268435456 (256)MB",
        "panic: mlx: [metal::malloc] Attempting to allocate 133872076800 bytes which is greater than the maximum "
        "allowed buffer size of 30150672384 bytes.",
    ],
)
def test_the_general_reading_knows_a_refused_allocation_without_its_programs_own_rule(line: str) -> None:
    assert refused_memory(line) == "device"


# --- a message quoted with its line breaks escaped -----------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        # vLLM's engine relaying tt-metal's exception in its repr (tenstorrent/vllm #127)
        "ERROR 06-19 17:19:27 [engine.py:163] RuntimeError('TT_THROW @ /src/tt_metal/impl/allocator/bank_manager.cpp"
        ":141: tt::exception\\ninfo:\\nOut of Memory: Not enough space to allocate 268435456 B DRAM buffer across 12 "
        "banks, where each bank needs to store 22370304 B\\nbacktrace:\\n --- libtt_metal.so(+0x279ff5)')",
        "RuntimeError('worker 3 exited:\\nOut of memory')",
    ],
)
def test_an_out_of_memory_message_after_an_escaped_line_break_is_read(line: str) -> None:
    assert_device_oom(line)


# --- guards: the same words, no failure of memory -------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "WARNING: Remaining 1406272 kvcache tokens, but your prompt requires 1717120 new tokens; retrying later",
        "INFO: available memory 28.49 GiB, but the model requires 30 GiB",
        "WARNING: Available VRAM (4096 MB) is below required VRAM (8192 MB); execution will offload to CPU",
        "ERROR: coverage 60% is below required threshold (75%)",
        "ERROR: output buffer is too small for the decoded string",
        "OSError: [Errno 28] No space left on device",
        "ERROR: Not enough space to allocate file 3 on disk",
    ],
)
def test_a_shortage_the_program_goes_on_from_or_one_of_no_memory_is_no_out_of_memory_failure(line: str) -> None:
    d = diagnose_lines([line])
    assert (d.oom, d.stage) == (False, "none")

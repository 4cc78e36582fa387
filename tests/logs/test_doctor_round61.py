"""Out-of-memory wordings met in rounds 58-61 (issue 34), each a class any program's log can show, pinned on lines
composed after the programs' sources and the public logs under tests/data/logs/heldout_round58/ ... heldout_round61/:

- The word "killed" alone on a line, lower case as a user retypes the shell's word, is a kill like "Killed".
- TensorFlow's status name written out ("Resource exhausted: ...") is the device out of memory where its message
  names memory or an allocation; the same name for a quota is no OOM.
- The TPU runtime's "Attempting to allocate N. That was not possible." says the device ran out even where a wrap cut
  the status before it away.
- MSVC's name for std::bad_alloc, "bad allocation", is the host out of memory."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

# --- a kill retyped in lower case ----------------------------------------------------------------------------------


def test_killed_alone_in_lower_case_is_the_host_out_of_memory() -> None:
    d = diagnose_lines(["INFO Loading data from scratch", "killed"])
    assert (d.oom, d.memory) == (True, "host")


def test_killed_inside_a_sentence_is_no_kill() -> None:
    d = diagnose_lines(["INFO worker 3 was killed by the user, restarting it"])
    assert not d.oom


# --- TensorFlow's written-out status -------------------------------------------------------------------------------


def test_tensorflows_resource_exhausted_about_memory_is_the_device_out_of_memory() -> None:
    line = (
        "2021-11-10 17:01:24.065497: W tensorflow/core/framework/op_kernel.cc:1692] OP_REQUIRES failed at "
        "tpu_execute_op.cc:266 : Resource exhausted: Attempting to reserve 3.50G at the bottom of memory."
    )
    d = diagnose_lines([line])
    assert (d.oom, d.memory) == (True, "device")


def test_resource_exhausted_for_a_quota_is_no_out_of_memory() -> None:
    d = diagnose_lines(["ERROR google.api_core.exceptions: Resource exhausted: Quota exceeded for requests per minute"])
    assert not d.oom


# --- the TPU runtime's refused allocation --------------------------------------------------------------------------


def test_a_tpu_allocation_that_was_not_possible_is_the_device_out_of_memory_after_a_wrap() -> None:
    lines = ["RuntimeProgramAllocationFailure: Error loading program 'jit_step':",
             "Attempting to allocate 2.25G. That was not possible. There are 700.10M free."]  # fmt: skip
    d = diagnose_lines(lines)
    assert (d.oom, d.memory) == (True, "device")


# --- MSVC's bad_alloc ----------------------------------------------------------------------------------------------


def test_msvcs_bad_allocation_is_the_host_out_of_memory() -> None:
    lines = ["RuntimeError: Exception from src\\core\\src\\runtime\\allocator.cpp:79:", "bad allocation"]
    d = diagnose_lines(lines)
    assert (d.oom, d.memory) == (True, "host")

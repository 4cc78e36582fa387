"""Failures held-out rounds 70-71 showed unrecognised (issue 34), each a class any program's log can show, pinned on
lines composed after the public logs under tests/data/logs/heldout_round70 and heldout_round71:

- Memory refused in the words of not having it: "you may not have enough available memory to run this model" (Ollama's
  runner exited), "the device doesn't have enough memory". The same words at warning level, or of disk space, are no
  failure.
- An assertion that a memory block just allocated is there, failed: the host's allocator returned nothing (ggml's
  context pool, malloc'ed in ``ggml_init``, then ``GGML_ASSERT(ctx->mem_buffer != NULL)``; C's "Assertion `mem_ptr !=
  NULL' failed"). A buffer a tensor was never given is a missing step, not memory refused.
- An error stated as "error <doing something>: <why>" right above a traceback, with only announcements of the failure
  between (llama.cpp's "error loading model: error loading model vocabulary: ..." then "failed to load model"), is
  the error that traceback raised, however an excerpt cuts it: a failure of another kind, not a cut that may hide an
  out-of-memory one."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

# --- not having enough memory ---------------------------------------------------------------------------------------


def test_a_runner_that_exited_for_want_of_memory_is_an_oom_of_no_known_stage() -> None:
    # ollama/ollama #1566: the excerpt is this line and the host's `free` output
    d = diagnose_lines([
        "Error: llama runner exited, you may not have enough available memory to run this model",
        "              total        used        free      shared  buff/cache   available",
        "Mem:       58212660      641572    54462900        5692     3108188    56950236",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (True, "unknown")


def test_other_wordings_of_not_having_enough_memory_are_oom() -> None:
    for line in (
        "RuntimeError: the selected GPU doesn't have enough memory for this model",
        "ERROR: worker 2 does not have sufficient device memory to hold the weights",
        "fatal: host has not enough RAM",
    ):
        assert diagnose_lines([line]).oom, line


def test_not_having_enough_memory_said_as_a_warning_or_of_disk_is_no_failure() -> None:
    for line in (
        "WARNING: if the GPU does not have enough memory, lower --max-model-len",
        "Error: the volume does not have enough disk space to download the model",
    ):
        assert not diagnose_lines([line]).oom, line


# --- an allocation asserted present ---------------------------------------------------------------------------------


def test_a_failed_assertion_that_the_context_memory_was_allocated_is_a_host_oom_at_load() -> None:
    # bigcode-project/starcoder.cpp #16: a 51 GB context pool asked of the host at model load
    d = diagnose_lines([
        "gptj_model_load: loading model from 'models/gpt-j-ggml.bin'",
        "gptj_model_load: n_ctx   = 8192",
        "gptj_model_load: ggml ctx size = 40960.00 MB",
        "GGML_ASSERT: ggml.c:4411: ctx->mem_buffer != NULL",
        "Aborted (core dumped)",
    ])  # fmt: skip
    assert (d.oom, d.memory, d.stage) == (True, "host", "startup")


def test_cs_assertion_on_an_allocated_block_is_the_same_failure() -> None:
    for line in (
        "server: pool.c:88: pool_new: Assertion `mem_ptr != NULL' failed.",
        "GGML_ASSERT: ggml-alloc.c:120: alloc_buffer != NULL",
    ):
        d = diagnose_lines([line])
        assert (d.oom, d.memory) == (True, "host"), line


def test_an_assertion_on_a_buffer_never_given_is_no_oom() -> None:
    for line in (
        'GGML_ASSERT: ggml-backend.c:226: buf != NULL && "tensor buffer not set"',
        "GGML_ASSERT: ggml.c:2040: ctx->mem_buffer == NULL",
    ):
        assert not diagnose_lines([line]).oom, line


# --- an error stated with what was being done -----------------------------------------------------------------------

#: A program that loads a model through llama.cpp's library, its traceback cut by whoever posted it.
CUT_LOAD = [
    "Traceback (most recent call last):",
    '  File "server.py", line 120, in <module>',
    "    main()",
    '  File "server.py", line 88, in load_model',
    "    ret = handle.load_model(inputs)",
    "...",
]


def test_an_error_loading_the_model_stated_above_a_cut_traceback_is_that_error() -> None:
    # LostRuins/koboldcpp #2404: the vocabulary's type was not understood, then the wrapper's traceback, cut
    d = diagnose_lines([
        "print_info: file size   = 7.67 GiB (4.88 BPW)",
        "llama_model_load: error loading model: error loading model vocabulary: unknown pre-tokenizer type: 'x'",
        "llama_model_load_from_file_impl: failed to load model",
        *CUT_LOAD,
    ])  # fmt: skip
    assert (d.oom, d.stage, d.basis) == (False, "none", "error")


def test_other_programs_errors_in_doing_something_are_stated_errors_too() -> None:
    for line in ("Error while parsing config: unexpected key 'rope_scaling'",
                 "app | error reading checkpoint index: no such key 'weight_map'"):  # fmt: skip
        d = diagnose_lines([line, *CUT_LOAD])
        assert (d.stage, d.basis) == ("none", "error"), line


def test_an_error_loading_the_model_for_want_of_memory_is_no_stated_error_of_another_kind() -> None:
    d = diagnose_lines([
        "llama_model_load: error loading model: unable to allocate CUDA0 buffer",
        "llama_model_load_from_file_impl: failed to load model",
        *CUT_LOAD,
    ])  # fmt: skip
    assert d.oom

"""Out-of-memory failures rounds 78-81 showed unrecognised (issue 34), each a class any program's log can show, pinned
on lines composed after the public logs under tests/data/logs/heldout_round79 and heldout_round81:

- An accelerator runtime's own words for device memory it could not give, whatever host relays them: the verb cut
  ("Failed to alloc DEVICE memory", AWS Neuron's driver), the refusal after the memory ("Alloc Device Memory
  Failed"), a size refused on a named device ("Failed to allocate 448.000MB (usage: tensors) on ND 0:NC 0"), the
  runtime API's allocation status. A host that relays the runtime's stderr at its own warning level does not make
  the failure a warning. A count of cores, or host memory, is no such refusal.
- ggml's context memory pool too small for the next tensor is the failure by itself: ggml never goes on from it (it
  asserts, returns no tensor, and the caller crashes or aborts), so the line needs no failure mark or crash after it.
  Its tensor allocators' buffer too small for the next tensor is the same failure (ggml aborts after it); their
  free-block list full is bookkeeping. The same words in a comment are no failure."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

# --- an accelerator runtime refusing device memory -------------------------------------------------------------------

#: A serving host relays its worker's stderr at its own WARN level (deepjavalibrary/djl-serving #1847, Inferentia 2).
RELAYED = "WARN  PyProcess W-80-model-stderr: 2024-Apr-30 09:46:17.904255    80:80    ERROR  "


def test_a_runtime_relayed_at_warning_level_that_could_not_alloc_device_memory_is_an_oom() -> None:
    d = diagnose_lines([
        f"{RELAYED}TDRV:dmem_alloc_internal                     Failed to alloc DEVICE memory: 469762048",
        f"{RELAYED}TDRV:dml_dump                                Wrote nrt memory alloc debug info to /tmp/x.csv",
    ])  # fmt: skip
    assert (d.oom, d.memory, d.stage) == (True, "device", "unknown")


def test_other_wordings_of_a_device_refusing_memory_are_oom() -> None:
    for line in (
        "2024-Oct-15 18:01:18.347720  3882:3882  ERROR  TDRV:log_dev_mem                             Failed to "
        "allocate 172.000MB (usage: tensors) on ND 0:NC 0, current utilization:",
        "2024-Oct-15 18:01:18.356933  3882:3882  ERROR  TDRV:tensor_allocate                         Failed to "
        "allocate 180355072 bytes on DEVICE for tensor UNKNOWN.",
        'RuntimeError: nrt_tensor_allocate status=4 message="Allocation Failure"',
        "[STREAM_CHECK_MESSAGE]  Expected ret == 0 to be true, but got false. Alloc Device Memory Failed! Program "
        "Terminated.",
        "        allocate device memory failed.[FUNC:Init][FILE:memory_pool_manager.cc][LINE:50]",
    ):
        d = diagnose_lines([line])
        assert (d.oom, d.memory) == (True, "device"), line


def test_a_runtime_short_of_cores_or_of_host_memory_is_not_refusing_device_memory() -> None:
    for line in (
        "ERROR  NMGR:kmgr_load_nn  Failed to allocate 2 NeuronCores on ND 0, err: 9",
        "ERROR  TDRV:host_alloc  Failed to alloc host memory for the DMA descriptors",
        "RuntimeError: nrt_tensor_allocate status=0",
    ):
        d = diagnose_lines([line])
        assert d.memory != "device", line


# --- ggml's context memory pool -------------------------------------------------------------------------------------


def test_ggmls_context_memory_pool_too_small_is_an_oom_by_itself() -> None:
    # nomic-ai/gpt4all #971: the excerpt is this one line; nothing says when
    d = diagnose_lines([
        "ggml_new_tensor_impl: not enough space in the context's memory pool (needed 12641168288, available "
        "12633509264)",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (True, "unknown")


def test_ggmls_later_and_scratch_wordings_of_the_pool_are_the_same_failure() -> None:
    for line in (
        "ggml_new_object: not enough space in the context's memory pool (needed 26231472, available 26231136)",
        "ggml_new_tensor_impl: not enough space in the scratch memory pool (needed 20000000, available 10000000)",
    ):
        assert diagnose_lines([line]).oom, line


def test_the_pools_words_in_a_comment_are_no_failure() -> None:
    d = diagnose_lines([
        "# avoid a large n_ctx: ggml_new_tensor_impl: not enough space in the context's memory pool (needed 18, "
        "available 1)",
        "model = GPT4All('./models/ggml-gpt4all-l13b-snoozy.bin', n_ctx=512)",
    ])  # fmt: skip
    assert not d.oom


def test_ggmls_tensor_allocator_out_of_space_in_its_buffer_is_an_oom_by_itself() -> None:
    # abetlen/llama-cpp-python #944: the refusal, then ggml's abort; nothing says when
    for lines in (
        ["ggml_tallocr_alloc: not enough space in the buffer (needed 442368, largest block available 290848)",
         'GGML_ASSERT: ggml-alloc.c:116: !"not enough space in the buffer"'],
        ["ggml_tallocr_alloc: not enough space in the buffer to allocate blk.0.attn_q.weight (needed 205520896, "
         "available 201326624)"],
    ):  # fmt: skip
        d = diagnose_lines(lines)
        assert (d.oom, d.stage) == (True, "unknown"), lines


def test_ggmls_allocator_out_of_free_blocks_is_no_oom() -> None:
    d = diagnose_lines(
        ['GGML_ASSERT: ggml-alloc.c:230: alloc->n_free_blocks < MAX_FREE_BLOCKS && "out of free blocks"']
    )
    assert not d.oom

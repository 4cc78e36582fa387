"""Out-of-memory wordings after rounds 54-57 (issue 34), each a class any program's log can show, pinned on lines
composed after the programs' sources and the public logs under tests/data/logs/heldout_round54/ ... heldout_round57/:

- The shells' words for a process that died of SIGKILL, besides bash's ``Killed`` on a line of its own: zsh's
  lower-case "killed" (``zsh: killed  python ...``, ``[6]  24162 killed  python ...``), bash's background job
  (``[1]+  Killed  python ...``), and the word written at the end of a progress bar that never ended its line. A kill
  while the weights load is the OOM killer at start-up; the program's own teardown after a failure still is not.
- A KV-cache block manager out of free blocks for a batch (TGI's "Out of available cache blocks: asked N, only M free
  blocks") is the cache's memory exhausted while requests are served; ggml's assertion on its allocator's free-block
  list ("out of free blocks") is still bookkeeping, no shortage.
- torch's caching allocator asserting on NVML ("NVML_SUCCESS == r INTERNAL ASSERT FAILED at ...
  CUDACachingAllocator.cpp") does so only while it writes its out-of-memory report: the device ran out."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.logs.doctor import diagnose_lines

# --- the shells' words for a SIGKILL ----------------------------------------------------------------------------------

LOADING = ["Loading model from models/ldm/v1/model.ckpt", "Global Step: 470000"]


@pytest.mark.parametrize(
    "kill",
    [
        "[6]    24162 killed     python scripts/txt2img.py --prompt 'a cat'",  # zsh, a job with its number and pid
        "[2]  + 8812 killed     python serve.py",
        "zsh: killed     python scripts/txt2img.py --prompt 'a cat'",  # zsh, a foreground job
        "[1]+  Killed                  python scripts/txt2img.py",  # bash, a background job
    ],
)
def test_a_shells_kill_report_while_the_model_loads_is_a_host_oom_at_start_up(kill: str) -> None:
    d = diagnose_lines([*LOADING, kill])
    assert (d.oom, d.memory, d.stage) == (True, "host", "startup")


def test_a_kill_written_at_the_end_of_a_loading_bar_is_a_host_oom_at_start_up() -> None:
    # the bar redraws its line with a carriage return; the shell's word lands after it
    bar = "Loading checkpoint shards:   0%|" + " " * 60 + "| 0/2 [00:00<?, ?it/s]Killed"
    d = diagnose_lines([bar, "killed"])
    assert (d.oom, d.memory, d.stage) == (True, "host", "startup")


@pytest.mark.parametrize("line", ["3 killed in the battle scene", "[INFO] worker killed: 0 of 4", "status: Killed"])
def test_prose_about_killing_is_no_kill(line: str) -> None:
    assert not diagnose_lines([*LOADING, line]).oom


def test_a_zsh_kill_after_the_programs_own_teardown_is_no_oom() -> None:
    lines = ["[2025-02-17 11:56:40] Initialization failed. warmup error: Traceback (most recent call last):",
             "ValueError: 403 Forbidden", "", "zsh: killed     python -m sglang.launch_server"]  # fmt: skip
    assert not diagnose_lines(lines).oom


# --- a KV-cache block manager out of free blocks ---------------------------------------------------------------------


def test_a_block_manager_out_of_free_cache_blocks_while_decoding_is_a_runtime_oom() -> None:
    lines = ["infer:send_error: router/src/infer.rs:588: Request failed during generation: Server error: Out of "
             "available cache blocks: asked 3666, only 3661 free blocks",
             "ERROR batch{batch_size=42}:decode:decode{size=42}: text_generation_client: router/client/src/lib.rs:33: "
             "Server error: error trying to connect: Connection refused (os error 111)"]  # fmt: skip
    d = diagnose_lines(lines)
    assert (d.oom, d.memory, d.stage) == (True, "device", "runtime")


def test_ggmls_assertion_on_its_free_block_list_is_still_no_oom() -> None:
    line = 'GGML_ASSERT: ggml-alloc.c:230: alloc->n_free_blocks < MAX_FREE_BLOCKS && "out of free blocks"'
    assert not diagnose_lines([line]).oom


# --- torch's allocator asserting on NVML while it reports an out-of-memory --------------------------------------------


@pytest.mark.parametrize(
    "assertion",
    [
        'RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at "/pytorch/c10/cuda/CUDACachingAllocator.cpp":1131, '
        "please report a bug to PyTorch.",
        "RuntimeError: NVML_SUCCESS == DriverAPI::get()->nvmlDeviceGetHandleByPciBusId_v2_( pci_id, &nvml_device) "
        'INTERNAL ASSERT FAILED at "../c10/cuda/CUDACachingAllocator.cpp":1017, please report a bug to PyTorch.',
    ],
)
def test_the_allocators_nvml_assertion_is_a_device_oom(assertion: str) -> None:
    lines = ["ERROR [core.py:708]     logits_sort, logits_idx = logits.sort(dim=-1, descending=False)",
             f"ERROR [core.py:708] {assertion}"]  # fmt: skip
    d = diagnose_lines(lines)
    assert (d.oom, d.memory) == (True, "device")


def test_an_nvml_assertion_elsewhere_is_no_oom() -> None:
    # NVML failing to start (no driver) is asserted outside the allocator
    line = 'RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at "../c10/cuda/driver_api.cpp":45'
    assert not diagnose_lines([line]).oom

"""Out-of-memory failures rounds 74-77 showed unrecognised (issue 34), each a class any program's log can show, pinned
on lines composed after the public logs under tests/data/logs/heldout_round75 and heldout_round76:

- A guard a program enforces itself, holding its memory under a limit, ceiling or budget: the memory over it is the
  failure ("Memory limit exceeded during prefill"), a warning that it trimmed work is not, nor is a limit of one
  kernel's shared memory or stack.
- A loader's guard that stops a model's load for want of the system's memory (LM Studio's guardrails) is the host's
  out-of-memory failure at start-up; a scheduler short of CPUs or GPUs is no such guard.
- A report that a model failed to load, whose own figures show a memory all but gone (an app's JSON error body:
  "ram_unused" a sliver of "ram_capacity"), is that memory's failure; the same report with memory to spare, or such
  figures under no failed load, is not."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

# --- a memory limit a program enforces itself ------------------------------------------------------------------------


def test_a_memory_limit_a_scheduler_enforces_exceeded_is_an_oom() -> None:
    # jundot/omlx #1522: the guard stops the prefill, then the request fails in its words
    d = diagnose_lines([
        "omlx.scheduler - WARNING - Prefill force-stopped at 1441 tokens: memory 42.8GB exceeds ceiling 42.0GB",
        "omlx.scheduler - ERROR   - Prefill failed for req-1: Memory limit exceeded during prefill",
        "omlx.server    - ERROR   - Error during chat streaming: Memory limit exceeded during prefill",
    ])  # fmt: skip
    assert (d.oom, d.memory) == (True, "device")


def test_other_wordings_of_memory_over_its_limit_are_oom() -> None:
    for line in (
        "ERROR worker 3: process exceeded its memory limit (42.0 GB), request aborted",
        "RuntimeError: GPU memory usage 30.1 GiB exceeds the budget of 28 GiB",
        "FATAL: resident memory is over the hard limit, stopping",
    ):
        assert diagnose_lines([line]).oom, line


def test_a_guard_that_trimmed_work_and_went_on_is_no_failure() -> None:
    d = diagnose_lines([
        "omlx.scheduler - WARNING - Prefill force-stopped at 1441 tokens: memory 42.8GB exceeds ceiling 42.0GB",
        "omlx.process_memory_enforcer - INFO - Memory pressure level: hard -> ok (current=24.6GB, soft=35.7GB, "
        "hard=39.9GB, ceiling=42.0GB)",
    ])  # fmt: skip
    assert not d.oom


def test_limits_of_a_kernel_or_of_requests_are_not_memory_running_out() -> None:
    for line in (
        "RuntimeError: requested shared memory exceeds the limit of 49152 bytes per block",
        "error: triton_flash_attention.py:211:0: stack frame size (164332) exceeds limit (131056) in function 'fwd'",
        "ERROR openai.RateLimitError: Rate limit exceeded for requests",
        "WARNING 08-15 11:44:47 scheduler.py:130] Input prompt (2715 tokens) is too long and exceeds limit of 2560",
    ):
        assert not diagnose_lines([line]).oom, line


# --- a loader's guard that stops a model's load ----------------------------------------------------------------------


def test_a_load_stopped_for_insufficient_system_resources_is_the_hosts_oom_at_startup() -> None:
    # lmstudio-ai/lmstudio-bug-tracker #1038
    d = diagnose_lines([
        "Error: Model loading was stopped due to insufficient system resources. Under the current settings, this model "
        "requires approximately 40 GB of memory, and continuing to load it would likely overload your system and "
        "cause it to freeze. If you think this is incorrect, you can adjust the model loading guardrails in settings.",
    ])  # fmt: skip
    assert (d.oom, d.memory, d.stage) == (True, "host", "startup")


def test_the_guards_later_wording_without_the_word_memory_is_the_same_failure() -> None:
    d = diagnose_lines([
        "Failed to load the model",
        "Model loading aborted due to insufficient system resources. Overloading the system will likely cause it to "
        "freeze.",
    ])  # fmt: skip
    assert (d.oom, d.memory, d.stage) == (True, "host", "startup")


def test_a_scheduler_short_of_gpus_or_a_load_stopped_by_the_user_is_no_oom() -> None:
    d = diagnose_lines([
        "(autoscaler) Warning: The following resource request cannot be scheduled right now: {'GPU': 1.0}.",
        "ERROR serve: Deployment 'llm' replica could not be started: scheduling was blocked due to insufficient "
        "resources",
        "ERROR model loading was stopped because of a user request",
    ])  # fmt: skip
    assert not d.oom


# --- a failed load's report whose figures show memory gone -----------------------------------------------------------


def _error_body(title: str, ram_unused: str) -> list[str]:
    """An app's JSON error body as LM Studio prints it (lmstudio-ai/lmstudio-bug-tracker #14)."""
    return [
        "{",
        f'  "title": "{title}",',
        '  "errorData": {',
        '    "n_ctx": 1048576,',
        '    "n_gpu_layers": 81',
        "  },",
        '  "data": {',
        '    "memory": {',
        '      "ram_capacity": "314.65 GB",',
        f'      "ram_unused": "{ram_unused}"',
        "    },",
        '    "gpu": {',
        '      "vram_recommended_capacity": "141.90 GB",',
        '      "vram_unused": "130.46 GB"',
        "    }",
        "  }",
        "}",
    ]


def test_a_failed_load_whose_report_shows_the_ram_gone_is_the_hosts_oom_at_startup() -> None:
    d = diagnose_lines(_error_body("Failed to load model", "316.65 KB"))
    assert (d.oom, d.memory, d.stage) == (True, "host", "startup")
    assert [e.text.strip() for e in d.evidence] == ['"title": "Failed to load model",', '"ram_unused": "316.65 KB"']


def test_a_failed_load_with_memory_to_spare_says_nothing_of_memory() -> None:
    assert not diagnose_lines(_error_body("Failed to load model", "250.12 GB")).oom


def test_little_memory_left_without_a_failed_load_is_no_failure() -> None:
    assert not diagnose_lines(_error_body("Model loaded", "316.65 KB")).oom
    d = diagnose_lines([
        "INFO memory: total_memory=80 GiB free_memory=300 MiB",
        "ERROR request 7 failed: connection reset by peer",
    ])  # fmt: skip
    assert not d.oom


def test_the_same_figures_on_one_line_and_an_empty_swap_are_read_as_they_say() -> None:
    one_line = '{"title": "Failed to load model", "data": {"memory": {"ram_capacity": "64 GB", "ram_unused": "12 MB"}}}'
    assert (diagnose_lines([one_line]).oom, diagnose_lines([one_line]).memory) == (True, "host")
    d = diagnose_lines(["ERROR Failed to load model: unknown architecture 'rwkv7'", "swap_free: 0 B, swap_total: 8 GB"])
    assert not d.oom

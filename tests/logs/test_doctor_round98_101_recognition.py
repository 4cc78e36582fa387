"""Out-of-memory failures development rounds 98-99 showed unrecognised (issue 34), each a class any program's log can
show, pinned on lines composed after the public logs under tests/data/logs/heldout_round98 and heldout_round99:

- A Vulkan call's error reported by its number: VkResult -2 is VK_ERROR_OUT_OF_DEVICE_MEMORY, -1
  VK_ERROR_OUT_OF_HOST_MEMORY (KhronosGroup/Vulkan-Headers vulkan_core.h). TVM's check prints the number before the
  name ("Vulkan Error, code=-2: VK_ERROR_OUT_OF_DEVICE_MEMORY"), so an excerpt that cuts the name ("VK_ERROR_OUT") still
  says the device ran out; a name cut where it can be no other error's says so too. Other codes (-3, -4) and other
  errors (a lost device) are no exhaustion, nor a program's own status next to the word Vulkan.
- A chat program's user turn typed after the user's role ("<human>: Write a poem for San Francisco", MLC-LLM's chat
  CLI) is work for its user: a failure after it came while serving. The role with nothing typed after it is none.
- llama.cpp's summary that it could not make the KV cache's buffer ("failed to allocate buffer for kv cache"), as any
  program built on it relays it (LM Studio's "Failed to initialize the context: ..."): alone, an out-of-memory failure
  of the KV cache. Where ggml's own line above it names the memory, that line stays the failure's. A warning or a
  quoted phrase is none."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines
from vllm_hpu_mm.logs.doctor.phases import asked_stage


def _verdict(lines: list[str]) -> tuple[bool, str]:
    d = diagnose_lines(lines)
    return d.oom, d.stage


# --- a Vulkan error by its number ------------------------------------------------------------------------------------

TVM_CHECK = "Check failed: (__e == VK_SUCCESS) is false: Vulkan Error, code={code}: {name}"


def test_vulkan_code_minus_2_with_its_name_cut_is_a_device_oom() -> None:
    # mlc-ai/mlc-llm #263: the excerpt cuts the name after "VK_ERROR_OUT"; the code says which memory
    d = diagnose_lines([TVM_CHECK.format(code=-2, name="VK_ERROR_OUT")])
    assert (d.oom, d.memory) == (True, "device")


def test_vulkan_code_minus_1_is_a_host_oom() -> None:
    d = diagnose_lines([TVM_CHECK.format(code=-1, name="VK_ERROR_OUT")])
    assert (d.oom, d.memory) == (True, "host")


def test_other_ways_a_program_reports_the_vulkan_result_by_its_number() -> None:
    for line, memory in (
        ("ERROR: vkAllocateMemory returned -2", "device"),
        ("vulkan: VkResult -2 while creating the KV buffer", "device"),
        ("fatal: vkQueueSubmit failed with -1", "host"),
        ("Vulkan error (-2) in buffer allocation", "device"),
    ):
        d = diagnose_lines([line])
        assert (d.oom, d.memory) == (True, memory), line


def test_a_vulkan_memory_error_named_and_cut_where_it_can_be_no_other_is_an_oom() -> None:
    for line, memory in (
        ("InternalError: Check failed: Vulkan Error: VK_ERROR_OUT_OF_DEVI", "device"),
        ("error: VK_ERROR_OUT_OF_HOST_MEM...", "host"),
    ):
        d = diagnose_lines([line])
        assert (d.oom, d.memory) == (True, memory), line


def test_other_vulkan_errors_and_codes_are_no_oom() -> None:
    for line in (
        TVM_CHECK.format(code=-3, name="VK_ERROR_INITIALIZATION_FAILED"),
        TVM_CHECK.format(code=-4, name="VK_ERROR_DEVICE_LOST"),
        TVM_CHECK.format(code=-1000001004, name="VK_ERROR_OUT_OF_DATE_KHR"),
        "Check failed: (__e == VK_SUCCESS) is false: VK_ERROR_DEVICE_LOST",
        "ERROR: vkAllocateMemory returned -20",
        # the name cut before it says which error, without the code: the pool's and the swapchain's start so too
        "Check failed: (__e == VK_SUCCESS) is false: VK_ERROR_OUT",
        # a program's own status next to the word Vulkan, not Vulkan's result
        "Failed to initialize Vulkan: error code -2",
    ):
        assert diagnose_lines([line]).stage == "none", line


# --- a chat program's user turn ---------------------------------------------------------------------------------------

MLC_CHAT = [
    'Use model library: "dist/prebuilt/lib/RedPajama-INCITE-Chat-3B-v1-q4f16_0-vulkan.so"',
    "Loading model...",
    "You can use the following special commands:",
    "  /help               print the special commands",
    "",
]
POOLED = (
    "[10:18:16] /tvm/src/runtime/relax_vm/pooled_allocator.h:64: Warning: PooledAllocator got InternalError during "
    "allocation: "
)


def test_a_vulkan_oom_after_the_users_typed_chat_turn_is_a_serving_oom() -> None:
    # mlc-ai/mlc-llm #263: the chat CLI echoes its user's turn after the user's role, then allocation fails
    lines = [*MLC_CHAT, "**<human>: Write a poem for San Francisco**", "", POOLED, "",
             "  " + TVM_CHECK.format(code=-2, name="VK_ERROR_OUT")]  # fmt: skip
    assert _verdict(lines) == (True, "runtime")


def test_without_a_typed_turn_the_same_failure_is_not_placed_in_serving() -> None:
    lines = [*MLC_CHAT, "<human>: ", POOLED, TVM_CHECK.format(code=-2, name="VK_ERROR_OUT")]
    oom, stage = _verdict(lines)
    assert oom
    assert stage != "runtime"


def test_user_roles_of_chat_templates_with_a_turn_typed_after_them() -> None:
    for line in ("<human>: Write a poem", "<|user|>: what is 2+2?", "> <user>: summarise this file", "<USER>: hi"):
        assert asked_stage(line) == "runtime", line
    for line in ("<human>: ", "<human>:", "template roles: <human>: {prompt}", "<bot>: Sure, here is a poem"):
        assert asked_stage(line) is None, line


# --- llama.cpp's KV cache buffer summary, relayed ---------------------------------------------------------------------


def test_the_kv_cache_buffer_summary_alone_is_a_kv_cache_oom() -> None:
    # lmstudio-ai/lmstudio-bug-tracker #1249: LM Studio's error shows only llama.cpp's summary
    lines = [
        "🥲 Failed to load the model",
        "",
        "Failed to load model",
        "",
        "Failed to initialize the context: failed to allocate buffer for kv cache",
    ]
    assert _verdict(lines) == (True, "kv_cache")


def test_other_programs_relaying_the_kv_cache_buffer_summary() -> None:
    for line in (
        "llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache",
        "Error: 500 Internal Server Error: failed to allocate buffer for kv cache",
        "RuntimeError: failed to allocate buffer for kv cache",
    ):
        assert _verdict([line]) == (True, "kv_cache"), line


def test_ggmls_own_line_above_the_summary_stays_the_failure_and_names_the_memory() -> None:
    lines = [
        "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 17179869184",
        "llama_kv_cache_init: failed to allocate buffer for kv cache",
    ]
    d = diagnose_lines(lines)
    assert (d.oom, d.stage, d.memory) == (True, "kv_cache", "host")
    assert d.evidence[0].line == 1


def test_a_kv_cache_buffer_summary_warned_of_or_quoted_is_no_failure() -> None:
    for line in (
        "WARNING: failed to allocate buffer for kv cache, retrying with a smaller context",
        "# if you see 'failed to allocate buffer for kv cache', lower n_ctx",
        "llama_kv_cache: CUDA0 KV buffer size = 1024.00 MiB",
    ):
        assert diagnose_lines([line]).stage == "none", line

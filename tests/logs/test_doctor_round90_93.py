"""Classes stop 51's unseen rounds 90-93 showed the doctor missing (issue 34; now development data), each pinned on
lines composed after the public logs under tests/data/logs/heldout_round9[0-3] (not loaded):

- vLLM's model runner's own words that its weight load ran out of device memory ("Failed to load model - not enough
  GPU memory", logged only by ``GPUModelRunner.load_model``): start-up, though a host's report that a vLLM load failed
  says nothing of the stage (vLLM sizes its KV cache and captures its graphs inside the host's load).
- A program's line that it initializes a program that serves ("Initializing the chat module..."): start-up, like
  "Starting server". An engine being initialized is not: its initialization spans the KV cache and graphs too.
- The HTML an issue's author folds a log in (``<summary>TypeError: ...</summary>`` over the traceback): the post's
  markup, not the program's, so the error stated in the fold's summary is the traceback's stated error.
- vLLM's model runner's file in a log line (``[gpu_model_runner.py:4957]``) names vLLM as the writer."""

from __future__ import annotations

import pytest

from tests.support.logs import verdict
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose
from vllm_hpu_mm.logs.doctor.phases import announced_stage

_TORCH_OOM = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1008.00 MiB.",
    "GPU 2 has a total capacity of 139.81 GiB of which 993.44 MiB is free.",
]


@pytest.mark.parametrize("dash", ["-", "\u2014", "\u2013"])
def test_vllm_s_model_runner_reporting_its_load_out_of_memory_is_startup(dash: str) -> None:
    lines = [*_TORCH_OOM, f"[gpu_model_runner.py:4957] Failed to load model {dash} not enough GPU memory."]
    assert verdict(lines) == ("startup", "message")


def test_the_same_oom_without_the_runner_s_words_says_nothing_of_the_stage() -> None:
    assert verdict(_TORCH_OOM)[0] == "unknown"


def test_vllm_s_model_runner_file_names_vllm_as_the_writer() -> None:
    d = diagnose([*_TORCH_OOM, "[gpu_model_runner.py:4957] Failed to load model - not enough GPU memory."], load({}))
    assert d.source.framework == "vllm"


_VK_OOM = [
    "[16:56:46] D:\\a\\utils\\utils\\tvm\\src\\runtime\\vulkan\\vulkan_buffer.cc:61:",
    "  Check failed: (__e == VK_SUCCESS) is false: Vulkan Error, code=-2: VK_ERROR_OUT_OF_DEVICE_MEMORY",
]


@pytest.mark.parametrize("line", ["Initializing the chat module...", "INFO Initializing model backend",
                                  "Initialising the server, please wait"])  # fmt: skip
def test_a_program_initializing_what_serves_is_starting(line: str) -> None:
    assert announced_stage(line) == "startup"
    assert verdict([line, *_VK_OOM]) == ("startup", "phase")


@pytest.mark.parametrize("line", [
    "INFO 08-25 12:31:29 llm_engine.py:70] Initializing an LLM engine with config: model='m', tensor_parallel_size=4",
    "Initializing the fast tokenizer may take a long time",
    "Initializing KV cache",
])  # fmt: skip
def test_initializing_an_engine_or_a_part_says_nothing_of_the_stage(line: str) -> None:
    assert announced_stage(line) is None


_FOLDED = [
    "<details>",
    "<summary>TypeError: flashinfer_attn.forward() got an unexpected keyword argument 'attention_mask'",
    "</summary>",
    "Traceback (most recent call last):",
    '  File "/env/lib/python3.11/site-packages/uvicorn/protocols/http/h11_impl.py", line 403, in run_asgi',
    "    result = await app(  # type: ignore[func-returns-value]",
    '  File "/env/lib/python3.11/site-packages/starlette/applications.py", line 112, in __call__',
    "    await self.middleware_stack(scope, receive, send)",
]


def test_an_error_stated_in_a_folded_log_s_summary_is_the_traceback_s_error() -> None:
    assert verdict(_FOLDED) == ("none", "error")


def test_the_same_traceback_cut_with_no_error_stated_is_left_undecided() -> None:
    assert verdict(["<details>", "<summary>Server log</summary>", *_FOLDED[3:]]) == ("unknown", "undecided")

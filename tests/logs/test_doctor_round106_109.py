"""Two stage classes development rounds 106-109 saw the doctor answer ``unknown`` on (issue 34), pinned on lines
composed after the public logs under tests/data/logs/heldout_round106 and heldout_round109 (not loaded):

- Ollama's report that its runner broke partway through a completion ("Error: an unknown error was encountered while
  running the model CUDA error: out of memory"): only a completion under way returns it, so the model was serving.
- A tool announcing that it calculates over its inputs ("perplexity: calculating perplexity over 565 chunks"): the
  model is built and working through its inputs, as "Embedding 120 sequences" says."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose
from vllm_hpu_mm.logs.doctor.phases import announced_stage


def _verdict(lines: list[str]) -> tuple[str, str]:
    d = diagnose(lines, load({}))
    return d.stage, d.basis


_GGML_OOM = [
    "CUDA error: out of memory",
    "  current device: 0, in function alloc at /app/ggml/src/ggml-cuda/ggml-cuda.cu:453",
    "  cuMemCreate(&handle, reserve_size, &prop, 0)",
]


@pytest.mark.parametrize("words", ["an unknown error was encountered", "an error was encountered"])
def test_ollama_s_runner_breaking_during_a_completion_is_serving(words: str) -> None:
    lines = [f"Error: {words} while running the model CUDA error: out of memory", *_GGML_OOM[1:]]
    assert _verdict(lines) == ("runtime", "message")


def test_the_same_ggml_oom_alone_says_nothing_of_the_stage() -> None:
    assert _verdict(_GGML_OOM)[0] == "unknown"


def test_a_tool_calculating_over_its_inputs_is_serving() -> None:
    line = "perplexity: calculating perplexity over 565 chunks, n_ctx=512, batch_size=2048, n_seq=4"
    assert announced_stage(line) == "runtime"
    assert _verdict(["perplexity: tokenizing the input ..", line, *_GGML_OOM]) == ("runtime", "phase")

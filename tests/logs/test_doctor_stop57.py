"""Classes stop 57 closed from stop 56's rounds (issue 34; development data since they were scored), each pinned on
lines composed after the public logs (not loaded):

- A Rust backtrace's frame of a weight being quantized in place (candle's ``QTensor::quantize``) is the model's load,
  also where a compose service's prefix stands before each frame.
- A program's own memory guard refusing the context length asked for, before it allocates, is the KV cache not
  fitting; a guard that passes is no failure.
- A log of a Rust engine built on candle (its crates in the frames; vllm.rs, whose name holds "vllm") is not vLLM's."""

from __future__ import annotations

from tests.support.logs import verdict
from vllm_hpu_mm.logs.doctor import diagnose_lines

_SVC = "llm-svc0  | "
_CANDLE_OOM = [
    f'{_SVC}[00:48:15] ##-  65/78  On Rank 3  Error: DriverError(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")',
    f"{_SVC}   0: candle_core::error::Error::bt",
    f"{_SVC}   1: candle_core::tensor::Tensor::to_dtype",
]


def test_a_weight_quantized_in_place_ran_out_at_load() -> None:
    lines = [*_CANDLE_OOM, f"{_SVC}   2: candle_core::quantized::QTensor::quantize"]
    assert verdict(lines)[0] == "startup"


def test_a_rust_backtrace_without_a_load_frame_names_no_stage() -> None:
    lines = [*_CANDLE_OOM, f"{_SVC}   2: candle_nn::ops::softmax_last_dim"]
    assert verdict(lines)[0] == "unknown"


def test_a_candle_engine_named_vllm_rs_is_no_vllm_runtime() -> None:
    lines = ["vllm-rs-svc0  | 2026-06-24T16:58:26Z  INFO gguf_helper: vocab_size : 154880", *_CANDLE_OOM]
    source = diagnose_lines(lines).source
    assert source.framework == "other"
    assert "candle" in source.name


_GUARD_FIGURES = "ds4:   required model+graph: 195.91 GiB; guard budget: 110.00 GiB (base 512.00 GiB, fraction 0.99)"


def test_a_memory_guard_refusing_the_context_is_the_kv_cache() -> None:
    lines = ["ds4: GLM memory guard refused ctx=1000000 compact_cap=1000000 before GLM graph allocation",
             _GUARD_FIGURES, "ds4:   use a smaller --ctx, tensor parallelism, or SSD streaming"]  # fmt: skip
    assert verdict(lines)[0] == "kv_cache"


def test_a_memory_guard_that_passes_is_no_failure() -> None:
    lines = ["ds4: GLM memory guard passed ctx=32768 before GLM graph allocation", "ds4: server listening on :8000"]
    assert verdict(lines)[0] == "none"

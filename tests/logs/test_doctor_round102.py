"""Classes unseen round 102 showed the doctor missing (issue 34; development data once scored), each pinned on lines
composed after the public logs under tests/data/logs/heldout_round102 (not loaded):

- ONNX Runtime's session wrapping a failure of its initialization ("Exception during initialization: ... Failed to
  allocate memory for requested buffer"): the session is made as the model loads, start-up. A table row whose cell a
  log broke over two lines (Triton's model status table) is one record, its first line the failure's own words.
- The statement an excerpt shows above its error making the KV cache's key or value buffers ("self.value_buffer =
  [torch.empty(...) for _ in range(layer_num)]"): the KV cache's allocation.
- OpenAI's Python client raising a server's 500 answer that carries the failure ("openai.InternalServerError: Error
  code: 500 - {'message': 'DriverError(CUDA_ERROR_OUT_OF_MEMORY, ...)'}"): the server was serving that request.
- A server's word that it received a request ("Received completion request with 21 messages"): serving.
- A program's words that its load is done ("loaded weights in 578.55 ms") after a weight bar an excerpt cut partway:
  the load is no longer under way, so the prompt it then fails on is serving."""

from __future__ import annotations

import pytest

from tests.support.logs import verdict
from vllm_hpu_mm.logs.doctor.phases import announced_stage

_ORT = "Failed to allocate memory for requested buffer of size 268435456"


def test_onnx_runtime_failing_as_its_session_initializes_is_startup() -> None:
    line = f"onnx runtime error 6: Exception during initialization: bfc_arena.cc:368 AllocateRawInternal {_ORT}"
    assert verdict([line]) == ("startup", "message")


def test_a_table_row_broken_over_two_lines_is_read_as_one_record() -> None:
    row = ["| dolly_v1_6b_onnx | 1       | UNAVAILABLE: Internal: onnx runtime error 6: Exception during "
           "initialization: /workspace/onnxruntime/core/framework/bfc_arena.cc:368 void* onnxruntime",
           f"{_ORT} |"]  # fmt: skip
    assert verdict(row) == ("startup", "message")
    assert verdict([row[0] + " |", "| next | 1 | READY |", row[1]])[0] == "unknown"


_TORCH_OOM = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.14 GiB (GPU 0; 79.35 GiB total "
              "capacity; 77.83 GiB already allocated; 711.19 MiB free)")  # fmt: skip


@pytest.mark.parametrize("target", ["self.value_buffer", "self.k_cache", "key_caches[i]"])
def test_a_statement_making_the_kv_cache_s_buffers_is_the_kv_cache(target: str) -> None:
    statement = f'{target} = [torch.empty((size, head_num, head_dim), dtype=dtype, device="cuda") for _ in range(n)]'
    assert verdict([statement, "", _TORCH_OOM]) == ("kv_cache", "message")


def test_a_statement_making_other_tensors_says_nothing_of_the_stage() -> None:
    statement = 'self.weight = [torch.empty((size, dim), device="cuda") for _ in range(n)]'
    assert verdict([statement, "", _TORCH_OOM])[0] == "unknown"


def test_openai_s_client_raising_a_500_that_carries_the_oom_is_serving() -> None:
    line = ("openai.InternalServerError: Error code: 500 - {'message': 'DriverError(CUDA_ERROR_OUT_OF_MEMORY, "
            "\"out of memory\")', 'partial_response': {'id': '2'}}")  # fmt: skip
    assert verdict([line]) == ("runtime", "message")
    loading = "openai.InternalServerError: Error code: 500 - {'error': 'failed to load model: CUDA out of memory'}"
    assert verdict([loading])[0] != "runtime"


@pytest.mark.parametrize("line", ["INFO vllm_rs::server::server: Received completion request with 21 messages",
                                  "received new chat request from 10.0.0.2"])  # fmt: skip
def test_a_server_that_received_a_request_is_serving(line: str) -> None:
    assert announced_stage(line) == "runtime"


def test_a_request_to_load_a_model_is_no_request_answered() -> None:
    assert announced_stage("Received request to load model llama3") is None


_BAR = ("ram used:  1.07 GB, layers.2.feed_forward.w2.weight                   :   8%|######               | 24/292 "
        "[00:00<00:06, 43.43it/s]")  # fmt: skip


def test_a_load_reported_done_after_a_cut_bar_ends_the_load() -> None:
    failure = "Error processing prompt: CUDA Error 2, out of memory"
    assert verdict([_BAR, "loaded weights in 578.55 ms, 1.31 GB loaded at 2.26 GB/s", failure])[0] == "runtime"
    assert verdict([_BAR, failure])[0] == "startup"  # the bar alone: the load still under way

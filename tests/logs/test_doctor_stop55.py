"""Classes stop 55 closed from the development set's remaining misses (issue 34; rounds 48 and 49), each pinned on
lines composed after the public logs (not loaded):

- Quantizing a model's weights (an offline conversion's ``quantize_weights``, bitsandbytes quantizing a parameter as
  it first moves to the device) prepares the model: start-up. Quantizing a layer's input at a request is not.
- llama.cpp's loader listing the model file's keys is the load opening: a failure right after it is start-up.
- A program's bare "Starting..." (a spinner's text, another record run on after it) announces its own start.
- TensorRT-LLM's block manager with no free block left for a request's sequence ran out while serving.
- A program's own words in Chinese that the model did not load, right after the failure, place it at start-up.
- A failure's line that names a step of answering a request, then its failure ("an inference error: ..."), is serving.
- LMDeploy's engine loop, which runs the requests sent to the engine, failing is serving."""

from __future__ import annotations

from tests.support.logs import verdict

_OOM = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB."


def test_a_conversion_that_quantizes_the_weights_is_start_up() -> None:
    lines = ["Quantizing weights:   9%|▉         | 160/1771 [00:00<00:01, 1008.71it/s]",
             "Traceback (most recent call last):",
             '  File "/home/u/quantize.py", line 20, in main', "    model.quantize(examples)",
             '  File "/home/u/auto_fp8/modeling.py", line 113, in quantize',
             "    quantize_weights(self.model, self.quantize_config)",
             '  File "/home/u/auto_fp8/quantize.py", line 56, in per_tensor_quantize',
             "    qweight = (tensor * scale).clamp(min=finfo.min, max=finfo.max)", _OOM]  # fmt: skip
    assert verdict(lines)[0] == "startup"


def test_a_parameter_type_quantized_as_it_moves_to_the_device_is_start_up() -> None:
    lines = ["File ~/env/lib/python3.11/site-packages/bitsandbytes/nn/modules.py:296, in Params4bit._quantize(self, "
             "device)", "--> 296     w_4bit, quant_state = bnb.functional.quantize_4bit(",
             "File ~/env/lib/python3.11/site-packages/bitsandbytes/functional.py:1212, in quantize_4bit(A, absmax)",
             "-> 1212     out = torch.zeros(((n + 1) // mod, 1), dtype=quant_storage, device=A.device)",
             "RuntimeError: CUDA driver error: out of memory"]  # fmt: skip
    assert verdict(lines)[0] == "startup"


def test_quantizing_a_layer_s_input_names_no_weight_and_no_phase() -> None:
    lines = ["Traceback (most recent call last):",
             '  File "/srv/app/layers.py", line 40, in apply',
             "    x_q, scale = quantize_input(x)",
             '  File "/srv/app/quant.py", line 12, in quantize_input',
             "    q = torch.empty_like(x, dtype=torch.float8_e4m3fn)", _OOM]  # fmt: skip
    assert verdict(lines)[0] == "unknown"


def test_a_failure_as_llama_cpp_s_loader_lists_the_file_s_keys_is_start_up() -> None:
    lines = ["llama_model_loader: loaded meta data with 25 key-value pairs and 291 tensors from /models/m.gguf",
             "llama_model_loader: - kv   0:                       general.architecture str              = llama",
             "llama_model_loader: - kv   1:                               general.name str              = m",
             "ROCm error: out of memory"]  # fmt: skip
    assert verdict(lines)[0] == "startup"


def test_a_spinner_s_bare_starting_then_the_failure_is_start_up() -> None:
    lines = ["⠋     9.609 s   Starting...2025-06-18T15:08:32.800393Z  WARN supervisor: server exited with status code 1",
             "", "  ERROR", "", "  CUDA memory allocation error detected:"]  # fmt: skip
    assert verdict(lines)[0] == "startup"


def test_starting_a_generation_is_no_start_of_the_program() -> None:
    lines = ["Starting generation for 12 prompts", "torch.cuda.OutOfMemoryError: CUDA out of memory."]
    assert verdict(lines)[0] == "unknown"


def test_tensorrt_llm_s_kv_cache_with_no_free_block_for_a_sequence_is_serving() -> None:
    lines = ["[TensorRT-LLM][ERROR] Assertion failed: Can't allocate new blocks. No free blocks left. "
             "(/src/cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp:362)",
             "1       0x557282845de2 tensorrt_llm::common::throwRuntimeError(char const*, int) + 100"]  # fmt: skip
    assert verdict(lines)[0] == "runtime"


def test_a_failure_then_the_program_s_word_in_chinese_that_the_model_did_not_load_is_start_up() -> None:
    lines = ["ERROR 2023-05-10 18:15:04,235-1d: CUDA out of memory. Tried to allocate 128.00 MiB (GPU 0; 8.00 GiB total "
             "capacity; 7.25 GiB already allocated; 0 bytes free)",
             'INFO  2023-05-10 18:15:04,236-1d: 模型未成功加载，请重新选择后点击"加载模型"按钮']  # fmt: skip
    assert verdict(lines)[0] == "startup"


def test_a_failure_line_naming_a_request_s_step_then_its_error_is_serving() -> None:
    lines = ['Server returned: {"error":"There was an inference error: CUDA out of memory. Tried to allocate 1024.00 '
             'MiB (GPU 0; 14.75 GiB total capacity)"}']  # fmt: skip
    assert verdict(lines)[0] == "runtime"


def test_a_rehearsal_s_step_failing_is_not_serving() -> None:
    lines = ["Warmup inference failed: CUDA out of memory. Tried to allocate 1.00 GiB"]
    assert verdict(lines)[0] != "runtime"


def test_lmdeploy_s_engine_loop_failing_is_serving() -> None:
    lines = ["2024-05-08 16:16:10,360 - lmdeploy - ERROR - Engine loop failed with error: CUDA out of memory. Tried to "
             "allocate 488.00 MiB.", "Traceback (most recent call last):", "..."]  # fmt: skip
    assert verdict(lines)[0] == "runtime"

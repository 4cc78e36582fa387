"""Classes stop 54 found the doctor leaving undecided in the unseen rounds of stops 52-53 (issue 34; rounds 115, 126,
127 and 139, development data once scored), each pinned on lines composed after the public logs (not loaded):

- IPython's arrow at a frame's current line is drawn as long as the line numbers need ("---->  5 model = ..."): the
  call on it is a frame like any other, so a notebook cell that loads a model is start-up.
- A source line that concatenates new keys or values onto the model's past ones (or indexes the past) shows a sequence
  decoding: a generation was under way.
- A start-up phase line ("Loading <model>...") followed by an elision and then the failure is the failure's phase:
  what the excerpt left out after a loading line is read as the loading's.
- A logger's record from a function named for the request it sends ("safe_request") is serving.

And classes rounds 142-153 showed it missing once they had been scored unseen:

- An excerpt that ends on a refusal of device memory printed without a failure mark ("memory layout cannot be
  allocated ...") shows that failure, unless the line is a warning, a retry or a preemption the program goes on from.
- ggml's Metal cap on the weights' buffer ('data') is the load; MLC-LLM's weights and buffers over the memory left is
  start-up; a prefill refused as "too large for available memory", and Ollama's full KV cache ("could not find a kv
  cache slot"), are serving.
- An error record that the engine's step timed out states the error of the cut traceback after it."""

from __future__ import annotations

from tests.support.logs import verdict


def test_a_notebook_cell_that_loads_a_model_under_ipython_s_long_arrow_is_start_up() -> None:
    lines = ["---------------------------------------------------------------------------",
             "OutOfMemoryError                          Traceback (most recent call last)",
             "Cell In[5], line 5", '      2 model_name = "mistralai/Mistral-7B-Instruct-v0.3"',
             '----> 5 model = inseq.load_model(model_name, "integrated_gradients")',
             "      7 out = model.attribute(", "..."]  # fmt: skip
    assert verdict(lines)[0] == "startup"


def test_the_arrow_s_length_does_not_matter() -> None:
    for arrow in ("-->", "--->", "---->", "------>"):
        lines = ["OutOfMemoryError                          Traceback (most recent call last)",
                 "Cell In[5], line 5", f"{arrow} 5 model = AutoModel.from_pretrained(name)", "..."]  # fmt: skip
        assert verdict(lines)[0] == "startup", arrow


def test_concatenating_onto_the_past_values_is_decoding() -> None:
    lines = ['  File "/opt/conda/lib/python3.9/site-packages/text_generation_server/models/custom_modeling/'
             'bloom_modeling.py", line 306, in compute_attention',
             "    value_layer = torch.cat((past_value, value_layer), dim=1)",
             "torch.cuda.OutOfMemoryError: Allocation on device 0 would exceed allowed memory."]  # fmt: skip
    assert verdict(lines)[0] == "runtime"


def test_a_layer_that_only_returns_its_past_says_nothing() -> None:
    lines = ['  File "/srv/app/modeling.py", line 88, in forward',
             "    hidden_states, attn_weights, past_key_values = self.self_attn(",
             "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"]  # fmt: skip
    assert verdict(lines)[0] == "unknown"


def test_a_loading_line_then_an_elision_then_the_failure_is_start_up() -> None:
    lines = ["Loading vicuna-13b-GPTQ-4bit-128g...", "...",
             "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 34.00 MiB (GPU 0; 4.00 GiB total "
             "capacity; 3.33 GiB already allocated; 0 bytes free; 3.45 GiB reserved in total by PyTorch)"]  # fmt: skip
    assert verdict(lines)[0] == "startup"


def test_a_kv_cache_line_then_an_elision_leaves_the_later_phase_open() -> None:
    lines = ["INFO 12-15 10:18:11 uniproc_executor.py:64] # GPU blocks: 31207", "...",
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 322.00 MiB. GPU 0 has a total capacity "
             "of 79.10 GiB of which 249.88 MiB is free."]  # fmt: skip
    assert verdict(lines)[0] == "unknown"


def test_a_record_from_a_function_named_for_its_request_is_serving() -> None:
    lines = ["  0%|          | 0/5 [00:00<?, ?it/s]2024-04-03 14:51:50.480 | WARNING  | src.llms.base:safe_request:43 "
             "- OutOfMemoryError('CUDA out of memory. Tried to allocate 104.00 MiB (GPU 1; 7.92 GiB total capacity; "
             "7.74 GiB already allocated; 7.69 MiB free)')"]  # fmt: skip
    assert verdict(lines)[0] == "runtime"


def test_a_function_that_opens_with_request_names_what_it_asks_for_not_a_request() -> None:
    lines = ['  File "/srv/app/pool.py", line 12, in request_memory',
             "    buf = torch.empty(n, device='cuda')",
             "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]  # fmt: skip
    assert verdict(lines)[0] == "unknown"
    handled = [lines[0].replace("request_memory", "handle_request"), *lines[1:]]
    assert verdict(handled)[0] == "runtime"


# --- classes from rounds 142-153, scored unseen first (development data since) ------------------------------------


def test_an_excerpt_that_ends_on_a_refusal_of_device_memory_shows_that_failure() -> None:
    assert verdict(["memory layout cannot be allocated with num_gpu = 26"])[0] == "startup"
    going_on = ["memory layout cannot be allocated with num_gpu = 26", "llama runner started in 3.2 seconds"]
    assert verdict(going_on)[0] == "none"  # the program went on past it


def test_a_refusal_in_a_warning_or_a_preemption_is_no_failure_even_at_the_end() -> None:
    line = (" Sequence group 221 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache "
            "space. This can affect the end-to-end performance.")  # fmt: skip
    assert verdict([line])[0] == "none"


def test_metal_s_cap_on_the_weights_buffer_is_the_load() -> None:
    line = "ggml_metal_add_buffer: buffer 'data' size 18300780544 is larger than buffer maximum of 17179869184"
    assert verdict([line])[0] == "startup"


def test_a_prefill_refused_as_too_large_for_the_memory_left_is_serving() -> None:
    lines = ["Error: Prefill context too large for available memory (preflight safety guard, kv_len=66461,",
             " min_chunk=32): predicted peak would require ~25.53 GB (current 25.07 GB + KV 338.09 MB +"]  # fmt: skip
    assert verdict(lines)[0] == "runtime"


def test_ollama_s_full_kv_cache_while_decoding_is_serving() -> None:
    lines = ['[GIN] 2025/05/26 - 18:51:31 | 200 | 16.556787169s |     192.168.4.5 | POST     "/api/generate"',
             "panic: failed to decode batch: could not find a kv cache slot (length: 2560)", "",
             "goroutine 60 [running]:"]  # fmt: skip
    assert verdict(lines)[0] == "runtime"


def test_llama_decode_s_own_return_alone_is_no_memory_failure() -> None:
    assert verdict(["llama_decode: failed to decode, ret = 1"])[0] == "none"


def test_mlc_s_weights_and_buffers_over_the_memory_left_is_start_up() -> None:
    line = ("org.apache.tvm.Base$TVMError: TVMError: Check failed: (output_res.IsOk()) is false: Insufficient GPU "
            "memory error: The available single GPU memory is 4352.000 MB, which is less than the sum of model "
            "weight size (4308.133 MB) and temporary buffer size (356.504 MB).")  # fmt: skip
    assert verdict([line])[0] == "startup"


def test_an_error_record_that_the_step_timed_out_is_the_cut_traceback_s_error() -> None:
    lines = ["ERROR 06-13 02:36:52 async_llm_engine.py:532] Engine iteration timed out. This should never happen!",
             "ERROR 06-13 02:36:52 async_llm_engine.py:52] Engine background task failed",
             "ERROR 06-13 02:36:52 async_llm_engine.py:52] Traceback (most recent call last):",
             'ERROR 06-13 02:36:52 async_llm_engine.py:52]   File "/usr/local/lib/python3.10/dist-packages/vllm/'
             'engine/async_llm_engine.py", line 503, in engine_step',
             "ERROR 06-13 02:36:52 async_llm_engine.py:52]     outputs = await self.engine.step_async()"]  # fmt: skip
    assert verdict(lines)[0] == "none"

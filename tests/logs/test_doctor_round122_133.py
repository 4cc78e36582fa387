"""Classes the doctor missed on rounds that are development data from stop 53 on (issue 34), each pinned on lines
composed after the public logs under tests/data/logs (not loaded):

- SGLang's radix cache that could not take token slots from the KV pool for a request's prefix ("Failed to allocate
  token prealloc indices", raised under the scheduler's ``get_new_batch_prefill``): the pool exhausted while serving.
- LocalAI's report that the backend it started for a request's model refused the load ("could not load model (no
  success): ..."): a failed model load, start-up's where no later phase line came first, also where the log names no
  engine.
- A traceback a terminal wrapped after "File", each record opening with the logger's level word, keeps its frames.
- A KV cache class's constructor in its cache module (ExLlamaV2's ``cache.py`` ``__init__``) allocates the cache; a
  model's or a parameter's own ``to`` moves weights onto the device at start-up, where a processor's ``to`` (a
  request's inputs) does not."""

from __future__ import annotations

from tests.support.logs import verdict


def test_sglang_s_prefix_lookup_finding_no_token_slots_is_the_kv_pool_exhausted_while_serving() -> None:
    lines = ["[2025-06-26 02:16:20 TP0] Decode batch. #running-req: 1, #token: 2102, token usage: 0.51",
             "[2025-06-26 02:16:20 TP0] Scheduler hit an exception: Traceback (most recent call last):",
             '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1529, in '
             "get_new_batch_prefill",
             "    req.init_next_round_input(",
             '  File "/sgl-workspace/sglang/python/sglang/srt/mem_cache/radix_cache.py", line 254, in '
             "match_prefix_lmcache",
             '    raise ValueError("Failed to allocate token prealloc indices")',
             "ValueError: Failed to allocate token prealloc indices"]  # fmt: skip
    assert verdict(lines)[0] == "runtime"


_LOAD_REFUSED = ('{"error":{"code":500,"message":"could not load model (no success): Unexpected err=OutOfMemoryError('
                 "'CUDA out of memory. Tried to allocate 46.00 MiB. GPU 0 has a total capacity of 5.62 GiB of which "
                 "55.50 MiB is free.')\",\"type\":\"\"}}")  # fmt: skip


def test_localai_s_refused_load_is_start_up_in_a_log_that_names_no_engine() -> None:
    assert verdict(["curl http://localhost:8080/embeddings -X POST", "", _LOAD_REFUSED])[0] == "startup"


def test_the_same_out_of_memory_error_without_the_load_s_words_is_left_unknown() -> None:
    plain = _LOAD_REFUSED.replace("could not load model (no success): ", "")
    assert verdict(["curl http://localhost:8080/embeddings -X POST", "", plain])[0] == "unknown"


def test_a_traceback_wrapped_at_its_words_inside_a_compose_log_keeps_its_frames() -> None:
    # rich's console wrapped each frame after "File" and each record starts with the logger's level word (TabbyAPI)
    p = "tabbyapi-1  | 2025-03-14 11:05:29.634 ERROR:"
    lines = [f"{p}      File",
             'tabbyapi-1  | "/usr/local/lib/python3.10/dist-packages/exllamav2/linear.py", line 138, in load',
             f"{p}        device_context =",
             "tabbyapi-1  | self.model.get_device_context(self.device_idx)",
             f"{p}      File",
             'tabbyapi-1  | "/usr/local/lib/python3.10/dist-packages/exllamav2/device.py", line 81, in',
             "tabbyapi-1  | prepare",
             f"{p}        self.scratch =",
             "tabbyapi-1  | torch.empty((self.scratch_bytes // 2,), dtype = torch.half, device =",
             "tabbyapi-1  | _torch_device(self.device_idx))",
             f"{p}    torch.OutOfMemoryError: CUDA out of memory.",
             "tabbyapi-1  | Tried to allocate 260.00 MiB. GPU 1 has a total capacity of 23.53 GiB"]  # fmt: skip
    assert verdict(lines)[0] == "startup"


def _oom_under(*frames: tuple[str, str, str]) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for path, func, source in frames:
        lines += [f'  File "{path}", line 10, in {func}', f"    {source}"]
    return [*lines, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB."]


def test_a_kv_cache_class_s_constructor_allocates_the_kv_cache_after_the_model_loaded() -> None:
    lines = [" -- Loaded model in 9.7356 seconds", " -- Loading tokenizer...",
             *_oom_under(("/app/test_inference.py", "<module>", "cache = ExLlamaV2Cache(model)"),
                         ("/app/exllamav2/cache.py", "__init__", "self.create_state_tensors(copy_from, lazy)"),
                         ("/app/exllamav2/cache.py", "create_state_tensors",
                          "p_key_states = torch.zeros(self.shape_wk, dtype = self.dtype, device = dev)"))]  # fmt: skip
    assert verdict(lines)[0] == "kv_cache"


def test_a_parameter_moved_to_the_device_by_its_own_to_is_start_up() -> None:
    lines = _oom_under(("/venv/lib/python3.11/site-packages/ipex_llm/transformers/low_bit_linear.py", "to",
                        "new_param = FP4Params(super().to(device=device,"))  # fmt: skip
    assert verdict(lines)[0] == "startup"


def test_a_request_s_inputs_moved_by_a_processor_s_to_are_not_start_up() -> None:
    lines = _oom_under(("/venv/lib/python3.11/site-packages/transformers/tokenization_utils_base.py", "to",
                        "self.data = {k: v.to(device=device) for k, v in self.data.items()}"))  # fmt: skip
    assert verdict(lines)[0] != "startup"

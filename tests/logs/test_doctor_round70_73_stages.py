"""Stage readings after held-out rounds 70-73 (issue 34), each a class any program's log can show, pinned on lines
composed after the public logs under tests/data/logs/heldout_round71/ and heldout_round72/:

- A failure's line that says it failed processing an input *for* or *on* a part of the model ("Error processing tensor
  for shard Shard(...)": exo's node running its shard of the layers on a tensor) came while the program worked over its
  inputs: ``runtime``. Only the work's object makes it a build ("Error processing weights for layer 3").
- A failure's line that says the memory it lacked was for the KV cache ("Not enough memory for KV cache, try reducing
  --num-pages": an engine whose cache is a number of pages) is the KV cache's, in any engine: ``kv_cache``."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines
from vllm_hpu_mm.logs.doctor.phases import failed_working, short_for_stage

# --- work on an input, for a part of the model ---------------------------------------------------------------------


def test_an_oom_processing_a_tensor_for_a_shard_is_runtime() -> None:
    lines = [
        "loaded weights in 2500.00 ms, 6.00 GB loaded at 2.40 GB/s",
        "Error processing tensor for shard Shard(model_id='org/Some-Model-7B', start_layer=0, end_layer=15, "
        "n_layers=32): CUDA Error 2, out of memory",
    ]
    d = diagnose_lines(lines)
    assert (d.oom, d.stage) == (True, "runtime")


def test_only_the_works_object_makes_it_a_build() -> None:
    assert failed_working("Error processing request for model llama-3: out of memory")
    assert not failed_working("Error processing weights for layer 3: out of memory")
    assert not failed_working("Error processing tensor for model loading: out of memory")  # a load, wherever named


# --- memory short for the KV cache ---------------------------------------------------------------------------------


def test_not_enough_memory_for_a_paged_kv_cache_is_kv_cache() -> None:
    d = diagnose_lines(["AssertionError: Not enough memory for KV cache, try reducing --num-pages"])
    assert (d.oom, d.stage) == (True, "kv_cache")


def test_a_full_cache_or_a_failed_store_is_no_shortage_for_the_kv_cache() -> None:
    assert short_for_stage("failed to find free space in the KV cache, retrying with smaller n_batch") is None
    assert short_for_stage("WARNING: Failed to allocate memory for the KV cache.") is None
    assert short_for_stage("RuntimeError: Insufficient memory left for the KV cache") == "kv_cache"


def test_work_on_an_input_under_a_weight_bar_partway_is_the_load() -> None:
    # exo loads a shard's weights on its first tensor: a failure under tinygrad's bar at 85% is the load's
    bar = "ram used: 11.98 GB, layers.27.feed_forward.w2.weight      :  85%|████▌ | 249/292 [00:05<00:00]"
    d = diagnose_lines([bar, "Error processing tensor for shard Shard(model_id='m', start_layer=0, end_layer=31, "
                             "n_layers=32): CUDA Error 2, out of memory"])  # fmt: skip
    assert (d.oom, d.stage) == (True, "startup")


def test_a_date_on_the_phase_line_is_no_count_partway() -> None:
    # "11/30" of a date is no bar at 11 of 30: the load line opened the phase, the failure names a request's work
    date = "11/30/2026 10:00:01 Loading weights for org/Some-Model-7B"
    lines = [date, "loaded weights in 2500.00 ms", "Error processing tensor for shard Shard(model_id='m', "
             "start_layer=0, end_layer=31, n_layers=32): CUDA Error 2, out of memory"]  # fmt: skip
    assert diagnose_lines(lines).stage == "runtime"
    assert diagnose_lines([date, lines[2]]).stage == diagnose_lines(["Loading weights for org/Some-Model-7B",
                                                                     lines[2]]).stage  # fmt: skip

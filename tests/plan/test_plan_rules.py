"""The memory planner: one test per rule, the guide's worked example to the byte, and fixes that really fix."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.models.catalog import CATALOG
from vllm_hpu_mm.models.dims import vision_parameters
from vllm_hpu_mm.plan import fixes
from vllm_hpu_mm.plan import rules as planner
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.inputs import PlanInputs, build
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.plan.vision_cost import PoolMode, capture_bytes
from vllm_hpu_mm.runtimes import vllm_fork
from vllm_hpu_mm.runtimes.base import Runtime
from vllm_hpu_mm.runtimes.registry import model_for

GB = 10**9
GIB = 2**30
DEFAULT_BUCKETS = (1600, 3136, 4096, 6400, 7744, 9216, 12544)


def inputs(**changes: object) -> PlanInputs:
    base = PlanInputs(
        model=CATALOG["Qwen/Qwen2.5-VL-7B-Instruct"],
        device="gaudi2",
        backend="hpu",
        total_bytes=96 * GB,
        free_before_load_bytes=96 * GB,
        free_after_load_bytes=100 * GB,
        dtype_size=2,
        tensor_parallel_size=1,
        gpu_memory_utilization=1.0,
        max_model_len=32768,
        max_num_seqs=64,
        max_num_batched_tokens=8192,
        block_size=128,
        buckets=DEFAULT_BUCKETS,
        graph_reserved_mem=0.1,
        graph_prompt_ratio=0.2,
        graph_multimodal_prompt_ratio=0.3,
        pool_mode=PoolMode.PRIVATE,
        runtime=model_for(Runtime.VLLM_FORK),  # the guide's runtime: it profiles before sizing the KV cache
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_guides_worked_example_reproduces_exactly() -> None:
    # 100 GB usable, VLLM_GRAPH_RESERVED_MEM=0.1, PROMPT_RATIO=0.2, MULTIMODAL_PROMPT_RATIO=0.3 (the Gaudi guide).
    s = planner.split_memory(inputs(), 100 * GB)
    assert s.usable_bytes == 100 * GB
    assert s.graph_bytes == 10 * GB
    assert s.kv_cache_bytes == 90 * GB
    assert s.prefill_graph_bytes == 2 * GB
    assert s.prefill_text_graph_bytes == 600_000_000
    assert s.prefill_vision_graph_bytes == 1_400_000_000
    assert s.decode_graph_bytes == 8 * GB


def test_usable_is_free_times_utilization_and_never_negative() -> None:
    assert planner.usable_bytes(80 * GB, 0.9) == 72 * GB
    assert planner.usable_bytes(-5 * GB, 0.9) == 0


def test_graph_memory_is_usable_times_reserved_and_zero_without_graphs() -> None:
    assert planner.graph_bytes(50 * GB, 0.2, PoolMode.PRIVATE) == 10 * GB
    assert planner.graph_bytes(50 * GB, 0.2, PoolMode.NONE) == 0


def test_kv_cache_gets_the_rest_unless_its_size_is_given() -> None:
    assert planner.kv_cache_bytes(50 * GB, 5 * GB, None) == 45 * GB
    assert planner.kv_cache_bytes(50 * GB, 5 * GB, 123) == 123


def test_kv_blocks_and_concurrent_sequences() -> None:
    per_token = 57344  # 7B, bf16, TP 1
    blocks = planner.kv_blocks(10 * GIB, per_token, 128)
    assert blocks == 10 * GIB // (per_token * 128)
    assert planner.max_concurrent_seqs(blocks, 128, 32768) == blocks // 256
    assert planner.max_concurrent_seqs(255, 128, 32768) == 0


def test_prefill_gets_the_prompt_ratio_and_decode_the_rest() -> None:
    assert planner.prefill_decode_split(1000, 0.3) == (300, 700)


def test_text_gets_the_multimodal_ratio_and_vision_the_rest_as_in_the_guide() -> None:
    # The older fork's code did the opposite (vision = prefill x ratio); the guide's reading is text = prefill x ratio.
    text, vision = planner.text_vision_split(1000, 0.3)
    assert (text, vision) == (300, 700)


def test_free_after_load_is_stated_or_the_runtimes_own_from_weights_and_profiling() -> None:
    assert planner.free_after_load(inputs()) == 100 * GB
    i = inputs(free_after_load_bytes=None, runtime=model_for(Runtime.VLLM_FORK))
    # the fork's residue: its profiling pass at the engine's sizes (one multimodal sequence of max_model_len)
    fork = vllm_fork.profile_residue_bytes(planner.profile_costs(i))
    assert fork > vllm_fork.PROFILE_RESIDUE_BYTES  # a 7B over a whole max_model_len holds more than 8B's 4 x 1024
    assert planner.free_after_load(i) == i.free_before_load_bytes - planner.model_weight_bytes(i) - fork


def test_profile_peak_grows_with_the_largest_bucket_and_batched_tokens() -> None:
    small = planner.profile_peak_bytes(inputs(buckets=(1600,)))
    large = planner.profile_peak_bytes(inputs(buckets=(1600, 12544)))
    assert large > small
    assert planner.profile_peak_bytes(inputs(max_num_batched_tokens=16384)) > planner.profile_peak_bytes(inputs())


def test_vision_buckets_captured_ascending_until_the_pool_is_exhausted() -> None:
    i = inputs()
    pool = capture_bytes(DEFAULT_BUCKETS[:3], PoolMode.PRIVATE)
    captured, skipped = planner.vision_fit(i, pool)
    assert captured == DEFAULT_BUCKETS[:3]
    assert skipped == DEFAULT_BUCKETS[3:]
    assert planner.vision_fit(i, pool - 1) == (DEFAULT_BUCKETS[:2], DEFAULT_BUCKETS[2:])


def test_shared_pool_captures_more_than_private_pools_in_the_same_memory() -> None:
    pool = 1_400_000_000  # the guide example's vision pool
    private, _ = planner.vision_fit(inputs(pool_mode=PoolMode.PRIVATE), pool)
    shared, skipped = planner.vision_fit(inputs(pool_mode=PoolMode.SHARED), pool)
    assert len(shared) > len(private)
    assert shared == DEFAULT_BUCKETS
    assert skipped == ()


def test_text_graph_counts_grow_with_their_pools() -> None:
    i = inputs()
    small = planner.text_graph_fit(i, planner.split_memory(i, 20 * GB), 1000)
    large = planner.text_graph_fit(i, planner.split_memory(i, 400 * GB), 1000)
    assert small.prefill_fit < large.prefill_fit <= len(large.prefill) == len(small.prefill)
    assert small.decode_fit < large.decode_fit <= len(large.decode) == len(small.decode)
    none = planner.text_graph_fit(inputs(pool_mode=PoolMode.NONE), planner.split_memory(i, 20 * GB), 10)
    assert (none.prefill, none.decode) == ((), ())


def _reserved_in(fix: str) -> float:
    m = re.search(r"VLLM_GRAPH_RESERVED_MEM to (\d\.\d\d)", fix)
    assert m, fix
    return float(m.group(1))


def test_vision_fix_is_the_smallest_reserved_share_that_captures_every_bucket() -> None:
    p = plan(inputs())
    assert p.vision_buckets_skipped
    warning = next(f for f in p.findings if f.code == "vision_buckets_skipped")
    r = _reserved_in(warning.fix.text)
    assert (warning.fix.setting, warning.fix.value) == ("VLLM_GRAPH_RESERVED_MEM", r)  # what the OOM doctor reads
    assert "12544" in warning.fix.text
    assert plan(inputs(graph_reserved_mem=r)).vision_buckets_skipped == ()
    assert plan(inputs(graph_reserved_mem=round(r - 0.01, 2))).vision_buckets_skipped != ()


def test_kv_too_small_for_one_sequence_is_an_error_with_working_fixes() -> None:
    i = inputs(free_after_load_bytes=7_600_000_000, max_model_len=128000)
    p = plan(i)
    assert not p.fits
    err = next(w for w in p.findings if w.severity == "error")
    assert err.stage == "kv_cache"
    length = int(re.search(r"--max-model-len to (\d+)", err.fix.text).group(1))  # type: ignore[union-attr]
    assert plan(dataclasses.replace(i, max_model_len=length)).max_concurrent_seqs >= 1
    assert plan(dataclasses.replace(i, max_model_len=length + i.block_size)).max_concurrent_seqs == 0
    reserved = float(re.search(r"VLLM_GRAPH_RESERVED_MEM to (\d\.\d\d)", err.fix.text).group(1))  # type: ignore[union-attr]
    assert plan(dataclasses.replace(i, graph_reserved_mem=reserved)).max_concurrent_seqs >= 1


def test_weights_above_the_device_are_a_startup_error_fixed_by_tensor_parallelism() -> None:
    settings = load({})
    i = build(SizingArgs(model="Qwen/Qwen2.5-VL-72B-Instruct", device="h100"), settings)
    p = plan(i)
    assert p.verdict == "does_not_fit"
    err = p.findings[0]
    assert err.stage == "startup"
    tp = int(re.search(r"--tensor-parallel-size to (\d+)", err.fix.text).group(1))  # type: ignore[union-attr]
    assert tp == 2
    assert plan(dataclasses.replace(i, tensor_parallel_size=tp)).free_after_load_bytes > 0


def test_the_default_gaudi2_plan_fits_and_names_its_pruned_buckets() -> None:
    p = plan(build(SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct"), load({})))
    assert p.fits
    assert p.inputs.device == "gaudi2"
    assert p.inputs.pool_mode is PoolMode.PRIVATE
    assert set(p.vision_buckets_captured) | set(p.vision_buckets_skipped) == set(DEFAULT_BUCKETS)
    assert p.vision_capture_bytes <= p.split.prefill_vision_graph_bytes


@pytest.mark.parametrize("ratio", [0.0, 0.5, 1.0])
def test_the_split_always_adds_up(ratio: float) -> None:
    i = inputs(graph_reserved_mem=ratio, graph_prompt_ratio=ratio, graph_multimodal_prompt_ratio=1 - ratio)
    s = planner.split_memory(i, 77_777_777_777)
    assert s.graph_bytes + s.kv_cache_bytes == s.usable_bytes
    assert s.prefill_graph_bytes + s.decode_graph_bytes == s.graph_bytes
    assert s.prefill_text_graph_bytes + s.prefill_vision_graph_bytes == s.prefill_graph_bytes


def test_fewer_full_length_sequences_than_max_num_seqs_is_info_not_a_warning() -> None:
    p = plan(inputs(pool_mode=PoolMode.NONE, free_after_load_bytes=20 * GB, max_num_seqs=256))
    assert [(w.severity, w.stage) for w in p.findings] == [("info", "kv_cache"), ("info", "runtime")]
    assert p.verdict == "fits"
    assert "lower --max-num-seqs to" in p.findings[0].fix.text


def test_bucket_cap_shrinks_vllms_encoder_cache_and_the_fix_restores_stocks_size() -> None:
    # vLLM sizes its encoder cache as max(max_num_batched_tokens, largest tokens per image): 12544 patches under the
    # default buckets are 3136 tokens, while stock Qwen2.5-VL allows 12845056 px = 16384 tokens.
    assert planner.encoder_cache_tokens(inputs(max_num_batched_tokens=8192)) == (8192, 16384)
    (info,) = [w for w in plan(inputs(max_num_batched_tokens=8192)).findings if w.stage == "runtime"]
    assert info.severity == "info"
    assert info.fix.text == "raise --max-num-batched-tokens to 16384 if your traffic repeats images"
    assert not [w for w in plan(inputs(max_num_batched_tokens=16384)).findings if w.stage == "runtime"]
    assert planner.encoder_cache_tokens(inputs(buckets=None)) == (16384, 16384)


ratio = st.floats(min_value=0.0, max_value=1.0)


@settings(max_examples=60, deadline=None)
@given(
    free=st.integers(min_value=0, max_value=200 * GB),
    util=st.floats(min_value=0.01, max_value=1.0),
    reserved=ratio,
    prompt=ratio,
    mm=ratio,
    mode=st.sampled_from([PoolMode.PRIVATE, PoolMode.SHARED]),
)
def test_any_plan_adds_up_and_captures_an_ascending_prefix_that_fits(
    free: int, util: float, reserved: float, prompt: float, mm: float, mode: PoolMode
) -> None:
    i = inputs(free_after_load_bytes=free, gpu_memory_utilization=util, graph_reserved_mem=reserved,
               graph_prompt_ratio=prompt, graph_multimodal_prompt_ratio=mm, pool_mode=mode)  # fmt: skip
    p = plan(i)
    s = p.split
    assert s.graph_bytes + s.kv_cache_bytes == s.usable_bytes
    assert s.prefill_text_graph_bytes + s.prefill_vision_graph_bytes + s.decode_graph_bytes == s.graph_bytes
    assert p.vision_buckets_captured + p.vision_buckets_skipped == DEFAULT_BUCKETS
    assert p.vision_capture_bytes <= s.prefill_vision_graph_bytes


def test_per_card_weights_split_the_language_model_over_tp_x_pp_and_the_vision_tower_over_tp() -> None:
    one = planner.model_weight_bytes(inputs())
    tp2 = planner.model_weight_bytes(inputs(tensor_parallel_size=2))
    pp2 = planner.model_weight_bytes(inputs(pipeline_parallel_size=2))
    assert tp2 == pytest.approx(one / 2, abs=2)
    # The first stage keeps the whole vision tower: more than half of everything.
    vision = vision_parameters(CATALOG["Qwen/Qwen2.5-VL-7B-Instruct"].vision) * 2
    assert pp2 == pytest.approx((one - vision) / 2 + vision, abs=2)
    assert planner.model_weight_bytes(inputs(tensor_parallel_size=2, pipeline_parallel_size=2)) < pp2


def test_kv_per_token_per_card_splits_layers_over_pipeline_stages() -> None:
    whole = planner.kv_per_token(inputs())
    assert planner.kv_per_token(inputs(pipeline_parallel_size=2)) == whole // 2  # 28 layers: 14 per stage
    assert planner.kv_per_token(inputs(pipeline_parallel_size=3)) == whole * 10 // 28  # ceil(28 / 3) = 10


def test_data_parallel_replicas_plan_the_same_card() -> None:
    assert plan(inputs(data_parallel_size=4)).split == plan(inputs()).split


def test_the_tp_fix_only_proposes_sizes_that_divide_the_attention_heads() -> None:
    # 28 heads (7B): 2 and 4 divide them, 8 does not; a 20 GB card needs more than 2.
    i = inputs(free_after_load_bytes=None, free_before_load_bytes=20 * GB, max_model_len=4096)
    fix = fixes.tp_fix(i)
    tp = int(re.search(r"--tensor-parallel-size to (\d+)", fix.text).group(1))  # type: ignore[union-attr]
    assert 28 % tp == 0


def test_vllm_gaudi_runs_no_profiling_forward_so_its_free_memory_is_after_weights_only() -> None:
    i = inputs(runtime=model_for(Runtime.VLLM_GAUDI), free_after_load_bytes=None)
    assert plan(i).profile_bytes == 0
    assert plan(i).free_after_load_bytes == i.free_before_load_bytes - planner.model_weight_bytes(i)

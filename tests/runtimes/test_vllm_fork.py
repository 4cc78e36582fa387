"""The fork's text buckets (vllm_hpu_mm.runtimes.vllm_fork, newest line) and how the plan costs them."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.models.catalog import CATALOG
from vllm_hpu_mm.plan import text_cost
from vllm_hpu_mm.runtimes.vllm_fork import VllmFork

SHAPE = EngineShape(max_model_len=32768, max_num_seqs=64, max_num_batched_tokens=4096, block_size=128,
                    num_kv_blocks=500)  # fmt: skip


def decode_grid(shape: EngineShape) -> tuple[tuple[int, int], ...]:
    return VllmFork().text_shapes(shape).decode


def test_the_buckets_respect_the_token_budget_and_the_kv_blocks() -> None:
    prefill = VllmFork().text_shapes(SHAPE).prefill
    assert prefill
    assert all(b * q <= 4096 and ctx == 0 for b, q, ctx in prefill)
    decode = decode_grid(SHAPE)
    assert decode
    assert all(blocks <= 500 for _, blocks in decode)
    assert {b for b, _ in decode} == {1, 2, 4, 8, 16, 32, 64}  # 1.22's exponential batch range at 64 sequences


def test_costs_grow_with_the_shape_and_count_fitting_fills_a_pool_smallest_first() -> None:
    m = CATALOG["Qwen/Qwen2.5-VL-7B-Instruct"]
    costs = sorted(
        text_cost.decode_cost(m, dtype_size=2, tp=1, block_size=128, batch=b, blocks=n) for b, n in decode_grid(SHAPE)
    )
    buckets = [text_cost.TextBucket(1, 1, c) for c in costs]
    assert text_cost.count_fitting(buckets, 0) == 0
    assert text_cost.count_fitting(buckets, sum(costs)) == len(buckets)
    assert text_cost.count_fitting(buckets, sum(costs[:3])) == 3


def test_the_forks_profiling_pass_is_shaped_by_the_engine_sizes_and_its_residue_follows() -> None:
    from vllm_hpu_mm.engine import EngineShape
    from vllm_hpu_mm.runtimes.base import ProfileCosts
    from vllm_hpu_mm.runtimes.vllm_fork import PROFILE_RESIDUE_BYTES, profile_pass, profile_residue_bytes

    def engine(max_model_len: int, max_num_seqs: int, max_num_batched_tokens: int) -> EngineShape:
        return EngineShape(max_model_len=max_model_len, max_num_seqs=max_num_seqs,
                           max_num_batched_tokens=max_num_batched_tokens, block_size=128, num_kv_blocks=1)  # fmt: skip

    text = ProfileCosts(90112, 4 * 128256, 0, engine(max_model_len=1024, max_num_seqs=256, max_num_batched_tokens=4096))
    assert profile_pass(text) == (4, 1024)
    assert profile_residue_bytes(text) == 4 * 1024 * 90112 + 4 * 4 * 128256
    long = ProfileCosts(
        90112, 4 * 128256, 0, engine(max_model_len=32768, max_num_seqs=256, max_num_batched_tokens=8192)
    )
    # 1.22 profiles its longest generated prompt bucket: the exponential one within the 8192-token budget
    assert profile_pass(long) == (1, 5888)
    assert profile_pass(ProfileCosts(90112, 4, 0, engine(131072, 256, 131072))) == (1, 131072)
    vision = ProfileCosts(90112, 4, 50 * 2**20, engine(1024, 256, 4096), multimodal=True)
    assert profile_pass(vision) == (1, 1024)
    assert profile_residue_bytes(vision) == 1024 * 90112 + 4 + 50 * 2**20
    assert profile_residue_bytes(None) == PROFILE_RESIDUE_BYTES


@pytest.mark.parametrize(
    ("version", "engine_sizes", "multimodal", "expected"),
    [
        ("0.5.3.post1+gaudi117", (131072, 4, 131072), False, (4, 1024)),  # bs and seq config maxima
        ("0.5.3.post1+gaudi118", (131072, 4, 131072), False, (4, 1024)),  # ... each seq within tokens // bs
        ("0.5.3.post1+gaudi118", (131072, 4, 2048), False, (4, 512)),
        ("0.6.4.post2", (131072, 4, 131072), False, (4, 1024)),  # 1.19: seq config max 1024, batch from tokens
        ("0.8.5.post1", (131072, 4, 131072), False, (1, 131072)),  # 1.21: seq config max = max_model_len
        ("0.8.5.post1", (1024, 256, 4096), True, (4, 1024)),  # batch 1 for a multimodal model only from 1.22
        ("0.9.0.1", (1024, 256, 4096), True, (1, 1024)),
    ],
)
def test_each_fork_line_profiles_its_own_largest_prompt_shape(
    version: str, engine_sizes: tuple[int, int, int], multimodal: bool, expected: tuple[int, int]
) -> None:
    from vllm_hpu_mm.engine import EngineShape
    from vllm_hpu_mm.runtimes.base import ProfileCosts
    from vllm_hpu_mm.runtimes.vllm_fork import profile_pass, profile_residue_bytes
    from vllm_hpu_mm.runtimes.vllm_fork.bucketing import config_from_env
    from vllm_hpu_mm.runtimes.vllm_fork.releases import release_for

    mml, seqs, tokens = engine_sizes
    shape = EngineShape(max_model_len=mml, max_num_seqs=seqs, max_num_batched_tokens=tokens, block_size=128,
                        num_kv_blocks=1)  # fmt: skip
    costs = ProfileCosts(90112, 4 * 128256, 0, shape, multimodal=multimodal)
    cfg = config_from_env({}, release_for(version))
    assert profile_pass(costs, cfg) == expected
    batch, length = expected
    assert profile_residue_bytes(costs, cfg) == batch * length * 90112 + batch * 4 * 128256

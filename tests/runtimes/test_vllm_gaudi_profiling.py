"""vllm-gaudi's profiling pass per release line: only v0.15.1rc1 and v0.16.0rc0 run one before reading free memory,
one chunk of the token budget at long contexts; its residue comes off the KV cache of those lines alone."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.runtimes.base import MemoryInputs, ProfileCosts
from vllm_hpu_mm.runtimes.vllm_gaudi import model_from_env, profile_pass
from vllm_hpu_mm.runtimes.vllm_gaudi.releases import release_for
from vllm_hpu_mm.values import GIB


def costs(max_model_len: int, max_num_seqs: int, tokens: int, multimodal: bool = False) -> ProfileCosts:
    shape = EngineShape(max_model_len=max_model_len, max_num_seqs=max_num_seqs, max_num_batched_tokens=tokens,
                        block_size=128, num_kv_blocks=1)  # fmt: skip
    return ProfileCosts(90112, 4 * 128256, 3 * 2**20, shape, multimodal=multimodal)


@pytest.mark.parametrize(
    ("version", "sizes", "multimodal", "expected"),
    [
        ("0.16.0rc0", (131072, 256, 8192), False, (1, 8192)),  # one chunk of the budget, never the whole sequence
        ("0.15.1rc1", (2048, 256, 8192), False, (4, 2048)),  # below the budget: whole sequences, as many as fit
        ("0.15.1rc1", (2048, 256, 8192), True, (1, 2048)),
        ("0.16.0rc1", (131072, 256, 8192), False, None),  # initialize_only=True
        ("0.13.0", (131072, 256, 8192), False, None),  # profile_run returns at once
    ],
)
def test_only_two_lines_profile_and_at_their_own_shape(
    version: str, sizes: tuple[int, int, int], multimodal: bool, expected: tuple[int, int] | None
) -> None:
    assert profile_pass(costs(*sizes, multimodal=multimodal), release_for(version)) == expected


def test_the_residue_comes_off_the_kv_cache_only_where_a_pass_runs() -> None:
    p = costs(131072, 256, 8192)
    m = MemoryInputs(total_bytes=96 * GIB, free_before_load_bytes=96 * GIB, weight_bytes=15 * GIB,
                     activation_peak_bytes=0, gpu_memory_utilization=0.9, graph_reserved_mem=0.1,
                     graph_estimate_bytes=0, kv_block_bytes=16 * 2**20, graphs=True, profile=p)  # fmt: skip
    profiling = model_from_env({}, version="0.16.0rc0").memory(m)
    none = model_from_env({}, version="0.16.0rc1").memory(m)
    assert profiling.profile_bytes == 8192 * 90112 + 4 * 128256
    assert none.profile_bytes == 0
    assert none.free_after_load_bytes - profiling.free_after_load_bytes == profiling.profile_bytes
    assert "batch 1 x 8192 tokens" in profiling.formula
    assert "no profiling pass" in none.formula

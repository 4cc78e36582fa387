"""The CUDA-graph executor's host side: index precomputation and the capturable forward, checked on CPU.

The capturable forward (:func:`tower_forward`) must be transformers' Qwen2.5-VL vision forward on host-built
indices; on CPU it runs with the per-segment SDPA reference and with the dense masked SDPA that the executor can
capture. Graph capture itself needs a CUDA device (checked on the H100 by performance/vision_encoder_h100.py).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import vision_utils
from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel

from benchmarks.research import cuda_graphs as cuda
from vllm_hpu_mm.errors import BackendError

GEO = cuda.TowerGeometry(spatial_merge_size=2, window_size=112, patch_size=14, fullatt_block_indexes=(1, 3))
PATCH_DIM = 3 * 2 * 14 * 14

# Aligned images, unaligned ones (partial windows), a video-like t=2 entry and a runner-style dummy row [1, 8, n].
GRIDS = [
    [[1, 8, 8]],
    [[1, 16, 24], [1, 8, 16]],
    [[1, 12, 6], [1, 4, 4], [1, 8, 16]],
    [[2, 6, 10]],
    [[1, 10, 30], [1, 8, 24]],
]


@pytest.fixture(scope="module")
def tower() -> Any:
    torch.manual_seed(0)
    cfg = Qwen2_5_VLVisionConfig(
        depth=4,
        hidden_size=64,
        num_heads=4,
        intermediate_size=90,
        out_hidden_size=48,
        fullatt_block_indexes=[1, 3],
        window_size=112,
        patch_size=14,
        spatial_merge_size=2,
        temporal_patch_size=2,
        in_channels=3,
        hidden_act="silu",
    )
    return Qwen2_5_VisionTransformerPretrainedModel._from_config(cfg, attn_implementation="sdpa").eval()  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("grid", GRIDS)
def test_layout_matches_transformers_helpers(grid: list[list[int]]) -> None:
    g = torch.tensor(grid)
    layout = cuda.pass_layout(g, GEO)
    window_index, cu_window = vision_utils.get_vision_window_index(g, 2, 112, 14)
    cu_full, _ = vision_utils.get_vision_attention_seqlens(g, Qwen2_5_VLVisionConfig())
    assert torch.equal(layout.position_ids, vision_utils.get_vision_position_ids(g, 2))
    assert torch.equal(layout.window_index, window_index)
    assert torch.equal(layout.cu_window_seqlens, cu_window)
    assert torch.equal(layout.cu_seqlens, cu_full)
    assert torch.equal(layout.window_index[layout.reverse_index], torch.arange(layout.patches // 4))
    assert layout.patches == int(g.prod(-1).sum())


def test_aligned_images_have_only_full_windows() -> None:
    layout = cuda.pass_layout([[1, 16, 24], [1, 8, 40]], GEO)
    assert layout.max_window_seqlen == GEO.max_window_patches == 64
    assert layout.window_segments == layout.patches // 64
    assert layout.max_seqlen == 16 * 24


def test_pad_segments_appends_zero_length_segments() -> None:
    cu = torch.tensor([0, 64, 192], dtype=torch.int32)
    padded = cuda.pad_segments(cu, 5)
    assert padded.tolist() == [0, 64, 192, 192, 192, 192]
    assert padded.dtype == torch.int32
    with pytest.raises(ValueError, match="exceed the captured capacity of 1"):
        cuda.pad_segments(cu, 1)


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ([[1, 7, 8]], "multiples of the merge size 2"),
        ([[1, 0, 8]], "non-positive"),
        ([], "empty"),
        ([[1, 8]], "t, h, w"),
    ],
)
def test_bad_grids_are_named(grid: list[list[int]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cuda.pass_layout(grid, GEO)


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("attention", ["sdpa_loop", "sdpa_mask"])
def test_capturable_forward_equals_transformers_forward(tower: Any, grid: list[list[int]], attention: str) -> None:
    g = torch.tensor(grid)
    pixels = torch.randn(int(g.prod(-1).sum()), PATCH_DIM)
    layout = cuda.pass_layout(g, cuda.TowerGeometry.from_tower(tower))
    # Padded segment lists, as a captured graph sees them: the extra zero-length segments change nothing.
    idx = cuda.DeviceIndices.from_layout(layout, torch.device("cpu"), layout.full_segments + 3, layout.patches // 4)
    with torch.no_grad():
        ref = tower(pixels, grid_thw=g).pooler_output
        out = cuda.tower_forward(tower, pixels, idx, cuda.ATTENTION[attention])
    assert out.shape == ref.shape
    assert float((out - ref).norm() / ref.norm()) < 1e-5


def test_packed_pass_leaves_each_image_unchanged(tower: Any) -> None:
    """An image packed with others and a dummy gives the rows it gives alone (its own attention segment)."""
    geo = cuda.TowerGeometry.from_tower(tower)
    alone_grid, packed_grid = [[1, 8, 16]], [[1, 16, 8], [1, 8, 16], [1, 8, 8]]
    pixels = torch.randn(128 + 128 + 64, PATCH_DIM)
    with torch.no_grad():
        alone = cuda.tower_forward(
            tower,
            pixels[128:256],
            cuda.DeviceIndices.from_layout(cuda.pass_layout(alone_grid, geo), pixels.device),
            cuda.segment_sdpa,
        )
        packed = cuda.tower_forward(
            tower,
            pixels,
            cuda.DeviceIndices.from_layout(cuda.pass_layout(packed_grid, geo), pixels.device),
            cuda.segment_sdpa,
        )
    torch.testing.assert_close(packed[32:64], alone, rtol=1e-5, atol=1e-6)


def test_layouts_are_cached_per_grid() -> None:
    assert cuda.pass_layout([[1, 8, 8]], GEO) is cuda.pass_layout(torch.tensor([[1, 8, 8]]), GEO)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised where CUDA is absent")
def test_executor_refuses_without_cuda(tower: Any) -> None:
    with pytest.raises(BackendError, match="needs a CUDA device"):
        cuda.CudaGraphExecutor(tower)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="graph capture and replay need a CUDA device")
def test_replay_equals_eager_on_cuda(tower: Any) -> None:
    """A packed, padded pass replayed from a graph equals the eager forward (checked on the H100 run)."""
    gpu_tower = copy.deepcopy(tower).to("cuda")
    with pytest.raises(BackendError, match="float16 or bfloat16"):
        cuda.CudaGraphExecutor(gpu_tower)  # flash varlen has no float32 kernel
    gpu_tower = gpu_tower.to(torch.bfloat16)
    ex = cuda.CudaGraphExecutor(gpu_tower)
    ex.warmup(512, torch.randn(512, PATCH_DIM), torch.tensor([[1, 8, 64]]))
    grid = torch.tensor([[1, 16, 16], [1, 8, 16], [1, 8, 16]])
    pixels = torch.randn(512, PATCH_DIM, device="cuda", dtype=torch.bfloat16)
    with torch.inference_mode():
        ex.graphs[512].out.fill_(float("nan"))
        ref = gpu_tower(pixels, grid_thw=grid.cuda()).pooler_output
        out = ex(512, pixels, grid)
    assert ex.eager_passes == 0
    assert bool(torch.isfinite(out).all())
    assert float((out.float() - ref.float()).norm() / ref.float().norm()) < 2e-2


@pytest.mark.parametrize(
    ("bucket", "max_items", "expected"),
    [(1600, None, (25, 400)), (12544, None, (64, 3136)), (64, None, (1, 16)), (4096, 9, (9, 1024))],
)
def test_segment_capacities(bucket: int, max_items: int | None, expected: tuple[int, int]) -> None:
    assert cuda.segment_capacities(bucket, GEO, max_items) == expected


def test_segment_capacities_cover_every_packed_pass_of_aligned_images() -> None:
    # Any mix of 112-aligned images (multiples of 8x8 patches) plus a dummy fits the window capacity.
    grid = [[1, 8, 8]] * 20 + [[1, 8, 24]]
    layout = cuda.pass_layout(grid, GEO)
    frames, windows = cuda.segment_capacities(layout.patches, GEO)
    assert layout.full_segments <= frames
    assert layout.window_segments <= windows


def test_segment_capacities_reject_bad_buckets() -> None:
    with pytest.raises(ValueError, match="multiple of 4"):
        cuda.segment_capacities(1602, GEO)
    with pytest.raises(ValueError, match="max_items_per_pass=0"):
        cuda.segment_capacities(1600, GEO, 0)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 2), st.integers(1, 12), st.integers(1, 12)), min_size=1, max_size=4))
def test_layout_matches_transformers_on_random_grids(rows: list[tuple[int, int, int]]) -> None:
    g = torch.tensor([[t, 2 * h, 2 * w] for t, h, w in rows])
    layout = cuda.pass_layout(g, GEO)
    window_index, cu_window = vision_utils.get_vision_window_index(g, 2, 112, 14)
    assert torch.equal(layout.position_ids, vision_utils.get_vision_position_ids(g, 2))
    assert torch.equal(layout.window_index, window_index)
    assert torch.equal(layout.cu_window_seqlens, cu_window)
    assert layout.window_segments <= cuda.segment_capacities(layout.patches, GEO)[1]

"""Padding and packing are exact on transformers' real Qwen2.5-VL vision tower (tiny, random, fp32, CPU)."""

from __future__ import annotations

import pytest
import torch

from vllm_hpu_mm.buckets.policy import OversizePolicy
from vllm_hpu_mm.graphs.base import PassRecord
from vllm_hpu_mm.graphs.cpu import EagerExecutor
from vllm_hpu_mm.graphs.runner import BucketedVisionRunner, transformers_encoder

modeling = pytest.importorskip("transformers.models.qwen2_5_vl.modeling_qwen2_5_vl")
configuration = pytest.importorskip("transformers.models.qwen2_5_vl.configuration_qwen2_5_vl")

PATCH_DIM = 3 * 2 * 14 * 14  # channels * temporal_patch_size * patch * patch = 1176


@pytest.fixture(scope="module")
def tower() -> torch.nn.Module:
    torch.manual_seed(0)
    config = configuration.Qwen2_5_VLVisionConfig(
        depth=2,
        hidden_size=64,
        num_heads=2,
        intermediate_size=128,
        out_hidden_size=128,
        patch_size=14,
        spatial_merge_size=2,
        temporal_patch_size=2,
        window_size=112,
        fullatt_block_indexes=[1],
    )
    config._attn_implementation = "eager"
    model: torch.nn.Module = modeling.Qwen2_5_VisionTransformerPretrainedModel(config).float().eval()
    return model


class Recording:
    """An eager executor that records every shape the tower was called with."""

    name = "recording"

    def __init__(self, tower: torch.nn.Module) -> None:
        self.inner = EagerExecutor(transformers_encoder(tower))
        self.calls: list[tuple[int | None, int, list[list[int]]]] = []

    def warmup(self, bucket: int, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> None:
        self(bucket, pixel_values, grid_thw)

    def __call__(self, bucket: int | None, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        assert grid_thw.device.type == "cpu"
        assert grid_thw.dtype == torch.int64
        self.calls.append((bucket, pixel_values.shape[0], grid_thw.tolist()))
        return self.inner(bucket, pixel_values, grid_thw)


def alone(tower: torch.nn.Module, pixels: torch.Tensor, grid: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return transformers_encoder(tower)(pixels, torch.tensor([grid]))


def images(*grids: tuple[int, int, int]) -> tuple[torch.Tensor, list[list[int]]]:
    g = torch.Generator().manual_seed(sum(t * h * w for t, h, w in grids))
    rows = sum(t * h * w for t, h, w in grids)
    return torch.randn(rows, PATCH_DIM, generator=g), [list(x) for x in grids]


def split(out: torch.Tensor, grids: list[list[int]]) -> list[torch.Tensor]:
    return list(torch.split(out, [t * h * w // 4 for t, h, w in grids]))


def assert_matches_unpadded(
    tower: torch.nn.Module, pixels: torch.Tensor, grids: list[list[int]], out: torch.Tensor
) -> None:
    rows = torch.split(pixels, [t * h * w for t, h, w in grids])
    for got, px, grid in zip(split(out, grids), rows, grids, strict=True):
        torch.testing.assert_close(got, alone(tower, px, grid), rtol=1e-5, atol=1e-5)


def test_one_padded_image_equals_its_unpadded_run(tower: torch.nn.Module) -> None:
    rec = Recording(tower)
    runner = BucketedVisionRunner(rec, (1024, 4096), OversizePolicy.SHRINK)
    pixels, grids = images((1, 24, 32))  # 768 patches (336 x 448 px) -> bucket 1024, dummy 256
    out = runner(pixels, torch.tensor(grids))
    assert rec.calls == [(1024, 1024, [[1, 24, 32], [1, 16, 16]])]
    assert out.shape == (768 // 4, 128)
    assert_matches_unpadded(tower, pixels, grids, out)


def test_packed_images_equal_separate_runs_in_input_order(tower: torch.nn.Module) -> None:
    rec = Recording(tower)
    records: list[PassRecord] = []
    runner = BucketedVisionRunner(rec, (1024, 2048), OversizePolicy.SHRINK, on_pass=records.append)
    # 256, 1024, 512 and 128 patches: 1920 in all, so all four share one 2048 pass with a 128-patch dummy.
    pixels, grids = images((1, 16, 16), (1, 32, 32), (1, 16, 32), (1, 8, 16))
    out = runner(pixels, torch.tensor(grids))
    assert out.shape == ((256 + 1024 + 512 + 128) // 4, 128)
    assert_matches_unpadded(tower, pixels, grids, out)
    assert all(bucket in (1024, 2048) and rows == bucket for bucket, rows, _ in rec.calls)
    assert [(r.bucket, sorted(r.image_patches), r.padding) for r in records] == [(2048, [128, 256, 512, 1024], 128)]


def test_unaligned_grid_is_padded_exactly_with_a_merge_aligned_dummy(tower: torch.nn.Module) -> None:
    rec = Recording(tower)
    runner = BucketedVisionRunner(rec, (256,), OversizePolicy.SHRINK)
    pixels, grids = images((1, 10, 14))  # 140 patches: not a whole number of windows; padding 116 = 4 * 29
    out = runner(pixels, torch.tensor(grids))
    ((_, _, grid),) = rec.calls
    assert grid[-1] == [1, 2, 58]
    assert_matches_unpadded(tower, pixels, grids, out)


def test_video_is_bucketed_exactly(tower: torch.nn.Module) -> None:
    rec = Recording(tower)
    runner = BucketedVisionRunner(rec, (1024,), OversizePolicy.REJECT)
    pixels, grids = images((2, 16, 16), (1, 8, 8))  # a 2-frame video (512 patches) and an image (64)
    out = runner(pixels, torch.tensor(grids))
    assert [(b, r) for b, r, _ in rec.calls] == [(1024, 1024)]
    assert_matches_unpadded(tower, pixels, grids, out)


def test_eager_policy_runs_oversize_at_exact_shape(tower: torch.nn.Module) -> None:
    rec = Recording(tower)
    records: list[PassRecord] = []
    runner = BucketedVisionRunner(rec, (256,), OversizePolicy.EAGER, on_pass=records.append)
    pixels, grids = images((1, 8, 8), (1, 16, 32))  # 64 fits; 512 is oversize
    out = runner(pixels, torch.tensor(grids))
    assert sorted((b or 0, r) for b, r, _ in rec.calls) == [(0, 512), (256, 256)]
    assert [r.oversize_policy for r in records if r.bucket is None] == ["eager"]
    assert_matches_unpadded(tower, pixels, grids, out)

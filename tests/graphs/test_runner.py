"""BucketedVisionRunner with a fake tower: shapes, order, dtype, oversize policies, records."""

from __future__ import annotations

import logging

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.buckets.policy import OversizePolicy
from vllm_hpu_mm.errors import ConfigError, OversizeImageError
from vllm_hpu_mm.graphs.base import PassRecord
from vllm_hpu_mm.graphs.runner import BucketedVisionRunner, dummy_grid


class FakeTower:
    """Merges each run of 4 consecutive rows into one by summing column 0; records every call."""

    name = "fake"

    def __init__(self) -> None:
        self.calls: list[tuple[int | None, tuple[int, ...], torch.dtype, list[list[int]]]] = []

    def warmup(self, bucket: int, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> None:
        self(bucket, pixel_values, grid_thw)

    def __call__(self, bucket: int | None, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        assert int(grid_thw.prod(-1).sum()) == pixel_values.shape[0]
        self.calls.append((bucket, tuple(pixel_values.shape), pixel_values.dtype, grid_thw.tolist()))
        return pixel_values[:, :1].double().reshape(-1, 4).sum(-1, keepdim=True)


def tagged(*grids: tuple[int, int, int], dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixel rows whose column 0 is the image index + 1, so every output row says which image it came from."""
    rows = [torch.full((t * h * w, 6), i + 1, dtype=dtype) for i, (t, h, w) in enumerate(grids)]
    return torch.cat(rows), torch.tensor(grids)


def owners(out: torch.Tensor) -> list[int]:
    return [int(v) // 4 - 1 for v in out[:, 0].tolist()]


def expected_owners(grids: list[tuple[int, int, int]]) -> list[int]:
    return [i for i, (t, h, w) in enumerate(grids) for _ in range(t * h * w // 4)]


def test_every_pass_is_bucket_shaped_and_output_is_in_input_order() -> None:
    tower = FakeTower()
    grids = [(1, 8, 8), (1, 32, 32), (1, 16, 8), (1, 24, 24), (1, 8, 40)]
    pixels, grid = tagged(*grids)
    out = BucketedVisionRunner(tower, (256, 1024), OversizePolicy.SHRINK)(pixels, grid)
    assert all(bucket in (256, 1024) and shape[0] == bucket for bucket, shape, _, _ in tower.calls)
    assert owners(out) == expected_owners(grids)


def test_uint8_pixels_are_padded_with_uint8_rows() -> None:
    tower = FakeTower()
    pixels, grid = tagged((1, 8, 8), dtype=torch.uint8)
    BucketedVisionRunner(tower, (256,), OversizePolicy.SHRINK)(pixels, grid)
    assert [(c[1], c[2]) for c in tower.calls] == [((256, 6), torch.uint8)]


def test_dummy_is_its_own_last_segment_and_record_says_so() -> None:
    tower = FakeTower()
    records: list[PassRecord] = []
    pixels, grid = tagged((1, 8, 16))
    BucketedVisionRunner(tower, (1600,), OversizePolicy.SHRINK, on_pass=records.append)(pixels, grid)
    assert tower.calls[0][3] == [[1, 8, 16], [1, 8, 184]]  # 1472 = 23 windows of 64, 23 is prime: 1 x 23 windows
    assert records == [PassRecord("fake", 1600, (128,), 1472)]


def test_disabled_bucketing_runs_one_exact_pass() -> None:
    tower = FakeTower()
    grids = [(1, 8, 8), (1, 10, 12)]
    pixels, grid = tagged(*grids)
    out = BucketedVisionRunner(tower, None, OversizePolicy.SHRINK)(pixels, grid)
    assert [(c[0], c[1][0], c[3]) for c in tower.calls] == [(None, 184, [[1, 8, 8], [1, 10, 12]])]
    assert owners(out) == expected_owners(grids)


def test_reject_policy_raises_naming_the_setting() -> None:
    tower = FakeTower()
    pixels, grid = tagged((1, 8, 8), (1, 32, 32))
    runner = BucketedVisionRunner(tower, (256,), OversizePolicy.REJECT)
    with pytest.raises(OversizeImageError, match=r"1024 vision patches.*largest bucket \(256\).*OVERSIZE_POLICY"):
        runner(pixels, grid)
    assert tower.calls == []


def test_shrink_policy_falls_back_to_exact_shape_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    tower = FakeTower()
    records: list[PassRecord] = []
    grids = [(1, 32, 32), (1, 8, 8)]
    pixels, grid = tagged(*grids)
    runner = BucketedVisionRunner(tower, (256,), OversizePolicy.SHRINK, on_pass=records.append)
    with caplog.at_level(logging.WARNING, logger="vllm_hpu_mm.graphs.runner"):
        out = runner(pixels, grid)
        runner(pixels, grid)
    assert owners(out) == expected_owners(grids)
    # Distinct records: once the plugin has routed our logger through vLLM's, pytest may see one record twice.
    assert len({id(r) for r in caplog.records if "exact shape" in r.message}) == 1
    fallback = [r for r in records if r.bucket is None]
    assert [(r.image_patches, r.oversize, r.oversize_policy) for r in fallback] == [((1024,), 1, "eager_fallback")] * 2


def test_oversize_video_runs_exact_shape_even_under_reject() -> None:
    tower = FakeTower()
    records: list[PassRecord] = []
    grids = [(4, 16, 16), (1, 8, 8)]
    pixels, grid = tagged(*grids)
    out = BucketedVisionRunner(tower, (256,), OversizePolicy.REJECT, on_pass=records.append)(pixels, grid)
    assert owners(out) == expected_owners(grids)
    assert sorted((r.bucket or 0, r.oversize_policy or "") for r in records) == [(0, "video_eager"), (256, "")]


@pytest.mark.parametrize(
    ("pixels", "grid", "message"),
    [
        (torch.zeros(60, 6), [[1, 8, 8]], r"expected \[sum of t\*h\*w over grid_thw = 64"),
        (torch.zeros(63, 6), [[1, 7, 9]], "multiple of merge_size=2"),
        (torch.zeros(0, 6), [[1, 0, 8]], "must be positive"),
    ],
)
def test_bad_input_says_what_is_expected(pixels: torch.Tensor, grid: list[list[int]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BucketedVisionRunner(FakeTower(), (256,), OversizePolicy.SHRINK)(pixels, torch.tensor(grid))


def test_bad_buckets_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="bucket 258 is not a multiple of 4"):
        BucketedVisionRunner(FakeTower(), (256, 258), OversizePolicy.SHRINK)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 2000).map(lambda n: 4 * n))
def test_dummy_grid_covers_padding_with_merge_aligned_sides(padding: int) -> None:
    t, h, w = dummy_grid(padding)
    assert (t, h * w) == (1, padding)
    unit = 8 if padding % 64 == 0 else 2
    assert (h % unit, w % unit) == (0, 0)


def test_dummy_grid_refuses_a_padding_no_image_can_fill() -> None:
    with pytest.raises(ValueError, match="multiple of merge_size"):
        dummy_grid(6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 2), st.integers(1, 20), st.integers(1, 20)), min_size=1, max_size=8))
def test_any_batch_comes_back_complete_and_in_order(sides: list[tuple[int, int, int]]) -> None:
    grids = [(t, 2 * h, 2 * w) for t, h, w in sides]
    tower = FakeTower()
    pixels, grid = tagged(*grids)
    out = BucketedVisionRunner(tower, (256, 512, 1024), OversizePolicy.EAGER)(pixels, grid)
    assert owners(out) == expected_owners(grids)
    assert all(b is None or shape[0] == b for b, shape, _, _ in tower.calls)

"""Mapping images to buckets and packing one batch into passes (vllm_hpu_mm.buckets.packing)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.buckets.packing import PackedPass, bucket_for, pack, shrink_limit
from vllm_hpu_mm.buckets.policy import OversizePolicy, pixel_limits
from vllm_hpu_mm.buckets.workload import evaluate_sizes
from vllm_hpu_mm.errors import BucketError, ImageError, OversizeImageError
from vllm_hpu_mm.preprocess.align import aligned_size, patch_count
from vllm_hpu_mm.values import DEFAULT_BUCKETS, Buckets

GRANULE = 64
bucket_lists = st.lists(st.integers(1, 40), min_size=1, max_size=6, unique=True).map(
    lambda xs: tuple(sorted(x * GRANULE for x in xs))
)
aligned_counts = st.lists(st.integers(1, 48).map(lambda x: x * GRANULE), min_size=0, max_size=12)


def test_bucket_for_picks_the_smallest_bucket_that_holds_the_image() -> None:
    assert bucket_for(1, DEFAULT_BUCKETS) == 1600
    assert bucket_for(1600, DEFAULT_BUCKETS) == 1600
    assert bucket_for(1664, DEFAULT_BUCKETS) == 3136
    assert bucket_for(12544, DEFAULT_BUCKETS) == 12544
    assert bucket_for(12608, DEFAULT_BUCKETS) is None


def test_two_small_images_share_one_pass_padded_by_a_dummy() -> None:
    # 640x427 photos align to 672x448 = 1536 patches: two of them fill 3072 of the 3136 bucket.
    passes = pack([1536, 1536], DEFAULT_BUCKETS, OversizePolicy.SHRINK)
    assert passes == [PackedPass(3136, (0, 1), (1536, 1536), 64)]


def test_images_are_not_merged_when_merging_costs_more_compute() -> None:
    # 6400 + 1600 would need the 9216 bucket (1216 patches of padding); alone they fit exactly.
    passes = pack([1600, 6400], DEFAULT_BUCKETS, OversizePolicy.SHRINK)
    assert passes == [PackedPass(6400, (1,), (6400,), 0), PackedPass(1600, (0,), (1600,), 0)]


def test_first_fit_decreasing_fills_the_largest_image_first() -> None:
    passes = pack([256, 4096, 1024, 1024], (2048, 4096, 6144), OversizePolicy.SHRINK)
    assert [p.items for p in passes] == [(1, 2, 3), (0,)]
    assert [(p.bucket, p.padding) for p in passes] == [(6144, 0), (2048, 1792)]


def test_eager_policy_runs_an_oversize_image_alone_at_its_exact_size() -> None:
    passes = pack([64, 20000], DEFAULT_BUCKETS, OversizePolicy.EAGER)
    assert passes[-1] == PackedPass(None, (1,), (20000,), 0)
    assert passes[0].items == (0,)


def test_reject_policy_raises_a_clear_oversize_error() -> None:
    with pytest.raises(OversizeImageError) as info:
        pack([64, 20000], DEFAULT_BUCKETS, OversizePolicy.REJECT)
    message = str(info.value)
    assert isinstance(info.value, ImageError)
    for part in ("image 1", "20000", "12544", "reject", "VLLM_HPU_MM_OVERSIZE_POLICY", "VLLM_MULTIMODAL_BUCKETS"):
        assert part in message


def test_shrink_policy_must_have_resized_the_image_upstream() -> None:
    with pytest.raises(ValueError, match="resized upstream"):
        pack([20000], DEFAULT_BUCKETS, OversizePolicy.SHRINK)


def test_pack_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="positive"):
        pack([0], DEFAULT_BUCKETS, OversizePolicy.SHRINK)
    # A plain list is validated once, as a Buckets: duplicates and empty lists are refused, order does not matter.
    with pytest.raises(BucketError, match="appears more than once"):
        pack([64], (64, 64), OversizePolicy.SHRINK)
    with pytest.raises(BucketError, match="is empty"):
        pack([64], (), OversizePolicy.SHRINK)
    assert pack([64], (128, 64), OversizePolicy.SHRINK) == pack([64], Buckets((64, 128)), OversizePolicy.SHRINK)


def test_the_shrink_limits_fit_the_largest_bucket_keeping_the_aspect() -> None:
    assert shrink_limit(DEFAULT_BUCKETS) == 12544 * 196
    low, high = pixel_limits(3136, 12845056, DEFAULT_BUCKETS, OversizePolicy.SHRINK)
    h, w = aligned_size(3000, 4000, min_pixels=low, max_pixels=high)
    assert h % 112 == 0
    assert w % 112 == 0
    assert patch_count(h, w) <= 12544
    assert abs(w / h - 4000 / 3000) < 0.1
    # A tiny largest bucket still yields at least one tile, below min_pixels if it must.
    low, high = pixel_limits(3136, 12845056, Buckets((64,)), OversizePolicy.SHRINK)
    assert aligned_size(500, 500, min_pixels=low, max_pixels=high) == (112, 112)


@settings(max_examples=300, deadline=None)
@given(counts=aligned_counts, buckets=bucket_lists)
def test_packing_invariants(counts: list[int], buckets: tuple[int, ...]) -> None:
    passes = pack(counts, buckets, OversizePolicy.EAGER)
    seen = [i for p in passes for i in p.items]
    assert sorted(seen) == list(range(len(counts)))  # every image exactly once
    for p in passes:
        assert p.patches == tuple(counts[i] for i in p.items)
        if p.bucket is None:
            assert len(p.items) == 1
            assert p.patches[0] > buckets[-1]
            assert p.padding == 0
        else:
            assert sum(p.patches) <= p.bucket  # every image fits its bucket
            assert p.padding == p.bucket - sum(p.patches)
            assert p.padding % GRANULE == 0
            assert p.bucket == bucket_for(sum(p.patches), buckets)  # the smallest bucket holding the pass
    alone = sum(bucket_for(c, buckets) or c for c in counts)
    assert sum(p.total for p in passes) <= alone  # packing never costs more compute than one image per pass


def test_pixel_limits_cap_only_where_the_policy_resizes() -> None:
    small = Buckets((256, 1024, 4096))
    assert pixel_limits(3136, 12845056, small, OversizePolicy.SHRINK) == (3136, 4096 * 196)
    assert pixel_limits(3136, 200704, small, OversizePolicy.SHRINK) == (3136, 200704)  # a smaller limit wins
    assert pixel_limits(3136, 12845056, small, OversizePolicy.EAGER) == (3136, 12845056)
    assert pixel_limits(3136, 12845056, small, OversizePolicy.REJECT) == (3136, 12845056)
    assert pixel_limits(3136, 12845056, small, OversizePolicy.REJECT, for_budget=True) == (3136, 4096 * 196)
    assert pixel_limits(3136, 12845056, None, OversizePolicy.SHRINK) == (3136, 12845056)
    assert pixel_limits(900_000, 12845056, Buckets((64,)), OversizePolicy.SHRINK) == (12544, 12544)  # one tile


@pytest.mark.parametrize("policy", list(OversizePolicy))
def test_packer_and_bucket_check_use_the_served_limits(policy: OversizePolicy) -> None:
    buckets = Buckets((256, 1024, 4096))
    sizes = [(500, 333), (3000, 200), (2000, 2000), (37, 1001)]
    low, high = pixel_limits(3136, 12845056, buckets, policy)
    served = [patch_count(*aligned_size(h, w, min_pixels=low, max_pixels=high)) for w, h in sizes]
    checked = evaluate_sizes(sizes, buckets, min_pixels=3136, max_pixels=12845056, policy=policy)
    above = [n for n in served if n > buckets.largest]
    assert checked.num_oversize == len(above)
    if policy is OversizePolicy.REJECT:  # refused with HTTP 400: in no patch total
        assert checked.real_patches == sum(served) - sum(above)
        assert checked.num_images == len(sizes)
    else:
        assert checked.real_patches == sum(served)
    if policy is OversizePolicy.SHRINK:
        assert all(n <= buckets.largest for n in served)

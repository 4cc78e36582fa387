"""Fast pixel values (vllm_hpu_mm.preprocess.pixels) against transformers' Qwen2-VL image processors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

from tests.support.data import IMAGES, PHOTOS
from vllm_hpu_mm.errors import ImageError
from vllm_hpu_mm.preprocess import (
    QWEN_IMAGE_MEAN,
    QWEN_IMAGE_STD,
    QWEN_MAX_PIXELS,
    QWEN_MIN_PIXELS,
    align_image,
    to_pixel_values,
)


def test_the_real_photos_are_there() -> None:
    assert len(PHOTOS) == 7, f"expected the 7 photos of {IMAGES} (see tests/data/SOURCES.md)"


@pytest.fixture(scope="module")
def processors() -> dict[str, Qwen2VLImageProcessor | Qwen2VLImageProcessorPil]:
    # Limits wide enough that the processors' own smart_resize (factor 28) leaves a 112-aligned image as it is.
    return {
        "pil": Qwen2VLImageProcessorPil(min_pixels=QWEN_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS),
        "torchvision": Qwen2VLImageProcessor(min_pixels=QWEN_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS),
    }


@pytest.mark.parametrize("path", PHOTOS, ids=[p.name for p in PHOTOS])
def test_matches_transformers_on_real_photos(
    path: Path, processors: dict[str, Qwen2VLImageProcessor | Qwen2VLImageProcessorPil]
) -> None:
    aligned = align_image(path).image
    ours, grid = to_pixel_values(aligned, image_mean=QWEN_IMAGE_MEAN, image_std=QWEN_IMAGE_STD)
    width, height = aligned.size
    assert grid == (1, height // 14, width // 14)
    assert ours.dtype == np.float32
    assert ours.shape == (grid[1] * grid[2], 3 * 2 * 14 * 14)
    for name, processor in processors.items():
        reference = processor(images=aligned, return_tensors="np")
        assert tuple(reference["image_grid_thw"][0]) == grid, name
        np.testing.assert_allclose(ours, reference["pixel_values"], rtol=0, atol=1e-6, err_msg=name)
    # Same float32 arithmetic as the PIL processor: not just close, identical.
    assert np.array_equal(ours, processors["pil"](images=aligned, return_tensors="np")["pixel_values"])


def test_layout_of_one_merge_group() -> None:
    """Row 1 is the top-right patch of the first 2x2 group; each row is channel x temporal x 14 x 14."""
    array = np.zeros((112, 112, 3), dtype=np.uint8)
    array[0:14, 14:28, 0] = 255  # red in patch (row 0, col 1)
    ours, _ = to_pixel_values(Image.fromarray(array), image_mean=(0, 0, 0), image_std=(1, 1, 1))
    rows = ours.reshape(-1, 3, 2, 14, 14)
    assert (rows[1, 0] == 1.0).all()  # both temporal copies of the red channel
    assert (rows[1, 1:] == 0.0).all()
    assert (np.delete(rows, 1, axis=0) == 0.0).all()


@pytest.mark.parametrize(
    "image",
    [Image.new("RGB", (100, 112)), Image.new("L", (112, 112)), Image.new("RGBA", (112, 112))],
    ids=["unaligned", "grey", "rgba"],
)
def test_refuses_images_that_are_not_aligned_rgb(image: Image.Image) -> None:
    with pytest.raises(ImageError, match="accepted: an RGB image whose sides are non-zero multiples of 28"):
        to_pixel_values(image, image_mean=QWEN_IMAGE_MEAN, image_std=QWEN_IMAGE_STD)


def test_refuses_bad_normalisation() -> None:
    with pytest.raises(ValueError, match="std > 0"):
        to_pixel_values(Image.new("RGB", (112, 112)), image_mean=(0.5, 0.5, 0.5), image_std=(0.5, 0.0, 0.5))

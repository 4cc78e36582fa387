"""Our pixel path inside the served processor (vllm_hpu_mm.plugin.pixels): taken only where it is exact."""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

from tests.support.data import IMAGES
from vllm_hpu_mm.plugin.pixels import FastPixelsMixin, fast_pixels_processor, pixel_values_if_exact
from vllm_hpu_mm.preprocess import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, align_image


def processor() -> Qwen2VLImageProcessor:
    return Qwen2VLImageProcessor(min_pixels=QWEN_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS)


def aligned(name: str, size: tuple[int, int] | None = None) -> Image.Image:
    image = Image.open(IMAGES / name).convert("RGB")
    return align_image(image.resize(size) if size else image).image


def test_fast_path_matches_transformers_within_float32_rounding() -> None:
    images = [aligned("skimage_chelsea.png"), aligned("skimage_rocket.jpg", (500, 333))]
    ours = pixel_values_if_exact(processor(), images, {"return_tensors": "pt"})
    assert ours is not None
    reference = processor()(images, return_tensors="pt")
    assert torch.equal(ours["image_grid_thw"], reference["image_grid_thw"])
    assert ours["pixel_values"].dtype == reference["pixel_values"].dtype
    assert ours["pixel_values"].shape == reference["pixel_values"].shape
    assert (ours["pixel_values"] - reference["pixel_values"]).abs().max().item() < 1e-6


@pytest.mark.parametrize(
    ("images", "kwargs"),
    [
        ([Image.new("RGB", (500, 333))], {}),  # the HF processor would resize it
        ([Image.new("L", (448, 336))], {}),  # not RGB
        ([np.zeros((336, 448, 3), dtype=np.uint8)], {}),  # not a PIL image
        ([Image.new("RGB", (448, 336))], {"do_normalize": False}),
        ([Image.new("RGB", (448, 336))], {"image_mean": [0.5, 0.5, 0.5]}),
        ([Image.new("RGB", (448, 336))], {"merge_size": 4}),
        ([Image.new("RGB", (448, 336))], {"some_new_option": 1}),
        ([Image.new("RGB", (448, 336))], {"return_tensors": "np"}),
        ([Image.new("RGB", (448, 336))], {"size": {"shortest_edge": 3136, "longest_edge": 100_000}}),  # shrinks it
        ([], {}),
    ],
)
def test_anything_else_goes_to_transformers(images: list[Any], kwargs: dict[str, Any]) -> None:
    assert pixel_values_if_exact(processor(), images, kwargs) is None


def test_the_hf_processor_gets_the_path_once_and_keeps_its_class() -> None:
    hf = types.SimpleNamespace(image_processor=processor())
    fast_pixels_processor(hf)
    fast_pixels_processor(hf)
    image_processor: Any = hf.image_processor
    assert isinstance(image_processor, Qwen2VLImageProcessor)
    assert type(image_processor).__mro__[1:3] == (FastPixelsMixin, Qwen2VLImageProcessor)
    image = aligned("skimage_coins.png")
    out = image_processor([image], return_tensors="pt")  # what ProcessorMixin._process_images calls
    assert out["image_grid_thw"].tolist() == [[1, image.height // 14, image.width // 14]]
    odd = image_processor([Image.new("RGB", (500, 333))], return_tensors="pt")  # resized by transformers itself
    assert odd["image_grid_thw"].tolist() == [[1, 24, 36]]


def test_uint8_patches_as_vllm_asks_for_them_are_identical() -> None:
    # vLLM 0.32 calls the image processor with do_rescale=False, do_normalize=False and normalises on the device.
    images = [aligned("skimage_camera.png", (300, 300)), aligned("skimage_page.png")]
    kwargs: dict[str, Any] = {"do_rescale": False, "do_normalize": False, "return_tensors": "pt"}
    ours = pixel_values_if_exact(processor(), images, kwargs)
    assert ours is not None
    reference = processor()(images, **kwargs)
    assert ours["pixel_values"].dtype == torch.uint8
    assert torch.equal(ours["pixel_values"], reference["pixel_values"])
    assert torch.equal(ours["image_grid_thw"], reference["image_grid_thw"])
    assert pixel_values_if_exact(processor(), images, {"do_rescale": False}) is None  # rescaled but not normalised

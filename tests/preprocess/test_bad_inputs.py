"""The bad-input corpus is labelled truthfully: our safe loader refuses every reject and decodes every accept."""

from __future__ import annotations

import base64
import binascii

import pytest

from tests.support.bad_inputs import BadInput, corpus, png_header_only
from vllm_hpu_mm.errors import ImageError
from vllm_hpu_mm.preprocess.image import load_image

ITEMS = corpus()


def _id(item: BadInput) -> str:
    return item.name


def test_corpus_covers_every_case_of_the_sweep() -> None:
    names = {i.name for i in ITEMS}
    required = {"corrupt_png", "truncated_jpeg", "truncated_png", "zero_bytes", "zero_by_zero", "one_by_20000"}
    required |= {"decompression_bomb", "cmyk_jpeg", "sixteen_bit_png", "palette_png", "rgba_png", "animated_gif"}
    required |= {"invalid_base64", "non_image_bytes"}
    assert required <= names
    assert len(names) == len(ITEMS)


def test_corpus_is_deterministic() -> None:
    assert [i.url for i in corpus()] == [i.url for i in ITEMS]


@pytest.mark.parametrize("item", [i for i in ITEMS if i.expect == "reject" and i.data is not None], ids=_id)
def test_rejected_items_are_refused_by_the_safe_loader(item: BadInput) -> None:
    assert item.data is not None
    with pytest.raises(ImageError, match="accepted"):
        load_image(item.data, max_image_pixels=178956970, max_aspect_ratio=200)


@pytest.mark.parametrize("item", [i for i in ITEMS if i.expect == "accept"], ids=_id)
def test_accepted_items_decode_to_rgb(item: BadInput) -> None:
    assert item.data is not None
    image = load_image(item.data, max_image_pixels=178956970, max_aspect_ratio=200)
    assert image.mode == "RGB"
    assert min(image.size) >= 1


def test_bomb_claims_a_huge_size_in_a_few_bytes() -> None:
    data = png_header_only(60000, 60000)
    assert len(data) < 200
    with pytest.raises(ImageError, match=r"60000x60000|3600000000"):
        load_image(data, max_image_pixels=178956970, max_aspect_ratio=200)


def test_invalid_base64_item_is_not_decodable() -> None:
    (item,) = [i for i in ITEMS if i.name == "invalid_base64"]
    assert item.data is None
    with pytest.raises(binascii.Error):
        base64.b64decode(item.url.split(",", 1)[1], validate=True)

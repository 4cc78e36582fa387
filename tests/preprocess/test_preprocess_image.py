"""Loading untrusted images (vllm_hpu_mm.preprocess.image): every bad input is a clear ImageError, every mode RGB."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from PIL import Image

from tests.support.bad_inputs import png_header_only
from tests.support.data import IMAGES
from vllm_hpu_mm.errors import ImageError
from vllm_hpu_mm.preprocess import AlignMode, align_image, check_dimensions, load_image


def encode(image: Image.Image, fmt: str, **params: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **params)
    return buffer.getvalue()


def photo() -> Image.Image:
    return Image.open(IMAGES / "skimage_rocket.jpg").convert("RGB")


def noise(width: int, height: int, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8), mode="RGB")


# --- refused inputs ------------------------------------------------------------------------------------------------

BAD_INPUTS: list[tuple[str, Callable[[], bytes], str]] = [
    ("empty", lambda: b"", "empty"),
    ("not an image", lambda: b"hello, this is text and not a picture" * 10, "not in any image format"),
    ("truncated JPEG", lambda: encode(photo(), "JPEG")[:3000], "could not be decoded"),
    ("truncated PNG", lambda: encode(photo(), "PNG")[:5000], "could not be decoded"),
    ("corrupt PNG data", lambda: corrupt(encode(noise(64, 64), "PNG")), "could not be decoded"),
    ("JPEG header only", lambda: encode(photo(), "JPEG")[:200], "not a readable image"),
    ("thin 1x20000", lambda: encode(Image.new("L", (1, 20000)), "PNG"), "aspect ratio 20000.0:1"),
    ("header claims 100000^2", lambda: png_header_only(100_000, 100_000), "too large to decode safely"),
]


def corrupt(data: bytes) -> bytes:
    """Flip bytes in the middle of the compressed stream (the chunk CRC no longer matches)."""
    middle = len(data) // 2
    return data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 64]) + data[middle + 64 :]


@pytest.mark.parametrize(("name", "make", "message"), BAD_INPUTS, ids=[case[0] for case in BAD_INPUTS])
def test_bad_bytes_raise_image_error(name: str, make: Callable[[], bytes], message: str) -> None:
    with pytest.raises(ImageError, match=message) as caught:
        load_image(make())
    assert "accepted" in str(caught.value)


def test_bomb_is_refused_on_its_header_by_our_limit() -> None:
    """2000 x 2000 is under Pillow's own bomb limit: ours refuses it from the header, before any decoding."""
    with pytest.raises(ImageError, match=r"4000000 pixels; accepted: at most 1000000"):
        load_image(png_header_only(2000, 2000), max_image_pixels=1_000_000)


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match="cannot be read"):
        load_image(tmp_path / "absent.png")
    (tmp_path / "empty.png").write_bytes(b"")
    with pytest.raises(ImageError, match="empty"):
        load_image(str(tmp_path / "empty.png"))


@pytest.mark.parametrize(
    ("width", "height", "kwargs", "message"),
    [
        (0, 10, {}, "empty"),
        (10, -1, {}, "empty"),
        (1, 201, {}, "aspect ratio 201.0:1; accepted: at most 200:1"),  # default limit from the env registry
        (30, 10, {"max_aspect_ratio": 2.0}, "at most 2:1"),
        (100, 100, {"max_image_pixels": 9999}, "10000 pixels; accepted: at most 9999"),
    ],
)
def test_check_dimensions_refuses(width: int, height: int, kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ImageError, match=message):
        check_dimensions(width, height, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("width", "height"), [(1, 200), (200, 1), (1, 1), (12000, 12000)])
def test_check_dimensions_accepts(width: int, height: int) -> None:
    check_dimensions(width, height)  # returns None, raises nothing


def test_wrong_source_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="accepted: PIL image, bytes, path"):
        load_image(1234)  # type: ignore[arg-type]


# --- modes, orientation, animation ---------------------------------------------------------------------------------


def pixel(image: Image.Image, xy: tuple[int, int]) -> tuple[int, int, int]:
    value = image.getpixel(xy)
    assert isinstance(value, tuple)
    return (int(value[0]), int(value[1]), int(value[2]))


def test_rgba_is_composited_on_white() -> None:
    rgba = Image.new("RGBA", (4, 1))
    rgba.putdata([(255, 0, 0, 0), (0, 0, 255, 255), (0, 0, 0, 128), (10, 200, 30, 255)])
    out = load_image(encode(rgba, "PNG"))
    assert out.mode == "RGB"
    assert pixel(out, (0, 0)) == (255, 255, 255)  # fully transparent -> the white background
    assert pixel(out, (1, 0)) == (0, 0, 255)  # opaque -> unchanged
    assert all(abs(c - 127) <= 1 for c in pixel(out, (2, 0)))  # half-transparent black on white -> mid grey
    assert pixel(out, (3, 0)) == (10, 200, 30)


def test_fill_colour_is_configurable() -> None:
    rgba = Image.new("RGBA", (2, 2), (0, 0, 0, 0))
    assert pixel(load_image(rgba, fill=(0, 255, 0)), (1, 1)) == (0, 255, 0)


def test_la_is_composited_on_white() -> None:
    la = Image.new("LA", (2, 1))
    la.putdata([(0, 0), (40, 255)])
    out = load_image(encode(la, "PNG"))
    assert pixel(out, (0, 0)) == (255, 255, 255)
    assert pixel(out, (1, 0)) == (40, 40, 40)


def test_palette_with_transparency_is_composited_on_white() -> None:
    palette = Image.new("P", (2, 1))
    palette.putpalette([255, 0, 0, 0, 128, 0] + [0] * 762)
    palette.putdata([0, 1])
    data = encode(palette, "PNG", transparency=0)
    assert Image.open(io.BytesIO(data)).info.get("transparency") == 0
    out = load_image(data)
    assert pixel(out, (0, 0)) == (255, 255, 255)  # index 0 is transparent red
    assert pixel(out, (1, 0)) == (0, 128, 0)


def test_cmyk_jpeg_becomes_rgb() -> None:
    cmyk = Image.new("CMYK", (16, 16), (0, 255, 255, 0))  # full magenta + yellow: red
    out = load_image(encode(cmyk, "JPEG", quality=95))
    assert out.mode == "RGB"
    r, g, b = pixel(out, (8, 8))
    assert r > 200
    assert g < 50
    assert b < 50


@pytest.mark.parametrize(("level", "expected"), [(65535, 255), (32896, 128), (0, 0)])
def test_16_bit_grey_png_is_scaled_not_clipped(level: int, expected: int) -> None:
    grey16 = Image.fromarray(np.full((4, 4), level, dtype=np.uint16))
    data = encode(grey16, "PNG")
    assert Image.open(io.BytesIO(data)).mode.startswith("I")
    assert pixel(load_image(data), (0, 0)) == (expected,) * 3


@pytest.mark.parametrize(
    ("values", "expected"), [([0.0, 0.5, 1.0], [0, 128, 255]), ([0.0, 100.0, 300.0], [0, 100, 255])]
)
def test_float_images_map_to_8_bit(values: list[float], expected: list[int]) -> None:
    image = Image.fromarray(np.array([values], dtype=np.float32), mode="F")
    out = load_image(image)
    assert [pixel(out, (x, 0))[0] for x in range(3)] == expected


def test_animated_gif_gives_its_first_frame() -> None:
    frames = [Image.new("RGB", (8, 8), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    assert getattr(Image.open(io.BytesIO(buffer.getvalue())), "n_frames", 1) == 2
    r, _g, b = pixel(load_image(buffer.getvalue()), (4, 4))
    assert r > 240
    assert b < 16


@pytest.mark.parametrize(
    ("orientation", "size", "red_at", "blue_at"),
    [
        (1, (40, 20), (5, 10), (35, 10)),  # upright: left half red
        (3, (40, 20), (35, 10), (5, 10)),  # rotate 180°: red now on the right
        (6, (20, 40), (10, 5), (10, 35)),  # rotate 90° clockwise: the stored left half is now on top
        (8, (20, 40), (10, 35), (10, 5)),  # rotate 90° counter-clockwise: ... now at the bottom
    ],
)
def test_exif_orientation_is_applied(
    orientation: int, size: tuple[int, int], red_at: tuple[int, int], blue_at: tuple[int, int]
) -> None:
    """Stored 40 wide x 20 high, left half red, right half blue, with an EXIF orientation tag."""
    stored = Image.new("RGB", (40, 20), (0, 0, 255))
    stored.paste((255, 0, 0), (0, 0, 20, 20))
    exif = Image.Exif()
    exif[0x0112] = orientation
    out = load_image(encode(stored, "JPEG", exif=exif.tobytes(), quality=95))
    assert out.size == size
    assert pixel(out, red_at)[0] > 200
    assert pixel(out, blue_at)[2] > 200


def test_path_and_pil_sources_match(tmp_path: Path) -> None:
    path = tmp_path / "photo.png"
    path.write_bytes(encode(noise(50, 30), "PNG"))
    from_path = load_image(path)
    from_str = load_image(str(path))
    from_pil = load_image(Image.open(path))
    assert np.array_equal(np.asarray(from_path), np.asarray(from_str))
    assert np.array_equal(np.asarray(from_path), np.asarray(from_pil))


# --- alignment of real pixels --------------------------------------------------------------------------------------


def test_real_photo_is_aligned_once() -> None:
    aligned = align_image(IMAGES / "skimage_rocket.jpg")
    assert aligned.original_size == (640, 427)
    assert aligned.size == (672, 448)
    assert aligned.image.size == (672, 448)
    assert aligned.image.mode == "RGB"
    assert aligned.resampled
    assert aligned.mode is AlignMode.NEAREST
    with pytest.raises(dataclasses.FrozenInstanceError):
        aligned.size = (1, 1)  # type: ignore[misc]


def test_resize_is_pillow_bicubic() -> None:
    image = noise(500, 333)
    aligned = align_image(image)
    expected = image.resize((448, 336), Image.Resampling.BICUBIC)
    assert np.array_equal(np.asarray(aligned.image), np.asarray(expected))


def test_already_aligned_image_is_not_resampled() -> None:
    image = noise(448, 336)
    aligned = align_image(image)
    assert not aligned.resampled
    assert np.array_equal(np.asarray(aligned.image), np.asarray(image))


@settings(max_examples=25, deadline=None)
@given(width=st.integers(1, 400), height=st.integers(1, 400), seed=st.integers(0, 2**16))
def test_pad_keeps_every_original_pixel(width: int, height: int, seed: int) -> None:
    assume(max(width, height) / min(width, height) <= 200)
    image = noise(width, height, seed)
    aligned = align_image(image, mode=AlignMode.PAD)
    out = np.asarray(aligned.image)
    assert not aligned.resampled
    assert aligned.size[0] % 112 == 0
    assert aligned.size[1] % 112 == 0
    assert np.array_equal(out[:height, :width], np.asarray(image))  # bit-identical, top left
    assert (out[height:] == 255).all()  # the rest is the white fill
    assert (out[:, width:] == 255).all()


def test_pad_over_the_cap_scales_down_keeping_the_exact_aspect() -> None:
    """1000 x 450 under 8 tiles: the 448 x 224 canvas holds it at scale 0.448 (flooring sides would give 448 x 112)."""
    image = noise(1000, 450)
    aligned = align_image(image, mode=AlignMode.PAD, max_pixels=112 * 112 * 8)
    assert aligned.resampled
    assert aligned.size == (448, 224)
    out = np.asarray(aligned.image)
    inner = np.asarray(image.resize((448, 202), Image.Resampling.BICUBIC))
    assert np.array_equal(out[:202], inner)  # one resize, exact 1000:450 aspect (448:201.6)
    assert (out[202:] == 255).all()  # white below it


def test_down_mode_never_grows_a_photo() -> None:
    aligned = align_image(IMAGES / "skimage_rocket.jpg", mode=AlignMode.DOWN)
    assert aligned.size == (560, 336)


@pytest.mark.parametrize("mode", [AlignMode.NEAREST, AlignMode.PAD])
def test_grey_images_resized_as_one_channel_give_the_rgb_result(mode: AlignMode) -> None:
    """The grey shortcut (resize L, then expand) must equal expanding to RGB first, then resizing."""
    grey = Image.open(IMAGES / "skimage_camera.png")
    assert grey.mode == "L"
    aligned = align_image(grey, mode=mode, max_pixels=112 * 112 * 16)
    assert aligned.image.mode == "RGB"
    reference = align_image(grey.convert("RGB"), mode=mode, max_pixels=112 * 112 * 16)
    assert aligned.size == reference.size
    assert np.array_equal(np.asarray(aligned.image), np.asarray(reference.image))


def test_16_bit_image_is_aligned_to_rgb() -> None:
    grey16 = Image.fromarray(np.full((100, 150), 65535, dtype=np.uint16))
    aligned = align_image(encode(grey16, "PNG"))
    assert aligned.image.mode == "RGB"
    assert pixel(aligned.image, (50, 50)) == (255, 255, 255)


def _fuzz_bases() -> dict[str, bytes]:
    image = noise(60, 40, seed=3)
    frames = [Image.new("P", (20, 20), i) for i in range(3)]
    gif = io.BytesIO()
    frames[0].save(gif, format="GIF", save_all=True, append_images=frames[1:])
    return {fmt: encode(image, fmt) for fmt in ("PNG", "JPEG", "BMP", "TIFF", "WEBP")} | {"GIF": gif.getvalue()}


FUZZ_BASES = _fuzz_bases()


@settings(max_examples=150, deadline=None)
@given(
    fmt=st.sampled_from(sorted(FUZZ_BASES)),
    edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=8),
    keep=st.floats(0.0, 1.0),
)
def test_mutated_or_truncated_bytes_decode_or_raise_image_error(
    fmt: str, edits: list[tuple[float, int]], keep: float
) -> None:
    """Never any exception but ImageError on damaged data (a 6000-case run of this found none)."""
    data = bytearray(FUZZ_BASES[fmt])
    for where, value in edits:
        data[int(where * len(data))] = value
    data = data[: max(0, int(keep * len(data)))]
    outcome: Image.Image | ImageError
    try:
        outcome = load_image(bytes(data))
    except ImageError as exc:
        outcome = exc
    if isinstance(outcome, ImageError):
        assert "accepted" in str(outcome)
    else:
        assert outcome.mode == "RGB"


def test_default_limits_come_from_the_env_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm_hpu_mm.envs import get_settings

    monkeypatch.setenv("VLLM_HPU_MM_MAX_ASPECT_RATIO", "2")
    monkeypatch.setenv("VLLM_HPU_MM_MAX_IMAGE_PIXELS", "5000")
    get_settings.cache_clear()
    try:
        with pytest.raises(ImageError, match="at most 2:1"):
            check_dimensions(30, 10)
        with pytest.raises(ImageError, match="at most 5000"):
            load_image(noise(100, 100))
        check_dimensions(30, 10, max_aspect_ratio=3.0)  # an explicit limit wins
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()

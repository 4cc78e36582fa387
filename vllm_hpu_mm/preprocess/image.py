"""Load an untrusted image safely and bring it to its 112-aligned size.

Size limits are checked on the header, before any pixel is decoded, so a decompression bomb costs nothing. Every
failure of the decoder (corrupt or truncated data, unknown format, bombs) becomes an :class:`ImageError` that says
what was wrong and what is accepted; the server maps it to an HTTP 4xx.

Resampling: one Pillow ``BICUBIC`` resize, the filter of Qwen's own image processor, so the model sees the pixel
statistics it was trained on. Pillow widens the bicubic kernel by the scale factor when shrinking, so downscaling
is already antialiased; ``LANCZOS`` would only sharpen slightly, cost more, and move us away from the stock output.
"""

from __future__ import annotations

import dataclasses
import io
import os

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from vllm_hpu_mm.errors import ImageError
from vllm_hpu_mm.preprocess.align import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, aligned_size
from vllm_hpu_mm.preprocess.limits import dimension_problem, size_limits
from vllm_hpu_mm.values import AlignMode

ImageSource = Image.Image | bytes | str | os.PathLike[str]
Rgb = tuple[int, int, int]

WHITE: Rgb = (255, 255, 255)
RESAMPLE = Image.Resampling.BICUBIC
ACCEPTED = "a complete, uncorrupted image in a format Pillow decodes (JPEG, PNG, GIF, WebP, BMP, TIFF, ...)"
_EXIF_ORIENTATION = 0x0112
_DECODE_ERRORS = (Image.DecompressionBombError, OSError, UnidentifiedImageError, SyntaxError, ValueError, EOFError)


def check_dimensions(
    width: int, height: int, *, max_image_pixels: int | None = None, max_aspect_ratio: float | None = None
) -> None:
    """Raise :class:`ImageError` unless a ``width`` x ``height`` image is one we accept (:func:`dimension_problem`)."""
    max_image_pixels, max_aspect_ratio = size_limits(max_image_pixels, max_aspect_ratio)
    problem = dimension_problem(width, height, max_image_pixels=max_image_pixels, max_aspect_ratio=max_aspect_ratio)
    if problem == "empty":
        raise ImageError(f"image size {width}x{height} is empty; accepted: width and height >= 1 pixel")
    if problem == "aspect_ratio":
        aspect = max(width, height) / min(width, height)
        raise ImageError(
            f"image size {width}x{height} has aspect ratio {aspect:.1f}:1; accepted: at most {max_aspect_ratio:g}:1"
        )
    if problem == "pixels":
        raise ImageError(
            f"image size {width}x{height} is {width * height} pixels; accepted: at most {max_image_pixels} "
            "(VLLM_HPU_MM_MAX_IMAGE_PIXELS), larger images are refused before decoding as decompression bombs"
        )


def _open(source: ImageSource) -> Image.Image:
    if isinstance(source, Image.Image):
        return source
    if isinstance(source, bytes):
        if not source:
            raise ImageError(f"image data is empty (0 bytes); accepted: {ACCEPTED}")
        stream: io.BytesIO | str | os.PathLike[str] = io.BytesIO(source)
        what = f"image data ({len(source)} bytes)"
    elif isinstance(source, (str, os.PathLike)):
        stream, what = source, f"image file {os.fspath(source)!r}"
        try:
            if os.path.getsize(source) == 0:
                raise ImageError(f"{what} is empty (0 bytes); accepted: {ACCEPTED}")
        except OSError as exc:
            raise ImageError(f"{what} cannot be read ({exc.strerror or exc}); accepted: a readable file") from None
    else:
        raise TypeError(f"image source of type {type(source).__name__}; accepted: PIL image, bytes, path")
    try:
        # Image.open reads the header only. Pillow refuses sizes over 2 x Image.MAX_IMAGE_PIXELS here by itself;
        # our own (usually lower) limit is checked by the caller before anything is decoded.
        return Image.open(stream)
    except Image.DecompressionBombError as exc:
        raise ImageError(
            f"{what} is too large to decode safely ({exc}); accepted: at most VLLM_HPU_MM_MAX_IMAGE_PIXELS "
            f"pixels, and never more than Pillow's {2 * (Image.MAX_IMAGE_PIXELS or 0)}"
        ) from None
    except UnidentifiedImageError:
        raise ImageError(f"{what} is not in any image format Pillow recognises; accepted: {ACCEPTED}") from None
    except _DECODE_ERRORS as exc:
        raise ImageError(f"{what} is not a readable image ({_reason(exc)}); accepted: {ACCEPTED}") from None


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _to_8bit(image: Image.Image) -> Image.Image:
    """32-bit integer and float single-channel images: scale into 0..255 instead of clipping."""
    if image.mode.startswith("I"):
        # PNG and TIFF 16-bit grey load as I;16* or I: map 0..65535 onto 0..255.
        values = np.asarray(image, dtype=np.float32) / np.float32(257)
    else:  # "F": 0..1 if every value is in it, else assumed to be 0..255
        values = np.asarray(image, dtype=np.float32)
        finite = values[np.isfinite(values)]
        if finite.size and finite.min() >= 0.0 and finite.max() <= 1.0:
            values = values * np.float32(255)
        values = np.nan_to_num(values, nan=0.0)
    return Image.fromarray(np.clip(np.rint(values), 0, 255).astype(np.uint8), mode="L")


def _to_rgb(image: Image.Image, fill: Rgb, *, keep_grey: bool = False) -> Image.Image:
    """Any Pillow mode to RGB; transparency composited on ``fill``. ``keep_grey`` leaves grey images as ``L``."""
    if image.mode == "RGB" or (keep_grey and image.mode == "L"):
        return image
    if image.mode.startswith("I") or image.mode == "F":
        grey = _to_8bit(image)
        return grey if keep_grey else grey.convert("RGB")
    has_alpha = image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in image.info
    if not has_alpha:
        return image.convert("RGB")
    rgba = image.convert("RGBA")
    canvas = Image.new("RGB", rgba.size, fill)
    canvas.paste(rgba, mask=rgba.getchannel("A"))
    return canvas


def load_image(
    source: ImageSource,
    *,
    max_image_pixels: int | None = None,
    max_aspect_ratio: float | None = None,
    fill: Rgb = WHITE,
) -> Image.Image:
    """Decode ``source`` (a PIL image, encoded bytes, or a path) into an upright RGB image.

    The header size is checked against the limits (see :func:`check_dimensions`) before decoding; the first frame
    of an animation is taken; EXIF orientation is applied; any mode becomes RGB (16-bit scaled, alpha composited on
    ``fill``, white by default). Raises :class:`ImageError` for anything that cannot be decoded completely.
    """
    return _load(source, max_image_pixels, max_aspect_ratio, fill, keep_grey=False)


def _load(
    source: ImageSource, max_image_pixels: int | None, max_aspect_ratio: float | None, fill: Rgb, *, keep_grey: bool
) -> Image.Image:
    max_image_pixels, max_aspect_ratio = size_limits(max_image_pixels, max_aspect_ratio)
    image = _open(source)
    check_dimensions(*image.size, max_image_pixels=max_image_pixels, max_aspect_ratio=max_aspect_ratio)
    try:
        if getattr(image, "is_animated", False):
            image.seek(0)
        # Truncated data fails here (unless someone set PIL.ImageFile.LOAD_TRUNCATED_IMAGES process-wide).
        image.load()
        # exif_transpose copies even an upright image; only call it when there is a rotation or flip to apply.
        if image.getexif().get(_EXIF_ORIENTATION, 1) != 1:
            image = ImageOps.exif_transpose(image)
        return _to_rgb(image, fill, keep_grey=keep_grey)
    except _DECODE_ERRORS as exc:
        raise ImageError(f"image could not be decoded ({_reason(exc)}); accepted: {ACCEPTED}") from None


@dataclasses.dataclass(frozen=True)
class AlignedImage:
    """An image at its aligned size, and how it got there."""

    image: Image.Image
    #: ``(width, height)`` after EXIF orientation, before alignment.
    original_size: tuple[int, int]
    #: ``(width, height)`` of :attr:`image`: both multiples of the alignment factor.
    size: tuple[int, int]
    mode: AlignMode
    #: False when every original pixel is kept as it was (already aligned, or padded).
    resampled: bool


def align_image(
    source: ImageSource,
    *,
    min_pixels: int = QWEN_MIN_PIXELS,
    max_pixels: int = QWEN_MAX_PIXELS,
    mode: AlignMode = AlignMode.NEAREST,
    max_image_pixels: int | None = None,
    max_aspect_ratio: float | None = None,
    fill: Rgb = WHITE,
) -> AlignedImage:
    """Load ``source`` (see :func:`load_image`) and bring it to :func:`~.align.aligned_size` with one resize.

    ``NEAREST`` and ``DOWN`` resize to the target (aspect kept as closely as the grid allows); an image already at
    its target is returned as it is. ``PAD`` places the image, unresampled, at the top left of a ``fill`` canvas;
    only when the canvas would exceed ``max_pixels`` is the image first scaled down, keeping its exact aspect ratio,
    to fit inside the capped canvas.
    """
    # Grey images are resized as one channel and expanded to RGB afterwards: the same pixels (the bicubic filter
    # treats channels alike), a third of the work.
    image = _load(source, max_image_pixels, max_aspect_ratio, fill, keep_grey=True)
    width, height = image.size
    target_h, target_w = aligned_size(height, width, min_pixels=min_pixels, max_pixels=max_pixels, mode=mode)
    resampled = False
    if mode is AlignMode.PAD:
        if width > target_w or height > target_h:
            scale = min(target_w / width, target_h / height)
            inner = (min(target_w, max(1, round(width * scale))), min(target_h, max(1, round(height * scale))))
            image, resampled = image.resize(inner, RESAMPLE), True
        if image.size != (target_w, target_h):
            canvas = Image.new("RGB", (target_w, target_h), fill)
            canvas.paste(_as_rgb(image), (0, 0))
            image = canvas
    elif image.size != (target_w, target_h):
        image, resampled = image.resize((target_w, target_h), RESAMPLE), True
    return AlignedImage(_as_rgb(image), (width, height), (target_w, target_h), mode, resampled)


def _as_rgb(image: Image.Image) -> Image.Image:
    return image if image.mode == "RGB" else image.convert("RGB")  # convert() would copy an RGB image

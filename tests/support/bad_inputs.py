"""A corpus of bad and awkward images, built in memory, each labelled with the outcome a server must give.

``reject`` items (corrupt, truncated, empty, absurd aspect, decompression bomb, undecodable) must get an HTTP 4xx
with a message that names the problem; ``accept`` items are awkward but valid (CMYK, 16-bit, palette, RGBA,
animated GIF, 1x1, grayscale, long-but-allowed) and must get a normal completion. The bomb is a hand-written PNG
header claiming a huge size with a few bytes of data: nothing big is ever allocated.

Show the corpus::

    python -m tests.support.bad_inputs
"""

from __future__ import annotations

import base64
import dataclasses
import io
import struct
import zlib
from typing import Literal

import numpy as np
from PIL import Image

from tests.support.data import data_url

Expect = Literal["reject", "accept"]


@dataclasses.dataclass(frozen=True)
class BadInput:
    """One corpus item: ``url`` is what goes into ``image_url.url`` (a data URL, possibly a malformed one)."""

    name: str
    what: str
    expect: Expect
    url: str
    #: The raw image bytes behind ``url`` (None when the URL itself is malformed).
    data: bytes | None


def _encode(image: Image.Image, fmt: str, **save: object) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **save)
    return out.getvalue()


def synthetic_photo(width: int, height: int, seed: int = 0) -> Image.Image:
    """Smooth gradients plus noise: compresses like a photo, so truncation hits real entropy-coded data."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 / max(width, 1), y * 255 / max(height, 1), (x + y) * 127 / max(width + height, 1)], -1)
    pixels = np.clip(base + rng.normal(0, 20, base.shape), 0, 255).astype(np.uint8)
    return Image.fromarray(pixels, "RGB")


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def png_header_only(width: int, height: int) -> bytes:
    """A well-formed PNG whose header claims ``width`` x ``height`` RGB but whose data is one tiny zlib stream.

    Decoders that trust the header would allocate width*height*3 bytes; a safe loader refuses on the header.
    """
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    idat = zlib.compress(b"\x00" * 64)
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", idat) + _png_chunk(b"IEND", b"")


def _animated_gif() -> bytes:
    frames = [synthetic_photo(120, 90, seed).convert("P") for seed in range(3)]
    return _encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)


def _sixteen_bit_png() -> bytes:
    ramp = (np.arange(200 * 150, dtype=np.uint32).reshape(150, 200) * 2).astype(np.uint16)
    return _encode(Image.fromarray(ramp), "PNG")  # uint16 -> mode I;16


def _rgba_png() -> bytes:
    rgba = synthetic_photo(180, 120).convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize((180, 120)))
    return _encode(rgba, "PNG")


def corpus() -> list[BadInput]:
    """Every item, rejects first. Deterministic: the same bytes on every call."""
    jpeg = _encode(synthetic_photo(320, 240), "JPEG", quality=90)
    png = _encode(synthetic_photo(320, 240), "PNG")
    corrupt = bytearray(png)
    corrupt[33:] = bytes((b * 7 + 13) % 256 for b in corrupt[33:])  # keep signature + IHDR, scramble the rest
    items: list[tuple[str, str, Expect, bytes | str, str]] = [
        ("corrupt_png", "valid PNG header, scrambled data", "reject", bytes(corrupt), "image/png"),
        ("truncated_jpeg", "JPEG cut at half its length", "reject", jpeg[: len(jpeg) // 2], "image/jpeg"),
        ("truncated_png", "PNG cut at half its length", "reject", png[: len(png) // 2], "image/png"),
        ("zero_bytes", "empty data URL payload (0 bytes)", "reject", b"", "image/png"),
        ("zero_by_zero", "PNG header claiming 0x0 pixels", "reject", png_header_only(0, 0), "image/png"),
        ("one_by_20000", "1x20000 PNG (aspect 20000:1)", "reject", _encode(Image.new("L", (1, 20000)), "PNG"), ""),
        ("one_by_300", "1x300 PNG (aspect 300:1)", "reject", _encode(Image.new("L", (1, 300)), "PNG"), ""),
        ("decompression_bomb", "PNG header claiming 60000x60000", "reject", png_header_only(60000, 60000), ""),
        ("non_image_bytes", "plain text sent as image/png", "reject", b"this is not an image\n" * 8, "image/png"),
        (
            "invalid_base64",
            "data URL whose payload is not base64",
            "reject",
            "data:image/png;base64,@@not*base64@@",
            "",
        ),
        ("cmyk_jpeg", "CMYK JPEG", "accept", _encode(synthetic_photo(200, 150).convert("CMYK"), "JPEG"), "image/jpeg"),
        ("sixteen_bit_png", "16-bit grayscale PNG", "accept", _sixteen_bit_png(), "image/png"),
        ("palette_png", "palette (P mode) PNG", "accept", _encode(synthetic_photo(200, 150).convert("P"), "PNG"), ""),
        ("rgba_png", "RGBA PNG with an alpha gradient", "accept", _rgba_png(), "image/png"),
        ("animated_gif", "3-frame animated GIF (first frame used)", "accept", _animated_gif(), "image/gif"),
        ("grayscale_png", "8-bit grayscale PNG", "accept", _encode(synthetic_photo(150, 200).convert("L"), "PNG"), ""),
        ("one_by_one", "1x1 PNG (upscaled to the minimum)", "accept", _encode(Image.new("RGB", (1, 1)), "PNG"), ""),
        (
            "wide_3000x200",
            "3000x200 JPEG (aspect 15:1)",
            "accept",
            _encode(synthetic_photo(3000, 200), "JPEG"),
            "image/jpeg",
        ),
    ]
    out = []
    for name, what, expect, payload, mime in items:
        if isinstance(payload, str):
            out.append(BadInput(name, what, expect, payload, None))
        else:
            out.append(BadInput(name, what, expect, data_url(payload, mime or "image/png"), payload))
    return out


def _is_base64(url: str) -> bool:
    try:
        base64.b64decode(url.split(",", 1)[1], validate=True)
    except ValueError:
        return False
    return True


def main() -> int:
    print(f"| {'item':<20} | {'expect':<6} | {'bytes':>7} | what")
    print(f"|{'-' * 22}|{'-' * 8}|{'-' * 9}|{'-' * 40}")
    for item in corpus():
        size = "-" if item.data is None else str(len(item.data))
        note = "" if _is_base64(item.url) else " (URL not base64)"
        print(f"| {item.name:<20} | {item.expect:<6} | {size:>7} | {item.what}{note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

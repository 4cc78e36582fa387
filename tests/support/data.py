"""Where the tests' fixtures live: everything is inside the repository (sources in ``tests/data/SOURCES.md``)."""

from __future__ import annotations

import base64
from pathlib import Path

#: The tests folder and the repository it sits in.
TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
DATA = TESTS / "data"
#: Real server logs (sources in tests/data/logs/SOURCES.md).
LOGS = DATA / "logs"
#: A stand-in ``habana_frameworks`` for tests of the HPU code paths (tests/stubs/README.md).
STUBS = TESTS / "stubs"
#: Seven real photos and scans from scikit-image (CC0 / public domain / BSD-3).
IMAGES = DATA / "images"
PHOTOS = sorted(p for p in IMAGES.iterdir() if p.suffix in (".png", ".jpg"))
#: (width, height) of each photo as published (tests/data/SOURCES.md), to check header readers against.
PHOTO_SIZES = {
    "skimage_camera.png": (512, 512),
    "skimage_chelsea.png": (451, 300),
    "skimage_clock_motion.png": (400, 300),
    "skimage_coins.png": (384, 303),
    "skimage_page.png": (384, 191),
    "skimage_rocket.jpg": (640, 427),
    "skimage_text.png": (448, 172),
}
#: Small width,height CSVs of public data sets.
SIZES = DATA / "image_sizes"
#: The two real size distributions that ship with the package (``vllm_hpu_mm/data``).
EMBEDDED_SIZES = REPO / "vllm_hpu_mm" / "data"
#: Every size CSV the tests plan over.
SIZE_CSVS = sorted([*SIZES.glob("*.csv"), *EMBEDDED_SIZES.glob("*.csv")], key=lambda p: p.name)


def size_csv(name: str) -> Path:
    """The size CSV ``name`` (e.g. ``coco_val2017.csv``), from tests/data or the package."""
    for folder in (SIZES, EMBEDDED_SIZES):
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"no size CSV {name} in {SIZES} or {EMBEDDED_SIZES}")


def data_url(image: bytes, mime: str = "image/png") -> str:
    """``image`` bytes as a base64 ``data:`` URL, the form the OpenAI API accepts inline."""
    return f"data:{mime};base64,{base64.b64encode(image).decode('ascii')}"

"""Where the bucket planner gets image sizes from, and how sizes become aligned patch counts.

Sources: a CSV with a ``width,height`` header (:func:`read_sizes_csv`), a folder of images whose headers are read
with Pillow (:func:`scan_images`), a synthetic grid between ``min_pixels`` and ``max_pixels``
(:func:`synthetic_sizes`, assumption stated there), or the real distributions shipped in ``vllm_hpu_mm/data``
(:func:`embedded_sizes`). Sizes are ``(width, height)`` in pixels, as published.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import warnings
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.preprocess.align import QWEN_MIN_PIXELS, aligned_size, patch_count
from vllm_hpu_mm.values import AlignMode

Size = tuple[int, int]  # (width, height)

#: The real image-size CSVs shipped in ``vllm_hpu_mm/data`` (sources in data/README.md), planned over by default.
EMBEDDED_DATASETS = ("coco_val2017.csv", "mathvista_testmini.csv")
#: ``synthetic_sizes`` grid: areas log-uniform over [min_pixels, max_pixels] in this many steps ...
SYNTHETIC_AREA_STEPS = 64
#: ... times these aspect ratios (width / height): square, 4:3, 3:2 and 16:9, both orientations.
SYNTHETIC_ASPECTS = (1.0, 4 / 3, 3 / 4, 3 / 2, 2 / 3, 16 / 9, 9 / 16)
SYNTHETIC_ASSUMPTION = (
    f"synthetic sizes: {SYNTHETIC_AREA_STEPS} areas log-uniform between min_pixels and max_pixels x aspect ratios "
    "1:1, 4:3, 3:4, 3:2, 2:3, 16:9, 9:16, all equally likely"
)
#: ``max_pixels`` standing for "no cap" when measuring how far an image was shrunk.
_UNCAPPED = 1 << 62


@dataclasses.dataclass(frozen=True)
class SizeSet:
    """Image sizes and a human-readable description of where they came from."""

    sizes: tuple[Size, ...]
    source: str


@dataclasses.dataclass(frozen=True)
class PatchSample:
    """Aligned patch counts of a set of images, one per image, in input order."""

    counts: tuple[int, ...]
    #: Images whose aligned size was capped below their natural 112-grid size by ``max_pixels``.
    num_shrunk: int


def read_sizes_csv(path: str | Path) -> SizeSet:
    """Sizes from a CSV whose header names ``width`` and ``height`` columns (other columns are ignored).

    Raises :class:`ConfigError` naming the file and line for a missing header or a bad row.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"--sizes {p}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"--sizes {p}: not a UTF-8 text CSV; expected a 'width,height' header") from None
    return SizeSet(_parse_csv(text.splitlines(), str(p)), f"{p.name}")


def _parse_csv(lines: Iterable[str], name: str) -> tuple[Size, ...]:
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        raise ConfigError(f"{name}: empty file; expected a 'width,height' header then one row per image")
    columns = [h.strip().lower() for h in header]
    if "width" not in columns or "height" not in columns:
        raise ConfigError(f"{name}:1: header {','.join(header)!r} lacks 'width' and 'height' columns")
    wi, hi = columns.index("width"), columns.index("height")
    sizes: list[Size] = []
    for line, row in enumerate(reader, start=2):
        if not row or all(not cell.strip() for cell in row):
            continue
        try:
            w, h = int(row[wi]), int(row[hi])
        except (ValueError, IndexError):
            raise ConfigError(
                f"{name}:{line}: bad row {','.join(row)!r}; expected two positive integers width,height"
            ) from None
        if w <= 0 or h <= 0:
            raise ConfigError(f"{name}:{line}: size {w}x{h} is not positive; expected positive width,height")
        sizes.append((w, h))
    if not sizes:
        raise ConfigError(f"{name}: no rows after the header; expected one 'width,height' row per image")
    return tuple(sizes)


def embedded_sizes(names: Sequence[str] = EMBEDDED_DATASETS) -> SizeSet:
    """The real size distributions shipped with the package (default: COCO val2017 + MathVista testmini)."""
    sizes: list[Size] = []
    parts: list[str] = []
    for name in names:
        text = resources.files("vllm_hpu_mm").joinpath("data").joinpath(name).read_text(encoding="utf-8")
        found = _parse_csv(text.splitlines(), name)
        sizes.extend(found)
        parts.append(f"{name} ({len(found)} images)")
    return SizeSet(tuple(sizes), "embedded real sizes: " + " + ".join(parts))


def scan_images(folder: str | Path, *, progress: bool = True) -> tuple[SizeSet, int]:
    """Sizes of every image under ``folder`` (recursively), read from file headers only; and how many files
    were skipped as not images. EXIF orientations 5-8 (rotated by 90 degrees) swap width and height, as the
    preprocessor does when it applies the orientation.
    """
    from PIL import Image
    from tqdm import tqdm

    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"--images {root}: not a folder; expected a folder of image files")
    files = sorted(f for f in root.rglob("*") if f.is_file())
    sizes: list[Size] = []
    skipped = 0
    # Only headers are read, never pixels, so Pillow's decompression-bomb guard (which would refuse huge scans
    # at open) is lifted for the scan and restored after it.
    limit = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            for f in tqdm(files, desc=f"reading {root.name or root}", unit="file", disable=not progress, leave=False):
                size = _header_size(f)
                if size is None:
                    skipped += 1
                else:
                    sizes.append(size)
    finally:
        Image.MAX_IMAGE_PIXELS = limit
    if not sizes:
        raise ConfigError(f"--images {root}: no readable images among {len(files)} files")
    return SizeSet(tuple(sizes), f"{root} ({len(sizes)} images, {skipped} non-image files skipped)"), skipped


def _header_size(path: Path) -> Size | None:
    """``(width, height)`` as displayed (EXIF orientation applied), or None if the file is not a readable image."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            w, h = img.size
            if img.format == "PNG":  # PngImageFile.getexif() decodes the pixels; the header's eXIf is in info
                exif = Image.Exif()
                if img.info.get("exif"):
                    exif.load(img.info["exif"])
            else:
                exif = img.getexif()
            if exif.get(0x0112, 1) in (5, 6, 7, 8):  # rotated by 90 degrees
                w, h = h, w
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return None
    return (int(w), int(h)) if w > 0 and h > 0 else None


def synthetic_sizes(min_pixels: int, max_pixels: int) -> SizeSet:
    """A stated assumption when no real sizes are known: see :data:`SYNTHETIC_ASSUMPTION`."""
    if min_pixels <= 0 or max_pixels < min_pixels:
        raise ConfigError(
            f"min_pixels={min_pixels}, max_pixels={max_pixels}: need 0 < min_pixels <= max_pixels for a synthetic grid"
        )
    sizes: list[Size] = []
    lo, hi = math.log(min_pixels), math.log(max_pixels)
    for step in range(SYNTHETIC_AREA_STEPS):
        area = math.exp(lo + (hi - lo) * step / (SYNTHETIC_AREA_STEPS - 1))
        for aspect in SYNTHETIC_ASPECTS:
            sizes.append((max(1, round(math.sqrt(area * aspect))), max(1, round(math.sqrt(area / aspect)))))
    return SizeSet(tuple(sizes), SYNTHETIC_ASSUMPTION)


def patch_counts(
    sizes: Sequence[Size],
    *,
    min_pixels: int = QWEN_MIN_PIXELS,
    max_pixels: int,
    mode: AlignMode = AlignMode.NEAREST,
) -> PatchSample:
    """Aligned patch count of each ``(width, height)``, by :func:`~vllm_hpu_mm.preprocess.align.aligned_size`."""
    counts: list[int] = []
    shrunk = 0
    natural_cache: dict[Size, tuple[int, bool]] = {}
    for w, h in sizes:
        cached = natural_cache.get((w, h))
        if cached is None:
            ah, aw = aligned_size(h, w, min_pixels=min_pixels, max_pixels=max_pixels, mode=mode)
            n = patch_count(ah, aw)
            nh, nw = aligned_size(h, w, min_pixels=min_pixels, max_pixels=_UNCAPPED, mode=mode)
            cached = natural_cache[(w, h)] = (n, n < patch_count(nh, nw))
        counts.append(cached[0])
        shrunk += cached[1]
    return PatchSample(tuple(counts), shrunk)

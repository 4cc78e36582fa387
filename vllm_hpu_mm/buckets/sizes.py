"""Where the bucket planner gets image sizes from, and how sizes become aligned patch counts.

Sources: a CSV with a ``width,height`` header, the request-level traffic file included (:func:`read_sizes_csv`;
text-only rows carry no image), a folder of images whose headers are read with Pillow (:func:`scan_images`), a
synthetic grid between ``min_pixels`` and ``max_pixels`` (:func:`synthetic_sizes`, assumption stated there), or the
real distributions shipped in ``vllm_hpu_mm/data`` (:func:`embedded_sizes`). Sizes are ``(width, height)`` in
pixels, as published.

Sizes are held as counts (size -> images), never one entry per image, and aligned once per distinct size: the work
is bounded by the distinct sizes, whatever the number of images.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.preprocess.align import QWEN_MIN_PIXELS, aligned_size, patch_count, stock_patches
from vllm_hpu_mm.traffic.csvfile import parse_rows, read_traffic_csv
from vllm_hpu_mm.traffic.requests import Size, Traffic
from vllm_hpu_mm.values import AlignMode

__all__ = [
    "EMBEDDED_DATASETS",
    "OR_CSV",
    "PatchSample",
    "Size",
    "SizeSet",
    "Sizes",
    "as_counts",
    "embedded_sizes",
    "images_of",
    "is_folder",
    "name_unreadable",
    "patch_counts",
    "read_sizes_csv",
    "scan_images",
    "synthetic_sizes",
]

#: Sizes one per image, or weighted: size -> images.
Sizes = Sequence[Size] | Mapping[Size, int]

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


def as_counts(sizes: Sizes) -> dict[Size, int]:
    """Sizes as size -> images (a mapping is taken as it is, zero counts dropped)."""
    if isinstance(sizes, Mapping):
        return {(int(w), int(h)): int(n) for (w, h), n in sizes.items() if n}
    return dict(Counter((int(w), int(h)) for w, h in sizes))


@dataclasses.dataclass(frozen=True)
class SizeSet:
    """Image sizes as counts (size -> images) and a human-readable description of where they came from."""

    counts: Mapping[Size, int]
    source: str
    #: Files named as images (an image extension) that no image reader opens or decodes, as the served loader
    #: refuses them (vLLM's ``open_image`` or ``image.load()`` raises): left out, counted as refused by the admission.
    unreadable: tuple[str, ...] = ()

    @classmethod
    def of(cls, sizes: Sizes, source: str, unreadable: tuple[str, ...] = ()) -> SizeSet:
        return cls(as_counts(sizes), source, unreadable)

    @property
    def num_images(self) -> int:
        return sum(self.counts.values())

    @staticmethod
    def combine(parts: Iterable[SizeSet]) -> SizeSet:
        items = list(parts)
        total: Counter[Size] = Counter()
        for part in items:
            total.update(part.counts)
        return SizeSet(dict(total), " + ".join(p.source for p in items), tuple(f for p in items for f in p.unreadable))


@dataclasses.dataclass(frozen=True)
class PatchSample:
    """Aligned patch counts of a set of images: patches -> images."""

    counts: Mapping[int, int]
    #: Images whose aligned size was capped below their natural 112-grid size by ``max_pixels``.
    num_shrunk: int
    #: Under ``down``: the stock patch counts (Qwen2.5-VL's own processor) of the images that get more patches than
    #: that, stock -> images (an image under one 112-px tile, or raised to ``min_pixels`` in whole tiles).
    above_stock: Mapping[int, int] = dataclasses.field(default_factory=dict)

    @property
    def num_images(self) -> int:
        return sum(self.counts.values())


def images_of(traffic: Traffic) -> SizeSet:
    """The images a traffic carries (text-only requests left out); :class:`ConfigError` when there are none."""
    images = traffic.images()
    if not images:
        raise ConfigError(f"{traffic.source}: no images (every row is a text-only request); expected width,height "
                          "rows")  # fmt: skip
    return SizeSet(images, traffic.source)


def read_sizes_csv(path: str | Path, *, flag: str = "--sizes") -> SizeSet:
    """The images of a CSV whose header names ``width`` and ``height`` (the request-level traffic file included:
    other columns are read there, text-only rows carry no image). :class:`ConfigError` names the flag, file and
    line of a bad header or row."""
    traffic = read_traffic_csv(path, flag=flag, folder=True)  # --sizes takes a folder of images too
    return images_of(traffic)


def embedded_sizes(names: Sequence[str] = EMBEDDED_DATASETS) -> SizeSet:
    """The real size distributions shipped with the package (default: COCO val2017 + MathVista testmini)."""
    parts = []
    for name in names:
        text = resources.files("vllm_hpu_mm").joinpath("data").joinpath(name).read_text(encoding="utf-8")
        counts, _, _ = parse_rows(csv.reader(io.StringIO(text)), name)
        found = images_of(Traffic(dict(counts), name))
        parts.append(SizeSet(found.counts, f"{name} ({found.num_images} images)"))
    total = SizeSet.combine(parts)
    return SizeSet(total.counts, "embedded real sizes: " + total.source)


def scan_images(
    folder: str | Path, *, progress: bool = True, flag: str = "--images", also: str = ""
) -> tuple[SizeSet, int]:
    """Sizes of every image under ``folder`` (recursively), read from file headers; and how many files were skipped
    as not images. Each image is also decoded (:func:`_served_size`), so one the server cannot decode is named as
    unreadable, not planned. ``flag``: the flag the user typed, ``also``: what else it accepts (both in its
    errors). EXIF orientations 5-8 (rotated by 90 degrees) swap width and height, as the
    preprocessor does when it applies the orientation.
    """
    from PIL import Image
    from tqdm import tqdm

    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"{flag} {root}: not a folder; expected a folder of image files")
    files = _folder_files(root)
    sizes: list[Size] = []
    unreadable: list[str] = []
    skipped = 0
    image_suffixes = set(Image.registered_extensions())
    # Sizes come from headers, and only images within Pillow's decompression-bomb guard are decoded, so the guard
    # (which would refuse huge scans at open) is lifted for the scan and restored after it.
    limit = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            for f in tqdm(files, desc=f"reading {root.name or root}", unit="file", disable=not progress, leave=False):
                size = _served_size(f, decode_up_to=limit)
                # A file that cannot be read at all (a dangling link, a link loop, no permission) is named whatever
                # its name: the server cannot read it either (vLLM 0.32 reads a local image with
                # ``filepath.read_bytes()``, vllm/multimodal/media/image.py:107), and it may well be an image.
                if size is None and (f.suffix.lower() in image_suffixes or not _opens(f)):
                    unreadable.append(f.relative_to(root).as_posix())
                elif size is None:
                    skipped += 1
                else:
                    sizes.append(size)
    finally:
        Image.MAX_IMAGE_PIXELS = limit
    if not sizes:
        raise ConfigError(f"{flag} {root}: no readable images among {len(files)} files; accepted: a folder of "
                          f"image files (any format Pillow reads){also}")  # fmt: skip
    source = f"{root} ({len(sizes)} images, {skipped} non-image files skipped)"
    return SizeSet.of(sizes, source, tuple(unreadable)), skipped


#: What else an option that takes a folder of images accepts (``--sizes CSV|DIR``, ``--plan-sizes CSV|DIR``).
OR_CSV = "; or a CSV with a width,height header"


def is_folder(path: str | Path, *, flag: str) -> bool:
    """Whether ``path`` names a folder (images) rather than a file (a CSV): a path the system cannot even look up (a
    name too long, a component not a folder it can enter) is refused as input, never an internal error."""
    try:
        return Path(path).expanduser().is_dir()
    except OSError as exc:  # ENAMETOOLONG, EACCES: Path.is_dir answers False only for a missing or looping path
        raise ConfigError(f"{flag} {path}: cannot read it ({exc.strerror or exc}); accepted: a folder of images"
                          f"{OR_CSV}") from None  # fmt: skip


#: How many unreadable files a line names (JSON lists them all).
NAMED_UNREADABLE = 3


def name_unreadable(files: Sequence[str]) -> str:
    """The unreadable files of a folder in words, the first :data:`NAMED_UNREADABLE` named (after their count)."""
    named = ", ".join(files[:NAMED_UNREADABLE]) + (", ..." if len(files) > NAMED_UNREADABLE else "")
    return f"image file{'s' if len(files) != 1 else ''} no reader opens or decodes, as the server cannot: {named}"


def _folder_files(root: Path) -> list[Path]:
    """Every entry under ``root`` that is not a folder (sorted), links included, dangling ones too (so they can be
    named). A link to a folder is followed, as vLLM follows links when it reads a file, but each real folder is read
    once: a link back into a folder already read (``loop -> .``) ends there, so the walk is bounded by the folders
    that exist and no image is counted twice through another path to its folder."""
    files: list[Path] = []
    seen: set[tuple[int, int]] = set()
    todo = [root]
    while todo:
        folder = todo.pop()
        try:
            st = folder.stat()
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            entries = list(os.scandir(folder))
        except OSError:  # a folder that cannot be listed: its files are not known, so none can be named
            continue
        for entry in entries:
            path = folder / entry.name
            try:
                is_dir = entry.is_dir()  # follows a link; False for a dangling one
            except OSError:  # a link loop (ELOOP): not a folder, named as a file that cannot be read
                is_dir = False
            (todo if is_dir else files).append(path)
    return sorted(files)


def _opens(path: Path) -> bool:
    """Whether the file's bytes can be read at all (False: missing behind a link, a loop, no permission)."""
    try:
        with path.open("rb") as fh:
            fh.read(1)
    except OSError:
        return False
    return True


def _served_size(path: Path, *, decode_up_to: int | None) -> Size | None:
    """``(width, height)`` as displayed (EXIF orientation applied), or None if the file is not an image the server
    decodes. vLLM's loader decodes every image (``ImageMediaIO.load_bytes`` calls ``image.load()``, vLLM 0.32
    ``vllm/multimodal/media/image.py:91``) and refuses one whose header opens but whose data is cut or corrupt
    ("image file is truncated"), so each image is decoded here too: a JPEG at 1/8 scale (Pillow's ``draft``: the
    whole scan is still read, so a cut one still fails). An image above ``decode_up_to`` pixels is not decoded: the
    pixel limits refuse it first (:mod:`~vllm_hpu_mm.buckets.admission`), and decoding it would cost gigabytes."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            w, h = img.size
            if decode_up_to is None or w * h <= decode_up_to:
                if img.format == "JPEG":
                    img.draft(img.mode, (max(1, w // 8), max(1, h // 8)))
                img.load()
            if img.format == "PNG":  # PngImageFile.getexif() decodes the pixels; the header's eXIf is in info
                exif = Image.Exif()
                if img.info.get("exif"):
                    exif.load(img.info["exif"])
            else:
                exif = img.getexif()
            if exif.get(0x0112, 1) in (5, 6, 7, 8):  # rotated by 90 degrees
                w, h = h, w
    except Exception:  # Pillow decoders raise more than OSError on bad bytes; the server fails on them too
        return None
    return (int(w), int(h)) if w > 0 and h > 0 else None


def synthetic_sizes(min_pixels: int, max_pixels: int) -> SizeSet:
    """A stated assumption when no real sizes are known: see :data:`SYNTHETIC_ASSUMPTION`."""
    if min_pixels <= 0 or max_pixels < min_pixels:
        raise ConfigError(
            f"min_pixels={min_pixels}, max_pixels={max_pixels} make no synthetic grid; accepted: 0 < min_pixels <= "
            "max_pixels"
        )
    sizes: list[Size] = []
    lo, hi = math.log(min_pixels), math.log(max_pixels)
    for step in range(SYNTHETIC_AREA_STEPS):
        area = math.exp(lo + (hi - lo) * step / (SYNTHETIC_AREA_STEPS - 1))
        for aspect in SYNTHETIC_ASPECTS:
            sizes.append((max(1, round(math.sqrt(area * aspect))), max(1, round(math.sqrt(area / aspect)))))
    return SizeSet.of(sizes, SYNTHETIC_ASSUMPTION)


def patch_counts(
    sizes: Sizes,
    *,
    min_pixels: int = QWEN_MIN_PIXELS,
    max_pixels: int,
    mode: AlignMode = AlignMode.NEAREST,
) -> PatchSample:
    """Aligned patch counts of the images (patches -> images), by
    :func:`~vllm_hpu_mm.preprocess.align.aligned_size`, once per distinct size."""
    counts: Counter[int] = Counter()
    above_stock: Counter[int] = Counter()
    shrunk = 0
    for (w, h), n in as_counts(sizes).items():
        ah, aw = aligned_size(h, w, min_pixels=min_pixels, max_pixels=max_pixels, mode=mode)
        patches = patch_count(ah, aw)
        nh, nw = aligned_size(h, w, min_pixels=min_pixels, max_pixels=_UNCAPPED, mode=mode)
        counts[patches] += n
        shrunk += n if patches < patch_count(nh, nw) else 0
        if mode is AlignMode.DOWN:
            stock = stock_patches(h, w, min_pixels=min_pixels, max_pixels=max_pixels)
            above_stock[stock] += n if patches > stock else 0
    return PatchSample(dict(sorted(counts.items())), shrunk, {k: v for k, v in sorted(above_stock.items()) if v})

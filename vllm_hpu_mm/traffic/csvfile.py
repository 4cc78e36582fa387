"""The request-level traffic file: the image-size CSV, extended.

Header: ``width,height`` (one request per row, its image in pixels, as published or sent), and optionally
``text_tokens`` (the prompt's text tokens, any cached prefix included), ``output_tokens`` (the answer's tokens),
``cached_tokens`` (prefix tokens a prefix-cache hit skips) and ``count`` (how many such requests; default 1). A row
with empty width and height is a text-only request; an empty text cell means "unknown" (drawn from the default text
distribution when a plan needs it). Other columns are ignored, with one note naming them (:class:`InputNote`).
A file with a UTF-16 or UTF-32 byte-order mark is decoded as such (Excel's "Unicode text"); a JSON or YAML file is
refused as what it is.

The file is read as a stream: memory holds the distinct rows only (at most :data:`MAX_DISTINCT`; beyond that a
uniform sample of that many rows is kept, and the source says so), so a file of any length is read in time linear in
its rows and memory bounded by a constant. Values beyond any real request are refused with the line they are on.
"""

from __future__ import annotations

import codecs
import csv
import random
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from vllm_hpu_mm.errors import ConfigError, InputNote
from vllm_hpu_mm.traffic.requests import Request, Traffic

__all__ = ["MAX_COUNT", "MAX_DISTINCT", "MAX_SIDE", "MAX_TOKENS", "parse_rows", "read_traffic_csv"]

#: Longest image side accepted (pixels): no format the server decodes comes near it (JPEG stops at 65,535; the
#: server refuses more than 178,956,970 pixels or an aspect ratio over 200 by default).
MAX_SIDE = 1 << 20
#: Most tokens in one field: ten times the longest context any Qwen2.5-VL checkpoint accepts (1,000,000).
MAX_TOKENS = 10_000_000
#: Most requests one row may stand for.
MAX_COUNT = 10**15
#: Most distinct rows kept; a longer file is sampled uniformly down to this many rows.
MAX_DISTINCT = 200_000
TEXT_COLUMNS = ("text_tokens", "output_tokens", "cached_tokens")
KNOWN_COLUMNS = ("width", "height", *TEXT_COLUMNS, "count")
ACCEPTED = (
    "a header with width,height (and optionally text_tokens, output_tokens, cached_tokens, count), then one row per "
    "request"
)
#: What a flag that reads traffic (a CSV or a folder of images) accepts: its errors say both.
ACCEPTED_OR_FOLDER = f"{ACCEPTED}; or a folder of images"
#: Byte-order marks read as what they say, longest first (UTF-32-LE's starts with UTF-16-LE's).
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))  # fmt: skip


#: Characters of a cell or header an error message echoes.
ECHO_CHARS = 60


def _echo(text: str) -> str:
    return repr(text) if len(text) <= ECHO_CHARS else f"{text[:ECHO_CHARS]!r}... ({len(text):,} characters)"


def _int(cell: str, what: str, where: str, *, low: int, high: int) -> int:
    try:
        value = int(cell.strip().replace("_", ""))
    except ValueError:
        raise ConfigError(f"{where}: {what} {_echo(cell.strip())} is not an integer; accepted: {low}..{high}") from None
    if not low <= value <= high:
        raise ConfigError(f"{where}: {what} {value} is out of range; accepted: {low}..{high}")
    return value


def _optional(row: list[str], index: int | None, what: str, where: str, *, low: int) -> int | None:
    if index is None or index >= len(row) or not row[index].strip():
        return None
    return _int(row[index], what, where, low=low, high=MAX_TOKENS)


def _other_format(header: list[str]) -> str | None:
    """What a first line that is no CSV header looks like: JSON or YAML (a list or a mapping), else None."""
    first = ",".join(header).strip()
    if first.startswith(("[", "{")):
        return "JSON"
    if first.startswith(("- ", "---")) or (":" in first and "," not in first):
        return "YAML"
    return None


def parse_rows(lines: Iterator[list[str]], name: str, expected: str = ACCEPTED) -> tuple[Counter[Request], int, int]:
    """Requests from CSV rows (header first): (distinct requests -> count, rows read, rows kept when sampled).
    ``expected``: what the flag accepts, said by every error."""
    header = next(lines, None)
    if header is None:
        raise ConfigError(f"{name}: empty file; expected {expected}")
    columns = [h.strip().lower() for h in header]
    if not {"width", "height"} <= set(columns) and "text_tokens" not in columns:
        other = _other_format(header)
        if other is not None:
            raise ConfigError(f"{name}: a {other} file, not a CSV; expected a CSV: {expected}")
        raise ConfigError(f"{name}:1: header {_echo(','.join(header))} lacks width,height (or text_tokens); expected "
                          f"{expected}")  # fmt: skip
    twice = [c for c in dict.fromkeys(columns) if c in KNOWN_COLUMNS and columns.count(c) > 1]
    if twice:  # which of the two is meant is a guess (csv.DictReader would take the last, this reader the first)
        raise ConfigError(f"{name}:1: header names {', '.join(twice)} more than once; expected each column at most "
                          f"once: {expected}")  # fmt: skip
    unknown = [c for c in dict.fromkeys(columns) if c and c not in KNOWN_COLUMNS]
    if unknown:  # read, not refused (a published table has more columns), but never silently
        warnings.warn(InputNote(f"{name}: column {', '.join(map(_echo, unknown))} ignored; read: "
                                f"{', '.join(KNOWN_COLUMNS)}"), stacklevel=2)  # fmt: skip
    at = {c: columns.index(c) for c in ("width", "height", *TEXT_COLUMNS, "count") if c in columns}
    counts: Counter[Request] = Counter()  # requests per distinct row
    rows_of: Counter[Request] = Counter()  # file rows per distinct row
    reservoir: list[tuple[Request, float]] | None = None  # once the file has too many distinct rows
    rng = random.Random(0)
    rows = 0
    # a row met before is read as it was then (the same cells, the same request): an image-size file repeats its
    # sizes (COCO val2017: 5,000 rows, 604 distinct), so each distinct row is checked once; at most MAX_DISTINCT kept
    read: dict[tuple[str, ...], tuple[Request, int]] = {}
    for line, row in enumerate(lines, start=2):
        cells = tuple(row)
        known = read.get(cells)
        if known is None:
            if not row or all(not cell.strip() for cell in row):
                continue
            if any(cell.strip() for cell in row[len(header) :]):  # a value no column names: a shifted or joined row
                raise ConfigError(f"{name}:{line}: {len(row)} fields where the header names {len(header)}; expected "
                                  f"{expected}")  # fmt: skip
            known = _request(row, at, f"{name}:{line}")
            if len(read) < MAX_DISTINCT:
                read[cells] = known
        request, count = known
        rows += 1
        if reservoir is None:
            counts[request] += count
            rows_of[request] += 1
            if len(counts) > MAX_DISTINCT:
                reservoir = _sample_rows(counts, rows_of, rng)
        else:
            # reservoir sampling (algorithm R) over the rows: memory stays at MAX_DISTINCT rows
            slot = rng.randrange(rows)
            if slot < MAX_DISTINCT:
                reservoir[slot] = (request, count)
    if reservoir is None:
        return counts, rows, rows
    sampled: Counter[Request] = Counter()
    for request, weight in reservoir:
        sampled[request] += max(1, round(weight))
    return sampled, rows, MAX_DISTINCT


def _sample_rows(
    counts: Counter[Request], rows_of: Counter[Request], rng: random.Random
) -> list[tuple[Request, float]]:
    """A uniform sample of MAX_DISTINCT of the rows read so far, from their distinct counts (each sampled row stands
    for its key's mean count per row)."""
    keys = list(rows_of)
    drawn = np.random.default_rng(rng.randrange(2**32)).multivariate_hypergeometric(
        np.array([rows_of[k] for k in keys], dtype=np.int64), MAX_DISTINCT
    )
    out: list[tuple[Request, float]] = []
    for key, n in zip(keys, drawn, strict=True):
        out.extend([(key, counts[key] / rows_of[key])] * int(n))
    rng.shuffle(out)
    return out


def _request(row: list[str], at: dict[str, int], where: str) -> tuple[Request, int]:
    w_cell = row[at["width"]].strip() if "width" in at and at["width"] < len(row) else ""
    h_cell = row[at["height"]].strip() if "height" in at and at["height"] < len(row) else ""
    if bool(w_cell) != bool(h_cell):
        raise ConfigError(f"{where}: width {w_cell!r} and height {h_cell!r}: give both (an image) or neither (a "
                          "text-only request)")  # fmt: skip
    image = None
    if w_cell:
        width = _int(w_cell, "width", where, low=1, high=MAX_SIDE)
        image = (width, _int(h_cell, "height", where, low=1, high=MAX_SIDE))
    text = _optional(row, at.get("text_tokens"), "text_tokens", where, low=0)
    output = _optional(row, at.get("output_tokens"), "output_tokens", where, low=1)
    cached = _optional(row, at.get("cached_tokens"), "cached_tokens", where, low=0)
    # A text-only row of 0 text tokens is an empty prompt: vLLM 0.32 refuses it at request time and serves on
    # (v1/engine/input_processor.py: "The decoder prompt cannot be empty"); the replay counts it refused ("empty").
    # text_tokens counts the cached prefix (the header's contract), on image rows as on text-only ones
    if text is not None and cached is not None and cached > text:
        kind = "a text-only request" if image is None else "the request (its text tokens include the cached prefix)"
        raise ConfigError(f"{where}: cached_tokens {cached} exceeds text_tokens {text} of {kind}")
    if text is None and cached:
        raise ConfigError(f"{where}: cached_tokens {cached} without text_tokens; accepted: text_tokens with it (a "
                          "row whose text is unknown has its text drawn whole, cached prefix included)")  # fmt: skip
    count = 1
    if "count" in at and at["count"] < len(row) and row[at["count"]].strip():
        count = _int(row[at["count"]], "count", where, low=0, high=MAX_COUNT)
    return Request(image, text, output, cached), count


def _encoding(p: Path) -> str:
    """UTF-8 (a UTF-8 BOM skipped), or the UTF-16/32 a byte-order mark names."""
    with p.open("rb") as f:
        start = f.read(4)
    return next((enc for bom, enc in _BOMS if start.startswith(bom)), "utf-8-sig")


def _looks_utf16(p: Path) -> bool:
    """UTF-16 without a byte-order mark: ASCII text with a NUL byte every other byte."""
    with p.open("rb") as f:
        start = f.read(64)
    return len(start) >= 4 and (start[1::2].count(0) == len(start) // 2 or start[0::2].count(0) == len(start) // 2)


#: The first bytes of the image formats a user may pass where a CSV is asked for (one photo instead of its folder).
_IMAGE_MAGIC = ((b"\xff\xd8\xff", "JPEG"), (b"\x89PNG\r\n\x1a\n", "PNG"), (b"GIF8", "GIF"), (b"BM", "BMP"),
                (b"II*\x00", "TIFF"), (b"MM\x00*", "TIFF"))  # fmt: skip


def _image_format(p: Path) -> str | None:
    try:
        with p.open("rb") as f:
            head = f.read(12)
    except OSError:
        return None  # opening it again names the error
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WebP"
    return next((name for magic, name in _IMAGE_MAGIC if head.startswith(magic)), None)


def read_traffic_csv(path: str | Path, *, flag: str = "--sizes", folder: bool = False) -> Traffic:
    """The traffic a CSV describes; :class:`ConfigError` naming the flag, the file and the line otherwise.
    ``folder``: the flag also takes a folder of images (its errors say so)."""
    p = Path(path).expanduser()
    expected = ACCEPTED_OR_FOLDER if folder else ACCEPTED
    encoded = "; accepted: a UTF-8 (or UTF-16 with a byte-order mark) CSV: "
    if p.is_file() and (image := _image_format(p)) is not None:  # r14images 13: "not UTF-8 text"
        folder_hint = " (pass the folder that holds it)" if folder else ""
        raise ConfigError(f"{flag} {p}: an image file ({image}), not a CSV; expected {expected}{folder_hint}")
    try:
        encoding = _encoding(p)
        if encoding == "utf-8-sig" and _looks_utf16(p):  # NUL bytes decode as UTF-8: the header would be the error
            raise ConfigError(f"{flag} {p}: UTF-16 without a byte-order mark{encoded}{expected}")
        with p.open(encoding=encoding, newline="") as f:
            counts, rows, kept = parse_rows(csv.reader(f), f"{flag} {p}", expected)
    except OSError as exc:
        raise ConfigError(f"{flag} {p}: cannot read it ({exc.strerror or exc}); expected {expected}") from None
    except UnicodeError:
        raise ConfigError(f"{flag} {p}: not UTF-8 text{encoded}{expected}") from None
    except csv.Error as exc:
        raise ConfigError(f"{flag} {p}: not a CSV ({exc}); expected {expected}") from None
    if counts and sum(counts.values()) == 0:
        raise ConfigError(f"{flag} {p}: every row has count 0; accepted: at least one row with count >= 1")
    if not counts:
        raise ConfigError(f"{flag} {p}: no rows after the header; expected {expected}")
    sampled = f", a uniform sample of {kept} of {rows} rows" if kept < rows else ""
    return Traffic(dict(counts), f"{p.name}{sampled}")

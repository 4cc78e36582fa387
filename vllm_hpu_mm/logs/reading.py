"""Reading a log for the doctor: streamed line by line (memory stays bounded for any size), decoded by its byte-order
mark (UTF-8, UTF-16 LE/BE; UTF-16 without a mark is recognised by its zero bytes), colour codes removed."""

from __future__ import annotations

import codecs
import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.logs.patterns import ANSI

__all__ = ["MAX_LINE_CHARS", "detect_encoding", "log_lines", "strip_ansi"]

#: Longer lines are cut here (the rest is skipped unread into memory): a log line worth quoting is far shorter.
MAX_LINE_CHARS = 8192
_SNIFF_BYTES = 4096


def detect_encoding(head: bytes) -> str | None:
    """The text encoding of a file starting with ``head``, or None when it looks binary."""
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    if b"\x00" not in head:
        return "utf-8"
    even, odd = head[0::2], head[1::2]
    # ASCII text in UTF-16 without a mark: every other byte is zero.
    if odd and odd.count(0) >= 0.9 * len(odd) and even.count(0) < 0.1 * len(even):
        return "utf-16-le"
    if even and even.count(0) >= 0.9 * len(even) and odd.count(0) < 0.1 * len(odd):
        return "utf-16-be"
    return None


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text) if "[" in text else text


@contextmanager
def _open(path: str) -> Iterator[BinaryIO]:
    if path == "-":
        yield sys.stdin.buffer
        return
    try:
        f = Path(path).open("rb")  # noqa: SIM115 (closed by the with below; open errors get their own message)
    except OSError as exc:
        raise ConfigError(f"cannot read log {path!r}: {exc.strerror or exc}") from None
    with f:
        yield f


def log_lines(path: str) -> Iterator[str]:
    """The log's lines without line ends or colour codes. Raises :class:`ConfigError` (naming the file) for a
    missing, unreadable, binary or empty log."""
    with _open(path) as raw:
        buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[arg-type,type-var]
        try:
            head = buffered.peek(_SNIFF_BYTES)[:_SNIFF_BYTES]
        except OSError as exc:
            raise ConfigError(f"cannot read log {path!r}: {exc.strerror or exc}") from None
        if not head.strip(b" \t\r\n\x00\xef\xbb\xbf\xff\xfe"):
            raise ConfigError(f"log {path!r} is empty: there is nothing to diagnose; pass the server's log file")
        encoding = detect_encoding(head)
        if encoding is None:
            raise ConfigError(f"log {path!r} looks binary, not a text log; accepted: a UTF-8 or UTF-16 text log")
        text = io.TextIOWrapper(buffered, encoding=encoding, errors="replace", newline=None)
        while True:
            line = text.readline(MAX_LINE_CHARS)
            if not line:
                return
            if not line.endswith("\n"):
                rest = line
                while rest and not rest.endswith("\n"):  # skip the rest of an over-long line
                    rest = text.readline(MAX_LINE_CHARS)
            yield strip_ansi(line.rstrip("\r\n"))

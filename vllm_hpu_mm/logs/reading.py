"""Reading a log for the doctor and the calibration: streamed, so memory stays bounded for any size and any line
length.

- Decoded by its byte-order mark (UTF-8, UTF-16 LE/BE; UTF-16 without a mark is recognised by its zero bytes);
  gzip, bzip2 and xz logs are decompressed as they are read; colour codes and NUL bytes are removed.
- A line longer than :data:`MAX_LINE_CHARS` is read in windows of at most that many characters that overlap by
  :data:`LINE_OVERLAP`, so anything shorter than the overlap (every message and frame the doctor looks for) lies
  whole in one window, wherever the line is cut; the windows keep the line's number.
- Leading NUL bytes (a log truncated in place by log rotation) are skipped in bounded chunks; a run of NUL bytes
  inside the log (a crash and restart, a file written sparse) is dropped and does not make the log "binary". A file
  of nothing but NUL bytes, an archive or a binary format is invalid input, named for what it is.
- A binary stretch before the text (a partial write, a crash's garbage) is skipped: the log is read from the first
  line within :data:`_LOOK_AHEAD` bytes from which the text reads as a log, and a note says how many bytes were
  skipped; a file with no such line there is refused as binary.
- Every read is bounded: a device (``/dev/zero``, a terminal) is refused before it is read; a file, pipe or FIFO is
  read up to :data:`MAX_LOG_BYTES` (after decompression) and :data:`MAX_LOG_LINES` lines, past which it is refused
  with the cap named (a plain file larger than the cap is refused before it is read).
"""

from __future__ import annotations

import bz2
import codecs
import dataclasses
import gzip
import io
import itertools
import lzma
import os
import re
import stat
import sys
import warnings
import zlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import BinaryIO, cast

from vllm_hpu_mm.errors import ConfigError, InputNote
from vllm_hpu_mm.logs.patterns import ANSI
from vllm_hpu_mm.values import size_cap

__all__ = [
    "DIAGNOSE",
    "LINE_OVERLAP",
    "MAX_LINE_CHARS",
    "MAX_LOG_BYTES",
    "MAX_LOG_LINES",
    "Purpose",
    "detect_encoding",
    "log_lines",
    "log_records",
    "strip_ansi",
]  # fmt: skip

#: The longest piece of a line read at once (longer lines come as overlapping windows).
MAX_LINE_CHARS = 8192
#: How much consecutive windows of one long line share.
LINE_OVERLAP = 1024
#: The most text a log may hold (decompressed): 512 MiB, about 30 s of reading on a 2-core machine
#: (benchmarks/performance/results/doctor_large_log.md: 200 MiB in 11-13 s); the failure is at a log's end, so a
#: longer log is refused with the command that passes its end. It also bounds a compressed log that inflates
#: without end.
MAX_LOG_BYTES = 512 << 20
#: The most lines a log may hold (a log of empty lines reads faster than the byte cap would bound).
MAX_LOG_LINES = 50_000_000
_SNIFF_BYTES = 4096
#: A run of this many NUL bytes or more is a hole (a crash, a sparse write), not text in UTF-16.
_NUL_RUN = 4
#: What a damaged file or compressed stream raises while it is read.
_READ_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error, UnicodeError, ValueError, MemoryError)
_CHUNK = 1 << 16
#: How far past a binary start the text of a log is looked for (bounded: a binary file is refused after this).
_LOOK_AHEAD = 1 << 16
ACCEPTED = "accepted: a UTF-8 or UTF-16 text log, plain or gzip/bzip2/xz-compressed"
#: Streams decompressed as they are read, by their magic bytes.
_COMPRESSED: tuple[tuple[bytes, Callable[[BinaryIO], io.BufferedIOBase]], ...] = (
    (b"\x1f\x8b", lambda f: gzip.GzipFile(fileobj=f)),
    (b"BZh", bz2.BZ2File),
    (b"\xfd7zXZ\x00", lzma.LZMAFile),
)
#: Binary formats named in the error: magic bytes -> what the file is.
_BINARY = (
    (b"PK\x03\x04", "a zip archive (extract the log first)"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed (decompress it first: zstd -d)"),
    (b"\x7fELF", "an executable (ELF)"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"%PDF", "a PDF document"),
)


def detect_encoding(head: bytes) -> str | None:
    """The text encoding of a file starting with ``head``, or None when it looks binary: more than 1% NUL bytes (not
    in UTF-16's pattern), or more than 10% of its characters undecodable or control characters."""
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    even, odd = head[0::2], head[1::2]
    # ASCII text in UTF-16 without a mark: every other byte is zero.
    if odd and odd.count(0) >= 0.9 * len(odd) and even.count(0) < 0.1 * len(even):
        return "utf-16-le"
    if even and even.count(0) >= 0.9 * len(even) and odd.count(0) < 0.1 * len(odd):
        return "utf-16-be"
    # A run of NUL bytes is a hole in a text log (a crash and restart), not a sign of a binary format.
    head = _NUL_RUNS.sub(b"", head)
    if head.count(0) > 0.01 * len(head):
        return None
    text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(head, final=False)
    bad = sum(ch == "\ufffd" or (ch < " " and ch not in "\t\r\n\x1b\x00") for ch in text)
    return None if text and bad > 0.1 * len(text) else "utf-8"


_NUL_RUNS = re.compile(rb"\x00{%d,}" % _NUL_RUN)


def _bad_chars(line: bytes) -> int:
    """How many characters of ``line`` :func:`detect_encoding` counts against UTF-8 text (NUL runs are holes)."""
    line = _NUL_RUNS.sub(b"", line)
    text = line.decode("utf-8", errors="replace")
    return sum(ch == "\ufffd" or (ch < " " and ch not in "\t\r\n\x1b") for ch in text)


def _text_start(data: bytes, limit: int) -> int | None:
    """The offset of the first clean line after a newline, within ``limit``, from which the next
    :data:`_SNIFF_BYTES` of ``data`` (or its end) read as UTF-8 text; None when there is none. One pass over the
    lines (a window of bad-character counts), then :func:`detect_encoding` confirms the choice, so the cost stays
    linear in ``data`` whatever it holds."""
    starts = [m.end() for m in re.finditer(rb"\n", data) if m.end() < min(limit, len(data))]
    bounds = [*starts, len(data)]
    bad = [_bad_chars(data[a:b]) for a, b in itertools.pairwise(bounds)]
    total, j = 0, 0  # bad characters of lines i..j-1, the window from line i
    for i, start in enumerate(starts):
        end = min(start + _SNIFF_BYTES, len(data))
        while j < len(starts) and bounds[j] < end:
            total += bad[j]
            j += 1
        window = data[start:end]
        # The first line itself is clean text (a stretch of garbage that ends the binary part is not the log's start).
        first = bad[i] == 0 and data[start : bounds[i + 1]].strip()
        if first and total <= 0.1 * (end - start) and window.strip() and detect_encoding(window) == "utf-8":
            return start
        if j > i:
            total -= bad[i]
        else:
            j = i + 1
    return None


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text) if "[" in text else text


class _Prefixed(io.RawIOBase):
    """``rest`` followed by what is left of ``stream``: a stream whose skipped start is put back."""

    def __init__(self, rest: bytes, stream: BinaryIO) -> None:
        self._rest = rest
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._rest:
            n = min(len(buffer), len(self._rest))
            buffer[:n] = self._rest[:n]
            self._rest = self._rest[n:]
            return n
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _Capped(io.RawIOBase):
    """``stream`` read up to :data:`MAX_LOG_BYTES`; one byte more is refused, naming the log and the cap."""

    def __init__(self, stream: BinaryIO | io.BufferedIOBase, path: str, limit: int) -> None:
        self._stream = stream
        self._path = path
        self._left = limit
        self._limit = limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._stream.read(min(len(buffer), self._left + 1))
        if len(data) > self._left:
            raise ConfigError(_too_large(self._path, self._limit))
        self._left -= len(data)
        buffer[: len(data)] = data
        return len(data)


def _cannot_read(path: str, exc: BaseException) -> str:
    if isinstance(exc, ConfigError):
        return str(exc)
    why = getattr(exc, "strerror", None) or str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return f"cannot read log {path!r}: {why}; {ACCEPTED}"


def _capped(stream: BinaryIO | io.BufferedIOBase, path: str) -> io.BufferedReader:
    """``stream`` buffered, read up to :data:`MAX_LOG_BYTES` (read when called: tests lower it)."""
    return cast(io.BufferedReader, io.BufferedReader(_Capped(stream, path, MAX_LOG_BYTES)))


def _too_large(path: str, limit: int) -> str:
    return (f"log {path!r} holds more than {size_cap(limit)} of text; accepted: a log up to that size: pass the end "
            f"of it (tail -c 500M {path if path != '-' else 'LOG'} | vllm-hpu-mm ... -)")  # fmt: skip


def _refuse_devices(path: str) -> None:
    """A device or socket is refused before it is read (``/dev/zero`` never ends); a plain file larger than the cap
    is refused before it is read."""
    try:
        mode = os.stat(path)
    except OSError:
        return  # opening it names the error
    if _null_device(mode):
        return  # read: it is empty, and said so
    if stat.S_ISCHR(mode.st_mode) or stat.S_ISBLK(mode.st_mode) or stat.S_ISSOCK(mode.st_mode):
        raise ConfigError(f"log {path!r} is a device or socket, not a log file; accepted: a log file, a pipe, or - for "
                          "standard input")  # fmt: skip
    if stat.S_ISREG(mode.st_mode) and mode.st_size > MAX_LOG_BYTES:
        raise ConfigError(_too_large(path, MAX_LOG_BYTES))


def _null_device(st: os.stat_result) -> bool:
    """Whether ``st`` is the null device's (``< /dev/null``): it ends at once, so it is read, and is an empty log."""
    try:
        return stat.S_ISCHR(st.st_mode) and st.st_rdev == os.stat(os.devnull).st_rdev
    except OSError:
        return False


def _refuse_device_stdin() -> None:
    """Standard input from a device (``< /dev/zero``) or a terminal (nothing piped in) is refused, not read; the null
    device is read (an empty log, said so)."""
    try:
        st = os.fstat(sys.stdin.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        return  # not a real file (a test's stream): read it
    mode = st.st_mode
    if not _null_device(st) and (stat.S_ISCHR(mode) or stat.S_ISBLK(mode)):
        raise ConfigError("standard input is a device or a terminal, not a log; accepted: a log piped in "
                          "(cat server.log | vllm-hpu-mm oom-doctor -) or a log file")  # fmt: skip


def _peek(stream: io.BufferedReader, path: str) -> bytes:
    try:
        return stream.peek(_SNIFF_BYTES)[:_SNIFF_BYTES]
    except _READ_ERRORS as exc:
        raise ConfigError(_cannot_read(path, exc)) from None


@dataclasses.dataclass(frozen=True)
class Purpose:
    """What a command reads a log for, named where the log holds no text: the verb (``diagnose``) and the log it
    accepts (the doctor reads any server's log, ``memory compare`` a Gaudi server's memory lines)."""

    task: str = "diagnose"
    accepted: str = "the server's log file"


#: The doctor's: any server's log.
DIAGNOSE = Purpose()


def _skip_nul(stream: io.BufferedReader, path: str, purpose: Purpose) -> io.BufferedReader:
    """The stream from its first byte that is not NUL (read in bounded chunks)."""
    skipped = 0
    while True:
        try:
            chunk = stream.read(_CHUNK)
        except _READ_ERRORS as exc:
            raise ConfigError(_cannot_read(path, exc)) from None
        if not chunk:
            what = f"holds only NUL bytes ({skipped} bytes)" if skipped else "is empty"
            raise ConfigError(f"log {path!r} {what}: there is no text to {purpose.task}; accepted: {purpose.accepted}, "
                              f"{ACCEPTED.removeprefix('accepted: ')}")  # fmt: skip
        rest = chunk.lstrip(b"\x00")
        skipped += len(chunk) - len(rest)
        if rest:
            return io.BufferedReader(_Prefixed(rest, stream))


def _open_text(path: str, stack: ExitStack, purpose: Purpose) -> tuple[io.TextIOWrapper, int]:
    """The log as text, and how many lines a skipped binary start held (so line numbers stay the file's own)."""
    if path == "-":
        raw: BinaryIO = sys.stdin.buffer
        _refuse_device_stdin()
    else:
        if not path.strip():  # Path("") is the current folder: a shell variable left unset
            raise ConfigError(f"the log path is empty; {ACCEPTED}")
        _refuse_devices(path)
        try:
            raw = stack.enter_context(Path(path).open("rb"))  # noqa: SIM115 (the stack closes it)
        except OSError as exc:
            raise ConfigError(f"cannot read log {path!r}: {exc.strerror or exc}; {ACCEPTED}") from None
    stream = _capped(raw, path)
    for _ in range(2):  # a compressed log is decompressed once (not an archive inside an archive)
        head = _peek(stream, path)
        opener = next((opener for magic, opener in _COMPRESSED if head.startswith(magic)), None)
        if opener is None:
            break
        stream = _capped(stack.enter_context(opener(stream)), path)
    head = _peek(stream, path)
    # Log rotation truncates a log in place to NUL bytes (UTF-16-BE text starts with one NUL, not two).
    if head.startswith(b"\x00\x00") or (head and not head.strip(b"\x00")):
        stream = _skip_nul(stream, path, purpose)
        head = _peek(stream, path)
    for magic, what in _BINARY:
        if head.startswith(magic):
            raise ConfigError(f"log {path!r} is {what}, a binary file, not a text log; {ACCEPTED}")
    if not head.strip(b" \t\r\n\x00\xef\xbb\xbf\xff\xfe"):
        raise ConfigError(f"log {path!r} is empty: there is nothing to {purpose.task}; accepted: {purpose.accepted}")
    encoding = detect_encoding(head)
    lines_skipped = 0
    if encoding is None:
        stream, encoding, lines_skipped = _after_binary_start(stream, path)
    if encoding is None:
        raise ConfigError(f"log {path!r} looks binary (NUL bytes or undecodable bytes among its first {len(head)}, "
                          f"and no line of text starts within its first {size_cap(_LOOK_AHEAD)}), not a text log; "
                          f"{ACCEPTED}")  # fmt: skip
    return io.TextIOWrapper(stream, encoding=encoding, errors="replace", newline=None), lines_skipped


def _after_binary_start(stream: io.BufferedReader, path: str) -> tuple[io.BufferedReader, str | None, int]:
    """``stream`` from where its text starts after a binary stretch, noted with the bytes skipped, and the number of
    line ends in that stretch; the encoding is None (and the stream unusable) when no text starts within
    :data:`_LOOK_AHEAD` bytes."""
    try:
        data = stream.read(_LOOK_AHEAD + _SNIFF_BYTES)
    except _READ_ERRORS as exc:
        raise ConfigError(_cannot_read(path, exc)) from None
    start = _text_start(data, _LOOK_AHEAD)
    if start is None:
        return stream, None, 0
    # Line numbers count the skipped stretch's line ends, as an editor or `grep -n` on the file would.
    lines = data[:start].count(b"\n")
    note = (f"log {path!r} starts with {start} bytes that are not text (a partial write, a crash's garbage): "
            f"skipped, read from line {lines + 1}, the first line of text after them")  # fmt: skip
    warnings.warn(InputNote(note), stacklevel=2)
    return io.BufferedReader(_Prefixed(data[start:], stream)), "utf-8", lines


def _clean(text: str) -> str:
    text = text.rstrip("\r\n")
    if "\x00" in text:
        text = text.replace("\x00", "")
    return strip_ansi(text)


def log_records(path: str, purpose: Purpose = DIAGNOSE) -> Iterator[tuple[int, str]]:
    """The log's lines as ``(line number, text)``, without line ends, colour codes or NUL bytes; an over-long line as
    overlapping windows that share its number. Raises :class:`ConfigError` (naming the file) for a missing,
    unreadable, binary, NUL-only or empty log, with what the reading command (``purpose``) accepts."""
    with ExitStack() as stack:
        text, number = _open_text(path, stack, purpose)
        while True:
            try:
                piece = text.readline(MAX_LINE_CHARS)
            except _READ_ERRORS as exc:
                raise ConfigError(_cannot_read(path, exc)) from None
            if not piece:
                return
            number += 1
            if number > MAX_LOG_LINES:
                raise ConfigError(f"log {path!r} holds more than {MAX_LOG_LINES} lines; accepted: a log up to that "
                                  "many lines: pass the end of it (tail -n)")  # fmt: skip
            yield number, _clean(piece)
            while not piece.endswith("\n"):  # the rest of an over-long line, in overlapping windows
                tail = piece[-LINE_OVERLAP:]
                try:
                    more = text.readline(MAX_LINE_CHARS - LINE_OVERLAP)
                except _READ_ERRORS as exc:
                    raise ConfigError(_cannot_read(path, exc)) from None
                if not more:
                    break
                piece = tail + more
                yield number, _clean(piece)


def log_lines(path: str, purpose: Purpose = DIAGNOSE) -> Iterator[str]:
    """:func:`log_records` without the line numbers."""
    for _, text in log_records(path, purpose):
        yield text

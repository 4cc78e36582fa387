"""Where a command writes, checked before anything is read or run: never over one of its inputs (the same file
under any name), never inside a folder given as an input (an ``--images`` folder: a plot written there would be read
as an image, or replace one), never over a file of the user's that is not of the kind the flag writes (a CSV named as a
``--plot``, a log named as ``--output``), never a folder, never into a folder that does not exist. An existing file
of the flag's own kind (a PNG for ``--plot``, a profile for ``--output``, our gauges for ``--textfile``) is
replaced, as a re-run replaces its own output.

A folder a command writes a set of files into (``fleet plan --out``): a new or empty one, or one holding only what
an earlier run wrote there, as its record says (:data:`RECORD`, written last, in ``sha256sum``'s format: every file
listed with its digest). That earlier output is replaced wholly, its files removed before the new ones are written,
so that none of it is left beside them (a node script of a larger, earlier plan would be a node to start). Any other
file there, a recorded file changed since, a link, or an input inside the folder: refused."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Literal

from vllm_hpu_mm.errors import ConfigError

__all__ = [
    "RECORD",
    "OutputKind",
    "check_not_input",
    "check_output",
    "check_output_folder",
    "replace_folder",
    "same_file",
]

#: What a flag writes: a PNG (``--plot``), a ``memory calibrate`` profile (JSON), Prometheus gauges of ours.
OutputKind = Literal["png", "profile", "textfile"]

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: The most of an existing file read to tell whether it is of the flag's kind: a profile or a gauge file of ours is
#: a few KiB; a larger file is not one.
_SNIFF_BYTES = 1 << 20
#: What each kind is, in words, for the refusal.
_WORDS: dict[str, str] = {
    "png": "a PNG image",
    "profile": "a profile written by `vllm-hpu-mm memory calibrate`",
    "textfile": "a gauge file written by `vllm-hpu-mm buckets stale --textfile`",
}
#: What the flag writes, as the refusal names it.
_WRITES: dict[str, str] = {"png": "the plot", "profile": "the profile", "textfile": "the gauges"}
#: The metric prefix of every gauge ``--textfile`` writes (``jobs/stale.py`` ``GAUGES``).
_GAUGE_PREFIX = "vllm_hpu_mm_"


def same_file(a: Path, b: Path) -> bool:
    """``a`` and ``b`` name one file: the same resolved path, or (both existing) the same inode through a link."""
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): only the resolved paths could have matched
        return False


def _of_kind(data: bytes, kind: OutputKind) -> bool:
    if kind == "png":
        return data.startswith(_PNG_MAGIC)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if kind == "profile":
        try:
            value = json.loads(text)
        except ValueError:
            return False
        return isinstance(value, dict) and "version" in value and "costs" in value
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return bool(lines) and all(line.startswith(_GAUGE_PREFIX) for line in lines)


def check_not_input(path: Path, flag: str, raw: str, what: str, inputs: Iterable[tuple[str, str | None]]) -> None:
    """:class:`ConfigError` when ``path`` (a file or folder ``flag`` writes ``what`` to) is one of ``inputs``
    (flag -> path; None, ``-`` and URLs skipped) under any name, or lies inside an input that is a folder."""
    for name, given in inputs:
        if given is None or given == "-" or "://" in given:
            continue
        source = Path(given).expanduser()
        if same_file(path, source):
            raise ConfigError(f"{flag} {raw} is the same file as the {name} {given}: writing {what} there would "
                              f"overwrite it; accepted: another path for {what}")  # fmt: skip
        if source.is_dir() and path.resolve().is_relative_to(source.resolve()):
            raise ConfigError(f"{flag} {raw} is inside the {name} folder {given}: writing {what} there could replace "
                              f"one of its files or be read as one; accepted: a path outside {given}")  # fmt: skip


def check_output(
    raw: str, flag: str, kind: OutputKind, inputs: Iterable[tuple[str, str | None]], *, create_folder: bool = False
) -> Path:
    """``raw`` as the path ``flag`` writes, or :class:`ConfigError` (one line naming the flag, the file and what is
    accepted) when writing there would lose something: it is one of ``inputs`` (flag -> path; None, ``-`` and URLs
    are skipped), a folder, a file that is not ``kind``, or inside a folder that does not exist (unless
    ``create_folder``: a default path whose folder the command makes)."""
    path = Path(raw).expanduser()
    check_not_input(path, flag, raw, _WRITES[kind], inputs)
    if path.is_dir():
        raise ConfigError(f"{flag} {raw} is a folder; accepted: a file path for {_WRITES[kind]}")
    if not create_folder and not path.parent.is_dir():
        raise ConfigError(f"{flag} {raw}: the folder {path.parent} does not exist; accepted: a path in an existing "
                          "folder")  # fmt: skip
    if path.is_file():
        try:
            with path.open("rb") as f:
                data = f.read(_SNIFF_BYTES + 1)
        except OSError as exc:
            raise ConfigError(
                f"{flag} {raw}: cannot read the file there ({exc.strerror or exc}); accepted: a new path, or a "
                f"readable file of {_WORDS[kind]}"
            ) from None
        if data and ((len(data) > _SNIFF_BYTES and kind != "png") or not _of_kind(data, kind)):
            raise ConfigError(f"{flag} {raw} is a file of yours that is not {_WORDS[kind]}: writing {_WRITES[kind]} "
                              "there would overwrite it; accepted: a new path, or one holding such a file")  # fmt: skip
    elif path.exists():
        raise ConfigError(f"{flag} {raw} is not a regular file; accepted: a file path for {_WRITES[kind]}")
    return path


#: The record of what a folder output holds, beside it: ``sha256sum -c vllm-hpu-mm.sha256`` checks it.
RECORD = "vllm-hpu-mm.sha256"
#: The largest file a folder output writes, and so the most of a recorded file read to check it is unchanged.
_MAX_RECORDED_BYTES = 16 << 20
#: One line of the record: a digest, two spaces (a ``*`` for sha256sum's binary mode), a relative POSIX path.
_RECORD_LINE = re.compile(r"([0-9a-f]{64}) [ *](.+)")
_KEEP = "accepted: a new or empty folder, or one holding only a deployment an earlier run wrote there"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _recorded(folder: Path, flag: str, raw: str) -> dict[str, str] | None:
    """The files the folder's record lists (relative path -> digest); None when there is no record. A record that
    is not one of ours (unreadable, a line not a digest and a path inside the folder) is refused."""
    record = folder / RECORD
    if not record.is_file() or record.is_symlink():
        return None
    try:
        with record.open("rb") as f:
            text = f.read(_MAX_RECORDED_BYTES + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        text = "\0"
    listed: dict[str, str] = {}
    for line in text.splitlines():
        match = _RECORD_LINE.fullmatch(line)
        path = PurePosixPath(match.group(2)) if match else None
        if path is None or path.is_absolute() or ".." in path.parts or str(path) in ("", ".", RECORD):
            raise ConfigError(f"{flag} {raw}: its {RECORD} is not a record vllm-hpu-mm wrote; {_KEEP}")
        listed[str(path)] = match.group(1)  # type: ignore[union-attr]
    return listed


def check_output_folder(raw: str, flag: str, inputs: Iterable[tuple[str, str | None]]) -> list[str]:
    """``raw`` as the folder ``flag`` writes into (see the module docstring), or :class:`ConfigError` (one line
    naming the flag, what is there and what is accepted): a file, a folder holding one of ``inputs`` (flag -> path;
    None, ``-`` and URLs skipped), or one holding anything but an earlier output of ours, unchanged. Returns the
    files of that earlier output (relative paths, the record last) that a new one replaces."""
    folder = Path(raw).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{flag} {raw}: not a folder; accepted: a folder for the deployments")
    inputs = list(inputs)
    check_not_input(folder, flag, raw, "the deployments", inputs)
    for name, given in inputs:
        if given is None or given == "-" or "://" in given or not Path(given).expanduser().exists():
            continue  # a model's Hugging Face id, a URL: nothing there to lose
        if Path(given).expanduser().resolve().is_relative_to(folder.resolve()):  # the folder itself, or inside it
            raise ConfigError(f"{flag} {raw} holds the {name} {given}: writing there could replace it; accepted: a "
                              "folder that holds none of the inputs")  # fmt: skip
    if not folder.is_dir():
        return []
    listed = _recorded(folder, flag, raw)
    found: list[str] = []

    def unreadable(exc: OSError) -> None:
        raise ConfigError(f"{flag} {raw}: cannot read {exc.filename} ({exc.strerror or exc}); {_KEEP}")

    # stops at the first file not ours: a home folder given by mistake is not walked whole
    for root, dirs, files in os.walk(folder, onerror=unreadable):
        here = Path(root)
        for entry in sorted(dirs) + sorted(files):
            path = here / entry
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                raise ConfigError(f"{flag} {raw}: {rel} is a link, which vllm-hpu-mm never writes; {_KEEP}")
            if entry in dirs:
                continue
            if not path.is_file():  # a pipe would never end a read
                raise ConfigError(f"{flag} {raw}: {rel} is not a regular file; {_KEEP}")
            if rel == RECORD and listed is not None:
                continue
            if listed is None:
                raise ConfigError(f"{flag} {raw}: the folder holds {rel} and no record ({RECORD}) of an earlier run's "
                                  f"output; {_KEEP}")  # fmt: skip
            if rel not in listed:
                raise ConfigError(f"{flag} {raw}: the folder holds {rel}, which its record ({RECORD}) of an earlier "
                                  f"run's output does not list; {_KEEP}")  # fmt: skip
            try:
                with path.open("rb") as f:
                    data = f.read(_MAX_RECORDED_BYTES + 1)
            except OSError as exc:
                raise ConfigError(f"{flag} {raw}: cannot read {rel} ({exc.strerror or exc}); {_KEEP}") from None
            if _digest(data) != listed[rel]:
                raise ConfigError(f"{flag} {raw}: {rel} was changed since vllm-hpu-mm wrote it; {_KEEP} (unchanged), "
                                  "or remove it first")  # fmt: skip
            found.append(rel)
    return found if listed is None else [*found, RECORD]


def replace_folder(
    raw: str,
    flag: str,
    files: Mapping[str, str],
    inputs: Iterable[tuple[str, str | None]] = (),
    *,
    executable: Collection[str] = (),
) -> list[Path]:
    """Write ``files`` (relative POSIX path -> text) into the folder ``raw``, checked again as
    :func:`check_output_folder` checks it, an earlier output there removed first (its folders too, once empty), the
    ``executable`` ones mode 0755 (a script started as ``./node-0.sh``), then the record. The paths written."""
    old = check_output_folder(raw, flag, inputs)
    folder = Path(raw).expanduser()
    written: list[Path] = []
    try:
        for rel in old:
            (folder / rel).unlink(missing_ok=True)
        for parent in sorted({p for rel in old for p in PurePosixPath(rel).parents if str(p) != "."}, reverse=True):
            with contextlib.suppress(OSError):  # not empty: something of the user's was made there since (kept)
                (folder / parent).rmdir()
        record = []
        for rel, text in files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            data = text.encode("utf-8")
            path.write_bytes(data)
            written.append(path)
            if rel in executable:
                path.chmod(0o755)
            record.append(f"{_digest(data)}  {rel}\n")
        (folder / RECORD).write_text("".join(sorted(record, key=lambda line: line[66:])), encoding="utf-8")
        written.append(folder / RECORD)
    except OSError as exc:
        for path in written:  # no half of a deployment left behind, which a later run would refuse as not ours
            path.unlink(missing_ok=True)
        raise ConfigError(f"{flag} {raw}: cannot write ({exc.strerror or exc}); accepted: a writable folder") from None
    return written

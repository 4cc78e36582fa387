"""Where a command writes, checked before anything is read or run: never over one of its inputs (the same file
under any name), never over a file of the user's that is not of the kind the flag writes (a CSV named as a
``--plot``, a log named as ``--output``), never a folder, never into a folder that does not exist. An existing file
of the flag's own kind (a PNG for ``--plot``, a profile for ``--output``, our gauges for ``--textfile``) is
replaced, as a re-run replaces its own output."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from vllm_hpu_mm.errors import ConfigError

__all__ = ["OutputKind", "check_output", "same_file"]

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


def check_output(
    raw: str, flag: str, kind: OutputKind, inputs: Iterable[tuple[str, str | None]], *, create_folder: bool = False
) -> Path:
    """``raw`` as the path ``flag`` writes, or :class:`ConfigError` (one line naming the flag, the file and what is
    accepted) when writing there would lose something: it is one of ``inputs`` (flag -> path; None, ``-`` and URLs
    are skipped), a folder, a file that is not ``kind``, or inside a folder that does not exist (unless
    ``create_folder``: a default path whose folder the command makes)."""
    path = Path(raw).expanduser()
    for name, given in inputs:
        if given is None or given == "-" or "://" in given:
            continue
        if same_file(path, Path(given).expanduser()):
            raise ConfigError(f"{flag} {raw} is the same file as the {name} {given}: writing {_WRITES[kind]} there "
                              f"would overwrite it; accepted: another path for {_WRITES[kind]}")  # fmt: skip
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

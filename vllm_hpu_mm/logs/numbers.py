"""Numbers read from a log, strictly: a figure is a real number (digits, at most one decimal point, an optional sign)
or the line is garbled. Public logs interleave the output of several processes, so a line can hold ``79.22.5 GiB``
or a count cut into another; such a line is skipped and reported (:class:`Skipped`), never a traceback.

The patterns of :mod:`.patterns` capture a figure loosely (``[\\d.]+``) so that a garbled one is still found and can
be reported; :func:`number` and :func:`integer` are the only ways a captured figure becomes a value.
"""

from __future__ import annotations

import dataclasses
import re

from vllm_hpu_mm.errors import ConfigError

__all__ = [
    "INTEGER",
    "MAX_DIGITS",
    "NUMBER",
    "GarbledNumber",
    "Skipped",
    "SkippedLines",
    "integer",
    "number",
    "skipped_json",
]

#: The most digits a figure of a log has (bytes of a device: 14; a counter: fewer). Longer runs are garbled, and
#: Python refuses to convert integers of over 4,300 digits anyway.
MAX_DIGITS = 18
#: A real number as the runtimes print one: ``12``, ``-0.5``, ``79.16``; nothing else.
NUMBER = re.compile(rf"-?\d{{1,{MAX_DIGITS}}}(?:\.\d{{1,{MAX_DIGITS}}})?")
INTEGER = re.compile(rf"-?\d{{1,{MAX_DIGITS}}}")
#: The most characters of a skipped line quoted back.
_QUOTE = 160


class GarbledNumber(ConfigError):
    """A figure in a log line is not a number (``79.22.5``): the line is garbled."""


def number(text: str | None) -> float:
    """``text`` as a float when it is a real number (:data:`NUMBER`), else :class:`GarbledNumber`."""
    if text is None or NUMBER.fullmatch(text) is None:
        raise GarbledNumber(f"{_quote(text or '')!r} is not a number")
    return float(text)


def integer(text: str | None) -> int:
    """``text`` as an int when it is one (:data:`INTEGER`: at most :data:`MAX_DIGITS` digits), else
    :class:`GarbledNumber`."""
    if text is None or INTEGER.fullmatch(text) is None:
        raise GarbledNumber(f"{_quote(text or '')!r} is not an integer")
    return int(text)


def _quote(text: str) -> str:
    return text if len(text) <= _QUOTE else text[: _QUOTE - 3] + "..."


@dataclasses.dataclass(frozen=True)
class Skipped:
    """A line left out because a figure in it is garbled: its 1-based number, its text (cut) and why."""

    line: int
    text: str
    reason: str


class SkippedLines:
    """The garbled lines of a log: the first :attr:`keep` of them, and how many in all (bounded for any log)."""

    def __init__(self, keep: int = 5) -> None:
        self.keep = keep
        self.count = 0
        self.first: list[Skipped] = []

    def add(self, line: int, text: str, error: GarbledNumber) -> None:
        self.count += 1
        if len(self.first) < self.keep:
            self.first.append(Skipped(line, _quote(text.strip()), str(error)))

    def summary(self, source: str) -> list[str]:
        """Lines for a report: one per kept line, and how many more."""
        out = [f"skipped {source}:{s.line} (a garbled figure: {s.reason}): {s.text}" for s in self.first]
        if self.count > len(self.first):
            out.append(f"skipped {self.count - len(self.first)} more garbled line(s)")
        return out


def skipped_json(skipped: SkippedLines) -> dict[str, object]:
    """The garbled lines for a ``--json`` report: how many, and the first ones (line, text, reason)."""
    return {"count": skipped.count, "first": [dataclasses.asdict(s) for s in skipped.first]}

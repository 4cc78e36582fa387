"""Where a log's server starts begin, by the doctor's own rule, for the other log readers (``memory calibrate``):
a log that holds several starts is read one start at a time, never as a mix of them."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor.scan import Scanner

__all__ = ["RunSplitter"]


class RunSplitter:
    """Feed a log's lines in order; :meth:`feed` says whether a line opens a new run. The rule is the doctor's
    (:meth:`~vllm_hpu_mm.logs.doctor.scan.Scanner.feed`: a banner after the previous run failed, finished starting or
    got into a counted phase), so the run a command reads is the one the doctor would name."""

    def __init__(self) -> None:
        self._scanner = Scanner()

    @property
    def runs(self) -> int:
        """How many runs the lines fed so far hold."""
        return self._scanner.runs

    def feed(self, text: str, line: int | None = None) -> bool:
        before = self._scanner.runs
        self._scanner.feed(text, line)
        return self._scanner.runs != before

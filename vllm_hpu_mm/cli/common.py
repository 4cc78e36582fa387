"""Shared pieces of the CLI: exit codes, JSON output, the error line.

The exit-code contract of every subcommand: 0 ok; 1 a negative answer (the plan does not fit, an OOM was found,
a check failed); 2 invalid input (one line on stderr, nothing started); 3 an unexpected error (a bug: one line
and a hint to report it; the traceback only under ``vllm-hpu-mm --debug``)."""

from __future__ import annotations

import argparse
import contextlib
import enum
import json
import sys
import warnings
from collections.abc import Collection, Iterator
from typing import Any

from vllm_hpu_mm.errors import InputNote, error_line, one_line
from vllm_hpu_mm.plan.args import nonempty

#: A file, folder or URL argument (an empty one, a shell variable left unset, is refused, never read as unset).
path_value = nonempty("a path (or a URL where the flag takes one)")


def add_model_name(p: argparse.ArgumentParser, flag: str = "--from-metrics") -> None:
    """``--model-name``: which model's series to read from a /metrics page holding several (a federation)."""
    p.add_argument("--model-name", type=path_value, metavar="NAME", default=None,
                   help=f"with {flag}: read only the series labelled model_name=NAME (vLLM's --served-model-name), "
                   "for a page that holds several models' series (default: refused when it does; series without a "
                   "model_name label, such as vllm-hpu-mm's image counters, are read whole)")  # fmt: skip


def runs_read(run: int, runs: int) -> str:
    """Which run of how many server starts a memory reader read (``memory calibrate``, ``memory compare``: both read
    the last run that printed a memory figure, split as oom-doctor splits them); said for a log of one start too, so
    that the text report always states what its --json gives as run and runs."""
    if runs <= 1:
        return f"the log holds 1 server start: read run {run} of {runs}"
    return (f"the log holds {runs} server starts: read run {run} of {runs}, the last that printed a memory figure "
            "(the other runs' figures are not mixed in)")  # fmt: skip


@contextlib.contextmanager
def held_notes() -> Iterator[list[warnings.WarningMessage]]:
    """The warnings raised inside (reading the environment), held back until :func:`release_notes`: the environment
    is read before the runtime planned for is known, and a note on the value of a variable that runtime does not
    read would contradict the plan's ``not read`` line."""
    with warnings.catch_warnings(record=True) as held:
        warnings.simplefilter("always")
        yield held


def release_notes(held: list[warnings.WarningMessage], unread: Collection[str] = ()) -> None:
    """Raise the held warnings again, less each :class:`InputNote` on a variable in ``unread`` (the plan's
    ``settings_not_read``: the plan ignores its value, so nothing about the value matters)."""
    for w in held:
        if isinstance(w.message, InputNote) and w.message.setting in unread:
            continue
        warnings.warn(w.message, stacklevel=2)


class ExitCode(enum.IntEnum):
    OK = 0
    #: The command ran but its answer is negative (plan does not fit, OOM found, efficiency target missed).
    NEGATIVE = 1
    #: Invalid input or configuration; nothing was started.
    USAGE = 2
    #: An unexpected error (a bug in vllm-hpu-mm or a library): one line, a hint to report it.
    INTERNAL = 3


def help_text(doc: str | None) -> str:
    """A module docstring as --help text: reST literals (````x````) shown as plain x."""
    return (doc or "").replace("``", "")


#: The input notes this command has raised so far (set by the CLI's entry for one command; None outside it).
INPUT_NOTES: list[str] | None = None


def with_input_notes(obj: Any) -> Any:
    """A JSON answer with the input notes raised before it (also printed on stderr) as its ``input_notes``, so a JSON
    reader gets them too; the object as it is where there are none."""
    if isinstance(obj, dict) and INPUT_NOTES and "input_notes" not in obj:
        return {**obj, "input_notes": [one_line(n) for n in dict.fromkeys(INPUT_NOTES)]}
    return obj


def print_json(obj: Any) -> None:
    """Print one JSON object on stdout (the ``--json`` contract: exactly one object, nothing else), with its input
    notes (:func:`with_input_notes`)."""
    json.dump(with_input_notes(obj), sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def fail(message: str, code: ExitCode = ExitCode.USAGE) -> int:
    """Print one clear error line on stderr, what it echoes cut (:func:`clipped`), and return the exit code."""
    print(error_line(message), file=sys.stderr)
    return int(code)

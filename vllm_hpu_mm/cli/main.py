"""Entry point of the ``vllm-hpu-mm`` command, and the one place the exit-code contract is enforced
(:class:`~vllm_hpu_mm.cli.common.ExitCode`): argument errors and our own errors exit 2 with one line (traffic of
which the server would serve nothing, :class:`~vllm_hpu_mm.errors.NothingServed`, is a negative answer: 1), anything
unexpected exits 3 with one line and a hint to report it (the traceback only under ``--debug``). A reader that
closes the pipe early (``| head``) ends the command quietly with 141, as a process killed by SIGPIPE."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import difflib
import errno
import importlib
import os
import re
import select
import sys
import threading
import traceback
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn, Protocol

from vllm_hpu_mm import __version__
from vllm_hpu_mm.cli import common
from vllm_hpu_mm.cli.common import ExitCode, fail
from vllm_hpu_mm.cli.vllm_argv import MAX_SERVER_ARGS
from vllm_hpu_mm.collector import fewer_from_now
from vllm_hpu_mm.errors import InputNote, NothingServed, VllmHpuMmError, clipped, one_line

__all__ = ["build_parser", "entry", "main"]

# One module per subcommand, by the name it registers, in the order of the flow. Each has add_parser(subparsers)
# and run(args) -> int.
COMMANDS = {
    "buckets": "vllm_hpu_mm.cli.buckets",
    "memory": "vllm_hpu_mm.cli.memory",
    "serve": "vllm_hpu_mm.cli.serve",
    "fleet": "vllm_hpu_mm.cli.fleet",
    "oom-doctor": "vllm_hpu_mm.cli.oom_doctor",
}
SUBCOMMANDS = tuple(COMMANDS.values())
REPORT_HINT = "this is a bug in vllm-hpu-mm: please report it with the command line (rerun with --debug for details)"


class _Subcommand(Protocol):
    def add_parser(self, subparsers: argparse._SubParsersAction[Any]) -> None: ...


class _ArgumentParser(argparse.ArgumentParser):
    """argparse that exits with our usage code (2) and one line, not a usage dump, on bad arguments."""

    def error(self, message: str) -> None:  # type: ignore[override]
        see = "" if "--help" in message else " (see --help)"
        self.exit(int(ExitCode.USAGE), f"vllm-hpu-mm: error: {clipped(one_line(self._accepted(message)))}{see}\n")

    def _accepted(self, message: str) -> str:
        """argparse's "the following arguments are required: X" with what X accepts (a command's names, an option's
        form), and its "expected one argument" and "not allowed with argument" with the form to type, so that the
        one line says what to type."""
        prefix = "the following arguments are required: "
        if not message.startswith(prefix):
            return self._form_of(message)
        named = {name.strip() for name in message[len(prefix) :].split(",")}
        forms = []
        for action in self._actions:
            name = action.metavar if isinstance(action.metavar, str) else (action.option_strings or [action.dest])[0]
            if name not in named and not named & set(action.option_strings):
                continue
            if action.choices:
                forms.append(f"{name} one of {', '.join(map(str, action.choices))}")
            elif action.option_strings:
                forms.append(_form(action))
        # argparse names the missing required options before it checks the required groups: a group none of whose
        # options was given is missing too, and is named here so that one line says everything still needed.
        missing = [message[len(prefix) :]]
        for group in self._mutually_exclusive_groups:
            options = [a for a in group._group_actions if a.option_strings]
            if group.required and options and not any(self._given_option(a) for a in options):
                missing.append("one of " + "/".join(a.option_strings[0] for a in options))
                forms.append(" or ".join(_form(a) for a in options))
        if not forms:
            return message
        return f"missing {', '.join(missing)}; accepted: {'; '.join(forms)}"

    def _form_of(self, message: str) -> str:
        """argparse's errors about one option's value or company, with the accepted form: a value argparse read as an
        option (it starts with "-": a negative number, a span) is passed as OPTION=VALUE."""
        m = re.match(r"argument (\S+): (expected one argument|not allowed with argument (\S+))$", message)
        actions = {o: a for a in self._actions for o in a.option_strings}
        action = actions.get(m.group(1).split("/")[0]) if m else None
        if m is None or action is None:
            return message
        if m.group(3) is None:
            given = list(self._given)
            at = next((i for i, t in enumerate(given) if t in action.option_strings), None)
            dashed = at is not None and at + 1 < len(given) and given[at + 1].startswith("-")
            hint = (f" ({given[at + 1]!r} starts with '-', so it is read as an option: write "
                    f"{action.option_strings[0]}={given[at + 1]})") if dashed and at is not None else ""  # fmt: skip
            return f"argument {m.group(1)}: expected one value{hint}; accepted: {_form(action)}"
        other = actions.get(m.group(3).split("/")[0])
        alone = f"{_form(action)} or {_form(other)}, not both" if other is not None else f"{_form(action)} alone"
        return f"{message}; accepted: {alone}"

    _given: tuple[str, ...] = ()

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:  # argparse's signature
        # the tokens this (sub)parser reads: which options of a required group were given, should an error follow
        self._given = tuple(str(a) for a in (sys.argv[1:] if args is None else args))
        return super().parse_known_args(args, namespace)

    def _given_option(self, action: argparse.Action) -> bool:
        """Whether a token names ``action`` (exactly, with =VALUE, or by an unambiguous prefix argparse takes)."""
        return any(
            len(key) > 2 and any(s.startswith(key) for s in action.option_strings)
            for key in (t.split("=", 1)[0] for t in self._given if t.startswith("--"))
        )

    def _print_message(self, message: str, file: Any = None) -> None:  # argparse's: a stream or None
        # A closed stream is None: argparse would write the help meant for stdout to stderr instead. Nothing is
        # written; the command ends 141 (stdout) as `--help | head -c1` expects.
        if file is not None:
            super()._print_message(message, file)


def _form(action: argparse.Action) -> str:
    """An option as typed: its first spelling and its value's name."""
    return f"{action.option_strings[0]} {action.metavar or action.dest.upper()}"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. ``command``: a command's name, whose module alone is loaded and whose parser alone
    is added (a command line is parsed by its own command's parser: the others' modules are not imported, which
    shortens every command's start); None or another name: every command's (help, an unknown command's error)."""
    parser = _ArgumentParser(
        prog="vllm-hpu-mm",
        description="Plan vision buckets and device memory for Qwen2.5-VL on vLLM (Gaudi, NVIDIA, CPU), and serve. "
        "Exit codes: 0 ok, 1 negative answer (does not fit, OOM found, check failed), 2 invalid input, "
        "3 unexpected error.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an unexpected error (default: off)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_ArgumentParser)
    subparsers.required = True
    for name in (COMMANDS[command],) if command in COMMANDS else SUBCOMMANDS:
        module: _Subcommand = importlib.import_module(name)  # type: ignore[assignment]
        module.add_parser(subparsers)
    return parser


def _exit_status(exc: SystemExit) -> int:
    """argparse's (or a library's) SystemExit as an exit status: ints pass, a message is printed and means 2."""
    if exc.code is None or isinstance(exc.code, int):
        return int(exc.code or 0)
    print(f"vllm-hpu-mm: error: {clipped(one_line(str(exc.code)))}", file=sys.stderr)
    return int(ExitCode.USAGE)


#: The exit status of a command whose reader closed the pipe: 128 + SIGPIPE, what a shell reports for a process
#: that signal ended.
BROKEN_PIPE = 141


def _command(argv: Sequence[str]) -> str | None:
    """The command a command line names: its first word, or the one after ``--debug``; None after any other
    option (``--help`` lists every command, ``--version`` needs none)."""
    for arg in argv:
        if arg != "--debug":
            return None if arg.startswith("-") else arg
    return None


def _too_many_server_args(argv: Sequence[str]) -> str | None:
    """argparse takes time quadratic in the number of flags: ``serve`` refuses an absurd count before parsing."""
    command = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if command is None or argv[command] != "serve" or len(argv) - command - 1 <= MAX_SERVER_ARGS:
        return None
    count = len(argv) - command - 1
    return f"{count} server arguments; accepted: at most {MAX_SERVER_ARGS} (put repeated settings in one JSON value)"


def _unrecognized(parser: argparse.ArgumentParser, argv: Sequence[str], extra: Sequence[str]) -> str:
    """argparse's "unrecognized arguments" with what is accepted: the nearest options of the (sub)command the
    command line reached, and where all of them are listed."""
    words: list[str] = []
    leaf = parser
    for arg in argv:  # follow the command words down the subparsers (buckets -> plan)
        sub = next((a for a in leaf._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None:
            break
        if arg in sub.choices:
            leaf = sub.choices[arg]
            words.append(arg)
    flags = [s for a in leaf._actions for s in a.option_strings if s.startswith("--")]
    unknown = [a.split("=", 1)[0] for a in extra if a.startswith("-")]
    near = {a: difflib.get_close_matches(a, flags, n=2, cutoff=0.6) for a in unknown}
    hints = "; ".join(f"{a}: did you mean {' or '.join(m)}?" if len(near) > 1 else f"did you mean {' or '.join(m)}?"
                      for a, m in near.items() if m)  # fmt: skip
    command = " ".join(["vllm-hpu-mm", *words])
    return (f"unrecognized arguments: {' '.join(extra)}{f' ({hints})' if hints else ''}; accepted: the options "
            f"`{command} --help` lists")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; always returns an exit status (never raises, except to exec the server)."""
    closed = sys.stdout is None
    if closed:
        # Started with standard output closed (`>&-`): Python's stdout is None, which print() ignores but every
        # other write (json.dump, flush) fails on. The answer goes nowhere, and an answer nobody could read ends 141.
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (the process's stdout until it exits)
    try:
        code = _run_noting(list(sys.argv[1:] if argv is None else argv))
        if sys.stdout is not None:
            sys.stdout.flush()  # here, not at exit, so that a closed pipe is seen
    except BrokenPipeError:
        # The reader has what it wanted: no error line, and nothing more written to the closed pipe at exit.
        with contextlib.suppress(OSError, ValueError, AttributeError):  # not a real file (a test's capture)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE
    except OSError as exc:  # the answer could not be written (a full disk, /dev/full): said once, not a bug
        return _stdout_failed(exc)
    # argparse's help and print() drop a write to a closed stdout without a word: an answer (0 or 1) nobody could
    # read is a broken pipe; an error (2, 3) keeps its code, its line went to stderr.
    return BROKEN_PIPE if code in (ExitCode.OK, ExitCode.NEGATIVE) and (closed or _stdout_lost()) else code


#: Errors of a write to standard output that are the destination's, not the command's (a full disk or quota, an I/O
#: error, a file over its size limit).
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG})


def _stdout_failed(exc: OSError) -> int:
    """One line for an answer standard output could not take, and nothing more written to it at exit."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # not a real file (a test's capture)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return fail(f"cannot write the answer to standard output ({exc.strerror or exc}); accepted: an output with room "
                "for it")  # fmt: skip


def _stdout_lost() -> bool:
    """Whether standard output was closed (``>&-``) or is a pipe whose reader is gone (``| head -c0``)."""
    if sys.stdout is None:
        return True
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):  # not a real file (a test's capture)
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    # Linux and the BSDs flag a pipe with no reader left as POLLERR; a file or a terminal never is.
    return any(ev & select.POLLERR for _, ev in poller.poll(0))


def _run_noting(argv: list[str]) -> int:
    """:func:`_run`, with each :class:`InputNote` the input raised printed once on stderr after an answer (0, 1);
    after an error its line stays the only one."""
    notes: list[str] = []
    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], *rest: Any, **kw: Any) -> None:
            if issubclass(category, InputNote):
                notes.append(str(message))
            else:
                shown(message, category, *rest, **kw)

        warnings.showwarning = show
        warnings.simplefilter("always", InputNote)
        common.INPUT_NOTES = notes
        try:
            code = _run(argv)
        finally:
            common.INPUT_NOTES = None
    if code in (ExitCode.OK, ExitCode.NEGATIVE) and sys.stderr is not None:
        for note in dict.fromkeys(notes):
            print(f"vllm-hpu-mm: note: {clipped(one_line(note))}", file=sys.stderr)
    return code


def _run(argv: list[str]) -> int:
    debug = "--debug" in argv  # until parsed: an error while building the parser is shown in full too
    too_many = _too_many_server_args(argv)
    if too_many is not None:
        return fail(too_many)
    try:
        parser = build_parser(_command(argv))
        args, extra = parser.parse_known_args(argv)
        # Only `serve` forwards arguments it does not know (to vLLM's own parser); everywhere else they are errors.
        if extra and not getattr(args, "accepts_extra", False):
            parser.error(_unrecognized(parser, argv, extra))
        args.extra = extra
        debug = bool(args.debug)
        code: int = args.func(args)
    except SystemExit as exc:
        return _exit_status(exc)
    except NothingServed as exc:  # well-formed traffic of which nothing would run: a negative answer, not bad input
        return fail(str(exc), ExitCode.NEGATIVE)
    except VllmHpuMmError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise
    except Exception as exc:  # the contract's last line: never a bare traceback
        if isinstance(exc, OSError) and exc.errno in _OUTPUT_ERRNOS and exc.filename is None:
            return _stdout_failed(exc)  # a write to standard output, not to a named file: not a bug
        if debug:
            traceback.print_exc()
        first = (str(exc).strip().splitlines() or [""])[0]
        return fail(f"unexpected {type(exc).__name__}: {first}; {REPORT_HINT}", ExitCode.INTERNAL)
    return code


def entry() -> NoReturn:
    """The ``vllm-hpu-mm`` command (and ``python -m``): :func:`main`, then the process ends with its status without
    tearing the interpreter down. Freeing every object a plan made takes a tenth of a second on the 2-core machine
    (benchmarks/performance/plan_speed.py), time the user waits for nothing: the answer is written, and every file
    the command wrote was closed where it was written. Exit handlers run and the standard streams are flushed first;
    where another thread still runs, the usual exit waits for it. The cycle collector passes less often for the
    whole command (:func:`~vllm_hpu_mm.collector.fewer_from_now`): its imports and its plan alike."""
    fewer_from_now()
    code = main()
    if threading.active_count() > 1:
        sys.exit(code)
    atexit._run_exitfuncs()  # e.g. logging's, which flushes its handlers
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # gone or closed: what it held cannot be written anyway
            if stream is not None:
                stream.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()

"""The dispatcher: every subcommand is registered, and argument errors exit 2 with one line on stderr."""

from __future__ import annotations

import argparse
import errno
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_hpu_mm import __version__
from vllm_hpu_mm.cli.main import _command, build_parser, main
from vllm_hpu_mm.errors import ECHO_LINE_CHARS, ECHO_WORD_CHARS, clipped


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(actions) == 1
    choices: dict[str, argparse.ArgumentParser] = actions[0].choices
    return choices


def test_every_subcommand_is_registered() -> None:
    registered = _subcommands(build_parser())
    assert sorted(registered) == ["buckets", "fleet", "memory", "oom-doctor", "serve"]
    # Each leaf command has a handler: `buckets` and `memory` through their own subcommands.
    leaves = {"buckets plan", "buckets check", "memory plan", "serve", "oom-doctor", "fleet plan"}
    for leaf in leaves:
        top, *rest = leaf.split()
        parser = registered[top]
        if rest:
            parser = _subcommands(parser)[rest[0]]
        assert callable(parser.get_default("func")), leaf


@pytest.mark.parametrize(
    "argv",
    [
        ["memory", "plan", "--json", "--device", "h100"],
        ["--debug", "serve", "--dry-run"],
        ["buckets", "replay", "--json"],
        ["memory", "compare", "a.log", "b.log"],
        ["oom-doctor", "x.log"],
        ["fleet", "plan", "--ttft-p99", "2", "--tpot-p99", "0.1", "--request-rate", "3"],
    ],
)
def test_a_command_line_parses_alike_with_its_own_command_s_parser_alone(argv: list[str]) -> None:
    """main builds only the named command's parser (its module alone imported): the same arguments as every
    command's parser gives; help and a top-level option get every command's."""
    command = _command(argv)
    assert command is not None
    assert sorted(_subcommands(build_parser(command))) == [command]
    assert vars(build_parser(command).parse_known_args(argv)[0]) == vars(build_parser().parse_known_args(argv)[0])
    for top in ("--help", "-h", "--version", "--deb"):
        assert _command([top, *argv]) is None
    assert sorted(_subcommands(build_parser("no-such-command"))) == sorted(_subcommands(build_parser()))


def test_unknown_subcommand_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no-such-command"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "no-such-command" in err[0]


def test_unknown_option_is_rejected_outside_serve(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["buckets", "check", "--no-such-flag"]) == 2
    assert "--no-such-flag" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert __version__ in capsys.readouterr().out


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "Exit codes" in capsys.readouterr().out


def _broken_plan(*_: object, **__: object) -> object:
    raise ZeroDivisionError("division by zero\nsecond line")


def test_an_unexpected_error_is_one_line_with_exit_3(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:  # fmt: skip
    import vllm_hpu_mm.jobs.serve

    monkeypatch.setattr(vllm_hpu_mm.jobs.serve, "plan_and_choose", _broken_plan)
    assert main(["memory", "plan"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "unexpected ZeroDivisionError: division by zero" in err[0]
    assert "report" in err[0]
    assert "--debug" in err[0]


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import vllm_hpu_mm.jobs.serve

    monkeypatch.setattr(vllm_hpu_mm.jobs.serve, "plan_and_choose", _broken_plan)
    assert main(["--debug", "memory", "plan"]) == 3
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert "_broken_plan" in err


def test_our_errors_exit_2_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--debug", "memory", "plan", "--free-memory-gib", "nan"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip() == (
        "vllm-hpu-mm: error: --free-memory-gib=nan is out of range; accepted: a number of GiB from 0 up to 1048576"
    )


@pytest.mark.parametrize(
    "argv",
    [["memory", "plan", "--help"], ["buckets", "plan", "--help"], ["buckets", "check", "-h"], ["serve", "--help"],
     ["memory", "calibrate", "--help"], ["memory", "compare", "--help"], ["oom-doctor", "--help"], ["memory", "--help"],
     ["buckets", "--help"]],
)  # fmt: skip
def test_help_shows_no_rest_markup(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "``" not in out
    assert "vllm-hpu-mm" in out


@pytest.mark.parametrize(
    "argv",
    # a given text-graph budget skips the budget search: what is planned does not matter here, only the writing
    [["buckets", "plan", "--json"], ["memory", "plan", "--text-graph-budget", "60"],
     ["serve", "--dry-run", "--json", "--plan-text-graph-budget", "60"], ["buckets", "check"],
     ["memory", "plan", "--help"]],
)  # fmt: skip
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(argv: list[str]) -> None:
    # `vllm-hpu-mm ... | head -c 0`: the reader is gone before the first line is written.
    proc = subprocess.Popen([sys.executable, "-m", "vllm_hpu_mm", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err  # 128 + SIGPIPE, as a shell reports a process that signal ended
    assert err == b""


@pytest.mark.parametrize("argv", [["memory", "plan", "--help"], ["--version"]])
def test_a_closed_standard_output_is_a_broken_pipe(argv: list[str]) -> None:
    # `vllm-hpu-mm memory plan --help >&-`: argparse drops the help without a word; nobody could read the answer.
    proc = subprocess.run([sys.executable, "-m", "vllm_hpu_mm", *argv], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=120, preexec_fn=lambda: os.close(1))  # fmt: skip
    assert proc.returncode == 141, proc.stderr


@pytest.mark.parametrize(
    "argv",
    # help and version: argparse would write the help meant for a closed stdout to stderr instead;
    # answers: json.dump to Python's None stdout raised, and the command ended 3 ("a bug")
    [["buckets", "plan", "--help"], ["fleet", "plan", "--help"], ["--version"], ["buckets", "plan", "--json"],
     ["buckets", "plan", "--num-buckets", "3"]],
)  # fmt: skip
def test_a_closed_standard_output_ends_141_with_nothing_on_stderr(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `vllm-hpu-mm buckets plan --json >&-`: Python's stdout is None from the start.
    monkeypatch.setattr(sys, "stdout", None)
    assert main(argv) == 141
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("argv", "accepted"),
    [([], "buckets, memory, serve, fleet, oom-doctor"), (["memory"], "plan, calibrate, compare"),
     (["buckets", "stale"], "--from-metrics URL|FILE")],
)  # fmt: skip
def test_a_missing_argument_is_named_with_what_it_accepts(
    argv: list[str], accepted: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "missing" in err[0], err
    assert accepted in err[0], err


def test_an_error_keeps_its_code_when_standard_output_is_closed() -> None:
    proc = subprocess.run([sys.executable, "-m", "vllm_hpu_mm", "memory", "plan", "--bogus"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=120, preexec_fn=lambda: os.close(1))  # fmt: skip
    assert proc.returncode == 2
    assert b"unrecognized arguments: --bogus" in proc.stderr


class _FullDisk:
    """Standard output on a full disk (``> /dev/full``): every write fails with ENOSPC."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("argv", [["oom-doctor", "LOG", "--json"], ["oom-doctor", "LOG"], ["buckets", "plan"]])
def test_an_answer_standard_output_cannot_take_is_said_in_one_line_not_called_a_bug(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = str(Path(__file__).parents[1] / "data" / "logs" / "vllm_gaudi_warmup_doc.log")
    monkeypatch.setattr(sys, "stdout", _FullDisk())
    assert main([log if a == "LOG" else a for a in argv]) == 2  # it was 3, "a bug in vllm-hpu-mm"
    assert capsys.readouterr().err.splitlines() == [
        "vllm-hpu-mm: error: cannot write the answer to standard output (No space left on device); accepted: an "
        "output with room for it"
    ]


def test_an_absurd_number_of_server_arguments_is_refused_before_parsing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--dry-run", *["--port", "8000"] * 20_000]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["vllm-hpu-mm: error: 40001 server arguments; accepted: at most 4096 (put repeated settings in one "
                   "JSON value)"]  # fmt: skip


# --- what an error line echoes is cut --------------------------------------------------------------------------------

LONG = "1" + "x" * 100_000


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["memory", "plan"], {"VLLM_MULTIMODAL_BUCKETS": LONG}),
        (["memory", "plan"], {"VLLM_BUCKETING_STRATEGY": LONG}),
        (["memory", "plan", "--device", LONG], {}),
        (["memory", "plan", "--max-model-len", LONG], {}),
        (["buckets", "check", "--sizes", LONG], {}),
    ],
)
def test_an_error_never_echoes_a_long_value_whole(
    argv: list[str], env: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert len(err) < 1500
    assert "(100,0" in err  # the value's length is said


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=5000))
def test_clipped_lines_are_bounded_and_short_ones_unchanged(text: str) -> None:
    out = clipped(text)
    assert len(out) <= ECHO_LINE_CHARS + 60
    if len(text) <= ECHO_LINE_CHARS and all(len(w) <= ECHO_WORD_CHARS for w in text.split(" ")):
        assert out == text


#: Our own text options that are validated where their value is read (a list's grammar, a pool mode): "" refused there.
_CHECKED_WHEN_READ = {"--buckets", "--plan-buckets", "--vision-pool", "--plan-vision-pool"}


def test_no_own_option_reads_an_empty_value_as_not_given(capsys: pytest.CaptureFixture[str]) -> None:
    """A path or name typed empty (a shell variable left unset) is refused in one line: --plot '' drew nothing and
    said nothing, --plan-output-dir '' wrote into the current folder. vLLM's own flags keep vLLM's reading."""
    from vllm_hpu_mm.plan.args import VLLM_FLAGS

    vllm = {f"--{o.name}" for o in VLLM_FLAGS} | {a for o in VLLM_FLAGS for a in o.aliases}
    plain = (argparse._StoreAction, argparse._ExtendAction, argparse._AppendAction)
    for name, sub in _subcommands(build_parser()).items():
        nested = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
        parsers = {f"{name} {n}": p for a in nested for n, p in a.choices.items()} if nested else {name: sub}
        for command, parser in parsers.items():
            for action in parser._actions:
                flags = set(action.option_strings)
                if not flags or flags & (vllm | _CHECKED_WHEN_READ) or type(action) not in plain or action.choices:
                    continue
                assert action.type is not None, (command, action.option_strings)
                with pytest.raises((argparse.ArgumentTypeError, ValueError)):  # what argparse turns into its line
                    action.type("")  # type: ignore[operator]
    assert main(["buckets", "plan", "--sizes", "x.csv", "--plot", ""]) == 2
    assert capsys.readouterr().err.strip().endswith("'' is empty; accepted: a path (or a URL where the flag takes one) "
                                                    "(see --help)")  # fmt: skip


def _entry(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` run in a fresh interpreter, ending in :func:`vllm_hpu_mm.cli.main.entry` as the command does."""
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)


def test_the_command_ends_with_main_s_status_its_answer_whole_and_exit_handlers_run() -> None:
    proc = _entry("import atexit, sys\n"
                  "atexit.register(lambda: print('exit handler ran', file=sys.stderr))\n"
                  "sys.argv = ['vllm-hpu-mm', 'memory', 'plan', '--help']\n"
                  "from vllm_hpu_mm.cli.main import entry\n"
                  "entry()\n"
                  "print('never reached')\n")  # fmt: skip
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: vllm-hpu-mm memory plan")
    assert proc.stdout.endswith("\n")
    assert "--runtime" in proc.stdout
    assert "never reached" not in proc.stdout
    assert proc.stderr == "exit handler ran\n"


def test_the_command_s_error_status_is_kept() -> None:
    proc = _entry("import sys\nsys.argv = ['vllm-hpu-mm', 'memory', 'plan', '--bogus']\n"
                  "from vllm_hpu_mm.cli.main import entry\nentry()\n")  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "--bogus" in proc.stderr


def test_the_command_waits_for_a_thread_still_running() -> None:
    # a thread still working when main returns is waited for, as at a normal exit: what it writes is not lost
    proc = _entry("import sys, threading, time\n"
                  "import vllm_hpu_mm.cli.main as cli\n"
                  "returned = threading.Event()\n"
                  "real = cli.main\n"
                  "def main(argv=None):\n    try:\n        return real(argv)\n    finally:\n        returned.set()\n"
                  "cli.main = main\n"
                  "def late():\n    returned.wait()\n    time.sleep(0.2)\n    print('thread finished', flush=True)\n"
                  "threading.Thread(target=late).start()\n"
                  "sys.argv = ['vllm-hpu-mm', '--version']\n"
                  "cli.entry()\n")  # fmt: skip
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == [f"vllm-hpu-mm {__version__}", "thread finished"]


def test_the_installed_command_ends_through_entry() -> None:
    (script,) = [e for e in importlib.metadata.entry_points(group="console_scripts") if e.name == "vllm-hpu-mm"]
    assert script.value == "vllm_hpu_mm.cli.main:entry"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        # held-out r6loads case 17: argparse reads a value starting with '-' as an option and said only "expected one
        # argument": the line names the value, the way to pass it and the form
        (["buckets", "replay", "--load-profile", "-60:8"],
         "argument --load-profile: expected one value ('-60:8' starts with '-', so it is read as an option: write "
         "--load-profile=-60:8); accepted: --load-profile S:C,..."),
        (["fleet", "plan", "--request-rate"],
         "argument --request-rate: expected one value; accepted: --request-rate R"),
        (["buckets", "replay", "--request-rate", "4", "--load-profile", "600:8"],
         "not allowed with argument --request-rate; accepted: --load-profile S:C,... or --request-rate R, not both"),
    ],
)  # fmt: skip
def test_an_option_s_missing_value_or_company_is_answered_with_the_form_to_type(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert said in err

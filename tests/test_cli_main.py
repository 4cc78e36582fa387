"""The dispatcher: every subcommand is registered, and argument errors exit 2 with one line on stderr."""

from __future__ import annotations

import pytest

from vllm_hpu_mm import __version__
from vllm_hpu_mm.cli.main import build_parser, main


def test_every_subcommand_is_registered() -> None:
    help_text = build_parser().format_help()
    for name in ("buckets", "memory", "serve", "oom-doctor"):
        assert name in help_text


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
    import vllm_hpu_mm.cli.memory

    monkeypatch.setattr(vllm_hpu_mm.cli.memory, "choose", _broken_plan)
    assert main(["memory", "plan"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "unexpected ZeroDivisionError: division by zero" in err[0]
    assert "report" in err[0]
    assert "--debug" in err[0]


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import vllm_hpu_mm.cli.memory

    monkeypatch.setattr(vllm_hpu_mm.cli.memory, "choose", _broken_plan)
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
    "argv", [["memory", "plan", "--help"], ["buckets", "plan", "--help"], ["buckets", "check", "-h"]]
)
def test_help_shows_no_rest_markup(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "``" not in out
    assert "vllm-hpu-mm" in out

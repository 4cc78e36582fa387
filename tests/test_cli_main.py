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
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "no-such-command" in err[0]


def test_unknown_option_is_rejected_outside_serve(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["buckets", "check", "--no-such-flag"])
    assert exc.value.code == 2
    assert "--no-such-flag" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert __version__ in capsys.readouterr().out

"""The dispatcher: every subcommand is registered, and argument errors exit 2 with one line on stderr."""

from __future__ import annotations

import argparse

import pytest

from vllm_hpu_mm import __version__
from vllm_hpu_mm.cli.main import build_parser, main


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(actions) == 1
    choices: dict[str, argparse.ArgumentParser] = actions[0].choices
    return choices


def test_every_subcommand_is_registered() -> None:
    registered = _subcommands(build_parser())
    assert sorted(registered) == ["buckets", "memory", "oom-doctor", "serve"]
    # Each leaf command has a handler: `buckets` and `memory` through their own subcommands.
    leaves = {"buckets plan", "buckets check", "memory plan", "serve", "oom-doctor"}
    for leaf in leaves:
        top, *rest = leaf.split()
        parser = registered[top]
        if rest:
            parser = _subcommands(parser)[rest[0]]
        assert callable(parser.get_default("func")), leaf


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

"""Entry point of the ``vllm-hpu-mm`` command."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any, Protocol

from vllm_hpu_mm import __version__
from vllm_hpu_mm.cli.common import ExitCode, fail
from vllm_hpu_mm.errors import VllmHpuMmError

# One module per subcommand, in the order of the flow. Each has add_parser(subparsers) and run(args) -> int.
SUBCOMMANDS = (
    "vllm_hpu_mm.cli.buckets",
    "vllm_hpu_mm.cli.memory",
    "vllm_hpu_mm.cli.serve",
    "vllm_hpu_mm.cli.oom_doctor",
)


class _Subcommand(Protocol):
    def add_parser(self, subparsers: argparse._SubParsersAction[Any]) -> None: ...


class _ArgumentParser(argparse.ArgumentParser):
    """argparse that exits with our usage code (2) and one line, not a usage dump, on bad arguments."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(int(ExitCode.USAGE), f"vllm-hpu-mm: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog="vllm-hpu-mm",
        description="Plan vision buckets and device memory for Qwen2.5-VL on vLLM (Gaudi, NVIDIA, CPU), and serve.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_ArgumentParser)
    subparsers.required = True
    for name in SUBCOMMANDS:
        module: _Subcommand = importlib.import_module(name)  # type: ignore[assignment]
        module.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # Only `serve` forwards arguments it does not know (to vLLM's own parser); everywhere else they are errors.
    if extra and not getattr(args, "accepts_extra", False):
        parser.error("unrecognized arguments: " + " ".join(extra))
    args.extra = extra
    try:
        code: int = args.func(args)
    except VllmHpuMmError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())

"""Shared pieces of the CLI: exit codes, JSON output, the error line."""

from __future__ import annotations

import enum
import json
import sys
from typing import Any


class ExitCode(enum.IntEnum):
    OK = 0
    #: The command ran but its answer is negative (plan does not fit, OOM found, efficiency target missed).
    NEGATIVE = 1
    #: Invalid input or configuration; nothing was started.
    USAGE = 2


def print_json(obj: Any) -> None:
    """Print one JSON object on stdout (the ``--json`` contract: exactly one object, nothing else)."""
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def fail(message: str, code: ExitCode = ExitCode.USAGE) -> int:
    """Print one clear error line on stderr and return the exit code."""
    print(f"vllm-hpu-mm: error: {message}", file=sys.stderr)
    return int(code)

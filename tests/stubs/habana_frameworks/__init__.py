"""Stand-in for Intel Gaudi's ``habana_frameworks`` (tests only; see tests/stubs/README.md). Not Gaudi."""

from __future__ import annotations

from typing import Any

#: Every call the stand-in saw, in order:
#: ("wrap", kwargs), ("capture", signature), ("replay", signature), ("mark_step",).
EVENTS: list[tuple[Any, ...]] = []

"""Stand-in for ``habana_frameworks.torch.core`` (tests only). Not Gaudi."""

from __future__ import annotations

from habana_frameworks import EVENTS


def mark_step() -> None:
    """Lazy mode flushes queued ops here; the stand-in only records the call."""
    EVENTS.append(("mark_step",))

"""PNG of a patch-count histogram with bucket edges (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vllm_hpu_mm.buckets.planner import Counts, as_weights
from vllm_hpu_mm.errors import ConfigError


def plot_histogram(
    counts: Counts,
    buckets: Sequence[int],
    path: str | Path,
    *,
    title: str,
    reference: Sequence[int] | None = None,
    reference_label: str = "default list",
) -> Path:
    """Draw images per patch count (one bar per distinct count) and a vertical line at each bucket.

    ``reference`` (e.g. the default list) is drawn dashed for comparison. Returns the written path.
    """
    import matplotlib

    matplotlib.use("Agg")  # before pyplot: never needs a display
    import matplotlib.pyplot as plt

    out = Path(path)
    hist = as_weights(counts)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    try:
        xs = sorted(hist)
        ax.bar(xs, [hist[x] for x in xs], width=48, color="#4a78b5", label="images per aligned patch count")
        for i, b in enumerate(buckets):
            ax.axvline(b, color="#c0392b", linewidth=1.2, label="planned / checked buckets" if i == 0 else None)
        for i, b in enumerate(reference or ()):
            ax.axvline(b, color="#7f8c8d", linestyle="--", linewidth=1, label=reference_label if i == 0 else None)
        ax.set_xlabel("vision patches per image (14x14 px)")
        ax.set_ylabel("images")
        ax.set_title(title, fontsize=10)
        ax.legend(loc="upper right", fontsize=8)
    finally:
        save_png(fig, out)
    return out


def save_png(fig: Any, out: Path) -> None:
    """Lay out, write (a bad path is the ``--plot`` flag's error) and close a matplotlib figure."""
    import matplotlib.pyplot as plt

    try:
        fig.tight_layout()
        fig.savefig(out, dpi=110, format="png")
    except OSError as exc:
        raise ConfigError(
            f"--plot {out}: cannot write it ({exc.strerror or exc}); accepted: a PNG path in a writable folder"
        ) from None
    finally:
        plt.close(fig)

"""PNG of a replay (matplotlib, Agg backend): per configuration, each bucket's real and padded work (query tokens for
prompt buckets, sequence slots for decode buckets), fallbacks and run-time compiles marked, configurations side by
side."""

from __future__ import annotations

from pathlib import Path

from vllm_hpu_mm.buckets.plot import save_png
from vllm_hpu_mm.replay.report import Report

__all__ = ["plot_replay"]

#: Buckets drawn per configuration and phase (the ones that ran the most padded work).
MAX_BARS = 24


def plot_replay(report: Report, path: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # before pyplot: never needs a display
    import matplotlib.pyplot as plt

    out = Path(path)
    results = report.results
    fig, axes = plt.subplots(2, len(results), figsize=(5.2 * len(results), 7.5), squeeze=False)
    try:
        for col, res in enumerate(results):
            compiled = {shape for _, shape in res.compiles}
            fallback = {b for _, b in res.fallbacks}
            for row, (phase, unit) in enumerate((("prompt", "query tokens"), ("decode", "sequence slots"))):
                ax = axes[row][col]
                items = sorted(((k[1], v) for k, v in res.per_bucket.items() if k[0] == phase),
                               key=lambda kv: -kv[1][2])[:MAX_BARS]  # fmt: skip
                items.sort()
                labels = [",".join(map(str, b if phase == "prompt" else (b[0], b[2]))) for b, _ in items]
                xs = range(len(items))
                ax.bar(xs, [v[2] for _, v in items], color="#e8b4a8", label="padded")
                ax.bar(xs, [v[1] for _, v in items], color="#4a78b5", label="real")
                for x, (b, _) in zip(xs, items, strict=True):
                    if b in fallback or b in compiled:
                        ax.annotate("compiled", (x, 0), rotation=90, fontsize=7, color="#c0392b", ha="center",
                                    va="bottom")  # fmt: skip
                ax.set_xticks(list(xs))
                ax.set_xticklabels(labels, rotation=90, fontsize=6)
                eff = res.prefill_tokens.value if phase == "prompt" else res.decode_slots.value
                ax.set_title(f"{res.label}: {phase} ({sum(res.warmed)} graphs, {len(res.compiles)} compiles)\n"
                             f"{unit} efficiency {eff:.3f}", fontsize=8)  # fmt: skip
                ax.set_ylabel(f"{unit} (weighted)", fontsize=7)
                if row == 0 and col == 0:
                    ax.legend(fontsize=7)
        fig.suptitle(f"replay of {report.traffic[:100]}", fontsize=9)
    finally:
        save_png(fig, out)
    return out

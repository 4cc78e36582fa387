"""Bucket counts of public Gaudi warm-up logs against the release model that produced them: planned vs logged.

Logs: every excerpt under tests/data/gaudi_logs (sources in their headers and tests/data/gaudi_logs/SOURCES.md):
the memory excerpts (``dev/``, ``heldout/``) and the bucket-count-only ones (``buckets/{dev,heldout}``, whose
``# buckets: {json}`` header names the runtime's code and the model of it that applies). The bucket settings are read
from the log itself where it prints them (vllm-fork: "Prompt/Decode bucket config (min, step, max_warmup) bs:[...],
seq:[...]"; the token budget from its "Omitted N prompt buckets due to exceeded token budget
(max_num_batched_tokens=B)" line), the buckets planned with that code's model and the count compared with the log's
"Generated N prompt/decode buckets". Models (our own code, read from HabanaAI/vllm-fork's history):

- ``fork-2024-linear``: ``habana_model_runner.py`` @e30ddc3db (2024-08-07), the product of the two linear ranges
  (vllm_hpu_mm/runtimes/vllm_fork/linear.py, ``warmup_range``). Memory excerpts without a ``# buckets:`` header use it.
- ``fork-2024-budget``: #206 (aefd33679, 2024-08-27) and #208 (9abadba50, 2024-08-28): the same product, less the
  buckets with batch x sequence above ``max_num_batched_tokens``, in both phases (#208 keeps all when none fits).
- ``fork-2024-budget-min``: #235 (a4e1d5273, 2024-09-04): as above, and each range drops values below its minimum.
- ``fork-2025-exponential``: vllm-hpu-extension's exponential strategy (2025): not modelled here; it belongs to the
  fork's release lines (vllm_hpu_mm/runtimes/vllm_fork/releases.py): listed as not checkable until that exists.

A log that prints no settings, or whose release's model is missing, or which leaves a setting unstated, is listed
with the reason. Dev and held-out are reported apart; no model is fitted here (nothing is tuned on any log).
Writes benchmarks/agreement/results/gaudi_log_buckets.{md,json}. Machine: any (pure arithmetic; nothing ran on Gaudi).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run by path: the repository root

from benchmarks.common import rows

OUT = Path(__file__).resolve().parent / "results" / "gaudi_log_buckets.md"
MACHINE = "any: pure arithmetic; nothing ran on Gaudi"


def _table(table: list[dict[str, Any]]) -> list[str]:
    return [
        "| log | phase | logged | planned | code (release) | model and settings (as logged) |",
        "|---|---|---:|---:|---|---|",
        *(f"| {r['folder']}/{r['log']} | {r['phase']} | {r['logged'] if r['logged'] is not None else '-'} | "
          f"{r['planned'] if r['planned'] is not None else '-'} | {r['code']} | {r['why']} |" for r in table),
    ]  # fmt: skip


def _summary(table: list[dict[str, Any]]) -> str:
    checked = [r for r in table if r["planned"] is not None]
    exact = sum(r["planned"] == r["logged"] for r in checked)
    return f"{exact} of {len(checked)} checkable counts exact; {len(table) - len(checked)} rows not checkable."


def main() -> int:
    table = rows()
    lines = [
        "# Public Gaudi logs: bucket counts planned by the release's model vs logged",
        "",
        f"Machine: {MACHINE}. Logs: tests/data/gaudi_logs (sources in SOURCES.md and each excerpt's header): the",
        "memory excerpts (dev/, heldout/) and the bucket-count-only ones (buckets/dev, buckets/heldout). Models: our",
        "own code of each vllm-fork code era, read from the fork's history",
        "(benchmarks/agreement/gaudi_log_buckets.py); no model is fitted on any log. Only logs that print their bucket",
        "settings (and the release) can be checked.",
        "",
    ]
    for split, title in (("dev", "Development logs"), ("heldout", "Held-out logs")):
        part = [r for r in table if r["set"] == split]
        lines += [f"## {title}", "", *_table(part), "", _summary(part), ""]
    lines += ["## All", "", _summary(table), ""]
    OUT.write_text("\n".join(lines), encoding="utf-8")
    OUT.with_suffix(".json").write_text(json.dumps({"machine": MACHINE, "rows": table}, indent=1) + "\n",
                                        encoding="utf-8")  # fmt: skip
    print(OUT.read_text(encoding="utf-8"))
    checked = [r for r in table if r["planned"] is not None]
    return 0 if all(r["planned"] == r["logged"] for r in checked) else 1


if __name__ == "__main__":
    sys.exit(main())

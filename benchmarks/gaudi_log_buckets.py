"""Bucket counts of public Gaudi warm-up logs against the release model that produced them: planned vs logged.

For every log under tests/data/gaudi_logs (sources in their headers and tests/data/gaudi_logs/SOURCES.md), its
bucket settings are read from the log itself where it prints them (vllm-fork 2024: "Prompt bucket config (min,
step, max_warmup) bs:[...], seq:[...]"), the buckets planned with that release's model
(benchmarks/research/vllm_fork_linear.py, the fork @e30ddc3db: research, not yet in the fork's plan), and the
count compared with the log's "Generated N prompt/decode buckets". A log that prints no settings (nor its release)
is listed as not checkable.
Writes benchmarks/results/gaudi_log_buckets.{md,json}. Machine: any (pure arithmetic; nothing ran on Gaudi).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.research.vllm_fork_linear import warmup_buckets  # noqa: E402

LOGS = REPO / "tests" / "data" / "gaudi_logs"
OUT = REPO / "benchmarks" / "results" / "gaudi_log_buckets.md"
_CONFIG = re.compile(r"(Prompt|Decode) bucket config \(min, step, max_warmup\) bs:\[(\d+), (\d+), (\d+)\], "
                     r"seq:\[(\d+), (\d+), (\d+)\]")  # fmt: skip
_GENERATED = re.compile(r"Generated (\d+) (prompt|decode) buckets")


def rows() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for path in sorted(LOGS.rglob("*.log")):
        text = path.read_text(encoding="utf-8")
        configs = {m.group(1).lower(): tuple(int(x) for x in m.groups()[1:]) for m in _CONFIG.finditer(text)}
        logged = {m.group(2): int(m.group(1)) for m in _GENERATED.finditer(text)}
        base = {"set": path.parent.name, "log": path.stem}
        if not configs:
            out.append({**base, "phase": "-", "logged": None, "planned": None,
                        "why": "prints no bucket settings (or release): not checkable"})  # fmt: skip
            continue
        for phase, c in configs.items():
            planned = len(warmup_buckets((c[0], c[1], c[2]), (c[3], c[4], c[5])))
            out.append({**base, "phase": phase, "logged": logged.get(phase), "planned": planned,
                        "why": f"vllm-fork 2024 linear (@e30ddc3db) over the logged config bs:{list(c[:3])} "
                               f"seq:{list(c[3:])}"})  # fmt: skip
    return out


def main() -> int:
    table = rows()
    lines = [
        "# Public Gaudi logs: bucket counts planned by the release's model vs logged",
        "",
        "Machine: any (pure arithmetic; nothing ran on Gaudi). Logs: tests/data/gaudi_logs (all held out from the",
        "bucket models: none set anything in them). Only logs that print their bucket settings can be checked.",
        "",
        "| set | log | phase | logged | planned | how |",
        "|---|---|---|---:|---:|---|",
        *(f"| {r['set']} | {r['log']} | {r['phase']} | {r['logged'] if r['logged'] is not None else '-'} | "
          f"{r['planned'] if r['planned'] is not None else '-'} | {r['why']} |" for r in table),
        "",
    ]  # fmt: skip
    checked = [r for r in table if r["planned"] is not None]
    exact = sum(r["planned"] == r["logged"] for r in checked)
    lines.append(f"{exact} of {len(checked)} checkable counts exact; {len(table) - len(checked)} logs not checkable.")
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    OUT.with_suffix(".json").write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(OUT.read_text(encoding="utf-8"))
    return 0 if exact == len(checked) else 1


if __name__ == "__main__":
    sys.exit(main())

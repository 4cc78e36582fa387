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
Writes benchmarks/results/gaudi_log_buckets.{md,json}. Machine: any (pure arithmetic; nothing ran on Gaudi).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from vllm_hpu_mm.runtimes.vllm_fork.linear import warmup_range  # noqa: E402

LOGS = REPO / "tests" / "data" / "gaudi_logs"
OUT = REPO / "benchmarks" / "results" / "gaudi_log_buckets.md"
MACHINE = "any: pure arithmetic; nothing ran on Gaudi"
_CONFIG = re.compile(r"(Prompt|Decode) bucket config \(min, step, max_warmup\) bs:\[(\d+), (\d+), (\d+)\], "
                     r"(?:seq|block):\[(\d+), (\d+), (\d+)\]")  # fmt: skip
_GENERATED = re.compile(r"Generated (\d+) (prompt|decode) buckets")
_BUDGET = re.compile(r"Omitted \d+ prompt buckets due to exceeded token budget \(max_num_batched_tokens=(\d+)\)")
_EXP_CONFIG = re.compile(r"(Prompt|Decode) bucket config \(min, step, max_warmup, limit\)")
Range = tuple[int, int, int]
#: What each model is, for the table.
MODELS = {
    "fork-2024-linear": "vllm-fork linear @e30ddc3db (2024-08-07)",
    "fork-2024-budget": "vllm-fork linear + token budget, both phases (#206 aefd33679 / #208 9abadba50)",
    "fork-2024-budget-min": "vllm-fork linear + range minimum (#235 a4e1d5273) + token budget, both phases",
}
FORK_RELEASES = REPO / "vllm_hpu_mm" / "runtimes" / "vllm_fork" / "releases.py"


def _range(config: Range, *, enforce_min: bool) -> list[int]:
    return warmup_range(config, at_least_min=enforce_min)


def planned(model: str, bs: Range, seq: Range, budget: int | None) -> int:
    """How many buckets ``model`` generates for one phase's (bs, seq) ranges under the token budget."""
    product = [(b, s) for b in _range(bs, enforce_min=model == "fork-2024-budget-min") for s in
               _range(seq, enforce_min=model == "fork-2024-budget-min")]  # fmt: skip
    if model == "fork-2024-linear":
        return len(product)
    assert budget is not None
    kept = [k for k in product if k[0] * k[1] <= budget]
    return len(kept) if kept or model != "fork-2024-budget" else 0


def _ranges(c: tuple[int, ...]) -> tuple[Range, Range]:
    """A logged config's (bs, seq) ranges."""
    return (c[0], c[1], c[2]), (c[3], c[4], c[5])


def _header(text: str) -> dict[str, Any] | None:
    for line in text.splitlines():
        if line.startswith("# buckets:"):
            out: dict[str, Any] = json.loads(line.split(":", 1)[1])
            return out
    return None


def _consistent_budgets(model: str, configs: dict[str, tuple[int, ...]], logged: dict[str, int]) -> str:
    """The token budgets (multiples of 128 up to 2^17) under which ``model`` gives every logged count."""
    shown = [(ph, c) for ph, c in configs.items() if ph in logged]
    fits = [
        b for b in range(128, 2**17 + 1, 128) if all(planned(model, *_ranges(c), b) == logged[ph] for ph, c in shown)
    ]
    return f"{fits[0]}-{fits[-1]}" if fits else "none"


def rows() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(LOGS.rglob("*.log")):
        rel = path.relative_to(LOGS).parts
        text = path.read_text(encoding="utf-8")
        head = _header(text)
        configs = {m.group(1).lower(): tuple(int(x) for x in m.groups()[1:]) for m in _CONFIG.finditer(text)}
        logged = {m.group(2): int(m.group(1)) for m in _GENERATED.finditer(text)}
        budget_m = _BUDGET.search(text)
        budget = int(budget_m.group(1)) if budget_m else (head or {}).get("max_num_batched_tokens")
        base = {"set": rel[-2], "folder": "/".join(rel[:-1]), "log": path.stem}
        model = head["model"] if head else "fork-2024-linear"
        code = head["code"] if head else ("habana_main @e30ddc3db era (2024-08)" if configs else "-")
        if model == "fork-2025-exponential":
            why = ("vllm-fork habana_main snapshot with vllm-hpu-extension's exponential strategy: not a release tag, "
                   f"so no line of {FORK_RELEASES.relative_to(REPO)} applies (its exponential model is 1.22's, "
                   "extension @8211e0b, whose batch step differs from the logged one), and the log leaves "
                   "max_num_batched_tokens and the KV blocks unstated: not checkable")  # fmt: skip
            for phase in sorted(logged):
                out.append({**base, "phase": phase, "logged": logged[phase], "planned": None, "code": code,
                            "prints_settings": bool(_EXP_CONFIG.search(text)), "why": why})  # fmt: skip
            continue
        if not configs:
            out.append({**base, "phase": "-", "logged": None, "planned": None, "code": code, "prints_settings": False,
                        "why": "prints no bucket settings: not checkable"})  # fmt: skip
            continue
        for phase, c in configs.items():
            row = {**base, "phase": phase, "logged": logged.get(phase), "planned": None, "code": code,
                   "prints_settings": True}  # fmt: skip
            settings = f"bs:{list(c[:3])} seq:{list(c[3:])}"
            if logged.get(phase) is None:
                out.append({**row, "why": f"{settings}: the quoted log gives no count for this phase"})
                continue
            if model != "fork-2024-linear" and budget is None:
                fits = _consistent_budgets(model, configs, logged)
                out.append({**row, "why": f"{MODELS[model]}; {settings}; max_num_batched_tokens not printed: "
                                          f"not checkable (the counts fit a budget of {fits})"})  # fmt: skip
                continue
            n = planned(model, *_ranges(c), budget)
            tail = "" if budget is None or model == "fork-2024-linear" else f", max_num_batched_tokens={budget}"
            if budget is not None and not budget_m:
                tail += " (stated in the header, not printed by this run)"
            out.append({**row, "planned": n, "why": f"{MODELS[model]}; {settings}{tail}"})
    return out


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
        "own code of each vllm-fork code era, read from the fork's history (benchmarks/gaudi_log_buckets.py); no model",
        "is fitted on any log. Only logs that print their bucket settings (and the release) can be checked.",
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

"""The adapter that asks an installed vllm-gaudi (vllm_hpu_mm.runtimes.vllm_gaudi.installed) run against the REAL
code of each release, from the local mirror: what it reads back must be exactly what that release's bucketing
generates (agreement/vllm_gaudi_driver.py drives the same code directly), on releases we model and on ones we do
not (there the adapter is the plan's only exact source).

For each tag, vllm-gaudi's source is extracted as agreement/vllm_gaudi_bucket_counts.py does and the driver runs,
on CPU with ``VLLM_USE_FAKE_HPU=1``, both its own glue and our adapter over the named configurations (the dense
linear grids left out: the same code, minutes each on a loaded 2-core machine). Writes
benchmarks/agreement/results/vllm_gaudi_adapter_check.{md,json}.

    PYTHONPATH=. .venv/bin/python benchmarks/agreement/vllm_gaudi_adapter_check.py [--tags T ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import MACHINE, MIRROR, extract, file_env, named_cases, run_driver

RESULTS = Path(__file__).resolve().parent / "results"

TAGS = ("v0.11.2", "v0.13.0", "v0.15.1", "v0.17.1", "v0.19.1.post1", "v0.21.0", "v0.24.0", "v0.26.0", "v0.27.0rc0",
        "091bbadd")  # fmt: skip


def _sets(result: dict[str, Any]) -> Any:
    if "startup_error" in result or "error" in result:
        return "fails"
    return {p: sorted(map(tuple, result.get(p, []))) for p in ("prompt", "decode")}


def _count(sets: Any, phase: str) -> int | str:
    return "fails" if sets == "fails" else len(sets[phase])


def run_tag(tag: str) -> list[dict[str, Any]]:
    cases = [c for c in named_cases() if "lin" not in c.name and "bad" not in c.name and "vision" not in c.name]
    with tempfile.TemporaryDirectory(prefix="vllm-gaudi-") as tmp_name:
        tmp = Path(tmp_name)
        runner = extract(MIRROR, tag, tmp)
        payload = [{"env": file_env(c.env, c.file_text, tmp, str(i)), "shape": dataclasses.asdict(c.shape),
                    "model_type": c.model_type, "adapter": True} for i, c in enumerate(cases)]  # fmt: skip
        results = run_driver(payload, tmp, runner)  # the repository root on its path: our adapter
    rows = []
    for case, r in zip(cases, results, strict=True):
        if "driver_error" in r:
            raise RuntimeError(f"{tag} {case.name}:\n{r['driver_error']}")
        own, adapter = _sets(r), _sets(r["adapter"])
        rows.append({"case": case.name, "equal": own == adapter, "prompt": [_count(own, "prompt"),
                     _count(adapter, "prompt")], "decode": [_count(own, "decode"), _count(adapter, "decode")],
                     "adapter_error": r["adapter"].get("error")})  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tags", nargs="*", default=list(TAGS), help="vllm-gaudi tags (default: one per line)")
    parser.add_argument("--machine", default=MACHINE, help="machine description for the results")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    start = time.perf_counter()
    report = {}
    for tag in args.tags:
        report[tag] = run_tag(tag)
        ok = sum(r["equal"] for r in report[tag])
        print(f"{tag:14} adapter = its own code in {ok}/{len(report[tag])}", flush=True)
    lines = [
        "# The installed-vllm-gaudi adapter against each release's real code",
        "",
        f"Machine: {args.machine}. Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{time.perf_counter() - start:.0f} s. Each tag's code from the local mirror on CPU (VLLM_USE_FAKE_HPU=1);",
        'nothing ran on Gaudi. "equal": the prompt and decode bucket sets our adapter reads back',
        "(runtimes/vllm_gaudi/installed.py) equal those its own code generates when driven directly",
        "(benchmarks/agreement/vllm_gaudi_driver.py), start-up failures included.",
        "",
        "| tag | configurations | equal | prompt buckets (own / adapter), first case |",
        "|---|---:|---:|---|",
    ]
    for tag, rows in report.items():
        first = rows[0]
        lines.append(f"| {tag} | {len(rows)} | {sum(r['equal'] for r in rows)} | "
                     f"{first['prompt'][0]} / {first['prompt'][1]} ({first['case']}) |")  # fmt: skip
    bad = [(t, r) for t, rows in report.items() for r in rows if not r["equal"]]
    lines += ["", *(f"- {t} {r['case']}: {r}" for t, r in bad), ""]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        (RESULTS / "vllm_gaudi_adapter_check.md").write_text(text)
        (RESULTS / "vllm_gaudi_adapter_check.json").write_text(json.dumps(report, indent=1))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())

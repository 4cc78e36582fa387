"""Regenerate (or check) docs/fleet.md's worked example from the real ``fleet plan`` commands.

Samples are ``<!-- sample: ARGS -->`` blocks as in docs_samples.py (the same runner: a clean environment); a
``<!-- fleet-files: ARGS -->`` block shows the deployment that command writes with ``--out`` (the data-parallel
scripts and the Kubernetes manifests). Kept apart from docs_samples.py because each plan takes tens of seconds on the
2-core development machine (too slow for the test that checks the other samples); ``--check`` ignores the "search:"
line (the search's own time).

    python scripts/fleet_docs.py           # rewrite docs/fleet.md in place (a few minutes)
    python scripts/fleet_docs.py --check   # exit 1 with a diff when out of date
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_samples import ROOT, SAMPLE, run

DOC = ROOT / "docs" / "fleet.md"
FILES = re.compile(r"(<!-- fleet-files: (?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /fleet-files -->)", re.DOTALL)
SHOWN = ("dp/node-0.sh", "dp/node-1.sh", "replica/replica.env", "kubernetes/fleet.yaml")


def files(args: str) -> str:
    with tempfile.TemporaryDirectory() as out:
        run(f"{args} --out {out}")
        blocks = []
        for name in SHOWN:
            path = Path(out) / name
            if path.is_file():
                fence = "yaml" if name.endswith(".yaml") else "sh"
                blocks.append(f"`{name}`:\n\n```{fence}\n{path.read_text()}```\n")
    return "\n".join(blocks)


def render(text: str) -> str:
    text = SAMPLE.sub(lambda m: m.group(1) + run(m.group("args")) + m.group(4), text)
    return FILES.sub(lambda m: m.group(1) + files(m.group("args")) + m.group(4), text)


def _steady(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("search: ")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 with a diff when out of date")
    args = parser.parse_args()
    old = DOC.read_text()
    new = render(old)
    if args.check:
        diff = list(difflib.unified_diff(_steady(old), _steady(new), str(DOC), "regenerated", lineterm=""))
        print("\n".join(diff))
        return 1 if diff else 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())

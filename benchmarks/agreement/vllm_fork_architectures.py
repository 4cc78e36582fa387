"""Writes ``vllm_hpu_mm/data/vllm_fork_architectures.json``: the model architectures each vllm-fork release line's
model registry lists, read from the fork's mirror at every tag the line names (``Release.tags``), so that a plan for a
release that cannot load the model says so (vLLM of every such release refuses an unlisted architecture at start-up:
``ModelRegistry._raise_for_unsupported``, e.g. ``vllm/model_executor/models/registry.py:343-352`` @6af2f6752).

The registry is ``vllm/model_executor/models/registry.py`` from 1.19 and ``__init__.py`` before; its keys are the
``"Name": (module, class)`` entries. Tags of one line must agree (checked here).

    PYTHONPATH=. .venv/bin/python benchmarks/agreement/vllm_fork_architectures.py
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from vllm_hpu_mm.runtimes.vllm_fork.releases import ARCHITECTURES_FILE, LINES

FORK = Path("/work/.mirror/HabanaAI+vllm-fork/repo")
_ENTRY = re.compile(r'"([A-Za-z0-9_]+)"\s*:\s*\(')


def registry_at(tag: str) -> list[str]:
    """The architectures the fork's model registry lists at ``tag``."""
    for path in ("vllm/model_executor/models/registry.py", "vllm/model_executor/models/__init__.py"):
        shown = subprocess.run(["git", "-C", str(FORK), "show", f"{tag}:{path}"], capture_output=True, text=True)
        if shown.returncode == 0 and "_MODELS" in shown.stdout:
            return sorted(set(_ENTRY.findall(shown.stdout)))
    raise SystemExit(f"{tag}: no model registry found")


def main() -> None:
    out: dict[str, list[str]] = {}
    for release in LINES:
        found = {tag: registry_at(tag) for tag in release.tags}
        if len({tuple(v) for v in found.values()}) != 1:
            raise SystemExit(f"{release.name}: its tags' registries differ")
        out[release.spec] = found[release.tags[0]]
    ARCHITECTURES_FILE.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n")
    print(f"wrote {ARCHITECTURES_FILE}")


if __name__ == "__main__":
    main()

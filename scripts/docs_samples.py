"""Regenerate (or check) the command samples in the docs from the real commands, so that they cannot drift.

A sample is a marker line followed by a fenced block:

    <!-- sample: memory plan --device gaudi2 -->
    ```
    $ vllm-hpu-mm memory plan --device gaudi2
    ...the command's real output...
    ```

Each command runs as ``python -m vllm_hpu_mm.cli.main ARGS`` in a clean environment (no VLLM_* / VLLM_HPU_MM_*
settings, an empty Hugging Face cache, an empty home: no memory profile a calibrate saved), so the output is what a
new user sees. Usage:

    python scripts/docs_samples.py           # rewrite the samples in place
    python scripts/docs_samples.py --check   # exit 1 and show a diff when a sample is out of date (tests run this)
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "docs" / "oom-tuning.md",)
SAMPLE = re.compile(r"(<!-- sample: (?P<args>[^>]*?) -->\n```\n)(?P<body>.*?)(```)", re.DOTALL)


def run(args: str) -> str:
    """The command line and its real output (stdout, then stderr), as the sample shows it."""
    with tempfile.TemporaryDirectory() as hub:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "HF_"))}
        env.update({"HF_HUB_CACHE": hub, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "COLUMNS": "120", "HOME": hub})
        done = subprocess.run([sys.executable, "-m", "vllm_hpu_mm.cli.main", *shlex.split(args)],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False)  # fmt: skip
    if done.returncode not in (0, 1):
        raise SystemExit(f"sample command failed with exit {done.returncode}: vllm-hpu-mm {args}\n{done.stderr}")
    return f"$ vllm-hpu-mm {args}\n{done.stdout}{done.stderr}"


def render(text: str) -> str:
    return SAMPLE.sub(lambda m: m.group(1) + run(m.group("args")) + m.group(4), text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 with a diff when out of date")
    args = parser.parse_args()
    stale = 0
    for path in DOCS:
        old = path.read_text()
        if not SAMPLE.search(old):
            raise SystemExit(f"{path}: no '<!-- sample: ... -->' blocks found")
        new = render(old)
        if new == old:
            continue
        stale += 1
        if args.check:
            diff = difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(path), "regenerated")
            sys.stdout.writelines(diff)
        else:
            path.write_text(new)
            print(f"rewrote the samples of {path.relative_to(ROOT)}")
    if args.check and stale:
        print("samples are out of date: run python scripts/docs_samples.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

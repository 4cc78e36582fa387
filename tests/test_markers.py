"""The ``vllm`` marker skips cleanly without vLLM: run the marked tests in a pytest where vllm cannot be imported."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Three files that need vLLM: one with marked tests beside tests that need none, two importorskip (the lightest of
#: each: this runs them again in a process of its own; the CLI's top-level tests run without vLLM in
#: scripts/test-plain).
FILES = (
    "tests/plan/test_derived.py",
    "tests/runtimes/test_vllm_cuda_encoder_graphs.py",
    "tests/plugin/test_plugin.py",
)


def test_vllm_marked_tests_skip_without_vllm() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.support.no_vllm", "-rs", *FILES],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = proc.stdout.strip().splitlines()[-1]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "failed" not in summary, summary
    assert "error" not in summary, summary
    skipped = re.search(r"(\d+) skipped", summary)
    assert skipped, summary
    # The marked tests (they check the plan against vLLM's own EngineArgs) and the two importorskip files skip; the
    # other derived-limit tests need no vLLM and still run.
    assert int(skipped.group(1)) >= 3, summary
    passed = re.search(r"(\d+) passed", summary)
    assert passed, summary
    assert int(passed.group(1)) >= 15, summary
    assert "vLLM is not importable" in proc.stdout or "could not import 'vllm" in proc.stdout

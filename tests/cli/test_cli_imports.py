"""The ``memory`` commands' parsers built without the log readers: ``memory plan`` (the command users time) starts
without the modules only ``memory calibrate`` and ``memory compare`` run."""

from __future__ import annotations

import json
import subprocess
import sys

LOG_ONLY = ("vllm_hpu_mm.jobs.calibrate", "vllm_hpu_mm.jobs.compare", "vllm_hpu_mm.logs.server_metrics",
            "vllm_hpu_mm.logs.calibrate")  # fmt: skip


def test_the_memory_parsers_import_no_log_reader() -> None:
    code = ("import json, sys; from vllm_hpu_mm.cli.main import build_parser; build_parser('memory'); "
            f"print(json.dumps([m for m in {list(LOG_ONLY)!r} if m in sys.modules]))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(done.stdout) == []

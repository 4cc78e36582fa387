"""The jobs are tested as library functions, with small inputs and a given text-graph budget (no budget search):
nothing here goes through the CLI's parsing or printing (tests/cli does)."""

from __future__ import annotations

from pathlib import Path

import pytest

#: The variables a job reads that a developer's shell may hold.
_READ = ("VLLM_HPU_MM_PROFILE", "VLLM_MULTIMODAL_BUCKETS", "VLLM_HPU_MM_OVERSIZE_POLICY", "VLLM_HPU_MM_ALIGN_MODE",
         "VLLM_GRAPH_RESERVED_MEM", "VLLM_BUCKETING_FROM_FILE", "VLLM_BUCKETING_STRATEGY",
         "VLLM_SKIP_WARMUP")  # fmt: skip


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no default profile from the developer's home
    for name in _READ:
        monkeypatch.delenv(name, raising=False)

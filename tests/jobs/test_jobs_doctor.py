"""The ``oom-doctor`` job: the model named is checked before the log is read; a real log gets its verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.data import DATA
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.jobs.doctor import diagnose_log


def test_an_unknown_model_is_refused_before_the_log_is_read(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--model"):
        diagnose_log(str(tmp_path / "not-even-there.log"), load(), "gpt-2")


def test_a_kv_cache_refusal_is_found_and_a_healthy_log_is_not(tmp_path: Path) -> None:
    found = diagnose_log(str(DATA / "logs" / "cpu_kv_cache_too_small.log"), load())
    assert found.oom
    assert found.evidence
    healthy = diagnose_log(str(DATA / "logs" / "cpu_serve_ok.log"), load())
    assert not healthy.oom

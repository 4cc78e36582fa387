"""Suite-wide: tests marked ``vllm`` (and every e2e test, which starts vLLM) skip cleanly where vLLM is not importable.

The check imports vLLM once, and only when such a test is about to run: a run of pure unit tests never pays for it.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

import pytest

NEEDS_VLLM = ("vllm", "e2e")
#: Where the e2e tests live, as pytest-xdist names them (relative to the repository root).
E2E_PREFIX = "tests/e2e/"


@functools.cache
def vllm_missing() -> str | None:
    """Why vLLM cannot be imported here, or None when it can."""
    try:
        importlib.import_module("vllm")
    except ImportError as exc:
        return f"vLLM is not importable ({exc})"
    return None


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: the plain install (scripts/test-plain) has none
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadgroup`` (scripts/test runs two workers) every test of tests/e2e is one unit of work: one
    worker runs them all and starts the one server they share, the other runs the rest. Scheduled here by path, not
    by an ``xdist_group`` mark: pytest 9.2 no longer reads the node id that xdist 3.8 rewrites for the mark, so
    marked tests were spread over both workers, each starting a server (pytest-xdist issue #1386)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling  # type: ignore[import-untyped]

    class E2eOnOneWorker(LoadGroupScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return "e2e" if nodeid.startswith(E2E_PREFIX) else str(super()._split_scope(nodeid))

    return E2eOnOneWorker(config, log)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if any(item.get_closest_marker(name) for name in NEEDS_VLLM):
        reason = vllm_missing()
        if reason is not None:
            pytest.skip(reason)


@pytest.fixture(autouse=True)
def _no_user_state(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A memory-cost profile or a bucket file in the user's ~/.cache must not change what a test plans or writes."""
    cache = tmp_path_factory.mktemp("vllm-hpu-mm-cache")
    monkeypatch.setenv("VLLM_HPU_MM_CACHE_DIR", str(cache))
    monkeypatch.setenv("VLLM_HPU_MM_PROFILE", str(cache / "memory-profile.json"))

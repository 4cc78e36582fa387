"""Suite-wide: tests marked ``vllm`` (and every e2e test, which starts vLLM) skip cleanly where vLLM is not importable.

The check imports vLLM once, and only when such a test is about to run: a run of pure unit tests never pays for it.
"""

from __future__ import annotations

import functools
import importlib

import pytest

NEEDS_VLLM = ("vllm", "e2e")


@functools.cache
def vllm_missing() -> str | None:
    """Why vLLM cannot be imported here, or None when it can."""
    try:
        importlib.import_module("vllm")
    except ImportError as exc:
        return f"vLLM is not importable ({exc})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (scripts/test runs two workers) every e2e test goes to one worker, which starts the one
    server they share; the other worker runs the rest."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.get_closest_marker("e2e"):
            item.add_marker(pytest.mark.xdist_group("e2e"))


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

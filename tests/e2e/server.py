"""The e2e server's settings and process helpers (the fixtures that use them are in ``conftest.py``)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from vllm_hpu_mm.envs import process_environ

#: Small buckets for the tiny model (patches): images up to 4096 patches (802816 pixels) after shrinking.
BUCKETS = "256,1024,4096"
MAX_MODEL_LEN = 4096
#: The session server's KV cache (``--kv-cache-memory-bytes``).
KV_BYTES = 256 * 2**20
STARTUP_TIMEOUT_S = 300.0
REPO = Path(__file__).resolve().parents[2]
#: Real photos from the scikit-image wheel (tests/data/SOURCES.md).
IMAGES_DIR = REPO / "tests" / "data" / "images"


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
            "VLLM_HPU_MM_GRAPH_BACKEND": "cpu",  # pad to buckets on CPU too: these tests check bucket behaviour
            "VLLM_HPU_MM_SHAPE_LOG": str(workdir / "shapes.jsonl"),
            "PROMETHEUS_MULTIPROC_DIR": str(prom),
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "VLLM_LOGGING_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


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

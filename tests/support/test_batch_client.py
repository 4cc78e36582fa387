"""The batch client against a fake OpenAI transport: order, error isolation, the concurrency bound."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.batch_client import BatchResult, chat_payload, error_message, main, run_batch
from tests.support.data import data_url


class FakeServer:
    """Answers chat completions after a per-item delay; some items fail on purpose. Tracks requests in flight."""

    def __init__(self, delays: dict[int, float], fail: dict[int, int] | None = None, drop: set[int] | None = None):
        self.delays = delays
        self.fail = fail or {}
        self.drop = drop or set()
        self.in_flight = 0
        self.max_in_flight = 0
        self.seen: list[int] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        item = int(body["messages"][0]["content"][-1]["text"])
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delays.get(item, 0.0))
            self.seen.append(item)
            if item in self.drop:
                raise httpx.ConnectError("connection refused", request=request)
            if item in self.fail:
                err = {"error": {"message": f"item {item} is bad", "type": "BadRequestError", "code": 400}}
                return httpx.Response(self.fail[item], json=err)
            usage = {"prompt_tokens": 10 + item, "completion_tokens": 2, "total_tokens": 12 + item}
            choice = {"index": 0, "message": {"role": "assistant", "content": f"answer {item}"}}
            return httpx.Response(200, json={"choices": [choice], "usage": usage})
        finally:
            self.in_flight -= 1


def _batch(server: FakeServer, n: int, concurrency: int, timeout_s: float = 10.0) -> BatchResult:
    async def go() -> BatchResult:
        client = httpx.AsyncClient(transport=httpx.MockTransport(server), base_url="http://fake")
        async with client:
            payloads = [chat_payload(str(i), model="m") for i in range(n)]
            from tests.support.batch_client import run_batch_async

            return await run_batch_async(
                payloads, client=client, concurrency=concurrency, timeout_s=timeout_s, progress=False
            )

    return asyncio.run(go())


def test_results_keep_input_order_when_completions_arrive_reversed() -> None:
    n = 12
    server = FakeServer({i: 0.002 * (n - i) for i in range(n)})  # later items finish first
    result = _batch(server, n, concurrency=n)
    assert server.seen != sorted(server.seen)  # the fake really completed out of order
    assert [r.index for r in result.items] == list(range(n))
    assert [r.text for r in result.items] == [f"answer {i}" for i in range(n)]
    assert [r.usage["prompt_tokens"] for r in result.items if r.usage] == [10 + i for i in range(n)]


def test_one_bad_item_never_fails_the_batch() -> None:
    server = FakeServer({}, fail={2: 400, 5: 500}, drop={7})
    result = _batch(server, 10, concurrency=3)
    statuses = [r.status for r in result.items]
    assert statuses == [200, 200, 400, 200, 200, 500, 200, None, 200, 200]
    assert result.items[2].error == "item 2 is bad"
    assert result.items[5].error == "item 5 is bad"
    assert "ConnectError" in (result.items[7].error or "")
    assert [r.index for r in result.failures] == [2, 5, 7]
    assert all(r.usage is None for r in result.failures)
    assert result.summary()["ok"] == 7
    assert result.summary()["failed"] == 3


@pytest.mark.parametrize("concurrency", [1, 3, 8])
def test_concurrency_bound_is_respected_and_reached(concurrency: int) -> None:
    server = FakeServer(dict.fromkeys(range(20), 0.01))
    result = _batch(server, 20, concurrency=concurrency)
    assert server.max_in_flight == concurrency
    assert result.max_in_flight == concurrency
    assert all(r.ok for r in result.items)


def test_slow_item_times_out_alone() -> None:
    server = FakeServer({1: 2.0})
    result = _batch(server, 3, concurrency=3, timeout_s=0.2)
    assert [r.ok for r in result.items] == [True, False, True]
    assert result.items[1].status is None
    assert "Timeout" in (result.items[1].error or "")
    assert result.items[1].latency_s < 1.5


def test_rejects_concurrency_below_one() -> None:
    with pytest.raises(ValueError, match="concurrency=0"):
        run_batch([chat_payload("x")], base_url="http://127.0.0.1:9", concurrency=0, progress=False)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"error": {"message": "bad image", "code": 400}}', "bad image"),
        (b'{"object": "error", "message": "flat form"}', "flat form"),
        (b'{"detail": [{"msg": "field required"}]}', '[{"msg": "field required"}]'),
        (b"Internal Server Error", "Internal Server Error"),
    ],
)
def test_error_message_reads_openai_and_plain_bodies(body: bytes, message: str) -> None:
    assert error_message(body) == message


def test_chat_payload_puts_images_before_text_as_data_urls() -> None:
    payload: dict[str, Any] = chat_payload("hi", [data_url(b"\x89PNG", "image/png")], model="m", max_tokens=3)
    content = payload["messages"][0]["content"]
    assert content[0]["image_url"]["url"] == "data:image/png;base64,iVBORw=="
    assert content[1] == {"type": "text", "text": "hi"}
    assert payload["max_tokens"] == 3
    assert payload["temperature"] == 0.0


def test_command_line_sends_a_folder_over_loopback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The documented command, end to end against a tiny threaded HTTP server on 127.0.0.1."""

    class Handler(BaseHTTPRequestHandler):
        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._json(200, {"data": [{"id": "served-model"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            url = body["messages"][0]["content"][0]["image_url"]["url"]
            if body["model"] != "served-model" or not url.startswith("data:image/png;base64,"):
                self._json(400, {"error": {"message": "unexpected request"}})
            elif base64.b64decode(url.split(",", 1)[1]) == b"bad":
                self._json(400, {"error": {"message": "image is bad"}})
            else:
                usage = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
                self._json(200, {"choices": [{"message": {"content": "ok"}}], "usage": usage})

        def log_message(self, *args: Any) -> None:  # keep pytest output clean
            pass

    (tmp_path / "a.png").write_bytes(b"good")
    (tmp_path / "b.png").write_bytes(b"bad")
    (tmp_path / "notes.txt").write_text("not an image file name")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        out = tmp_path / "results.jsonl"
        base = f"http://127.0.0.1:{server.server_address[1]}"
        code = main(["--base-url", base, "--images", str(tmp_path), "--repeat", "2", "--output", str(out)])
    finally:
        server.shutdown()
        server.server_close()
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert code == 1  # one image of the folder is refused
    assert [(x["index"], x["status"]) for x in lines] == [(0, 200), (1, 400), (2, 200), (3, 400)]
    assert lines[1]["error"] == "image is bad"
    assert json.loads(capsys.readouterr().out)["ok"] == 2

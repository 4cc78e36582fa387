"""Send a batch of chat-completion requests to an OpenAI-compatible server with bounded concurrency.

Results come back in input order, one per request; a failed item (HTTP error, timeout, refused connection) is
recorded with its status and message and never fails the batch. A tqdm bar shows progress.

One command (every image file in a folder, each sent ``--repeat`` times, 8 in flight)::

    python -m tests.support.batch_client --base-url http://127.0.0.1:8000 --images tests/data/images \\
        --concurrency 8 --max-tokens 4 --output /tmp/results.jsonl

The model name is asked from ``/v1/models`` unless ``--model`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import mimetypes
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from tests.support.data import data_url

Payload = Mapping[str, Any]
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp", ".tif", ".tiff"})


@dataclasses.dataclass(frozen=True)
class ItemResult:
    """The outcome of one request. ``status`` is the HTTP status, or None when no response came back."""

    index: int
    status: int | None
    latency_s: float
    usage: dict[str, int] | None = None
    text: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.error is None


@dataclasses.dataclass(frozen=True)
class BatchResult:
    """All items in input order, the wall time of the batch, and the most requests seen in flight at once."""

    items: list[ItemResult]
    wall_s: float
    max_in_flight: int

    @property
    def failures(self) -> list[ItemResult]:
        return [r for r in self.items if not r.ok]

    @property
    def requests_per_s(self) -> float:
        return len(self.items) / self.wall_s if self.wall_s > 0 else float("nan")

    def summary(self) -> dict[str, float | int]:
        latencies = sorted(r.latency_s for r in self.items if r.ok)
        return {
            "requests": len(self.items),
            "ok": len(latencies),
            "failed": len(self.items) - len(latencies),
            "wall_s": round(self.wall_s, 3),
            "requests_per_s": round(self.requests_per_s, 3),
            "latency_p50_s": round(statistics.median(latencies), 4) if latencies else float("nan"),
            "latency_p90_s": round(_quantile(latencies, 0.9), 4) if latencies else float("nan"),
            "max_in_flight": self.max_in_flight,
        }


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile of an already sorted, non-empty list."""
    rank = max(0, min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1))))
    return sorted_values[rank]


def file_data_url(path: Path) -> str:
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return data_url(path.read_bytes(), mime)


def chat_payload(
    prompt: str, image_urls: Sequence[str] = (), *, model: str = "", max_tokens: int = 4
) -> dict[str, Any]:
    """One user turn: the images (URLs or data URLs) first, then the text. Greedy, so runs are repeatable."""
    content: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": u}} for u in image_urls]
    content.append({"type": "text", "text": prompt})
    return {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
    }


def error_message(body: bytes) -> str:
    """The message of an OpenAI-style error body (``{"error": {"message": ...}}`` or a flat ``message``)."""
    try:
        data = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")[:2000]
    if isinstance(data, dict):
        inner = data.get("error")
        if isinstance(inner, dict) and "message" in inner:
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
        if "message" in data:
            return str(data["message"])
        if "detail" in data:  # FastAPI's own validation errors
            return json.dumps(data["detail"])[:2000]
    return json.dumps(data)[:2000]


async def _send(client: httpx.AsyncClient, index: int, payload: Payload, timeout_s: float) -> ItemResult:
    start = time.perf_counter()
    try:
        # httpx's timeout bounds each phase (connect, each read); wait_for bounds the whole request.
        response = await asyncio.wait_for(
            client.post("/v1/chat/completions", json=dict(payload), timeout=timeout_s), timeout_s
        )
    except TimeoutError:
        return ItemResult(index, None, time.perf_counter() - start, error=f"Timeout: no response in {timeout_s:g} s")
    except httpx.HTTPError as exc:  # refused connections, protocol errors, httpx's own timeouts
        reason = str(exc) or type(exc).__name__
        return ItemResult(index, None, time.perf_counter() - start, error=f"{type(exc).__name__}: {reason}")
    latency = time.perf_counter() - start
    if response.status_code != 200:
        return ItemResult(index, response.status_code, latency, error=error_message(response.content))
    try:
        data = response.json()
        usage = {k: int(v) for k, v in data["usage"].items() if isinstance(v, int)}
        text = data["choices"][0]["message"].get("content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        return ItemResult(index, response.status_code, latency, error=f"malformed response: {exc!r}")
    return ItemResult(index, 200, latency, usage=usage, text=text)


async def run_batch_async(
    payloads: Sequence[Payload],
    *,
    base_url: str = "",
    concurrency: int = 8,
    timeout_s: float = 120.0,
    client: httpx.AsyncClient | None = None,
    progress: bool = True,
    description: str = "requests",
) -> BatchResult:
    """Send every payload, at most ``concurrency`` at a time; results in the order of ``payloads``.

    Pass ``client`` to reuse a connection pool or a test transport; otherwise one is made for ``base_url``.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency={concurrency}; accepted: an integer >= 1")
    own = client is None
    http = client or httpx.AsyncClient(
        base_url=base_url, limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    )
    gate = asyncio.Semaphore(concurrency)
    in_flight = 0
    max_in_flight = 0
    results: list[ItemResult | None] = [None] * len(payloads)
    bar = tqdm(total=len(payloads), desc=description, unit="req", disable=not progress, file=sys.stderr)

    async def one(index: int, payload: Payload) -> None:
        nonlocal in_flight, max_in_flight
        async with gate:
            in_flight += 1
            max_in_flight = max(max_in_flight, in_flight)
            try:
                results[index] = await _send(http, index, payload, timeout_s)
            finally:
                in_flight -= 1
                bar.update(1)

    start = time.perf_counter()
    try:
        await asyncio.gather(*(one(i, p) for i, p in enumerate(payloads)))
    finally:
        bar.close()
        if own:
            await http.aclose()
    wall = time.perf_counter() - start
    return BatchResult([r for r in results if r is not None], wall, max_in_flight)


def run_batch(payloads: Sequence[Payload], **kwargs: Any) -> BatchResult:
    """Synchronous :func:`run_batch_async` (starts its own event loop)."""
    return asyncio.run(run_batch_async(payloads, **kwargs))


def served_model(base_url: str, timeout_s: float = 10.0) -> str:
    """The first model id the server lists at ``/v1/models``."""
    response = httpx.get(base_url.rstrip("/") + "/v1/models", timeout=timeout_s)
    response.raise_for_status()
    return str(response.json()["data"][0]["id"])


def _image_files(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise SystemExit(f"no image files in {folder}; accepted suffixes: {', '.join(sorted(IMAGE_SUFFIXES))}")
    return files


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", default="http://127.0.0.1:8000")
    parser.add_argument("--model", default="", help="default: the first model listed by the server")
    parser.add_argument("--images", type=Path, required=True, help="folder of images; one request per image")
    parser.add_argument("--repeat", type=int, default=1, help="send the folder this many times")
    parser.add_argument("--prompt", default="Describe the image.")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    parser.add_argument("--output", type=Path, help="write one JSON line per request, in input order")
    args = parser.parse_args(argv)

    model = args.model or served_model(args.base_url)
    urls = [file_data_url(p) for p in _image_files(args.images)] * args.repeat
    payloads = [chat_payload(args.prompt, [u], model=model, max_tokens=args.max_tokens) for u in urls]
    result = run_batch(payloads, base_url=args.base_url, concurrency=args.concurrency, timeout_s=args.timeout)
    if args.output:
        with args.output.open("w") as out:
            for item in result.items:
                out.write(json.dumps(dataclasses.asdict(item)) + "\n")
    print(json.dumps(result.summary(), indent=2))
    for item in result.failures[:10]:
        print(f"item {item.index}: status {item.status}: {item.error}", file=sys.stderr)
    return 0 if not result.failures else 1


if __name__ == "__main__":
    raise SystemExit(main())

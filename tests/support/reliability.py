"""Request mixes for the reliability checks, shared by ``tests/e2e/test_reliability.py`` and
``benchmarks/performance/reliability_cpu.py``: real photos (``tests/data/images``), odd sizes, text-only and two-image
requests, and the bad-input sweep (each item of :mod:`tests.support.bad_inputs`, then one good request).
"""

from __future__ import annotations

import dataclasses
import io
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from tests.support.bad_inputs import BadInput, corpus, synthetic_photo
from tests.support.batch_client import chat_payload, error_message, file_data_url
from tests.support.data import data_url

IMAGES_DIR = Path(__file__).resolve().parents[1] / "data" / "images"
#: Odd sizes: unaligned, long, tiny, large; all must be accepted (aspect <= 200:1).
ODD_SIZES = ((500, 333), (3000, 200), (37, 1001), (1023, 767), (640, 427), (113, 57), (2000, 1999))
#: Words one of which a clear bad-image message must contain (besides a 4xx status).
CLEAR_WORDS = ("image", "base64", "decode", "pixel", "aspect", "size", "format", "bytes", "url")


def photo_urls(folder: Path = IMAGES_DIR) -> list[str]:
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in {".png", ".jpg", ".jpeg"})
    if not files:
        raise FileNotFoundError(f"no photos in {folder} (see tests/data/SOURCES.md)")
    return [file_data_url(p) for p in files]


def odd_size_urls() -> list[str]:
    out = []
    for i, (w, h) in enumerate(ODD_SIZES):
        buf = io.BytesIO()
        synthetic_photo(w, h, seed=i).save(buf, format="JPEG", quality=85)
        out.append(data_url(buf.getvalue(), "image/jpeg"))
    return out


def mixed_payloads(n: int, model: str, *, seed: int = 0, max_tokens: int = 4) -> list[tuple[str, dict[str, Any]]]:
    """``n`` (kind, payload) pairs: 40% real photo, 30% odd size, 20% text-only, 10% two images, shuffled.

    The shares are exact (up to rounding) for any ``n`` >= 10; the order and the images drawn depend on ``seed``.
    """
    rng = random.Random(seed)
    photos, odd = photo_urls(), odd_size_urls()
    shares = {"odd_size": 0.3, "text_only": 0.2, "two_images": 0.1}
    kinds = [kind for kind, share in shares.items() for _ in range(round(share * n))]
    kinds = ["photo"] * (n - len(kinds)) + kinds
    rng.shuffle(kinds)
    out: list[tuple[str, dict[str, Any]]] = []
    for i, kind in enumerate(kinds):
        urls: list[str] = []
        if kind in ("photo", "two_images"):
            urls.append(rng.choice(photos))
        if kind in ("odd_size", "two_images"):
            urls.append(rng.choice(odd))
        prompt = f"Request {i}: describe what you see in a few words."
        out.append((kind, chat_payload(prompt, urls, model=model, max_tokens=max_tokens)))
    return out


def distinct_payloads(model: str, *, max_tokens: int = 4) -> list[dict[str, Any]]:
    """Every photo and odd size once, plus a text-only request: the warm-up pass."""
    urls = photo_urls() + odd_size_urls()
    payloads = [chat_payload("Warm-up.", [u], model=model, max_tokens=max_tokens) for u in urls]
    return [*payloads, chat_payload("Warm-up, text only.", model=model, max_tokens=max_tokens)]


@dataclasses.dataclass(frozen=True)
class SweepRow:
    name: str
    what: str
    expect: str
    status: int | None
    message: str
    good_after: int | None

    @property
    def passed(self) -> bool:
        if self.good_after != 200:
            return False
        if self.expect == "accept":
            return self.status == 200
        return self.status is not None and 400 <= self.status < 500 and is_clear(self.message)


def is_clear(message: str) -> bool:
    """A message that names the problem: not empty, not a bare exception name, about the image or its encoding."""
    lowered = message.lower()
    return len(message) >= 15 and any(word in lowered for word in CLEAR_WORDS)


def bad_input_sweep(
    base_url: str, model: str, items: Sequence[BadInput] | None = None, *, timeout_s: float = 120.0
) -> list[SweepRow]:
    """Send each item, then one good request; sequential, so a failure is attributable to its item."""
    good = chat_payload("Is the server still fine?", [photo_urls()[0]], model=model, max_tokens=2)
    rows = []
    with httpx.Client(base_url=base_url, timeout=timeout_s) as client:
        for item in items if items is not None else corpus():
            payload = chat_payload("What is this?", [item.url], model=model, max_tokens=2)
            try:
                response = client.post("/v1/chat/completions", json=payload)
                status: int | None = response.status_code
                message = "" if status == 200 else error_message(response.content)
            except httpx.HTTPError as exc:
                status, message = None, f"{type(exc).__name__}: {exc}"
            try:
                good_after: int | None = client.post("/v1/chat/completions", json=good).status_code
            except httpx.HTTPError:
                good_after = None
            rows.append(SweepRow(item.name, item.what, item.expect, status, message, good_after))
    return rows

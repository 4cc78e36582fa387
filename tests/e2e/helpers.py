"""Requests and expected counts for the e2e tests, computed independently of the package's own alignment code."""

from __future__ import annotations

import base64
import io
import math
from functools import cache
from pathlib import Path
from typing import Any

import httpx
from PIL import Image

from tests.e2e.server import Server

TILE = 112
#: Largest bucket of the e2e server (patches) times 196 pixels per patch: the shrink limit.
SHRINK_MAX_PIXELS = 4096 * 196
MIN_PIXELS = 3136
TEXT = "Describe the image in one word."


def expected_aligned_size(width: int, height: int, max_pixels: int = SHRINK_MAX_PIXELS) -> tuple[int, int]:
    """(W, H) by the documented rule: each side to the nearest multiple of 112, scaled down to fit max_pixels."""
    w = max(TILE, round(width / TILE) * TILE)
    h = max(TILE, round(height / TILE) * TILE)
    if w * h > max_pixels:
        scale = math.sqrt(width * height / max_pixels)
        w = max(TILE, math.floor(width / scale / TILE) * TILE)
        h = max(TILE, math.floor(height / scale / TILE) * TILE)
    assert w * h >= MIN_PIXELS
    return w, h


def expected_image_tokens(width: int, height: int, max_pixels: int = SHRINK_MAX_PIXELS) -> int:
    w, h = expected_aligned_size(width, height, max_pixels)
    return (w // 28) * (h // 28)


def png_url(image: Image.Image) -> str:
    buf = io.BytesIO()
    image.save(buf, "PNG")
    return data_url(buf.getvalue())


def data_url(payload: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(payload).decode()}"


def photo(images_dir: Path, name: str, size: tuple[int, int] | None = None) -> Image.Image:
    image = Image.open(images_dir / name).convert("RGB")
    return image.resize(size, Image.Resampling.BICUBIC) if size else image


def messages(urls: list[str], text: str) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    content.append({"type": "text", "text": text})
    return [{"role": "user", "content": content}]


@cache
def _tokenizer(model_dir: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


def expected_prompt_tokens(model_dir: Path, image_tokens: list[int], text: str) -> int:
    """Chat-template tokens of the request with each ``<|image_pad|>`` replaced by that image's token count."""
    tok = _tokenizer(str(model_dir))
    parts: list[dict[str, Any]] = [{"type": "image"} for _ in image_tokens] + [{"type": "text", "text": text}]
    ids = tok.apply_chat_template([{"role": "user", "content": parts}], add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    pad = tok.convert_tokens_to_ids("<|image_pad|>")
    assert list(ids).count(pad) == len(image_tokens)
    return len(ids) - len(image_tokens) + sum(image_tokens)


def chat(server: Server, urls: list[str], text: str = TEXT, **extra: Any) -> httpx.Response:
    body = {"model": server.model, "messages": messages(urls, text), "max_tokens": 2, "temperature": 0.0, **extra}
    return httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=180)


def prompt_tokens(response: httpx.Response) -> int:
    assert response.status_code == 200, response.text
    return int(response.json()["usage"]["prompt_tokens"])

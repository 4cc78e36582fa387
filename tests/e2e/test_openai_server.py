"""The real vLLM OpenAI server with our plugin: aligned billing, bucket-only tower shapes, metrics, bad input.

Photos: scikit-image sample images in tests/data/images (licences in tests/data/SOURCES.md).
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.e2e.helpers import (
    TEXT,
    chat,
    data_url,
    expected_image_tokens,
    expected_prompt_tokens,
    photo,
    png_url,
    prompt_tokens,
)
from tests.e2e.server import BUCKETS, IMAGES_DIR, Server
from tests.support.bad_inputs import png_header_only

BUCKET_SET = {int(b) for b in BUCKETS.split(",")}


def metrics(server: Server) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = httpx.get(server.base_url + "/metrics", timeout=30).text
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in text.splitlines():
        m = re.match(r"^(vllm_hpu_mm_\w+)(?:\{(.*)\})? (\S+)$", line)
        if m:
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def total(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def new_passes(server: Server, before: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in server.shape_lines()[before:]]


def test_text_only(server: Server) -> None:
    assert prompt_tokens(chat(server, [])) == expected_prompt_tokens(server.model_dir, [], TEXT)


@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("skimage_chelsea.png", (500, 333)),  # stock rule: 216 tokens; aligned 448x336 -> 192
        ("skimage_rocket.jpg", (3000, 200)),  # aligned 3024x224 -> 864
        ("skimage_camera.png", None),  # 512x512 as published -> 560x560 -> 400
        ("skimage_rocket.jpg", (2000, 2000)),  # above the largest bucket: shrunk to 896x896 -> 1024
    ],
)
def test_one_image_bills_aligned_tokens(server: Server, name: str, size: tuple[int, int] | None) -> None:
    image = photo(IMAGES_DIR, name, size)
    before = len(server.shape_lines())
    got = prompt_tokens(chat(server, [png_url(image)]))
    tokens = expected_image_tokens(*image.size)
    assert got == expected_prompt_tokens(server.model_dir, [tokens], TEXT)
    passes = new_passes(server, before)
    assert passes, "the vision tower did not run"
    assert all(p["bucket"] in BUCKET_SET and p["total"] == p["bucket"] for p in passes)
    assert [n // 4 for p in passes for n in p["images"]] == [tokens]


def test_literal_counts_for_odd_sizes(server: Server) -> None:
    """The aligned counts named in the issue and the facts, as literals (not via the rule in helpers.py)."""
    for size, tokens in [((500, 333), 192), ((3000, 200), 864), ((640, 427), 384)]:
        image = photo(IMAGES_DIR, "skimage_chelsea.png", size)
        assert expected_image_tokens(*size) == tokens
        got = prompt_tokens(chat(server, [png_url(image)], text=f"size {size}"))
        assert got == expected_prompt_tokens(server.model_dir, [tokens], f"size {size}")


def test_several_images_are_packed_into_bucket_passes(server: Server) -> None:
    images = [
        photo(IMAGES_DIR, "skimage_camera.png", (300, 300)),  # 336x336 -> 576 patches
        photo(IMAGES_DIR, "skimage_coins.png", (400, 330)),  # 448x336 -> 768
        photo(IMAGES_DIR, "skimage_page.png", (230, 220)),  # 224x224 -> 256
    ]
    before = len(server.shape_lines())
    got = prompt_tokens(chat(server, [png_url(i) for i in images]))
    tokens = [expected_image_tokens(*i.size) for i in images]
    assert got == expected_prompt_tokens(server.model_dir, tokens, TEXT)
    passes = new_passes(server, before)
    assert all(p["bucket"] in BUCKET_SET and p["total"] == p["bucket"] for p in passes)
    assert sorted(n for p in passes for n in p["images"]) == sorted(4 * t for t in tokens)
    assert any(len(p["images"]) > 1 for p in passes), f"nothing was packed: {passes}"


def test_per_request_max_pixels_is_honoured(server: Server) -> None:
    image = photo(IMAGES_DIR, "skimage_chelsea.png", (640, 427))
    limit = 200704
    got = prompt_tokens(chat(server, [png_url(image)], text="small", mm_processor_kwargs={"max_pixels": limit}))
    tokens = expected_image_tokens(640, 427, max_pixels=limit)
    assert tokens == 192  # 448x336, below the 384 tokens of the default limit
    assert got == expected_prompt_tokens(server.model_dir, [tokens], "small")


def _truncated_png() -> bytes:
    buf = io.BytesIO()
    photo(IMAGES_DIR, "skimage_chelsea.png").save(buf, "PNG")
    data = buf.getvalue()
    return data[: len(data) // 2]


@pytest.mark.parametrize(
    ("case", "url", "message"),
    [
        ("corrupt", data_url(b"\x89PNG\r\n\x1a\n" + b"not an image at all" * 8), r"image"),
        ("truncated", data_url(_truncated_png()), r"truncated|image"),
        ("zero bytes", data_url(b""), r"image"),
        ("absurd aspect 1x300", png_url(Image.new("RGB", (1, 300), "white")), r"aspect ratio 300\.0:1.*at most 200"),
        ("decompression bomb", data_url(png_header_only(40000, 40000)), r"pixels|bomb|DecompressionBomb|exceeds"),
    ],
)
def test_bad_image_gets_4xx_and_server_keeps_serving(server: Server, case: str, url: str, message: str) -> None:
    bad = chat(server, [url])
    assert 400 <= bad.status_code < 500, (case, bad.status_code, bad.text)
    error = bad.json()["error"]["message"]
    assert re.search(message, error, re.IGNORECASE), (case, error)
    good = chat(server, [png_url(photo(IMAGES_DIR, "skimage_chelsea.png", (224, 224)))], text=f"after {case}")
    assert good.status_code == 200, good.text


def test_metrics_reach_the_api_server(server: Server) -> None:
    """Our counters live in the engine's worker process; /metrics of the API server shows them."""
    before = metrics(server)
    lines_before = len(server.shape_lines())
    image = photo(IMAGES_DIR, "skimage_rocket.jpg", (1800, 1500))  # above 4096 patches: shrunk
    assert chat(server, [png_url(image)], text="metrics").status_code == 200
    after = metrics(server)
    passes = new_passes(server, lines_before)
    assert passes
    assert total(after, "vllm_hpu_mm_warmup_captures_total") == len(BUCKET_SET)
    assert total(after, "vllm_hpu_mm_vision_encoder_passes_total") - total(
        before, "vllm_hpu_mm_vision_encoder_passes_total"
    ) == len(passes)
    padded = sum(p["padding"] for p in passes)
    assert total(after, "vllm_hpu_mm_vision_padded_patches_total") - total(
        before, "vllm_hpu_mm_vision_padded_patches_total"
    ) == pytest.approx(padded)
    assert total(after, "vllm_hpu_mm_oversize_images_total", policy="shrink") >= 1 + total(
        before, "vllm_hpu_mm_oversize_images_total", policy="shrink"
    )
    # Only bucket shapes ever reached the tower, over the whole session so far.
    buckets = {dict(ls)["bucket"] for (n, ls) in after if n == "vllm_hpu_mm_vision_encoder_passes_total"}
    assert buckets
    assert buckets <= {str(b) for b in BUCKET_SET}


def test_startup_logged_settings_and_warmup_once_per_process(server: Server) -> None:
    log = server.log_text()
    settings = re.findall(r"\((\w+) pid=(\d+)\).*vllm-hpu-mm: buckets=256,1024,4096 oversize_policy=shrink", log)
    pids = [pid for _, pid in settings]
    assert pids, "no settings line"
    assert len(pids) == len(set(pids)), settings  # one line per process
    assert re.search(r"captured 3/3 vision buckets in [\d.]+ s \(cpu\)", log)
    assert "Unknown vLLM environment variable" not in log

"""The processor-side counters on the real server, and ``buckets plan --from-metrics`` against its ``/metrics``.

Image sizes are drawn at run time (the seed is printed and is in every failure message). Every image is random
noise, so vLLM's processor cache never sees one twice (a cache hit skips processing and is not counted, see
docs/metrics.md).
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.e2e.helpers import expected_image_tokens, messages, png_url
from tests.e2e.server import Server
from vllm_hpu_mm.buckets.live import parse_exposition
from vllm_hpu_mm.buckets.planner import evaluate, optimal_buckets
from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.errors import ConfigError

NUM_REQUESTS = 6


def noise(width: int, height: int, rng: random.Random) -> Image.Image:
    # A random 8x8 pattern scaled up: unique per image, cheap to encode.
    small = Image.frombytes("RGB", (8, 8), bytes(rng.randrange(256) for _ in range(8 * 8 * 3)))
    return small.resize((width, height), Image.Resampling.NEAREST)


def counted(server: Server) -> Counter[int]:
    live = parse_exposition(httpx.get(server.base_url + "/metrics", timeout=30).text, "e2e")
    return Counter(live.images)


def test_metrics_count_the_aligned_patches_and_plan_from_them(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = int(time.time())
    print(f"image-size seed {seed}", file=sys.stderr)
    rng = random.Random(seed)
    try:
        before = counted(server)
    except ConfigError:  # no image counted yet in this session: the counter family is absent
        before = Counter()
    sent: Counter[int] = Counter()
    for _ in range(NUM_REQUESTS):
        sizes = [(rng.randint(60, 1500), rng.randint(60, 1500)) for _ in range(rng.randint(1, 3))]
        sizes = [(w, h) for w, h in sizes if max(w, h) / min(w, h) < 20]
        urls = [png_url(noise(w, h, rng)) for w, h in sizes]
        body: dict[str, Any] = {"model": server.model, "messages": messages(urls, "Hi"), "max_tokens": 1}
        r = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=180)
        assert r.status_code == 200, (seed, sizes, r.text)
        sent.update(4 * expected_image_tokens(w, h) for w, h in sizes)  # 4 patches per merged token
    after = counted(server)
    assert after - before == sent, f"seed {seed}"
    assert all(after[p] >= before[p] for p in before)

    url = server.base_url + "/metrics"
    assert main(["buckets", "plan", "--from-metrics", url, "--num-buckets", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    flat = [p for p, n in sorted(after.items()) for _ in range(n)]
    best = optimal_buckets(flat, 3)
    assert out["buckets"] == list(best), f"seed {seed}"
    assert out["padded_patches"] == evaluate(flat, best).padded_patches
    # Every image the server processed, the ones sent here included (other tests of the session may have sent more).
    assert out["num_images"] == sum(after.values()) == sum(before.values()) + sum(sent.values())


def test_the_server_counts_each_multimodal_request_and_replay_reads_its_text_traffic(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    url = server.base_url + "/metrics"
    rng = random.Random(7)
    body: dict[str, Any] = {"model": server.model, "messages": messages([png_url(noise(448, 336, rng))], "Hi"),
                            "max_tokens": 2}  # fmt: skip
    assert httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=180).status_code == 200
    text = httpx.get(url, timeout=30).text
    assert "vllm_hpu_mm_requests_total{" in text  # our processor's per-request counter, prompt length bucketed
    assert "vllm:request_prompt_tokens_bucket" in text  # vLLM's own
    code = main(["buckets", "replay", "--from-metrics", url, "--max-model-len", "4096", "--max-num-seqs", "8",
                 "--requests", "50", "--json"])  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert "text from vLLM's histograms" in report["traffic"]
    assert report["configurations"][-1]["run_time_compiles"]["prompt"] == 0

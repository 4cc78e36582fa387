"""Reliability through the real OpenAI server (quick version of ``benchmarks/performance/reliability_cpu.py``).

Every bad image gets a 4xx that says what is wrong and the next good request succeeds; awkward but valid images
(CMYK, 16-bit, palette, RGBA, animated GIF, ...) are served; a short mixed burst at concurrency 4 has no failure.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.bad_inputs import corpus
from tests.support.batch_client import run_batch
from tests.support.reliability import SweepRow, bad_input_sweep, mixed_payloads

ITEMS = corpus()


@pytest.fixture(scope="module")
def sweep(server: Any) -> dict[str, SweepRow]:
    return {row.name: row for row in bad_input_sweep(server.base_url, server.model, ITEMS, timeout_s=60)}


@pytest.mark.parametrize("name", [i.name for i in ITEMS if i.expect == "reject"])
def test_bad_image_gets_a_clear_4xx(sweep: dict[str, SweepRow], name: str) -> None:
    row = sweep[name]
    assert row.status is not None
    assert 400 <= row.status < 500, (row.status, row.message)
    assert row.passed, f"unclear message for {name}: {row.message!r}"


@pytest.mark.parametrize("name", [i.name for i in ITEMS if i.expect == "accept"])
def test_awkward_but_valid_image_is_served(sweep: dict[str, SweepRow], name: str) -> None:
    assert sweep[name].status == 200, sweep[name].message


@pytest.mark.parametrize("name", [i.name for i in ITEMS])
def test_server_keeps_serving_after_each_item(sweep: dict[str, SweepRow], name: str) -> None:
    assert sweep[name].good_after == 200


def test_mixed_burst_has_no_failure(server: Any) -> None:
    pairs = mixed_payloads(20, server.model, seed=7, max_tokens=2)
    result = run_batch([p for _, p in pairs], base_url=server.base_url, concurrency=4, timeout_s=120, progress=False)
    assert [(r.index, r.status, r.error) for r in result.failures] == []
    assert result.max_in_flight == 4
    text_only = [
        r.usage["prompt_tokens"]
        for (kind, _), r in zip(pairs, result.items, strict=True)
        if r.usage and kind == "text_only"
    ]
    with_image = [
        r.usage["prompt_tokens"]
        for (kind, _), r in zip(pairs, result.items, strict=True)
        if r.usage and kind != "text_only"
    ]
    assert text_only, "the burst should contain text-only requests"
    assert min(with_image) > max(text_only)  # image tokens are billed on top of the text

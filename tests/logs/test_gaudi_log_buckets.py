"""Public Gaudi logs that print their bucket settings (tests/data/gaudi_logs, buckets/ included): the count each
logged release's model plans equals the count the log printed, on the development and the held-out logs alike
(benchmarks/agreement/gaudi_log_buckets.py, its table in benchmarks/agreement/results/gaudi_log_buckets.md)."""

from __future__ import annotations

from benchmarks.common import planned, rows
from tests.support.gaudi_logs import ALL_GAUDI_LOGS, BUCKET_LOGS


def test_every_checkable_logs_planned_count_equals_its_logged_count() -> None:
    checked = [r for r in rows() if r["planned"] is not None]
    assert [(r["log"], r["phase"]) for r in checked if r["planned"] != r["logged"]] == []
    assert sum(r["set"] == "dev" for r in checked) >= 4
    assert sum(r["set"] == "heldout" for r in checked) >= 3


def test_the_bucket_only_excerpts_stay_out_of_the_memory_sweep() -> None:
    assert BUCKET_LOGS
    assert not set(BUCKET_LOGS) & set(ALL_GAUDI_LOGS)
    assert {p.parent.name for p in BUCKET_LOGS} == {"dev", "heldout"}


def test_the_forks_2024_eras_differ_where_their_code_differs() -> None:
    # PR 235's bugfix, one configuration before and after: values below the range minimum dropped.
    before = planned("fork-2024-budget", (64, 32, 64), (768, 128, 768), 131072)
    after = planned("fork-2024-budget-min", (64, 32, 64), (768, 128, 768), 131072)
    assert (before, after) == (12, 1)
    # PR 206 dropped buckets over the token budget; the e30ddc3db product kept all 56.
    assert planned("fork-2024-linear", (1, 32, 64), (128, 128, 1024), None) == 56
    assert planned("fork-2024-budget", (1, 32, 64), (128, 128, 1024), 2048) == 23

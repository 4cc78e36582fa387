"""The OOM doctor on the held-out logs (tests/data/logs/heldout): real public logs collected and labelled before the
rules were tuned, and not used while tuning them (see tests/data/logs/SOURCES.md). This file scores them."""

from __future__ import annotations

from tests.support.logs import DEVELOPMENT_LOGS, TARGET_ACCURACY, body_lines, expected_stage
from tests.support.logs import HELDOUT_LOGS as HELDOUT
from vllm_hpu_mm.logs.doctor import diagnose_lines


def score() -> tuple[int, dict[str, tuple[str, str]]]:
    verdicts: dict[str, tuple[str, str]] = {
        p.name: (expected_stage(p), diagnose_lines(body_lines(p)).stage) for p in HELDOUT
    }
    return sum(want == got for want, got in verdicts.values()), verdicts


def test_heldout_accuracy_meets_the_target() -> None:
    right, verdicts = score()
    misses = {name: v for name, v in verdicts.items() if v[0] != v[1]}
    assert len(HELDOUT) >= 12
    assert right / len(HELDOUT) >= TARGET_ACCURACY, f"{right}/{len(HELDOUT)} right; misses (want, got): {misses}"


def test_heldout_healthy_logs_raise_no_alarm() -> None:
    _, verdicts = score()
    alarms = [name for name, (want, got) in verdicts.items() if want == "none" and got != "none"]
    assert not alarms
    assert sum(want == "none" for want, _ in verdicts.values()) >= 5


def test_heldout_logs_are_not_in_the_development_set() -> None:
    names = {p.name for p in HELDOUT}
    assert not names & {p.name for p in DEVELOPMENT_LOGS}

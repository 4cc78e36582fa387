"""Public Gaudi logs are reproduced within the issue's tolerances, on the held-out logs as on the development ones:
given the logged free memory, usable / graph reserve / KV / blocks within 1%; from the inputs alone, weights within
3% and KV blocks within 3%."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.data import REPO
from vllm_hpu_mm.logs.reproduce import Reproduction, read_log, reproduce

LOGS = REPO / "tests" / "data" / "gaudi_logs"
CONFIGS = REPO / "tests" / "data" / "configs"
ALL = sorted(LOGS.rglob("*.log"))


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_public_gaudi_log_is_reproduced_within_tolerance(path: Path) -> None:
    r = reproduce(path.name, read_log(path.read_text(encoding="utf-8").splitlines()), CONFIGS)
    assert r.given_free or r.from_inputs
    for name, pair in r.given_free.items():
        assert Reproduction.error(pair) <= 0.01, (name, pair)
    for name, pair in r.from_inputs.items():
        if name != "warmup_seconds":  # reported, with no tolerance: see the warm-up test below
            assert Reproduction.error(pair) <= 0.03, (name, pair)


def test_the_held_out_set_has_splits_and_weights_never_used_for_tuning() -> None:
    held = [reproduce(p.name, read_log(p.read_text(encoding="utf-8").splitlines()), CONFIGS)
            for p in ALL if p.parent.name == "heldout"]  # fmt: skip
    assert any("kv_cache" in r.given_free for r in held)
    assert sum("weights" in r.from_inputs for r in held) >= 2


def test_the_log_reader_takes_every_printed_figure() -> None:
    logged = read_log((LOGS / "heldout" / "vllm_fork_147_llama3_8b_gaudi2.log").read_text().splitlines())
    assert (logged.kv_blocks, logged.warmup_seconds, logged.inputs["runtime"]) == (1519, 49, "vllm-fork")
    assert logged.profile_bytes == 504 * 2**20
    assert logged.graphs_warmed == 24 + 48  # 15 of 24 prompt graphs (62.5%) and all 48 decode graphs


def test_warm_up_seconds_come_from_the_development_log_and_are_reported_on_the_held_out_one() -> None:
    reproduced = [reproduce(p.name, read_log(p.read_text(encoding="utf-8").splitlines()), CONFIGS) for p in ALL]
    by_set = {p.parent.name: r for p, r in zip(ALL, reproduced, strict=True) if "warmup_seconds" in r.from_inputs}
    assert by_set["dev"].from_inputs["warmup_seconds"] == (32, 32)
    logged, planned = by_set["heldout"].from_inputs["warmup_seconds"]
    # The held-out log is the fork before its PR 252 (an older capture path): 49 s logged, 92 s estimated.
    assert (logged, planned) == (49, 92)

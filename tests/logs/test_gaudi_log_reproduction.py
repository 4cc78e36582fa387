"""Public Gaudi logs are reproduced within the tolerances docs/memory-plan.md states (``reproduce.TOLERANCES``), on
the held-out logs as on the development ones: given the logged free memory, usable / graph reserve / KV / blocks
within 1%; from the inputs alone, weights within 3%, free memory and KV blocks within 5%, the device's total within
1%."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.gaudi_logs import ALL_GAUDI_LOGS, GAUDI_LOGS, run_inputs
from vllm_hpu_mm.logs.reproduce import Mode, Reproduction, read_log, reproduce
from vllm_hpu_mm.runtimes.base import Runtime


def reproduced(path: Path) -> Reproduction:
    return reproduce(path.name, read_log(path.read_text(encoding="utf-8").splitlines()), run_inputs(path))


@pytest.mark.parametrize("path", ALL_GAUDI_LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_public_gaudi_log_is_reproduced_within_tolerance(path: Path) -> None:
    r = reproduced(path)
    assert r.given_free or r.from_inputs
    ways: tuple[tuple[Mode, dict[str, tuple[int, int]]], ...] = (
        ("given_free", r.given_free),
        ("from_inputs", r.from_inputs),
    )
    for mode, values in ways:
        for name, pair in values.items():
            tolerance = Reproduction.tolerance(mode, name)
            if name in ("warmup_seconds", "profile"):  # reported, no tolerance: see the tests below
                assert tolerance is None
                continue
            assert tolerance is not None, (mode, name)
            assert Reproduction.error(pair) <= tolerance, (mode, name, pair)


def test_the_held_out_set_has_splits_and_weights_never_used_for_tuning() -> None:
    held = [reproduced(p) for p in ALL_GAUDI_LOGS if p.parent.name == "heldout"]
    assert any("kv_cache" in r.given_free for r in held)
    assert sum("weights" in r.from_inputs for r in held) >= 2


def test_the_log_reader_takes_every_printed_figure() -> None:
    path = GAUDI_LOGS / "heldout" / "vllm_fork_147_llama3_8b_gaudi2.log"
    logged = read_log(path.read_text().splitlines())
    assert (logged.kv_blocks, logged.warmup_seconds) == (1519, 49)
    assert (logged.gpu_memory_utilization, logged.graph_reserved_mem) == (0.5, 0.4)
    assert logged.profile_bytes == 504 * 2**20
    assert logged.graphs_warmed == 24 + 48  # 15 of 24 prompt graphs (62.5%) and all 48 decode graphs
    assert run_inputs(path).runtime.name is Runtime.VLLM_FORK


def test_a_log_without_memory_lines_has_no_memory() -> None:
    assert not read_log(["INFO Starting vLLM API server", "INFO Application startup complete."]).has_memory
    assert read_log(["INFO habana_executor.py:87] # HPU blocks: 3184, # CPU blocks: 256"]).has_memory


def test_warm_up_seconds_come_from_the_logged_buckets_in_the_logs_own_era() -> None:
    by_set = {p.parent.name: r for p in ALL_GAUDI_LOGS if "warmup_seconds" in (r := reproduced(p)).from_inputs}
    # Both are the fork's V0 runner (two passes); the shipped fit read both totals (its held-out error is leave one
    # log out: benchmarks/fits/results/warmup_time_fit.md). The held-out log: 72 buckets eagerly then 15 + 48 graphs.
    assert by_set["dev"].from_inputs["warmup_seconds"][0] == 32
    assert by_set["heldout"].from_inputs["warmup_seconds"][0] == 49
    for logged, planned in (by_set[s].from_inputs["warmup_seconds"] for s in ("dev", "heldout")):
        assert abs(planned - logged) / logged <= 0.35


def test_the_forks_profiling_residue_comes_from_the_model_and_its_pass_shape() -> None:
    """One layer's activations over the pass's 4 x 1024 tokens and four sequences' logits: 355 MiB logged on the
    development log; the held-out log's 504 MiB is reported (30% off) while its free memory stays within 0.2%."""
    by_set = {p.parent.name: r for p in ALL_GAUDI_LOGS if "profile" in (r := reproduced(p)).from_inputs}
    logged, planned = by_set["dev"].from_inputs["profile"]
    assert abs(planned - logged) / logged < 0.01
    held = by_set["heldout"]
    assert Reproduction.error(held.from_inputs["free"]) < 0.03
    assert Reproduction.error(held.from_inputs["kv_blocks"]) < 0.03


@pytest.mark.parametrize("path", ALL_GAUDI_LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_blind_kv_blocks_are_within_3_percent_on_every_log_that_prints_them(path: Path) -> None:
    """Issue 32: from the inputs alone (weights from the config, the line's own profiling pass, the device's total),
    KV blocks within 3% wherever the log prints a block count with its inputs stated, long contexts included."""
    r = reproduced(path)
    if "kv_blocks" in r.from_inputs:
        assert Reproduction.error(r.from_inputs["kv_blocks"]) <= 0.03, r.from_inputs["kv_blocks"]


def test_the_131k_context_logs_profile_their_lines_largest_prompt_bucket_not_a_whole_sequence() -> None:
    """Both 8B logs ran at the config's 131072 tokens; their lines (1.17, 1.18) profile the prompt bucket maxima,
    4 x 1024 tokens: a whole 131072-token sequence (11 GiB held) would put their blind KV blocks 13% low."""
    for path in (GAUDI_LOGS / "dev" / "vllm_gaudi_perf_tuning_llama31_8b_gaudi2.log",
                 GAUDI_LOGS / "heldout" / "vllm_fork_147_llama3_8b_gaudi2.log"):  # fmt: skip
        inputs = run_inputs(path)
        assert inputs.engine is not None
        assert inputs.engine.max_model_len == 131072
        r = reproduced(path)
        assert "(batch 4 x 1024 tokens)" in r.alone.formula
        assert r.alone.profile_bytes < 400 * 2**20
        assert Reproduction.error(r.from_inputs["kv_blocks"]) < 0.01

"""The text buckets planned from a replay's schedules: every load weighs the same in time when the load is unknown,
the default rule's plan never compiles through vllm-gaudi's runner at any load and pads no longer than its own
strategy at the loads it was judged on, and a given budget is capped by what the runtime itself warms."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.buckets.text import TextBucketPlan, TextLimits
from vllm_hpu_mm.buckets.text_budget import BudgetedPlan
from vllm_hpu_mm.buckets.text_time import BudgetTooSmall
from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.catalog import CATALOG, DEFAULT_MODEL
from vllm_hpu_mm.plan.text_buckets import load_shapes, plan_for_traffic, planning_weights, text_time
from vllm_hpu_mm.plan.text_choice import default_within_warmed, within_warmed
from vllm_hpu_mm.replay.schedules import Images, replay_model, schedules
from vllm_hpu_mm.runtimes.vllm_gaudi import VllmGaudi
from vllm_hpu_mm.runtimes.vllm_gaudi.exponential import decode_block_ceiling
from vllm_hpu_mm.traffic.default import default_traffic
from vllm_hpu_mm.traffic.requests import Request, Traffic

SHAPE = EngineShape(max_model_len=16384, max_num_seqs=32, max_num_batched_tokens=4096, block_size=128,
                    num_kv_blocks=3000)  # fmt: skip
TEXT_LIMITS = TextLimits.of(SHAPE, decode_block_ceiling(SHAPE))
TIME = text_time(CATALOG[DEFAULT_MODEL], "gaudi2", block_size=128, tensor_parallel_size=1)


def runs(concurrency: int | None):  # type: ignore[no-untyped-def]
    return schedules(default_traffic(), SHAPE, Images((1600, 3136, 12544)), concurrency=concurrency, requests=200)


def test_with_the_load_unknown_every_load_weighs_the_same_useful_seconds() -> None:
    loads = load_shapes(runs(None))
    assert [load.load for load in loads] == [f"{n} at once" for n in (1, 2, 4, 8, 16, 24, 32)]
    prefill, decode = planning_weights(loads[:1], TIME, balanced=True)
    useful = sum(n * TIME.prefill_s(1, q, c) for (q, c), n in prefill.items()) + sum(
        n * TIME.decode_s(s, k) for (s, k), n in decode.items())  # fmt: skip
    assert useful == pytest.approx(1e6, rel=0.01)


def test_the_default_rule_never_compiles_and_pads_no_longer_than_exp_at_the_loads_it_was_judged_on() -> None:
    r = runs(None)
    own = VllmGaudi().text_shapes(SHAPE)
    chosen = plan_for_traffic(r, TEXT_LIMITS, own, TIME, budget=None)
    total = len(own.prefill) + len(own.decode)
    # at most a half, unless buckets beyond it keep every judged load from padding longer (the plan states them)
    beyond = chosen.worst.beyond if chosen.worst is not None else 0
    assert chosen.plan.graphs <= chosen.budget <= total // 2 + beyond
    told = VllmGaudi().with_text_buckets(chosen.plan.prompt, chosen.plan.decode)
    assert told is not None
    replayed = replay_model(told, SHAPE, r, "planned")
    assert not replayed.compiles
    assert not replayed.fallbacks
    if not chosen.short:
        assert all(v.ours.padded_s <= v.own.padded_s * (1 + 1e-9) for v in chosen.loads)
    else:  # a half, and the reason names the loads still short
        assert chosen.budget == total // 2
        assert all(load in chosen.reason for load in chosen.short)


def test_a_budget_above_what_the_runtime_warms_is_refused_in_one_line() -> None:
    own = VllmGaudi().text_shapes(SHAPE)
    with pytest.raises(ConfigError, match=r"^--text-graph-budget 2147483647 is invalid; accepted: at most \d+"):
        plan_for_traffic(runs(8), TEXT_LIMITS, own, TIME, budget=2147483647)


def test_decode_steps_sharing_a_cached_prefix_past_exps_ceiling_are_held_by_a_planned_bucket() -> None:
    # vllm-gaudi counts a shared prefix's blocks once per sequence (the block tables flattened): 8 sequences on a
    # 4,096-token cached prefix hold about 280 blocks where exp's decode buckets stop at 3x the 80 KV blocks; exp
    # runs them unpadded (its lookup is capped, the block list never cut) and compiles, a bucket file may hold them
    shape = EngineShape(max_model_len=8192, max_num_seqs=8, max_num_batched_tokens=2048, block_size=128,
                        num_kv_blocks=80)  # fmt: skip
    limits = TextLimits.of(shape, decode_block_ceiling(shape))
    traffic = Traffic({Request(None, 4096 + 64 * k, 96, 4096): 1 for k in range(1, 9)}, "a shared prefix")
    r = schedules(traffic, shape, Images((1600,)), concurrency=8, requests=64)
    assert max(k for load in load_shapes(r) for _, k in load.decode) > limits.decode_block_cap == 240
    own = VllmGaudi().text_shapes(shape)
    assert replay_model(VllmGaudi(), shape, r, "exp").compiles  # exp's own buckets leave them to compile
    chosen = plan_for_traffic(r, limits, own, TIME, budget=None)
    told = VllmGaudi().with_text_buckets(chosen.plan.prompt, chosen.plan.decode)
    assert told is not None
    assert not replay_model(told, shape, r, "planned").compiles
    assert max(b[2] for b in chosen.plan.decode) > limits.decode_block_cap


def _listed(n: int) -> BudgetedPlan:
    """A stand-in plan of ``n`` listed buckets (half of them decode), at least 10 keeping every shape."""
    if n < 10:
        raise BudgetTooSmall(f"text graph budget {n} is too small", 10)
    prompt = tuple((1, 128 * (k + 1), 0) for k in range(n - n // 2))
    decode = tuple((1, 1, k + 1) for k in range(n // 2))
    return BudgetedPlan(TextBucketPlan(prompt, decode, 1, 1, (len(prompt), len(decode))), n, "given", ())


def _tripled_decode(p: TextBucketPlan) -> int:  # speculative decoding: each listed decode bucket warms three
    return len(p.prompt) + 3 * len(p.decode)


def test_a_given_budget_is_planned_at_fewer_listed_buckets_where_the_runtime_warms_more() -> None:
    chosen = within_warmed(_listed, 60, _tripled_decode, "--text-graph-budget")
    assert _tripled_decode(chosen.plan) <= 60
    assert _tripled_decode(chosen.plan) >= 56  # the most that fits, not merely some plan within it
    assert chosen.budget == 60
    assert "the runtime warms" in chosen.reason


def test_a_given_budget_below_what_the_fewest_listed_buckets_warm_is_refused_with_that_least() -> None:
    with pytest.raises(BudgetTooSmall, match="accepted: at least 20 graphs") as refused:
        within_warmed(_listed, 15, _tripled_decode, "--text-graph-budget")
    assert refused.value.least == 20


def test_the_default_budget_is_held_in_the_graphs_the_runtime_warms_not_the_buckets_listed() -> None:
    # the default rule took a third of the runtime's own 160 over the listed buckets; the runtime warms more
    chosen = default_within_warmed(_listed, _listed(53), 160, _tripled_decode, "--text-graph-budget")
    assert chosen.budget == 53
    assert 49 <= _tripled_decode(chosen.plan) <= 53
    assert f"counted as the runtime warms them: {_tripled_decode(chosen.plan)} for the" in chosen.reason


@pytest.mark.parametrize("flag", ["--text-graph-budget", "--plan-text-graph-budget"])
def test_a_given_budget_too_small_for_the_ladders_is_refused_naming_the_option_as_typed(flag: str) -> None:
    own = VllmGaudi().text_shapes(SHAPE)
    with pytest.raises(BudgetTooSmall, match=rf"^{flag} 3 is too small .*; accepted: at least \d+ graphs") as refused:
        plan_for_traffic(runs(8), TEXT_LIMITS, own, TIME, budget=3, budget_flag=flag)
    assert refused.value.least > 3

"""Under VLLM_SKIP_WARMUP (as the runtime planned for reads it) every line of the plan says what that runtime then
does, from one rule per runtime and release (``RuntimeTraits.unwarmed_graphs``): vllm-gaudi and vllm-fork 1.19 - 1.22
capture each bucket's graph on its first use with no pool check; vllm-fork 1.17 / 1.18 run no graph at all."""

from __future__ import annotations

import re
from typing import Any

import pytest

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.inputs import build
from vllm_hpu_mm.plan.planner import Plan, plan
from vllm_hpu_mm.plan.render import to_table
from vllm_hpu_mm.values import GIB

SKIP = {"VLLM_SKIP_WARMUP": "true"}


def skipped(runtime: str, **request: Any) -> Plan:
    args = SizingArgs(device="gaudi2", runtime=runtime, max_model_len=32768, **request)  # type: ignore[arg-type]
    return plan(build(args, load(SKIP), SKIP))


def rows(p: Plan) -> str:
    """The table's graph rows (decode, text, vision)."""
    return "\n".join(x for x in to_table(p).splitlines() if x.lstrip().startswith(("decode ", "text ", "vision ")))


@pytest.mark.parametrize("runtime", ["vllm-gaudi", "vllm-fork==0.9.0.1", "vllm-fork==0.8.5.post1"])
def test_the_graph_rows_say_each_graph_is_captured_on_first_use_with_no_pool_check(runtime: str) -> None:
    p = skipped(runtime)
    text = rows(p)
    assert text.count("none warmed at start-up, each captured on its first use with no pool check") == 2
    assert "graphs fit" not in text  # 1.19 - 1.21.3 said "446/802 graphs fit": its pools bound nothing now
    assert "captured 384" not in text
    assert "captured 128" not in text


def test_fork_1_19_to_1_21_warns_of_its_graphs_beyond_the_pools_at_run_time_not_of_graphs_left_out() -> None:
    # _use_graphs returns True on skip_warmup (hpu_model_runner.py:1052 @3bcdfd4af): no bucket runs without a graph
    p = skipped("vllm-fork==0.8.5.post1")
    codes = {f.code for f in p.findings}
    assert not codes & {"prefill_graphs_skipped", "decode_graphs_skipped"}
    over = next(f for f in p.findings if f.code == "text_graphs_over_pool")
    assert "OOM risk at run time" in over.message
    assert "run without a graph" not in over.message
    assert "unset VLLM_SKIP_WARMUP" in over.fix.text


def test_fork_1_19_to_1_21_sizes_one_reserve_for_all_its_graphs_captured_on_first_use() -> None:
    # r12fork 12: the fix raised the reserve, the enforcement said it "bound nothing". hpu_worker.py
    # determine_num_available_blocks reads it under the skip too (the KV cache leaves it free), and warmup_model
    # returns before it reads the prompt ratio (hpu_model_runner.py:2357 @3bcdfd4af): one reserve holds every graph
    p = skipped("vllm-fork==0.8.5.post1")
    over = next(f for f in p.findings if f.code == "text_graphs_over_pool")
    prefill, decode = map(float, re.search(r"need ([0-9.]+) \+ ([0-9.]+) GiB", over.message).groups())  # type: ignore[union-attr]
    assert over.fix.setting == "VLLM_GRAPH_RESERVED_MEM"
    assert over.fix.value == pytest.approx((prefill + decode) * GIB / p.split.usable_bytes, abs=0.011)
    assert "no pool split" in over.message
    assert "pools of" not in over.message


def test_fork_1_22_over_its_pools_is_an_oom_risk_at_run_time_not_at_warm_up() -> None:
    over = next(f for f in skipped("vllm-fork==0.9.0.1").findings if f.code == "text_graphs_over_pool")
    assert "OOM risk at run time" in over.message
    assert "warm-up" not in over.message
    assert "warmed bucket" not in over.message


def test_fork_1_17_and_1_18_run_no_graph_so_no_pool_leaves_one_out() -> None:
    # _use_graphs graphs only warm-up's graphed_buckets (habana_model_runner.py:645 @84922944d), empty when skipped
    for runtime in ("vllm-fork==0.5.3.post1+gaudi118", "vllm-fork==0.5.3.post1+gaudi117"):
        p = skipped(runtime, graph_reserved_mem=0.01)
        assert not {f.code for f in p.findings} & {"prefill_graphs_skipped", "decode_graphs_skipped"}
        text = rows(p)
        assert text.count("buckets, no graph (VLLM_SKIP_WARMUP: no graph runs") == 2
        assert "graphs fit" not in text


def test_the_warm_up_line_says_what_the_release_then_runs() -> None:
    line = next(x for x in to_table(skipped("vllm-fork==0.5.3.post1+gaudi118")).splitlines() if x.startswith("warm"))
    assert "no graph runs" in line
    assert "compiled on its first use" not in line

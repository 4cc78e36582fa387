"""The ``buckets stale`` job: a server's /metrics pages (tests/data/metrics, SOURCES.md there) replayed with a bucket
file planned for short prompts and with vllm-gaudi's exp, at the e2e server's limits; and the alerting rule of
docs/metrics.md, parsed as Prometheus would read it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.data import DATA, REPO
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.jobs.serve import on_default_device, plan_inputs
from vllm_hpu_mm.jobs.stale import GAUGES, StaleArgs, check_stale, exposition
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.planner import plan

PAGES = DATA / "metrics"
PLAN = str(PAGES / "short_prompts_plan.txt")
PLANNED = str(PAGES / "planned.txt")
DRIFTED = str(PAGES / "drifted.txt")
#: The e2e server's limits (tests/e2e/conftest.py), which the bucket file was written for.
LIMITS = SizingArgs(max_model_len=4096, max_num_seqs=4)
QUICK = StaleArgs(PLANNED, PLAN, requests=200)


def test_the_planned_traffic_is_quiet_and_the_drifted_traffic_fires() -> None:
    planned = check_stale(LIMITS, QUICK, load(), {})
    drifted = check_stale(LIMITS, dataclasses.replace(QUICK, from_metrics=DRIFTED), load(), {})
    window = check_stale(LIMITS, dataclasses.replace(QUICK, from_metrics=DRIFTED, since=PLANNED), load(), {})
    assert not planned.stale
    assert planned.ratio < 1.0
    assert drifted.stale
    assert drifted.ratio > 1.0
    # the window holds only the long prompts: the plan loses more there than over the whole page
    assert window.ratio > drifted.ratio
    assert window.requests == planned.requests == 4 * 200  # load unknown (the gauge read 0): 4 levels up to 4
    for s in (planned, drifted, window):
        assert s.plan_compiles == s.exp_compiles == 0
        assert s.device == "gaudi2"
        assert 0 < s.interval < 1  # the Gaudi2 fit's held-out interval
        assert s.plan.padded_s >= s.plan.real_s > 0
        assert s.plan.real_s == pytest.approx(s.exp.real_s)  # the same schedule, only the padding differs
    assert "since" in window.traffic
    assert "since" not in planned.traffic


def test_any_finite_tolerance_is_taken_a_hundred_times_exps_time_too() -> None:
    # r13replay 18: --tolerance 100 was refused with a bound of 10 that no help or doc gave
    quiet = check_stale(LIMITS, dataclasses.replace(QUICK, from_metrics=DRIFTED, tolerance=100.0), load(), {})
    assert not quiet.stale


def test_a_tolerance_above_the_drift_keeps_it_quiet() -> None:
    drifted = check_stale(LIMITS, dataclasses.replace(QUICK, from_metrics=DRIFTED), load(), {})
    tolerant = check_stale(LIMITS, dataclasses.replace(QUICK, from_metrics=DRIFTED, tolerance=drifted.ratio - 1 + 0.01),
                           load(), {})  # fmt: skip
    assert tolerant.ratio == drifted.ratio
    assert not tolerant.stale


def test_exps_own_buckets_as_the_plan_pad_exactly_as_exp(tmp_path: Path) -> None:
    sizing = on_default_device(dataclasses.replace(LIMITS, runtime="vllm-gaudi"))
    inputs, _ = plan_inputs(sizing, load(), {})
    shapes = inputs.runtime.text_shapes(inputs.engine(plan(inputs).kv_blocks))
    lines = [str(b) for b in shapes.prefill] + [f"({b}, 1, {k})" for b, k in shapes.decode]
    path = tmp_path / "exp.txt"
    path.write_text("\n".join(lines) + "\n")
    same = check_stale(LIMITS, dataclasses.replace(QUICK, from_metrics=DRIFTED, bucket_file=str(path)), load(), {})
    assert same.ratio == pytest.approx(1.0, abs=1e-12)
    assert not same.stale


def test_the_bucket_file_may_come_from_the_runtimes_variable() -> None:
    args = dataclasses.replace(QUICK, bucket_file=None)
    from_env = check_stale(LIMITS, args, load(), {"VLLM_BUCKETING_FROM_FILE": PLAN})
    assert from_env.ratio == check_stale(LIMITS, QUICK, load(), {}).ratio
    with pytest.raises(ConfigError, match="no bucket file to judge"):
        check_stale(LIMITS, args, load(), {})


def page(tmp_path: Path, text: str, name: str = "page.txt") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"from_metrics": "process_cpu_seconds_total 1.0\n"}, "no requests counted"),
        ({"from_metrics": "not { an exposition\n"}, "not a Prometheus text exposition"),
        ({"since": DRIFTED}, "counted more there than at --from-metrics"),  # since a later page: counts went down
        ({"since": PLANNED, "from_metrics": PLANNED}, "no request counted since --since"),
        ({"bucket_file": "(1, 128, 0)\nbanana\n"}, "--bucket-file"),
        ({"tolerance": -0.1}, "--tolerance -0.1 is invalid"),
        ({"tolerance": float("inf")}, "--tolerance inf is invalid; accepted: a finite share of 0 or more"),
    ],
    ids=[
        "no-histograms",
        "not-exposition",
        "counts-went-down",
        "nothing-new",
        "bad-bucket-file",
        "tolerance",
        "infinite-tolerance",
    ],
)
def test_bad_inputs_are_one_config_error(tmp_path: Path, change: dict[str, Any], said: str) -> None:
    for key in ("from_metrics", "bucket_file"):
        if key in change and not change[key].startswith(str(PAGES)):
            change[key] = page(tmp_path, change[key], key)
    with pytest.raises(ConfigError, match=re.escape(said)):
        check_stale(LIMITS, dataclasses.replace(QUICK, **change), load(), {})


@pytest.mark.parametrize(("device", "served_by"), [("cpu", "vllm-cpu"), ("h100", "vllm-cuda")])
def test_a_device_of_another_backend_says_the_alarm_is_vllm_gaudis_alone_and_what_instead(
    device: str, served_by: str
) -> None:
    # r8replay 14, as buckets replay: resolve's runtime/device mismatch offered another runtime, which the alarm refuses
    with pytest.raises(
        ConfigError,
        match=rf"^--device='{device}': the alarm models vllm-gaudi's bucket lookup only, on Gaudi; .*served by "
        rf"{served_by}; accepted: --device gaudi2 or gaudi3; {served_by} reads no bucket file to go stale; "
        r".*fleet plan$",
    ):
        check_stale(dataclasses.replace(LIMITS, device=device), QUICK, load(), {})


@pytest.mark.parametrize("runtime", ["vllm-cuda==0.32.0", "vllm-fork==0.9.0.1", "banana"])
def test_another_runtime_named_is_refused_listing_only_what_the_alarm_takes(runtime: str) -> None:
    # r6releases 19: as buckets replay, vllm-cuda==0.32.0 got the planners' refusal offering vllm-cuda, vllm-fork==X
    with pytest.raises(
        ConfigError,
        match=r"^--runtime=.*: the alarm models vllm-gaudi's bucket lookup only; .*; "
        r"accepted: --runtime vllm-gaudi or vllm-gaudi==X \(a release\) on a Gaudi --device \(gaudi2, gaudi3\)",
    ) as info:
        check_stale(dataclasses.replace(LIMITS, runtime=runtime), QUICK, load(), {})
    # as replay's: what covers a real runtime instead (round 8's replay fixer noticed stale's said nothing)
    real = runtime != "banana"
    assert ("reads no bucket file to go stale; its latencies at real shapes: fleet plan" in str(info.value)) is real


def test_the_gauges_carry_the_verdict() -> None:
    s = check_stale(LIMITS, dataclasses.replace(QUICK, from_metrics=DRIFTED), load(), {})
    registry = CollectorRegistry()
    exposition(s, registry)
    samples = {(x.name, x.labels.get("buckets")): x for f in text_string_to_metric_families(
        generate_latest(registry).decode()) for x in f.samples}  # fmt: skip
    assert {name for name, _ in samples} == set(GAUGES)
    ratio = samples[("vllm_hpu_mm_stale_plan_ratio", None)]
    assert ratio.value == pytest.approx(s.ratio)
    assert ratio.labels == {"bucket_file": "short_prompts_plan.txt", "device": "gaudi2"}
    plan_s, exp_s = (samples[("vllm_hpu_mm_stale_plan_padded_seconds", b)].value for b in ("plan", "exp"))
    assert plan_s / exp_s == pytest.approx(ratio.value)


# --- the alerting rule of docs/metrics.md ---

#: Prometheus' duration grammar (model/time ParseDuration): units from ms to years, largest first.
DURATION = re.compile(r"^((\d+)y)?((\d+)w)?((\d+)d)?((\d+)h)?((\d+)m)?((\d+)s)?((\d+)ms)?$")


def alert_rule() -> dict[str, Any]:
    text = (REPO / "docs" / "metrics.md").read_text()
    block = re.search(r"<!-- alert-rule -->\n```yaml\n(.*?)```", text, re.S)
    assert block is not None, "docs/metrics.md has no alert-rule block"
    rule: dict[str, Any] = yaml.safe_load(block.group(1))
    return rule


def selectors(node: Any) -> set[str]:
    """Every metric a PromQL expression selects (promql_parser's AST, walked through its children)."""
    import promql_parser

    if isinstance(node, promql_parser.VectorSelector):
        assert node.name is not None, "a selector by labels alone: name the metric"
        return {node.name}
    out: set[str] = set()
    for child in ("lhs", "rhs", "expr", "param", "vector_selector"):
        if hasattr(node, child) and getattr(node, child) is not None:
            out |= selectors(getattr(node, child))
    for arg in getattr(node, "args", None) or ():
        out |= selectors(arg)
    return out


def test_the_docs_alert_rule_parses_and_reads_only_what_the_check_writes() -> None:
    import promql_parser

    rule = alert_rule()
    assert set(rule) == {"groups"}
    rules = [r for g in rule["groups"] for r in g["rules"]]
    assert {r["alert"] for r in rules} == {"VllmHpuMmPlanStale", "VllmHpuMmStalePlanCheckNotRunning"}
    read: set[str] = set()
    for r in rules:
        assert set(r) <= {"alert", "expr", "for", "labels", "annotations", "keep_firing_for"}
        assert r["for"]
        assert DURATION.match(r["for"])
        assert all(isinstance(v, str) for v in (*r["labels"].values(), *r["annotations"].values()))
        read |= selectors(promql_parser.parse(r["expr"]))
    assert read == {"vllm_hpu_mm_stale_plan_ratio", "vllm_hpu_mm_stale_plan_tolerance",
                    "vllm_hpu_mm_stale_plan_last_run_timestamp_seconds"}  # fmt: skip
    assert read <= set(GAUGES)
    with pytest.raises(ValueError, match="invalid promql query"):  # the parser does refuse a broken expression
        promql_parser.parse("vllm_hpu_mm_stale_plan_ratio >")

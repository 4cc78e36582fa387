"""The ``buckets replay`` job: the configured runtime beside the user's bucket file (from the flag or from the
runtime's own variable, passed to the runtime's model, never through the environment), on the same inputs as
``memory plan`` (the calibrated profile included). Small limits, few requests, a given budget."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.support.data import DATA
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.jobs.calibrate import CalibrateArgs, calibrate_log
from vllm_hpu_mm.jobs.replay import Arrivals, ReplayArgs, replay_traffic
from vllm_hpu_mm.jobs.serve import on_default_device, plan_inputs
from vllm_hpu_mm.models.catalog import DEFAULT_MODEL
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.planner import plan

SMALL = SizingArgs(max_model_len=4096, max_num_seqs=8, concurrency=4, text_graph_budget=40)
QUICK = ReplayArgs(requests=60, plan_buckets=False, strategies=False)


def bucket_file(tmp_path: Path) -> Path:
    path = tmp_path / "mine.txt"
    path.write_text("(1, 128, 0)\n(1, 1, 8)\n")  # far too few: most shapes compile at run time
    return path


def test_the_configured_strategy_and_your_file_side_by_side(tmp_path: Path) -> None:
    path = bucket_file(tmp_path)
    r = replay_traffic(SMALL, dataclasses.replace(QUICK, bucket_file=str(path)), load(), {})
    assert [c.label for c in r.report.results] == ["vllm-gaudi main's exp bucketing", "your mine.txt"]
    assert r.has_yours
    assert r.yours_compiles


def test_the_runtimes_own_variable_names_the_file_when_the_flag_does_not(tmp_path: Path) -> None:
    path = bucket_file(tmp_path)
    env = {"VLLM_BUCKETING_FROM_FILE": str(path)}
    from_env = replay_traffic(SMALL, QUICK, load(), env)
    from_flag = replay_traffic(SMALL, dataclasses.replace(QUICK, bucket_file=str(path)), load(), {})
    assert [c.label for c in from_env.report.results] == [c.label for c in from_flag.report.results]
    assert from_env.report.results == from_flag.report.results  # the configured one is planned without the file
    # the flag wins over the variable
    other = tmp_path / "other.txt"
    other.write_text("(1, 128, 0)\n(1, 256, 0)\n(1, 1, 8)\n")
    both = replay_traffic(SMALL, dataclasses.replace(QUICK, bucket_file=str(other)), load(), env)
    assert both.report.results[1].label == "your other.txt"


def test_a_missing_file_is_named_as_the_user_gave_it(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.txt")
    with pytest.raises(ConfigError, match=f"^--bucket-file {missing}: cannot read it"):
        replay_traffic(SMALL, dataclasses.replace(QUICK, bucket_file=missing), load(), {})
    with pytest.raises(ConfigError, match=f"^VLLM_BUCKETING_FROM_FILE={missing}: cannot read it"):
        replay_traffic(SMALL, QUICK, load(), {"VLLM_BUCKETING_FROM_FILE": missing})


def test_the_replay_plans_on_the_same_inputs_as_memory_plan_the_profile_included(tmp_path: Path) -> None:
    profile = tmp_path / "p.json"
    log = DATA / "logs" / "vllm_gaudi_warmup_doc.log"
    calibrate_log(CalibrateArgs(str(log), model=DEFAULT_MODEL, device="gaudi2", output=str(profile)), load())
    measured = dataclasses.replace(SMALL, profile=str(profile))
    replayed = replay_traffic(measured, QUICK, load(), {})
    planned = plan(plan_inputs(on_default_device(measured), load(), {})[0])
    assert replayed.shape is not None
    assert replayed.shape.num_kv_blocks == planned.kv_blocks
    assert replayed.report.engine["num_kv_blocks"] == planned.kv_blocks
    unmeasured = replay_traffic(SMALL, QUICK, load(), {})
    assert unmeasured.shape is not None
    assert unmeasured.shape.num_kv_blocks != planned.kv_blocks  # the profile's free memory moved the estimate
    assert any(f"profile {profile}" in note for note in replayed.report.notes)


def test_planned_buckets_stay_within_the_given_budget() -> None:
    r = replay_traffic(SMALL, dataclasses.replace(QUICK, plan_buckets=True), load(), {})
    assert r.planned is not None
    assert len(r.planned.prompt) + len(r.planned.decode) <= 40
    assert [c.label for c in r.report.results][-1] == "planned from traffic"


@pytest.mark.parametrize(
    ("sizing", "args", "said"),
    [
        (dataclasses.replace(SMALL, text_graph_budget=1), QUICK, "--text-graph-budget 1 is invalid"),
        (dataclasses.replace(SMALL, runtime="vllm-cuda"), QUICK, "replay models vllm-gaudi's bucket lookup only"),
        (SMALL, dataclasses.replace(QUICK, arrivals=Arrivals(rate=1.0)), "--concurrency and a request rate"),
    ],
    ids=["budget", "runtime", "load"],
)
def test_what_the_replay_refuses(sizing: SizingArgs, args: ReplayArgs, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        replay_traffic(sizing, args, load(), {})


def test_a_bucket_file_for_a_runtime_that_reads_none_is_refused(tmp_path: Path) -> None:
    from vllm_hpu_mm.runtimes import registry
    from vllm_hpu_mm.runtimes.base import Runtime

    with pytest.raises(ConfigError, match="vllm-fork reads no bucket file; accepted: a runtime that does"):
        registry.model_for(Runtime.VLLM_FORK, {}, bucket_file=str(bucket_file(tmp_path)))

"""The ``buckets replay`` job: the configured runtime beside the user's bucket file (from the flag or from the
runtime's own variable, passed to the runtime's model, never through the environment), on the same inputs as
``memory plan`` (the calibrated profile included). Small limits, few requests, a given budget."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.support.data import DATA
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.jobs.calibrate import CalibrateArgs, calibrate_log
from vllm_hpu_mm.jobs.replay import Arrivals, ReplayArgs, replay_traffic
from vllm_hpu_mm.jobs.serve import on_default_device, plan_inputs
from vllm_hpu_mm.models.catalog import DEFAULT_MODEL
from vllm_hpu_mm.models.step_fit import FittedStep, step_to_dict
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.plan.text_choice import PLANNED_LABEL
from vllm_hpu_mm.replay.report import Report, to_dict, to_table

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


def test_a_given_budget_counts_the_graphs_speculative_decoding_makes_the_runtime_warm() -> None:
    ngram = {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3}
    sizing = dataclasses.replace(SMALL, speculative_config=ngram)
    r = replay_traffic(sizing, dataclasses.replace(QUICK, plan_buckets=True), load(), {})
    planned = next(c for c in r.report.results if c.label == PLANNED_LABEL)
    assert sum(planned.warmed) <= 40  # vllm-gaudi adds decode buckets to the listed ones; the budget counts them
    assert r.planned is not None
    assert len(r.planned.decode) < planned.warmed[1]
    said = next(n for n in r.report.notes if n.startswith("planned buckets: budget"))
    assert f"the runtime warms {sum(planned.warmed)} for the" in said


def test_the_default_budget_counts_the_graphs_speculative_decoding_makes_the_runtime_warm() -> None:
    ngram = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    sizing = dataclasses.replace(SMALL, speculative_config=ngram, text_graph_budget=None)
    r = replay_traffic(sizing, dataclasses.replace(QUICK, plan_buckets=True), load(), {})
    planned = next(c for c in r.report.results if c.label == PLANNED_LABEL)
    said = next(n for n in r.report.notes if n.startswith("planned buckets: budget"))
    budget = int(said.split()[3])  # "planned buckets: budget B graphs of the runtime's own ..."
    assert sum(planned.warmed) <= budget  # the row, the plan line and the worst-shape line count the same graphs
    assert f"counted as the runtime warms them: {sum(planned.warmed)} for the" in said
    worst = next(n for n in r.report.notes if n.startswith("planned buckets: worst shape"))
    assert f"{sum(planned.warmed)} graphs" in worst
    assert f"budget {budget})" in worst


@pytest.mark.parametrize(
    ("sizing", "args", "said"),
    [
        (
            dataclasses.replace(SMALL, text_graph_budget=1),
            dataclasses.replace(QUICK, plan_buckets=True),
            "--text-graph-budget 1 is too small to keep every shape within 4x its need; accepted: at least",
        ),
        (
            dataclasses.replace(SMALL, runtime="vllm-cuda"),
            QUICK,
            "replay models vllm-gaudi's bucket lookup only; .*"
            "accepted: --runtime vllm-gaudi or vllm-gaudi==X .a release. on a Gaudi --device .*: fleet plan",
        ),
        (SMALL, dataclasses.replace(QUICK, arrivals=Arrivals(rate=1.0)), "--concurrency and --request-rate both set"),
    ],
    ids=["budget", "runtime", "load"],
)
def test_what_the_replay_refuses(sizing: SizingArgs, args: ReplayArgs, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        replay_traffic(sizing, args, load(), {})


@pytest.mark.parametrize("runtime", ["vllm-cuda==0.32.0", "vllm-fork==0.9.0.1", "vllm-cpu", "banana"])
def test_another_runtime_named_is_refused_listing_only_what_the_replay_takes(runtime: str) -> None:
    # r6releases 19: vllm-cuda==0.32.0 got the planners' refusal, which offered vllm-cuda and vllm-fork==X
    with pytest.raises(ConfigError) as exc:
        replay_traffic(dataclasses.replace(SMALL, runtime=runtime), QUICK, load(), {})
    line = str(exc.value)
    assert line.startswith(f"--runtime={runtime!r}: replay models vllm-gaudi's bucket lookup only; ")
    accepted = line.split("accepted: ", 1)[1]
    assert accepted.startswith("--runtime vllm-gaudi or vllm-gaudi==X (a release) on a Gaudi --device")
    assert "vllm-fork==X" not in accepted
    assert "vllm-cuda," not in accepted


@pytest.mark.parametrize(("device", "served_by"), [("h100", "vllm-cuda"), ("h200", "vllm-cuda"), ("cpu", "vllm-cpu")])
@pytest.mark.parametrize("runtime", [None, "vllm-gaudi==0.26.0", "auto"])
def test_a_device_of_another_backend_says_the_replay_is_vllm_gaudis_alone_and_what_prices_it(
    device: str, served_by: str, runtime: str | None
) -> None:
    # r8replay 14: --device h100 got resolve's runtime/device mismatch, which offered another runtime the replay refuses
    with pytest.raises(ConfigError) as exc:
        replay_traffic(dataclasses.replace(SMALL, device=device, runtime=runtime), QUICK, load(), {})
    line = str(exc.value)
    assert line.startswith(f"--device={device!r}: replay models vllm-gaudi's bucket lookup only, on Gaudi; ")
    assert f"served by {served_by}" in line
    assert line.endswith(f"accepted: --device gaudi2 or gaudi3; {served_by}'s latencies at real shapes: fleet plan")
    assert "another runtime" not in line


def test_auto_reading_another_backend_here_is_refused_naming_what_it_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm_hpu_mm.models import devices

    reading = devices.MemoryReading("cuda", 80 * 2**30, 79 * 2**30, devices.READING_SOURCE["cuda"])
    monkeypatch.setattr(devices, "read_device", lambda backend="auto": reading)
    with pytest.raises(ConfigError, match=r"^--device='auto' \(this host's cuda\): replay models vllm-gaudi's .*"
                                          r"served by vllm-cuda; .*: fleet plan$"):  # fmt: skip
        replay_traffic(dataclasses.replace(SMALL, device="auto"), QUICK, load(), {})


def test_a_bucket_file_for_a_runtime_that_reads_none_is_refused(tmp_path: Path) -> None:
    from vllm_hpu_mm.runtimes import registry
    from vllm_hpu_mm.runtimes.base import Runtime

    with pytest.raises(ConfigError, match="vllm-fork reads no bucket file; accepted: a runtime that does"):
        registry.model_for(Runtime.VLLM_FORK, {}, bucket_file=str(bucket_file(tmp_path)))


#: Every request longer than --max-model-len 4096 but some: the engine refuses those, whichever command replays.
LONG = "width,height,text_tokens,output_tokens,count\n,,300,40,30\n,,9000,10,10\n"


@pytest.mark.parametrize("arrivals", [Arrivals(rate=1e-310), Arrivals(profile=((600.0, 0),))], ids=["rate", "idle"])
def test_a_load_under_which_nothing_ran_says_so_and_reports_no_efficiency(arrivals: Arrivals) -> None:
    sizing = dataclasses.replace(SMALL, concurrency=None, device="gaudi2")
    r = replay_traffic(sizing, dataclasses.replace(QUICK, arrivals=arrivals, latency=False), load(), {})
    report = to_dict(r.report)
    assert report["requests_replayed"] == 0
    assert report["requests_unsent"] == report["requests_sampled"] == 60
    for config in report["configurations"]:
        assert config["prefill_token_efficiency"] is None
        assert config["decode_slot_efficiency"] is None
    table = to_table(r.report)
    assert "0 requests replayed of 60 sampled (60 never sent" in table
    assert "1.000" not in table
    assert "no request ran" in table


def test_with_every_request_refused_the_time_figures_are_null_not_a_measured_zero(tmp_path: Path) -> None:
    # held-out round 3 (text), case 11: every prompt of max_model_len tokens, all refused; the table printed
    # 0.0 ms percentiles and 0.0% padding shares above its own "every figure ... is n/a"
    sizes = tmp_path / "edge.csv"
    sizes.write_text("width,height,text_tokens,output_tokens,count\n,,4096,1,20\n")
    sizing = dataclasses.replace(SMALL, device="gaudi2", sizes=str(sizes))
    r = replay_traffic(sizing, dataclasses.replace(QUICK, requests=20), load(), {})
    report = to_dict(r.report)
    assert report["requests_replayed"] == 0
    assert report["requests_refused"]["total"] == 20
    config = report["configurations"][0]
    assert config["time"]["requests"] == 0
    assert config["time"]["busy_seconds_with_buckets"] is None
    assert config["time"]["padding_share_of_busy_time"] is None
    assert config["compile_stall_seconds"] is None
    assert config["latency_per_load"][0]["ttft_ms"] is None
    assert config["latency_per_load"][0]["request_throughput"] is None
    table = to_table(r.report)
    for zero in (" ms", "0.0%", "0.0 s"):
        assert zero not in table
    assert "TTFT p50 / p90 / p99" in table  # the rows are there, each cell n/a


@pytest.mark.parametrize(("sizing", "args"), [
    (dataclasses.replace(SMALL, device="gaudi2"), dataclasses.replace(QUICK, kv_blocks=20)),
    (dataclasses.replace(SMALL, device="gaudi2", num_gpu_blocks_override=10), QUICK),
], ids=["kv-blocks", "plan"])  # fmt: skip
def test_a_server_that_would_not_start_gets_no_latency_or_throughput_figure_but_why(
    sizing: SizingArgs, args: ReplayArgs
) -> None:
    # held-out round 10 (loads), case 10: --kv-blocks 20 below one 4,096-token sequence exited 1 "the server would
    # not start" under a table of TTFT, E2EL and req/s figures for that server
    r = replay_traffic(sizing, args, load(), {})
    assert r.refusal
    report = to_dict(r.report)
    assert report["not_started"] == r.refusal
    config = report["configurations"][0]
    assert config["latency_per_load"] is None
    assert config["time"]["added_ttft_seconds"] is None
    assert config["time_per_load"][0]["ttft_seconds_real_shapes"] is None
    table = to_table(r.report)
    for row in ("TTFT p50", "TPOT p50", "E2EL p50", "req/s", "added TTFT", "added per-token"):
        assert row not in table
    assert f"no latency or throughput figures: {r.refusal}" in table
    started = replay_traffic(dataclasses.replace(SMALL, device="gaudi2"), dataclasses.replace(QUICK, kv_blocks=64),
                             load(), {})  # fmt: skip
    assert to_dict(started.report)["not_started"] is None
    assert to_dict(started.report)["configurations"][0]["latency_per_load"][0]["request_throughput"] > 0


def test_a_profile_that_ends_early_reports_what_ran_not_what_was_asked() -> None:
    sizing = dataclasses.replace(SMALL, concurrency=None, device="gaudi2")
    args = dataclasses.replace(QUICK, arrivals=Arrivals(profile=((0.5, 2),)), latency=False)
    r = replay_traffic(sizing, args, load(), {})
    assert r.runs is not None
    ran = sum(t.completed for t in r.runs.traces)
    assert 0 < ran < 60  # half a second of two clients: the profile ends long before 60 requests
    assert r.report.requests == ran
    assert to_dict(r.report)["requests_unsent"] == 60 - ran
    assert f"{ran} requests replayed of 60 sampled ({60 - ran} never sent" in to_table(r.report)


def test_the_total_over_every_load_level_is_what_ran() -> None:
    sizing = dataclasses.replace(SMALL, concurrency=None)
    r = replay_traffic(sizing, dataclasses.replace(QUICK, requests=500), load(), {})
    assert r.runs is not None
    assert len(r.runs.traces) > 1
    ran = sum(t.completed for t in r.runs.traces)
    assert r.report.requests == ran == r.runs.requests - r.refused  # the default traffic has prompts over 4096
    assert r.runs.requests > 500  # each level at least 200: the total, not the flag, is what the table says
    assert f"{ran} requests replayed of {r.runs.requests} sampled ({r.refused} refused)" in to_table(r.report)


def test_refused_requests_are_not_counted_as_replayed(tmp_path: Path) -> None:
    sizes = tmp_path / "long.csv"
    sizes.write_text(LONG)
    r = replay_traffic(dataclasses.replace(SMALL, sizes=str(sizes)), QUICK, load(), {})
    assert r.refused > 0
    assert r.report.requests == 60 - r.refused
    assert to_dict(r.report)["requests_refused"]["prompt_too_long"] == r.refused


def test_requests_whose_image_the_server_refuses_are_counted_refused_not_dropped_or_invalid(tmp_path: Path) -> None:
    # held-out round r4loads, case 13: traffic of only refused images was invalid input (exit 2, no report)
    sizes = tmp_path / "bad.csv"
    sizes.write_text("width,height,text_tokens,output_tokens,count\n30000,100,200,50,1\n15000,12000,200,50,1\n"
                     ",,300,40,2\n")  # fmt: skip
    r = replay_traffic(dataclasses.replace(SMALL, sizes=str(sizes)), QUICK, load(), {})
    assert r.report.sampled == 60
    assert 0 < r.refused < 60
    assert to_dict(r.report)["requests_refused"] == {"total": r.refused, "image_refused": r.refused}
    assert r.report.requests == 60 - r.refused  # the text-only ones ran
    sizes.write_text("width,height,text_tokens,output_tokens,count\n30000,100,200,50,1\n15000,12000,200,50,1\n")
    none = replay_traffic(dataclasses.replace(SMALL, sizes=str(sizes)), QUICK, load(), {})
    assert (none.report.requests, none.refused) == (0, 60)
    assert to_dict(none.report)["vision"]["images"] == 0


def test_under_reject_a_request_with_an_image_above_the_largest_bucket_is_refused(tmp_path: Path) -> None:
    # held-out round r4loads, case 14: under reject the replay ran 2240x2240 (25,600 patches) at its own size
    sizes = tmp_path / "big.csv"
    sizes.write_text("width,height,text_tokens,output_tokens,count\n2240,2240,200,50,1\n448,448,200,50,1\n")
    sizing = dataclasses.replace(SMALL, sizes=str(sizes), buckets="1600,3136,12544")
    rejected = replay_traffic(sizing, QUICK, load({"VLLM_HPU_MM_OVERSIZE_POLICY": "reject"}), {})
    assert 0 < rejected.refused < 60
    report = to_dict(rejected.report)
    assert report["requests_refused"] == {"total": rejected.refused, "image_oversize": rejected.refused}
    vision = report["vision"]
    assert vision["images"] == 60 - rejected.refused
    assert vision["above_largest_bucket"] == 0
    shrunk = replay_traffic(sizing, QUICK, load({}), {})
    assert shrunk.refused == 0


def test_a_step_time_calibrated_on_your_server_prices_the_whole_latencies(tmp_path: Path) -> None:
    step = FittedStep(block_size=128, overhead_s=0.05, token_s=4e-4, sequence_s=3e-3, chunk_s=0.0, pair_s=1e-9,
                      image_s=0.01, patch_s=2e-5, frontend_s=0.02, source="/metrics of a test server", samples=40,
                      interval=0.25)  # fmt: skip
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"version": 1, "costs": {}, "measured": [], "step_time": step_to_dict(step)}))
    calibrated = replay_traffic(dataclasses.replace(SMALL, profile=str(profile)), QUICK, load(), {})
    roofline = replay_traffic(SMALL, QUICK, load(), {})
    mine, theirs = calibrated.report.results[0].latency[0], roofline.report.results[0].latency[0]
    assert mine.interval == 0.25
    assert mine.evidence.startswith("calibrated")
    assert "a test server" in mine.evidence
    assert calibrated.report.time_model is not None
    assert "calibrated on your server" in calibrated.report.time_model
    # a 50 ms step against the roofline's few: every figure moves, and the API server's 20 ms is in each first token
    assert mine.tpot[0] > 2 * theirs.tpot[0]
    assert mine.ttft[0] >= step.frontend_s + step.overhead_s
    assert "calibrated" in to_table(calibrated.report)


@pytest.mark.parametrize("arrivals", [Arrivals(rate=4.0), Arrivals(profile=((3.0, 8), (3.0, 64), (2.0, 0)))],
                         ids=["rate", "profile"])  # fmt: skip
def test_arrivals_in_time_plan_and_replay_with_the_planned_buckets(arrivals: Arrivals) -> None:
    # a schedule of arrivals in time is no load level: the plan's worst case once read it as level 0 (exit 3)
    sized = dataclasses.replace(SMALL, concurrency=None)
    r = replay_traffic(sized, dataclasses.replace(QUICK, plan_buckets=True, arrivals=arrivals), load(), {})
    assert r.planned is not None
    assert [c.label for c in r.report.results][-1] == "planned from traffic"
    assert all(c.latency for c in r.report.results)


def test_a_built_in_strategy_the_runtime_refuses_at_these_limits_is_left_out_not_the_whole_command() -> None:
    """--max-num-batched-tokens below the block size: vllm-gaudi's lin and pad assert on their prompt query range,
    exp and the planned buckets do not; the replay and a plan with a given budget (whose cap counts the built-in
    strategies) exited 2 on the strategies only compared against."""
    tight = dataclasses.replace(SMALL, max_num_batched_tokens=100)
    r = replay_traffic(tight, ReplayArgs(requests=20, plan_buckets=True, strategies=True), load(), {})
    assert [c.label for c in r.report.results] == ["vllm-gaudi main's exp bucketing", PLANNED_LABEL]
    refused = [n for n in r.report.notes if n.startswith("a built-in strategy is not replayed")]
    assert len(refused) == 2
    assert all("--max-num-batched-tokens (max)" in n for n in refused)
    assert r.planned is not None


def test_a_plan_that_does_not_fit_is_said_as_memory_plan_and_serve_say_it_a_shortfall_no_start_up_refusal() -> None:
    """The replay ran 500 override blocks at max_model_len 128000 and exited 0 where serve --dry-run exits 1; with
    --kv-blocks (a server's count) the plan's estimate is not judged, the count itself is."""
    import contextlib
    import io

    from vllm_hpu_mm.cli.main import main

    few = dataclasses.replace(SMALL, num_gpu_blocks_override=10)  # 9 usable blocks of 128 < 4,096 tokens
    r = replay_traffic(few, QUICK, load(), {})
    # a memory shortfall, worded as memory plan and serve word it (Plan.refusal), not as a start-up refusal
    assert r.refusal.startswith("the memory plan does not fit: --num-gpu-blocks-override 10 (1152 tokens in blocks")
    given = replay_traffic(few, dataclasses.replace(QUICK, kv_blocks=10), load(), {}).refusal
    assert given.startswith("the server would not start: --kv-blocks 10 (9 usable: the block pool keeps one null "
                            "block) cannot hold one sequence of --max-model-len 4096 (32 blocks of 128)")  # fmt: skip
    # vLLM 0.32 sets the null block aside before its check (kv_cache_utils.py 1122-1131): 32 blocks hold 31, 33 start
    on_the_edge = replay_traffic(SMALL, dataclasses.replace(QUICK, kv_blocks=32), load(), {}).refusal
    assert on_the_edge.startswith("the server would not start: --kv-blocks 32 (31 usable")
    assert "fix: --kv-blocks 33 or more" in on_the_edge
    assert replay_traffic(SMALL, dataclasses.replace(QUICK, kv_blocks=33), load(), {}).refusal == ""
    assert replay_traffic(SMALL, QUICK, load(), {}).refusal == ""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["buckets", "replay", "--max-model-len", "4096", "--max-num-seqs", "8", "--concurrency", "4",
                     "--text-graph-budget", "40", "--requests", "60", "--no-plan", "--no-strategies",
                     "--num-gpu-blocks-override", "10"])  # fmt: skip
    assert code == 1
    assert err.getvalue().startswith("vllm-hpu-mm: error: the memory plan does not fit: --num-gpu-blocks-override 10")


def test_two_kv_block_counts_are_refused_rather_than_one_silently_winning() -> None:
    both = dataclasses.replace(SMALL, num_gpu_blocks_override=500)
    with pytest.raises(ConfigError, match=r"^--kv-blocks 800 and --num-gpu-blocks-override 500 name two KV block"):
        replay_traffic(both, dataclasses.replace(QUICK, kv_blocks=800), load(), {})
    same = replay_traffic(both, dataclasses.replace(QUICK, kv_blocks=500), load(), {})
    assert same.shape is not None
    assert same.shape.num_kv_blocks == 500


def _traffic(tmp_path: Path, rows: str) -> SizingArgs:
    sizes = tmp_path / "traffic.csv"
    sizes.write_text("width,height,text_tokens,output_tokens,count\n" + rows)
    return dataclasses.replace(SMALL, sizes=str(sizes))


def _vision_line(report: Report) -> str:
    return next(x for x in to_table(report).splitlines() if x.startswith("vision buckets"))


def test_the_vision_figure_says_no_image_ran_when_every_image_request_is_refused(tmp_path: Path) -> None:
    # held-out round 206, replay 24: 3000 text + 1600 image tokens >= 4096, every image request refused, yet the
    # vision line read "patch efficiency 1.000 over 10 images" (the CSV's rows, not what ran)
    sizing = _traffic(tmp_path, "1120,1120,3000,50,10\n,,500,50,10\n")
    report = replay_traffic(sizing, QUICK, load(), {}).report
    assert report.requests > 0
    assert report.vision is not None
    assert report.vision.num_images == 0
    vision = to_dict(report)["vision"]
    assert vision["images"] == 0
    assert vision["patch_efficiency"] is None
    assert vision["images_sampled"] == sum(n for _, n in report.refused) > 0
    line = _vision_line(report)
    assert f"no image ran (all {vision['images_sampled']} sampled were in requests the engine refused)" in line
    assert "patch efficiency n/a" in line


def test_text_only_traffic_says_no_image_ran_over_the_buckets_the_runtime_still_warms(tmp_path: Path) -> None:
    # held-out round r5agree, case 14: text-only traffic printed no vision line and "vision": null, while the docs
    # say a replay where no image ran says so (vision.images 0); the runtime warms the vision buckets all the same
    report = replay_traffic(_traffic(tmp_path, ",,750,150,10\n"), QUICK, load(), {}).report
    assert report.requests > 0
    vision = to_dict(report)["vision"]
    assert vision is not None
    assert vision["buckets"] == list(report.vision_buckets or ())
    assert (vision["images"], vision["images_sampled"], vision["patch_efficiency"]) == (0, 0, None)
    line = _vision_line(report)
    assert f"no image ran (none of the {report.offered} sampled requests has one): patch efficiency n/a" in line


def test_the_vision_figure_counts_the_images_of_the_requests_that_ran_not_those_never_sent(tmp_path: Path) -> None:
    # held-out round 206, replay 9: 2 of 500 requests ran under a 2-second profile, the line said "over 30 images"
    sizing = dataclasses.replace(_traffic(tmp_path, "640,480,200,120,30\n,,300,80,70\n"), concurrency=None)
    args = dataclasses.replace(QUICK, requests=200, arrivals=Arrivals(profile=((4.0, 1),)), latency=False)
    replayed = replay_traffic(sizing, args, load(), {})
    report, runs = replayed.report, replayed.runs
    assert runs is not None
    assert report.unsent > 0
    ran = sum(span.images for trace in runs.traces for span in trace.spans)
    assert report.vision is not None
    assert 0 < report.vision.num_images == ran < report.images_sampled
    assert to_dict(report)["vision"]["images"] == ran
    left = report.images_sampled - ran
    said = f"over {ran} images (of {report.images_sampled} sampled; the other {left} in requests the load never sent)"
    assert said in _vision_line(report)


def test_the_replay_names_the_deprecated_variable_that_overrides_the_strategy_given() -> None:
    env = {"VLLM_BUCKETING_STRATEGY": "pad", "VLLM_EXPONENTIAL_BUCKETING": "1"}
    r = replay_traffic(dataclasses.replace(SMALL, runtime="vllm-gaudi==0.26.0"), QUICK, load(env), env)
    assert r.report.results[0].label.endswith("'s exp bucketing")
    assert any(n.startswith("VLLM_EXPONENTIAL_BUCKETING (read as true: exp) overrides VLLM_BUCKETING_STRATEGY=pad")
               for n in r.report.notes)  # fmt: skip

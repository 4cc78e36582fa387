"""The ``memory plan`` and ``serve`` job: the plan, its vision and text buckets, the exports and the server's
command, from the parsed arguments; the default-device rule; the inputs every job plans on (one budget bound, the
calibrated profile). Small inputs and a given text-graph budget: the budget search does not run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.data import DATA
from vllm_hpu_mm.buckets.sizes import embedded_sizes
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.jobs.calibrate import CalibrateArgs, calibrate_log
from vllm_hpu_mm.jobs.serve import Launch, on_default_device, plan_inputs, prepare
from vllm_hpu_mm.models.catalog import DEFAULT_MODEL
from vllm_hpu_mm.models.dims import vision_parameters
from vllm_hpu_mm.plan import render
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.bucket_choice import choose, processor_reach
from vllm_hpu_mm.plan.inputs import build
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.runtimes import registry
from vllm_hpu_mm.values import AlignMode

GIB = 2**30
#: The guide's worked example (it describes vllm-fork: vllm-gaudi also keeps back one dummy KV block).
GUIDE = SizingArgs(runtime="vllm-fork", total_memory_gib=100, free_memory_gib=100, gpu_memory_utilization=1,
                   graph_reserved_mem=0.1, graph_prompt_ratio=0.2, graph_multimodal_prompt_ratio=0.3)  # fmt: skip
#: The main job, small: a short context and few sequences, the text budget given.
SMALL = SizingArgs(max_model_len=4096, max_num_seqs=8, text_graph_budget=40)


def launch(sizing: SizingArgs, tmp_path: Path, *, notes: tuple[str, ...] = (), last: tuple[str, ...] = ()) -> Launch:
    return prepare(on_default_device(sizing), load(), {}, server_args=["--model", "m"], output_dir=tmp_path,
                   limit_mm_per_prompt=None, compilation_config=None, notes=notes, last_notes=last)  # fmt: skip


def test_the_guides_example(tmp_path: Path) -> None:
    out: dict[str, Any] = launch(GUIDE, tmp_path).report["plan"]
    assert out["usable_bytes"] == 100 * GIB
    assert out["graph_bytes"] == 10 * GIB
    assert out["kv_cache_bytes"] == 90 * GIB
    assert out["decode_graph_bytes"] == 8 * GIB
    assert out["prefill_text_graph_bytes"] == round(0.6 * GIB)
    assert out["prefill_vision_graph_bytes"] == 2 * GIB - round(0.6 * GIB)


def test_a_list_that_does_not_fit_is_replanned_with_the_pool_and_the_figures_say_why(tmp_path: Path) -> None:
    out: dict[str, Any] = launch(SMALL, tmp_path).report["plan"]
    choice = out["bucket_plan"]
    assert choice["replaced"] is True
    before, after = choice["before"], choice["after"]
    assert out["vision_buckets_captured"] == after["buckets"]
    assert out["vision_buckets_skipped"] == []
    assert after["capture_bytes"] <= out["prefill_vision_graph_bytes"]
    # The pruned default list shrinks images above 6400 patches; the planned one keeps 12544 as its largest.
    assert after["buckets"][-1] == 12544
    assert after["num_shrunk"] < before["num_shrunk"]
    assert after["efficiency"] > before["efficiency"]


def test_a_fork_line_that_warms_no_vision_graph_plans_no_bucket_list_against_a_pool(tmp_path: Path) -> None:
    # r8fork 16: vllm-fork 1.21.3 has no vision pool, yet the choice read "kept (not even one bucket's graph fits the
    # vision pool)", "before: none fits"
    inputs = build(dataclasses.replace(SMALL, runtime="vllm-fork==0.8.5.post1", free_memory_gib=60), load())
    first, choice = choose(inputs, embedded_sizes(), max_buckets=None, mode=AlignMode.NEAREST)
    assert choice is not None
    assert (choice.replaced, choice.planned, choice.before, choice.after) == (False, False, None, None)
    assert choice.reason.startswith("vllm-fork 0.8.5.post1 warms no vision graph: the buckets only cap what the")
    lines = render.to_table(first, None, choice).splitlines()
    assert not any("none fits" in line for line in lines)


def test_the_given_budget_bounds_the_planned_text_buckets(tmp_path: Path) -> None:
    out = launch(SMALL, tmp_path)
    assert not [n for n in out.notes if "is not used" in n]  # the budget was taken
    text = out.report["plan"]["text_bucket_plan"]
    assert text["budget"] == 40
    assert text["after"]["graphs_warmed"]["total"] <= 40 < text["before"]["graphs_warmed"]["total"]


@pytest.mark.parametrize("config", ["unsloth_gemma-3-12b-it.json", "Qwen_Qwen2-VL-2B.json"])
def test_a_tower_vllm_gaudi_buckets_by_images_per_pass_gets_image_counts_not_patch_counts(
    tmp_path: Path, config: str
) -> None:
    # vllm-gaudi @091bbadd reads VLLM_MULTIMODAL_BUCKETS as images per pass for Gemma 3 and for families its table
    # does not list (Qwen2-VL), warming passes of 896 x 896 images, and reads no resolutions for them
    (tmp_path / "config.json").write_text((DATA / "configs" / config).read_text())
    result = launch(dataclasses.replace(SMALL, model=str(tmp_path)), tmp_path)
    assert result.plan.fits
    env = result.exports.env
    counts = [int(n) for n in env["VLLM_MULTIMODAL_BUCKETS"].split(",")]
    assert counts
    assert set(counts) <= {1, 2, 4, 8}, counts  # the runtime's own passes, those that fit
    assert "VLLM_MULTIMODAL_RESOLUTIONS" not in env


def test_the_report_holds_the_command_and_notes_only_for_a_plan_that_fits(tmp_path: Path) -> None:
    fits = launch(SMALL, tmp_path, notes=("how the arguments were read",), last=("not validated",))
    assert fits.report["command"] == list(fits.argv)
    assert fits.argv[-len(fits.exports.args) - 2 :][:2] == ("--model", "m")
    assert fits.report["notes"] == list(fits.notes)
    # the caller's first, then the exporter's, then the caller's last
    assert fits.notes == ("how the arguments were read", *fits.exports.notes, "not validated")
    assert fits.report["files"] == fits.files
    assert all(Path(p).parent == tmp_path for p in fits.files)
    big = dataclasses.replace(SMALL, model="Qwen/Qwen2.5-VL-72B-Instruct", device="h100")
    refused = launch(big, tmp_path)
    assert not refused.plan.fits
    assert "command" not in refused.report


def test_one_default_device_rule() -> None:
    assert on_default_device(SizingArgs()).device == registry.MAIN_JOB_DEVICE == "gaudi2"
    assert on_default_device(SizingArgs(runtime="vllm-cuda")).device == "h100"
    assert on_default_device(SizingArgs(runtime="vllm-gaudi==0.26.0")).device == "gaudi2"
    assert on_default_device(SizingArgs(runtime="auto")).device == "gaudi2"
    assert on_default_device(SizingArgs(runtime="vllm-cuda"), launching=True).device == "auto"
    assert on_default_device(SizingArgs(device="h200", runtime="vllm-gaudi")).device == "h200"
    # the plan's inputs take the same rule when a caller left the device out
    assert build(SizingArgs(runtime="vllm-cuda"), load()).device == "h100"
    assert build(SizingArgs(), load()).device == registry.MAIN_JOB_DEVICE


# 1 passes the declaration: the planner refuses it with the least these limits and traffic need (r12text 4)
@pytest.mark.parametrize(("budget", "ok"), [(1, True), (0, False), (2, True), (2**31, False)])
def test_the_budget_is_bounded_on_its_declaration(budget: int, ok: bool) -> None:
    sizing = dataclasses.replace(SMALL, text_graph_budget=budget, prefix="plan-")
    if ok:
        assert build(sizing, load()).max_model_len == 4096
        return
    with pytest.raises(ConfigError, match=r"^--plan-text-graph-budget"):
        build(sizing, load())


def measured_profile(tmp_path: Path) -> Path:
    """A profile calibrated from a real warm-up log, recorded for the main job's model and device (so its measured
    free memory after load applies to the main job's plan)."""
    profile = tmp_path / "p.json"
    log = DATA / "logs" / "vllm_gaudi_warmup_doc.log"
    calibrate_log(CalibrateArgs(str(log), model=DEFAULT_MODEL, device="gaudi2", output=str(profile)), load())
    return profile


def test_the_calibrated_profile_is_applied_to_the_inputs(tmp_path: Path) -> None:
    profile = measured_profile(tmp_path)
    plain, costs = plan_inputs(SMALL, load(), {})
    measured, costs_measured = plan_inputs(dataclasses.replace(SMALL, profile=str(profile)), load(), {})
    assert costs["profile"] is None
    assert costs_measured["profile"] == str(profile)
    assert plan(measured).kv_blocks != plan(plain).kv_blocks


def test_serve_counts_the_requests_the_engine_refuses_as_buckets_replay_does(tmp_path: Path) -> None:
    from vllm_hpu_mm.jobs.replay import ReplayArgs, replay_traffic

    sizes = tmp_path / "long.csv"
    sizes.write_text("width,height,text_tokens,output_tokens,count\n,,300,40,30\n,,9000,10,10\n")
    sizing = dataclasses.replace(SMALL, sizes=str(sizes))
    planned = launch(sizing, tmp_path)
    text = planned.planned.text
    assert text is not None
    replayed = replay_traffic(sizing, ReplayArgs(plan_buckets=False, strategies=False, latency=False), load(), {})
    assert text.refused == replayed.refused > 0
    out = planned.report["plan"]["text_bucket_plan"]
    assert out["requests_refused"]["total"] == replayed.refused
    assert out["requests_replayed"] == replayed.report.requests


def test_under_skip_warmup_the_plans_text_buckets_warm_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_SKIP_WARMUP", "true")
    out = launch(SMALL, tmp_path).report["plan"]["text_bucket_plan"]
    assert out["skip_warmup"] is True
    for config in (out["before"], out["after"]):
        assert config["graphs_warmed"]["total"] == 0
        assert config["warmup_seconds_estimate"] == 0.0
        assert sum(config["compiles_with_skip_warmup"].values()) > 0


def test_a_long_prefill_threshold_above_the_resolved_max_model_len_is_refused_as_vllm_refuses_it(
    tmp_path: Path,
) -> None:
    """vLLM 0.32 config/scheduler.py verify_max_model_len: the server would not start (a dry run said it would)."""
    from vllm_hpu_mm.cli.serve_args import parse_server_args
    from vllm_hpu_mm.cli.vllm_argv import vllm_032_table

    server = parse_server_args(["--max-model-len", "4096", "--long-prefill-token-threshold", "4097"], vllm_032_table())
    assert server.long_prefill_token_threshold == 4097

    def with_threshold(threshold: int) -> Launch:
        return prepare(on_default_device(SMALL), load(), {}, server_args=["--model", "m"], output_dir=tmp_path,
                       limit_mm_per_prompt=None, compilation_config=None,
                       long_prefill_token_threshold=threshold)  # fmt: skip

    with pytest.raises(ConfigError, match=r"^--long-prefill-token-threshold=4097 is above --max-model-len 4096: vLLM "
                                          r"refuses to start .*accepted: at most 4096"):  # fmt: skip
        with_threshold(4097)
    assert with_threshold(4096).plan.fits
    with pytest.raises(ConfigError, match=r"^--long-prefill-token-threshold=-5: vLLM refuses it \(at least 0\)"):
        with_threshold(-5)


@pytest.mark.parametrize("limit", ['{"image": 0}', '{"image": {"count": 0}, "video": 1}'])
def test_a_limit_that_refuses_images_plans_no_vision_graph_and_leaves_image_requests_out(
    tmp_path: Path, limit: str
) -> None:
    """vllm-gaudi @091bbadd hpu_model_runner.py warmup_multimodal_graphs warms image only where the limit names it
    and vLLM's allowed count is not 0; under image 0 vLLM refuses every image: nothing captured, warmed or
    exported for images, and the text buckets are planned over the requests that run."""
    out = prepare(on_default_device(SMALL), load(), {}, server_args=["--model", "m"], output_dir=tmp_path,
                  limit_mm_per_prompt=limit, compilation_config=None)  # fmt: skip
    assert out.plan.fits
    assert out.plan.vision_buckets_captured == ()
    assert out.plan.vision_capture_bytes == 0
    assert out.report["plan"]["vision_buckets"] == []
    assert not {"VLLM_MULTIMODAL_BUCKETS", "VLLM_MULTIMODAL_RESOLUTIONS"} & set(out.exports.env)
    warmup = out.plan.warmup
    assert warmup is not None
    assert warmup.by_phase["vision"] == 0
    assert out.planned.text is not None
    assert "with an image left out" in out.planned.text.traffic
    assert out.exports.enforcement["prefill_vision_graphs"].honoured


@pytest.mark.parametrize(
    ("runtime", "device", "dropped"), [("vllm-cuda", "h100", True), ("vllm-gaudi", "gaudi2", False)]
)
def test_every_modality_of_the_tower_at_zero_leaves_its_weights_out_where_the_runtime_builds_none(
    tmp_path: Path, runtime: str, device: str, dropped: bool
) -> None:
    """vLLM 0.32 interfaces.py _mark_tower_model: Qwen2.5-VL's tower (image and video) is a StageMissingLayer when
    both limits are 0, so its weights are never allocated; vllm-gaudi's Qwen2.5-VL rebuilds it (qwen2_5_vl.py:499
    @091bbadd)."""
    sizing = on_default_device(dataclasses.replace(SMALL, runtime=runtime, device=device))

    def run(limit: str | None) -> Launch:
        return prepare(sizing, load(), {}, server_args=["--model", "m"], output_dir=tmp_path,
                       limit_mm_per_prompt=limit, compilation_config=None)  # fmt: skip

    whole, without = run('{"image": 1}'), run('{"image": 0, "video": 0}')
    tower = vision_parameters(whole.plan.inputs.model.vision) * 2
    assert whole.plan.weight_bytes - without.plan.weight_bytes == (tower if dropped else 0)
    assert ("language model only" in without.report["plan"]["weights_source"]) is dropped
    assert without.plan.inputs.vision_tower_built is not dropped
    assert run('{"image": 0}').plan.weight_bytes == whole.plan.weight_bytes  # video's limit is 999: still built


def test_language_model_only_drops_the_tower_and_refuses_images_as_every_limit_at_zero_does(tmp_path: Path) -> None:
    """config/multimodal.py get_limit_per_prompt: --language-model-only makes every limit 0."""
    for runtime, device in (("vllm-cuda", "h100"), ("vllm-gaudi", "gaudi2")):
        sizing = on_default_device(dataclasses.replace(SMALL, runtime=runtime, device=device))
        out = prepare(sizing, load(), {}, server_args=["--model", "m"], output_dir=tmp_path, limit_mm_per_prompt=None,
                      compilation_config=None, language_model_only=True)  # fmt: skip
        assert out.plan.inputs.images_refused
        assert out.plan.inputs.vision_tower_built is (runtime == "vllm-gaudi")
        assert out.plan.vision_buckets_captured == ()
        assert "--limit-mm-per-prompt" not in out.exports.args  # vllm-gaudi gets no image limit to warm


@pytest.mark.parametrize("on", [True, "true", 1])
def test_language_model_only_with_encoder_cuda_graphs_on_is_refused_as_vllms_config_refuses_it(
    tmp_path: Path, on: object
) -> None:
    """config/vllm.py 1457-1467 (vLLM 0.32): VllmConfig raises ValueError for the pair on a multimodal model, while
    it builds its config from the arguments (r9cuda case 21)."""
    sizing = on_default_device(dataclasses.replace(SMALL, runtime="vllm-cuda", device="h100"))
    with pytest.raises(ConfigError, match=r"^--language-model-only and --compilation-config's cudagraph_mm_encoder"):
        prepare(sizing, load(), {}, server_args=["--model", "m"], output_dir=tmp_path, limit_mm_per_prompt=None,
                compilation_config={"cudagraph_mm_encoder": on}, language_model_only=True)  # fmt: skip
    for config, only in (({"cudagraph_mm_encoder": False}, True), ({"cudagraph_mm_encoder": True}, False)):
        out = prepare(sizing, load(), {}, server_args=["--model", "m"], output_dir=tmp_path, limit_mm_per_prompt=None,
                      compilation_config=config, language_model_only=only)  # fmt: skip
        assert out.plan is not None


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"cudagraph_capture_sizes": [1, 2, 4, 8], "max_cudagraph_capture_size": 16}, "max_cudagraph_capture_size 16"),
        ({"cudagraph_capture_sizes": [1, 8, 99999], "max_cudagraph_capture_size": 99999}, r"\(8\)"),
        ({"cudagraph_capture_sizes": []}, "cudagraph_capture_sizes is empty"),
        ({"max_cudagraph_capture_size": 0}, "max_cudagraph_capture_size 0"),
    ],
)
def test_capture_sizes_vllms_config_build_refuses_are_refused_with_cuda_graphs_on_and_taken_without(
    tmp_path: Path, config: dict[str, Any], named: str
) -> None:
    """config/vllm.py 2448-2458 and 2510-2518 (vLLM 0.32 VllmConfig._set_cudagraph_sizes, run while the config is
    built from the arguments, only with CUDA graphs on): a ceiling below 1, an empty size list, and a ceiling that is
    not the largest size within the token budget are refused; --enforce-eager or cudagraph_mode NONE skip the check
    (r11cuda cases 15, 16)."""
    sizing = on_default_device(dataclasses.replace(SMALL, runtime="vllm-cuda", device="h100"))
    with pytest.raises(ConfigError, match=named):
        prepare(sizing, load(), {}, server_args=["--model", "m"], output_dir=tmp_path, limit_mm_per_prompt=None,
                compilation_config=config)  # fmt: skip
    for eager, taken in ((True, config), (False, {**config, "cudagraph_mode": "NONE"})):
        out = prepare(dataclasses.replace(sizing, enforce_eager=eager), load(), {}, server_args=["--model", "m"],
                      output_dir=tmp_path, limit_mm_per_prompt=None, compilation_config=taken)  # fmt: skip
        assert out.plan is not None


def test_capture_sizes_whose_ceiling_is_their_largest_within_the_budget_are_planned(tmp_path: Path) -> None:
    sizing = on_default_device(dataclasses.replace(SMALL, runtime="vllm-cuda", device="h100"))
    for config in ({"cudagraph_capture_sizes": [1, 2, 4, 8], "max_cudagraph_capture_size": 8},
                   {"cudagraph_capture_sizes": [8, 99999]}, {"max_cudagraph_capture_size": 99999}):  # fmt: skip
        out = prepare(sizing, load(), {}, server_args=["--model", "m"], output_dir=tmp_path, limit_mm_per_prompt=None,
                      compilation_config=config)  # fmt: skip
        assert out.plan is not None


def test_mm_processor_kwargs_max_pixels_caps_the_vision_buckets_and_cudas_encoder_budgets(tmp_path: Path) -> None:
    """vLLM 0.32 qwen2_vl.py _get_vision_size: max_pixels 802816 (896 x 896) bounds every image at 4096 patches, 1024
    tokens: no bucket or encoder budget above the one that holds it is planned, and the notes say why."""
    sizing = on_default_device(dataclasses.replace(SMALL, runtime="vllm-cuda", device="h100"))
    out = prepare(sizing, load(), {}, server_args=["--model", "m"], output_dir=tmp_path, limit_mm_per_prompt=None,
                  compilation_config=None, mm_processor_kwargs={"max_pixels": 802816})  # fmt: skip
    assert out.plan.inputs.buckets is not None
    assert max(out.plan.inputs.buckets) == 4096
    argv = list(out.exports.args)
    budgets = json.loads(argv[argv.index("--compilation-config") + 1])["encoder_cudagraph_token_budgets"]
    assert max(budgets) <= 1024
    assert any(n.startswith("--mm-processor-kwargs max_pixels 802816: the processor makes no image above 4096")
               for n in out.notes)  # fmt: skip


def test_processor_reach_keeps_the_buckets_an_image_can_use() -> None:
    default = (1600, 3136, 4096, 6400, 7744, 9216, 12544)
    assert processor_reach(default, None, 802816) == ((1600, 3136, 4096), (6400, 7744, 9216, 12544))
    assert processor_reach(default, None, 700000) == ((1600, 3136, 4096), (6400, 7744, 9216, 12544))  # 3584 patches
    assert processor_reach(default, 401408, None) == (default[1:], (1600,))  # the least image has 2048 patches
    assert processor_reach(default, None, None) == (default, ())
    assert processor_reach((1600,), 802816 * 4, None) == ((1600,), ())  # never left with no bucket


def test_an_option_the_plan_cannot_use_as_given_is_said_not_dropped(tmp_path: Path) -> None:
    """--text-graph-budget under vllm-fork (no bucket file) or --enforce-eager (no text graph) was ignored without a
    word (issue #34 item 5)."""
    fork = launch(dataclasses.replace(SMALL, runtime="vllm-fork"), tmp_path)
    assert any(n.startswith("--text-graph-budget 40 is not used: vllm-fork takes no planned") for n in fork.notes)
    eager = launch(dataclasses.replace(SMALL, enforce_eager=True), tmp_path)
    assert "--text-graph-budget 40 is not used: --enforce-eager warms no text graph" in eager.notes
    queued = launch(dataclasses.replace(SMALL, runtime="vllm-fork", concurrency=1000), tmp_path)
    assert "--concurrency 1000 is above max_num_seqs 8: at most 8 run at once, the rest queue" in queued.notes


def test_o0_and_a_cudagraph_mode_of_none_plan_as_enforce_eager_does_on_cuda(tmp_path: Path) -> None:
    """-O0 sets cudagraph_mode NONE (vLLM 0.32 config/vllm.py OPTIMIZATION_LEVEL_00): vLLM captures no graph and
    subtracts no estimate from the KV cache. The plan took the -O2 graphs out of it (held-out round 4, serve case 9),
    and under --compilation-config cudagraph_mode NONE still took the encoder graphs out."""
    sizing = on_default_device(dataclasses.replace(SMALL, device="h100", runtime="vllm-cuda"))

    def kv(config: dict[str, Any] | None = None, level: int = 2, **kw: Any) -> tuple[int, int, tuple[str, ...]]:
        out = prepare(dataclasses.replace(sizing, **kw), load(), {}, server_args=["--model", "m"],
                      output_dir=tmp_path, limit_mm_per_prompt=None, compilation_config=config,
                      optimization_level=level)  # fmt: skip
        return out.plan.split.kv_cache_bytes, out.plan.split.graph_bytes, out.exports.args

    eager = kv(enforce_eager=True)
    assert eager[1] == 0
    assert eager[2] == ()
    assert kv(level=0) == eager
    assert kv({"cudagraph_mode": "NONE"}) == eager
    default = kv()
    assert default[1] > 0
    assert default[0] < eager[0]
    assert kv(level=1)[0] == default[0]  # piecewise graphs: the same capture sizes


def test_the_dry_run_s_replay_has_buckets_replay_s_vision_figure_over_the_images_that_ran(tmp_path: Path) -> None:
    # held-out round 206, replay 24: serve's copy of the replay had no vision figure; as buckets replay's, it counts
    # only the images of requests that ran, none here (3000 text + 1600 image tokens >= 4096: all refused)
    sizes = tmp_path / "images.csv"
    sizes.write_text("width,height,text_tokens,output_tokens,count\n1120,1120,3000,50,10\n,,500,50,10\n")
    out = launch(dataclasses.replace(SMALL, sizes=str(sizes)), tmp_path)
    vision = out.report["plan"]["text_bucket_plan"]["vision"]
    assert vision["images"] == 0
    assert vision["patch_efficiency"] is None
    assert vision["images_sampled"] > 0
    assert vision["buckets"] == out.report["plan"]["vision_buckets_captured"]
    assert "no image ran (all " in out.table
    assert "patch efficiency n/a" in out.table


def test_the_dry_run_s_replay_of_text_only_traffic_says_no_image_ran_as_buckets_replay_does(tmp_path: Path) -> None:
    # held-out round r5agree, case 14: text-only traffic had no vision figure ("vision": null) in either command
    sizes = tmp_path / "text.csv"
    sizes.write_text("width,height,text_tokens,output_tokens,count\n,,750,150,10\n")
    out = launch(dataclasses.replace(SMALL, sizes=str(sizes)), tmp_path)
    vision = out.report["plan"]["text_bucket_plan"]["vision"]
    assert (vision["images"], vision["images_sampled"], vision["patch_efficiency"]) == (0, 0, None)
    assert vision["buckets"] == out.report["plan"]["vision_buckets_captured"]
    assert "sampled requests has one): patch efficiency n/a" in out.table

"""``memory calibrate``: graph costs measured from real warm-up lines (tests/data/calibration/SOURCES.md), saved as a
profile that changes ``memory plan``."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.support.data import DATA
from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.logs.calibrate import calibrate, parse_warmup
from vllm_hpu_mm.logs.profile import save_profile
from vllm_hpu_mm.models.dims import ModelDims, VisionDims
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.inputs import build
from vllm_hpu_mm.plan.pipeline import apply_profile, memory_evidence, plan_with_profile
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.plan.profile import load_profile, read_profile
from vllm_hpu_mm.plan.render import to_dict, to_table

WARMUP_DOC = DATA / "logs" / "vllm_gaudi_warmup_doc.log"
PERF_DOC = DATA / "logs" / "heldout" / "vllm_gaudi_perf_tuning_doc.log"
#: meta-llama/Llama-3.1-8B-Instruct's config.json (the model of both vllm-gaudi doc samples): text dimensions only.
LLAMA_31_8B = ModelDims("meta-llama/Llama-3.1-8B-Instruct", 4096, 32, 32, 8, 128, 14336, 128256, False, 131072,
                        VisionDims())  # fmt: skip
GIB = 2**30


@pytest.fixture(autouse=True)
def _no_default_profile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("VLLM_HPU_MM_PROFILE", raising=False)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_real_gaudi_warmup_lines_are_read() -> None:
    log = parse_warmup(lines(WARMUP_DOC))
    assert log.backend == "hpu"
    assert log.free_after_load_bytes == round(79.16 * GIB)
    prompt, decode = log.totals
    assert (prompt.phase, prompt.captured, len(prompt.buckets)) == ("prompt", 15, 15)
    assert (decode.phase, decode.captured, len(decode.buckets)) == ("decode", 48, 48)
    # Pairs of consecutive graph lines with no "..." between them: prompt 11 -> decode 1 (48.77 -> 47.51 GiB), ...
    costs = {(s.phase, s.get("batch_size"), s.get("seq_len")): s.cost_bytes for s in log.samples}
    assert costs[("prompt", 1, 896)] == round(48.77 * GIB) - round(47.51 * GIB)
    assert costs[("prompt", 2, 512)] == round(45.91 * GIB) - round(44.48 * GIB)
    assert len(log.samples) == 5


def test_text_graph_factors_from_the_real_summaries() -> None:
    c = calibrate(parse_warmup(lines(WARMUP_DOC)), LLAMA_31_8B, device="gaudi2", source="warm-up.md")
    per_token = (4 * 4096 + 2 * 14336) * 2  # eager bytes per token of one layer, as text_cost estimates it
    tokens = sum(range(128, 1025, 128)) + 2 * sum(range(128, 641, 128)) + 4 * (128 + 256)  # the 15 buckets listed
    prefill = c.profile.text_prefill_factor
    assert prefill is not None
    assert prefill == pytest.approx(14.03 * GIB / (tokens * per_token), rel=1e-3)
    assert prefill > 10  # an HPU prompt graph keeps far more than one layer's activations
    assert c.profile.text_decode_factor is not None
    assert c.profile.text_decode_factor < 1.47
    assert set(c.profile.measured) == {"text_prefill_factor", "text_decode_factor"}
    second = calibrate(parse_warmup(lines(PERF_DOC)), LLAMA_31_8B, device="gaudi2", source="performance_tuning.md")
    assert "text_prefill_factor" in second.profile.measured  # 24 prompt graphs, 67.72 MiB (a smaller setup)


def test_a_profile_from_real_lines_changes_the_plan(tmp_path: Path) -> None:
    c = calibrate(parse_warmup(lines(WARMUP_DOC)), LLAMA_31_8B, device="gaudi2", source="warm-up.md")
    path = tmp_path / "profile.json"
    save_profile(c, path)
    profile = load_profile(path)
    assert profile.costs == c.profile
    inputs = build(SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", device="gaudi2", free_memory_gib=60.0), load({}))
    calibrated, notes = apply_profile(inputs, profile, free_stated=True)
    before, after = plan(inputs), plan(calibrated)
    assert after.prefill_graphs_fit < before.prefill_graphs_fit
    # PR 147's fork took 0.30x eager per decode graph, above the built-in lazy-graph calibration (0.015x).
    assert after.decode_graphs_fit <= before.decode_graphs_fit
    assert any(n.startswith("measured (profile") and "text_prefill_factor" in n for n in notes)
    assert any(n.startswith("estimated (built-in): vision_mib_per_patch") for n in notes)


def test_cuda_graph_memory_lines_are_kept_and_not_applied_to_a_gaudi_plan(tmp_path: Path) -> None:
    log = parse_warmup(lines(DATA / "calibration" / "vllm_48601_cudagraph_memory.log"))
    assert log.backend == "cuda"
    assert log.cuda_graph_bytes == round(2.04 * GIB)
    rocm = parse_warmup(lines(DATA / "logs" / "vllm_27706_rocm_healthy_start.log"))
    assert rocm.cuda_graph_bytes == round(0.08 * GIB)
    c = calibrate(log, None, device="h100", source="pr 48601")
    path = tmp_path / "p.json"
    save_profile(c, path)
    inputs = build(SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", device="gaudi2"), load({}))
    same, notes = apply_profile(inputs, load_profile(path), free_stated=False)
    assert same == inputs
    assert "not applied" in notes[0]


def test_a_profile_of_another_backend_is_said_ignored_and_the_costs_lines_keep_their_labels(tmp_path: Path) -> None:
    # A CUDA profile on a Gaudi plan left one line, "(all estimated)", while the rows said the text costs were
    # calibrated on the public Gaudi2 log (r10profile case 8): the costs lines are those of a plan without it.
    c = calibrate(parse_warmup(lines(DATA / "calibration" / "vllm_48601_cudagraph_memory.log")), None, device="h100",
                  source="pr 48601")  # fmt: skip
    path = tmp_path / "p.json"
    save_profile(c, path)
    inputs = build(SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", device="gaudi2"), load({}))
    same, notes = apply_profile(inputs, load_profile(path), free_stated=False)
    assert same == inputs
    assert notes[0].startswith(f"not applied (profile {path}): measured on h100 (cuda), this plan is for gaudi2 (hpu)")
    without = plan_with_profile(inputs, read_profile("none", None), free_stated=False)[1]["notes"]
    assert notes[1:] == without[:-1]  # the same calibrated / estimated lines, less "nothing measured (--profile none)"
    assert any(n.startswith("calibrated (public Gaudi2 log") and "text_prefill_factor" in n for n in notes)
    assert not any("all estimated" in n for n in notes)


def test_a_cuda_profile_on_a_cuda_plan_says_its_graph_memory_is_not_applied_and_why(tmp_path: Path) -> None:
    # It said "nothing measured (profile): it holds no memory cost" beside a measured 2.04 GiB (r10profile case 7):
    # the line names the measured figure, that the plan keeps its estimate and why, and that nothing else is held.
    c = calibrate(parse_warmup(lines(DATA / "calibration" / "vllm_48601_cudagraph_memory.log")), None, device="h100",
                  source="pr 48601")  # fmt: skip
    path = tmp_path / "p.json"
    save_profile(c, path)
    profile = load_profile(path)
    assert profile.cuda_graph_bytes == round(2.04 * GIB)
    inputs = build(SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", device="h100", runtime="vllm-cuda"), load({}))
    same, notes = apply_profile(inputs, profile, free_stated=False)
    assert same == inputs
    assert not any(n.startswith("nothing measured") for n in notes)
    line = next(n for n in notes if n.startswith(f"not applied (profile {path}): CUDA graph memory 2.04 GiB"))
    assert "pr 48601" in line
    assert "graphs row stays the plan's estimate" in line
    assert "no other memory cost" in line
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**json.loads(path.read_text()), "cuda_graph_bytes": -1}))
    with pytest.raises(ConfigError, match="cuda_graph_bytes=-1"):
        load_profile(bad)


def test_a_profile_overrides_only_what_it_measured(tmp_path: Path) -> None:
    # A start with its warm-up skipped measures the free memory alone: the text factors keep the public Gaudi2
    # calibration, with its value and its label, and the vision line stays the built-in estimate.
    c = calibrate(parse_warmup(["Skipping warmup...", free_line(78.41)]), LLAMA_31_8B, device="gaudi2", source="s")
    path = tmp_path / "skip.json"
    save_profile(c, path)
    inputs = build(SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", device="gaudi2"), load({}))
    applied, notes = apply_profile(inputs, load_profile(path), free_stated=False)
    assert applied.costs == inputs.costs  # values and labels as without a profile
    assert any(n.startswith("calibrated (public Gaudi2 log") and "text_prefill_factor" in n for n in notes)
    assert "estimated (built-in): vision_mib_per_patch, vision_fixed_mib" in notes
    # a profile that measured the vision line alone keeps the text factors' calibration beside it
    vision = dataclasses.replace(c.profile, vision_mib_per_patch=0.05, vision_fixed_mib=40.0,
                                 measured=("vision_mib_per_patch", "vision_fixed_mib"))  # fmt: skip
    mixed = apply_profile(inputs, dataclasses.replace(load_profile(path), costs=vision), free_stated=True)[1]
    assert any(
        n.startswith("measured (profile") and n.endswith("vision_mib_per_patch, vision_fixed_mib") for n in mixed
    )
    assert any(n.startswith("calibrated (public Gaudi2 log") and "text_decode_factor" in n for n in mixed)


def engine_line(tp: int, max_len: int = 32768) -> str:
    # vLLM 0.32's engine config line (config/vllm.py __str__), as vllm-gaudi's start prints it; fields trimmed.
    return (f"INFO [core.py:134] Initializing a V1 LLM engine (v0.32.0) with config: model='Qwen/Qwen2.5-VL-7B-"
            f"Instruct', dtype=torch.bfloat16, max_seq_len={max_len}, tensor_parallel_size={tp}, "
            "pipeline_parallel_size=1, quantization=None, enforce_eager=False")  # fmt: skip


def test_measured_free_memory_applies_only_to_a_plan_of_the_shape_it_was_measured_at(tmp_path: Path) -> None:
    # Free memory after load is the card's total less its share of the weights: a TP 1 start's figure is not a TP 2
    # card's (r6profile case 12), so that plan estimates it and says why; the same shape still uses it.
    log = parse_warmup([engine_line(1), free_line(78.61)])
    c = calibrate(log, None, device="gaudi2", source="s", after_profile_run=False)
    path = tmp_path / "p.json"
    save_profile(c, path)
    profile = load_profile(path)
    assert (profile.measured_at.tensor_parallel_size, profile.measured_at.max_model_len) == (1, 32768)
    base = SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", device="gaudi2", max_model_len=32768)
    tp2 = build(dataclasses.replace(base, tensor_parallel_size=2), load({}))
    applied, notes = apply_profile(tp2, profile, free_stated=False)
    assert applied.free_after_load_bytes is None
    assert any(n.startswith("not applied (profile): free after load 78.61 GiB") and "TP 1, this plan 2" in n
               for n in notes)  # fmt: skip
    planned = plan(applied)  # a card's free memory and weights add up to its total again
    assert planned.free_after_load_bytes + planned.weight_bytes == pytest.approx(tp2.total_bytes, rel=0.01)
    # vllm-gaudi reads it right after load: another --max-model-len on the same cards keeps it
    shorter = build(dataclasses.replace(base, max_model_len=8192), load({}))
    assert apply_profile(shorter, profile, free_stated=False)[0].free_after_load_bytes == round(78.61 * GIB)
    # vllm-fork reads it after a profiling pass at the longest sequence: another length does not
    fork = load_profile(path)
    fork = dataclasses.replace(fork, measured_at=dataclasses.replace(fork.measured_at, after_profile_run=True))
    applied, notes = apply_profile(shorter, fork, free_stated=False)
    assert applied.free_after_load_bytes is None
    assert any("max-model-len 32768, this plan 8192" in n for n in notes)


def test_a_profile_is_applied_only_to_plans_for_the_runtime_whose_log_measured_it(tmp_path: Path) -> None:
    # A vllm-gaudi profile moved a vllm-fork plan: its 78.90 GiB, read right after load, became the fork's free memory
    # after its profiling pass, and the fork's own profiling residue disappeared (r11profile case 10). Another
    # runtime's profile is ignored whole, with why; the same runtime's plan still uses it.
    log = parse_warmup([engine_line(1), free_line(78.61)])
    c = calibrate(log, None, device="gaudi2", source="s", after_profile_run=False, measured_by="vllm-gaudi")
    path = tmp_path / "p.json"
    save_profile(c, path)
    profile = load_profile(path)
    assert profile.measured_by == "vllm-gaudi"
    base = SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", device="gaudi2", max_model_len=32768)
    fork = build(dataclasses.replace(base, runtime="vllm-fork==0.7.2"), load({}))
    same, notes = apply_profile(fork, profile, free_stated=False)
    assert same == fork
    assert notes[0].startswith(f"not applied (profile {path}): measured by vllm-gaudi, this plan is for vllm-fork: ")
    assert "after its profiling forward pass" in notes[0]
    assert notes[1:] == plan_with_profile(fork, read_profile("none", None), free_stated=False)[1]["notes"][:-1]
    planned = plan(same)
    assert planned.profile_bytes > 0  # the fork's own profiling residue stays
    gaudi = build(dataclasses.replace(base, runtime="vllm-gaudi"), load({}))
    assert apply_profile(gaudi, profile, free_stated=False)[0].free_after_load_bytes == round(78.61 * GIB)
    # a log that names neither Gaudi runtime: its free memory, read as calibrate recorded, is not the fork's
    unnamed = dataclasses.replace(profile, measured_by=None)
    applied, notes = apply_profile(fork, unnamed, free_stated=False)
    assert applied.free_after_load_bytes is None
    assert any(n.startswith("not applied (profile): free after load 78.61 GiB") and "right after load" in n
               and "vllm-fork reads it after its profiling forward pass" in n for n in notes)  # fmt: skip


def test_a_fork_plan_with_a_given_free_memory_says_its_profiling_pass_is_inside_it() -> None:
    # The row said "none: the runtime runs no profiling forward pass" of vllm-fork, which runs one before it reads
    # its free memory (r11profile case 12): the pass's residue is inside the measured or stated figure.
    base = SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", device="gaudi2", max_model_len=32768,
                      runtime="vllm-fork==0.7.2")  # fmt: skip
    stated = plan(build(dataclasses.replace(base, free_memory_gib=60.0), load({})))
    row = next(r for r in to_table(stated).splitlines() if r.startswith("profiling peak"))
    assert "0.00 GiB  inside free after load (stated)" in row
    assert "runs no profiling" not in row
    estimated = plan(build(base, load({})))
    assert next(r for r in to_table(estimated).splitlines() if r.startswith("profiling peak")).endswith("estimate")
    gaudi = plan(build(dataclasses.replace(base, runtime="vllm-gaudi", free_memory_gib=60.0), load({})))
    row = next(r for r in to_table(gaudi).splitlines() if r.startswith("profiling peak"))
    assert row.endswith("none: the runtime runs no profiling forward pass")


def test_a_measured_free_memory_says_measured_and_its_profile_not_stated(tmp_path: Path) -> None:
    # The profile's free memory after load was labelled "stated", --free-memory-gib's label (r10profile cases 3, 4,
    # 11, 13, 14, 15, 20): the row, the JSON and the costs: lines say it was measured, and by which profile and log.
    path = tmp_path / "p.json"
    log = parse_warmup([engine_line(1), free_line(78.61)])
    save_profile(calibrate(log, None, device="gaudi2", source="start.log", after_profile_run=False), path)
    inputs = build(SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", device="gaudi2", max_model_len=32768), load({}))
    applied, costs = plan_with_profile(inputs, read_profile(str(path), None), free_stated=False)
    planned = plan(applied)
    row = next(r for r in to_table(planned).splitlines() if r.startswith("free after load"))
    assert f"78.61 GiB  measured (profile {path}: start.log" in row
    assert "stated" not in row
    assert to_dict(planned)["free_after_load_stated"] is False
    assert to_dict(planned)["free_after_load_measured_by"].startswith(f"profile {path}")
    assert f"measured (profile {path}): free after load 78.61 GiB" in costs["notes"]
    assert costs["measured"] == ["free_after_load"]
    # --free-memory-gib keeps "stated", and the profile's figure is not measured for that plan
    stated = build(dataclasses.replace(SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", device="gaudi2",
                                                  max_model_len=32768), free_memory_gib=60.0), load({}))  # fmt: skip
    applied, costs = plan_with_profile(stated, read_profile(str(path), None), free_stated=True)
    row = next(r for r in to_table(plan(applied)).splitlines() if r.startswith("free after load"))
    assert row.split()[-1] == "stated"
    assert "free_after_load" not in costs["measured"]
    assert to_dict(plan(applied))["free_after_load_stated"] is True


def test_the_memory_evidence_says_calibrated_only_for_what_the_profile_measured(tmp_path: Path) -> None:
    # A profile from /metrics alone holds a step time and no memory cost: fleet plan and buckets replay said
    # "calibrated: measured costs from" it (r6profile case 19); one from a warm-up log names what it measured.
    inputs = build(SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", device="gaudi2"), load({}))
    metrics_only = tmp_path / "metrics.json"
    metrics_only.write_text(json.dumps({"version": 1, "costs": {}, "measured": [], "free_after_load_bytes": None}))
    costs = plan_with_profile(inputs, read_profile(str(metrics_only), None), free_stated=False)[1]
    assert memory_evidence(costs).startswith("built-in estimates: the profile")
    assert "calibrated" not in memory_evidence(costs)
    assert any(n.startswith("nothing measured (profile") for n in costs["notes"])  # memory plan's costs: line
    warm = tmp_path / "warm.json"
    log = parse_warmup([engine_line(1), free_line(78.61)])
    save_profile(calibrate(log, None, device="gaudi2", source="s", after_profile_run=False), warm)
    costs = plan_with_profile(inputs, read_profile(str(warm), None), free_stated=False)[1]
    assert (
        memory_evidence(costs)
        == f"calibrated: measured costs from the profile {warm} (free_after_load); the others built-in "
        "estimates"
    )
    # stated on the command line, the free memory is not the profile's: nothing of it is used
    stated = build(SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", device="gaudi2", free_memory_gib=60.0), load({}))
    assert memory_evidence(plan_with_profile(stated, read_profile(str(warm), None), free_stated=True)[1]).startswith(
        "built-in"
    )
    assert memory_evidence({"profile": None}) == "built-in estimates (no `memory calibrate` profile)"


def test_each_measured_row_quotes_its_log_line_as_printed() -> None:
    # The fork's summaries, its free memory and vLLM CUDA's capture line, each beside the line it came from and with
    # the figure as the runtime printed it (3.912 GiB is not rounded to 3.91), even without the model the factors need
    fork = calibrate(parse_warmup(lines(WARMUP_DOC)), None, device="gaudi2", source="warm-up.md")
    how = {name: (value, text) for name, value, text in fork.rows}
    assert how["prompt_graphs_used"] == (
        "14.03 GiB",
        "measured: line 29: 'Graph/Prompt captured:15 (62.5%) used_mem:14.03 GiB' (the 15 prompt graphs' total, as "
        "the runtime summed it)",
    )
    assert how["decode_graphs_used"][0] == "161.9 MiB"
    assert "line 30: 'Graph/Decode captured:48 (100.0%) used_mem:161.9 MiB'" in how["decode_graphs_used"][1]
    assert "line 12: 'Free device memory: 79.16 GiB'" in how["free_after_load_gib"][1]
    cuda = calibrate(parse_warmup(lines(DATA / "calibration" / "vllm_48601_cudagraph_memory.log")), None,
                     device="h100", source="pr 48601")  # fmt: skip
    row = next(text for name, _, text in cuda.rows if name == "cuda_graph_gib")
    assert "line 4: 'Graph capturing finished in 15 secs, took 2.04 GiB'" in row
    summary = [line.replace("used_mem:1.5 GiB", "used_mem:3.912 GiB") for line in gaudi_summary_log(listed=False)]
    gaudi = calibrate(parse_warmup(summary), LLAMA_31_8B, device="gaudi2", source="s")
    how = {name: (value, text) for name, value, text in gaudi.rows}
    assert how["prompt_graphs_used"][0] == "3.912 GiB"
    assert "(3 graphs, used_mem 3.912 GiB)" in how["text_prefill_factor"][1]


def mm_line(i: int, n: int, w: int, h: int, free_gib: float) -> str:
    # vllm-gaudi's log_warmup_multimodal format (hpu_model_runner.py @ 091bbadd); numbers made up for the test.
    return (f"INFO hpu_model_runner.py] [Warmup][Graph/Multimodal(image)][{i}/{n}] batch_size:1 seq_len:0 "
            f"resolution:{w}X{h} free_mem:{free_gib} GiB")  # fmt: skip


def test_vision_graph_line_is_fitted_per_bucket() -> None:
    # Buckets 1600, 3136, 4096: a pool costs 0.08 x patches + 20 MiB; every other shape adds a graph, the ones in
    # between cost nothing.
    shapes = [(560, 560), (784, 448), (784, 784), (1092, 560), (896, 896), (1232, 644)]
    patches = [math.ceil(w * h / 196) for w, h in shapes]
    free, out = 50.0, []
    for k, ((w, h), p) in enumerate(zip(shapes, patches, strict=True)):
        bucket = 1600 if p <= 1600 else 3136 if p <= 3136 else 4096
        if k % 2 == 0:
            free -= (0.08 * bucket + 20) / 1024
        out.append(mm_line(k + 1, len(shapes), w, h, round(free, 6)))
    c = calibrate(parse_warmup(out), None, device="gaudi2", source="synthetic", buckets=(1600, 3136, 4096))
    # The first shape has no line before it, so buckets 3136 and 4096 are measured.
    assert c.profile.vision_mib_per_patch == pytest.approx(0.08, rel=1e-3)
    assert c.profile.vision_fixed_mib == pytest.approx(20, abs=0.5)


@pytest.mark.parametrize("drops", [(102, 154), (154, 102)], ids=["negative-intercept", "falling"])
def test_a_vision_fit_below_zero_is_held_so_the_profile_it_writes_is_one_the_plans_read(
    tmp_path: Path, drops: tuple[int, int]
) -> None:
    # two sizes whose free fit crosses zero: calibrate wrote vision_fixed_mib -64.85, which every plan then refused
    free, out = 57.3, [mm_line(1, 3, 560, 560, 57.3)]
    for k, ((w, h), mib) in enumerate(zip([(784, 784), (896, 896)], drops, strict=True)):
        free -= mib / 1024
        out.append(mm_line(k + 2, 3, w, h, round(free, 6)))
    c = calibrate(parse_warmup(out), None, device="gaudi2", source="synthetic", buckets=(1600, 3136, 4096))
    assert c.profile.vision_mib_per_patch is not None
    assert c.profile.vision_mib_per_patch > 0
    assert c.profile.vision_fixed_mib == 0  # r14profile 1 (-64.85 MiB) and a cost falling with size, each held at 0
    path = tmp_path / "p.json"
    save_profile(c, path)
    assert load_profile(path).costs.vision_fixed_mib == 0


def aspect_shapes(buckets: list[int]) -> list[tuple[int, int]]:
    # vllm-gaudi's warm-up shapes: 5 aspect ratios per bucket (extension/bucketing/vision.py bucket_to_image_resolution
    # @ v0.26.0), most of which land in another bucket than the one they were made from, or above the largest.
    out = []
    for target in buckets:
        for rw, rh in ((1, 1), (4, 3), (3, 4), (16, 9), (9, 16)):
            gh = int(target**0.5)
            gw = int(gh * 14 * rw / rh) // 14
            out.append((-(-gw // 2) * 2 * 14, gh * 14))
    return out


def test_vision_costs_come_from_the_buckets_the_log_lists_each_drop_booked_on_the_shape_that_ran() -> None:
    # Each shape costs 40 MiB + 0.05 MiB x the size it runs at: the least listed bucket that holds it, or its own
    # patches above the largest. Every shape takes memory (its own graph): a bucket's cost is one shape's, not the sum.
    listed = [1600, 3136, 4096]
    free, out = 15.0, ["INFO [hpu_model_runner.py:6100] Multimodal bucket : [1600, 3136, 4096]"]
    shapes = aspect_shapes(listed)
    for k, (w, h) in enumerate(shapes):
        p = w * h // 196
        free -= (40 + 0.05 * next((b for b in listed if p <= b), p)) / 1024
        out.append(mm_line(k + 1, len(shapes), w, h, round(free, 6)))
    # the command line passes its own default list (with 6400 and 7744): the log's list is what the run used
    c = calibrate(
        parse_warmup(out), None, device="gaudi2", source="s", buckets=(1600, 3136, 4096, 6400, 7744, 9216, 12544)
    )
    assert c.profile.vision_mib_per_patch == pytest.approx(0.05, rel=1e-3)
    assert c.profile.vision_fixed_mib == pytest.approx(40, abs=0.5)
    how = {name: text for name, _, text in c.rows}["vision_mib_per_patch"]
    assert "3 buckets (1600: 120 MiB, 3136: 197 MiB, 4096: 245 MiB)" in how
    assert "6400" not in how
    assert "7744" not in how
    assert "(the buckets of line 1)" in how


BANNER = "INFO 01-21 05:40:02 [api_server.py:1885] vLLM API server version 0.32.0"


def test_a_log_of_two_server_starts_is_measured_from_the_last_one_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The first start was killed after 2 of 4 shapes (other figures); the restart warms the same shapes again, and
    # its [1/4] and [2/4] lines are its own, not a second worker's copy of the first start's.
    first = [BANNER, free_line(74.1), mm_line(1, 4, 560, 560, 9.61), mm_line(2, 4, 784, 784, 9.31), "Killed"]
    shapes = [(560, 13.27), (784, 13.07), (896, 12.82), (1120, 12.43)]
    second = [BANNER, free_line(77.8), *(mm_line(i + 1, 4, w, w, f) for i, (w, f) in enumerate(shapes))]
    log = parse_warmup(first + second)
    assert (log.run, log.runs) == (2, 2)
    assert log.free_after_load_bytes == round(77.8 * GIB)
    alone = calibrate(parse_warmup(second), None, device="gaudi2", source="s", buckets=(1600, 3136, 4096, 6400))
    mixed = calibrate(log, None, device="gaudi2", source="s", buckets=(1600, 3136, 4096, 6400))
    assert mixed.profile == alone.profile
    path = tmp_path / "two.log"
    path.write_text("\n".join(first + second) + "\n")
    assert main(["memory", "calibrate", str(path), "--output", str(tmp_path / "p.json")]) == 0
    assert "read run 2 of 2, the last that printed a memory figure" in capsys.readouterr().out
    code, report = run_cli(capsys, "calibrate", str(path), "--output", str(tmp_path / "p.json"))
    assert (code, report["run"], report["runs"]) == (0, 2, 2)


def free_line(free_gib: float) -> str:
    # vllm-gaudi's memory split (hpu_worker.py @ 091bbadd); numbers made up for the test.
    return (f"INFO [hpu_worker.py:431] Free device memory: {free_gib} GiB, {round(free_gib * 0.92, 2)} GiB usable "
            "(gpu_memory_utilization=0.92)")  # fmt: skip


def gaudi_summary_log(*, listed: bool) -> list[str]:
    """vllm-gaudi's own lines @091bbadd: its bucket lists (extension/bucketing/common.py log_generate_info) and its
    per-phase summaries, which name no buckets (hpu_model_runner.py log_graph_warmup_summary); sizes made up."""
    generated = [
        "INFO [common.py:253] Generated 3 prompt buckets [bs, query, num_blocks]: [(1, 128, 0), (1, 256, 0), "
        "(2, 128, 2)]",
        "INFO [common.py:253] Generated 2 decode buckets [bs, query, num_blocks]: [(1, 1, 64), (4, 1, 256)]",
    ]
    return [
        "INFO [hpu_worker.py:432] Free device memory: 79.01 GiB, 72.69 GiB usable (gpu_memory_utilization=0.92), "
        "7.269 GiB reserved for HPUGraphs (VLLM_GRAPH_RESERVED_MEM=0.1)",
        *(generated if listed else []),
        "INFO [hpu_model_runner.py:5221] Graph/Prompt captured:3 used_mem:1.5 GiB",
        "INFO [hpu_model_runner.py:5221] Graph/Decode captured:2 used_mem:96 MiB",
    ]


def test_vllm_gaudis_summaries_are_measured_with_the_bucket_lists_it_generated() -> None:
    c = calibrate(parse_warmup(gaudi_summary_log(listed=True)), LLAMA_31_8B, device="gaudi2", source="synthetic")
    per_token = (4 * 4096 + 2 * 14336) * 2  # one token's eager activations in one layer
    kv_block = 128 * 2 * 8 * 128 * 2  # one cached block's K and V in one layer (block 128, 8 KV heads, dim 128)
    prefill = (128 + 256 + 2 * 128) * per_token + 2 * 2 * kv_block  # (2, 128, 2): two sequences, 2 blocks each
    decode = (1 + 4) * per_token + (64 + 256) * kv_block + (1 + 4) * 128256 * 4  # tokens, K/V, logits
    assert c.profile.text_prefill_factor == pytest.approx(1.5 * GIB / prefill, rel=1e-3)
    assert c.profile.text_decode_factor == pytest.approx(96 * 2**20 / decode, rel=1e-3)
    how = {name: text for name, _, text in c.rows}
    assert "3 prompt graphs, used_mem 1.5 GiB (line 4), its buckets from line 2" in how["text_prefill_factor"]


def test_a_summary_without_its_buckets_says_what_the_log_lacks() -> None:
    c = calibrate(parse_warmup(gaudi_summary_log(listed=False)), LLAMA_31_8B, device="gaudi2", source="synthetic")
    assert c.profile.text_prefill_factor is None
    how = {name: text for name, _, text in c.rows}
    assert "the log has no such warm-up lines" not in how["text_prefill_factor"]
    assert "Graph/Prompt summary on line 2 (3 graphs, used_mem 1.5 GiB) was read" in how["text_prefill_factor"]
    assert "the buckets it covered are not in the log" in how["text_decode_factor"]
    # a list of another length than the summary's count is not the buckets it covered
    cut = [line.replace("Generated 3 prompt", "Generated 4 prompt") for line in gaudi_summary_log(listed=True)]
    how = {name: text for name, _, text in calibrate(parse_warmup(cut), LLAMA_31_8B, device="gaudi2",
                                                     source="synthetic").rows}  # fmt: skip
    assert "gives 3 of the 4 [bs, query, num_blocks] buckets it declares" in how["text_prefill_factor"]


#: Each release's spelling of its warm-up summary, as its source prints it (``log_graph_warmup_summary``): the line
#: quoted, then what the summary reads as (phase, graphs, used_mem bytes, its own buckets).
SUMMARY_SPELLINGS = [
    # vllm-fork v0.8.5.post1+Gaudi-1.21.3 vllm/worker/hpu_model_runner.py L2311-2319:
    # phase = f'Graph/{"Prompt" if is_prompt else "Decode"}'; f'{phase} captured:{len(graphed)} '
    # f'({100 * len(graphed) / num_candidates:.1f}%) ' f'used_mem:{format_bytes(total_mem)} ' f'buckets:{...}'
    ("Graph/Prompt captured:2 (100.0%) used_mem:1.5 GiB buckets:[(1, 512), (1, 1024)]", ("prompt", 2, 1.5 * GIB, 2)),
    # vllm-fork v0.9.0.1+Gaudi-1.22.0 L3147-3153 (v0.8.5+Gaudi-1.22.0-aice-v0 L3143-3149): phase = 'Prompt' if
    # is_prompt else 'Decode'; f'{phase} captured:{len(graphed)} ' f'({...:.1f}%) ' f'used_mem:{format_bytes(...)}'
    ("Prompt captured:2 (100.0%) used_mem:1.5 GiB", ("prompt", 2, 1.5 * GIB, 0)),
    ("Decode captured:2 (100.0%) used_mem:64 MiB", ("decode", 2, 64 * 2**20, 0)),
    # vllm-gaudi v0.26.0 vllm_gaudi/v1/worker/hpu_model_runner.py L5170-5174: phase = f'Graph/{"Prompt" if
    # is_prompt else "Decode"}'; f'{phase} captured:{len(buckets)} ' f'used_mem:{format_bytes(total_mem)}'
    ("Graph/Decode captured:2 used_mem:64 MiB", ("decode", 2, 64 * 2**20, 0)),
]


@pytest.mark.parametrize(("said", "read"), SUMMARY_SPELLINGS)
def test_each_releases_spelling_of_the_warmup_summary_is_read_and_quoted(said: str, read: tuple[Any, ...]) -> None:
    # round 13 (logs 18): vllm-fork 1.22 dropped the Graph/ prefix and its summaries were not read at all
    log = parse_warmup([f"INFO 08-21 12:03:01 [hpu_model_runner.py:3155] {said}"])
    (total,) = log.totals
    assert (total.phase, total.captured, total.used_bytes, len(total.buckets)) == read
    c = calibrate(log, LLAMA_31_8B, device="gaudi2", source="synthetic")
    how = {name: text for name, _, text in c.rows}
    assert how[f"{read[0]}_graphs_used"].startswith(f"measured: line 1: '{said.split(' buckets:')[0]}'")


def test_words_that_only_end_in_a_phase_are_not_a_summary() -> None:
    assert (
        parse_warmup(["INFO x: SubPrompt captured:2 used_mem:1 GiB", "a/Decode captured:2 used_mem:1 GiB"]).totals == ()
    )


def fork_122_log() -> list[str]:
    """vllm-fork v0.9.0.1+Gaudi-1.22.0's warm-up: per-graph lines ([Warmup][Graph/prompt][i/n] batch_size query_len
    num_blocks free_mem, hpu_model_runner.py L3023-3031 with phase f"Graph/{'prompt'|'decode'}" at L3058), then each
    phase's summary without Graph/ or buckets (L3145-3154); no generated bucket list is printed."""
    return [
        "INFO 08-21 12:02:12 [hpu_worker.py:363] Free device memory: 77.9 GiB, 70.11 GiB usable "
        "(gpu_memory_utilization=0.9), 7.011 GiB reserved for HPUGraphs (VLLM_GRAPH_RESERVED_MEM=0.1), 63.1 GiB "
        "reserved for KV cache",
        "INFO 08-21 12:02:16 [hpu_model_runner.py:3031] [Warmup][Graph/prompt][1/2] batch_size:1 query_len:1024 "
        "num_blocks:0 free_mem:14.62 GiB",
        "INFO 08-21 12:02:40 [hpu_model_runner.py:3031] [Warmup][Graph/prompt][2/2] batch_size:1 query_len:512 "
        "num_blocks:0 free_mem:13.62 GiB",
        "INFO 08-21 12:03:01 [hpu_model_runner.py:3155] Prompt captured:2 (100.0%) used_mem:1.5 GiB",
        "INFO 08-21 12:03:02 [hpu_model_runner.py:3031] [Warmup][Graph/decode][1/2] batch_size:2 query_len:1 "
        "num_blocks:128 free_mem:13.12 GiB",
        "INFO 08-21 12:03:09 [hpu_model_runner.py:3031] [Warmup][Graph/decode][2/2] batch_size:1 query_len:1 "
        "num_blocks:128 free_mem:13.09 GiB",
        "INFO 08-21 12:03:15 [hpu_model_runner.py:3155] Decode captured:2 (100.0%) used_mem:64 MiB",
    ]


def test_a_fork_122_summary_is_measured_over_the_graphs_its_own_warmup_lines_name() -> None:
    # round 13 (logs 18): the decode factor was one graph's free_mem drop (30.7 MiB) where the summary says its two
    # graphs used 64 MiB; the summary counts every bucket and the per-graph lines name each one
    c = calibrate(parse_warmup(fork_122_log()), LLAMA_31_8B, device="gaudi2", source="synthetic")
    per_token = (4 * 4096 + 2 * 14336) * 2
    kv_block = 128 * 2 * 8 * 128 * 2
    decode = (2 + 1) * per_token + (128 + 128) * kv_block + (2 + 1) * 128256 * 4
    assert c.profile.text_prefill_factor == pytest.approx(1.5 * GIB / ((1024 + 512) * per_token), rel=1e-3)
    assert c.profile.text_decode_factor == pytest.approx(64 * 2**20 / decode, rel=1e-3)
    how = {name: text for name, _, text in c.rows}
    assert how["decode_graphs_used"].startswith("measured: line 7: 'Decode captured:2 (100.0%) used_mem:64 MiB'")
    measured = "2 decode graphs, used_mem 64 MiB (line 7), its buckets from its [Warmup][Graph/decode] lines 5-6"
    assert measured in how["text_decode_factor"]
    # a summary counting more graphs than the lines name is not measured over them: the report says what is missing
    short = [line for line in fork_122_log() if "[1/2] batch_size:2" not in line]
    how = {name: text for name, _, text in calibrate(parse_warmup(short), LLAMA_31_8B, device="gaudi2",
                                                     source="synthetic").rows}  # fmt: skip
    assert "the log's Decode summary on line 6 (2 graphs, used_mem 64 MiB) was read" in how["text_decode_factor"]


def test_a_restart_after_a_failure_the_doctor_does_not_read_is_a_run_of_its_own() -> None:
    # vLLM 0.32's start lines (the API server's "non-default args", each engine core's config line): the first start
    # warmed its graphs and then failed on a device error with no traceback; the restart's summaries alone are read.
    def start(pid: int, summaries: list[str]) -> list[str]:
        return [
            "(APIServer pid=4700) INFO [api_utils.py:286] non-default args: {'model': 'm'}",
            f"(EngineCore_DP0 pid={pid}) INFO [core.py:134] Initializing a V1 LLM engine (v0.32.0) with config: "
            "model='m'",
            *(f"(EngineCore_DP0 pid={pid}) {line}" for line in summaries),
        ]

    failed = [text.replace("1.5 GiB", "9.9 GiB") for text in gaudi_summary_log(listed=True)]
    second = start(6001, gaudi_summary_log(listed=True))
    log = parse_warmup([*start(4711, failed), "ERROR [core.py:1012] EngineCore failed to start.",
                        "RuntimeError: synStatus=26 [Generic failure] Device acquire failed.", *second])  # fmt: skip
    assert (log.run, log.runs) == (2, 2)
    mixed = calibrate(log, LLAMA_31_8B, device="gaudi2", source="s")
    assert mixed.profile == calibrate(parse_warmup(second), LLAMA_31_8B, device="gaudi2", source="s").profile
    assert not any("9.9 GiB" in text for _, _, text in mixed.rows)


def test_the_report_names_the_logs_runtime_not_only_its_backend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "server.log"
    log.write_text("INFO 01-21 06:55:07 [__init__.py:45] - hpu -> vllm_gaudi:register\n"
                   + "\n".join(gaudi_summary_log(listed=False)) + "\n")  # fmt: skip
    assert main(["memory", "calibrate", str(log), "--output", str(tmp_path / "p.json")]) == 0
    assert "(written by vllm-gaudi; " in capsys.readouterr().out.splitlines()[0]
    code, report = run_cli(capsys, "calibrate", str(log), "--output", str(tmp_path / "p.json"))
    assert code == 0
    assert (report["source"]["runtime"], report["profile"]["runtime"]) == ("vllm-gaudi", "hpu")


#: A given text-graph budget skips the default budget search: which profile a plan read does not depend on it.
QUICK_PLAN = ("--text-graph-budget", "60")


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["memory", *argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def test_cli_writes_the_profile_and_plan_reads_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.json"
    code, report = run_cli(capsys, "calibrate", str(WARMUP_DOC), "--device", "gaudi2", "--output", str(out))
    assert code == 0
    assert report["written_to"] == str(out)
    assert report["profile"]["free_after_load_bytes"] == round(79.16 * GIB)
    assert "pass --model" in report["model_from"]  # the sample names no model: text factors need it
    code, planned = run_cli(capsys, "plan", "--profile", str(out), *QUICK_PLAN)
    assert code in (0, 1)
    assert planned["costs"]["profile"] == str(out)
    code, planned = run_cli(capsys, "plan", "--profile", "none", *QUICK_PLAN)
    assert planned["costs"]["profile"] is None


def test_cli_uses_the_default_location(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("VLLM_HPU_MM_PROFILE", str(tmp_path / "env-profile.json"))
    assert run_cli(capsys, "calibrate", str(WARMUP_DOC))[0] == 0
    assert (tmp_path / "env-profile.json").is_file()
    assert run_cli(capsys, "plan", *QUICK_PLAN)[1]["costs"]["profile"] == str(tmp_path / "env-profile.json")


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Our own CPU server's log: no graph warm-up on CPU, nothing to measure, no profile written.
    code, report = run_cli(capsys, "calibrate", str(DATA / "logs" / "cpu_serve_ok.log"), "--output",
                           str(tmp_path / "none.json"))  # fmt: skip
    assert code == 1
    assert report["written_to"] is None
    assert not (tmp_path / "none.json").exists()
    empty = tmp_path / "empty.log"
    empty.write_text("")
    assert main(["memory", "calibrate", str(empty)]) == 2
    # what calibrate reads, not the doctor's "nothing to diagnose"
    assert "nothing to calibrate from; accepted: a server's start-up log with its warm-up" in capsys.readouterr().err
    assert main(["memory", "calibrate", str(WARMUP_DOC), "--model", "bogus"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1, "costs": {"text_prefill_factor": -1}}')
    assert main(["memory", "plan", "--profile", str(bad)]) == 2
    assert "costs.text_prefill_factor" in capsys.readouterr().err
    assert main(["memory", "plan", "--profile", str(tmp_path / "missing.json")]) == 2


def test_bad_profiles_name_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    cases = [
        ("not json", "not JSON"),
        ('{"version": 9, "costs": {}}', "version-1"),
        ('{"version": 1, "costs": {}, "free_after_load_bytes": -5}', "free_after_load_bytes"),
        ('{"version": 1, "costs": {}, "measured_by": "tgi"}', "measured_by='tgi'; accepted: vllm-gaudi"),
    ]
    for text, needle in cases:
        path.write_text(text)
        with pytest.raises(ConfigError, match=needle):
            load_profile(path)

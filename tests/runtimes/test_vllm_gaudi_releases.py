"""vllm-gaudi's release lines: versions map to the line that ships them, and each line's own rules (read at its tag,
checked against its code by benchmarks/agreement/vllm_gaudi_releases.py) change the buckets as that release does."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json

import pytest

from vllm_hpu_mm.cli.main import main as cli
from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes import registry
from vllm_hpu_mm.runtimes.base import Runtime
from vllm_hpu_mm.runtimes.vllm_gaudi import model_from_env
from vllm_hpu_mm.runtimes.vllm_gaudi.common import BucketLookup, decode_buckets, prompt_buckets, strategy_resolution
from vllm_hpu_mm.runtimes.vllm_gaudi.config import config_from_env, effective_strategy
from vllm_hpu_mm.runtimes.vllm_gaudi.file_strategy import parse_bucket_file
from vllm_hpu_mm.runtimes.vllm_gaudi.releases import LINES, MAIN, TAGGED, line_of, parse_version, release_for
from vllm_hpu_mm.runtimes.vllm_gaudi.vision import default_vision_buckets, vision_table_entry, vision_warmup

SHAPE_32K = EngineShape(max_model_len=32768, max_num_seqs=256, max_num_batched_tokens=8192, block_size=128,
                        num_kv_blocks=8781)  # fmt: skip
WORST_32K = 256 * 32768 // 128  # every sequence at max_model_len


def _line(version: str) -> str:
    return line_of(version).name


@pytest.mark.parametrize(
    ("version", "line"),
    [
        ("0.11.2", "v0.11.2"),
        ("0.11.2.post1", "v0.11.2"),
        ("0.13.0", "v0.13.0 - v0.13.0.post1"),
        ("0.13.0.post1", "v0.13.0 - v0.13.0.post1"),
        ("0.14.0", "v0.13.0 - v0.13.0.post1"),
        ("0.14.1", "v0.14.1"),
        ("0.15.0", "v0.14.1"),
        ("0.15.1rc1", "v0.15.1rc1"),
        ("0.15.1rc2", "v0.15.1rc1"),
        ("0.15.1", "v0.15.1"),
        ("0.15.1.post1", "v0.15.1"),
        ("0.16.0rc0", "v0.16.0rc0"),
        ("0.16.0rc1", "v0.16.0rc1 - v0.17.0rc0"),
        ("0.16.0", "v0.16.0rc1 - v0.17.0rc0"),
        ("0.17.0rc0", "v0.16.0rc1 - v0.17.0rc0"),
        ("0.17.0rc1", "v0.17.0rc1 - v0.17.1rc1"),
        ("0.17.0", "v0.17.0rc1 - v0.17.1rc1"),
        ("0.17.1rc1", "v0.17.0rc1 - v0.17.1rc1"),
        ("0.17.1", "v0.17.1"),
        ("0.17.1.post1", "v0.17.1"),
        ("0.18.0rc0", "v0.18.0rc0"),
        ("0.18.0", "v0.18.0rc0"),
        ("0.18.1rc0", "v0.18.0rc0"),
        ("0.18.1rc1", "v0.18.1rc1"),
        ("0.19.0rc0", "v0.19.0rc0"),
        ("0.19.0", "v0.19.0 - v0.19.1.post1"),
        ("0.19.0.post1", "v0.19.0 - v0.19.1.post1"),
        ("v0.19.1.post1", "v0.19.0 - v0.19.1.post1"),
        ("0.20.0rc0", "v0.20.0rc0"),
        ("0.20.0", "v0.20.0rc0"),
        ("0.20.1rc0", "v0.20.1rc0"),
        ("0.20.1", "v0.20.1rc0"),
        ("0.21.0", "v0.21.0 - v0.24.0rc0"),
        ("0.23.1", "v0.21.0 - v0.24.0rc0"),
        ("0.24.0rc0", "v0.21.0 - v0.24.0rc0"),
        ("0.24.0", "v0.24.0"),
        ("0.25.1", "v0.24.0"),
        ("0.26.0rc0", "v0.26.0rc0 - v0.27.0rc0"),
        ("0.26.0", "v0.26.0rc0 - v0.27.0rc0"),
        ("0.27.0rc0", "v0.26.0rc0 - v0.27.0rc0"),
        ("0.27.0", "main"),
        ("0.28.0.dev12+g091bbadd", "main"),
        ("main", "main"),
    ],
)
def test_a_version_plans_as_its_line(version: str, line: str) -> None:
    assert _line(version) == line


@pytest.mark.parametrize("version", ["0.22.0", "0.23.1", "0.25.0", "0.26.1", "0.11.2.post1", "0.14.0", "0.15.1rc2"])
def test_a_named_release_that_was_never_tagged_is_refused_naming_the_tagged_ones(version: str) -> None:
    # vllm-project/vllm-gaudi tags jump v0.21.0 -> v0.24.0rc0 -> v0.24.0 -> v0.26.0rc0: no 0.22 - 0.23 or 0.25 exists
    assert line_of(version) is not MAIN  # an installed build of that version still has a line
    with pytest.raises(ConfigError, match=rf"vllm-gaudi=={version}: no vllm-gaudi release has it") as err:
        release_for(version)
    assert "0.21.0, 0.24.0rc0, 0.24.0" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("version", ["0.21.0", "v0.24.0", "0.24.0rc0", "0.19.0.post1", "0.27.0rc0", "0.11.2"])
def test_a_named_tagged_release_plans_as_its_line(version: str) -> None:
    assert release_for(version) is line_of(version)
    assert parse_version(version) in TAGGED


@pytest.mark.parametrize("version", ["0.27.0", "0.27.0rc1", "0.27.1", "0.28.0"])
def test_a_release_newer_than_every_tag_plans_as_main_pre_releases_too(version: str) -> None:
    # r11releases 5: 0.27.0rc1, past the newest tag v0.27.0rc0, was refused as a version between tags
    assert release_for(version) is MAIN
    assert "newer than the newest tag read, v0.27.0rc0" in registry.resolve(f"vllm-gaudi=={version}", "hpu").found


def test_a_release_newer_than_every_tag_plans_as_main_and_the_plan_says_so() -> None:
    assert release_for("0.27.0") is MAIN
    found = registry.resolve("vllm-gaudi==0.27.0", "hpu").found
    assert "newer than the newest tag read, v0.27.0rc0" in found
    assert "newer" not in registry.resolve("vllm-gaudi==0.27.0rc0", "hpu").found


def test_memory_plan_refuses_an_untagged_release_with_exit_2_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["memory", "plan", "--runtime", "vllm-gaudi==0.22.0"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert "vllm-gaudi==0.22.0: no vllm-gaudi release has it" in captured.err


def test_pre_releases_sort_before_their_release() -> None:
    assert parse_version("0.27.0rc0") < parse_version("0.27.0") < parse_version("0.27.0.post1")


@pytest.mark.parametrize(
    ("version", "why"),
    [
        ("0.12.0", "no vllm-gaudi tag lies between v0.11.2 and v0.13.0"),
        ("0.11.3", "no vllm-gaudi tag lies between"),
        ("0.11.2rc1", "no bucket file"),
        ("0.10.1", "no bucket file"),
        ("0.10.1", "older than the oldest release modelled, v0.11.2"),  # the fork's rule too (r6releases 4)
        ("0.10.1", r"^(?!.*asks its own code)"),  # nothing runs it to ask
        ("zero", "not a version"),
        ("9.9.9", "no vllm-gaudi release has it"),  # a version no release can have is not planned as main
        ("1.0.0rc1", "no vllm-gaudi release has it"),
    ],
)
def test_releases_not_modelled_are_refused_in_one_line(version: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why) as err:
        release_for(version)
    assert "accepted" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_planned_release_names_a_version_that_plans_as_its_line() -> None:
    # the model's version goes back through release_for (e.g. the serve report): v0.19.0rc0 must not become 0.19.0
    for line in LINES:
        if line is not MAIN and not line.not_modelled:
            version = model_from_env({}, None, line.tags[0]).version
            assert version is not None
            assert release_for(version) is line


def test_lines_are_newest_first_and_disjoint() -> None:
    firsts = [line.first for line in LINES]
    assert firsts == sorted(firsts, reverse=True)
    assert len(set(firsts)) == len(firsts)


def _decode(version: str, shape: EngineShape = SHAPE_32K, env: dict[str, str] | None = None) -> tuple:  # type: ignore[type-arg]
    return decode_buckets(config_from_env(env or {}, release_for(version)), shape)


def test_main_clamps_exponential_decode_blocks_to_three_times_the_kv_cache() -> None:
    # exponential.py @091bbadd (5c5402c3 #1700): min(worst, 3 x KV) without contiguous PA
    assert max(c for _, _, c in _decode("main")) == 3 * 8781


def test_before_main_exponential_decode_blocks_reach_the_worst_case() -> None:
    for version in ("0.27.0rc0", "0.26.0", "0.24.0", "0.21.0"):
        assert max(c for _, _, c in _decode(version)) == WORST_32K


def test_v0_24_adds_decode_steps_where_the_worst_case_exceeds_three_times_the_kv_cache() -> None:
    # v0.21.0 -> v0.24.0 "compensate for wider range": ceil(log2(65536 / 26343)) + 1 = 3 more range steps
    assert len(_decode("0.24.0")) > len(_decode("0.21.0"))
    small = dataclasses.replace(SHAPE_32K, num_kv_blocks=30000)  # worst < 3 x KV: no extra steps
    assert _decode("0.24.0", small) == _decode("0.21.0", small)


def test_v0_19_exponential_decode_blocks_follow_its_own_rule() -> None:
    # exponential.py @v0.19.0: max(min(worst, KV x seqs // 3), 3 x KV)
    shape = dataclasses.replace(SHAPE_32K, num_kv_blocks=500)
    assert max(c for _, _, c in _decode("0.19.0", shape)) == 500 * 256 // 3
    assert max(c for _, _, c in _decode("0.21.0", shape)) == WORST_32K


def test_v0_19_linear_clamps_its_decode_blocks_to_the_kv_cache_without_contiguous_pa() -> None:
    lin = {"VLLM_EXPONENTIAL_BUCKETING": "false"}
    # linear steps of the block size up to the clamped max: the last step at or below the 8781 KV blocks
    assert max(c for _, _, c in _decode("0.19.0", env=lin)) == 8781 // 128 * 128
    assert max(c for _, _, c in _decode("0.21.0", env=lin)) == WORST_32K


def test_before_v0_21_the_strategy_variable_takes_only_its_old_names() -> None:
    old = release_for("0.19.0")
    with pytest.raises(ConfigError, match="exponential_bucketing or linear_bucketing"):
        config_from_env({"VLLM_BUCKETING_STRATEGY": "lin"}, old)
    assert effective_strategy(config_from_env({"VLLM_BUCKETING_STRATEGY": "linear_bucketing"}, old)) == "exp"
    assert effective_strategy(config_from_env({"VLLM_EXPONENTIAL_BUCKETING": "false"}, old)) == "lin"
    assert effective_strategy(config_from_env({"VLLM_BUCKETING_STRATEGY": "lin"}, MAIN)) == "lin"


def test_before_v0_21_pad_variables_are_not_read() -> None:
    old = release_for("0.19.0")
    assert config_from_env({"VLLM_PROMPT_BS_BUCKET_PAD_MAX": "x"}, old).prompt_bs_pad_max is None
    with pytest.raises(ConfigError):
        config_from_env({"VLLM_PROMPT_BS_BUCKET_PAD_MAX": "x"}, MAIN)


def test_prompt_buckets_are_the_same_from_v0_19_on() -> None:
    # no line changed the prompt side between v0.19.0 and main (their code agrees:
    # benchmarks/agreement/vllm_gaudi_releases.py)
    first = prompt_buckets(config_from_env({}, MAIN), SHAPE_32K)
    for line in LINES:
        if line.first >= parse_version("0.19.0"):
            assert prompt_buckets(config_from_env({}, line), SHAPE_32K) == first


def test_before_v0_19_the_prompt_filter_bounds_query_plus_context() -> None:
    # common.py @67e4a6b1: query + ctx x block_size <= max_model_len; v0.19.0 (6e5d74b2 #1362) bounds each alone
    shape = EngineShape(max_model_len=4096, max_num_seqs=64, max_num_batched_tokens=2048, block_size=128,
                        num_kv_blocks=2000)  # fmt: skip

    def over(version: str) -> list[tuple[int, int, int]]:
        buckets = prompt_buckets(config_from_env({}, release_for(version)), shape)
        return [k for k in buckets if k[1] + k[2] * 128 > 4096]

    assert over("0.19.0")
    assert not over("0.18.1rc1")
    assert not over("0.19.0rc0")


def test_before_v0_19_exponential_decode_blocks_are_three_times_the_kv_cache() -> None:
    # exponential.py @67e4a6b1: 3 x KV without contiguous PA, whatever the worst case
    shape = dataclasses.replace(SHAPE_32K, num_kv_blocks=500)
    assert max(c for _, _, c in _decode("0.18.1rc1", shape)) == 3 * 500
    assert max(c for _, _, c in _decode("0.19.0", shape)) == 500 * 256 // 3
    contiguous = {"VLLM_CONTIGUOUS_PA": "true"}
    assert max(c for _, _, c in _decode("0.18.1rc1", shape, contiguous)) == 500


def test_v0_19_0rc0_caps_the_exponential_decode_block_steps() -> None:
    # exponential.py @9dffb979 (#1160): at most max(6, ceil(log2(256)) + 1) = 9 block steps, reverted in v0.19.0
    rc0 = {c for _, _, c in _decode("0.19.0rc0")}
    rc1 = {c for _, _, c in _decode("0.18.1rc1")}
    assert max(rc0) == max(rc1) == 3 * 8781
    assert len(rc0) < len(rc1)


def test_before_v0_19_hybrid_decode_contexts_are_floored_at_max_model_len() -> None:
    # common.py @67e4a6b1 mamba_decode_corrector: batch x floor(max_model_len / block_size); v0.19.0 dropped it
    shape = EngineShape(max_model_len=1000, max_num_seqs=4, max_num_batched_tokens=2048, block_size=128,
                        num_kv_blocks=4000, mamba_chunk_size=256)  # fmt: skip
    for env in ({}, {"VLLM_CONTIGUOUS_PA": "true"}):
        old = {(b, c) for b, _, c in _decode("0.18.1rc1", shape, env)}
        assert max(c for b, c in old if b == 1) == 1000 // 128
    assert max(c for b, _, c in _decode("0.19.0", shape) if b == 1) == -(-1000 // 128)


def test_before_v0_19_fallbacks_cap_every_context_at_the_largest_decode_bucket() -> None:
    def lookup(version: str) -> BucketLookup:
        return BucketLookup(config_from_env({}, release_for(version)), SHAPE_32K)

    # a prompt fallback: ceil((32768 - 1) / 128) = 256 blocks from v0.19.0; before, only the decode cap (26343)
    assert lookup("0.19.0").find_prompt(1, 100, 300)[2] == 256
    assert lookup("0.18.1rc1").find_prompt(1, 100, 300)[2] == 448  # calc_fallback_value(300, 32)
    # a decode key above every bucket: capped and found from v0.19.0; before, a fallback is appended each time
    new, old = lookup("0.19.0"), lookup("0.18.1rc1")
    for _ in range(2):
        new.find_decode(1, 10**6)
        old.find_decode(1, 10**6)
    assert not new.added
    assert len(old.added) == 2


def test_registry_reads_a_named_release() -> None:
    found = registry.resolve("vllm-gaudi==0.21.0", "hpu")
    assert found.runtime is Runtime.VLLM_GAUDI
    assert found.version == "0.21.0"
    assert "v0.21.0" in found.found


@pytest.mark.parametrize("name", ["vllm-fork==0.9", "auto==0.26.0", "vllm-gaudi==0.12.0", "vllm-gaudi==0.10.1"])
def test_registry_refuses_what_it_cannot_plan(name: str) -> None:
    with pytest.raises(ConfigError, match="accepted"):
        registry.resolve(name, "hpu")


def _serve(*argv: str) -> dict[str, object]:
    """``serve --dry-run --json`` with a given text graph budget (120: above the least a release before 0.19 needs
    under its own max_model_len filter, 117 here): these tests pin what each release is exported and
    told, not the budget search (tests/plan pins that), which takes several times longer."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli(["serve", "--dry-run", "--json", "--plan-text-graph-budget", "120", *argv]) == 0
    report: dict[str, object] = json.loads(out.getvalue())
    return report


QWEN_BUCKETS = (1600, 3136, 4096, 6400, 7744, 9216, 12544)
V0_24 = release_for("0.24.0")


def test_before_v0_26_every_vision_warm_up_step_batches_the_modality_limit() -> None:
    old = vision_warmup(QWEN_BUCKETS, None, {"image": 3, "video": 2}, release=V0_24).graphs
    assert len(old) == 70  # 35 guessed shapes per modality, as on main
    assert {(m, n) for m, _, _, n in old} == {("image", 3), ("video", 2)}
    new = vision_warmup(QWEN_BUCKETS, None, {"image": 3, "video": 2}).graphs
    assert {n for _, _, _, n in new} == {1}  # main: a guessed shape warms one item


def test_before_v0_26_only_the_first_limit_shape_is_warmed_and_it_comes_first() -> None:
    limit = {"image": {"count": 2, "width": 512, "height": 384}, "video": {"count": 1, "width": 640, "height": 480}}
    old = vision_warmup(QWEN_BUCKETS, None, limit, release=V0_24).graphs
    assert old[0] == ("image", 512, 384, 2)
    assert old[36] == ("video", 512, 384, 1)  # the list is shared: video warms image's shape too
    assert not any((w, h) == (640, 480) for _, w, h, _ in old)
    new = vision_warmup(QWEN_BUCKETS, None, limit).graphs
    assert new[35:37] == (("image", 512, 384, 2), ("image", 640, 480, 2))  # main: every one, after the guessed


def test_v0_17_1_refuses_unified_attention() -> None:
    # features.py @dafb170c declares unified_attn (VLLM_UNIFIED_ATTN); 22264a62 #1226 removed it for v0.18.1rc1
    with pytest.raises(ConfigError, match=r"VLLM_UNIFIED_ATTN.*not modelled"):
        config_from_env({"VLLM_UNIFIED_ATTN": "true"}, release_for("0.17.1"))
    assert config_from_env({"VLLM_UNIFIED_ATTN": "false"}, release_for("0.17.1")).release.name == "v0.17.1"
    config_from_env({"VLLM_UNIFIED_ATTN": "true"}, release_for("0.18.1rc1"))  # not read there


def test_v0_17_1_rounds_hybrid_prompt_queries_even_for_a_default_chunk_size() -> None:
    # common.py @dafb170c rounds to the mamba chunk whenever there is one; from 25a31874 #1153 only an explicit one
    shape = EngineShape(max_model_len=4096, max_num_seqs=8, max_num_batched_tokens=2048, block_size=128,
                        num_kv_blocks=2000, mamba_chunk_size=256)  # fmt: skip

    def queries(version: str) -> set[int]:
        return {q for _, q, _ in prompt_buckets(config_from_env({}, release_for(version)), shape)}

    assert all(q % 256 == 0 for q in queries("0.17.1"))
    assert any(q % 256 for q in queries("0.18.1rc1"))


def test_v0_17_1_s_vision_table_has_no_qwen3_5() -> None:
    # vision.py @dafb170c: qwen3_5 came with 25a31874 (#1153); unlisted models are batch based 1, 2, 4, 8
    assert vision_table_entry("qwen3_5", release_for("0.17.1")) == (True, (1, 2, 4, 8))
    assert default_vision_buckets("qwen3_5", release_for("0.18.1rc1")) == (196, 256, 441, 480, 576, 900, 1156)
    assert default_vision_buckets("qwen2_5_vl", release_for("0.17.1")) == QWEN_BUCKETS


def test_before_v0_19_the_limit_shape_is_the_first_warmed_modality_s_only() -> None:
    # warmup_multimodal_graphs @67e4a6b1: the search stops at image (warmed, no shape); v0.19.0 goes on to video
    limit = {"image": {"count": 2}, "video": {"count": 1, "width": 640, "height": 480}}
    assert vision_warmup(QWEN_BUCKETS, None, limit, release=V0_24).graphs[0] == ("image", 640, 480, 2)
    old = vision_warmup(QWEN_BUCKETS, None, limit, release=release_for("0.18.1rc1")).graphs
    assert len(old) == 70
    assert not any((w, h) == (640, 480) for _, w, h, _ in old)


def test_before_v0_26_vllm_multimodal_resolutions_is_not_read() -> None:
    old = vision_warmup(QWEN_BUCKETS, "1024x768,not-a-shape", {"image": 1}, release=V0_24)
    assert not old.fails
    assert len(old.graphs) == 35
    with pytest.raises(ConfigError, match="VLLM_MULTIMODAL_RESOLUTIONS"):
        vision_warmup(QWEN_BUCKETS, "1024x768,not-a-shape", {"image": 1})


def test_before_v0_26_the_vision_table_has_no_native_resolution_towers() -> None:
    assert default_vision_buckets("qwen3_5", V0_24) == (196, 256, 441, 480, 576, 900, 1156)
    assert default_vision_buckets("qwen3_5") == ()
    assert vision_table_entry("kimi_k25", V0_24) == (True, (1, 2, 4, 8))  # unlisted: batch based
    assert vision_table_entry("gemma4") == (False, ())


# one release per line: (version, whether its vision.py reads VLLM_MULTIMODAL_RESOLUTIONS)
@pytest.mark.parametrize(
    ("version", "reads_resolutions"),
    [
        ("0.13.0", False),
        ("0.14.1", False),
        ("0.16.0rc0", False),
        ("0.19.1", False),
        ("0.21.0", False),
        ("0.24.0", False),
        ("0.26.0", True),
        ("main", True),
    ],
)
def test_serve_exports_only_what_the_release_reads(version: str, reads_resolutions: bool) -> None:
    report = _serve("--plan-runtime", f"vllm-gaudi=={version}")
    env = report["environment"]
    assert isinstance(env, dict)
    # every modelled release reads the bucket file and the vision buckets (both from v0.11.2)
    assert "VLLM_BUCKETING_FROM_FILE" in env
    assert "VLLM_MULTIMODAL_BUCKETS" in env
    assert ("VLLM_MULTIMODAL_RESOLUTIONS" in env) is reads_resolutions
    assert "VLLM_BUCKETING_STRATEGY" not in env
    notes = " ".join(map(str, report.get("notes", [])))  # type: ignore[call-overload]
    if not reads_resolutions:
        assert "reads no VLLM_MULTIMODAL_RESOLUTIONS" in notes  # what it cannot honour is said


def test_serve_refuses_a_strategy_the_release_cannot_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_BUCKETING_STRATEGY", "pad")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert cli(["serve", "--dry-run", "--plan-runtime", "vllm-gaudi==0.19.0"]) == 2
    assert "exponential_bucketing or linear_bucketing" in err.getvalue()


# --- main snapshots between v0.19.0 and v0.21.0: v0.20.0rc0 (@8a9d6985) and v0.20.1rc0 (@8ddfdc9e) ----------------


@pytest.mark.parametrize("version", ["0.20.0rc0", "0.20.1rc0"])
def test_v0_20_snapshots_read_the_strategy_variable(version: str) -> None:
    # features.py @8a9d6985 / @8ddfdc9e: VLLM_BUCKETING_STRATEGY = exp | lin | pad (c2641a62 #762), as v0.21.0
    assert effective_strategy(config_from_env({"VLLM_BUCKETING_STRATEGY": "pad"}, release_for(version))) == "pad"
    assert config_from_env({"VLLM_PROMPT_BS_BUCKET_PAD_MAX": "8"}, release_for(version)).prompt_bs_pad_max == 8
    with pytest.raises(ConfigError, match="exponential_bucketing or linear_bucketing"):
        config_from_env({"VLLM_BUCKETING_STRATEGY": "pad"}, release_for("0.19.1.post1"))


def test_v0_20_1rc0_exponential_decode_blocks_are_three_times_the_kv_cache() -> None:
    # exponential.py @8ddfdc9e: 3 x KV without contiguous PA (main before #1362's v0.19 rule and before v0.21.0's
    # worst case); its linear strategy still clamps to the KV blocks, as v0.19.0's
    shape = dataclasses.replace(SHAPE_32K, num_kv_blocks=500)
    assert max(c for _, _, c in _decode("0.20.1rc0", shape)) == 3 * 500
    assert max(c for _, _, c in _decode("0.19.1", shape)) == 500 * 256 // 3
    assert max(c for _, _, c in _decode("0.21.0", shape)) == WORST_32K
    lin = {"VLLM_BUCKETING_STRATEGY": "lin"}
    assert max(c for _, _, c in _decode("0.20.1rc0", env=lin)) == 8781 // 128 * 128
    assert max(c for _, _, c in _decode("0.21.0", env=lin)) == WORST_32K
    assert prompt_buckets(config_from_env({}, release_for("0.20.1rc0")), SHAPE_32K) == prompt_buckets(
        config_from_env({}, MAIN), SHAPE_32K
    )


def test_v0_20_0rc0_keeps_v0_19_0rc0_s_bucketing() -> None:
    # common.py / exponential.py @8a9d6985 are v0.19.0rc0's (query + ctx filter, #1160's capped block steps)
    for env in ({}, {"VLLM_CONTIGUOUS_PA": "true"}, {"VLLM_EXPONENTIAL_BUCKETING": "false"}):
        assert _decode("0.20.0rc0", env=env) == _decode("0.19.0rc0", env=env)
        assert prompt_buckets(config_from_env(env, release_for("0.20.0rc0")), SHAPE_32K) == prompt_buckets(
            config_from_env(env, release_for("0.19.0rc0")), SHAPE_32K
        )
    assert len(_decode("0.20.0rc0")) < len(_decode("0.20.1rc0"))


# --- v0.17.0rc1 - v0.18.0rc0 (extension/bucketing @ bb358250) and v0.16.0rc1 - v0.17.0rc0 (@ 511f48f5) -------------


def test_rc_numbers_of_one_version_are_told_apart() -> None:
    ordered = ("0.17.0rc0", "0.17.0rc1", "0.17.0", "0.17.0.post1")
    assert [parse_version(v) for v in ordered] == sorted(parse_version(v) for v in ordered)
    assert len({parse_version(v) for v in ordered}) == 4
    assert parse_version("0.28.0.dev12") < parse_version("0.28.0rc0")
    assert parse_version("0.16.0rc1") == (0, 16, 0, -999)


def test_v0_17_0rc1_line_decode_blocks_are_the_kv_cache_plus_one_block_size() -> None:
    # exponential.py @715451c2: KV + block_size without contiguous PA, the step count of the KV blocks alone
    shape = dataclasses.replace(SHAPE_32K, num_kv_blocks=500)
    for version in ("0.18.0rc0", "0.17.1rc1", "0.17.0rc1"):
        blocks = {c for _, _, c in _decode(version, shape)}
        assert max(blocks) == 500 + 128
    assert max(c for _, _, c in _decode("0.17.1", shape)) == 3 * 500  # #1252: 3 x KV
    assert max(c for _, _, c in _decode("0.17.0rc1", shape, {"VLLM_CONTIGUOUS_PA": "true"})) == 500


def test_v0_16_line_decode_blocks_are_a_quarter_of_kv_times_sequences() -> None:
    # exponential.py @77551b5e (before b631d73f #1091): min(floor worst case, KV x seqs // 4)
    small = dataclasses.replace(SHAPE_32K, num_kv_blocks=500)
    assert max(c for _, _, c in _decode("0.17.0rc0", small)) == 500 * 256 // 4
    assert max(c for _, _, c in _decode("0.16.0", SHAPE_32K)) == WORST_32K  # 8781 x 64 is above the worst case
    assert max(c for _, _, c in _decode("0.16.0rc1", small, {"VLLM_CONTIGUOUS_PA": "true"})) == 500


def test_fallback_contexts_before_1124_are_capped_at_the_kv_cache() -> None:
    def lookup(version: str) -> BucketLookup:
        return BucketLookup(config_from_env({}, release_for(version)), SHAPE_32K)

    # a prompt fallback of 20000 context blocks (calc_fallback_value: 20608): v0.17.1 caps it at the largest decode
    # bucket (26343), v0.17.0rc1 at KV + block_size, v0.16.0 at KV
    assert lookup("0.17.1").find_prompt(1, 100, 20000)[2] == 20608
    assert lookup("0.17.1rc1").find_prompt(1, 100, 20000)[2] == 8781 + 128
    assert lookup("0.16.0").find_prompt(1, 100, 20000)[2] == 8781
    old = lookup("0.17.0rc1")
    for _ in range(2):
        old.find_decode(1, 10**6)
    assert [b for _, b in old.added] == [(1, 1, 8781 + 128)] * 2  # not capped first, appended each time


def test_before_1207_a_fallback_query_is_rounded_in_steps_of_32_whatever_the_mamba_chunk() -> None:
    shape = dataclasses.replace(SHAPE_32K, mamba_chunk_size=256)

    def query(version: str) -> int:
        return BucketLookup(config_from_env({}, release_for(version)), shape).fallback(1, 100, 0, is_prompt=True)[1]

    assert query("0.17.1") == 1280  # b6e3adf1 #1207: calc_fallback_value(100, max(32, 256))
    assert query("0.17.1rc1") == 160  # calc_fallback_value(100, 32)


def test_before_1245_bucket_file_lines_are_evaluated_and_bad_ones_skipped() -> None:
    text = "(1, 128, 0)\n(1, 1, range(512))\n(2, 256, undefined)\n[1, 2, 3]\n(1, 1, 2 * 64)\n"
    old = config_from_env({}, release_for("0.17.1rc1"))
    cfg = dataclasses.replace(old, from_file="b.txt", file_text=text)
    assert prompt_buckets(cfg, SHAPE_32K) == ((1, 128, 0),)
    # (1, 1, 0) dropped (batch above blocks), the rest capped at 1 x ceil(32768 / 128) = 256 blocks
    assert {c for _, _, c in decode_buckets(cfg, SHAPE_32K)} == set(range(1, 257))
    new = dataclasses.replace(config_from_env({}, release_for("0.17.1")), from_file="b.txt", file_text=text)
    with pytest.raises(ConfigError, match="line 2"):
        prompt_buckets(new, SHAPE_32K)
    odd = dataclasses.replace(cfg, file_text="(1, 1, [c for c in range(4)])\n")
    with pytest.raises(ConfigError, match="eval"):
        decode_buckets(odd, SHAPE_32K)


V0_18_0RC0 = release_for("0.18.0rc0")


def test_v0_17_0rc1_line_warms_one_item_a_step() -> None:
    # _get_mm_dummy_batch @715451c2 reads vLLM's integer limit (26751a40 #1085): it has no count, so one item
    steps = vision_warmup(QWEN_BUCKETS, None, {"image": 3, "video": 2}, release=V0_18_0RC0).graphs
    assert len(steps) == 70
    assert {(m, n) for m, _, _, n in steps} == {("image", 1), ("video", 1)}
    assert {
        n for _, _, _, n in vision_warmup(QWEN_BUCKETS, None, {"image": 3}, release=release_for("0.17.1")).graphs
    } == {3}


def test_v0_17_0rc1_line_reads_no_width_or_height_from_the_limit() -> None:
    limit: dict[str, int | dict[str, int]] = {"image": {"count": 3, "width": 512, "height": 384}}
    steps = vision_warmup(QWEN_BUCKETS, None, limit, release=V0_18_0RC0).graphs
    assert len(steps) == 35
    assert not any((w, h) == (512, 384) for _, w, h, _ in steps)
    assert vision_warmup(QWEN_BUCKETS, None, limit, release=release_for("0.17.1")).graphs[0] == ("image", 512, 384, 3)


def test_v0_17_0rc1_line_warms_image_unless_its_limit_is_0() -> None:
    # vLLM's integer limit of an image not named is 999: warmed; v0.17.1 warms only a named one
    assert len(vision_warmup(QWEN_BUCKETS, None, None, release=V0_18_0RC0).graphs) == 35
    assert not vision_warmup(QWEN_BUCKETS, None, None, release=release_for("0.17.1")).graphs
    assert not vision_warmup(QWEN_BUCKETS, None, {"image": 0}, release=V0_18_0RC0).graphs
    # the limit search indexes the model's limits by image: a model without image fails there
    assert vision_warmup(QWEN_BUCKETS, None, {"image": 1}, modalities=("video",), release=V0_18_0RC0).fails


def test_v0_16_line_warms_as_v0_17_1_and_has_no_ernie_in_its_vision_table() -> None:
    limit = {"image": {"count": 2}, "video": {"count": 1, "width": 640, "height": 480}}
    assert vision_warmup(QWEN_BUCKETS, None, limit, release=release_for("0.16.0")) == vision_warmup(
        QWEN_BUCKETS, None, limit, release=release_for("0.17.1")
    )
    assert vision_table_entry("ernie4_5_moe_vl", release_for("0.17.0rc0")) == (True, (1, 2, 4, 8))
    assert vision_table_entry("ernie4_5_moe_vl", release_for("0.17.0rc1")) == (False, QWEN_BUCKETS)


def test_v0_15_1_s_vision_table_lacks_the_models_main_added_for_v0_16() -> None:
    # vision.py @5d6a2db3: no ovis (#846), pixtral / mistral3 (#871) nor deepseek_ocr (#954); ovis2.5 is listed
    v0_15_1, v0_16 = release_for("0.15.1"), release_for("0.16.0")
    for model in ("ovis", "pixtral", "mistral3", "deepseek_ocr"):
        assert vision_table_entry(model, v0_15_1) == (True, (1, 2, 4, 8))
        assert not vision_table_entry(model, v0_16)[0]
    assert default_vision_buckets("ovis2.5", v0_15_1) == (784, 1600, 3136, 4096, 6400, 7744, 9216, 12544)
    assert _decode("0.15.1") == _decode("0.16.0")


def test_v0_14_1_edge_contexts_ignore_vllm_prompt_ctx_bucket_max() -> None:
    # common.py @c4ecd716: an edge context (what still fits max_model_len) replaces the largest one whenever it is
    # not negative; #980 (1e012ecf, v0.15.1) only below VLLM_PROMPT_CTX_BUCKET_MAX
    env = {"VLLM_PROMPT_CTX_BUCKET_MAX": "200"}

    def contexts(version: str) -> set[int]:
        return {c for _, _, c in prompt_buckets(config_from_env(env, release_for(version)), SHAPE_32K)}

    assert max(contexts("0.14.1")) > 200
    assert max(contexts("0.15.1")) < 200
    assert prompt_buckets(config_from_env({}, release_for("0.14.1")), SHAPE_32K) == prompt_buckets(
        config_from_env({}, release_for("0.15.1")), SHAPE_32K
    )


@pytest.mark.parametrize("version", ["main", "0.17.1", "0.17.1rc1"])
def test_a_sliding_window_fallback_rounds_a_long_query_to_the_slice_size(version: str) -> None:
    env = {"PT_HPU_SDPA_QKV_SLICE_MODE_FWD": "1", "VLLM_FUSEDSDPA_SLIDE_THLD": "4096"}
    lookup = BucketLookup(config_from_env(env, release_for(version)), SHAPE_32K)
    assert lookup.fallback(1, 5000, 0, is_prompt=True)[1] == 5120  # ceil(5000 / 1024) x 1024, not the step rule
    assert lookup.fallback(1, 3000, 0, is_prompt=True)[1] == 3360  # below the threshold: calc_fallback_value(3000, 32)


def test_an_evaluated_range_too_long_for_an_index_is_one_line_not_a_crash() -> None:
    with pytest.raises(ConfigError, match="a range longer than any index"):
        parse_bucket_file("(range(10**64), 1, 1)\n(1, 1, 1)\n", evaluate=True)


# --- v0.15.1rc1 and v0.16.0rc0 (extension/bucketing @ 37baba9d) ----------------------------------------------------

V0_16_0RC0 = release_for("0.16.0rc0")
SHAPE_8K = EngineShape(max_model_len=8192, max_num_seqs=64, max_num_batched_tokens=2048, block_size=128,
                       num_kv_blocks=2000)  # fmt: skip
SHAPE_4K = dataclasses.replace(SHAPE_8K, max_model_len=4096)


def _prompt(version: str, shape: EngineShape, env: dict[str, str] | None = None) -> tuple:  # type: ignore[type-arg]
    return prompt_buckets(config_from_env(env or {}, release_for(version)), shape)


def test_37baba9d_densifies_long_context_exponential_prompt_ranges() -> None:
    # exponential.py @37baba9d, max_model_len 8192: the query range (128 ... 2048, 11 values) takes 5 geometric
    # values up to 2048 / 11 and 6 equal steps to 2048; #915 (94643f9d) spaces all 11 geometrically (the figures
    # are what each tag's own code generates)
    assert sorted({q for _, q, _ in _prompt("0.16.0rc0", SHAPE_8K)}) == [128, 256, 512, 896, 1152, 1536, 1792, 2048]
    assert sorted({q for _, q, _ in _prompt("0.14.1", SHAPE_8K)}) == [128, 256, 384, 512, 768, 896, 1280, 1664, 2048]
    assert (len(_prompt("0.16.0rc0", SHAPE_8K)), len(_prompt("0.14.1", SHAPE_8K))) == (64, 72)
    # decode ranges are not densified (a fresh strategy object is not long-context)
    assert _decode("0.16.0rc0", SHAPE_8K) == _decode("0.14.1", SHAPE_8K)


def test_37baba9d_adds_edge_contexts_and_the_long_context_maximum_at_every_max_model_len() -> None:
    # common.py / exponential.py @37baba9d at max_model_len 4096: the context max is (4096 - 2048) // 128 = 16 and
    # each query's largest context is what still fits (4096 - query) // 128; v0.14.1 (#918) does both only from 8192
    rc0, old = set(_prompt("0.16.0rc0", SHAPE_4K)), set(_prompt("0.14.1", SHAPE_4K))
    edges = {(1, 256, 30), (1, 384, 29), (1, 512, 28), (1, 768, 26), (1, 896, 25), (1, 1280, 22), (1, 1664, 19)}
    assert rc0 - old == edges
    assert old - rc0 == {(1, q, 16) for q in (128, 256, 384, 512, 768, 896, 1280, 1664)}


def test_37baba9d_warms_vllms_own_dummy_image_once_per_vision_bucket() -> None:
    # warmup_multimodal_graphs @37baba9d: per bucket one step of vLLM's dummy image (Qwen2.5-VL's largest,
    # 3584 x 3584), one item; video is not warmed; image is warmed whatever its limit
    steps = vision_warmup(QWEN_BUCKETS, "1024x768", {"image": 3, "video": 2}, release=V0_16_0RC0).graphs
    assert steps == (("image", 3584, 3584, 1),) * 7
    assert vision_warmup(QWEN_BUCKETS, None, None, release=V0_16_0RC0).graphs == steps
    assert vision_warmup(QWEN_BUCKETS, None, {"image": 0}, release=V0_16_0RC0).graphs == steps
    assert not vision_warmup(QWEN_BUCKETS, None, {"image": 0, "video": 0}, release=V0_16_0RC0).warmed  # text-only
    # a smaller width/height in the limit shrinks that one image (vLLM's dummy options); the buckets never size it
    limit: dict[str, int | dict[str, int]] = {"image": {"count": 2, "width": 512, "height": 384}}
    assert set(vision_warmup(QWEN_BUCKETS, None, limit, release=V0_16_0RC0).graphs) == {("image", 512, 384, 1)}
    # batch based (gemma-3): five steps per bucket, each the bucket's count of Gemma 3's 896 x 896 image
    gemma = vision_warmup((1, 2, 4, 8), None, {"image": 4}, "gemma-3", release=V0_16_0RC0).graphs
    assert gemma == tuple(("image", 896, 896, b) for b in (1, 2, 4, 8) for _ in range(5))
    assert vision_warmup(None, None, {"image": 1}, release=V0_16_0RC0).fails


def test_37baba9d_lists_qwen3_vl_with_visionarena_buckets() -> None:
    assert default_vision_buckets("qwen3_vl", V0_16_0RC0)[-1] == 131076
    assert default_vision_buckets("qwen3_vl", release_for("0.14.1")) == (196, 256, 441, 480, 576, 900, 1156)


def test_serve_says_a_dummy_image_release_cannot_be_steered_and_adds_no_limit() -> None:
    report = _serve("--plan-runtime", "vllm-gaudi==0.16.0rc0")
    notes = " ".join(map(str, report.get("notes", [])))  # type: ignore[call-overload]
    assert "dummy image once per vision bucket" in notes
    assert "cannot steer it" in notes
    assert "--limit-mm-per-prompt" not in json.dumps(report.get("args", []))


# --- v0.13.0 - v0.13.0.post1 (extension/bucketing @ 15eb06d1) ------------------------------------------------------

V0_13_0 = release_for("0.13.0")


def test_v0_13_decode_blocks_stop_at_the_kv_cache_rounded_up_to_the_batch_step() -> None:
    # exponential.py @de3d735d: min(floor worst case, KV) = 8781 blocks, and its range keeps the last value rounded
    # up to the step of 256 (8960; 4d05a35e #795 clamped it); v0.14.1 (#818) reaches the worst case
    assert max(c for _, _, c in _decode("0.13.0")) == 8960
    assert max(c for _, _, c in _decode("0.14.1")) == WORST_32K
    contiguous = {"VLLM_CONTIGUOUS_PA": "true", "VLLM_PREFIX_CACHING": "false"}
    assert max(c for _, _, c in _decode("0.13.0", env=contiguous)) == 8781  # contiguous PA takes bmax itself
    assert (len(_decode("0.13.0")), len(_decode("0.14.1"))) == (89, 83)


def test_v0_13_has_no_long_context_edge_contexts() -> None:
    # common.py @de3d735d has no edge contexts (c799e577 #739): at 32k a query of 8192 keeps the range's contexts
    def top(version: str) -> list[int]:
        return sorted({c for _, q, c in _prompt(version, SHAPE_32K) if q == 8192})[-3:]

    assert top("0.13.0") == [32, 64, 128]
    assert top("0.14.1") == [52, 100, 192]
    assert (len(_prompt("0.13.0", SHAPE_32K)), len(_prompt("0.14.1", SHAPE_32K))) == (109, 120)


def test_v0_13_fallback_batches_are_not_capped_at_max_num_seqs() -> None:
    small = dataclasses.replace(SHAPE_32K, max_num_seqs=4)

    def batch(version: str) -> int:
        return BucketLookup(config_from_env({}, release_for(version)), small).fallback(7, 128, 0, is_prompt=True)[0]

    assert batch("0.13.0") == 8  # calc_fallback_value(7, 2)
    assert batch("0.14.1") == 4  # 38558ede #816


def test_v0_13_ignores_the_mamba_chunk() -> None:
    shape = EngineShape(max_model_len=4096, max_num_seqs=8, max_num_batched_tokens=2048, block_size=128,
                        num_kv_blocks=2000, mamba_chunk_size=256, mamba_chunk_size_is_explicit=True)  # fmt: skip
    assert any(q % 256 for _, q, _ in _prompt("0.13.0", shape))
    assert all(q % 256 == 0 for _, q, _ in _prompt("0.14.1", shape))


def test_v0_13_warms_the_dummy_image_at_a_square_per_bucket() -> None:
    # _get_mm_dummy_batch @de3d735d: int(sqrt(patches)) x int(patches / that) patches of 14 pixels, one image,
    # whatever the limit's width/height (figures from the tag's own warm-up run by the driver)
    limit: dict[str, int | dict[str, int]] = {"image": {"count": 2, "width": 512, "height": 384}}
    steps = vision_warmup(QWEN_BUCKETS, None, limit, release=V0_13_0).graphs
    sides = (560, 784, 896, 1120, 1232, 1344, 1568)
    assert steps == tuple(("image", s, s, 1) for s in sides)
    assert vision_warmup(QWEN_BUCKETS, None, None, release=V0_13_0).graphs == steps
    gemma = vision_warmup((1, 2), None, {"image": 4}, "gemma-3", release=V0_13_0).graphs
    assert gemma == tuple(("image", 896, 896, b) for b in (1, 2) for _ in range(5))


# --- v0.11.2 (f9b64469; the first with VLLM_BUCKETING_FROM_FILE) ------------------------------------------------------
# Figures are what the tag's own code generates, run by benchmarks/agreement/vllm_gaudi_driver.py at SHAPE_32K.

V0_11_2 = release_for("0.11.2")


def test_v0_11_2_spaces_a_range_minimum_of_one_from_itself() -> None:
    # exponential.py @f9b64469 (before 955914b0 #645): the batch ranges (1, 2, ...) start at 2 and the decode blocks
    # (1, max_num_seqs, ...) at 256; #645 starts both at the step and adds 1 back
    decode = _decode("0.11.2")
    assert sorted({b for b, _, _ in decode}) == [2, 4, 8, 16, 32, 64, 128, 256]
    assert sorted({c for _, _, c in decode})[:6] == [256, 512, 768, 1024, 1280, 2048]
    assert (len(decode), len(_decode("0.13.0"))) == (45, 89)
    assert 1 in {b for b, _, _ in _decode("0.13.0")}
    # nor does VLLM_PROMPT_QUERY_BUCKET_MIN=1 bring a query of 1: the query minimum is the block size
    env = {"VLLM_PROMPT_QUERY_BUCKET_MIN": "1"}
    old = prompt_buckets(config_from_env(env, V0_11_2), SHAPE_32K)
    assert (len(old), min(q for _, q, _ in old)) == (109, 128)
    assert min(q for _, q, _ in prompt_buckets(config_from_env(env, V0_13_0), SHAPE_32K)) == 1


def test_v0_11_2_adds_no_speculative_decoding_buckets_and_takes_one_token_at_most() -> None:
    # common.py @f9b64469 has no generate_spec_decode_buckets (b8515d5f #624); its runner refuses more than one
    # speculative token at start-up (NotImplementedError)
    one = dataclasses.replace(SHAPE_32K, num_speculative_tokens=1)
    assert _decode("0.11.2", one) == _decode("0.11.2")
    assert len(_decode("0.13.0", one)) > len(_decode("0.13.0"))
    with pytest.raises(ConfigError, match="refuses more than one speculative token"):
        _decode("0.11.2", dataclasses.replace(SHAPE_32K, num_speculative_tokens=3))


def test_v0_11_2_looks_its_vision_buckets_up_by_the_model_s_path_and_batches_every_tower() -> None:
    # hpu_model_runner.py @f9b64469 hands vision.py model_config.model; its manager is batch based whatever the
    # table says (35fbcaea #643, e2694850 #700 changed both)
    ovis = (784, 1600, 3136, 4096, 6400, 7744, 9216, 12544)
    assert vision_table_entry("ovis2_5", V0_11_2, model="AIDC-AI/Ovis2.5-9B") == (True, ovis)
    assert vision_table_entry("qwen2_5_vl", V0_11_2, model="Qwen/Qwen2.5-VL-7B-Instruct") == (True, (1, 2, 4, 8))
    assert vision_table_entry("qwen2_5_vl", V0_13_0) == (False, QWEN_BUCKETS)
    with pytest.raises(ConfigError, match="model's path"):
        vision_table_entry("qwen2_5_vl", V0_11_2)


def test_v0_11_2_warms_each_bucket_s_count_of_every_modality_s_dummy_item() -> None:
    # warmup_multimodal_graphs @f9b64469: image then video, whatever their limits, each bucket's count of vLLM's
    # dummy item (Qwen2.5-VL's largest, 3584 x 3584; the video's shrunk to its limit's 640 x 480)
    buckets = default_vision_buckets("qwen2_5_vl", V0_11_2, model="Qwen/Qwen2.5-VL-7B-Instruct")
    limit: dict[str, int | dict[str, int]] = {"image": 2, "video": {"count": 1, "width": 640, "height": 480}}
    steps = vision_warmup(buckets, None, limit, release=V0_11_2).graphs
    assert steps == (*(("image", 3584, 3584, b) for b in (1, 2, 4, 8)), *(("video", 640, 480, b) for b in (1, 2, 4, 8)))
    # an image limit of 0: vLLM refuses the dummy image (ValueError) and start-up fails
    assert vision_warmup(buckets, None, {"image": 0}, release=V0_11_2).fails


def test_serve_plans_v0_11_2_s_vision_passes_in_images_and_adds_no_limit() -> None:
    report = _serve("--plan-runtime", "vllm-gaudi==0.11.2")
    env = report["environment"]
    assert isinstance(env, dict)
    assert "VLLM_BUCKETING_FROM_FILE" in env
    assert "VLLM_MULTIMODAL_RESOLUTIONS" not in env
    assert "--limit-mm-per-prompt" not in json.dumps(report.get("args", []))
    notes = " ".join(map(str, report.get("notes", [])))  # type: ignore[call-overload]
    assert "video included" in notes or "every modality" in notes
    # its buckets are images per pass, and so is the fix for a pool they do not fit (not patches)
    plan = report["plan"]
    assert isinstance(plan, dict)
    fixes = [str(w.get("fix")) for w in plan["warnings"] if "drop buckets" in str(w.get("fix"))]
    assert fixes
    assert all("images per pass" in f for f in fixes)


@pytest.mark.parametrize("version", ["0.16.0rc0", "0.15.1rc1", "0.13.0", "0.26.0rc0", None])
def test_the_plan_says_where_a_release_warms_vllms_dummy_image_once_per_vision_bucket(version: str | None) -> None:
    # E16: docs/memory-plan.md promises it for v0.16.0rc0, v0.15.1rc1 and v0.13.x; `memory plan` prints this note.
    model = registry.model_for(Runtime.VLLM_GAUDI, {}, version=version)
    note = model.vision_bucketing("qwen2_5_vl").note
    said = "warms vLLM's own dummy image once per vision bucket" in note
    assert said == (release_for(version).mm_warmup in ("dummy", "options"))
    assert said == (version in ("0.16.0rc0", "0.15.1rc1", "0.13.0"))


@pytest.mark.parametrize(("version", "qwen2_5_vl"), [("0.11.2", False), ("0.13.0", False), ("0.13.0.post1", False),
                                                     ("0.14.1", True), ("0.19.0", True), (None, True)])  # fmt: skip
def test_the_fp32_softmax_default_and_its_citation_follow_the_release_planned_for(
    version: str | None, qwen2_5_vl: bool
) -> None:
    # r2releases 14a: v0.13.0 was planned with main's rule, cited @091bbadd; its features.py (line 69) names qwen2 only
    traits = model_from_env({}, version=version).traits
    assert traits.fp32_softmax_for("qwen2_5_vl") is qwen2_5_vl
    assert traits.fp32_softmax_for("qwen2")
    commit = (release_for(version) if version else MAIN).commit
    assert f"extension/features.py @ {commit}" in traits.fp32_softmax_note


def test_the_deprecated_exponential_variable_is_named_where_it_overrides_the_strategy_a_release_was_given() -> None:
    # v0.20.0rc0 on (common.py get_bucketing_strategy): a set VLLM_EXPONENTIAL_BUCKETING replaces the named strategy
    v0_26 = release_for("0.26.0")
    said = strategy_resolution(config_from_env({"VLLM_BUCKETING_STRATEGY": "pad", "VLLM_EXPONENTIAL_BUCKETING": "1"},
                                               v0_26))  # fmt: skip
    assert said is not None
    assert said.startswith("VLLM_EXPONENTIAL_BUCKETING (read as true: exp) overrides VLLM_BUCKETING_STRATEGY=pad")
    lin = strategy_resolution(config_from_env({"VLLM_EXPONENTIAL_BUCKETING": "false"}, v0_26))
    assert "overrides the default VLLM_BUCKETING_STRATEGY=exp" in (lin or "")
    # the same strategy either way, or only the name given: nothing is resolved
    assert strategy_resolution(config_from_env({"VLLM_BUCKETING_STRATEGY": "exp", "VLLM_EXPONENTIAL_BUCKETING": "1"},
                                               v0_26)) is None  # fmt: skip
    assert strategy_resolution(config_from_env({"VLLM_BUCKETING_STRATEGY": "pad"}, v0_26)) is None
    # before: VLLM_EXPONENTIAL_BUCKETING alone picks, the strategy name is read nowhere
    old = strategy_resolution(config_from_env({"VLLM_BUCKETING_STRATEGY": "linear_bucketing"}, release_for("0.19.0")))
    assert (old or "").startswith("VLLM_EXPONENTIAL_BUCKETING (unset: exp) wins over VLLM_BUCKETING_STRATEGY=linear")
    # a bucket file of the user's wins over both; ours (planned) is no setting of theirs
    filed = config_from_env({"VLLM_BUCKETING_FROM_FILE": "b.txt", "VLLM_EXPONENTIAL_BUCKETING": "0"}, v0_26)
    assert "wins over VLLM_EXPONENTIAL_BUCKETING" in (strategy_resolution(filed) or "")
    assert strategy_resolution(filed, planned=True) == strategy_resolution(
        config_from_env({"VLLM_EXPONENTIAL_BUCKETING": "0"}, v0_26))  # fmt: skip


def test_the_plan_serve_prints_says_which_strategy_variable_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    # memory plan's findings are the same plan's (serve --dry-run prints them under its own notes)
    monkeypatch.setenv("VLLM_BUCKETING_STRATEGY", "pad")
    monkeypatch.setenv("VLLM_EXPONENTIAL_BUCKETING", "1")
    plan = _serve("--plan-runtime", "vllm-gaudi==0.26.0")["plan"]
    assert isinstance(plan, dict)
    said = [f for f in plan["warnings"] if f["code"] == "setting_overridden"]
    assert len(said) == 1
    assert "overrides VLLM_BUCKETING_STRATEGY=pad" in said[0]["message"]
    assert said[0]["severity"] == "info"


def test_range_variables_exp_overwrites_are_said_wherever_its_buckets_are() -> None:
    # r16text 3: buckets replay warmed exp's graphs and said nothing of the two range variables it overwrote
    env = {"VLLM_PROMPT_SEQ_BUCKET_MAX": "1024", "VLLM_DECODE_BLOCK_BUCKET_MAX": "256"}
    said = model_from_env(env, None, "0.26.0").text_shapes(SHAPE_4K)
    assert said.prefill == model_from_env({}, None, "0.26.0").text_shapes(SHAPE_4K).prefill  # overwritten indeed
    (note,) = said.resolved
    assert note.startswith("your VLLM_PROMPT_SEQ_BUCKET_MAX, VLLM_DECODE_BLOCK_BUCKET_MAX: not applied by vllm-gaudi")
    # the prefill batch cap is read whatever the strategy: never said to be overwritten
    assert not model_from_env({"VLLM_PROMPT_BS_BUCKET_MAX": "4"}, None, "0.26.0").text_shapes(SHAPE_4K).resolved

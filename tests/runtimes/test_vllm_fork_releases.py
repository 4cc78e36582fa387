"""vllm-fork's release lines (vllm_hpu_mm.runtimes.vllm_fork.releases) and the buckets each plans: one rule a test.
The lines are checked against each release's own code by benchmarks/agreement/vllm_fork_releases.py."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.plan.findings import Finding
from vllm_hpu_mm.runtimes import registry as runtimes
from vllm_hpu_mm.runtimes.base import Runtime
from vllm_hpu_mm.runtimes.vllm_fork import VllmFork, model_from_env
from vllm_hpu_mm.runtimes.vllm_fork.bucketing import largest_prompt_shape
from vllm_hpu_mm.runtimes.vllm_fork.exponential import spaced_range
from vllm_hpu_mm.runtimes.vllm_fork.releases import LINES, NEWEST, release_for

MAIN = EngineShape(max_model_len=32768, max_num_seqs=64, max_num_batched_tokens=32768, block_size=128,
                   num_kv_blocks=8781)  # fmt: skip
SMALL = EngineShape(max_model_len=2048, max_num_seqs=4, max_num_batched_tokens=2048, block_size=128, num_kv_blocks=64)


def shapes(version: str | None, env: dict[str, str] | None = None, shape: EngineShape = MAIN) -> tuple[int, int]:
    t = model_from_env(env or {}, None, version).text_shapes(shape)
    return len(t.prefill), len(t.decode)


@pytest.mark.parametrize(
    ("version", "generation"),
    [
        ("0.9.0.1+gaudi000", "ext122"),
        ("0.9.0.1+Gaudi-1.22.0", "ext122"),
        ("0.8.5.post1+gaudi121", "ext1212"),
        ("0.7.2+Gaudi-1.21.2", "ext1212"),
        ("0.7.2+gaudi121", "ext1210"),
        ("0.6.4.post2+gaudi119", "ext119"),
        ("0.6.6.post1", "ext119"),
        ("0.5.3.post1+gaudi118", "intree118"),
        ("v0.5.3.post1+Gaudi-1.17.0", "intree2024"),
    ],
)
def test_a_version_maps_to_its_line(version: str, generation: str) -> None:
    assert release_for(version).generation == generation


@pytest.mark.parametrize(
    ("version", "why"),
    [
        ("0.5.3.post1", "two lines"),
        ("0.4.2", "older than the oldest release line modelled, v0.5.3.post1-Gaudi-1.17.0 "),
        ("0.6.0", "no release line modelled has vLLM base 0.6.0 .it lies between"),
        ("0.8.5+Gaudi-1.22.0-aice-v0", "aice"),
        ("banana", "not a version pip takes"),
        # r10fork 17: pip refuses a branch as a version; the plain vllm-fork plans what habana_main plans as
        ("habana_main", "a branch, not a version pip takes"),
        ("main", "a branch, not a version pip takes"),
    ],
)
def test_unmodelled_versions_are_refused_naming_what_is_accepted(version: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why) as exc:
        release_for(version)
    assert "accepted: 0.9.0.1" in str(exc.value)
    assert "habana_main," not in str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("version", "why"),
    [
        (
            "0.4.2",
            r"^vllm-fork==0.4.2: older than the oldest release line modelled, v0.5.3.post1-Gaudi-1.17.0 "
            r"\(Gaudi 1.17, vLLM base 0.5.3.post1\); accepted: ",
        ),
        ("0.5.3+gaudi117", r"older than the oldest release line modelled"),
        (
            "0.10.0",
            r"^vllm-fork==0.10.0: newer than the newest release line modelled, v0.9.0.1\+Gaudi-1.22.0 "
            r"\(vLLM base 0.9.0.1\)",
        ),
        ("0.9.1+gaudi123", r"newer than the newest release line modelled"),
    ],
)
def test_a_release_outside_the_modelled_lines_says_whether_it_is_older_or_newer(version: str, why: str) -> None:
    # r6releases 4: 0.4.2 (the 1.16 tag's base) got the reason of an unknown base between lines
    with pytest.raises(ConfigError, match=why):
        release_for(version)


@pytest.mark.parametrize("tag", ["0.5.3.post1-Gaudi-1.17.0", "v0.5.3.post1-Gaudi-1.17.0", "0.5.3.post1-gaudi-1.17.0"])
def test_the_1_17_tags_dash_spelling_is_refused_naming_what_pip_takes(tag: str) -> None:
    # r6releases 8: pip refuses it (packaging's Version raises InvalidVersion), yet it planned the 1.17 line;
    # r8fork 2: the spelling named is the tags' own (Gaudi-1.17.0), whatever case was typed
    with pytest.raises(
        ConfigError,
        match=r"is the git tag's spelling, not a version pip takes; name the same release "
        r"as pip spells it: vllm-fork==0.5.3.post1\+Gaudi-1.17.0$",
    ):
        release_for(tag)
    assert release_for(tag.replace("-G", "+G").replace("-g", "+g")).name == "v0.5.3.post1-Gaudi-1.17.0"


def test_a_dash_spelled_tag_of_an_unmodelled_release_says_why_as_pip_spells_it() -> None:
    with pytest.raises(
        ConfigError,
        match=r"^vllm-fork==v0.4.2-Gaudi-1.16.0 is the git tag's spelling, not a version "
        r"pip takes; as pip spells it, vllm-fork==0.4.2\+Gaudi-1.16.0: older than",
    ):
        release_for("v0.4.2-Gaudi-1.16.0")


def test_each_line_names_its_commits_and_the_newest_is_the_default() -> None:
    assert LINES[0] is NEWEST
    assert release_for(None) is NEWEST
    assert all(r.commit and r.tags for r in LINES)
    assert [r.extension for r in LINES] == ["8211e0b", "29bc7a4", "2b4ba56", "d4b0d38", "4ff86cf", None, None]
    assert model_from_env({}).version is None
    assert model_from_env({}, None, "0.7.2").version == "0.7.2"


def test_the_plan_changes_across_lines_at_the_main_jobs_shape() -> None:
    # figures from each line's own code (benchmarks/agreement/results/vllm_fork_releases.md, "main job" row)
    assert shapes(None) == (62, 105)  # 1.22 exponential
    assert shapes("0.8.5.post1") == (508, 483)  # 1.21.2: linear, prompt to max_model_len, decode to the KV blocks
    assert shapes("0.6.6.post1") == (52, 56)  # 1.19: prompt to 1024; decode blocks to 64 x 2048 // 128
    assert shapes("0.5.3.post1+gaudi117") == (56, 112)  # 2024: no token budget, decode by length


def test_1_17_defaults_are_its_logged_settings() -> None:
    # PR #147's log: 24 prompt and 48 decode buckets at 4 sequences, block 128 (decode length 2048 -> 16 blocks)
    assert shapes("0.5.3.post1+gaudi117", shape=SMALL) == (24, 48)
    decode = model_from_env({}, None, "0.5.3.post1+gaudi117").text_shapes(SMALL).decode
    assert max(decode) == (4, 4 * 16)


def test_1_18_skips_blocks_below_the_batch_and_stops_past_the_rounded_kv_blocks() -> None:
    d = model_from_env({}, None, "0.5.3.post1+gaudi118").text_shapes(SMALL).decode
    assert d == ((4, 128),)  # batch range (4, 4, 4); blocks 128 only: 64 KV blocks round up to the step 128


def test_prompt_buckets_over_the_token_budget_are_dropped_from_1_18_on() -> None:
    tight = EngineShape(max_model_len=4096, max_num_seqs=8, max_num_batched_tokens=1024, block_size=128,
                        num_kv_blocks=600)  # fmt: skip
    for version in ("0.5.3.post1+gaudi118", "0.6.6.post1", "0.7.2", "0.8.5.post1", "0.9.0.1"):
        prefill = model_from_env({"VLLM_EXPONENTIAL_BUCKETING": "false"}, None, version).text_shapes(tight).prefill
        assert prefill, version
        assert all(b * q <= 1024 for b, q, _ in prefill), version
    prefill = model_from_env({}, None, "0.5.3.post1+gaudi117").text_shapes(tight).prefill
    assert any(b * q > 1024 for b, q, _ in prefill)


def test_contiguous_pa_clamps_linear_decode_blocks_to_the_kv_cache_from_1_21_2() -> None:
    lin = {"VLLM_EXPONENTIAL_BUCKETING": "false"}
    assert max(n for _, n in model_from_env(lin, None, "0.9.0.1").text_shapes(MAIN).decode) == 8781
    roomy = EngineShape(max_model_len=2048, max_num_seqs=4, max_num_batched_tokens=2048, block_size=128,
                        num_kv_blocks=1000)  # fmt: skip
    on = model_from_env(lin, None, "0.8.5.post1").text_shapes(roomy)
    off = model_from_env({**lin, "VLLM_CONTIGUOUS_PA": "false"}, None, "0.8.5.post1").text_shapes(roomy)
    assert max(n for _, n in on.decode) == 1000  # the block max becomes the KV blocks
    # otherwise max(block size, the worst case 4 x 2048 // 128), as before 1.21.2
    assert max(n for _, n in off.decode) == 128
    assert max(n for _, n in model_from_env(lin, None, "0.7.2").text_shapes(roomy).decode) == 128


def test_each_variable_configures_the_model() -> None:
    lin = {"VLLM_EXPONENTIAL_BUCKETING": "false"}
    base = model_from_env(lin).text_shapes(MAIN)
    for name, value in [("VLLM_PROMPT_BS_BUCKET_MAX", "8"), ("VLLM_PROMPT_SEQ_BUCKET_STEP", "1024"),
                        ("VLLM_DECODE_BS_BUCKET_STEP", "16"), ("VLLM_DECODE_BLOCK_BUCKET_MAX", "1024")]:  # fmt: skip
        assert model_from_env({**lin, name: value}).text_shapes(MAIN) != base, name
    assert shapes("0.5.3.post1+gaudi117", {"VLLM_DECODE_SEQ_BUCKET_MAX": "1024"}, SMALL) == (24, 24)


def test_1_22_defaults_to_exponential_and_ignores_the_range_variables_there() -> None:
    assert "exp bucketing" in model_from_env({}).text_shapes(MAIN).source
    assert shapes(None, {"VLLM_PROMPT_BS_BUCKET_MAX": "8"}) == shapes(None)
    assert "lin bucketing" in model_from_env({"VLLM_EXPONENTIAL_BUCKETING": "off"}).text_shapes(MAIN).source


def test_exponential_spacing_fills_duplicates_and_ends_at_max() -> None:
    assert spaced_range(1, 2, 64, 7, long_context=False, contiguous_pa=True) == [1, 2, 4, 8, 16, 32, 64]
    values = spaced_range(128, 128, 32768, 16, long_context=True, contiguous_pa=True)
    assert values[-1] == 32768
    assert len(values) == 16


EXP = {"VLLM_EXPONENTIAL_BUCKETING": "true"}
#: Fewer buckets than the range holds, so each range reaches its last value (limit 2 for batch: 1 and the max).
FEW = {**EXP, "VLLM_PROMPT_SEQ_BUCKET_LIMIT": "3", "VLLM_DECODE_BLOCK_BUCKET_LIMIT": "3",
       "VLLM_PROMPT_BS_BUCKET_LIMIT": "2", "VLLM_DECODE_BS_BUCKET_LIMIT": "2"}  # fmt: skip
ODD = EngineShape(max_model_len=1000, max_num_seqs=8, max_num_batched_tokens=2048, block_size=128, num_kv_blocks=700)
MID = EngineShape(max_model_len=4096, max_num_seqs=16, max_num_batched_tokens=4096, block_size=128, num_kv_blocks=300)


def _buckets(
    version: str, env: dict[str, str], shape: EngineShape
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    t = model_from_env(env, None, version).text_shapes(shape)
    return [(b, q) for b, q, _ in t.prefill], list(t.decode)


# Each list below is what the extension's own code gives (benchmarks/agreement/vllm_fork_releases.py ran it at the
# release's pin, 29bc7a4 or 2b4ba56, on CPU, and the model agreed).
@pytest.mark.parametrize(
    ("version", "env", "shape", "prompt", "decode"),
    [
        # 1.21.2 - 1.21.3 under contiguous PA: each range's last value is its max, 1000 and the 700 KV blocks
        ("0.8.5.post1", FEW, ODD, [(1, 128), (1, 384), (1, 1000), (8, 128)],
         [(1, 128), (1, 384), (1, 700), (8, 128), (8, 384), (8, 700)]),
        # 1.21.0 rounds it up to the step: 1024 > max_model_len is dropped, 768 blocks kept
        ("0.7.2", FEW, ODD, [(1, 128), (1, 384), (8, 128)],
         [(1, 128), (1, 384), (1, 768), (8, 128), (8, 384), (8, 768)]),
        # the counts read; a range value it does not read (even a bad token) changes nothing
        ("0.8.5.post1", {**EXP, "VLLM_PROMPT_SEQ_BUCKET_LIMIT": "4", "VLLM_DECODE_BS_BUCKET_LIMIT": "2",
                         "VLLM_PROMPT_BS_BUCKET_MAX": "x"}, MID,
         [(1, 128), (1, 512), (1, 1408), (1, 4096), (2, 128), (2, 512), (2, 1408), (4, 128), (4, 512), (8, 128),
          (8, 512), (16, 128)],
         [(1, 128), (1, 256), (16, 128), (16, 256)]),
        # default counts: duplicates filled from the free multiples of the step until none is left; every decode
        # pair, even 128 blocks above a 64-block cache
        ("0.8.5.post1", EXP, SMALL,
         [(1, 128), (1, 256), (1, 384), (1, 512), (1, 640), (1, 768), (1, 896), (1, 1024), (1, 1152), (1, 1280),
          (1, 1664), (1, 2048), (2, 128), (2, 256), (2, 384), (2, 512), (2, 640), (2, 768), (2, 896), (2, 1024),
          (4, 128), (4, 256), (4, 384), (4, 512)],
         [(1, 128), (2, 128), (4, 128)]),
    ],
)  # fmt: skip
def test_1_21_exponential_buckets_are_the_extensions(
    version: str, env: dict[str, str], shape: EngineShape, prompt: list[tuple[int, int]], decode: list[tuple[int, int]]
) -> None:
    assert _buckets(version, env, shape) == (prompt, decode)
    assert "exp bucketing" in model_from_env(env, None, version).text_shapes(shape).source


def test_1_21_exponential_at_the_main_jobs_shape_and_its_profiling_shape() -> None:
    prompt, decode = _buckets("0.8.5.post1", EXP, MAIN)
    assert (len(prompt), len(decode)) == (70, 105)  # the extension's own count at 29bc7a4
    assert sorted({n for _, n in decode})[-3:] == [4864, 6528, 8781]
    fork = model_from_env({**EXP, "VLLM_PROMPT_SEQ_BUCKET_MAX": "1024"}, None, "0.8.5.post1")
    assert largest_prompt_shape(fork.bucketing, MAIN) == (64, 32768)  # get_max_prompt_shape: its fixed maxima


def test_1_21_exponential_reads_only_true_and_the_contiguous_pa_switch() -> None:
    assert (
        "lin bucketing"
        in model_from_env({"VLLM_EXPONENTIAL_BUCKETING": "1"}, None, "0.8.5.post1").text_shapes(MAIN).source
    )  # 1.21 reads only "true"
    off = {**FEW, "VLLM_CONTIGUOUS_PA": "false"}
    assert _buckets("0.8.5.post1", off, ODD) == _buckets("0.7.2", FEW, ODD)


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({**EXP, "VLLM_PROMPT_SEQ_BUCKET_LIMIT": "0"}, r"VLLM_PROMPT_SEQ_BUCKET_LIMIT='0': no buckets; "
         r"accepted: a count >= 1 .*asserts 'num_buckets must be a positive integer'"),
        ({**EXP, "VLLM_DECODE_BLOCK_BUCKET_LIMIT": "1.5"}, r"VLLM_DECODE_BLOCK_BUCKET_LIMIT='1.5' is invalid"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("version", ["0.8.5.post1", "0.7.2"])
def test_1_21_exponential_stops_where_the_extension_stops(env: dict[str, str], match: str, version: str) -> None:
    with pytest.raises(ConfigError, match=match):
        model_from_env(env, None, version)


def test_1_21_exponential_names_the_range_variables_it_does_not_read_and_reads_the_limits() -> None:
    (message,) = _said("0.8.5.post1", {**EXP, "VLLM_PROMPT_BS_BUCKET_MAX": "8"}, "setting_not_read")
    assert "your VLLM_PROMPT_BS_BUCKET_MAX=8: not read by" in message
    assert not _said("0.7.2", {**EXP, "VLLM_PROMPT_BS_BUCKET_LIMIT": "8"}, "setting_not_read")
    assert _said("0.7.2", {"VLLM_PROMPT_BS_BUCKET_LIMIT": "8"}, "setting_not_read")  # linear reads no limit


@pytest.mark.parametrize(
    ("env", "version", "match"),
    [
        ({"VLLM_PROMPT_BS_BUCKET_MAX": "x"}, None, r"VLLM_PROMPT_BS_BUCKET_MAX='x' is invalid; accepted: an integer"),
        ({"VLLM_DECODE_BLOCK_BUCKET_LIMIT": "1.5"}, None, "VLLM_DECODE_BLOCK_BUCKET_LIMIT='1.5'"),
        ({"VLLM_DECODE_SEQ_BUCKET_MIN": "a"}, "0.5.3.post1+gaudi117", "VLLM_DECODE_SEQ_BUCKET_MIN='a'"),
    ],
)
def test_bad_tokens_fail_as_the_release_fails(env: dict[str, str], version: str | None, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        model_from_env(env, None, version)


def test_tokens_a_release_does_not_read_and_int_spellings_are_accepted() -> None:
    model_from_env({"VLLM_DECODE_BLOCK_BUCKET_LIMIT": "1.5"}, None, "0.8.5.post1")  # LIMIT is read from 1.22 only
    spelled = {"VLLM_EXPONENTIAL_BUCKETING": "false", "VLLM_PROMPT_SEQ_BUCKET_MAX": " 1_024 "}
    assert max(q for _, q, _ in model_from_env(spelled).text_shapes(MAIN).prefill) == 1024


def test_min_above_max_is_refused_at_generation() -> None:
    fork = model_from_env({"VLLM_EXPONENTIAL_BUCKETING": "false", "VLLM_PROMPT_SEQ_BUCKET_MIN": "4096",
                           "VLLM_PROMPT_SEQ_BUCKET_MAX": "1024"})  # fmt: skip
    with pytest.raises(ConfigError, match=r"VLLM_PROMPT_SEQ_BUCKET_MIN 4096 is above VLLM_PROMPT_SEQ_BUCKET_MAX 1024"):
        fork.text_shapes(MAIN)


@pytest.mark.parametrize(
    ("version", "refused"),
    [
        ("0.6.4.post2", False),  # 1.19 builds its ranges only in warmup_model, after the skip
        ("0.5.3.post1+gaudi118", False),
        ("0.6.6.post1", True),  # 1.20 builds them before the skip
        ("0.8.5.post1", True),  # 1.21.x in the bucketing context's __init__
        ("0.5.3.post1+gaudi117", True),  # 1.17 in the runner's __init__
    ],
)
def test_min_above_max_under_a_skipped_warm_up_is_refused_only_where_the_release_still_builds_the_range(
    version: str, refused: bool
) -> None:
    env = {"VLLM_SKIP_WARMUP": "true", "VLLM_PROMPT_BS_BUCKET_MIN": "8", "VLLM_PROMPT_BS_BUCKET_MAX": "4"}
    fork = model_from_env(env, None, version)
    if refused:  # the refusal names each variable in full, on every line (1.17's named none: r14fork 8; r25fork 10)
        with pytest.raises(
            ConfigError,
            match=r"VLLM_PROMPT_BS_BUCKET_MIN 8 is above VLLM_PROMPT_BS_BUCKET_MAX 4 "
            r"\(the range \(min, step, max\) \(8, 32, 4\)\)",
        ):
            fork.text_shapes(MAIN)
    else:
        assert fork.text_shapes(MAIN).prefill == ()
    warmed = model_from_env({**env, "VLLM_SKIP_WARMUP": "1"}, None, "0.6.4.post2")  # 1.19 skips only on 'true'
    with pytest.raises(ConfigError, match="VLLM_PROMPT_BS_BUCKET_MIN 8 is above"):
        warmed.text_shapes(MAIN)


def test_resolve_and_detect_take_a_fork_release() -> None:
    found = runtimes.resolve("vllm-fork==0.8.5.post1", "hpu")
    assert found.runtime is Runtime.VLLM_FORK
    assert found.version == "0.8.5.post1"
    assert "29bc7a4" in found.found
    with pytest.raises(ConfigError, match=r"vllm-fork==0\.4\.2"):
        runtimes.resolve("vllm-fork==0.4.2", "hpu")
    model = runtimes.model_for(Runtime.VLLM_FORK, {}, version="0.7.2")
    assert isinstance(model, VllmFork)
    assert model.bucketing.release.generation == "ext1210"
    again = runtimes.same_runtime(model, {})
    assert isinstance(again, VllmFork)
    assert again.version == "0.7.2"


def test_the_fork_named_with_no_release_names_the_line_it_is_planned_as() -> None:
    # r7fork 19: a plain vllm-fork (habana_main) plans as the newest line, 1.22 @2e9b2b3d4, and says so as a named
    # release does; runtime_release stays None (no release was named)
    found = runtimes.resolve("vllm-fork", "hpu")
    assert found.version is None
    assert found.found.startswith("named: vllm-fork, planned as vllm-fork v0.9.0.1+Gaudi-1.22.0 (@2e9b2b3d4")
    assert "8211e0b" in found.found


def test_auto_plans_the_installed_fork_release(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtimes, "_dist_version", lambda name: {"vllm": "0.6.6.post1+gaudi120"}.get(name))
    monkeypatch.setattr(runtimes, "_has_module", lambda name: name == "habana_frameworks")
    found = runtimes.resolve("auto", "hpu")
    assert found.runtime is Runtime.VLLM_FORK
    assert found.version == "0.6.6.post1+gaudi120"
    assert "d4b0d38" in found.found


def test_each_line_knows_the_architectures_its_registry_lists() -> None:
    # r6gaudi 4: Qwen2.5-VL first appears in 1.21.0's registry (registry.py:179 @0275ce4c2); Llama is in every line
    traits = {r.spec: model_from_env({}, None, r.spec).traits for r in LINES}
    assert "Qwen2_5_VLForConditionalGeneration" not in traits["0.6.6.post1"].architectures  # type: ignore[operator]
    assert "Qwen2_5_VLForConditionalGeneration" in traits["0.7.2"].architectures  # type: ignore[operator]
    assert all("LlamaForCausalLM" in t.architectures for t in traits.values())  # type: ignore[operator]
    assert [t.transformers_fallback for t in traits.values()] == [True, True, True, False, False, False, False]


SPECULATIVE = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}


def _findings(version: str, env: dict[str, str], **args: object) -> list[Finding]:
    """The findings of a plan for a text model (Llama 3.1 8B's config.json) at ``version`` under ``env``."""
    import shutil
    import tempfile
    from pathlib import Path

    from vllm_hpu_mm.envs import load
    from vllm_hpu_mm.plan.args import SizingArgs
    from vllm_hpu_mm.plan.inputs import build
    from vllm_hpu_mm.plan.planner import plan

    data = Path(__file__).resolve().parents[1] / "data" / "configs" / "meta-llama_Llama-3.1-8B-Instruct.json"
    with tempfile.TemporaryDirectory() as model:
        shutil.copy(data, Path(model) / "config.json")
        sizing = SizingArgs(model=model, device="gaudi2", runtime=f"vllm-fork=={version}", max_model_len=4096,
                            **args)  # type: ignore[arg-type]  # fmt: skip
        return list(plan(build(sizing, load(env), env)).findings)


def _speculative_refusal(version: str, env: dict[str, str], **args: object) -> list[str]:
    """The refusal a text model gets under --speculative-config at ``version``."""
    found = _findings(version, env, speculative_config=SPECULATIVE, **args)
    return [f.message for f in found if f.code == "speculative_with_contiguous_pa" and f.severity == "error"]


def _said(version: str, env: dict[str, str], code: str) -> list[str]:
    return [f.message for f in _findings(version, env) if f.code == code]


@pytest.mark.parametrize(
    ("version", "env", "said"),
    [
        ("0.8.5.post1", {"VLLM_EXPONENTIAL_BUCKETING": "1"}, "VLLM_EXPONENTIAL_BUCKETING='1' is read as false"),
        ("0.7.2", {"VLLM_EXPONENTIAL_BUCKETING": "yes"}, "VLLM_EXPONENTIAL_BUCKETING='yes' is read as false"),
        ("0.7.2", {"VLLM_CONTIGUOUS_PA": "1"}, "VLLM_CONTIGUOUS_PA='1' is read as false"),
        ("0.6.4.post2", {"VLLM_CONTIGUOUS_PA": "on"}, "VLLM_CONTIGUOUS_PA='on' is read as false"),
    ],
)
def test_a_bucketing_boolean_the_release_reads_otherwise_than_it_looks_gets_a_warning(
    version: str, env: dict[str, str], said: str
) -> None:
    (message,) = _said(version, env, "read_as_runtime_reads")
    assert said in message


def test_a_bucketing_boolean_read_as_it_looks_gets_no_warning() -> None:
    assert not _said("0.9.0.1", {"VLLM_EXPONENTIAL_BUCKETING": "1", "VLLM_CONTIGUOUS_PA": "0"}, "read_as_runtime_reads")
    assert not _said("0.8.5.post1", {"VLLM_EXPONENTIAL_BUCKETING": "false"}, "read_as_runtime_reads")


@pytest.mark.parametrize(
    ("version", "name"),
    [
        ("0.6.6.post1", "VLLM_EXPONENTIAL_BUCKETING"),  # 1.21.0 added it
        ("0.5.3.post1+gaudi118", "VLLM_CONTIGUOUS_PA"),
        ("0.5.3.post1+gaudi117", "VLLM_DECODE_BLOCK_BUCKET_MAX"),  # 1.17 decodes by sequence length
        ("0.9.0.1", "VLLM_DECODE_SEQ_BUCKET_MAX"),  # from 1.18 by KV blocks
        ("0.8.5.post1", "VLLM_PROMPT_BS_BUCKET_LIMIT"),  # linear buckets take no limit before 1.22
    ],
)
def test_a_bucketing_variable_the_release_does_not_read_is_named(version: str, name: str) -> None:
    (message,) = _said(version, {name: "8"}, "setting_not_read")
    assert f"your {name}=8: not read by" in message


def test_1_22_names_the_bucket_ranges_its_exponential_strategy_overwrites() -> None:
    (message,) = _said("0.9.0.1", {"VLLM_PROMPT_BS_BUCKET_MAX": "8"}, "setting_overridden")
    assert "VLLM_PROMPT_BS_BUCKET_MAX=8: overwritten by" in message
    lin = {"VLLM_PROMPT_BS_BUCKET_MAX": "8", "VLLM_EXPONENTIAL_BUCKETING": "false"}
    assert not _said("0.9.0.1", lin, "setting_overridden")


@pytest.mark.parametrize(
    ("version", "env", "refused"),
    [
        ("0.9.0.1", {}, True),  # the extension's Value: on unless prefix caching (features.py:73 @8211e0b)
        ("0.9.0.1", {"VLLM_CONTIGUOUS_PA": "no"}, False),  # its boolean: 'no' is false
        ("0.9.0.1", {"VLLM_CONTIGUOUS_PA": "1"}, True),
        ("0.8.5.post1", {}, True),
        ("0.8.5.post1", {"VLLM_CONTIGUOUS_PA": "1"}, True),  # envs.VLLM_USE_HPU_CONTIGUOUS_CACHE_FETCH takes '1'
        ("0.7.2", {"VLLM_CONTIGUOUS_PA": "1"}, False),  # == 'true' only
        ("0.6.6.post1", {}, True),
        ("0.6.4.post2", {}, False),  # 1.19 has contiguous PA but no such check
        ("0.5.3.post1+gaudi117", {}, False),
    ],
)
def test_speculative_decoding_with_contiguous_pa_on_is_refused_where_the_release_refuses_it(
    version: str, env: dict[str, str], refused: bool
) -> None:
    messages = _speculative_refusal(version, env)
    assert bool(messages) == refused
    if refused:
        assert "speculative decoding is not supported with contiguous PA" in messages[0]
        assert "hpu_model_runner.py" in messages[0]


def test_prefix_caching_turns_contiguous_pa_off_from_1_21_so_speculative_decoding_starts() -> None:
    assert not _speculative_refusal("0.9.0.1", {}, enable_prefix_caching=True)
    assert not _speculative_refusal("0.7.2", {}, enable_prefix_caching=True)  # os.environ.setdefault(..., "False")
    assert _speculative_refusal("0.6.6.post1", {}, enable_prefix_caching=True)  # 1.20 ignores prefix caching


def _inputs(version: str, env: dict[str, str], **args: object) -> object:
    """The plan inputs for a text model (Llama 3.1 8B's config.json) at ``version`` under ``env``."""
    import shutil
    import tempfile
    from pathlib import Path

    from vllm_hpu_mm.envs import load
    from vllm_hpu_mm.plan.args import SizingArgs
    from vllm_hpu_mm.plan.inputs import build

    data = Path(__file__).resolve().parents[1] / "data" / "configs" / "meta-llama_Llama-3.1-8B-Instruct.json"
    with tempfile.TemporaryDirectory() as model:
        shutil.copy(data, Path(model) / "config.json")
        sizing = SizingArgs(model=model, device="gaudi2", runtime=f"vllm-fork=={version}", max_model_len=4096,
                            **args)  # type: ignore[arg-type]  # fmt: skip
        return build(sizing, load(env), env)


@pytest.mark.parametrize("version", ["0.5.3.post1+Gaudi-1.17.0", "0.5.3.post1+Gaudi-1.18.0"])
def test_fork_1_17_and_1_18_are_planned_at_their_own_graph_defaults_where_unset(version: str) -> None:
    i = _inputs(version, {})
    assert (i.graph_reserved_mem, i.graph_prompt_ratio) == (0.4, 0.5)  # type: ignore[attr-defined]
    (said,) = _said(version, {}, "runtime_graph_defaults")
    assert "VLLM_GRAPH_RESERVED_MEM 0.4 and VLLM_GRAPH_PROMPT_RATIO 0.5" in said


def test_a_graph_share_the_user_sets_is_planned_over_the_forks_own_default() -> None:
    i = _inputs("0.5.3.post1+Gaudi-1.18.0", {"VLLM_GRAPH_RESERVED_MEM": "0.2"}, graph_prompt_ratio=0.25)
    assert (i.graph_reserved_mem, i.graph_prompt_ratio) == (0.2, 0.25)  # type: ignore[attr-defined]
    assert _said("0.5.3.post1+Gaudi-1.18.0", {"VLLM_GRAPH_RESERVED_MEM": "0.1", "VLLM_GRAPH_PROMPT_RATIO": "0.3"},
                 "runtime_graph_defaults") == []  # fmt: skip


@pytest.mark.parametrize("version", ["0.6.4.post2", "0.8.5.post1", "0.9.0.1"])
def test_fork_from_1_19_shares_the_guides_graph_defaults(version: str) -> None:
    i = _inputs(version, {})
    assert (i.graph_reserved_mem, i.graph_prompt_ratio) == (0.1, 0.3)  # type: ignore[attr-defined]
    assert _said(version, {}, "runtime_graph_defaults") == []

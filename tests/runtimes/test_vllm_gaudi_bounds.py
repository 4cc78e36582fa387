"""Bounded work from vllm-gaudi's variables and bucket files, and errors that name what the user typed.

A small input (one variable, one line of a bucket file) must never drive unbounded work: past the caps the runtime
itself implies, the model refuses with one line naming the variable or the file and line; below them the values its
filters drop for certain are left out without changing a single bucket (checked against the unpruned generation).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError, WouldNotStart
from vllm_hpu_mm.runtimes.vllm_gaudi import common
from vllm_hpu_mm.runtimes.vllm_gaudi.common import decode_buckets, dropped_file_buckets, prompt_buckets
from vllm_hpu_mm.runtimes.vllm_gaudi.config import BucketingConfig, config_from_env
from vllm_hpu_mm.runtimes.vllm_gaudi.file_strategy import FILE_BOUND, MAX_FILE_BUCKETS, parse_bucket_file
from vllm_hpu_mm.runtimes.vllm_gaudi.releases import release_for

SHAPE = EngineShape(max_model_len=32768, max_num_seqs=256, max_num_batched_tokens=8192, block_size=128,
                    num_kv_blocks=8781)  # fmt: skip


def with_file(text: str, source: str | None = None) -> BucketingConfig:
    return BucketingConfig(from_file="/x/b.txt", file_text=text, file_source=source)


# --- ranges and products ---------------------------------------------------------------------------------------------


def test_a_huge_decode_block_max_is_refused_naming_the_variable() -> None:
    cfg = config_from_env({"VLLM_BUCKETING_STRATEGY": "lin", "VLLM_DECODE_BLOCK_BUCKET_MAX": str(10**12)})
    with pytest.raises(ConfigError) as err:
        decode_buckets(cfg, SHAPE)
    message = str(err.value)
    assert message.startswith(f"VLLM_DECODE_BLOCK_BUCKET_MAX={10**12}")
    assert "at most 1,000,000" in message
    assert "\n" not in message


def test_a_large_decode_block_max_below_the_cap_gives_the_default_buckets_beyond_the_cap() -> None:
    # every context above max_num_seqs x blocks per sequence is capped to the same bucket by vllm-gaudi's corrector
    big = config_from_env({"VLLM_BUCKETING_STRATEGY": "lin", "VLLM_DECODE_BLOCK_BUCKET_MAX": str(10**8)})
    cap = SHAPE.max_num_seqs * 256
    just = config_from_env({"VLLM_BUCKETING_STRATEGY": "lin", "VLLM_DECODE_BLOCK_BUCKET_MAX": str(cap + 128)})
    assert decode_buckets(big, SHAPE) == decode_buckets(just, SHAPE)


def test_a_min_above_the_max_names_the_variable_not_an_internal_range() -> None:
    cfg = config_from_env({"VLLM_BUCKETING_STRATEGY": "lin", "VLLM_PROMPT_QUERY_BUCKET_MIN": "4096"})
    with pytest.raises(ConfigError) as err:
        prompt_buckets(cfg, dataclasses.replace(SHAPE, max_num_batched_tokens=2048))
    assert str(err.value).startswith("VLLM_PROMPT_QUERY_BUCKET_MIN=4096")


def test_the_deprecated_seq_spelling_is_named_as_typed() -> None:
    cfg = config_from_env({"VLLM_BUCKETING_STRATEGY": "pad", "VLLM_PROMPT_SEQ_BUCKET_STEP": "0"})
    with pytest.raises(ConfigError, match=r"^VLLM_PROMPT_SEQ_BUCKET_STEP=0"):
        prompt_buckets(cfg, SHAPE)


def test_ranges_that_combine_past_the_cap_are_refused_naming_their_variables() -> None:
    env = {"VLLM_BUCKETING_STRATEGY": "lin", "VLLM_PROMPT_BS_BUCKET_MAX": "4000", "VLLM_PROMPT_BS_BUCKET_STEP": "1"}
    with pytest.raises(ConfigError) as err:
        prompt_buckets(config_from_env(env), SHAPE)
    assert "VLLM_PROMPT_BS_BUCKET_MAX=4000" in str(err.value)
    assert "at most 2,000,000" in str(err.value)


def _unpruned(monkeypatch: pytest.MonkeyPatch, cfg: BucketingConfig, shape: EngineShape) -> tuple[object, object]:
    with monkeypatch.context() as m:
        m.setattr(common, "_prune", lambda cfg, shape, is_prompt, mnps, ranges: ranges)
        common.prompt_buckets.cache_clear()
        common.decode_buckets.cache_clear()
        out = (common.prompt_buckets(cfg, shape), common.decode_buckets(cfg, shape))
    common.prompt_buckets.cache_clear()
    common.decode_buckets.cache_clear()
    return out


@settings(max_examples=40, deadline=None)
@given(
    strategy=st.sampled_from(["lin", "pad"]),
    max_model_len=st.sampled_from([2048, 4096, 9000, 16384]),
    max_num_seqs=st.sampled_from([4, 16, 64]),
    ctx_max=st.none() | st.integers(0, 400),
    block_max=st.none() | st.integers(1, 5000),
    query_max=st.none() | st.integers(128, 20000),
    merged=st.booleans(),
    contiguous=st.booleans(),
)
def test_pruning_never_changes_a_bucket(strategy: str, max_model_len: int, max_num_seqs: int, ctx_max: int | None,
                                        block_max: int | None, query_max: int | None, merged: bool,
                                        contiguous: bool) -> None:  # fmt: skip
    env = {
        "VLLM_BUCKETING_STRATEGY": strategy,
        "VLLM_MERGED_PREFILL": str(merged),
        "VLLM_CONTIGUOUS_PA": str(contiguous),
    }
    for name, value in (("VLLM_PROMPT_CTX_BUCKET_MAX", ctx_max), ("VLLM_DECODE_BLOCK_BUCKET_MAX", block_max),
                        ("VLLM_PROMPT_QUERY_BUCKET_MAX", query_max)):  # fmt: skip
        if value is not None:
            env[name] = str(value)
    cfg = config_from_env(env)
    shape = EngineShape(max_model_len=max_model_len, max_num_seqs=max_num_seqs, max_num_batched_tokens=4096,
                        block_size=128, num_kv_blocks=600)  # fmt: skip
    try:
        pruned = (prompt_buckets(cfg, shape), decode_buckets(cfg, shape))
    except ConfigError:
        pruned = None
    with pytest.MonkeyPatch.context() as mp:
        try:
            full = _unpruned(mp, cfg, shape)
        except ConfigError:
            full = None
    assert pruned == full


# --- bucket files ------------------------------------------------------------------------------------------------


def test_a_line_of_two_full_ranges_is_refused_before_it_is_expanded() -> None:
    with pytest.raises(ConfigError) as err:
        parse_bucket_file("(1, 128, 0)\n(1, range(2, 10000), range(0, 10000))\n", "--bucket-file b.txt")
    message = str(err.value)
    assert message.startswith("--bucket-file b.txt line 2")
    assert f"{MAX_FILE_BUCKETS:,}" in message


@pytest.mark.parametrize("command", [["buckets", "replay"], ["buckets", "stale"]])
def test_the_file_bound_and_its_reason_are_the_same_in_the_error_the_help_and_the_docs(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Held-out r7text case 7: the error said 200,000 while docs/text-buckets.md said 100,000."""
    with pytest.raises(ConfigError) as err:
        parse_bucket_file("(1, 2048, 0)\n(range(1, 1000), 1, range(1, 1000))\n", "--bucket-file huge.txt")
    assert str(err.value).endswith(f"accepted: {FILE_BOUND}")
    assert f"at most {MAX_FILE_BUCKETS:,} buckets" in FILE_BOUND
    assert "our bound on the time and memory" in FILE_BOUND
    assert main([*command, "--help"]) == 0
    assert FILE_BOUND in " ".join(capsys.readouterr().out.split())
    docs = " ".join((Path(__file__).parents[2] / "docs" / "text-buckets.md").read_text().split())
    assert f"may expand to at most {MAX_FILE_BUCKETS:,} buckets, all lines together: our bound on the time" in docs


def test_a_file_of_a_hundred_thousand_buckets_vllm_gaudi_accepts_is_read() -> None:
    """102,448 buckets (vllm-gaudi has no total cap): read, not refused (main capped files at 100,000)."""
    prompt, decode = parse_bucket_file("(1, range(128, 6272, 128), 0)\n(range(1, 257), 1, range(1, 401))\n",
                                       "--bucket-file b.txt")  # fmt: skip
    assert (len(prompt), len(decode)) == (48, 102_400)


def test_file_errors_name_the_flag_as_given_and_cut_a_long_line() -> None:
    line = "(1, 128, [" + ", ".join(["0"] * 40_000) + "], 3)"
    with pytest.raises(ConfigError) as err:
        parse_bucket_file(line + "\n", "--bucket-file b.txt")
    message = str(err.value)
    assert message.startswith("--bucket-file b.txt line 1")
    assert len(message) < 600
    assert f"({len(line):,} characters)" in message


def test_errors_name_the_variable_by_default() -> None:
    cfg = config_from_env({"VLLM_BUCKETING_FROM_FILE": "/x/b.txt"})
    cfg = dataclasses.replace(cfg, file_text="(1, 2)\n")
    with pytest.raises(ConfigError, match=r"^VLLM_BUCKETING_FROM_FILE=/x/b.txt line 1"):
        prompt_buckets(cfg, SHAPE)


@pytest.mark.parametrize("line", ["(-1, 128, 0)", "(1, 128, [0, -8])", "(4, 1, -3)", "(1, -128, 0)"])
def test_negative_values_are_refused_not_counted_as_warmed(line: str) -> None:
    with pytest.raises(ConfigError, match="negative value"):
        prompt_buckets(with_file(f"(1, 128, 0)\n(1, 1, 8)\n{line}\n", "--bucket-file b.txt"), SHAPE)


def test_buckets_the_filters_drop_are_said() -> None:
    text = "(1, 128, [0, 300])\n(128, 128, 0)\n(4, 1, [2, 100])\n(1, 1, 8)\n"
    notes = dropped_file_buckets(with_file(text, "--bucket-file b.txt"), SHAPE)
    assert len(notes) == 2
    prompt, decode = notes
    assert prompt.startswith("--bucket-file b.txt: vllm-gaudi drops 2 of its 3 prompt buckets")
    assert "max_num_batched_tokens 8192" in prompt
    assert "(1, 128, 300)" in prompt
    assert "1 of its 3 decode buckets" in decode
    assert "batch 4 above its 2 blocks" in decode
    # F25: each filter is named with its count (a query drop is not hidden behind the first context examples), and
    # main @091bbadd warns about them (common.py generate_buckets "omitted during warmup"): never "without a word"
    assert "1 by context blocks (e.g. (1, 128, 300)" in prompt
    assert "1 by batch x query (e.g. (128, 128, 0)" in prompt
    assert "omitted during warmup (common.py generate_buckets @091bbadd)" in prompt
    assert not any("without a word" in n for n in notes)


@pytest.mark.parametrize(("release", "warns"), [("0.19.1", False), ("0.20.1rc0", True), ("0.24.0", True)])
def test_each_release_is_said_to_warn_about_dropped_file_buckets_only_from_the_release_that_does(
    release: str, warns: bool
) -> None:
    # held-out round 8 (gaudi), case 1 note: 3522491e (#1364) added the "omitted during warmup" warning, first
    # tagged v0.20.1rc0 (v0.24.0's common.py:518 has it); v0.19.1 names them only when no bucket is left
    cfg = dataclasses.replace(with_file("(1, 128, [0, 300])\n(1, 1, 8)\n", "--bucket-file b.txt"),
                              release=release_for(release))  # fmt: skip
    (prompt,) = dropped_file_buckets(cfg, SHAPE)
    assert ("omitted during warmup" in prompt) is warns
    assert ("only when none is left" in prompt) is not warns


def test_a_release_before_v0_19_says_it_drops_prompt_buckets_beyond_max_model_len() -> None:
    # held-out round 5 (text), case 7: v0.16.0 keeps a prompt bucket only when query + ctx x block_size <=
    # max_model_len (common.py @ da2ce404); main's context cap let (1, 160, 32) pass unsaid at max_model_len 4096
    shape = dataclasses.replace(SHAPE, max_model_len=4096, max_num_batched_tokens=4096)
    cfg = dataclasses.replace(with_file("(1, [128, 160], [31, 32])\n(1, 1, 8)\n", "--bucket-file b.txt"),
                              release=release_for("0.16.0"))  # fmt: skip
    (prompt,) = dropped_file_buckets(cfg, shape)
    assert "drops 3 of its 4 prompt buckets" in prompt
    assert "(1, 128, 32): query + context 4224 tokens above max_model_len 4096" in prompt
    assert len(prompt_buckets(cfg, shape)) == 1


def test_a_file_whose_decode_buckets_are_all_dropped_would_not_start_naming_them() -> None:
    # held-out round 3 (text), case 8: the would-not-start line said only 'Please adjust the bucketing
    # configuration', not which buckets vllm-gaudi dropped (it logs each before it raises, common.py @091bbadd)
    cfg = with_file("(1, 128, 0)\n(32, 1, 16)\n(16, 1, 8)\n", "--bucket-file b.txt")
    with pytest.raises(WouldNotStart) as said:
        decode_buckets(cfg, SHAPE)
    line = str(said.value)
    assert line.startswith("--bucket-file b.txt: vllm-gaudi would generate 0 decode buckets")
    assert "its filters drop all 2 of the file's decode buckets (2 by batch (e.g. (" in line
    assert re.search(r"batch (32|16) above its (16|8) blocks", line)


def test_a_file_whose_buckets_all_pass_says_nothing() -> None:
    assert dropped_file_buckets(with_file("(1, 128, 0)\n(1, 1, 8)\n"), SHAPE) == ()


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=400))
def test_any_text_is_buckets_or_one_line_naming_the_file(text: str) -> None:
    try:
        parse_bucket_file(text, "--bucket-file b.txt")
    except ConfigError as err:
        message = str(err)
        assert message.startswith("--bucket-file b.txt line ")
        assert len(message) < 800


def test_the_plan_warns_of_file_buckets_the_runtime_drops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "b.txt"
    path.write_text("(1, 128, 0)\n(1, 1, 8)\n(4, 1, [2, 100])\n")
    monkeypatch.setenv("VLLM_BUCKETING_FROM_FILE", str(path))
    assert main(["memory", "plan", "--max-model-len", "8192", "--json"]) == 0
    findings = json.loads(capsys.readouterr().out)["warnings"]
    dropped = [f for f in findings if f["code"] == "runtime_drops_buckets"]
    assert len(dropped) == 1
    assert dropped[0]["message"].startswith(f"VLLM_BUCKETING_FROM_FILE={path}: vllm-gaudi drops 1 of its 3 decode")


@settings(max_examples=40, deadline=None)
@given(
    strategy=st.sampled_from(["lin", "pad", "exp"]),
    values=st.dictionaries(
        st.sampled_from(
            [
                "VLLM_DECODE_BLOCK_BUCKET_MAX",
                "VLLM_DECODE_BLOCK_BUCKET_STEP",
                "VLLM_DECODE_BS_BUCKET_MAX",
                "VLLM_PROMPT_CTX_BUCKET_MAX",
                "VLLM_PROMPT_QUERY_BUCKET_STEP",
                "VLLM_PROMPT_BS_BUCKET_MAX",
                "VLLM_PROMPT_CTX_BUCKET_STEP",
                "VLLM_DECODE_BS_BUCKET_STEP",
            ]
        ),
        st.integers(-5, 10**13) | st.sampled_from([0, 1, 2, 10**6, 10**9]),
        max_size=4,
    ),
)
def test_any_range_variables_give_buckets_or_one_line_naming_a_variable(strategy: str, values: dict[str, int]) -> None:
    cfg = config_from_env({"VLLM_BUCKETING_STRATEGY": strategy, **{k: str(v) for k, v in values.items()}})
    try:
        prompt, decode = prompt_buckets(cfg, SHAPE), decode_buckets(cfg, SHAPE)
    except ConfigError as err:
        message = str(err)
        assert "\n" not in message
        assert len(message) < 800
    else:
        assert len(prompt) <= common.MAX_COMBINATIONS
        assert len(decode) <= common.MAX_COMBINATIONS


@pytest.mark.parametrize(
    ("line", "said"),
    [("([1, 2], range(1, 25613, 1), 0)", "range(1, 25613, 1) has 25,612 elements, more than the 10,000"),
     ("(1, range(1, 9, 0), 0)", "range(1, 9, 0) has step 0"), ("(1, 128, [0, 1)", "not a Python literal;")],
)  # fmt: skip
def test_a_line_that_is_no_literal_says_why(line: str, said: str) -> None:
    # F30: a range over vllm-gaudi's 10,000 elements stays a call, which is why the line is refused
    with pytest.raises(ConfigError, match=f"^--bucket-file b.txt line 1 .*: {re.escape(said)}"):
        parse_bucket_file(f"{line}\n", "--bucket-file b.txt")

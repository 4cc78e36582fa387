"""The model of vllm-gaudi's warm-up (vllm_hpu_mm.runtimes.vllm_gaudi.common), pinned to vllm-gaudi main @ 091bbadd.

Counts come from vllm-gaudi's own bucketing code run on CPU (benchmarks/agreement/vllm_gaudi_bucket_counts.py records
the comparison); range examples come from its docs (docs/features/bucketing_mechanism.md) and docstrings.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes.vllm_gaudi.common import (
    decode_buckets,
    overridden_variables,
    prompt_buckets,
)
from vllm_hpu_mm.runtimes.vllm_gaudi.config import (
    RANGE_VARIABLES,
    STRATEGIES,
    BucketingConfig,
    config_from_env,
    effective_strategy,
    warmup_enabled,
)
from vllm_hpu_mm.runtimes.vllm_gaudi.exponential import exp_range
from vllm_hpu_mm.runtimes.vllm_gaudi.file_strategy import bucket_file, parse_bucket_file
from vllm_hpu_mm.runtimes.vllm_gaudi.linear import lin_range
from vllm_hpu_mm.runtimes.vllm_gaudi.padding_aware import pad_range
from vllm_hpu_mm.runtimes.vllm_gaudi.vision import (
    format_resolutions,
    parse_resolutions,
    vision_buckets_from_env,
    vision_graph_patches,
    vision_warmup,
)

# Qwen2.5-VL-7B, max-model-len 32768, 256 seqs, 8192 batched tokens, block 128, 8781 KV blocks
SHAPE_32K = EngineShape(max_model_len=32768, max_num_seqs=256, max_num_batched_tokens=8192, block_size=128,
                        num_kv_blocks=8781)  # fmt: skip
DEFAULT_QWEN = (1600, 3136, 4096, 6400, 7744, 9216, 12544)


def counts(env: dict[str, str], shape: EngineShape = SHAPE_32K) -> tuple[int, int]:
    cfg = config_from_env(env)
    return len(prompt_buckets(cfg, shape)), len(decode_buckets(cfg, shape))


# --- pinned counts ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "expected"), [("exp", (120, 93)), ("pad", (303, 266)), ("lin", (16321, 2390))]
)  # fmt: skip
def test_counts_per_strategy_at_32k(strategy: str, expected: tuple[int, int]) -> None:
    assert counts({"VLLM_BUCKETING_STRATEGY": strategy}) == expected


def test_default_strategy_is_exp() -> None:
    assert counts({}) == (120, 93)
    assert effective_strategy(config_from_env({})) == "exp"


@pytest.mark.parametrize(("max_model_len", "expected"), [(8192, 23), (16384, 96), (32768, 120), (128000, 144)])
def test_exp_prompt_counts_by_max_model_len(max_model_len: int, expected: int) -> None:
    shape = dataclasses.replace(SHAPE_32K, max_model_len=max_model_len)
    assert len(prompt_buckets(BucketingConfig(), shape)) == expected


def test_readme_main_job_128k() -> None:
    assert counts({}, dataclasses.replace(SHAPE_32K, max_model_len=128000)) == (144, 121)


def test_prompt_bs_max_counts_under_exp() -> None:
    cfg = config_from_env({"VLLM_PROMPT_BS_BUCKET_MAX": "4"})
    buckets = prompt_buckets(cfg, SHAPE_32K)
    assert len(buckets) == 300
    assert {b for b, _, _ in buckets} == {1, 2, 4}
    assert "VLLM_PROMPT_BS_BUCKET_MAX" not in overridden_variables(cfg)  # vllm-gaudi warns about it, yet honours it


def test_exp_decode_blocks_capped_at_three_times_kv_blocks() -> None:
    blocks = {c for _, _, c in decode_buckets(BucketingConfig(), SHAPE_32K)}
    assert max(blocks) == 3 * 8781
    # hybrids skip the clamp: the worst case ceil(32768 / 128) * 256 is then the top
    unclamped = decode_buckets(BucketingConfig(), dataclasses.replace(SHAPE_32K, skip_decode_block_clamp=True))
    assert max(c for _, _, c in unclamped) == 256 * 256


def test_lin_decode_is_not_capped_by_kv_blocks() -> None:
    blocks = {c for _, _, c in decode_buckets(BucketingConfig(strategy="lin"), SHAPE_32K)}
    assert max(blocks) == 32768 * 256 // 128 > 3 * 8781


def test_contiguous_pa_caps_decode_at_kv_blocks_and_adds_it() -> None:
    cfg = config_from_env({"VLLM_CONTIGUOUS_PA": "true"})
    assert cfg.contiguous_pa
    blocks = {c for _, _, c in decode_buckets(cfg, SHAPE_32K)}
    assert max(blocks) == 8781


# --- rules of the generation ----------------------------------------------------------------------------------------


def test_every_prompt_bucket_passes_the_filters() -> None:
    for strategy in STRATEGIES:
        for b, q, c in prompt_buckets(BucketingConfig(strategy=strategy), SHAPE_32K):
            assert b * q <= 8192
            assert q <= 32768
            assert c <= math.ceil((32768 - 1) / 128)


def test_every_decode_bucket_has_batch_at_most_blocks_and_capped_blocks() -> None:
    for strategy in STRATEGIES:
        for b, q, c in decode_buckets(BucketingConfig(strategy=strategy), SHAPE_32K):
            assert q == 1
            assert b <= c <= b * 256


def test_long_context_edge_bucket_per_query() -> None:
    # at or above 8192 the largest context is replaced by (max_model_len - query) // block_size per query
    buckets = prompt_buckets(BucketingConfig(), SHAPE_32K)
    for q in {q for _, q, _ in buckets}:
        assert (1, q, (32768 - q) // 128) in buckets
    short = prompt_buckets(BucketingConfig(), dataclasses.replace(SHAPE_32K, max_model_len=4096))
    assert max(c for _, _, c in short) == (4096 - 128) // 128


def test_prompt_ctx_max_limits_edge_buckets_under_exp() -> None:
    cfg = config_from_env({"VLLM_PROMPT_CTX_BUCKET_MAX": "200"})
    base, capped = set(prompt_buckets(BucketingConfig(), SHAPE_32K)), set(prompt_buckets(cfg, SHAPE_32K))
    assert capped != base
    assert "VLLM_PROMPT_CTX_BUCKET_MAX" not in overridden_variables(cfg)
    # edges >= 200 are refused and the plain top context (32768 - 8192) // 128 = 192 stays
    assert (1, 128, 192) in capped
    assert (1, 128, (32768 - 128) // 128) not in capped


def test_range_variables_are_overwritten_under_exp_but_count_under_lin() -> None:
    env = {"VLLM_DECODE_BS_BUCKET_MAX": "64", "VLLM_PROMPT_SEQ_BUCKET_MAX": "4096"}
    assert counts(env) == counts({})
    cfg = config_from_env(env)
    assert set(overridden_variables(cfg)) == set(env)
    lin = config_from_env({**env, "VLLM_BUCKETING_STRATEGY": "lin"})
    assert overridden_variables(lin) == ()
    assert max(b for b, _, _ in decode_buckets(lin, SHAPE_32K)) == 64
    assert max(q for _, q, _ in prompt_buckets(lin, SHAPE_32K)) == 4096  # SEQ falls back for the unset QUERY


def test_lin_ignores_pad_variables() -> None:
    cfg = config_from_env({"VLLM_BUCKETING_STRATEGY": "lin", "VLLM_DECODE_BS_BUCKET_PAD_PERCENT": "10"})
    assert overridden_variables(cfg) == ("VLLM_DECODE_BS_BUCKET_PAD_PERCENT",)
    pad = dataclasses.replace(cfg, strategy="pad")
    assert overridden_variables(pad) == ()
    assert decode_buckets(pad, SHAPE_32K) != decode_buckets(BucketingConfig(strategy="pad"), SHAPE_32K)


def test_query_min_one_counts_under_exp() -> None:
    cfg = config_from_env({"VLLM_PROMPT_QUERY_BUCKET_MIN": "1"})
    assert min(q for _, q, _ in prompt_buckets(cfg, SHAPE_32K)) == 1
    assert "VLLM_PROMPT_QUERY_BUCKET_MIN" not in overridden_variables(cfg)
    other = config_from_env({"VLLM_PROMPT_QUERY_BUCKET_MIN": "256"})
    assert prompt_buckets(other, SHAPE_32K) == prompt_buckets(BucketingConfig(), SHAPE_32K)
    assert "VLLM_PROMPT_QUERY_BUCKET_MIN" in overridden_variables(other)


def test_deprecated_exponential_bucketing_overrides_strategy() -> None:
    cfg = config_from_env({"VLLM_BUCKETING_STRATEGY": "pad", "VLLM_EXPONENTIAL_BUCKETING": "false"})
    assert effective_strategy(cfg) == "lin"
    assert "VLLM_BUCKETING_STRATEGY" in overridden_variables(cfg)
    assert effective_strategy(config_from_env({"VLLM_EXPONENTIAL_BUCKETING": "TRUE"})) == "exp"
    # its boolean() maps anything unknown to False, i.e. linear
    assert effective_strategy(config_from_env({"VLLM_EXPONENTIAL_BUCKETING": "maybe"})) == "lin"


def test_merged_prefill_uses_one_batch_and_max_num_seqs() -> None:
    cfg = config_from_env({"VLLM_MERGED_PREFILL": "1"})
    buckets = prompt_buckets(cfg, SHAPE_32K)
    assert {b for b, _, _ in buckets} == {1}
    assert max(c for _, _, c in buckets) > math.ceil(32768 / 128)  # contexts of up to max_num_seqs sequences


def test_prefix_caching_false_turns_contiguous_pa_on() -> None:
    assert config_from_env({"VLLM_PREFIX_CACHING": "false"}).contiguous_pa
    assert not config_from_env({"VLLM_PREFIX_CACHING": "false", "VLLM_CONTIGUOUS_PA": "0"}).contiguous_pa
    assert not config_from_env({}).contiguous_pa


def test_spec_decode_adds_scaled_buckets() -> None:
    seeds = set(decode_buckets(BucketingConfig(), SHAPE_32K))
    spec = set(decode_buckets(BucketingConfig(), dataclasses.replace(SHAPE_32K, num_speculative_tokens=1)))
    assert seeds < spec
    for b, q, c in seeds:  # each seed adds (2b, q, 2c) with the blocks capped at what 2b sequences can hold
        assert (2 * b, q, min(2 * c, 2 * b * 256)) in spec


def test_sliding_window_drops_unsliceable_long_queries() -> None:
    shape = dataclasses.replace(SHAPE_32K, max_num_batched_tokens=16384)
    cfg = config_from_env({"PT_HPU_SDPA_QKV_SLICE_MODE_FWD": "true", "VLLM_FUSEDSDPA_SLIDE_THLD": "4096"})
    kept = prompt_buckets(cfg, shape)
    assert all(c != 0 or q < 4096 or q % 1024 == 0 for _, q, c in kept)
    assert len(kept) < len(prompt_buckets(BucketingConfig(), shape))


def test_bucketing_off_generates_nothing() -> None:
    cfg = config_from_env({"VLLM_ENABLE_BUCKETING": "false"})
    assert prompt_buckets(cfg, SHAPE_32K) == ()
    assert decode_buckets(cfg, SHAPE_32K) == ()
    assert not warmup_enabled(cfg)
    assert not warmup_enabled(config_from_env({"VLLM_SKIP_WARMUP": "true"}))


def test_zero_buckets_is_an_error_as_in_vllm_gaudi() -> None:
    # lin with a prompt batch of 64 and query min 8192 > 8192 / 64: every bucket breaks batch * query <= 8192
    cfg = config_from_env({"VLLM_BUCKETING_STRATEGY": "lin", "VLLM_PROMPT_BS_BUCKET_MIN": "64",
                           "VLLM_PROMPT_BS_BUCKET_MAX": "64", "VLLM_PROMPT_QUERY_BUCKET_MIN": "8192"})  # fmt: skip
    with pytest.raises(ConfigError, match="0 prompt buckets"):
        prompt_buckets(cfg, SHAPE_32K)


# --- ranges against vllm-gaudi's documented examples ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ((0, 8, 64, 64, 0), [0, 1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]),
        ((0, 8, 64, 64, 50), [0, 1, 2, 4, 8, 16, 32, 64]),
        ((0, 8, 64, 16, 50), [0, 1, 2, 4, 8, 16, 32, 48, 64]),
        ((16, 16, 128, 32, 25), [16, 32, 48, 64, 80, 96, 128]),
    ],
)
def test_pad_range_doc_examples(config: tuple[int, int, int, int, int], expected: list[int]) -> None:
    assert sorted(pad_range(*config, what="x")) == expected


def test_lin_range_doc_examples() -> None:
    assert lin_range(2, 32, 64, "x") == [2, 4, 8, 16, 32, 64]
    assert lin_range(128, 128, 512, "x") == [128, 256, 384, 512]
    assert lin_range(1, 64, 128, "x") == [1, 2, 4, 8, 16, 32, 64, 128]


def test_exp_range_docstring_example() -> None:
    assert exp_range(128, 128, 2048, 10, False) == [128, 256, 384, 512, 640, 896, 1152, 1536, 2048]


# --- parsing --------------------------------------------------------------------------------------------------------


def test_ints_parse_as_python_int() -> None:
    cfg = config_from_env({"VLLM_PROMPT_BS_BUCKET_MAX": " 4 ", "VLLM_DECODE_BLOCK_BUCKET_STEP": "1_024"})
    assert cfg.setting("VLLM_PROMPT_BS_BUCKET_MAX") == 4
    assert cfg.decode_block_step == 1024


@pytest.mark.parametrize("raw", ["4.0", "four", "", "0x10"])
def test_bad_int_names_variable_token_and_form(raw: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_env({"VLLM_DECODE_BS_BUCKET_MAX": raw})
    assert "VLLM_DECODE_BS_BUCKET_MAX" in str(err.value)
    assert repr(raw) in str(err.value)
    assert "int()" in str(err.value)


@pytest.mark.parametrize("raw", ["EXP", " exp", "linear", ""])
def test_bad_strategy(raw: str) -> None:
    with pytest.raises(ConfigError, match=r"VLLM_BUCKETING_STRATEGY.*exp, lin, pad"):
        config_from_env({"VLLM_BUCKETING_STRATEGY": raw})


def test_empty_bucket_file_variable_means_no_file() -> None:
    assert config_from_env({"VLLM_BUCKETING_FROM_FILE": ""}).from_file is None


def test_pad_percent_out_of_range_is_an_error() -> None:
    cfg = config_from_env({"VLLM_BUCKETING_STRATEGY": "pad", "VLLM_DECODE_BS_BUCKET_PAD_PERCENT": "60"})
    with pytest.raises(ConfigError, match="pad_percent"):
        decode_buckets(cfg, SHAPE_32K)


def test_prompt_bs_max_zero_is_an_error() -> None:
    with pytest.raises(ConfigError, match="VLLM_PROMPT_BS_BUCKET_MAX"):
        prompt_buckets(config_from_env({"VLLM_PROMPT_BS_BUCKET_MAX": "0"}), SHAPE_32K)


# --- vision ---------------------------------------------------------------------------------------------------------


def test_vision_buckets_from_env() -> None:
    assert vision_buckets_from_env(None) == DEFAULT_QWEN
    assert vision_buckets_from_env("") == DEFAULT_QWEN
    assert vision_buckets_from_env("None") is None
    assert vision_buckets_from_env(" 4096, 1600 ,+2048") == (1600, 2048, 4096)  # int() takes spaces and signs
    assert vision_buckets_from_env("1600,1600") == (1600, 1600)  # duplicates kept
    assert vision_buckets_from_env(None, "qwen3_vl") == (196, 256, 441, 480, 576, 900, 1156)
    assert vision_buckets_from_env(None, "llava") == (1, 2, 4, 8)  # unknown: batch based


@pytest.mark.parametrize("raw", ["1600,", "none", "NONE", "1600,,3136", "16x16"])
def test_vision_buckets_bad(raw: str) -> None:
    with pytest.raises(ConfigError, match="VLLM_MULTIMODAL_BUCKETS"):
        vision_buckets_from_env(raw)


def test_vision_35_graphs_when_image_named() -> None:
    result = vision_warmup(DEFAULT_QWEN, None, {"image": 1})
    assert result.warmed
    assert len(result.graphs) == 35
    assert {g[0] for g in result.graphs} == {"image"}
    assert all(g[3] == 1 for g in result.graphs)
    # first bucket 1600 patches: 40 x 14 = 560 high; 1:1, 4:3, 3:4, 16:9, 9:16 with even patch widths
    assert result.graphs[:5] == (
        ("image", 560, 560, 1), ("image", 756, 560, 1), ("image", 420, 560, 1),
        ("image", 1008, 560, 1), ("image", 308, 560, 1),
    )  # fmt: skip


def test_vision_none_when_image_not_named() -> None:
    for limit in (None, {}, {"video": 999}, {"image": 0}):
        result = vision_warmup(DEFAULT_QWEN, None, limit)
        assert not result.warmed
        assert result.graphs == ()
        assert "image" in result.reason


def test_vision_video_named_is_warmed_too() -> None:
    result = vision_warmup(DEFAULT_QWEN, None, {"image": 2, "video": 1})
    assert [g[0] for g in result.graphs].count("video") == 35
    assert len(result.graphs) == 70


def test_vision_resolutions_add_counts_capped_at_limit() -> None:
    base = 35
    limit = {"image": 4}
    assert len(vision_warmup(DEFAULT_QWEN, "1024x768", limit).graphs) == base + 1
    assert vision_warmup(DEFAULT_QWEN, "1024x768", limit).graphs[-1] == ("image", 1024, 768, 4)  # WxH: the limit
    assert vision_warmup(DEFAULT_QWEN, "1024x768x9", limit).graphs[-1] == ("image", 1024, 768, 4)  # capped
    ranged = vision_warmup(DEFAULT_QWEN, "1024x768x2-3,640x480x1-9", limit).graphs[base:]
    assert [g[3] for g in ranged] == [2, 3, 1, 2, 3, 4]  # N-M+1 each, capped at 4
    assert len(vision_warmup(DEFAULT_QWEN, "1024x768x5-9", limit).graphs) == base  # range above the limit: none


def test_vision_duplicate_of_guessed_shape_is_dropped() -> None:
    assert len(vision_warmup(DEFAULT_QWEN, "560x560x1", {"image": 1}).graphs) == 35
    assert len(vision_warmup(DEFAULT_QWEN, "560x560", {"image": 1}).graphs) == 36  # count None differs


def test_vision_none_buckets_fail_warmup() -> None:
    result = vision_warmup(None, None, {"image": 1})
    assert result.fails
    assert "len()" in result.reason
    assert vision_warmup(None, None, None).fails  # len() comes before the per-modality check (qwen2_5_vl)
    assert not vision_warmup(None, None, None, model_type="gemma-3").fails  # batch based: only a warmed modality
    assert vision_warmup(DEFAULT_QWEN, None, {"image": 1}, warmup=False).graphs == ()


def test_vision_limit_dict_with_shape() -> None:
    result = vision_warmup(DEFAULT_QWEN, None, {"image": {"count": 3, "width": 512, "height": 384}})
    assert result.graphs[-1] == ("image", 512, 384, 3)
    no_count = vision_warmup(DEFAULT_QWEN, "640x480", {"image": {"width": 512, "height": 384}})
    assert no_count.graphs[-1][3] == 999  # vLLM's default count for a dict without one


def test_parse_resolutions() -> None:
    assert parse_resolutions("1024x768, 448X448x2 ,640x480x1-4,") == (
        (1024, 768, 0, 0), (448, 448, 2, 2), (640, 480, 1, 4),
    )  # fmt: skip
    assert parse_resolutions("") == ()


@pytest.mark.parametrize("raw", ["1024", "1024x768x1x2", "axb", "1024x768x0-2", "1024x768x3-2", "1024x768x0", "1x2x-1"])
def test_parse_resolutions_bad(raw: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_resolutions(raw)
    assert "VLLM_MULTIMODAL_RESOLUTIONS" in str(err.value)
    assert repr(raw) in str(err.value)
    # every refusal names every accepted form (r15gaudi 20: a bad count range named only "N-M")
    assert "accepted: comma-separated WxH, WxHxN or WxHxN-M" in str(err.value)


def test_format_resolutions_round_trips() -> None:
    text = format_resolutions([(1024, 768), (448, 448), (1024, 768)])
    assert text == "1024x768,448x448"
    assert parse_resolutions(text) == ((1024, 768, 0, 0), (448, 448, 0, 0))
    assert format_resolutions([(640, 480)], counts=(1, 4)) == "640x480x1-4"
    assert format_resolutions([(640, 480)], counts=(2, 2)) == "640x480x2"
    with pytest.raises(ConfigError):
        format_resolutions([(0, 480)])


# --- bucket files (VLLM_BUCKETING_FROM_FILE) ------------------------------------------------------------------------

SAMPLE_FILE = """# my buckets
(1, 2048, 0)

(1, [256, 512], [0, 4, 8])
   # indented comment
(64, 1, 1024)
2, 1, 512
(1, 1, range(256, 512, 32))  # trailing comment
(1, 1024.9, '3')
"""


def with_file(text: str, cfg: BucketingConfig | None = None) -> BucketingConfig:
    return dataclasses.replace(cfg or BucketingConfig(), from_file="/x/buckets.txt", file_text=text)


def test_parse_bucket_file_sample() -> None:
    prompt, decode = parse_bucket_file(SAMPLE_FILE)
    assert prompt == sorted(
        [(1, 2048, 0), (1, 256, 0), (1, 256, 4), (1, 256, 8), (1, 512, 0), (1, 512, 4), (1, 512, 8), (1, 1024, 3)]
    )
    assert decode == sorted([(64, 1, 1024), (2, 1, 512)] + [(1, 1, c) for c in range(256, 512, 32)])


@pytest.mark.parametrize(
    "line",
    [
        "(1, 1, range(256, 512, 0))",  # step 0 stays a call
        "(1, 1, range(0, 20002, 2))",  # more than 10000 elements stays a call
        "(1, 1, range(512))",  # one-argument range is not expanded
        "(1, 2048)",  # not a 3-tuple
        "(1, 2048, 0),",  # a 1-tuple
        "[1, 2048, 0]",  # a list, not a tuple
        "(1, 'x', 0)",  # int('x') fails
        "(1, (2, 3), 0)",  # a tuple inside is not expanded: int((2, 3)) fails
        "bucket(1, 2, 3)",
    ],
)
def test_bucket_file_lines_that_stop_vllm_gaudi(line: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_bucket_file(f"# header\n(1, 128, 0)\n{line}\n")
    assert "line 3" in str(err.value)
    assert "VLLM_BUCKETING_FROM_FILE" in str(err.value)


def test_file_buckets_pass_the_same_filters() -> None:
    text = "(1, 128, [0, 300])\n(128, 128, 0)\n(4, 1, [2, 100000])\n(1, 1, 8)\n"
    assert prompt_buckets(with_file(text), SHAPE_32K) == ((1, 128, 0),)  # 300 > 256 blocks; 128 x 128 > 8192
    assert decode_buckets(with_file(text), SHAPE_32K) == ((1, 1, 8), (4, 1, 1024))  # 4 > 2 dropped; capped


def test_file_without_decode_bucket_fails() -> None:
    with pytest.raises(ConfigError, match="0 decode buckets"):
        decode_buckets(with_file("(1, 128, 0)\n"), SHAPE_32K)


def test_file_content_is_required() -> None:
    cfg = config_from_env({"VLLM_BUCKETING_FROM_FILE": "/x/buckets.txt"})
    assert effective_strategy(cfg) == "file"
    with pytest.raises(ConfigError, match="file_text"):
        prompt_buckets(cfg, SHAPE_32K)


def test_file_makes_ranges_and_strategy_moot() -> None:
    cfg = config_from_env(
        {"VLLM_BUCKETING_FROM_FILE": "/x/b.txt", "VLLM_BUCKETING_STRATEGY": "lin", "VLLM_DECODE_BS_BUCKET_MAX": "8"}
    )
    assert set(overridden_variables(cfg)) == {"VLLM_BUCKETING_STRATEGY", "VLLM_DECODE_BS_BUCKET_MAX"}


def test_file_does_not_name_a_strategy_nobody_set() -> None:
    cfg = config_from_env({"VLLM_BUCKETING_FROM_FILE": "/x/b.txt", "VLLM_DECODE_BS_BUCKET_MAX": "8"})
    assert overridden_variables(cfg) == ("VLLM_DECODE_BS_BUCKET_MAX",)
    assert overridden_variables(config_from_env({"VLLM_BUCKETING_FROM_FILE": "/x/b.txt"})) == ()


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("max_model_len", [8192, 32768, 128000])
def test_bucket_file_round_trip(strategy: str, max_model_len: int) -> None:
    shape = dataclasses.replace(SHAPE_32K, max_model_len=max_model_len)
    cfg = BucketingConfig(strategy=strategy)
    prompt, decode = prompt_buckets(cfg, shape), decode_buckets(cfg, shape)
    text = bucket_file(prompt, decode)
    assert parse_bucket_file(text) == (sorted(prompt), sorted(decode))
    assert prompt_buckets(with_file(text), shape) == prompt
    assert decode_buckets(with_file(text), shape) == decode


def test_bucket_file_round_trip_with_ranges_and_contiguous_pa() -> None:
    env = {"VLLM_BUCKETING_STRATEGY": "pad", "VLLM_CONTIGUOUS_PA": "1", "VLLM_PROMPT_BS_BUCKET_MAX": "4"}
    cfg = config_from_env({**env, "VLLM_DECODE_BLOCK_BUCKET_PAD_PERCENT": "50"})
    prompt, decode = prompt_buckets(cfg, SHAPE_32K), decode_buckets(cfg, SHAPE_32K)
    file_cfg = with_file(bucket_file(prompt, decode), cfg)
    assert (prompt_buckets(file_cfg, SHAPE_32K), decode_buckets(file_cfg, SHAPE_32K)) == (prompt, decode)


def test_bucket_file_with_spec_decode_takes_seeds() -> None:
    shape = dataclasses.replace(SHAPE_32K, num_speculative_tokens=2)
    seeds = decode_buckets(BucketingConfig(), SHAPE_32K)
    text = bucket_file(prompt_buckets(BucketingConfig(), shape), seeds)
    assert decode_buckets(with_file(text), shape) == decode_buckets(BucketingConfig(), shape)


def test_bucket_file_is_compact_and_commented() -> None:
    text = bucket_file([(1, 128, 0), (1, 128, 4), (2, 256, 0)], [(1, 1, 128), (1, 1, 256)])
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == ["(1, 128, [0, 4])", "(2, 256, 0)", "(1, 1, [128, 256])"]
    assert "091bbadd" in text


@pytest.mark.parametrize(
    ("prompt", "decode", "match"),
    [
        ([(1, 1, 0)], [(1, 1, 128)], "query length 1"),
        ([(1, 128, 0)], [(1, 2, 128)], "query length 1"),
        ([], [(1, 1, 128)], "no prompt bucket"),
        ([(1, 128, 0)], [], "no decode bucket"),
        ([(0, 128, 0)], [(1, 1, 128)], "invalid"),
    ],
)
def test_bucket_file_refuses_what_the_format_cannot_say(
    prompt: list[tuple[int, int, int]], decode: list[tuple[int, int, int]], match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        bucket_file(prompt, decode)


# --- overridden_variables: a listed variable never changes the buckets ----------------------------------------------

# small enough that no draw builds a huge grid (steps of 1 with large maxima would take minutes, here and there)
_VALUES = {
    "min": ["0", "1", "2", "128"],
    "step": ["16", "64", "256"],
    "max": ["4", "64", "1024"],
    "pad_max": ["0", "16", "64"],
    "pad_percent": ["0", "25", "50"],
}


def _outcome(cfg: BucketingConfig, shape: EngineShape) -> object:
    try:
        return (prompt_buckets(cfg, shape), decode_buckets(cfg, shape))
    except ConfigError:
        return "fails"


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    strategy=st.sampled_from(STRATEGIES),
    chosen=st.lists(st.sampled_from(RANGE_VARIABLES), max_size=6, unique=True),
    data=st.data(),
    mml=st.sampled_from([2048, 8192, 12288]),
    mns=st.sampled_from([4, 32]),
    merged=st.booleans(),
)
def test_overridden_variables_do_not_change_buckets(
    strategy: str, chosen: list[str], data: st.DataObject, mml: int, mns: int, merged: bool
) -> None:
    env = {"VLLM_BUCKETING_STRATEGY": strategy}
    if merged:
        env["VLLM_MERGED_PREFILL"] = "1"
    for var in chosen:
        param = "pad_" + var.rsplit("_", 1)[1].lower() if "_PAD_" in var else var.rsplit("_", 1)[1].lower()
        env[var] = data.draw(st.sampled_from(_VALUES[param]))
    cfg = config_from_env(env)
    shape = EngineShape(max_model_len=mml, max_num_seqs=mns, max_num_batched_tokens=2048, block_size=128,
                        num_kv_blocks=300)  # fmt: skip
    expected = _outcome(cfg, shape)
    for var in overridden_variables(cfg):
        if var in RANGE_VARIABLES:
            unset: dict[str, Any] = {var.removeprefix("VLLM_").replace("_BUCKET", "").lower(): None}
            assert _outcome(dataclasses.replace(cfg, **unset), shape) == expected, var


def test_vision_graph_patches_of_default_warmup() -> None:
    result = vision_warmup(DEFAULT_QWEN, None, {"image": 1})
    patches = vision_graph_patches(result, DEFAULT_QWEN)
    # 1600's five shapes: 560x560 = 40x40 patches -> 1600; 756x560 = 54x40 = 2160 -> 3136; 420x560 -> 1600; ...
    assert patches[:2] == (1600, 3136)
    assert set(DEFAULT_QWEN) <= set(patches)
    # 12544's 4:3 shape 2100x1568 is 150x112 = 16800 patches, above every bucket: compiled at its exact size
    assert 16800 in patches
    assert sorted(p for p in patches if p > 12544) == [13728, 16320, 16800, 22400]
    assert vision_graph_patches(vision_warmup(DEFAULT_QWEN, None, None), DEFAULT_QWEN) == ()
    # item counts do not add tower shapes: images run one at a time
    ranged = vision_warmup(DEFAULT_QWEN, "560x560x1-4", {"image": 4})
    assert vision_graph_patches(ranged, DEFAULT_QWEN) == patches


@pytest.mark.parametrize(
    ("line", "runtime"),
    [
        ("(1, 128,", "fails at start-up on such a line: its reader means to skip it"),  # literal_eval fails
        ("(1, 128)", "fails at start-up on such a line: its reader means to skip it"),  # not a 3-tuple
        ("(range(1, 100000), 1, 2)", "fails at start-up on such a line: its reader means to skip it"),  # unexpanded
        ("('a', 128, 0)", "fails at start-up on such a line (int() of the item"),  # int('a') outside its try
    ],
)
def test_a_bad_bucket_line_says_what_vllm_gaudi_does_with_it(line: str, runtime: str) -> None:
    # file_strategy.py:46-54 (#1245, unchanged v0.17.1 - 091bbadd) calls .warning on the logger *function* to skip a
    # line it cannot read: the AttributeError stops the server (its reader, run on such a line, raises it)
    with pytest.raises(ConfigError) as info:
        parse_bucket_file(f"(1, 128, 0)\n{line}\n")
    assert runtime in str(info.value)
    assert "skips such a line" not in str(info.value)
    assert "line 2" in str(info.value)

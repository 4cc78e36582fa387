"""vllm-fork's 2024 linear bucketing (@e30ddc3db): the ranges and products its warm-up generates, checked against the
held-out public log of its PR #147 (tests/data/gaudi_logs/heldout/vllm_fork_147_llama3_8b_gaudi2.log)."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes.vllm_fork.linear import linear_buckets, warmup_buckets, warmup_range


def test_range_doubles_below_the_step_then_steps() -> None:
    assert warmup_range((2, 32, 64)) == [2, 4, 8, 16, 32, 64]  # the docstring's example at @e30ddc3db
    assert warmup_range((1, 32, 4)) == [1, 2, 4]


def test_the_pr_147_log_is_reproduced_from_its_settings() -> None:
    # logged: "Prompt bucket config ... bs:[1, 32, 4], seq:[128, 128, 1024]" -> "Generated 24 prompt buckets";
    # "Decode bucket config ... bs:[1, 128, 4], seq:[128, 128, 2048]" -> "Generated 48 decode buckets"
    prompt = warmup_buckets((1, 32, 4), (128, 128, 1024))
    assert len(prompt) == 24
    assert sorted(prompt)[:3] == [(1, 128), (1, 256), (1, 384)]
    assert len(warmup_buckets((1, 128, 4), (128, 128, 2048))) == 48


def test_defaults_at_four_sequences_are_the_logged_settings() -> None:
    prompt, decode = linear_buckets({}, max_num_seqs=4, block_size=128)
    assert (len(prompt), len(decode)) == (24, 48)


def test_variables_override_defaults_and_bad_ones_fail() -> None:
    prompt, _ = linear_buckets({"VLLM_PROMPT_SEQ_BUCKET_MAX": "2048"}, max_num_seqs=4, block_size=128)
    assert max(s for _, s in prompt) == 2048
    with pytest.raises(ConfigError, match="VLLM_DECODE_BS_BUCKET_MAX"):
        linear_buckets({"VLLM_DECODE_BS_BUCKET_MAX": "x"}, max_num_seqs=4, block_size=128)
    with pytest.raises(ConfigError, match="the bucket range's min 8 is above the bucket range's max 4"):
        warmup_range((8, 2, 4))

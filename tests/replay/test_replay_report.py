"""The line that says no request ran names what stopped them and its own fix (held-out round 8, C28, C15): an
engine refusal is not cured by a higher request rate."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.replay.report import Report, no_request_line
from vllm_hpu_mm.runtimes.vllm_gaudi import TRAITS


def report(refused: tuple[tuple[str, int], ...], unsent: int, kv_blocks: int = 3) -> Report:
    engine = {"max_model_len": 8192, "max_num_seqs": 64, "max_num_batched_tokens": 8192, "block_size": 128,
              "num_kv_blocks": kv_blocks}  # fmt: skip
    return Report((), "traffic.csv", "8 requests at once (given)", 0, engine, TRAITS, None, None, False,
                  refused=refused, sampled=200, unsent=unsent)  # fmt: skip


@pytest.mark.parametrize(
    ("refused", "unsent", "said", "not_said"),
    [
        ((("kv_blocks", 200),), 0, ["more KV blocks (a larger --kv-blocks) or a shorter --max-model-len",
                                    "the cache's 3 KV blocks are below the 64 one request of max_model_len 8192"],
         "--request-rate"),
        ((("prompt_too_long", 200),), 0, ["a --max-model-len above the longest prompt"], "--request-rate"),
        ((("empty", 150),), 50, ["prompts of at least one token", "50 never sent", "a higher --request-rate"], None),
        ((), 200, ["200 never sent: the load ended first", "a higher --request-rate"], "refused"),
    ],
)  # fmt: skip
def test_no_request_ran_names_the_cause_and_its_fix(
    refused: tuple[tuple[str, int], ...], unsent: int, said: list[str], not_said: str | None
) -> None:
    line = no_request_line(report(refused, unsent))
    assert line.startswith("no request ran under 8 requests at once (given) (0 of 200 sampled): ")
    for words in said:
        assert words in line
    if not_said is not None:
        assert not_said not in line


def test_a_cache_that_holds_a_whole_request_is_not_blamed() -> None:
    line = no_request_line(report((("kv_blocks", 200),), 0, kv_blocks=64))
    assert "below the" not in line
    assert "more KV blocks" in line

"""The scheduler model (vLLM 0.32's V1 scheduler under a closed loop): chunked prefill within the token budget,
prefix-cache hits in whole blocks, the running-sequence limit, decode runs summarised exactly, refusals."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.replay.scheduler import DecodeRun, Limits, Prompt, simulate

LIMITS = Limits(max_num_seqs=4, max_num_batched_tokens=1000, max_model_len=8192, block_size=128,
                num_kv_blocks=10_000)  # fmt: skip


def chunks(trace_events: tuple[object, ...]) -> list[tuple[int, int]]:
    return [(c.query, c.context) for e in trace_events if not isinstance(e, DecodeRun) for c in e]  # type: ignore[attr-defined]


def test_a_prompt_longer_than_the_budget_is_prefilled_in_chunks() -> None:
    trace = simulate([Prompt(2500, 3)], LIMITS, 1)
    assert chunks(trace.events) == [(1000, 0), (1000, 1000), (500, 2000)]


def test_a_prefix_cache_hit_skips_whole_blocks_and_never_the_last_token() -> None:
    trace = simulate([Prompt(600, 2, cached=300)], LIMITS, 1)
    assert chunks(trace.events) == [(600 - 256, 256)]
    whole = simulate([Prompt(256, 2, cached=256)], LIMITS, 1)
    assert chunks(whole.events) == [(128, 128)]


def test_decode_steps_carry_every_running_sequence_and_their_blocks() -> None:
    trace = simulate([Prompt(100, 3), Prompt(200, 3)], LIMITS, 2)
    decodes = [e for e in trace.events if isinstance(e, DecodeRun)]
    assert sum(d.steps for d in decodes) == 2  # two tokens after the first, decoded together
    assert all(d.sequences == 2 and d.blocks == 1 + 2 for d in decodes)  # ceil(101/128) + ceil(201/128)


def test_the_running_limit_holds_and_the_load_is_a_closed_loop() -> None:
    trace = simulate([Prompt(50, 40)] * 20, LIMITS, 10)
    decodes = [e for e in trace.events if isinstance(e, DecodeRun)]
    assert max(d.sequences for d in decodes) == LIMITS.max_num_seqs


def test_prompts_the_server_refuses_are_counted_not_run() -> None:
    trace = simulate([Prompt(8192, 5), Prompt(100, 2)], LIMITS, 1)
    assert trace.refused == 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5000), min_size=1, max_size=6), st.integers(1, 700), st.sampled_from([16, 128]))
def test_summarised_decode_runs_equal_the_steps_one_by_one(contexts: list[int], steps: int, block: int) -> None:
    from vllm_hpu_mm.replay.scheduler import _decode_runs

    runs = list(_decode_runs(contexts, steps, block))
    one_by_one = [sum(math.ceil((c + t + 1) / block) for c in contexts) for t in range(steps)]
    expanded = [r.blocks for r in runs for _ in range(r.steps)]
    assert expanded == one_by_one


def test_images_are_encoded_whole_within_the_encoder_budget() -> None:
    # two requests with a 900-token image each, budget 1000 tokens: the second waits for the next step's encoder
    trace = simulate([Prompt(950, 2, image_tokens=(900,)), Prompt(950, 2, image_tokens=(900,))], LIMITS, 2)
    first_step = next(e for e in trace.events if not isinstance(e, DecodeRun))
    assert [c.query for c in first_step] == [950]

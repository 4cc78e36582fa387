"""The scheduler model (vLLM 0.32's V1 scheduler under a closed loop): chunked prefill within the token budget,
prefix-cache hits in whole blocks, the running-sequence limit, decode runs summarised exactly, refusals."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.replay.scheduler import (
    Arrivals,
    DecodeRun,
    Prompt,
    _admissions,
    _DecodeBatch,
    _Scheduler,
    _Seq,
    simulate,
)

LIMITS = EngineShape(max_num_seqs=4, max_num_batched_tokens=1000, max_model_len=8192, block_size=128,
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


def member(context: int, generated: int, output: int, order: int) -> _Seq:
    return _Seq(Prompt(max(1, context), output), output, context, 0, [], generated, order=order)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5000), min_size=1, max_size=6), st.integers(1, 700), st.sampled_from([16, 128]))
def test_summarised_decode_runs_equal_the_steps_one_by_one(contexts: list[int], steps: int, block: int) -> None:
    batch = _DecodeBatch(block)
    for i, c in enumerate(contexts):
        batch.join(member(c, 1, 10_000, i))
    runs = list(batch.runs(steps))
    one_by_one = [sum(math.ceil((c + t + 1) / block) for c in contexts) for t in range(steps)]
    expanded = [r.blocks for r in runs for _ in range(r.steps)]
    assert expanded == one_by_one
    assert all(r.steps > 0 and r.sequences == len(contexts) for r in runs)
    assert all(a.blocks != b.blocks for a, b in itertools.pairwise(runs))  # runs split only on a change


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["join", "leave", "step", "steps"]), st.integers(0, 400),
                          st.integers(1, 300)), min_size=1, max_size=60),
       st.sampled_from([1, 4, 16, 128]))  # fmt: skip
def test_the_decode_batch_kept_by_changes_equals_its_members_recounted(ops: list[tuple[str, int, int]],
                                                                      block: int) -> None:  # fmt: skip
    """Joins, leaves and steps in any order: the batch's count, KV blocks, next finish and finished members equal a
    plain pass over its members (their contexts and tokens kept one by one)."""
    batch = _DecodeBatch(block)
    plain: dict[int, list[int]] = {}  # order -> [context, generated, output]
    members: dict[int, _Seq] = {}
    for i, (op, a, b) in enumerate(ops):
        if op == "join" or not plain:
            s = member(a, 1, 1 + b, i)
            members[i], plain[i] = s, [a, 1, 1 + b]
            batch.join(s)
        elif op == "leave":
            order = sorted(plain)[a % len(plain)]
            batch.leave(members[order])
            assert [members[order].computed, members[order].generated] == plain.pop(order)[:2]
            del members[order]
        else:
            k = min(1 if op == "step" else b, min(o - g for _, g, o in plain.values()))
            runs = list(batch.runs(k))
            expanded = [r.blocks for r in runs for _ in range(r.steps)]
            assert expanded == [sum((c + t + block) // block for c, _, _ in plain.values()) for t in range(k)]
            batch.advance(k)
            for v in plain.values():
                v[0] += k
                v[1] += k
            ended = {o for o, (_, g, out) in plain.items() if g >= out}
            assert [s.order for s in batch.finished()] == sorted(ended)
            for o in ended:
                batch.leave(members.pop(o))
                del plain[o]
        assert batch.size == len(plain)
        assert batch.blocks == sum(math.ceil((c + 1) / block) for c, _, _ in plain.values())
        assert all(batch.context(members[o]) == c for o, (c, _, _) in plain.items())
        if plain:
            assert batch.remaining() == min(o - g for _, g, o in plain.values())


class _Audited(_Scheduler):
    """The scheduler with its running requests recounted after every step: the kept state must equal a pass over
    the running list."""

    def _step(self) -> None:
        super()._step()
        self.audit()

    def _decode_stretch(self) -> None:
        super()._decode_stretch()
        self.audit()

    def audit(self) -> None:
        block, batch = self.limits.block_size, self.batch
        decoding = [s for s in self.running if s.ends >= 0]
        assert self.prefilling == [s for s in self.running if s.computed < s.prompt.tokens]
        assert [s.order for s in self.running] == sorted(s.order for s in self.running)
        assert len(decoding) + len(self.prefilling) == len(self.running) == batch.size + len(self.prefilling)
        assert batch.blocks == sum(math.ceil((batch.context(s) + 1) / block) for s in decoding)
        assert all(batch.context(s) >= s.prompt.tokens and s.generated >= 1 for s in decoding)
        assert self.reserved == sum(s.need_blocks for s in self.running)
        if decoding:
            assert batch.remaining() == min(s.output - s.generated - batch.clock + s.joined for s in decoding) > 0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 700), st.integers(1, 90), st.integers(0, 300),
                          st.lists(st.integers(10, 130), max_size=3)), min_size=1, max_size=30),
       st.sampled_from([2, 8, 64, 256]), st.integers(1, 12), st.sampled_from([None, 50.0, 2000.0]),
       st.sampled_from([4, 16, 128]))  # fmt: skip
def test_the_kept_running_state_equals_the_running_list_recounted_at_every_step(
        rows: list[tuple[int, int, int, list[int]]], tokens: int, clients: int, rate: float | None,
        block: int) -> None:  # fmt: skip
    limits = EngineShape(max_num_seqs=6, max_num_batched_tokens=tokens, max_model_len=2048, block_size=block,
                         num_kv_blocks=300)  # fmt: skip
    prompts = [Prompt(t, o, min(c, t), tuple(i)) for t, o, c, i in rows]
    arrivals = Arrivals(rate=rate) if rate else Arrivals(concurrency=clients)
    clock = (lambda e: 0.01) if rate else None
    trace = _Audited(prompts, limits, arrivals, None, True, clock, None).run()
    assert trace.completed + trace.refused == len(prompts)


def test_a_decoding_request_behind_a_chunk_that_spends_the_budget_sits_the_step_out() -> None:
    # A's first chunk stops before its second image (the encoder budget is spent), B is admitted and prefilled in
    # that step; from the next step A's chunks take the whole budget ahead of B until A's last chunk leaves room
    limits = dataclasses.replace(LIMITS, max_num_batched_tokens=100)
    trace = simulate([Prompt(500, 3, image_tokens=(60, 60)), Prompt(30, 4)], limits, 2)
    by_step: dict[int, list[object]] = {}
    for start, event in zip(trace.starts, trace.events, strict=True):
        by_step.setdefault(start, []).append(event)
    assert [c.query for c in by_step[0][0]] == [60, 30]  # type: ignore[attr-defined]
    assert all(len(by_step[step]) == 1 and not isinstance(by_step[step][0], DecodeRun) for step in range(1, 5))
    decode = by_step[5][0]
    assert isinstance(decode, DecodeRun)
    assert decode.sequences == 1  # B's 2nd token, beside A's last chunk
    # both have their last token at step 7 (B sat four steps out): spans in admission order
    assert [(s.first, s.finish) for s in trace.spans] == [(5, 7), (0, 7)]


def test_images_are_encoded_whole_within_the_encoder_budget() -> None:
    # two requests with a 900-token image each, budget 1000 tokens: the second waits for the next step's encoder
    trace = simulate([Prompt(950, 2, image_tokens=(900,)), Prompt(950, 2, image_tokens=(900,))], LIMITS, 2)
    first_step = next(e for e in trace.events if not isinstance(e, DecodeRun))
    assert [c.query for c in first_step] == [950]


def test_the_drain_runs_every_admitted_request_to_its_end_the_batch_falling_to_one() -> None:
    prompts = [Prompt(50, 10 + 7 * i) for i in range(12)]
    cut = simulate(prompts, LIMITS, 4, drain=False)
    whole = simulate(prompts, LIMITS, 4)
    assert whole.completed == 12
    assert cut.completed < 12
    decodes = [e for e in whole.events if isinstance(e, DecodeRun)]
    assert decodes[-1].sequences == 1  # the longest answer finishes alone
    assert sum(d.steps for d in decodes if d.sequences < 4) > sum(
        d.steps for d in cut.events if isinstance(d, DecodeRun) and d.sequences < 4
    )


def constant_clock(event: object) -> float:
    return 0.01  # every step 10 ms


def test_poisson_arrivals_are_seeded_leave_the_server_idle_at_a_low_rate_and_all_finish() -> None:
    prompts = [Prompt(50, 5)] * 40
    low = simulate(prompts, LIMITS, Arrivals(rate=2.0, seed=3), clock=constant_clock)
    again = simulate(prompts, LIMITS, Arrivals(rate=2.0, seed=3), clock=constant_clock)
    assert low.events == again.events
    assert low.completed == 40
    assert low.idle_s > low.busy_s  # 2 requests/s of 60 ms each: mostly idle
    high = simulate(prompts, LIMITS, Arrivals(rate=1000.0, seed=3), clock=constant_clock)
    assert max(d.sequences for d in high.events if isinstance(d, DecodeRun)) > max(
        d.sequences for d in low.events if isinstance(d, DecodeRun)
    )
    assert [s.arrival_s for s in low.spans] == sorted(s.arrival_s for s in low.spans)


def test_a_request_arrives_at_its_time_in_seconds_not_at_its_image_position() -> None:
    # a cached prefix and an image: the position after them (400 tokens) must not leak into the arrival time
    prompts = [Prompt(500, 5, cached=300, image_tokens=(100,))] * 6
    poisson = simulate(prompts, LIMITS, Arrivals(rate=2.0, seed=3), clock=constant_clock)
    rng, t, due = random.Random(3), 0.0, []
    for _ in prompts:
        t += rng.expovariate(2.0)
        due.append(t)
    assert sorted(s.arrival_s for s in poisson.spans) == pytest.approx(due)
    assert all(s.arrival_s <= s.first_s <= s.finish_s for s in poisson.spans)
    one = simulate(prompts, LIMITS, 1, clock=constant_clock)  # one client: each request arrives as the last finishes
    assert [s.arrival_s for s in one.spans] == [0.0] + [s.finish_s for s in one.spans[:-1]]


def test_a_refused_request_keeps_its_arrival_slot_and_the_next_request_its_own() -> None:
    # vLLM 0.32's client (vllm/benchmarks/serve.py get_request) draws an arrival for every request, refused ones too
    prompts = [Prompt(8192, 5) if k % 2 else Prompt(50, 5) for k in range(10)]  # every other one too long
    poisson = simulate(prompts, LIMITS, Arrivals(rate=2.0, seed=3), clock=constant_clock)
    rng, t, due = random.Random(3), 0.0, []
    for _ in prompts:
        t += rng.expovariate(2.0)
        due.append(t)
    assert poisson.refused == 5
    assert [s.arrival_s for s in poisson.spans] == pytest.approx(due[0::2])
    assert poisson.refused_s == pytest.approx((due[1], due[9]))
    times = tuple(float(k) for k in range(10))
    recorded = simulate(prompts, LIMITS, Arrivals(times=times), clock=constant_clock)
    assert [s.arrival_s for s in recorded.spans] == pytest.approx(times[0::2])
    one = simulate(prompts, LIMITS, 1, clock=constant_clock)  # a closed loop's client sends its next at once
    assert one.refused_s == ()
    assert [s.arrival_s for s in one.spans] == [0.0] + [s.finish_s for s in one.spans[:-1]]


def test_arrivals_in_time_need_a_clock_and_bounded_values() -> None:
    with pytest.raises(ConfigError, match="time model"):
        simulate([Prompt(50, 5)], LIMITS, Arrivals(rate=1.0))
    with pytest.raises(ConfigError, match="accepted"):
        Arrivals(rate=0.0)
    with pytest.raises(ConfigError, match="accepted"):
        Arrivals(profile=((10.0, -1),))


def test_a_profile_of_clients_over_time_bounds_the_running_requests_per_segment_then_drains() -> None:
    prompts = [Prompt(50, 30)] * 400
    trace = simulate(prompts, LIMITS, Arrivals(profile=((2.0, 1), (2.0, 4), (2.0, 0), (1.0, 2))), clock=constant_clock)
    sizes = [e.sequences for e in trace.events if isinstance(e, DecodeRun)]
    assert max(sizes) == 4
    assert trace.idle_s > 1.5  # the 0-client segment
    assert trace.completed == len(trace.spans) < 400  # the profile ended before the requests did


def test_refused_requests_are_counted_by_reason() -> None:
    small = EngineShape(
        max_num_seqs=4, max_num_batched_tokens=1000, max_model_len=8192, block_size=128, num_kv_blocks=20
    )
    trace = simulate([Prompt(8192, 5), Prompt(0, 5), Prompt(4000, 100), Prompt(100, 2)], small, 1)
    assert dict(trace.refusals) == {"prompt_too_long": 1, "empty": 1, "kv_blocks": 1}
    assert trace.refused == 3
    assert trace.completed == 1


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3000), st.integers(1, 60), st.integers(0, 3000)), min_size=1, max_size=25),
       st.integers(1, 6))  # fmt: skip
def test_every_admitted_request_has_a_span_in_step_order(rows: list[tuple[int, int, int]], clients: int) -> None:
    trace = simulate([Prompt(t, o, min(c, t)) for t, o, c in rows], LIMITS, clients)
    assert trace.completed + trace.refused == len(rows)
    assert len(trace.spans) == trace.completed
    for span in trace.spans:
        assert span.arrival <= span.first <= span.finish < trace.steps
    assert list(trace.starts) == sorted(trace.starts)
    assert len(trace.starts) == len(trace.events)


def test_a_tuple_of_prompts_admitted_once_schedules_as_the_prompts_one_by_one() -> None:
    shape = EngineShape(max_num_seqs=4, max_num_batched_tokens=512, max_model_len=4096, block_size=128,
                        num_kv_blocks=20)  # fmt: skip
    # refused (empty, too long, more KV blocks than the cache), images after a cached prefix
    prompts = (Prompt(0, 5), Prompt(900, 30, cached=600, image_tokens=(300,)), Prompt(5000, 3),
               Prompt(3000, 4000), Prompt(700, 5, image_tokens=(120,)), Prompt(40, 1), Prompt(64, 200)) * 3  # fmt: skip
    for load in (2, Arrivals(rate=50.0)):
        kept = simulate(prompts, shape, load, clock=lambda e: 0.01)
        assert _admissions(prompts, shape) is _admissions(prompts, shape)  # worked out once
        again = simulate(prompts, shape, load, clock=lambda e: 0.01)  # from the kept admissions
        one_by_one = simulate(iter(prompts), shape, load, clock=lambda e: 0.01)
        assert kept == again == one_by_one
        assert kept.spans == one_by_one.spans
        assert dict(kept.refusals) == {"empty": 3, "prompt_too_long": 3, "kv_blocks": 3}
        assert kept.encoded == one_by_one.encoded
        assert len(kept.encoded) == 6  # two images a round

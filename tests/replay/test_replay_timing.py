"""Replay in time: exact buckets cost nothing, padding costs what the step model says and lands in its part, and a
request's added latency is the padding of the steps it waited through."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from functools import partial

import numpy as np
import pytest

from vllm_hpu_mm.engine import EngineShape, GraphRun, PrefillChunk
from vllm_hpu_mm.models.catalog import CATALOG
from vllm_hpu_mm.models.step_time import step_time
from vllm_hpu_mm.replay.run import replay
from vllm_hpu_mm.replay.scheduler import Arrivals, DecodeRun, Prompt, simulate
from vllm_hpu_mm.replay.timing import Timer, TraceClock, percentile

STEP = step_time(CATALOG["Qwen/Qwen2.5-VL-7B-Instruct"], "gaudi2", block_size=128)
TIMER = Timer(STEP, lambda tokens: (tokens - 2) * 4, lambda patches: -(-patches // 1024) * 1024)
ONE = EngineShape(max_num_seqs=1, max_num_batched_tokens=4096, max_model_len=8192, block_size=128, num_kv_blocks=1000)


class Lookup:
    """Runs every shape as it is (``pad_blocks`` 0) or pads decode to ``pad_blocks`` blocks; nothing warmed."""

    warmed: frozenset[tuple[str, tuple[int, int, int]]] = frozenset()
    max_prefill_batch = 1
    decode_block_cap = 10**6

    def __init__(self, pad_blocks: int = 0) -> None:
        self.pad_blocks = pad_blocks

    def prefill(self, chunks: tuple[PrefillChunk, ...]) -> list[GraphRun]:
        out = []
        for c in chunks:
            shape = (1, c.query, math.ceil(c.context / 128))
            out.append(GraphRun("prompt", shape, shape, 1, c.query, shape[2]))
        return out

    def decode(self, sequences: int, blocks: int) -> GraphRun:
        shape = (sequences, 1, max(blocks, self.pad_blocks))
        return GraphRun("decode", shape, shape, sequences, sequences, blocks)

    def fallbacks(self) -> list[tuple[str, tuple[int, int, int]]]:
        return []


PROMPTS = [Prompt(700, 40), Prompt(1500, 10, cached=256), Prompt(3000, 25)]


def test_exact_shapes_cost_no_padding_and_add_no_latency() -> None:
    trace = simulate(PROMPTS, ONE, 1, clock=TIMER.clock)
    t = replay([trace], Lookup(), "exact", timer=TIMER).times[0]
    assert t.padded_s == pytest.approx(t.real_s)
    assert t.real_s == pytest.approx(trace.busy_s)  # the schedule's clock is the real-shape time
    assert t.overhead == pytest.approx(0.0, abs=1e-9)
    assert t.added_ttft == pytest.approx((0.0, 0.0), abs=1e-9)
    assert t.added_tpot == pytest.approx((0.0, 0.0), abs=1e-9)


def test_decode_padding_lands_in_decode_and_in_each_tokens_latency() -> None:
    trace = simulate(PROMPTS, ONE, 1, clock=TIMER.clock)
    t = replay([trace], Lookup(pad_blocks=2000), "padded", timer=TIMER).times[0]
    per_step = STEP.decode_s(1, 2000) - STEP.decode_s(1, 1)
    assert t.padding["decode"] > 0
    assert t.padding["prefill_query"] == pytest.approx(0.0, abs=1e-9)
    assert t.padding["prefill_context"] == pytest.approx(0.0, abs=1e-9)
    # one sequence at a time: every decode step pads 1 sequence's few blocks to 2000
    assert t.added_tpot[0] == pytest.approx(per_step, rel=0.05)
    assert t.added_ttft == pytest.approx((0.0, 0.0), abs=1e-9)  # the first token comes from the prefill
    assert t.padded_s - t.real_s == pytest.approx(sum(t.padding.values()))


def test_a_waiting_request_pays_the_padding_of_the_steps_before_its_first_token() -> None:
    # two clients, one slot: the second waits through the first's whole decode
    trace = simulate([Prompt(200, 30), Prompt(200, 2)], ONE, Arrivals(rate=1000.0, seed=1), clock=TIMER.clock)
    t = replay([trace], Lookup(pad_blocks=2000), "padded", timer=TIMER).times[0]
    per_step = STEP.decode_s(1, 2000) - STEP.decode_s(1, 2)
    assert t.added_ttft[1] == pytest.approx(29 * per_step, rel=0.05)


def test_images_pad_to_their_vision_bucket() -> None:
    limits = EngineShape(max_num_seqs=2, max_num_batched_tokens=4096, max_model_len=8192, block_size=128,
                    num_kv_blocks=1000)  # fmt: skip
    trace = simulate([Prompt(400, 3, image_tokens=(302,))], limits, 1, clock=TIMER.clock,
                     vision_clock=TIMER.vision_clock)  # fmt: skip
    t = replay([trace], Lookup(), "exact", timer=TIMER).times[0]
    assert t.padding["vision"] == pytest.approx(STEP.vision_s(2048) - STEP.vision_s(1200))


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 0.5) == 0.0
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile(list(range(1, 101)), 0.99) == 99


def test_each_price_memo_is_keyed_by_every_input_it_reads() -> None:
    """A warm timer (every shape priced before) answers as a fresh one per price: a memo key that left out an input
    the price reads would hand one shape's price to another."""
    decodes = [(4, 10), (4, 11), (5, 10), (1, 1)]
    chunk_sets = [(PrefillChunk(512, 0),), (PrefillChunk(512, 128),), (PrefillChunk(512, 129),),
                  (PrefillChunk(512, 0), PrefillChunk(100, 0)), (PrefillChunk(513, 0),)]  # fmt: skip
    forwards = [GraphRun("prompt", (2, 512, 8), (2, 512, 8), n, 900, blocks) for n, blocks in ((2, 2), (2, 9), (1, 9))]
    forwards += [GraphRun("prompt", (2, 512, 0), (2, 512, 0), 2, 900, 0), GraphRun("prompt", (4, 512, 8), (4, 512, 8),
                 2, 900, 9)]  # fmt: skip
    calls: list[Callable[[Timer], object]] = [partial(Timer.decode_real, sequences=n, blocks=b) for n, b in decodes]
    calls += [partial(Timer.decode_padded, run=GraphRun("decode", (n, 1, b), (n, 1, b), 1, 1, 1)) for n, b in decodes]
    calls += [partial(Timer.prefill_real, chunks=c) for c in chunk_sets]
    calls += [partial(Timer.prefill_padded, run=r) for r in forwards]
    calls += [partial(Timer.vision, tokens=k) for k in (66, 67, 1030, 4098)]
    warm = Timer(STEP, TIMER.patches_of, TIMER.vision_bucket)
    first = [f(warm) for f in calls]
    assert [f(warm) for f in calls] == first  # now from the memos
    assert first == [f(Timer(STEP, TIMER.patches_of, TIMER.vision_bucket)) for f in calls]
    assert len(set(first[: len(decodes)])) == len(decodes)  # each input moves the price
    assert len(set(first)) == len(first) - len(decodes)  # a decode bucket is priced as a decode of its shape
    # 128 and 129 context tokens fill one and two blocks; the real context moves a forward's context padding
    k = 2 * len(decodes)
    assert first[k + 1] != first[k + 2]
    assert len({p[1] for p in first[k + len(chunk_sets) : k + len(chunk_sets) + 3]}) == 3  # type: ignore[index]


def test_price_memos_hold_at_most_their_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    import vllm_hpu_mm.replay.timing as timing

    monkeypatch.setattr(timing, "PRICES_KEPT", 3)
    timer = Timer(STEP, TIMER.patches_of, TIMER.vision_bucket)
    for n in range(1, 20):
        assert timer.decode_real(n, n) == STEP.decode_s(n, n)
        assert timer.prefill_real((PrefillChunk(n, 0),)) == STEP.chunks_s([(n, 0)])
        timer.vision(100 + n)
    assert max(len(timer._decode), len(timer._chunks), len(timer._images)) <= 3


@pytest.mark.parametrize("load", [1, 3, Arrivals(rate=4.0)])
def test_each_requests_added_time_is_the_step_by_step_sum_to_the_last_bit(load: int | Arrivals) -> None:
    """The added seconds before every step, taken for all steps at once, equal the sum entry by entry (the group of
    entries just before the step, a decode stretch's run cut at the step)."""
    prompts = [Prompt(700, 40, image_tokens=(66,)), Prompt(1500, 10, cached=256), Prompt(3000, 25), Prompt(90, 300)]
    limits = EngineShape(max_num_seqs=3, max_num_batched_tokens=1024, max_model_len=8192, block_size=128,
                         num_kv_blocks=1000)  # fmt: skip
    trace = simulate(prompts * 3, limits, load, clock=TIMER.clock, vision_clock=TIMER.vision_clock)
    assert any(isinstance(e, DecodeRun) and e.steps > 1 for e in trace.events)
    clock = TraceClock(TIMER, trace)
    lookup = Lookup(pad_blocks=20)
    for i, event in enumerate(trace.events):
        if isinstance(event, DecodeRun):
            clock.decode(i, event.steps, event.sequences, event.blocks, lookup.decode(event.sequences, event.blocks))
        else:
            clock.prefill(i, event, lookup.prefill(event))
    clock.result("x")  # the images' entries added, the entries sorted
    entries = clock._entries
    starts = [e[0] for e in entries]
    prefix = [0.0]
    for _, n, per in entries:
        prefix.append(prefix[-1] + n * per)

    def until(step: int) -> float:
        i = bisect.bisect_left(starts, step)
        total, j = prefix[i], i - 1
        while j >= 0 and starts[j] == starts[i - 1]:
            s, n, per = entries[j]
            total -= per * max(0, s + n - step)
            j -= 1
        return total

    steps = np.arange(trace.steps + 2, dtype=np.int64)
    assert clock._until(steps)[0].tolist() == [until(int(s)) for s in steps]

"""What the engine runs for a stream of requests: a model of vLLM 0.32's V1 scheduler under continuous batching, as
the prefill chunks and decode batches of each step (a :class:`Trace`), for any runtime's bucket lookup to replay.

The model (vLLM 0.32 ``v1/core/sched/scheduler.py`` ``Scheduler.schedule``, our own code):

- each step has a token budget of ``max_num_batched_tokens``; running requests are served first, in the order they
  were admitted: a decoding request takes one token, a prefilling one the rest of its prompt up to the budget
  (chunked prefill); then waiting requests are admitted while fewer than ``max_num_seqs`` run and budget is left;
- a prefix-cache hit skips whole blocks of the prompt (never the last token): the first chunk starts after them;
- an image is encoded whole in the step its first token is scheduled, within the encoder budget of
  ``max(max_num_batched_tokens, the largest image's tokens)`` per step; a chunk stops before an image that does not
  fit it;
- the load is a closed loop of ``concurrency`` clients: a request arrives when one finishes; the schedule ends when
  the requests run out (the drain that follows, the last requests finishing alone, is not the load);
- a request is admitted only when the KV cache can hold its whole prompt and answer (its cached prefix shared), so
  there is no preemption (vLLM admits more eagerly and preempts; this is the simplification);
- a prompt of ``max_model_len`` tokens or more is refused, as vLLM does; answers are cut at ``max_model_len``.

Checked against vLLM 0.32's own Scheduler (benchmarks/vllm_scheduler_check.py): the same schedule event for event
while the KV cache has room; under KV pressure vLLM preempts where this model waits.

Decode-only stretches are summarised: between two events that change the batch, the decode steps are emitted as runs
of identical (sequences, blocks), so a trace costs its events, not its steps.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Iterable

from vllm_hpu_mm.runtimes.base import PrefillChunk

__all__ = ["DecodeRun", "Limits", "Prompt", "Trace", "simulate"]


@dataclasses.dataclass(frozen=True)
class Limits:
    """The engine numbers the schedule depends on."""

    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    block_size: int
    num_kv_blocks: int


@dataclasses.dataclass(frozen=True)
class Prompt:
    """One request as the engine sees it: ``tokens`` of prompt (text and image placeholders), ``image_tokens`` per
    image (placed right after the ``cached`` prefix), ``cached`` prefix tokens, ``output`` tokens to generate."""

    tokens: int
    output: int
    cached: int = 0
    image_tokens: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class DecodeRun:
    """``steps`` consecutive decode steps of ``sequences`` sequences holding ``blocks`` KV blocks in all (the token
    being decoded included)."""

    sequences: int
    blocks: int
    steps: int


#: One step's prefill chunks, or a run of identical decode steps.
Event = tuple[PrefillChunk, ...] | DecodeRun


@dataclasses.dataclass(frozen=True)
class Trace:
    events: tuple[Event, ...]
    limits: Limits
    concurrency: int
    completed: int
    refused: int
    steps: int


@dataclasses.dataclass
class _Seq:
    prompt: Prompt
    output: int
    computed: int
    need_blocks: int
    images: list[tuple[int, int]]  # (start position, tokens) not yet encoded
    generated: int = 0

    @property
    def prefilling(self) -> bool:
        return self.computed < self.prompt.tokens


def _cut_for_encoder(s: _Seq, n: int, budget: list[int]) -> int:
    """Tokens of the chunk [computed, computed + n) that can run, the encoder budget spent on its images."""
    end = s.computed + n
    for image in list(s.images):
        start, tokens = image
        if start >= end:
            break
        if budget[0] < tokens:
            return max(0, start - s.computed)
        budget[0] -= tokens
        s.images.remove(image)
    return n


def _decode_runs(contexts: list[int], steps: int, block: int) -> Iterable[DecodeRun]:
    """The decode steps of sequences at these contexts for ``steps`` steps, as runs of equal block totals."""
    total = sum(math.ceil((c + 1) / block) for c in contexts)
    changes: dict[int, int] = {}
    for c in contexts:
        t = block - c % block if c % block else block
        while t < steps:
            changes[t] = changes.get(t, 0) + 1
            t += block
    last = 0
    for t in sorted(changes):
        yield DecodeRun(len(contexts), total, t - last)
        total += changes[t]
        last = t
    yield DecodeRun(len(contexts), total, steps - last)


def simulate(prompts: Iterable[Prompt], limits: Limits, concurrency: int,
             encoder_budget: int | None = None) -> Trace:  # fmt: skip
    """The schedule of ``prompts`` (in arrival order) under a closed loop of ``concurrency`` clients."""
    block, mml = limits.block_size, limits.max_model_len
    source = iter(prompts)
    largest = 0
    refused = completed = steps = 0
    events: list[Event] = []

    def next_seq() -> _Seq | None:
        nonlocal refused, largest
        for p in source:
            if p.tokens >= mml or p.tokens < 1:
                refused += 1
                continue
            output = max(1, min(p.output, mml - p.tokens))
            computed = min(p.cached, p.tokens - 1) // block * block
            need = math.ceil((p.tokens + output) / block) - computed // block
            if need > limits.num_kv_blocks:
                refused += 1
                continue
            images, at = [], min(p.cached, p.tokens)
            for tokens in p.image_tokens:
                if at + tokens > computed:  # an image inside the cached prefix needs no encoding
                    images.append((at, tokens))
                at += tokens
            largest = max(largest, *p.image_tokens, 0)
            return _Seq(p, output, computed, need, images)
        return None

    waiting: deque[_Seq] = deque()
    for _ in range(concurrency):
        seq = next_seq()
        if seq is None:
            break
        waiting.append(seq)
    running: list[_Seq] = []
    reserved = 0

    def admissible() -> bool:
        return bool(waiting) and len(running) < limits.max_num_seqs and reserved + waiting[0].need_blocks <= \
            limits.num_kv_blocks  # fmt: skip

    exhausted = False

    def finish(done: list[_Seq]) -> None:
        nonlocal reserved, completed, exhausted
        for s in done:
            running.remove(s)
            reserved -= s.need_blocks
            completed += 1
            arrival = next_seq()
            if arrival is not None:
                waiting.append(arrival)
            else:
                exhausted = True

    while (running or waiting) and not exhausted:
        if running and not any(s.prefilling for s in running) and not admissible():
            stretch = min(s.output - s.generated for s in running)
            events.extend(_decode_runs([s.computed for s in running], stretch, block))
            for s in running:
                s.computed += stretch
                s.generated += stretch
            steps += stretch
            finish([s for s in running if s.generated >= s.output])
            continue
        budget = limits.max_num_batched_tokens
        encoder = [max(encoder_budget or limits.max_num_batched_tokens, largest)]
        chunks: list[PrefillChunk] = []
        decodes: list[_Seq] = []
        scheduled: list[tuple[_Seq, int]] = []
        for s in running:
            if budget <= 0:
                break
            if not s.prefilling:
                decodes.append(s)
                budget -= 1
                continue
            n = _cut_for_encoder(s, min(s.prompt.tokens - s.computed, budget), encoder)
            if n:
                chunks.append(PrefillChunk(n, s.computed))
                scheduled.append((s, n))
                budget -= n
        while budget > 0 and admissible():
            s = waiting[0]
            n = _cut_for_encoder(s, min(s.prompt.tokens - s.computed, budget), encoder)
            if not n:
                break
            waiting.popleft()
            running.append(s)
            reserved += s.need_blocks
            chunks.append(PrefillChunk(n, s.computed))
            scheduled.append((s, n))
            budget -= n
        if decodes:
            events.append(DecodeRun(len(decodes), sum(math.ceil((s.computed + 1) / block) for s in decodes), 1))
        if chunks:
            events.append(tuple(chunks))
        if not decodes and not chunks:  # unreachable while the encoder budget holds the largest image
            raise AssertionError("a scheduler step with nothing to run")
        steps += 1
        for s in decodes:
            s.computed += 1
            s.generated += 1
        for s, n in scheduled:
            s.computed += n
            if not s.prefilling:
                s.generated = 1
        finish([s for s in running if s.generated >= s.output])
    return Trace(tuple(events), limits, concurrency, completed, refused, steps)

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
- the load is a closed loop of ``concurrency`` clients (a request arrives when one finishes), Poisson arrivals at a
  rate, or a profile of clients over time (:class:`Arrivals`); after the last request the server drains: the
  schedule runs until every admitted request finishes, the batch running down to one (``drain=False`` ends it when
  the requests run out, the load alone); arrivals in time step a clock of real-shape step times, the same for every
  bucket set replayed on it (a padded server would run slower and queue more: not modelled);
- a request is admitted only when the KV cache can hold its whole prompt and answer (its cached prefix shared), so
  there is no preemption (vLLM admits more eagerly and preempts; this is the simplification);
- a request vLLM refuses is counted by reason (:data:`REFUSALS`) and never runs; answers are cut at
  ``max_model_len``.

Checked against vLLM 0.32's own Scheduler (benchmarks/agreement/vllm_scheduler_check.py): the same schedule event for
event while the KV cache has room; under KV pressure vLLM preempts where this model waits.

Decode-only stretches are summarised: between two events that change the batch, the decode steps are emitted as runs
of identical (sequences, blocks), so a trace costs its events, not its steps. An event costs what changed, not a pass
over the running requests: the decoding requests' count, KV blocks and next finish are kept as they join, leave and
step (:class:`_DecodeBatch`), and a step visits only the prefilling requests (the replay at 100,000 requests and
10,000 requests/s: benchmarks/performance/replay_bounds.py).

Only arrivals read the clock: once every request has arrived, the steps follow from the state alone. A schedule of
arrivals in time records its state there (:class:`_Resume`); the same requests scheduled on another clock (each
configuration's own, ``replay/whole.py``) that reach that state at that step take its remaining events and price them
on their own clock, as the steps would have, instead of stepping again (a saturated server reaches it within its first
steps; elsewhere the states differ and the schedule runs to its end).
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import math
import random
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np

from vllm_hpu_mm.engine import EngineShape, PrefillChunk
from vllm_hpu_mm.errors import ConfigError

__all__ = ["REFUSALS", "Arrivals", "Clock", "DecodeRun", "Event", "Prompt", "Span", "Trace", "simulate", "step_times"]


@dataclasses.dataclass(frozen=True)
class Prompt:
    """One request as the engine sees it: ``tokens`` of prompt (text and image placeholders), ``image_tokens`` per
    image (placed right after the ``cached`` prefix), ``cached`` prefix tokens, ``output`` tokens to generate."""

    tokens: int
    output: int
    cached: int = 0
    image_tokens: tuple[int, ...] = ()
    #: Why the server refuses it before the engine sees it (an image it answers with HTTP 400; a key of
    #: :data:`REFUSALS`), None: it reaches the engine.
    refused: str | None = None


@dataclasses.dataclass(frozen=True)
class DecodeRun:
    """``steps`` consecutive decode steps of ``sequences`` sequences holding ``blocks`` KV blocks in all (the token
    being decoded included)."""

    sequences: int
    blocks: int
    steps: int
    #: The step also prefills (its chunks are the next event): a runtime running both in one forward pays one step
    #: overhead for the two (not part of the run's identity).
    with_prefill: bool = dataclasses.field(default=False, compare=False)


#: One step's prefill chunks, or a run of identical decode steps.
Event = tuple[PrefillChunk, ...] | DecodeRun


#: Why the engine refuses a request (vLLM 0.32 ``v1/engine/input_processor.py`` ``_validate_prompt_len``: an empty
#: prompt, a prompt of ``max_model_len`` tokens or more; a request whose prompt and answer need more KV blocks than
#: the cache has can never be scheduled: vLLM refuses to start with a cache that cannot hold ``max_model_len``, so it
#: is a limit given to the replay that no real server would run with); before the engine, the server answers a request
#: whose image it refuses with HTTP 400 (the loader's size rule, or ``reject`` above the largest vision bucket).
REFUSALS = {
    "empty": "an empty prompt",
    "prompt_too_long": "a prompt of max_model_len tokens or more",
    "kv_blocks": "more KV blocks than the cache holds",
    "image_refused": "an image the server refuses (its pixels or aspect ratio)",
    "image_oversize": "an image above the largest vision bucket under VLLM_HPU_MM_OVERSIZE_POLICY=reject",
}
#: What lets each refused request run (the cause, not the load: a higher rate sends more of them to be refused).
REFUSAL_FIXES = {
    "empty": "prompts of at least one token",
    "prompt_too_long": "a --max-model-len above the longest prompt, or shorter prompts",
    "kv_blocks": "more KV blocks (a larger --kv-blocks) or a shorter --max-model-len",
    "image_refused": "images within VLLM_HPU_MM_MAX_IMAGE_PIXELS and VLLM_HPU_MM_MAX_ASPECT_RATIO",
    "image_oversize": "a largest vision bucket that holds every image, or VLLM_HPU_MM_OVERSIZE_POLICY=shrink",
}


#: Caps on what a load description may ask (a day of traffic; far above any one server's request rate or clients).
MAX_RATE = 10_000.0
#: The least request rate a user may ask for (one request in 11.6 days): the clock is float seconds from the first
#: arrival, so at 1e-300 requests/s arrivals 1e300 s apart leave no bit for a step's milliseconds (every latency read
#: 0). At this rate the documented maximum of requests (100,000) arrives by about 1e11 s, where a float still resolves
#: 2e-5 s; no server's load is slower.
MIN_RATE = 1e-6
MAX_PROFILE_SEGMENTS = 64
MAX_PROFILE_SECONDS = 86_400.0
MAX_CLIENTS = 100_000
#: Most recorded arrival times one schedule replays (a client log).
MAX_RECORDED = 1_000_000


@dataclasses.dataclass(frozen=True)
class Arrivals:
    """How requests reach the server. One of: a closed loop of ``concurrency`` clients (a request arrives when one
    finishes); Poisson arrivals at ``rate`` requests per second (seeded); a ``profile`` of (seconds, clients) segments,
    each a closed loop of that many clients for that long; recorded arrival ``times`` (seconds from the first, one per
    request in order: a client's log replayed). After the last request (or the profile's end) the server drains: the
    running requests finish, the batch running down to one."""

    concurrency: int | None = None
    rate: float | None = None
    profile: tuple[tuple[float, int], ...] = ()
    seed: int = 0
    times: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.rate is not None and not 0 < self.rate <= MAX_RATE:
            raise ConfigError(f"request rate {self.rate:g} is invalid; accepted: above 0 and at most {MAX_RATE:,} "
                              "requests/s")  # fmt: skip
        if len(self.profile) > MAX_PROFILE_SEGMENTS:
            raise ConfigError(f"a load profile of {len(self.profile)} segments is invalid; accepted: at most "
                              f"{MAX_PROFILE_SEGMENTS}")  # fmt: skip
        for seconds, clients in self.profile:
            if not (0 < seconds <= MAX_PROFILE_SECONDS and 0 <= clients <= MAX_CLIENTS):
                raise ConfigError(f"load profile segment {seconds:g} s x {clients} clients is invalid; accepted: 0 < "
                                  f"seconds <= {MAX_PROFILE_SECONDS:,}, 0 <= clients <= {MAX_CLIENTS:,}")  # fmt: skip
        if sum(s for s, _ in self.profile) > MAX_PROFILE_SECONDS:
            raise ConfigError(f"a load profile longer than {MAX_PROFILE_SECONDS:,} s is refused")
        if len(self.times) > MAX_RECORDED:
            raise ConfigError(f"{len(self.times):,} recorded arrivals are refused; accepted: at most {MAX_RECORDED:,}")
        if any(not (0 <= t <= MAX_PROFILE_SECONDS) for t in self.times) or any(
                b < a for a, b in zip(self.times, self.times[1:], strict=False)):  # fmt: skip
            raise ConfigError(f"recorded arrival times must be ascending seconds from 0 to {MAX_PROFILE_SECONDS:,}")

    @property
    def timed(self) -> bool:
        """Whether arrivals depend on time (a rate, a profile or recorded times), so the schedule needs a clock."""
        return self.rate is not None or bool(self.profile) or bool(self.times)

    def describe(self) -> str:
        if self.times:
            return f"{len(self.times)} recorded arrivals over {self.times[-1]:.3g} s"
        if self.rate is not None:
            return f"Poisson arrivals at {self.rate:g} requests/s (seed {self.seed})"
        if self.profile:
            return "clients over time: " + ", ".join(f"{c} for {s:g} s" for s, c in self.profile)
        n = self.concurrency or 0
        return f"{n} request{'' if n == 1 else 's'} at once"

    def clients(self, now: float) -> int:
        """The profile's clients at ``now`` (0 after its end)."""
        t = 0.0
        for seconds, clients in self.profile:
            t += seconds
            if now < t:
                return clients
        return 0

    def next_change(self, now: float) -> float:
        """When the profile next changes its clients after ``now`` (inf after its end)."""
        t = 0.0
        for seconds, _ in self.profile:
            t += seconds
            if now < t:
                return t
        return math.inf


class Span(NamedTuple):
    """One request's life in steps and (real-shape) seconds: it arrived before step ``arrival``, got its first token
    from step ``first`` and its last from step ``finish``; ``output`` tokens. A named tuple: every schedule makes
    one per request (100,000 at the documented maxima, in each configuration's schedule), a third the cost of a
    frozen dataclass."""

    arrival: int
    first: int
    finish: int
    output: int
    arrival_s: float = 0.0
    first_s: float = 0.0
    finish_s: float = 0.0
    #: Images of the request (the API server's time grows with them).
    images: int = 0
    #: Its place among the prompts given (0-based, refused ones counted): which request ran, for the figures that
    #: count only those (the vision buckets' images, ``replay/schedules.py``).
    request: int = -1


@dataclasses.dataclass(frozen=True)
class Trace:
    events: tuple[Event, ...]
    limits: EngineShape
    concurrency: int
    completed: int
    refused: int
    steps: int
    #: The step each event starts at (a step's decode run and prefill chunks share it).
    starts: tuple[int, ...] = ()
    #: Every request that ran, in admission order.
    spans: tuple[Span, ...] = ()
    #: Refused requests by reason (:data:`REFUSALS`).
    refusals: tuple[tuple[str, int], ...] = ()
    #: Whether the drain was kept (the schedule runs until every admitted request finishes).
    drained: bool = True
    #: Seconds (real shapes, by the clock given) the server was busy and idle (no request to run).
    busy_s: float = 0.0
    idle_s: float = 0.0
    arrivals: Arrivals | None = None
    #: Images encoded: (step, placeholder tokens), in order.
    encoded: tuple[tuple[int, int], ...] = ()
    #: Arrivals in time: the state once every request has arrived, for another clock's schedule of the same requests
    #: to continue from (:class:`_Resume`).
    resume: _Resume | None = dataclasses.field(default=None, compare=False, repr=False)
    #: Arrivals in time: the first and last arrival (seconds) of the requests refused in their arrival slots, () if
    #: none (each fails at once, at its arrival: the run lasts from the first arrival to the last answer or refusal).
    refused_s: tuple[float, float] | tuple[()] = ()


@dataclasses.dataclass(frozen=True)
class _Resume:
    """A schedule of arrivals in time at a step where every request had arrived and the step before it ran with
    none left to arrive: from there its events depend on its state alone, not on its clock (only arrivals read the
    clock). Another clock's schedule of the same prompts that reaches this ``state`` at this step runs these events
    from then on, step for step; only their seconds differ (:meth:`_Scheduler._resume`)."""

    steps: int
    #: The trace's events, images encoded and requests finished (spans) before this step.
    event: int
    encoded: int
    span: int
    #: What the next steps read (:meth:`_Scheduler._state`).
    state: tuple[object, ...]
    #: Admission order of each request finishing from this step on, in the order they finish (their spans').
    orders: tuple[int, ...]


@dataclasses.dataclass(eq=False)  # identity: removing one from the running list compares no fields
class _Seq:
    prompt: Prompt
    output: int
    computed: int
    need_blocks: int
    images: list[tuple[int, int]]  # (start position, tokens) not yet encoded
    generated: int = 0
    arrival: int = 0
    arrival_s: float = 0.0
    first: int = 0
    first_s: float = 0.0
    #: Admission order (the running list's order).
    order: int = 0
    #: Requests taken from the source before it (refused ones included): the same request in any schedule of the
    #: same prompts.
    index: int = 0
    #: While decoding (:class:`_DecodeBatch`): the batch clock when it joined, and at its last token (else -1).
    joined: int = 0
    ends: int = -1

    @property
    def prefilling(self) -> bool:
        return self.computed < self.prompt.tokens


def _cut_for_encoder(s: _Seq, n: int, budget: list[int], encoded: list[int] | None = None) -> int:
    """Tokens of the chunk [computed, computed + n) that can run, the encoder budget spent on its images (their
    tokens appended to ``encoded``)."""
    end = s.computed + n
    for image in list(s.images):
        start, tokens = image
        if start >= end:
            break
        if budget[0] < tokens:
            return max(0, start - s.computed)
        budget[0] -= tokens
        s.images.remove(image)
        if encoded is not None:
            encoded.append(tokens)
    return n


#: A step count no schedule reaches.
_NEVER = 1 << 62


def _admission(s: _Seq) -> int:
    return s.order


class _DecodeBatch:
    """The decoding requests' aggregates, kept as requests join and leave and as the batch steps, so that a step
    costs what changed, not a pass over the batch: how many decode, their KV blocks in all, when the next crosses a
    block boundary, and which finishes first. A member's context is its context when it joined plus the steps the
    batch took since (:attr:`clock`); a member that sits a step out leaves and joins again."""

    def __init__(self, block: int) -> None:
        self.block = block
        #: Decode steps the whole batch took.
        self.clock = 0
        self.size = 0
        #: KV blocks the members hold, the token being decoded included: sum of ceil((context + 1) / block).
        self.blocks = 0
        #: (context - clock) % block -> members: a member's context is a multiple of the block when the clock is
        #: minus its key; the sorted keys, to find the next such clock without a pass over the members.
        self._phase: dict[int, int] = {}
        self._keys: list[int] = []
        #: (clock at its last token, admission order, request): a heap whose stale entries (a request that left) are
        #: skipped when they come up.
        self._ends: list[tuple[int, int, _Seq]] = []

    def join(self, s: _Seq) -> None:
        s.joined, s.ends = self.clock, self.clock + s.output - s.generated
        key = (s.computed - self.clock) % self.block
        n = self._phase.get(key, 0)
        if not n:
            bisect.insort(self._keys, key)
        self._phase[key] = n + 1
        self.size += 1
        self.blocks += (s.computed + self.block) // self.block
        heapq.heappush(self._ends, (s.ends, s.order, s))

    def leave(self, s: _Seq) -> None:
        """Remove ``s``, its context and tokens brought up to date."""
        taken = self.clock - s.joined
        s.computed += taken
        s.generated += taken
        s.ends = -1
        key = (s.computed - self.clock) % self.block
        n = self._phase[key] - 1
        if n:
            self._phase[key] = n
        else:
            del self._phase[key]
            del self._keys[bisect.bisect_left(self._keys, key)]
        self.size -= 1
        self.blocks -= (s.computed + self.block) // self.block

    def context(self, s: _Seq) -> int:
        return s.computed + self.clock - s.joined

    def _crossing(self, after: int) -> tuple[int, int]:
        """(t, members): the first t > ``after`` at which members' contexts, ``t`` steps from now, are a multiple of
        the block (their blocks grow at the step after), and how many."""
        keys = self._keys
        if not keys:
            return _NEVER, 0
        x = -(self.clock + after + 1) % self.block  # the key crossing at after + 1; one less at each step after
        i = bisect.bisect_right(keys, x) - 1
        key = keys[i]  # i == -1: none at or below x, the largest key comes round first
        return after + 1 + (x - key) % self.block, self._phase[key]

    def runs(self, steps: int) -> Iterator[DecodeRun]:
        """The next ``steps`` decode steps as runs of equal block totals (lazily: a caller may stop early)."""
        blocks, last = self.blocks, 0
        while True:
            t, n = self._crossing(last)
            if t >= steps:
                yield DecodeRun(self.size, blocks, steps - last)
                return
            yield DecodeRun(self.size, blocks, t - last)
            blocks += n
            last = t

    def advance(self, steps: int) -> None:
        """Every member decodes ``steps`` tokens."""
        if steps == 1:  # a step with prefill chunks: one look-up, not a search
            self.clock += 1
            self.blocks += self._phase.get(-self.clock % self.block, 0)
            return
        t, n = self._crossing(0)
        while t <= steps:
            self.blocks += n
            t, n = self._crossing(t)
        self.clock += steps

    def remaining(self) -> int:
        """Steps until the first member has its last token."""
        ends = self._ends
        while ends[0][2].ends != ends[0][0]:
            heapq.heappop(ends)
        return ends[0][0] - self.clock

    def finished(self) -> list[_Seq]:
        """The members that have their last token, in admission order (they stay members)."""
        ends, out = self._ends, []
        while ends and ends[0][0] <= self.clock:
            at, _, s = heapq.heappop(ends)
            if s.ends == at:
                out.append(s)
        return sorted(out, key=_admission) if len(out) > 1 else out


#: Seconds of one step of an event (a decode run: one of its steps), for a schedule whose arrivals depend on time.
Clock = Callable[[Event], float]


def step_times(events: Sequence[Event], starts: Sequence[int], encoded: Iterable[tuple[int, int]], clock: Clock,
               vision: Callable[[int], float] | None, step: int = 0, now: float = 0.0,
               prices: Sequence[float] | None = None) -> tuple[dict[int, float], float]:  # fmt: skip
    """A trace's ``events`` (from ``step`` at ``now`` seconds) priced on ``clock`` and summed as the scheduler sums
    them (a step's images, its decode, its prefill chunks, then the step; a decode stretch run by run), bit for bit:
    (the seconds at the start of each step a group of events ends before, the seconds at the end). ``prices``: what
    ``clock`` answers for each event, known already (each is read in place of asking it; else each event is priced
    once, in order). The sums run over arrays: each group's parts added in order, then the groups in order (a
    cumulative sum adds in order, as the scheduler's loop)."""
    n = len(events)
    if prices is not None and len(prices) != n:
        raise ValueError(f"{len(prices)} prices for {n} events")
    if not n:
        return {step: now}, now
    price = np.array(prices if prices is not None else [clock(e) for e in events], dtype=np.float64)
    images: dict[int, float] = {}  # a step's images' seconds, summed in order (from 0, as the scheduler's step)
    for at_step, tokens in encoded:
        images[at_step] = images.get(at_step, 0) + (vision(tokens) if vision is not None else 0.0)
    begin = np.asarray(starts[:n], dtype=np.int64)
    runs = np.array([e.steps if isinstance(e, DecodeRun) else 0 for e in events], dtype=np.int64)  # 0: chunks
    heads = np.flatnonzero(np.concatenate(([True], begin[1:] != begin[:-1])))  # each group: one step's events
    size = np.diff(np.append(heads, n))
    first = begin[heads]
    pictured = np.isin(first, np.fromiter(images, dtype=np.int64, count=len(images)))
    # a decode alone in its step, without images: its run's steps at its price (a decode stretch's run)
    alone = (size == 1) & (runs[heads] > 0) & ~pictured
    seconds = np.zeros(len(heads))
    if vision is not None and images:
        seconds[pictured] = [images[int(k)] for k in first[pictured]]
    seconds = seconds + price[heads]
    for k in range(1, int(size.max())):
        more = size > k
        seconds[more] = seconds[more] + price[heads[more] + k]
    seconds[alone] = runs[heads[alone]] * price[heads[alone]]
    ends = np.where(alone, first + runs[heads], first + 1)
    total = np.cumsum(np.concatenate(([now], seconds)))
    at = {step: now}
    at.update(zip(ends.tolist(), total[1:].tolist(), strict=True))
    return at, float(total[-1])


def simulate(prompts: Iterable[Prompt], limits: EngineShape, concurrency: int | Arrivals,
             encoder_budget: int | None = None, *, drain: bool = True, clock: Clock | None = None,
             vision_clock: Callable[[int], float] | None = None, reference: Trace | None = None,
             reference_prices: Callable[[], Sequence[float] | None] | None = None) -> Trace:  # fmt: skip
    """The schedule of ``prompts`` (in arrival order) under ``concurrency`` clients in a closed loop, or the
    :class:`Arrivals` given. ``drain``: run until every admitted request finishes (the batch runs down to one);
    without it the schedule ends when the requests run out (the load alone). ``clock`` prices a step in seconds: a
    rate or a profile needs it, and it gives each request's times; ``vision_clock`` prices encoding an image of so
    many placeholder tokens (a function of them alone: each count is priced once). ``reference``: a schedule of the
    same prompts, limits and arrivals on another clock; where this one reaches the state it had once every request had
    arrived, at the same step, its events from there are taken and priced on this clock (the same trace, without
    stepping the scheduler again). ``reference_prices``: asked when continuing, ``clock``'s price of each of the
    reference's events where it knows them then (None: they are priced)."""
    arrivals = concurrency if isinstance(concurrency, Arrivals) else Arrivals(concurrency=concurrency)
    if arrivals.timed and clock is None:
        raise ConfigError(f"{arrivals.describe()} needs a time model of the device (a named accelerator)")
    return _Scheduler(prompts, limits, arrivals, encoder_budget, drain, clock, vision_clock, reference,
                      reference_prices).run()  # fmt: skip


#: What the engine makes of one request at one engine shape: (why it refuses it, or None; output tokens; prompt
#: tokens computed from the prefix cache; KV blocks it needs; its images to encode as (position, tokens); its largest
#: image's tokens).
_Admission = tuple[str | None, int, int, int, tuple[tuple[int, int], ...], int]
#: A request as it arrived, before the scheduler first looks at it: (prompt, admission, the step it arrived before,
#: its arrival in seconds, requests taken from the source up to it).
_Arrived = tuple[Prompt, _Admission, int, float, int]


def _admission_of(p: Prompt, limits: EngineShape) -> _Admission:
    block, mml = limits.block_size, limits.max_model_len
    reason = p.refused  # the server's own refusal comes before the engine's
    if reason is None and p.tokens < 1:
        reason = "empty"
    elif reason is None and p.tokens >= mml:
        reason = "prompt_too_long"
    output = max(1, min(p.output, mml - p.tokens))
    computed = min(p.cached, p.tokens - 1) // block * block if p.tokens >= 1 else 0
    need = math.ceil((p.tokens + output) / block) - computed // block
    if reason is None and need > limits.num_kv_blocks:
        reason = "kv_blocks"
    images, position = [], min(p.cached, p.tokens)
    for tokens in p.image_tokens:
        if position + tokens > computed:  # an image inside the cached prefix needs no encoding
            images.append((position, tokens))
        position += tokens
    return reason, output, computed, need, tuple(images), max(p.image_tokens, default=0)


def refused_counts(prompts: Iterable[Prompt], limits: EngineShape) -> dict[str, int]:
    """How many of ``prompts`` the server or the engine at ``limits`` refuses, by :data:`REFUSALS` reason (the rule
    the schedule refuses them by)."""
    counts: dict[str, int] = {}
    for p in prompts:
        reason = _admission_of(p, limits)[0]
        if reason is not None:
            counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items()))


#: The last tuple of prompts whose admissions were worked out, at its engine shape: every configuration's schedule
#: of the same requests (``replay/whole.py``) reads them, here or in a child forked after (one kept: bounded).
_PREPARED: list[tuple[tuple[Prompt, ...], EngineShape, list[_Admission]]] = []


def _admissions(prompts: tuple[Prompt, ...], limits: EngineShape) -> list[_Admission]:
    if _PREPARED and _PREPARED[0][0] is prompts and _PREPARED[0][1] == limits:
        return _PREPARED[0][2]
    got = [_admission_of(p, limits) for p in prompts]
    _PREPARED[:] = [(prompts, limits, got)]
    return got


class _Scheduler:
    """One schedule's state, after vLLM's ``Scheduler``: the requests waiting and running, the KV blocks reserved,
    the step and the clock; :meth:`run` steps it until the load (and the drain) ends."""

    def __init__(self, prompts: Iterable[Prompt], limits: EngineShape, arrivals: Arrivals, encoder_budget: int | None,
                 drain: bool, clock: Clock | None, vision_clock: Callable[[int], float] | None,
                 reference: Trace | None = None,
                 reference_prices: Callable[[], Sequence[float] | None] | None = None) -> None:  # fmt: skip
        self.reference_prices = reference_prices
        self.limits, self.arrivals, self.encoder_budget = limits, arrivals, encoder_budget
        self.drain, self.clock, self.vision_clock = drain, clock, vision_clock
        #: Image placeholder tokens -> seconds of encoding (at most one entry per request).
        self.vision_s: dict[int, float] = {}
        self.source = iter(prompts)
        #: A tuple of prompts: each one's admission, worked out once for every schedule of them (:func:`_admissions`).
        self.prompts = prompts if isinstance(prompts, tuple) else ()
        self.admissions = _admissions(prompts, limits) if isinstance(prompts, tuple) else None
        #: The largest image seen (placeholder tokens): the encoder budget never falls below it.
        self.largest = 0
        self.completed = self.steps = 0
        self.refusals: dict[str, int] = {}
        self.events: list[Event] = []
        self.starts: list[int] = []
        self.spans: list[Span] = []
        self.encoded: list[tuple[int, int]] = []
        self.now = self.idle = 0.0
        self.rng = random.Random(arrivals.seed)
        self.next_arrival = self.rng.expovariate(arrivals.rate) if arrivals.rate else math.inf
        #: The next recorded arrival's index (recorded times replace the Poisson draw).
        self.recorded = 0
        if arrivals.times:
            self.next_arrival = arrivals.times[0]
        #: A request is kept as it arrived until first looked at (at the head): a saturated server holds most of
        #: the requests waiting, and only the head is ever stepped.
        self.waiting: deque[_Seq | _Arrived] = deque()
        #: In admission order.
        self.running: list[_Seq] = []
        #: Running requests still prefilling, in admission order (the rest of the running list decodes: ``batch``).
        self.prefilling: list[_Seq] = []
        self.batch = _DecodeBatch(limits.block_size)
        self.admitted = 0
        #: KV blocks the running requests hold (each its whole prompt and answer, from admission).
        self.reserved = 0
        #: No request is left to arrive.
        self.exhausted = False
        #: Requests taken from the source (refused ones included).
        self.taken = 0
        #: Arrivals in time: the first and last arrival (seconds) of a request refused in its slot, () if none.
        self.refused_s: tuple[float, float] | tuple[()] = ()
        #: Arrivals in time, drained: the state once every request has arrived is recorded (:class:`_Resume`), or,
        #: following ``reference``, compared with the one it recorded. ``_calm``: the step before ran with none left.
        self.reference = reference
        self._watch = arrivals.timed and drain and (reference is None or reference.resume is not None)
        self._calm = False
        self._snap: tuple[int, int, int, int, tuple[object, ...]] | None = None
        self._orders: list[int] | None = None

    def run(self) -> Trace:
        if not self.arrivals.timed:
            for _ in range(self.arrivals.concurrency or 0):
                if not self._arrive():
                    break
        while self._more():
            if self.arrivals.timed:
                self._take_arrivals()
                if not self.running and not self.waiting:
                    gap = self._horizon()
                    if gap == math.inf:
                        break
                    self.idle += gap - self.now
                    self.now = gap
                    continue
                if self.exhausted and self._watch and self._settled():
                    break
            if self.running and not self.prefilling and not self._admissible():
                self._decode_stretch()
            else:
                self._step()
        resume = None
        if self._snap is not None and self._orders is not None:
            resume = _Resume(*self._snap, tuple(self._orders))
        return Trace(tuple(self.events), self.limits, self.arrivals.concurrency or 0, self.completed,
                     sum(self.refusals.values()), self.steps, tuple(self.starts), tuple(self.spans),
                     tuple(sorted(self.refusals.items())), self.drain, self.now - self.idle, self.idle, self.arrivals,
                     tuple(self.encoded), resume, self.refused_s)  # fmt: skip

    def _settled(self) -> bool:
        """At a step with every request arrived: from the second such step on (the step before ran with none left to
        arrive, so no arrival cut it short), record the state, or compare it with the reference's at its step and,
        the same, take the reference's events from there (True: the schedule is complete)."""
        if not self._calm:
            self._calm = True
            return False
        ref = self.reference.resume if self.reference is not None else None
        if ref is None:
            self._snap = (self.steps, len(self.events), len(self.encoded), len(self.spans), self._state())
            self._orders = []
            self._watch = False
            return False
        if self.steps < ref.steps:
            return False
        self._watch = False
        if self.steps > ref.steps or self._state() != ref.state:
            return False
        assert self.reference is not None
        self._resume(self.reference, ref)
        return True

    def _state(self) -> tuple[object, ...]:
        """What the steps from here read, with no request left to arrive: the limits, the KV blocks reserved, the
        encoder budget's floor, the admissions so far, each running request's prompt, progress and images not yet
        encoded (a decoding one's brought up to the batch clock), and the waiting requests in order (what the first
        has spent)."""
        batch, running = self.batch, []
        for s in self.running:
            taken = batch.clock - s.joined if s.ends >= 0 else 0
            running.append((s.index, s.prompt, s.order, s.computed + taken, s.generated + taken, s.ends >= 0,
                            tuple(s.images)))  # fmt: skip
        waiting: tuple[object, ...] = ()
        if self.waiting:  # only the first has been looked at (its images may be spent)
            head = self._head()
            prompts = [w[0] if isinstance(w, tuple) else w.prompt for w in self.waiting]
            waiting = (head.index, head.computed, tuple(head.images), tuple(prompts))
        return (self.limits, self.encoder_budget, self.largest, self.reserved, self.admitted, tuple(running), waiting)

    def _resume(self, trace: Trace, ref: _Resume) -> None:
        """The rest of the schedule from ``trace`` (in the same state at this step): its events, images and
        finishing requests, each step priced on this clock summed as the steps above sum it (a step's images, its
        decode, its prefill chunks; a decode stretch run by run), each request's times from this clock."""
        assert self.clock is not None  # arrivals in time
        events, starts = trace.events, trace.starts
        vision = self._vision if self.vision_clock is not None else None
        known = self.reference_prices() if self.reference_prices is not None else None
        at, now = step_times(events[ref.event :], starts[ref.event :], trace.encoded[ref.encoded :], self.clock, vision,
                             self.steps, self.now, None if known is None else known[ref.event :])  # fmt: skip
        prefilling = {s.order for s in self.prefilling}
        started = {s.order: s for s in self.running if s.order not in prefilling}  # first token before this step
        running, waiting = {s.order: s for s in self.running}, list(self.waiting)  # waiting[j] is admitted j+1-th
        for order, span in zip(ref.orders, trace.spans[ref.span :], strict=True):
            s = running.get(order) or waiting[order - self.admitted - 1]
            if isinstance(s, tuple):  # never looked at: it waited until this step
                p, admission, arrival, arrival_s, index = s
                self.spans.append(Span(arrival, span.first, span.finish, admission[1], arrival_s, at[span.first + 1],
                                       at[span.finish + 1], len(p.image_tokens), index - 1))  # fmt: skip
                continue
            first, first_s = (s.first, s.first_s) if order in started else (span.first, at[span.first + 1])
            self.spans.append(Span(s.arrival, first, span.finish, s.output, s.arrival_s, first_s, at[span.finish + 1],
                                   len(s.prompt.image_tokens), s.index - 1))  # fmt: skip
        self.events.extend(events[ref.event :])
        self.starts.extend(starts[ref.event :])
        self.encoded.extend(trace.encoded[ref.encoded :])
        self.completed += len(ref.orders)
        self.steps, self.now = trace.steps, now
        self.running.clear()
        self.prefilling.clear()
        self.waiting.clear()

    def _next_seq(self, at: float, *, slot: bool = False) -> _Arrived | str | None:
        """The next request the engine accepts (refused ones counted by reason), None when none is left. ``slot``: an
        arrival in time takes one request, refused or not, and a refused one answers its reason: vLLM 0.32's client
        (``vllm/benchmarks/serve.py`` ``get_request``) draws an arrival for every request it sends, and one the server
        refuses fails at once in its slot, so the next keeps its own (a closed loop's client sends its next at once)."""
        admissions, prompts = self.admissions, self.prompts
        while True:
            if admissions is not None:
                if self.taken >= len(admissions):
                    return None
                p, admission = prompts[self.taken], admissions[self.taken]
            else:
                p = next(self.source, None)
                if p is None:
                    return None
                admission = _admission_of(p, self.limits)
            self.taken += 1
            reason, largest = admission[0], admission[5]
            if reason is not None:
                self.refusals[reason] = self.refusals.get(reason, 0) + 1
                if slot:
                    self.refused_s = (self.refused_s[0], at) if self.refused_s else (at, at)
                    return reason
                continue
            self.largest = max(self.largest, largest)
            return p, admission, self.steps, at, self.taken

    def _arrive(self, at: float | None = None, *, slot: bool = False) -> bool:
        seq = self._next_seq(self.now if at is None else at, slot=slot)
        if seq is None:
            self.exhausted = True
            return False
        if not isinstance(seq, str):  # a refused request in its arrival slot never waits
            self.waiting.append(seq)
        return True

    def _take_arrivals(self) -> None:
        """Requests that have arrived by ``now``: Poisson arrivals due, or clients the profile adds."""
        arrivals = self.arrivals
        if arrivals.times:
            while not self.exhausted and self.next_arrival <= self.now:
                self._arrive(self.next_arrival, slot=True)
                self.recorded += 1
                self.next_arrival = arrivals.times[self.recorded] if self.recorded < len(arrivals.times) else math.inf
                if self.next_arrival == math.inf:
                    self.exhausted = True
        elif arrivals.rate:
            while not self.exhausted and self.next_arrival <= self.now:
                self._arrive(self.next_arrival, slot=True)
                self.next_arrival += self.rng.expovariate(arrivals.rate)
        elif arrivals.profile:
            while (not self.exhausted and len(self.running) + len(self.waiting) < arrivals.clients(self.now)
                   and self._arrive()):  # fmt: skip
                pass

    def _horizon(self) -> float:
        """When arrivals next change what may run (a Poisson arrival, a profile change)."""
        if self.exhausted:
            return math.inf
        if self.arrivals.rate or self.arrivals.times:
            return self.next_arrival
        return self.arrivals.next_change(self.now) if self.arrivals.profile else math.inf

    def _admissible(self) -> bool:
        """The first waiting request may start: a sequence slot and the KV blocks it needs are free."""
        return bool(self.waiting) and len(self.running) < self.limits.max_num_seqs and \
            self.reserved + self._head().need_blocks <= self.limits.num_kv_blocks  # fmt: skip

    def _head(self) -> _Seq:
        """The first waiting request, as a request the scheduler steps (made so when first looked at)."""
        head = self.waiting[0]
        if isinstance(head, tuple):
            p, (_, output, computed, need, images, _), arrival, arrival_s, index = head
            head = self.waiting[0] = _Seq(p, output, computed, need, list(images), arrival=arrival,
                                          arrival_s=arrival_s, index=index)  # fmt: skip
        return head

    def _finish(self, done: list[_Seq]) -> None:
        """Requests that have their last token, in admission order, leave (a closed loop's client sends its next)."""
        for s in done:
            if s.ends >= 0:
                self.batch.leave(s)
            self.running.remove(s)
            self.reserved -= s.need_blocks
            self.completed += 1
            if self._orders is not None:
                self._orders.append(s.order)
            self.spans.append(Span(s.arrival, s.first, self.steps - 1, s.output, s.arrival_s, s.first_s, self.now,
                                   len(s.prompt.image_tokens), s.index - 1))  # fmt: skip
            if not self.arrivals.timed and not self.exhausted:
                self._arrive()

    def _emit(self, event: Event, start: int) -> None:
        self.events.append(event)
        self.starts.append(start)

    def _more(self) -> bool:
        if self.running or self.waiting:
            return self.drain or not self.exhausted
        return self.arrivals.timed and not self.exhausted

    def _decode_stretch(self) -> None:
        """Decode steps until a request finishes or an arrival may change the batch, as runs of equal blocks."""
        batch = self.batch
        done = 0
        limit = self._horizon()
        for run in batch.runs(batch.remaining()):
            k = run.steps
            per = self.clock(run) if self.clock is not None else 0.0
            if limit < math.inf and per > 0 and self.now + k * per > limit:
                k = max(1, math.ceil((limit - self.now) / per))
            self._emit(DecodeRun(run.sequences, run.blocks, k), self.steps + done)
            self.now += k * per
            done += k
            if k < run.steps:
                break
        batch.advance(done)
        self.steps += done
        self._finish(batch.finished())

    def _vision(self, tokens: int) -> float:
        got = self.vision_s.get(tokens)
        if got is None:
            got = self.vision_s[tokens] = self.vision_clock(tokens) if self.vision_clock is not None else 0.0
        return got

    def _serve_running(self, budget: int, encoder: list[int], step_images: list[int],
                       scheduled: list[tuple[_Seq, int]]) -> tuple[int, int]:  # fmt: skip
        """The running requests' part of a step, in admission order: a decoding request takes a token of the budget,
        a prefilling one its prompt's next chunk (appended to ``scheduled``); once the budget is spent the rest wait.
        Only the prefilling requests are visited: the decoding ones between them are counted by position. Returns
        (budget left, running position from which decoding requests sit the step out)."""
        position = 0
        for s in self.prefilling:
            at = self.running.index(s)
            if budget <= at - position:  # the decoding requests before it take the rest
                return 0, position + budget
            budget -= at - position
            n = _cut_for_encoder(s, min(s.prompt.tokens - s.computed, budget), encoder, step_images)
            if n:
                scheduled.append((s, n))
                budget -= n
            position = at + 1
            if budget <= 0:
                return 0, position
        tail = len(self.running) - position
        if budget <= tail:
            return 0, position + budget
        return budget - tail, len(self.running)

    def _step(self) -> None:
        """One scheduler step: running requests first (a decode token, or their prompt's next chunk), then waiting
        ones admitted while the token budget, the sequence slots and the KV cache allow."""
        limits, batch = self.limits, self.batch
        encoder = [max(self.encoder_budget or limits.max_num_batched_tokens, self.largest)]
        scheduled: list[tuple[_Seq, int]] = []
        step_images: list[int] = []
        budget, cut = self._serve_running(limits.max_num_batched_tokens, encoder, step_images, scheduled)
        # decoding requests past the budget sit this step out: out of the batch while it steps
        idle = [s for s in self.running[cut:] if s.ends >= 0] if cut < len(self.running) else []
        for s in idle:
            batch.leave(s)
        decodes, decode_blocks = batch.size, batch.blocks
        while budget > 0 and self._admissible():
            s = self._head()
            n = _cut_for_encoder(s, min(s.prompt.tokens - s.computed, budget), encoder, step_images)
            if not n:
                break
            self.waiting.popleft()
            self.admitted += 1
            s.order = self.admitted
            self.running.append(s)
            self.prefilling.append(s)
            self.reserved += s.need_blocks
            scheduled.append((s, n))
            budget -= n
        chunks = tuple(PrefillChunk(n, s.computed) for s, n in scheduled)
        step_s = sum(self._vision(t) for t in step_images) if self.vision_clock is not None else 0.0
        self.encoded.extend((self.steps, t) for t in step_images)
        if decodes:
            run = DecodeRun(decodes, decode_blocks, 1, with_prefill=bool(chunks))
            self._emit(run, self.steps)
            step_s += self.clock(run) if self.clock is not None else 0.0
        if chunks:
            self._emit(chunks, self.steps)
            step_s += self.clock(chunks) if self.clock is not None else 0.0
        if not decodes and not chunks:  # unreachable while the encoder budget holds the largest image
            raise AssertionError("a scheduler step with nothing to run")
        self.now += step_s
        batch.advance(1)
        for s in idle:
            batch.join(s)
        done = batch.finished()
        for s, n in scheduled:
            s.computed += n
            if not s.prefilling:
                self.prefilling.remove(s)
                s.generated = 1
                s.first, s.first_s = self.steps, self.now
                if s.generated < s.output:
                    batch.join(s)
                else:
                    done.append(s)
        self.steps += 1
        if done:
            self._finish(sorted(done, key=_admission))

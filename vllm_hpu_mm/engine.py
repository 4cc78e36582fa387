"""The engine's vocabulary: the numbers a runtime's bucketing and vLLM's scheduler read (:class:`EngineShape`), a
text bucket (:data:`Bucket`), the graphs a runtime warms (:class:`TextShapes`), one step's prefill work
(:class:`PrefillChunk`), one forward as the runtime runs it (:class:`GraphRun`) and a runtime's bucket lookup
(:class:`TextLookup`).

On a low floor so that buckets/, replay/, runtimes/ and plan/ share one type for each (nothing here imports them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from typing import Generic, Literal, Protocol, TypeVar

from vllm_hpu_mm.errors import ConfigError

__all__ = ["Bucket", "EngineShape", "GraphRun", "KeptWhileNoFallback", "PrefillChunk", "TextLookup", "TextShapes"]

T = TypeVar("T")

#: A text bucket: (batch, query tokens, context blocks); decode: (batch, 1, KV blocks).
Bucket = tuple[int, int, int]


@dataclasses.dataclass(frozen=True)
class EngineShape:
    """The engine numbers a runtime's bucketing reads (vllm-gaudi: ``HPUBucketingManager.initialize``,
    ``warmup_model`` @ 091bbadd) and the scheduler's limits.

    ``max_num_batched_tokens`` is the scheduler's final value (vLLM fills it in when chunked prefill is off).
    ``num_kv_blocks`` is known only at run time: the runtime sets it from the KV cache it allocated.
    ``skip_decode_block_clamp`` is True only for hybrid / interleaved-sliding-window models (not Qwen2.5-VL).
    """

    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    num_kv_blocks: int
    num_speculative_tokens: int = 0
    #: vLLM's ``--performance-mode`` (``interactivity`` captures every CUDA graph size up to 32).
    performance_mode: str = "balanced"
    mamba_chunk_size: int = 0
    mamba_chunk_size_is_explicit: bool = False
    skip_decode_block_clamp: bool = False

    def __post_init__(self) -> None:
        for name in ("max_model_len", "max_num_seqs", "max_num_batched_tokens", "block_size", "num_kv_blocks"):
            if getattr(self, name) < 1:
                raise ConfigError(f"EngineShape.{name}={getattr(self, name)} is invalid; accepted: an integer >= 1")

    def limits(self) -> dict[str, int]:
        """The five numbers a replay's report shows, in this order."""
        return {"max_model_len": self.max_model_len, "max_num_seqs": self.max_num_seqs,
                "max_num_batched_tokens": self.max_num_batched_tokens, "block_size": self.block_size,
                "num_kv_blocks": self.num_kv_blocks}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class TextShapes:
    """The language-model graphs a runtime warms: prefill ``(batch, query tokens, context blocks)`` and decode
    ``(batch, KV blocks)`` (CUDA: ``(tokens, 0)`` per capture size), and how they were obtained, in words."""

    prefill: tuple[Bucket, ...]
    decode: tuple[tuple[int, int], ...]
    source: str
    #: What the runtime does with the configuration that the user would not see otherwise (e.g. buckets of a bucket
    #: file its filters drop), one sentence each.
    notes: tuple[str, ...] = ()
    #: Which of the user's settings wins where the runtime resolves two of them against each other, and why, one
    #: sentence each (e.g. a deprecated variable that replaces the chosen strategy).
    resolved: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class PrefillChunk:
    """One request's share of a scheduler step's prefill: ``query`` new tokens after ``context`` tokens already in
    the KV cache (earlier chunks, or a prefix-cache hit)."""

    query: int
    context: int


@dataclasses.dataclass(frozen=True)
class GraphRun:
    """One language-model forward as the runtime runs it: the bucket its lookup returned, the shape that ran (the
    bucket, or larger where the data does not fit it) and the real work in it."""

    phase: Literal["prompt", "decode"]
    #: (batch, query tokens, context blocks); decode: (batch, 1, blocks).
    bucket: Bucket
    shape: Bucket
    #: Real sequences, real query tokens (decode: one per sequence) and real context blocks (summed over sequences).
    requests: int
    tokens: int
    blocks: int


class TextLookup(Protocol):
    """A runtime's bucket lookup as its model runner drives it, for replaying traffic (stateful: a runtime that
    compiles a fallback bucket finds it again later)."""

    #: The graphs warmed at start-up (without VLLM_SKIP_WARMUP): (phase, shape).
    warmed: frozenset[tuple[str, Bucket]]
    #: Most sequences one prefill batch merges; most KV blocks the runtime's own decode buckets reach.
    max_prefill_batch: int
    decode_block_cap: int
    #: A lookup may also set ``prefix_caching_off`` (why the server computes every prompt token, no prefix-cache
    #: hit; absent: None; :func:`prefix_caching_off`) and ``prompt_fits_model_len`` (True: it keeps a prompt bucket
    #: only when query + context x block_size <= max_model_len, so planned buckets must; absent: False;
    #: :func:`prompt_fits_model_len`), and ``listed`` (the (prompt, decode) buckets its strategy or bucket file lists,
    #: fewer than it warms where speculative decoding adds decode buckets to them; absent: those warmed;
    #: :func:`listed_buckets`).

    def prefill(self, chunks: tuple[PrefillChunk, ...]) -> list[GraphRun]:
        """The forwards of one step's prefill chunks, in the runner's order."""
        ...

    def decode(self, sequences: int, blocks: int) -> GraphRun:
        """The forward of one decode step of ``sequences`` sequences holding ``blocks`` KV blocks in all (the token
        being decoded included)."""
        ...

    def fallbacks(self) -> list[tuple[str, Bucket]]:
        """Buckets the lookup generated because none covered a shape, in order ((phase, bucket))."""
        ...


def prompt_fits_model_len(lookup: TextLookup) -> bool:
    """Whether ``lookup`` keeps only prompt buckets within max_model_len (query + context blocks; vllm-gaudi before
    v0.19.0), so that buckets planned for it must be."""
    return bool(getattr(lookup, "prompt_fits_model_len", False))


def listed_buckets(lookup: TextLookup) -> tuple[int, int]:
    """(prompt, decode) buckets ``lookup``'s runtime lists: its ``listed`` where it has one, else those it warms."""
    listed = getattr(lookup, "listed", None)
    if listed is not None:
        return (int(listed[0]), int(listed[1]))
    return (sum(1 for p, _ in lookup.warmed if p == "prompt"), sum(1 for p, _ in lookup.warmed if p == "decode"))


def prefix_caching_off(lookup: TextLookup) -> str | None:
    """Why the server ``lookup`` stands for turns prefix caching off, so that traffic's cached tokens are computed
    (None: they are hits)."""
    off = getattr(lookup, "prefix_caching_off", None)
    return off if isinstance(off, str) else None


#: A memo's answer for a key it does not hold (an answer may be None).
_MISSING = object()


class KeptWhileNoFallback(Generic[T]):
    """A memo of answers that rest on ``lookup`` (a step's forwards, its price): kept while the lookup generates no
    fallback. The lookup answers the same input alike in the same state, and only a fallback changes its state (the
    memo then starts again); an answer whose own look-up generated one is not kept, so every fallback the lookup
    would generate is generated, in order. At most ``most`` answers (past it, the memo starts again)."""

    def __init__(self, lookup: TextLookup, most: int) -> None:
        self._most = most
        self._memo: dict[Hashable, T] = {}
        # a lookup that counts its fallbacks without copying them (a replay asks at every step)
        counted: Callable[[], int] | None = getattr(lookup, "fallback_count", None)
        self._count: Callable[[], int] = counted if counted is not None else lambda: len(lookup.fallbacks())
        self._state = self._count()

    def __call__(self, key: Hashable, compute: Callable[[], T]) -> T:
        n = self._count()
        if n != self._state:
            self._memo.clear()
            self._state = n
        got = self._memo.get(key, _MISSING)
        if got is not _MISSING:
            return got  # type: ignore[return-value]
        got = compute()
        if self._count() == n:
            if len(self._memo) >= self._most:
                self._memo.clear()
            self._memo[key] = got
        return got

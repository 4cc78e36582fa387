"""Traffic as the planners and the replay read it: distinct requests with how often each occurs.

A request has at most one image (``(width, height)`` in pixels, as sent), its prompt's text tokens (a cached prefix
included), the tokens of its answer and the prefix tokens a prefix-cache hit skips. Text fields may be unknown
(``None``: an image-size list says nothing about them); :meth:`Traffic.sample` then draws them from a text
distribution (the embedded default's, :mod:`.default`).

Traffic is held as counts over distinct rows, never one entry per request: reading, merging and planning cost what
the distinct rows cost, whatever the number of requests they stand for.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping

import numpy as np

# numpy loads its random module on first use: loaded with this module instead, so that a planning run's forked
# children (buckets/turns.py) inherit it rather than each loading it again (a fiftieth of a second each)
import numpy.random

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.kept import kept_property

__all__ = ["Request", "Size", "TextRow", "Traffic"]

#: (width, height) in pixels.
Size = tuple[int, int]
#: (text tokens, output tokens, cached tokens) of one request.
TextRow = tuple[int, int, int]


@dataclasses.dataclass(frozen=True)
class Request:
    """One kind of request. ``text_tokens`` / ``output_tokens`` / ``cached_tokens`` are None when unknown."""

    image: Size | None
    text_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None

    @property
    def text_known(self) -> bool:
        return self.text_tokens is not None

    def sort_key(self) -> tuple[int, ...]:
        """A total order (unknown fields first), so that seeded draws do not depend on insertion order."""
        w, h = self.image or (-1, -1)
        return (w, h, *(-1 if v is None else v for v in (self.text_tokens, self.output_tokens, self.cached_tokens)))


@dataclasses.dataclass(frozen=True)
class Traffic:
    """Distinct requests and their counts, and where they came from (in words).

    ``running``: requests running at once, when the source says (vLLM's running-requests gauge); None otherwise.
    ``text``: the source's own text distribution for requests whose text is unknown (None: the caller's default);
    ``text_includes_images``: its prompt lengths count the image placeholder tokens too (vLLM's metrics do).
    """

    counts: Mapping[Request, int]
    source: str
    running: int | None = None
    text: Mapping[TextRow, int] | None = None
    text_includes_images: bool = False

    def __post_init__(self) -> None:
        if not self.counts or sum(self.counts.values()) <= 0:
            raise ConfigError(f"{self.source}: no requests; accepted: at least one row")

    @property
    def num_requests(self) -> int:
        return sum(self.counts.values())

    @property
    def num_distinct(self) -> int:
        return len(self.counts)

    def images(self) -> dict[Size, int]:
        """Image size -> how many requests carry it (text-only requests left out)."""
        out: Counter[Size] = Counter()
        for r, n in self.counts.items():
            if r.image is not None:
                out[r.image] += n
        return dict(out)

    def text_only_share(self) -> float:
        return sum(n for r, n in self.counts.items() if r.image is None) / self.num_requests

    def text_rows(self) -> dict[TextRow, int]:
        """(text, output, cached) -> count over the requests whose text is known."""
        out: Counter[TextRow] = Counter()
        for r, n in self.counts.items():
            if r.text_tokens is not None:
                out[(r.text_tokens, r.output_tokens or 1, r.cached_tokens or 0)] += n
        return dict(out)

    @property
    def text_known(self) -> bool:
        return all(r.text_known for r in self.counts)

    @kept_property
    def _ordered(self) -> tuple[list[Request], np.ndarray]:  # type: ignore[type-arg]
        """The distinct requests in a total order and their shares: sorted once, not per draw (a replay draws once
        per load level, over up to MAX_DISTINCT rows)."""
        kinds = sorted(self.counts, key=Request.sort_key)
        weights = np.array([self.counts[k] for k in kinds], dtype=np.float64)
        return kinds, weights / weights.sum()

    def sample(self, n: int, seed: int, text: Mapping[TextRow, int] | None = None) -> list[Request]:
        """``n`` requests drawn with replacement in proportion to their counts (seeded); unknown text fields are
        drawn from the traffic's own text distribution, else from ``text`` (one is needed when some are unknown)."""
        text = self.text or text
        rng = np.random.default_rng(seed)
        kinds, p = self._ordered
        picks = rng.choice(len(kinds), size=n, p=p)
        out = [kinds[int(i)] for i in picks]
        if all(r.text_known and r.output_tokens is not None for r in out):
            return out
        if not text:
            raise ConfigError(
                f"{self.source}: requests without text columns need a text distribution to draw from; "
                "accepted: text_tokens and output_tokens columns, or the default traffic's text"
            )
        rows = sorted(text)
        tw = np.array([text[r] for r in rows], dtype=np.float64)
        draws = rng.choice(len(rows), size=n, p=tw / tw.sum())
        filled = []
        for r, d in zip(out, draws, strict=True):
            t, o, c = rows[int(d)]
            if r.text_known:  # a known prompt keeps its own fields; an unknown answer length is drawn
                filled.append(Request(r.image, r.text_tokens, r.output_tokens or o, r.cached_tokens or 0))
            else:
                filled.append(Request(r.image, t, o, c))
        return filled

    def without_cached_tokens(self) -> Traffic:
        """The same requests with no prefix-cache hit (a server with prefix caching off computes every token)."""
        counts: Counter[Request] = Counter()
        for r, n in self.counts.items():
            counts[dataclasses.replace(r, cached_tokens=None if r.cached_tokens is None else 0)] += n
        text: Counter[TextRow] | None = None
        if self.text is not None:
            text = Counter()
            for (t, o, _), n in self.text.items():
                text[(t, o, 0)] += n
        return dataclasses.replace(self, counts=dict(counts), text=None if text is None else dict(text))

    @property
    def has_cached_tokens(self) -> bool:
        """Whether any request (or the source's text distribution) holds a prefix-cache hit."""
        return any(r.cached_tokens for r in self.counts) or any(c for (_, _, c) in (self.text or {}))

    @staticmethod
    def combine(parts: Iterable[Traffic]) -> Traffic:
        """Several sources as one traffic (counts added)."""
        items = list(parts)
        counts: Counter[Request] = Counter()
        for part in items:
            counts.update(part.counts)
        running = next((p.running for p in items if p.running is not None), None)
        own = next((p for p in items if p.text is not None), None)
        text, includes = (own.text, own.text_includes_images) if own is not None else (None, False)
        return Traffic(dict(counts), " + ".join(p.source for p in items), running, text, includes)

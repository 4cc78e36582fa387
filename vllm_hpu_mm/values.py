"""The value types our settings are made of: alignment mode, oversize policy, graph backends, and the vision bucket
list (:class:`Buckets`, validated once when it is built and accepted everywhere after that without re-checking).

Imports only the standard library and :mod:`vllm_hpu_mm.errors` (itself standard-library only), so the environment
registry (:mod:`vllm_hpu_mm.envs`) can use it without pulling in Pillow, NumPy or the rest of the package.

A bucket is a number of 14x14 vision patches, ``(W * H) / (14 * 14)`` for an image of W x H pixels. 112-aligned
images always have a patch count that is a multiple of 64 (8 x 8 patches per 112 x 112 tile), so buckets are
multiples of 64 as well: then the padding between an image and its bucket is whole tiles. vllm-gaudi reads any
integer list (vision.py ``_process_buckets`` @ 091bbadd only sorts it) and pads an image's rows to its bucket
(models/qwen2_5_vl.py ``num_pad_tokens = bucket_size - curr_img_size``); the vision merger then takes the rows in
2 x 2 groups, so a bucket must be a multiple of 4 (:data:`MERGE_GRANULE`). A multiple of 4 that is not one of 64 is
kept as given, with a note that names no runtime (:func:`off_tile_note`).
"""

from __future__ import annotations

import bisect
import enum
import warnings
from collections.abc import Iterable
from typing import Literal

from vllm_hpu_mm.errors import BucketError, InputNote

__all__ = [
    "ACCEPTED_FORM",
    "BUCKET_GRANULE",
    "DEFAULT_BUCKETS",
    "GIB",
    "GRAPH_BACKENDS",
    "GRAPH_BUDGET_CEILING",
    "MAX_BUCKET",
    "MERGE_GRANULE",
    "MIB",
    "PIXELS_PER_PATCH",
    "STAGES",
    "AlignMode",
    "Backend",
    "Buckets",
    "OversizePolicy",
    "Stage",
    "nearest_tiles",
    "off_tile_note",
    "parse_buckets",
    "seconds_given",
    "size_cap",
]


class AlignMode(str, enum.Enum):
    """How an image reaches a 112-pixel-aligned size (``VLLM_HPU_MM_ALIGN_MODE``)."""

    #: Resize to the nearest 112-multiple grid, aspect ratio kept as closely as possible (Qwen's rule, factor 112).
    NEAREST = "nearest"
    #: Resize down to the 112-multiple grid at or below the image: never bills more tokens than the stock rule.
    DOWN = "down"
    #: Keep every pixel as it is and pad the canvas up to the next 112 multiple (for text-heavy images).
    PAD = "pad"


class OversizePolicy(str, enum.Enum):
    """What happens to an image above the largest bucket (``VLLM_HPU_MM_OVERSIZE_POLICY``)."""

    #: Resize the image so it fits the largest bucket, aspect ratio kept (default: no recompilation ever).
    SHRINK = "shrink"
    #: Run the exact shape eagerly; counted and logged as a recompilation.
    EAGER = "eager"
    #: Refuse the request with a clear 4xx error.
    REJECT = "reject"


#: The device families a plan targets: the graph model and the memory reader follow from it.
Backend = Literal["hpu", "cuda", "cpu"]

#: Where in a server's life a memory problem bites: loading and profiling, KV-cache allocation, graph capture or
#: warm-up, serving. The plan's findings and the OOM doctor's diagnoses share these.
Stage = Literal["startup", "kv_cache", "graph_capture", "runtime"]
STAGES: tuple[Stage, ...] = ("startup", "kv_cache", "graph_capture", "runtime")

#: Bytes per GiB and MiB: every memory figure of the package is counted in bytes and printed in these.
GIB = 2**30
MIB = 2**20


def size_cap(limit: int) -> str:
    """A size cap on what is read (a page, a file), in the one wording every refusal and the docs use: in MiB, with
    the exact bytes, ``8 MiB (8,388,608 bytes)``, so that either figure a user looks for is there; a cap that is no
    whole number of MiB (a test's) in bytes alone."""
    return f"{limit // MIB} MiB ({limit:,} bytes)" if limit >= MIB and limit % MIB == 0 else f"{limit:,} bytes"


def seconds_given(total: float) -> str:
    """A length of time as the user gave it, to the millisecond: 86,401 or 86,400.5, never 86,401.000."""
    return f"{total:,.3f}".rstrip("0").rstrip(".")


#: ``VLLM_HPU_MM_GRAPH_BACKEND`` values (``vllm_hpu_mm.graphs.select`` says what each runs).
GRAPH_BACKENDS = ("auto", "cpu", "cuda", "hpu", "none")

#: The most text graphs a given budget (--text-graph-budget, serve's --plan-text-graph-budget) may ask for, in the
#: words the help, the refusal and docs/text-buckets.md share: any warm-up a user of the runtime can already configure
#: (vllm-gaudi's lin warms more than exp at most limits), never more (planning work grows with the budget).
GRAPH_BUDGET_CEILING = "the graphs the runtime's largest built-in strategy (exp, lin or pad) warms for the limits"

#: Patches per bucket granule: one 112 x 112 tile is 8 x 8 patches of 14 x 14 pixels.
BUCKET_GRANULE = 64
#: The least a bucket must be a multiple of: Qwen2.5-VL's patch merger takes 2 x 2 patches per token (vLLM 0.32
#: qwen2_5_vl.py:617 ``x.view(-1, context_dim * 4)``), so padded
#: rows must come in fours (and our runner's dummy image has even sides, graphs/runner.py ``dummy_grid``).
MERGE_GRANULE = 4
#: vLLM 0.32: a modality ``--limit-mm-per-prompt`` does not name allows this many items (``config/multimodal.py``
#: ``MultiModalConfig.get_limit_per_prompt``); whether the tower is built and what vllm-gaudi warms both read it.
UNSET_MM_LIMIT = 999
#: Pixels per patch (14 x 14).
PIXELS_PER_PATCH = 14 * 14
#: The largest bucket accepted: 2**20 patches (262,144 image tokens, about 205 megapixels). Above any image the server
#: accepts by default (VLLM_HPU_MM_MAX_IMAGE_PIXELS: 178,956,970 pixels, 913,045 patches) and any sequence Qwen2.5-VL
#: holds (128,000 tokens): a bucket above it can only be a typo.
MAX_BUCKET = 2**20
ACCEPTED_FORM = (
    f"a comma-separated list of positive integers, each a multiple of 64 (whole 112-px tiles; another multiple of 4 "
    f"is read with a note) up to {MAX_BUCKET}, e.g. 1600,3136,4096"
)


class Buckets(tuple[int, ...]):
    """A valid vision bucket list: non-empty, distinct positive multiples of 4 (of 64 but for a slip read as
    vllm-gaudi reads it), ascending.

    ``Buckets(values, source=...)`` validates (and sorts) once; a ``Buckets`` given again is returned as it is, so
    functions that take a bucket list call ``Buckets(buckets)`` to accept either form without re-checking.
    ``source`` names the setting the values came from, so that every error says where to look.
    """

    __slots__ = ()

    def __new__(cls, values: Iterable[int], *, source: str = "buckets") -> Buckets:
        if isinstance(values, Buckets):
            return values
        numbers = [int(v) for v in values]
        if not numbers:
            raise BucketError(f"{source} is empty; expected {ACCEPTED_FORM}")
        for n in numbers:
            if n <= 0:
                raise BucketError(f"{source}: bucket {n} is not positive; expected {ACCEPTED_FORM}")
            if n > MAX_BUCKET:
                raise BucketError(f"{source}: bucket {n} is larger than any image can be (at most {MAX_BUCKET} "
                                  f"patches, about 205 megapixels); expected {ACCEPTED_FORM}")  # fmt: skip
            if n % MERGE_GRANULE:
                lower = n // BUCKET_GRANULE * BUCKET_GRANULE
                raise BucketError(
                    f"{source}: bucket {n} is not a multiple of {MERGE_GRANULE} (the vision merger takes patches in "
                    f"2x2 groups, so vllm-gaudi fails on it; nearest whole tiles: {max(lower, BUCKET_GRANULE)} or "
                    f"{lower + BUCKET_GRANULE}); expected {ACCEPTED_FORM}"
                )
        seen: set[int] = set()
        for n in numbers:
            if n in seen:
                raise BucketError(f"{source}: bucket {n} appears more than once; expected {ACCEPTED_FORM}")
            seen.add(n)
        return super().__new__(cls, sorted(numbers))

    @property
    def largest(self) -> int:
        return self[-1]

    @property
    def shrink_limit(self) -> int:
        """The ``max_pixels`` that makes every aligned image fit the largest bucket: ``largest * 196``."""
        return self[-1] * PIXELS_PER_PATCH

    def bucket_for(self, patches: int) -> int | None:
        """The smallest bucket that holds ``patches``, or None if it exceeds the largest."""
        i = bisect.bisect_left(self, patches)
        return self[i] if i < len(self) else None

    def __repr__(self) -> str:
        return f"Buckets({','.join(map(str, self))})"


#: The Gaudi guide's default for Qwen2.5-VL (patch counts).
DEFAULT_BUCKETS = Buckets((1600, 3136, 4096, 6400, 7744, 9216, 12544), source="DEFAULT_BUCKETS")


def nearest_tiles(buckets: Iterable[int]) -> str:
    """The whole 112-px tiles (multiples of 64 patches) either side of each bucket: "1604 -> 1600 or 1664"."""
    return ", ".join(f"{n} -> {max(n // BUCKET_GRANULE * BUCKET_GRANULE, BUCKET_GRANULE)} or "
                     f"{(n // BUCKET_GRANULE + 1) * BUCKET_GRANULE}" for n in buckets)  # fmt: skip


def off_tile_note(buckets: Iterable[int], *, source: str) -> str | None:
    """The note for buckets that are not whole 112-px tiles (multiples of 64), or None: kept as given, but no aligned
    image fills one, so each pads at least a few rows more than the tile below or above would. It names no runtime:
    a list is parsed before the runtime planned for is known, and some runtimes do not read it at all (vllm-fork
    before 1.22), so how one reads it is the plan's to say (its ``settings_not_read``, or the refusal of a bucket
    the runtime stops on)."""
    off = [n for n in buckets if n % BUCKET_GRANULE]
    if not off:
        return None
    near = nearest_tiles(off)
    return (f"{source}: {', '.join(map(str, off))} not a multiple of {BUCKET_GRANULE}: kept as given, but images are "
            f"whole 112-px tiles of {BUCKET_GRANULE} patches, so such a bucket only adds padding (an image pads to "
            f"its bucket); nearest whole tiles: {near}")  # fmt: skip


def parse_buckets(value: str | Iterable[int], *, source: str = "VLLM_MULTIMODAL_BUCKETS") -> Buckets:
    """Parse and validate a bucket list written as text (``"1600,3136"``) or given as integers. As vllm-gaudi reads
    ``VLLM_MULTIMODAL_BUCKETS`` (it sorts the list and keeps repeats), the text a user writes, in the variable, a flag
    or an argument alike, is read so: a repeated bucket once, and a bucket that is not whole tiles as it is, each
    with an :class:`~vllm_hpu_mm.errors.InputNote` (:func:`off_tile_note`).

    Raises :class:`BucketError` naming ``source``, the bad token and the accepted form.
    """
    if isinstance(value, str):
        numbers = bucket_numbers(value, source=source)
        repeated = sorted({n for n in numbers if numbers.count(n) > 1})
        if repeated:
            warnings.warn(InputNote(f"{source}={value!r} lists {', '.join(map(str, repeated))} more than once: read "
                                    "once (a runtime that reads the list as given warms a repeated bucket again); "
                                    "list each bucket once"), stacklevel=2)  # fmt: skip
        value = list(dict.fromkeys(numbers))
    buckets = Buckets(value, source=source)
    note = off_tile_note(buckets, source=source)
    if note:
        warnings.warn(InputNote(note), stacklevel=2)
    return buckets


def bucket_numbers(value: str, *, source: str = "VLLM_MULTIMODAL_BUCKETS") -> list[int]:
    """The integers of a bucket list written as text, in its order (repeats kept; :class:`Buckets` checks them).

    Raises :class:`BucketError` naming ``source`` on an empty value, an empty entry or a token that is no integer.
    """
    if not value.strip():
        raise BucketError(f"{source} is empty; expected {ACCEPTED_FORM}")
    numbers: list[int] = []
    for token in (t.strip() for t in value.split(",")):
        if not token:
            raise BucketError(f"{source}={value!r} has an empty entry; expected {ACCEPTED_FORM}")
        try:
            numbers.append(int(token))
        except ValueError:
            raise BucketError(f"{source}={value!r}: {token!r} is not an integer; expected {ACCEPTED_FORM}") from None
    return numbers

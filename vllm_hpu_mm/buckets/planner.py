"""The bucket planner: the bucket list that wastes the least vision compute on a given image-size distribution.

Model: each image runs alone in the smallest bucket that holds its aligned patch count (one image per request; the
packing of several images of one request can only lower padding further). The cost of a bucket list is the total of
padded patches, ``sum(bucket_for(c))`` over the images; *efficiency* is real patches / padded patches.

:func:`optimal_buckets` minimises that cost exactly. An optimal list only ever uses bucket values equal to image
patch counts (lowering a bucket to the largest count it serves never costs more), so a dynamic programme over the
``n`` distinct counts, sorted, finds it: ``cost[j][i]`` = least padded patches of the images with the ``i+1``
smallest counts using ``j`` buckets, the largest at ``value[i]``; ``cost[j][i] = min_m cost[j-1][m] + value[i] *
(images with counts in (value[m], value[i]])``. ``O(k n^2)`` integer work, vectorised over ``m``; ``n`` is at most
``largest / 64`` (196 under the default ``max_pixels``). Counts that are not multiples of 64 (never the case for
112-aligned images) are rounded up to one first, so every bucket is a valid multiple of 64.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from vllm_hpu_mm.buckets.packing import bucket_for
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.values import BUCKET_GRANULE, Buckets

_Int = npt.NDArray[np.int64]


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """How a bucket list does on a set of images (each image alone in its bucket)."""

    buckets: tuple[int, ...]
    num_images: int
    #: Sum of the images' aligned patch counts.
    real_patches: int
    #: Sum of the buckets the images ran in (an oversize image counts at its own size: it runs eagerly or is
    #: shrunk upstream, see ``num_shrunk``).
    padded_patches: int
    #: bucket -> number of images that land in it, for every bucket (0 included), ascending.
    per_bucket: dict[int, int]
    #: Images above the largest bucket (they would follow the oversize policy).
    num_oversize: int
    #: Images shrunk below their natural aligned size to fit ``max_pixels`` / the largest bucket (upstream).
    num_shrunk: int
    #: bucket -> real patches of the images that land in it (same keys as ``per_bucket``).
    per_bucket_real: dict[int, int] = dataclasses.field(default_factory=dict)

    @property
    def efficiency(self) -> float:
        """Real patches / padded patches (1.0 for no images)."""
        return self.real_patches / self.padded_patches if self.padded_patches else 1.0


def _check_counts(counts: Sequence[int]) -> None:
    if not counts:
        raise ConfigError("no images to plan buckets for; give at least one image size")
    bad = next((c for c in counts if c <= 0), None)
    if bad is not None:
        raise ConfigError(f"patch count {bad} is not positive; patch counts must be positive integers")


def _round_up(count: int) -> int:
    return math.ceil(count / BUCKET_GRANULE) * BUCKET_GRANULE


def evaluate(counts: Sequence[int], buckets: Sequence[int], *, num_shrunk: int = 0) -> Evaluation:
    """Efficiency, per-bucket hits and oversize count of ``buckets`` (ascending) on images of ``counts`` patches."""
    ordered = Buckets(buckets)
    hits = dict.fromkeys(ordered, 0)
    real = dict.fromkeys(ordered, 0)
    padded = oversize = 0
    for c in counts:
        b = bucket_for(c, ordered)
        if b is None:
            oversize += 1
            padded += c
        else:
            hits[b] += 1
            real[b] += c
            padded += b
    return Evaluation(ordered, len(counts), sum(counts), padded, hits, oversize, num_shrunk, real)


class _Table:
    """The dynamic programme over distinct counts, grown one bucket at a time."""

    def __init__(self, counts: Sequence[int], cover: int | None = None) -> None:
        _check_counts(counts)
        weights = Counter(_round_up(c) for c in counts)
        if cover is not None:
            if cover < max(weights):
                raise ConfigError(f"cover={cover} patches is below the largest image ({max(weights)} patches)")
            weights[_round_up(cover)] += 0  # a value no image has: forces the largest bucket up to it
        self.values: _Int = np.array(sorted(weights), dtype=np.int64)
        self.prefix: _Int = np.concatenate(
            [[0], np.cumsum([weights[int(v)] for v in self.values], dtype=np.int64)]
        ).astype(np.int64)
        # cost[i]: least padded patches for the images with the i+1 smallest values, last bucket at values[i].
        self.cost: _Int = self.values * self.prefix[1:]
        self.choice: list[_Int] = [np.full(len(self.values), -1, dtype=np.int64)]

    @property
    def num_buckets(self) -> int:
        return len(self.choice)

    def grow(self) -> None:
        """Allow one more bucket."""
        n = len(self.values)
        new_cost = self.cost.copy()
        new_choice = np.full(n, -1, dtype=np.int64)
        j = self.num_buckets  # the previous level used j buckets: its first usable end is index j - 1
        for i in range(j, n):
            m = np.arange(j - 1, i)
            total = self.cost[m] + self.values[i] * (self.prefix[i + 1] - self.prefix[m + 1])
            best = int(np.argmin(total))
            new_cost[i] = total[best]
            new_choice[i] = m[best]
        self.cost, self.choice = new_cost, [*self.choice, new_choice]

    def buckets(self) -> tuple[int, ...]:
        """The optimal list for the current number of buckets (fewer if there are fewer distinct counts)."""
        result: list[int] = []
        i = len(self.values) - 1
        for level in range(self.num_buckets - 1, -1, -1):
            result.append(int(self.values[i]))
            i = int(self.choice[level][i])
            if i < 0:
                break
        return tuple(reversed(result))

    def best_cost(self) -> int:
        return int(self.cost[-1])


def optimal_buckets(counts: Sequence[int], k: int, *, cover: int | None = None) -> tuple[int, ...]:
    """The ``k``-bucket list (ascending) with the fewest padded patches for images of ``counts`` patches.

    The largest bucket is the largest count (rounded up to 64), or ``cover`` when given (e.g.
    ``largest_patches(max_pixels)``, so that no future image has to be shrunk below ``max_pixels``; it takes one of
    the ``k`` buckets). Returns fewer than ``k`` buckets when there are fewer distinct values (then every image fits
    exactly). Ties go to the list found first.
    """
    if k < 1:
        raise ConfigError(f"number of buckets {k} is invalid; accepted: an integer >= 1")
    table = _Table(counts, cover)
    while table.num_buckets < min(k, len(table.values)):
        table.grow()
    return table.buckets()


def fewest_buckets(counts: Sequence[int], target_efficiency: float, *, cover: int | None = None) -> tuple[int, ...]:
    """The smallest optimal list whose efficiency reaches ``target_efficiency`` (in (0, 1]); ``cover`` as in
    :func:`optimal_buckets`.

    Always succeeds: with one bucket per distinct count every image fits exactly (efficiency 1.0 for 112-aligned
    counts).
    """
    if not 0.0 < target_efficiency <= 1.0:
        raise ConfigError(f"target efficiency {target_efficiency} is invalid; accepted: a number in (0, 1], e.g. 0.95")
    table = _Table(counts, cover)
    real = sum(counts)
    while real < target_efficiency * table.best_cost() and table.num_buckets < len(table.values):
        table.grow()
    return table.buckets()

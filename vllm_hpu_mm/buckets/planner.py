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
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from vllm_hpu_mm.buckets.packing import bucket_for
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.values import BUCKET_GRANULE, Buckets

_Int = npt.NDArray[np.int64]
#: Patch counts one per image, or weighted: count -> images (what large traffic is held as).
Counts = Sequence[int] | Mapping[int, int]

__all__ = [
    "INFEASIBLE",
    "Counts",
    "CoverTable",
    "Evaluation",
    "as_weights",
    "evaluate",
    "fewest_buckets",
    "optimal_buckets",
]


def as_weights(counts: Counts) -> dict[int, int]:
    """Counts as value -> weight (a mapping is taken as it is, zero weights dropped)."""
    if isinstance(counts, Mapping):
        return {int(v): int(n) for v, n in counts.items() if n}
    return dict(Counter(int(c) for c in counts))


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


def _check_counts(weights: Mapping[int, int]) -> None:
    if not weights:
        raise ConfigError("no images to plan buckets for; give at least one image size")
    bad = next((c for c in weights if c <= 0), None)
    if bad is not None:
        raise ConfigError(f"patch count {bad} is not positive; patch counts must be positive integers")


def evaluate(counts: Counts, buckets: Sequence[int], *, num_shrunk: int = 0) -> Evaluation:
    """Efficiency, per-bucket hits and oversize count of ``buckets`` (ascending) on images of ``counts`` patches
    (one per image, or weighted)."""
    ordered = Buckets(buckets)
    hits = dict.fromkeys(ordered, 0)
    real = dict.fromkeys(ordered, 0)
    padded = oversize = 0
    weights = as_weights(counts)
    for c, n in weights.items():
        b = bucket_for(c, ordered)
        if b is None:
            oversize += n
            padded += c * n
        else:
            hits[b] += n
            real[b] += c * n
            padded += b * n
    total = sum(c * n for c, n in weights.items())
    return Evaluation(ordered, sum(weights.values()), total, padded, hits, oversize, num_shrunk, real)


#: The cost of a list that cannot be (too few buckets for the forced values): above any real cost, and safe to add to.
INFEASIBLE = np.iinfo(np.int64).max // 4
#: Ends of the dynamic programme computed together (bounds its temporary memory to this x the distinct values).
_ROWS_PER_BLOCK = 256


class CoverTable:
    """The dynamic programme over distinct weighted values, grown one bucket at a time: the ``k``-value list, ending
    at the largest value (or at ``cover``), with the least ``sum(weight x bucket)``. Values are rounded up to
    multiples of ``granule`` first. Shared by the vision planner (granule 64 patches) and the text bucket planner.

    ``forced`` values (rounded the same way) are in every list: a list ending at ``values[i]`` must have its previous
    bucket at or above the largest forced value below ``values[i]``. Lists of fewer buckets than :attr:`min_buckets`
    cannot hold them all (their cost is :data:`INFEASIBLE`)."""

    def __init__(
        self,
        counts: Counts,
        cover: int | None = None,
        *,
        granule: int = BUCKET_GRANULE,
        forced: Sequence[int] = (),
        max_ratio: float | None = None,
    ) -> None:
        raw = as_weights(counts)
        _check_counts(raw)
        weights: Counter[int] = Counter()
        for c, n in raw.items():
            weights[math.ceil(c / granule) * granule] += n
        if cover is not None:
            if cover < max(weights):
                raise ConfigError(f"cover={cover} is below the largest value ({max(weights)})")
            weights[math.ceil(cover / granule) * granule] += 0  # a value no item has: forces the largest bucket up
        must = sorted({math.ceil(f / granule) * granule for f in forced if 0 < f <= max(weights)})
        for f in must:
            weights[f] += 0
        self.values: _Int = np.array(sorted(weights), dtype=np.int64)
        self.prefix: _Int = np.concatenate(
            [[0], np.cumsum([weights[int(v)] for v in self.values], dtype=np.int64)]
        ).astype(np.int64)
        # lowest[i]: index of the largest forced value below values[i] (-1: none), where the previous bucket may end
        forced_at = np.searchsorted(self.values, np.array([0, *must], dtype=np.int64))
        below = np.searchsorted(np.array(must, dtype=np.int64), self.values, side="left")  # 0: no forced value below
        self.lowest: _Int = np.where(below > 0, forced_at[below], -1).astype(np.int64)
        #: The fewest buckets a list needs to hold every forced value and the largest.
        self.min_buckets = len(must) + (not must or must[-1] < int(self.values[-1]))
        # cost[i]: least padded patches for the images with the i+1 smallest values, last bucket at values[i].
        self.cost: _Int = np.where(self.lowest < 0, self.values * self.prefix[1:], INFEASIBLE).astype(np.int64)
        self.choice: list[_Int] = [np.full(len(self.values), -1, dtype=np.int64)]
        self.max_ratio = max_ratio
        self.cover_value = math.ceil(cover / granule) * granule if cover is not None else -1

    @property
    def num_buckets(self) -> int:
        return len(self.choice)

    def grow(self) -> None:
        """Allow one more bucket."""
        n = len(self.values)
        new_cost = self.cost.copy()
        new_choice = np.full(n, -1, dtype=np.int64)
        j = self.num_buckets  # the previous level used j buckets: its first usable end is index j - 1
        m = np.arange(j - 1, n - 1)
        for start in range(j, n, _ROWS_PER_BLOCK):  # a block of ends at a time: (ends x previous ends) in memory
            i = np.arange(start, min(n, start + _ROWS_PER_BLOCK))
            total = self.cost[m][None, :] + self.values[i][:, None] * (
                self.prefix[i + 1][:, None] - self.prefix[m + 1][None, :]
            )
            # the previous bucket ends before this one, at or above the forced value below it
            bad = (m[None, :] >= i[:, None]) | (m[None, :] < self.lowest[i][:, None])
            if self.max_ratio is not None:  # the cover value (coverage beyond the traffic) may follow any gap
                gap = self.values[i][:, None] > self.max_ratio * self.values[m][None, :]
                bad |= gap & (self.values[i] != self.cover_value)[:, None]
            total[bad] = INFEASIBLE
            best = np.argmin(total, axis=1)  # the first minimum, as a scan in order would find
            new_cost[i] = np.minimum(total[np.arange(len(i)), best], INFEASIBLE)
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


def optimal_buckets(counts: Counts, k: int, *, cover: int | None = None) -> tuple[int, ...]:
    """The ``k``-bucket list (ascending) with the fewest padded patches for images of ``counts`` patches.

    The largest bucket is the largest count (rounded up to 64), or ``cover`` when given (e.g.
    ``largest_patches(max_pixels)``, so that no future image has to be shrunk below ``max_pixels``; it takes one of
    the ``k`` buckets). Returns fewer than ``k`` buckets when there are fewer distinct values (then every image fits
    exactly). Ties go to the list found first.
    """
    if k < 1:
        raise ConfigError(f"number of buckets {k} is invalid; accepted: an integer >= 1")
    table = CoverTable(counts, cover)
    while table.num_buckets < min(k, len(table.values)):
        table.grow()
    return table.buckets()


def fewest_buckets(counts: Counts, target_efficiency: float, *, cover: int | None = None) -> tuple[int, ...]:
    """The smallest optimal list whose efficiency reaches ``target_efficiency`` (in (0, 1]); ``cover`` as in
    :func:`optimal_buckets`.

    Always succeeds: with one bucket per distinct count every image fits exactly (efficiency 1.0 for 112-aligned
    counts).
    """
    if not 0.0 < target_efficiency <= 1.0:
        raise ConfigError(f"target efficiency {target_efficiency} is invalid; accepted: a number in (0, 1], e.g. 0.95")
    table = CoverTable(counts, cover)
    real = sum(c * n for c, n in as_weights(counts).items())
    while real < target_efficiency * table.best_cost() and table.num_buckets < len(table.values):
        table.grow()
    return table.buckets()

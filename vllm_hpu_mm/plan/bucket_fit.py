"""The bucket list planned jointly with the vision graph budget: of all lists whose graphs fit the vision pool, the
one that shrinks the fewest images and, among those, pads the fewest patches. Exact, like the bucket planner.

Why not prune: dropping the largest buckets of a list that does not fit shrinks every image above the new largest
one, while a list that keeps the largest bucket and spends the pool on fewer, better placed buckets fits the same
memory (docs/memory-plan.md's MathVista figures compare the two on the main job).

The search, given image sizes, the pool, the pool model and at most ``max_buckets`` buckets:

1. **Largest bucket.** The fewest images are shrunk when the largest bucket is the largest aligned patch count under
   ``max_pixels``, ``L``; any smaller largest bucket shrinks more. So ``L`` is the largest distinct count whose own
   graph fits the pool, and the sample is re-aligned under the cap ``L x 196`` (what ``shrink`` does at run time).
2. **The rest.** Under private pools (HPU) a list costs ``slope x sum(buckets) + fixed x len(buckets)`` MiB
   (:func:`.vision_cost.capture_bytes`), so for ``k`` buckets the constraint is a bound on ``sum(buckets) / 64``. A
   dynamic programme over (buckets used, largest value, sum / 64) gives the least padded patches exactly. Under one
   shared pool (CUDA) a list costs its largest graph plus a little per extra graph, so only ``k`` is bounded and the
   unconstrained planner answers; without graphs nothing is bounded.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from vllm_hpu_mm.buckets.planner import Counts, Evaluation, as_weights, evaluate, optimal_buckets
from vllm_hpu_mm.buckets.sizes import Sizes, as_counts, patch_counts
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.dims import VisionDims
from vllm_hpu_mm.plan import vision_cost
from vllm_hpu_mm.plan.costs import ESTIMATES, CostProfile
from vllm_hpu_mm.plan.vision_cost import PoolMode
from vllm_hpu_mm.values import BUCKET_GRANULE, MIB, PIXELS_PER_PATCH, AlignMode

__all__ = ["BucketFit", "Padding", "best_fitting_list", "cheapest_padding"]


@dataclasses.dataclass(frozen=True)
class BucketFit:
    """A bucket list and how it does on the sizes it was planned for (images shrunk to its largest bucket)."""

    buckets: tuple[int, ...]
    evaluation: Evaluation
    capture_bytes: int
    #: How the search was bounded, when it was ("" when the list is the exact optimum).
    note: str = ""

    @property
    def shrunk_share(self) -> float:
        e = self.evaluation
        return e.num_shrunk / e.num_images if e.num_images else 0.0


def evaluate_list(
    sizes: Sizes,
    buckets: Sequence[int],
    *,
    min_pixels: int,
    max_pixels: int,
    mode: AlignMode,
    pool: PoolMode,
    vision: VisionDims,
    dtype_size: int,
    costs: CostProfile = ESTIMATES,
) -> BucketFit:
    """How ``buckets`` does on ``sizes`` when images above its largest bucket are shrunk to it."""
    ordered = tuple(sorted(buckets))
    cap = min(max_pixels, ordered[-1] * PIXELS_PER_PATCH)
    sample = patch_counts(sizes, min_pixels=min(min_pixels, cap), max_pixels=cap, mode=mode)
    return BucketFit(
        ordered,
        evaluate(sample.counts, ordered, num_shrunk=sample.num_shrunk),
        vision_cost.capture_bytes(ordered, pool, vision, dtype_size, costs),
    )


#: The search's bounds: element operations of its dynamic programme (about a second of NumPy on the 2-core
#: development machine) and the choices it keeps to rebuild the list (int32: 100 MB). Above them it searches lists
#: of fewer buckets, and says so.
WORK_LIMIT = 4 * 10**8
CHOICES_LIMIT = 25 * 10**6


@dataclasses.dataclass(frozen=True)
class Padding:
    """The cheapest list found and the most buckets the search considered (fewer than asked when more cannot fit
    the pool, or when the work bound stopped it: ``bounded``)."""

    buckets: tuple[int, ...]
    searched: int
    bounded: bool = False


def cheapest_padding(counts: Counts, largest: int, max_buckets: int, max_units: Sequence[int]) -> Padding:
    """The list (ascending, ending at ``largest``) of at most ``max_buckets`` buckets with the fewest padded patches
    over ``counts``, subject to ``sum(buckets) / 64 <= max_units[k - 1]`` for a list of ``k`` buckets (-1: no list
    of ``k`` fits).

    ``counts`` must all be at most ``largest``; every value is rounded up to 64. The buckets are () when even
    ``(largest,)`` breaks its bound. A list of ``k`` buckets sums to at least ``largest`` plus the ``k - 1``
    smallest values, so only the ``k`` whose bound allows that are searched; when no bound binds, the unconstrained
    optimum is the answer. Otherwise the DP keeps, per (k, last value, units), the least padded patches, vectorised
    over units, within :data:`WORK_LIMIT` and :data:`CHOICES_LIMIT`.
    """
    raw = as_weights(counts)
    if any(c > largest for c in raw):
        raise ConfigError(f"patch counts above the largest bucket {largest}: re-align the sample under its cap first")
    weights: Counter[int] = Counter()
    for c, n in raw.items():
        weights[math.ceil(c / BUCKET_GRANULE)] += n
    top = math.ceil(largest / BUCKET_GRANULE)
    weights[top] += 0
    values = sorted(weights)  # in units of 64 patches
    n = len(values)
    smallest = [0, *itertools.accumulate(values[:-1])]  # smallest[j]: the j smallest values below the top
    k_max = 0
    for k in range(1, min(max_buckets, n) + 1):
        if max_units[k - 1] < top + smallest[k - 1]:
            break
        k_max = k
    if k_max == 0:
        return Padding((), 0)
    largest_sums = [sum(values[-k:]) for k in range(1, k_max + 1)]
    if all(max_units[k - 1] >= largest_sums[k - 1] for k in range(1, k_max + 1)):
        return Padding(optimal_buckets(counts, k_max, cover=largest), k_max)
    searched = k_max
    while searched > 1:
        width = max(min(max_units[k - 1], largest_sums[k - 1]) for k in range(1, searched + 1)) + 1
        if (searched - 1) * n * n * width // 2 <= WORK_LIMIT and searched * n * width <= CHOICES_LIMIT:
            break
        searched -= 1
    return Padding(_dp(values, weights, searched, max_units, largest_sums), searched, bounded=searched < k_max)


def _dp(
    values: list[int], weights: Counter[int], k_max: int, max_units: Sequence[int], largest_sums: list[int]
) -> tuple[int, ...]:
    n = len(values)
    prefix = np.concatenate([[0], np.cumsum([weights[v] for v in values])]).astype(np.int64)
    bounds = [min(max_units[k - 1], largest_sums[k - 1]) for k in range(1, k_max + 1)]
    width = max(bounds) + 1
    inf = np.iinfo(np.int64).max // 4
    vals = np.array(values, dtype=np.int64)
    # layer[i, s]: least padded units (x64 patches) for the images up to values[i], last bucket at values[i], bucket
    # units summing to s. One layer per number of buckets (only the last is kept); choices are kept to rebuild the
    # list.
    layer = np.full((n, width), inf, dtype=np.int64)
    for i, v in enumerate(values):
        if v < width:
            layer[i, v] = v * prefix[i + 1]
    choices = [np.full((n, width), -1, dtype=np.int32)]
    best: tuple[int, int, int] | None = None  # (cost, k, units)

    def consider(k: int, lay: np.ndarray) -> None:  # type: ignore[type-arg]
        nonlocal best
        if bounds[k - 1] < 0:
            return
        row = lay[n - 1, : bounds[k - 1] + 1]
        s = int(np.argmin(row))
        if row[s] < inf and (best is None or int(row[s]) < best[0]):
            best = (int(row[s]), k, s)

    consider(1, layer)
    for k in range(2, k_max + 1):
        new = np.full((n, width), inf, dtype=np.int64)
        choice = np.full((n, width), -1, dtype=np.int32)
        for i in range(k - 1, n):
            v = values[i]
            if v >= width:
                continue
            # cost of closing a bucket at values[i] after one at values[m], for every m < i
            add = v * (prefix[i + 1] - prefix[1 : i + 1])
            cand = layer[:i, : width - v] + add[:, None]
            m = np.argmin(cand, axis=0)
            new[i, v:] = cand[m, np.arange(width - v)]
            choice[i, v:] = m
        new[new >= inf] = inf
        layer = new
        choices.append(choice)
        consider(k, new)
    if best is None:
        return ()
    _, k, s = best
    out, i = [], n - 1
    for level in range(k - 1, -1, -1):
        out.append(int(vals[i]) * BUCKET_GRANULE)
        if level:
            prev_i = int(choices[level][i, s])
            s -= int(vals[i])
            i = prev_i
    return tuple(reversed(out))


def _unit_bounds(
    pool_bytes: int, max_buckets: int, vision: VisionDims, dtype_size: int, costs: CostProfile = ESTIMATES
) -> list[int]:
    """Per k, the largest ``sum(buckets) / 64`` whose private pools fit ``pool_bytes`` (-1: none), found with
    :func:`.vision_cost.capture_bytes` itself, which depends only on the sum and the number of buckets."""

    def fits(units: int, k: int) -> bool:
        synthetic = [BUCKET_GRANULE] * (k - 1) + [BUCKET_GRANULE * (units - k + 1)]
        return vision_cost.capture_bytes(synthetic, PoolMode.PRIVATE, vision, dtype_size, costs) <= pool_bytes

    slope = vision_cost.per_patch_mib(vision, dtype_size, costs) * BUCKET_GRANULE
    out = []
    for k in range(1, max_buckets + 1):
        guess = math.floor((pool_bytes / MIB - vision_cost.fixed_mib(costs) * k) / slope)
        units = max(guess, k - 1)
        while units >= k and not fits(units, k):
            units -= 1
        while fits(units + 1, k):
            units += 1
        out.append(units if units >= k else -1)
    return out


def best_fitting_list(
    sizes: Sizes,
    *,
    pool_bytes: int,
    pool: PoolMode,
    max_buckets: int,
    vision: VisionDims,
    dtype_size: int,
    min_pixels: int,
    max_pixels: int,
    mode: AlignMode = AlignMode.NEAREST,
    costs: CostProfile = ESTIMATES,
) -> BucketFit | None:
    """The exact optimum described in the module docstring, or None when not even one bucket's graph fits."""
    if max_buckets < 1:
        raise ConfigError(f"max buckets {max_buckets} is invalid; accepted: an integer >= 1")
    sizes = as_counts(sizes)
    if not sizes:
        raise ConfigError("no image sizes to plan buckets for; give at least one")
    # More buckets than distinct sizes (plus the largest bucket) can never help; the bound keeps the search small.
    max_buckets = min(max_buckets, len(sizes) + 1)
    natural = patch_counts(sizes, min_pixels=min_pixels, max_pixels=max_pixels, mode=mode)
    candidates = sorted({math.ceil(c / BUCKET_GRANULE) * BUCKET_GRANULE for c in natural.counts}, reverse=True)
    bounds = _unit_bounds(pool_bytes, max_buckets, vision, dtype_size, costs) if pool is PoolMode.PRIVATE else []
    for largest in candidates:
        one = vision_cost.capture_bytes((largest,), pool, vision, dtype_size, costs)
        if one > pool_bytes and pool is not PoolMode.NONE:
            continue
        cap = min(max_pixels, largest * PIXELS_PER_PATCH)
        sample = patch_counts(sizes, min_pixels=min(min_pixels, cap), max_pixels=cap, mode=mode)
        note = ""
        if pool is PoolMode.PRIVATE:
            padding = cheapest_padding(sample.counts, largest, max_buckets, bounds)
            if not padding.buckets:
                continue
            buckets = padding.buckets
            if padding.bounded:
                note = (f"searched lists of up to {padding.searched} buckets (of {max_buckets}) to bound the work: "
                        "the best list of more buckets may pad a little less")  # fmt: skip
        else:
            k = max_buckets
            if pool is PoolMode.SHARED:
                extra = vision_cost.SHARED_POOL_MIB_PER_EXTRA_GRAPH * MIB
                k = min(k, 1 + int((pool_bytes - one) // extra))
            buckets = optimal_buckets(sample.counts, k, cover=largest)
        return BucketFit(
            buckets,
            evaluate(sample.counts, buckets, num_shrunk=sample.num_shrunk),
            vision_cost.capture_bytes(buckets, pool, vision, dtype_size, costs),
            note,
        )
    return None

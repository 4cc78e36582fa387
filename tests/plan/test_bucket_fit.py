"""The bucket list planned jointly with the vision graph pool: exact against brute force, fewest shrunk first."""

from __future__ import annotations

import itertools
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.data import REPO
from vllm_hpu_mm.buckets.planner import evaluate
from vllm_hpu_mm.buckets.sizes import Sizes, embedded_sizes, patch_counts
from vllm_hpu_mm.models.dims import VisionDims
from vllm_hpu_mm.plan import bucket_fit, vision_cost
from vllm_hpu_mm.plan.vision_cost import PoolMode
from vllm_hpu_mm.values import AlignMode

MIB = 2**20
GIB = 2**30
VISION = VisionDims()
DEFAULT = (1600, 3136, 4096, 6400, 7744, 9216, 12544)
#: MathVista: about 200 distinct aligned sizes.
MANY_SIZES = REPO / "vllm_hpu_mm" / "data" / "mathvista_testmini.csv"


def brute_force(counts: list[int], largest: int, k_max: int, pool: int) -> int | None:
    """Least padded patches over every list ending at ``largest`` with at most ``k_max`` buckets that fits."""
    values = sorted({-(-c // 64) * 64 for c in counts} | {largest})
    best = None
    for k in range(1, k_max + 1):
        for combo in itertools.combinations(values[:-1], k - 1):
            buckets = (*combo, largest)
            if vision_cost.capture_bytes(buckets, PoolMode.PRIVATE, VISION, 2) > pool:
                continue
            cost = evaluate(counts, buckets).padded_patches
            best = cost if best is None else min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_the_dynamic_programme_equals_brute_force_under_private_pools(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(40):
        counts = [64 * rng.randint(1, 40) for _ in range(rng.randint(1, 10))]
        largest = max(counts) + 64 * rng.randint(0, 2)
        k_max = rng.randint(1, 5)
        pool = rng.randint(0, 6000) * MIB // 10
        bounds = bucket_fit._unit_bounds(pool, k_max, VISION, 2)
        got = bucket_fit.cheapest_padding(counts, largest, k_max, bounds).buckets
        want = brute_force(counts, largest, k_max, pool)
        if want is None:
            assert got == ()
        else:
            assert got[-1] == largest
            assert len(got) <= k_max
            assert vision_cost.capture_bytes(got, PoolMode.PRIVATE, VISION, 2) <= pool
            assert evaluate(counts, got).padded_patches == want


def test_unit_bounds_are_the_largest_sums_that_fit() -> None:
    pool = 700 * MIB
    for k, units in enumerate(bucket_fit._unit_bounds(pool, 4, VISION, 2), start=1):
        at = [64] * (k - 1) + [64 * (units - k + 1)]
        above = [64] * (k - 1) + [64 * (units - k + 2)]
        assert vision_cost.capture_bytes(at, PoolMode.PRIVATE, VISION, 2) <= pool
        assert vision_cost.capture_bytes(above, PoolMode.PRIVATE, VISION, 2) > pool


def best(
    sizes: Sizes, pool_bytes: int, *, pool: PoolMode = PoolMode.PRIVATE, max_buckets: int = 3
) -> bucket_fit.BucketFit | None:
    return bucket_fit.best_fitting_list(
        sizes, pool_bytes=pool_bytes, pool=pool, max_buckets=max_buckets, vision=VISION, dtype_size=2,
        min_pixels=3136, max_pixels=12544 * 196,
    )  # fmt: skip


def test_the_largest_bucket_is_the_largest_image_whenever_its_graph_fits() -> None:
    sizes = [(448, 448), (896, 896), (1344, 1344)]  # 1024, 4096, 9216 patches
    fit = best(sizes, 2 * GIB)
    assert fit is not None
    assert fit.buckets == (1024, 4096, 9216)
    assert fit.evaluation.num_shrunk == 0
    assert fit.evaluation.efficiency == 1.0


def test_when_the_largest_image_cannot_fit_the_next_largest_is_taken_and_counted_as_shrunk() -> None:
    sizes = [(448, 448), (896, 896), (1344, 1344)]
    pool = vision_cost.capture_bytes((4096,), PoolMode.PRIVATE, VISION, 2)  # room for one 4096 graph, not 9216
    fit = best(sizes, pool)
    assert fit is not None
    assert fit.buckets == (4096,)
    assert fit.evaluation.num_shrunk == 1
    assert fit.capture_bytes <= pool


def test_nothing_fits_gives_none() -> None:
    fit = best([(448, 448)], MIB)
    assert fit is None


def test_a_shared_pool_bounds_only_the_largest_graph_and_the_count() -> None:
    sizes = embedded_sizes(("coco_val2017.csv",)).counts
    pool = vision_cost.capture_bytes((12544,), PoolMode.SHARED, VISION, 2)
    fit = best(sizes, pool + 3 * MIB, pool=PoolMode.SHARED, max_buckets=7)
    assert fit is not None
    assert fit.capture_bytes <= pool + 3 * MIB
    # 3 MiB of growth at 0.4 MiB per extra graph: at most 1 + 7 graphs, capped at 7.
    assert len(fit.buckets) <= 7


def test_mathvista_on_the_gaudi2_vision_pool_beats_pruning() -> None:
    # The 7B Gaudi2 plan's vision pool is about 1.40 GiB: pruning the default list keeps 1600..6400 and shrinks 59
    # of MathVista's 1000 images (efficiency 0.62); the joint optimum keeps 12544 and shrinks only what 12544 does.
    sizes = embedded_sizes(("mathvista_testmini.csv",)).counts
    pool = round(1.40 * GIB)
    common = {"min_pixels": 3136, "max_pixels": 12544 * 196, "pool": PoolMode.PRIVATE, "vision": VISION,
              "dtype_size": 2, "mode": AlignMode.NEAREST}  # fmt: skip
    pruned = bucket_fit.evaluate_list(sizes, (1600, 3136, 4096, 6400), **common)  # type: ignore[arg-type]
    fit = bucket_fit.best_fitting_list(sizes, pool_bytes=pool, max_buckets=7, **common)  # type: ignore[arg-type]
    assert fit is not None
    at_12544 = patch_counts(sizes, min_pixels=3136, max_pixels=12544 * 196).num_shrunk
    assert pruned.evaluation.num_shrunk == 59
    assert fit.evaluation.num_shrunk == at_12544 < pruned.evaluation.num_shrunk
    assert fit.buckets[-1] == 12544
    assert fit.evaluation.efficiency >= 0.69 > pruned.evaluation.efficiency
    assert fit.capture_bytes <= pool


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    counts=st.lists(st.integers(1, 40).map(lambda u: 64 * u), min_size=1, max_size=30),
    max_buckets=st.integers(1, 40),
    budget=st.integers(-5, 900),
    fixed=st.integers(0, 60),
)
def test_the_search_never_fails_whatever_the_pool_allows(
    counts: list[int], max_buckets: int, budget: int, fixed: int
) -> None:
    # Per k, the units a list of k buckets may sum to: each bucket's fixed cost eats into the pool, so from some k
    # on no list fits at all (-1), as with hundreds of configured buckets.
    bounds = [budget - fixed * k if budget - fixed * k > 0 else -1 for k in range(1, max_buckets + 1)]
    largest = max(counts)
    padding = bucket_fit.cheapest_padding(counts, largest, max_buckets, bounds)
    if padding.buckets:
        k = len(padding.buckets)
        assert k <= max_buckets
        assert padding.buckets[-1] == largest
        assert sum(padding.buckets) // 64 <= bounds[k - 1]
    else:
        assert bounds[0] < largest // 64


def test_hundreds_of_configured_buckets_are_re_planned_into_the_pool(capsys: pytest.CaptureFixture[str]) -> None:
    from vllm_hpu_mm.cli.main import main

    every = ",".join(str(64 * i) for i in range(1, 401))  # every multiple of 64 up to 25600
    assert main(["memory", "plan", "--json", "--buckets", every]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["bucket_plan"]["replaced"] is True
    assert plan["vision_capture_bytes"] <= plan["prefill_vision_graph_bytes"]
    # a --max-buckets far above what fits: the lists of too many buckets are not searched, nothing fails
    assert main(["memory", "plan", "--json", "--max-buckets", "100", "--sizes", str(MANY_SIZES)]) == 0


def test_a_search_bounded_by_its_work_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bucket_fit, "WORK_LIMIT", 10**5)
    sizes = embedded_sizes(("mathvista_testmini.csv",)).counts
    fit = best(sizes, 6 * GIB, max_buckets=30)
    assert fit is not None
    assert "searched lists of up to" in fit.note
    assert len(fit.buckets) < 30
    monkeypatch.undo()
    exact = best(sizes, 6 * GIB, max_buckets=30)
    assert exact is not None
    assert exact.note == ""
    assert exact.evaluation.padded_patches <= fit.evaluation.padded_patches

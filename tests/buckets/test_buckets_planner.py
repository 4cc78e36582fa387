"""The exact bucket planner (vllm_hpu_mm.buckets.planner) against brute force and the real size distributions."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.data import SIZE_CSVS, size_csv
from vllm_hpu_mm.buckets.packing import bucket_for
from vllm_hpu_mm.buckets.planner import Evaluation, evaluate, fewest_buckets, optimal_buckets
from vllm_hpu_mm.buckets.sizes import patch_counts, read_sizes_csv
from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.jobs.buckets import check_buckets, plan_buckets
from vllm_hpu_mm.values import DEFAULT_BUCKETS, AlignMode, Buckets

GRANULE = 64
#: max_pixels of `buckets plan` by default: the default list's largest bucket x 196.
PLAN_MAX_PIXELS = 12544 * 196

small_counts = st.lists(st.integers(1, 12).map(lambda x: x * GRANULE), min_size=1, max_size=14)


def padded(counts: list[int], buckets: tuple[int, ...]) -> int:
    total = 0
    for c in counts:
        b = bucket_for(c, buckets)
        assert b is not None
        total += b
    return total


def brute_force(counts: list[int], k: int) -> int:
    """Least padded patches over every list of at most k multiples of 64 that covers the largest count."""
    top = max(counts)
    candidates = range(GRANULE, top, GRANULE)
    best = None
    for size in range(min(k, top // GRANULE)):
        for lower in itertools.combinations(candidates, size):
            cost = padded(counts, (*lower, top))
            best = cost if best is None else min(best, cost)
    assert best is not None
    return best


def least_waste_at_most_k(counts: list[int], k: int) -> int:
    """A second exact method: shortest path with at most k edges over the sorted distinct counts, forward
    relaxation of the *padding* (waste); pure Python, written independently of the planner's table."""
    weight = Counter(counts)
    values = sorted(weight)
    n = len(values)
    inf = float("inf")
    # reach[i] = least waste covering the counts up to values[i] with its last bucket at values[i].
    reach: list[float] = [sum(weight[u] * (values[i] - u) for u in values[: i + 1]) for i in range(n)]
    best = reach[-1]
    for _ in range(1, k):
        nxt = [inf] * n
        for m in range(n):
            if reach[m] == inf:
                continue
            for i in range(m + 1, n):
                waste = sum(weight[u] * (values[i] - u) for u in values[m + 1 : i + 1])
                nxt[i] = min(nxt[i], reach[m] + waste)
        reach = [min(a, b) for a, b in zip(reach, nxt, strict=True)]
        best = min(best, reach[-1])
    return int(best) + sum(counts)


@settings(max_examples=150, deadline=None)
@given(counts=small_counts, k=st.integers(1, 4))
def test_optimal_equals_brute_force_on_small_inputs(counts: list[int], k: int) -> None:
    buckets = optimal_buckets(counts, k)
    assert len(buckets) <= k
    assert list(buckets) == sorted(set(buckets))
    assert all(b % GRANULE == 0 for b in buckets)
    assert buckets[-1] == max(counts)
    assert padded(counts, buckets) == brute_force(counts, k)
    assert padded(counts, buckets) == least_waste_at_most_k(counts, k)


@settings(max_examples=100, deadline=None)
@given(counts=small_counts, target=st.floats(0.3, 1.0))
def test_fewest_buckets_reaches_the_target_with_no_fewer_possible(counts: list[int], target: float) -> None:
    buckets = fewest_buckets(counts, target)
    ev = evaluate(counts, buckets)
    assert ev.efficiency >= target
    assert ev.efficiency <= 1.0
    if len(buckets) > 1:
        assert evaluate(counts, optimal_buckets(counts, len(buckets) - 1)).efficiency < target


@settings(max_examples=100, deadline=None)
@given(counts=small_counts, buckets=st.lists(st.integers(1, 12), min_size=1, max_size=5, unique=True))
def test_evaluation_counts_every_image_once_and_efficiency_is_at_most_one(
    counts: list[int], buckets: list[int]
) -> None:
    ordered = tuple(sorted(b * GRANULE for b in buckets))
    ev = evaluate(counts, ordered)
    assert sum(ev.per_bucket.values()) + ev.num_oversize == len(counts)
    assert list(ev.per_bucket) == list(ordered)
    assert 0.0 < ev.efficiency <= 1.0
    assert ev.real_patches == sum(counts)


@settings(max_examples=60, deadline=None)
@given(counts=small_counts, k=st.integers(1, 4), extra=st.integers(0, 3))
def test_cover_forces_the_largest_bucket_and_stays_optimal(counts: list[int], k: int, extra: int) -> None:
    cover = max(counts) + extra * GRANULE
    buckets = optimal_buckets(counts, k, cover=cover)
    assert buckets[-1] == cover
    assert len(buckets) <= k
    # The same as brute force over lists whose largest bucket is the cover (a zero-weight image there).
    forced = [*counts, cover]
    assert padded(counts, buckets) == brute_force(forced, k) - cover


def test_cover_below_the_largest_image_is_refused() -> None:
    with pytest.raises(ConfigError, match="below the largest value"):
        optimal_buckets([640], 2, cover=576)


def test_counts_off_the_64_grid_get_buckets_on_it() -> None:
    assert optimal_buckets([100, 130, 700], 2) == (192, 704)


def test_more_buckets_than_distinct_counts_fits_every_image_exactly() -> None:
    assert optimal_buckets([64, 64, 128], 7) == (64, 128)
    assert evaluate([64, 64, 128], (64, 128)).efficiency == 1.0


def test_planner_rejects_bad_requests() -> None:
    with pytest.raises(ConfigError, match="number of buckets 0"):
        optimal_buckets([64], 0)
    with pytest.raises(ConfigError, match="no images"):
        optimal_buckets([], 3)
    with pytest.raises(ConfigError, match="not positive"):
        optimal_buckets([64, -64], 3)
    with pytest.raises(ConfigError, match=r"accepted: a number in \(0, 1\]"):
        fewest_buckets([64], 1.5)
    with pytest.raises(ConfigError, match="appears more than once"):
        evaluate([64], (64, 64))


def counts_of(csv: Path) -> list[int]:
    weights = patch_counts(read_sizes_csv(csv).counts, max_pixels=PLAN_MAX_PIXELS).counts
    return [c for c, n in sorted(weights.items()) for _ in range(n)]


@pytest.mark.parametrize("csv", SIZE_CSVS, ids=lambda p: p.stem)
def test_seven_planned_buckets_beat_the_default_list_and_are_exactly_optimal(csv: Path) -> None:
    counts = counts_of(csv)
    planned = optimal_buckets(counts, 7)
    assert evaluate(counts, planned).efficiency >= evaluate(counts, DEFAULT_BUCKETS).efficiency
    assert padded(counts, planned) == least_waste_at_most_k(counts, 7)


@pytest.mark.parametrize("csv", SIZE_CSVS, ids=lambda p: p.stem)
def test_cli_plan_with_seven_buckets_on_every_real_csv(csv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["buckets", "plan", "--sizes", str(csv), "--num-buckets", "7", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["efficiency"] >= result["default"]["efficiency"]
    # the list is the exact optimum of the plan's counts with its largest bucket where its own cap (largest x 196,
    # under shrink) shrinks no image below its count; its figures are what `buckets check` says of that list
    counts, top = counts_of(csv), result["buckets"][-1]
    assert tuple(result["buckets"]) == optimal_buckets(counts, 7, cover=top)
    checked = check_buckets(read_sizes_csv(csv).counts, Buckets(result["buckets"]), source="planned list").evaluation
    assert (result["padded_patches"], result["real_patches"]) == (checked.padded_patches, sum(counts))
    assert result["padded_patches"] == least_waste_at_most_k([*counts, top], 7) - top
    assert result["num_images"] == read_sizes_csv(csv).num_images


@pytest.mark.parametrize(
    ("name", "default_eff", "planned_eff"),
    [("coco_val2017", 0.85, 0.997), ("mathvista_testmini", 0.66, 0.84)],
)
def test_the_issue_figures_are_reproduced(name: str, default_eff: float, planned_eff: float) -> None:
    # The issue's figures hold for NEAREST alignment, min_pixels=3136 and max_pixels = 12544 x 196.
    counts = counts_of(size_csv(f"{name}.csv"))
    assert round(evaluate(counts, DEFAULT_BUCKETS).efficiency, 2) == default_eff
    assert evaluate(counts, optimal_buckets(counts, 7)).efficiency == pytest.approx(planned_eff, abs=0.005)


def served(
    sizes: dict[tuple[int, int], int],
    buckets: tuple[int, ...],
    *,
    max_pixels: int | None = None,
    mode: AlignMode = AlignMode.NEAREST,
) -> Evaluation:
    """What `buckets check` says of ``buckets`` on ``sizes``: the scoring rule the plan is held to."""
    return check_buckets(sizes, Buckets(buckets), source="list", max_pixels=max_pixels, mode=mode).evaluation


small_sizes = st.dictionaries(
    st.tuples(st.integers(20, 700), st.integers(20, 700)), st.integers(1, 3), min_size=1, max_size=5
)


@settings(max_examples=40, deadline=None)
@given(
    sizes=small_sizes,
    tiles=st.integers(1, 8),
    off_grid=st.sampled_from([0, 5000]),
    k=st.integers(1, 3),
    mode=st.sampled_from(list(AlignMode)),
)
def test_plan_is_the_best_list_under_the_scoring_check_applies_on_small_inputs(
    sizes: dict[tuple[int, int], int], tiles: int, off_grid: int, k: int, mode: AlignMode
) -> None:
    # Under shrink a list's own largest bucket x 196 caps its images, so the list decides how far they are shrunk.
    # The plan serves every image as max_pixels alone does (the most real patches any list serves), and among the
    # lists that do, none of at most k buckets has fewer padded patches (a higher efficiency): brute force over
    # every list of multiples of 64 up to max_pixels / 196, each scored by `buckets check`.
    max_pixels = tiles * 112 * 112 + off_grid
    plan = plan_buckets(sizes, num_buckets=k, max_pixels=max_pixels, mode=mode)
    checked = served(sizes, tuple(plan.buckets), max_pixels=max_pixels, mode=mode)
    assert plan.evaluation == checked
    assert (checked.real_patches, checked.num_shrunk) == (
        sum(c * n for c, n in plan.counts.items()),
        patch_counts(sizes, max_pixels=max_pixels, mode=mode).num_shrunk,
    )
    top = -(-max_pixels // 196 // GRANULE) * GRANULE  # its cap is max_pixels itself
    candidates = range(GRANULE, top + 1, GRANULE)
    scores = [
        served(sizes, lst, max_pixels=max_pixels, mode=mode)
        for size in range(1, k + 1)
        for lst in itertools.combinations(candidates, size)
    ]
    most_real = max(ev.real_patches for ev in scores)
    assert checked.real_patches == most_real
    assert checked.padded_patches == min(ev.padded_patches for ev in scores if ev.real_patches == most_real)


#: r3vision's eight images (width, height) as its folder holds them: a phone photo twice, a screen, a chart, a scan,
#: a thumbnail, a print, a 16-bit gray PNG.
R3_IMAGES = {(480, 640): 1, (640, 480): 1, (1920, 1080): 1, (800, 600): 1, (930, 1250): 1, (300, 200): 1,
             (1024, 768): 1, (448, 336): 1}  # fmt: skip


def test_down_plan_keeps_the_screen_unshrunk_and_check_of_it_says_the_same() -> None:
    # r3vision case 3: the screen is 9792 patches under down at 2458624 px, but a largest bucket of 9792 caps it at
    # 9792 x 196 px, where Qwen2.5-VL's own count (what down never exceeds) is lower: it was shrunk to 9216 and the
    # plan said 0.976562. The least largest bucket that keeps it at 9792 is 10112.
    plan = plan_buckets(R3_IMAGES, mode=AlignMode.DOWN)
    assert tuple(plan.buckets) == (128, 768, 1280, 2240, 3456, 5632, 10112)
    assert plan.evaluation == served(R3_IMAGES, tuple(plan.buckets), mode=AlignMode.DOWN)
    assert plan.evaluation.num_shrunk == 0
    assert plan.evaluation.efficiency == pytest.approx(24576 / 24896)
    assert any("largest bucket is 10112" in note for note in plan.notes)
    old = served(R3_IMAGES, (128, 768, 1280, 2240, 3456, 5632, 9792), mode=AlignMode.DOWN)
    assert (old.num_shrunk, old.real_patches) == (1, 24000)


def test_a_largest_bucket_whose_own_cap_shrinks_the_largest_image_is_raised_to_one_that_does_not() -> None:
    # r3vision case 13: 14351x12470 is 12480 patches at 2458624 px, but 11648 under 12480 x 196 px (its sides are
    # scaled and floored to the grid); only 12544 serves it at 12480.
    sizes = {(640, 480): 1, (2000, 10): 1, (14351, 12470): 1}
    plan = plan_buckets(sizes, num_buckets=3)
    assert tuple(plan.buckets) == (1152, 1536, 12544)
    assert plan.evaluation == served(sizes, (1152, 1536, 12544))
    assert plan.evaluation.efficiency == pytest.approx(15168 / 15232)
    assert served(sizes, (1152, 1536, 12480)).efficiency < plan.evaluation.efficiency
    assert tuple(plan_buckets(sizes, target_efficiency=0.99).buckets)[-1] == 12544

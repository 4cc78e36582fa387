"""The ``buckets plan`` and ``buckets check`` jobs. :func:`plan_job` and :func:`check_job` take the command's
arguments whole: the sizes from their sources (:func:`admitted_sizes`: CSV files, image folders, a server's
/metrics, a synthetic grid or the embedded sizes; only the images the server accepts), then :func:`plan_buckets`
(align the sizes, plan the list, evaluate it and the default list on the same images, say what the plan does not
cover; ``benchmarks/planner/bucket_efficiency.py`` tabulates it over many data sets) or :func:`check_buckets` (a
list on the images, at the pixel limits and under the oversize policy the served processor applies).
``cli/buckets.py`` prints them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from vllm_hpu_mm import envs
from vllm_hpu_mm.buckets.admission import Admission, admit
from vllm_hpu_mm.buckets.coverage import largest_patches, validate_coverage
from vllm_hpu_mm.buckets.planner import Evaluation, fewest_buckets, optimal_buckets
from vllm_hpu_mm.buckets.sizes import (
    OR_CSV,
    PatchSample,
    Sizes,
    SizeSet,
    embedded_sizes,
    is_folder,
    patch_counts,
    read_sizes_csv,
    scan_images,
    synthetic_sizes,
)
from vllm_hpu_mm.buckets.workload import evaluate_sizes, faithful_largest
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.preprocess.align import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS
from vllm_hpu_mm.values import (
    BUCKET_GRANULE,
    DEFAULT_BUCKETS,
    MAX_BUCKET,
    PIXELS_PER_PATCH,
    AlignMode,
    Buckets,
    OversizePolicy,
    parse_buckets,
)

__all__ = [
    "BUCKETS_VAR",
    "DEFAULT_MIN_PIXELS",
    "MAX_PIXELS",
    "CheckJob",
    "CheckResult",
    "PlanJob",
    "PlanResult",
    "SizeSources",
    "admitted_sizes",
    "check_buckets",
    "check_job",
    "pixel_range",
    "plan_buckets",
    "plan_job",
]

#: The largest image area any bucket can hold: the largest bucket's patches x 196 (``--min-pixels`` and
#: ``--max-pixels`` above it are refused).
MAX_PIXELS = MAX_BUCKET * PIXELS_PER_PATCH
#: The variable the served processor reads its vision bucket list from.
BUCKETS_VAR = "VLLM_MULTIMODAL_BUCKETS"
#: The smallest image area after alignment when none is given (Qwen2.5-VL's).
DEFAULT_MIN_PIXELS = QWEN_MIN_PIXELS


@dataclasses.dataclass(frozen=True)
class PlanResult:
    buckets: Buckets
    #: What was asked for, in words (``7 buckets minimising padded patches (exact)``).
    goal: str
    #: The planned list on the images.
    evaluation: Evaluation
    #: The default list on the same images, under the oversize policy.
    default: Evaluation
    #: Aligned patch counts: patches -> images.
    counts: Mapping[int, int]
    #: Coverage notes of the planned list (complete sentences), empty when it covers the pixel range.
    warnings: tuple[str, ...]
    min_pixels: int
    max_pixels: int
    mode: AlignMode
    #: Notes on how the images were aligned (complete sentences): under ``down``, images billed above stock.
    notes: tuple[str, ...] = ()


def above_stock_note(sample: PatchSample) -> str | None:
    """The line saying which images ``down`` bills above stock, and why; None when none is. The plugin aligns to
    whole 112-px tiles (64 patches the least), where Qwen2.5-VL's processor goes down to 56 x 56 (16 patches); the
    runtime's bucket list has no minimum (vllm-gaudi vision.py ``_process_buckets`` @ 091bbadd only sorts it)."""
    if not sample.above_stock:
        return None
    n, low, high = sum(sample.above_stock.values()), min(sample.above_stock), max(sample.above_stock)
    stock = f"{low}" if low == high else f"{low} to {high}"
    return (f"{n} of {sample.num_images} images get more patches under down than stock Qwen2.5-VL gives them "
            f"({stock} each): the 112-px grid's least size is one 112x112 tile (64 patches) and min_pixels is reached "
            "in whole tiles; down is at most stock only for images of a tile or more")  # fmt: skip


def _raised_note(raised: int | None, sample: PatchSample) -> str | None:
    """Why the planned largest bucket is above the largest image's count (None when it is not)."""
    if raised is None:
        return None
    top = max(sample.counts)
    return (f"the largest bucket is {raised}, above the largest image's {top} patches: under "
            f"VLLM_HPU_MM_OVERSIZE_POLICY=shrink the server caps images at the largest bucket x 196 px, and a "
            f"largest bucket below {raised} would shrink an image below its count under max_pixels")  # fmt: skip


def pixel_range(
    min_pixels: int | None, max_pixels: int | None, *, buckets: Buckets = DEFAULT_BUCKETS
) -> tuple[int, int]:
    """``(min_pixels, max_pixels)`` with the defaults filled in (Qwen's 3136; ``buckets``' largest x 196), checked."""
    low = QWEN_MIN_PIXELS if min_pixels is None else min_pixels
    high = buckets.shrink_limit if max_pixels is None else max_pixels
    if high > MAX_PIXELS:
        raise ConfigError(f"--max-pixels {high} is larger than any image can be aligned to; accepted: at most "
                          f"{MAX_PIXELS} (the largest bucket, {MAX_BUCKET} patches, x 196)")  # fmt: skip
    if low > high:
        raise ConfigError(f"--min-pixels {low} is above --max-pixels {high}; accepted: min <= max")
    return low, high


def plan_buckets(
    sizes: Sizes,
    *,
    num_buckets: int | None = None,
    target_efficiency: float | None = None,
    keep_largest: bool = False,
    min_pixels: int | None = None,
    max_pixels: int | None = None,
    mode: AlignMode = AlignMode.NEAREST,
    policy: OversizePolicy = OversizePolicy.SHRINK,
) -> PlanResult:
    """Plan for ``sizes`` (``(width, height)``): exactly ``num_buckets`` (default: as many as the default list) or
    the fewest reaching ``target_efficiency``. Pixel limits as :func:`pixel_range` (``max_pixels``: the default
    list's largest bucket x 196); ``keep_largest`` makes the largest bucket cover ``max_pixels``. The planned list
    is evaluated as :func:`check_buckets` evaluates it with the same limits (one rule: ``buckets check`` of the list
    says the same efficiency): under ``shrink`` with no ``max_pixels`` given, the served processor shrinks an image
    above the planned largest bucket into it."""
    if num_buckets is not None and target_efficiency is not None:
        raise ConfigError("give either num_buckets or target_efficiency, not both")
    given_min, given_max = min_pixels, max_pixels
    min_pixels, max_pixels = pixel_range(min_pixels, max_pixels)
    sample = patch_counts(sizes, min_pixels=min_pixels, max_pixels=max_pixels, mode=mode)
    cover = largest_patches(max_pixels) if keep_largest else None
    raised = None
    if policy is OversizePolicy.SHRINK:
        # The list's own largest bucket x 196 caps the images it serves (policy.pixel_limits, the rule check
        # applies): plan it where that cap shrinks no image below its count under max_pixels. Scoring the list by
        # efficiency alone would not do: a list that shrinks every image into small buckets scores 1.0.
        top = faithful_largest(sizes, sample.counts, min_pixels=min_pixels, max_pixels=max_pixels, mode=mode,
                               at_least=cover or 0)  # fmt: skip
        if top > max(cover or 0, -(-max(sample.counts) // BUCKET_GRANULE) * BUCKET_GRANULE):
            raised = top
        cover = top if cover is not None or raised is not None else None
    if target_efficiency is not None:
        planned = fewest_buckets(sample.counts, target_efficiency, cover=cover)
        goal = f"fewest buckets reaching efficiency {target_efficiency}"
    else:
        k = num_buckets or len(DEFAULT_BUCKETS)
        planned = optimal_buckets(sample.counts, k, cover=cover)
        goal = f"{k} buckets minimising padded patches (exact)"
        if len(planned) < k:
            goal += f"; only {len(planned)} distinct patch counts, so {len(planned)} buckets fit every image exactly"
    buckets = Buckets(planned, source="planned list")
    return PlanResult(
        buckets=buckets,
        goal=goal,
        evaluation=check_buckets(
            sizes, buckets, source="planned list", min_pixels=given_min, max_pixels=given_max, mode=mode, policy=policy
        ).evaluation,
        default=evaluate_sizes(
            sizes, DEFAULT_BUCKETS, min_pixels=min_pixels, max_pixels=max_pixels, mode=mode, policy=policy
        ),
        counts=sample.counts,
        warnings=tuple(
            validate_coverage(
                buckets, min_pixels=min_pixels, max_pixels=max_pixels, policy=policy, source="planned list"
            )
        ),
        min_pixels=min_pixels,
        max_pixels=max_pixels,
        mode=mode,
        notes=tuple(note for note in (above_stock_note(sample), _raised_note(raised, sample)) if note),
    )


@dataclasses.dataclass(frozen=True)
class CheckResult:
    evaluation: Evaluation
    #: Coverage problems and rejected images (complete sentences): ``buckets check`` exits 1 when there are any.
    warnings: tuple[str, ...]
    #: Images the server answers with HTTP 400 (above the largest bucket under the reject policy).
    rejected: int
    min_pixels: int
    max_pixels: int


def check_buckets(
    sizes: Sizes,
    buckets: Buckets,
    *,
    source: str,
    min_pixels: int | None = None,
    max_pixels: int | None = None,
    mode: AlignMode = AlignMode.NEAREST,
    policy: OversizePolicy = OversizePolicy.SHRINK,
) -> CheckResult:
    """``buckets`` (from ``source``, for the warnings) on ``sizes`` as the served processor aligns them: under
    ``shrink`` it caps images at the largest bucket; otherwise it aligns them under Qwen2.5-VL's own ``max_pixels``
    and the policy decides what happens above the largest bucket (``reject``: HTTP 400, counted apart)."""
    default_max = None if policy is OversizePolicy.SHRINK else QWEN_MAX_PIXELS
    low, high = pixel_range(min_pixels, max_pixels if max_pixels is not None else default_max, buckets=buckets)
    warnings = validate_coverage(buckets, min_pixels=low, max_pixels=high, policy=policy, source=source)
    ev = evaluate_sizes(sizes, buckets, min_pixels=low, max_pixels=high, mode=mode, policy=policy)
    rejected = ev.num_oversize if policy is OversizePolicy.REJECT else 0
    if rejected:
        warnings.append(f"{rejected} of {ev.num_images} images ({rejected / ev.num_images:.1%}) are above the largest "
                        f"bucket {buckets.largest}: under VLLM_HPU_MM_OVERSIZE_POLICY=reject the server answers them "
                        "with HTTP 400 (add a larger bucket, or use the shrink policy)")  # fmt: skip
    return CheckResult(ev, tuple(warnings), rejected, low, high)


@dataclasses.dataclass(frozen=True)
class SizeSources:
    """Where ``buckets plan`` and ``check`` read image sizes from (all of them combined): CSV files, image folders
    (sizes from headers; an image that does not decode is refused) and a server's /metrics; with none, a synthetic
    grid when both pixel limits are given, else the sizes shipped with the package."""

    csv: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    from_metrics: str | None = None
    min_pixels: int | None = None
    max_pixels: int | None = None
    align_mode: AlignMode | None = None
    #: Show a progress bar while scanning folders (for a person watching a terminal).
    progress: bool = False
    #: The model_name label to read from a page holding several models' series (``--model-name``).
    model_name: str | None = None


def _load_sizes(src: SizeSources) -> SizeSet:
    # --sizes takes a folder too, as memory plan's, fleet plan's and buckets replay's --sizes (and serve's
    # --plan-sizes) do: one option, one reading, whatever the command.
    sets = [scan_images(path, progress=src.progress, flag="--sizes", also=OR_CSV)[0]
            if is_folder(path, flag="--sizes") else read_sizes_csv(path) for path in src.csv]  # fmt: skip
    sets += [scan_images(folder, progress=src.progress)[0] for folder in src.folders]
    if src.from_metrics:
        from vllm_hpu_mm.buckets.live import from_metrics

        sets.append(from_metrics(src.from_metrics, src.model_name)[0])
    if sets:
        return SizeSet.combine(sets)
    if src.min_pixels is not None and src.max_pixels is not None:
        return synthetic_sizes(src.min_pixels, src.max_pixels)
    return embedded_sizes()


def admitted_sizes(src: SizeSources, settings: envs.Settings) -> Admission:
    """The sizes to plan or check over: only the images the server accepts (the rest are counted by reason)."""
    return admit(_load_sizes(src), max_image_pixels=settings.served_max_image_pixels,
                 max_aspect_ratio=settings.max_aspect_ratio,
                 pixels_var=settings.max_image_pixels_var)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class PlanJob:
    result: PlanResult
    admission: Admission
    #: The oversize policy the plan was evaluated under (the environment's), and the images it refuses.
    policy: OversizePolicy = OversizePolicy.SHRINK

    @property
    def rejected(self) -> int:
        """Images the server answers with HTTP 400 (above the largest bucket under ``reject``), as check counts."""
        return self.result.evaluation.num_oversize if self.policy is OversizePolicy.REJECT else 0

    @property
    def sizes(self) -> SizeSet:
        return self.admission.sizes


def plan_job(
    src: SizeSources,
    settings: envs.Settings,
    *,
    num_buckets: int | None = None,
    target_efficiency: float | None = None,
    keep_largest: bool = False,
) -> PlanJob:
    """``buckets plan``: the pixel limits checked before any size is read, then :func:`plan_buckets` over the
    admitted sizes, aligned as ``src.align_mode`` (else the environment's) and under the environment's oversize
    policy."""
    pixel_range(src.min_pixels, src.max_pixels)
    admission = admitted_sizes(src, settings)
    result = plan_buckets(admission.sizes.counts, num_buckets=num_buckets, target_efficiency=target_efficiency,
                          keep_largest=keep_largest, min_pixels=src.min_pixels, max_pixels=src.max_pixels,
                          mode=src.align_mode or settings.align_mode, policy=settings.oversize_policy)  # fmt: skip
    return PlanJob(result, admission, settings.oversize_policy)


@dataclasses.dataclass(frozen=True)
class CheckJob:
    result: CheckResult
    admission: Admission
    buckets: Buckets
    #: Where the list came from, in words (``BUCKETS argument``, ``$VLLM_MULTIMODAL_BUCKETS``, ``the default list``).
    source: str
    mode: AlignMode
    policy: OversizePolicy
    #: Aligned patch counts before any shrink (what lies above the largest bucket shows), for a histogram.
    counts: Mapping[int, int]

    @property
    def sizes(self) -> SizeSet:
        return self.admission.sizes


def _no_list(skip_warmup: bool) -> str:
    """Why VLLM_MULTIMODAL_BUCKETS=None leaves nothing to check, and what it does to vllm-gaudi's warm-up."""
    from vllm_hpu_mm.runtimes.registry import TRAITS  # on this error only: the runtimes' modules are not cheap

    fails = next(t.none_buckets_fail_warmup for t in TRAITS.values() if t.none_buckets_fail_warmup)

    said = f"{BUCKETS_VAR}=None disables vision bucketing: there is no list to check"
    if skip_warmup:
        return f"{said} (vllm-gaudi starts under it only because VLLM_SKIP_WARMUP is on); pass BUCKETS"
    return (f"{said}, and with VLLM_SKIP_WARMUP off vllm-gaudi fails at warm-up under it "
            f"({fails}); pass BUCKETS to check a list; to serve, unset {BUCKETS_VAR} (the "
            "default list) or set VLLM_SKIP_WARMUP=true")  # fmt: skip


def check_job(buckets_arg: str | None, src: SizeSources, settings: envs.Settings) -> CheckJob:
    """``buckets check``: the list given (``buckets_arg``), else VLLM_MULTIMODAL_BUCKETS, else the default list, on
    the admitted sizes; ConfigError when the environment disables vision bucketing (there is no list to check)."""
    if buckets_arg is not None:
        source = "BUCKETS argument"
        buckets = parse_buckets(buckets_arg, source=source)
    else:
        if settings.multimodal_buckets is None:
            raise ConfigError(_no_list(settings.skip_warmup))
        buckets = settings.multimodal_buckets
        source = f"${BUCKETS_VAR}" if envs.read_if_set(BUCKETS_VAR) is not None else "the default list"
    mode = src.align_mode or settings.align_mode
    policy = settings.oversize_policy
    admission = admitted_sizes(src, settings)
    sizes = admission.sizes.counts
    checked = check_buckets(sizes, buckets, source=source, min_pixels=src.min_pixels, max_pixels=src.max_pixels,
                            mode=mode, policy=policy)  # fmt: skip
    counts = patch_counts(sizes, min_pixels=checked.min_pixels, max_pixels=checked.max_pixels, mode=mode).counts
    return CheckJob(checked, admission, buckets, source, mode, policy, counts)

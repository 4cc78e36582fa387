"""The plan with its bucket list chosen: the configured list when it fits and no sizes were given, else the joint
optimum (:mod:`.bucket_fit`) over the sizes (the user's, or the embedded real sizes), with before/after figures."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from vllm_hpu_mm.buckets.admission import admit
from vllm_hpu_mm.buckets.sizes import SizeSet, embedded_sizes, read_sizes_csv, scan_images
from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.plan import bucket_fit
from vllm_hpu_mm.plan.bucket_fit import BucketFit
from vllm_hpu_mm.plan.inputs import PlanInputs
from vllm_hpu_mm.plan.planner import Plan, plan
from vllm_hpu_mm.plan.vision_cost import PoolMode
from vllm_hpu_mm.preprocess.align import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS
from vllm_hpu_mm.values import PIXELS_PER_PATCH, AlignMode

__all__ = ["BucketChoice", "choose", "read_sizes"]


@dataclasses.dataclass(frozen=True)
class BucketChoice:
    sizes: SizeSet
    #: The configured list as the plan alone would export it (largest buckets pruned until the rest fit).
    before: BucketFit | None
    #: The joint optimum, or None when not even one bucket's graph fits.
    after: BucketFit | None
    #: Whether the plan now uses ``after``.
    replaced: bool
    reason: str


def read_sizes(path: str | None, *, flag: str, settings: Settings | None = None) -> SizeSet:
    """Sizes from a CSV (``width,height`` header) or a folder of images (headers only); None: the embedded sizes.
    With ``settings``, only the images the server accepts (the source says how many it refuses)."""
    if path is None:
        return embedded_sizes()
    p = Path(path).expanduser()
    if p.is_dir():
        sizes = scan_images(p, progress=False)[0]
    elif p.is_file():
        sizes = read_sizes_csv(p)
    else:
        what = "not a file or a folder" if p.exists() else "no such file or folder"
        raise ConfigError(f"{flag} {path}: {what}; accepted: a CSV with a width,height header or a folder of "
                          "images")  # fmt: skip
    if settings is None:
        return sizes
    return admit(sizes, max_image_pixels=settings.max_image_pixels, max_aspect_ratio=settings.max_aspect_ratio).sizes


def choose(
    inputs: PlanInputs,
    sizes: SizeSet | None,
    *,
    max_buckets: int | None,
    mode: AlignMode,
    min_pixels: int = QWEN_MIN_PIXELS,
    keep: bool = False,
) -> tuple[Plan, BucketChoice | None]:
    """The plan, with the bucket list replaced by the joint optimum when the configured one does not fit or when
    ``sizes`` were given and the optimum does better on them (fewer shrunk images, then higher efficiency).
    ``keep``: never replace (the configured list, pruned to what fits)."""
    first = plan(inputs)
    graphs = inputs.pool_mode is not PoolMode.NONE and not inputs.enforce_eager
    if keep or not inputs.buckets or not graphs or not first.fits:
        return first, None
    if sizes is None and not first.vision_buckets_skipped:
        return first, None
    sample = sizes if sizes is not None else embedded_sizes()
    k = len(inputs.buckets) if max_buckets is None else max_buckets
    if k < 1:
        raise ConfigError(f"--max-buckets {k} is invalid; accepted: an integer >= 1")
    # No more shrinking than the configured list's largest bucket would do.
    max_pixels = min(max(inputs.buckets) * PIXELS_PER_PATCH, QWEN_MAX_PIXELS)

    captured = first.vision_buckets_captured
    before = bucket_fit.evaluate_list(
        sample.sizes, captured, min_pixels=min_pixels, max_pixels=max_pixels, mode=mode, pool=inputs.pool_mode,
        vision=inputs.model.vision, dtype_size=inputs.dtype_size, costs=inputs.costs,
    ) if captured else None  # fmt: skip
    after = bucket_fit.best_fitting_list(
        sample.sizes, pool_bytes=first.split.prefill_vision_graph_bytes, pool=inputs.pool_mode, max_buckets=k,
        vision=inputs.model.vision, dtype_size=inputs.dtype_size, min_pixels=min_pixels, max_pixels=max_pixels,
        mode=mode, costs=inputs.costs,
    )  # fmt: skip
    if after is None:
        return first, BucketChoice(sample, before, None, False, "not even one bucket's graph fits the vision pool")
    better = before is None or (after.evaluation.num_shrunk, -after.evaluation.efficiency) < (
        before.evaluation.num_shrunk,
        -before.evaluation.efficiency,
    )
    if not better:
        return first, BucketChoice(sample, before, after, False, "the configured list already does as well")
    second = plan(dataclasses.replace(inputs, buckets=after.buckets))
    if second.vision_buckets_skipped:  # pragma: no cover - the pool only grows when the largest bucket does not
        return first, BucketChoice(sample, before, after, False, "the optimum did not fit once re-planned")
    why = (
        "the configured list does not fit the vision pool"
        if first.vision_buckets_skipped
        else "planned over the given sizes"
    )
    return second, BucketChoice(sample, before, after, True, f"{why}; {after.note}" if after.note else why)

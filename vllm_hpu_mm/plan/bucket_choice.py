"""The plan with its bucket list chosen: the configured list when it fits and no sizes were given, else the joint
optimum (:mod:`.bucket_fit`) over the sizes (the user's, or the embedded real sizes), with before/after figures."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from vllm_hpu_mm.buckets.coverage import largest_patches, smallest_patches
from vllm_hpu_mm.buckets.sizes import (
    OR_CSV,
    SizeSet,
    embedded_sizes,
    images_of,
    is_folder,
    name_unreadable,
    scan_images,
)
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.plan import bucket_fit
from vllm_hpu_mm.plan.bucket_fit import BucketFit
from vllm_hpu_mm.plan.inputs import PlanInputs
from vllm_hpu_mm.plan.planner import Plan, plan
from vllm_hpu_mm.plan.vision_cost import PoolMode
from vllm_hpu_mm.preprocess.align import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS
from vllm_hpu_mm.traffic.csvfile import read_traffic_csv
from vllm_hpu_mm.traffic.default import default_traffic
from vllm_hpu_mm.traffic.requests import Request, Traffic
from vllm_hpu_mm.values import PIXELS_PER_PATCH, AlignMode

__all__ = ["BucketChoice", "choose", "processor_reach", "read_sizes", "read_traffic"]


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
    #: Whether a list was planned against the vision pool (False: the runtime warms no vision graph, so there is no
    #: pool and ``before`` / ``after`` are None).
    planned: bool = True


def read_traffic(path: str | None, *, flag: str) -> Traffic:
    """Traffic from a request CSV (``width,height`` header, optional text columns) or a folder of images (headers
    only: text unknown); None: the embedded default traffic. Every request as sent: which the server serves is
    :func:`~vllm_hpu_mm.buckets.admission.served_part`'s to say."""
    return _read_traffic(path, flag=flag)


def _read_traffic(path: str | None, *, flag: str) -> Traffic:
    if path is None:
        return default_traffic()
    p = Path(path).expanduser()
    if is_folder(p, flag=flag):
        found = scan_images(p, progress=False, flag=flag, also=OR_CSV)[0]
        # A file the server could not read is a request it answers with HTTP 400 before any graph runs: it takes no
        # bucket and no memory, so it is named in the traffic's description, not planned.
        source = found.source + (f" ({len(found.unreadable)} {name_unreadable(found.unreadable)}; left out)"
                                 if found.unreadable else "")  # fmt: skip
        return Traffic({Request(size): n for size, n in found.counts.items()}, source)
    if not p.is_file():
        what = "not a file or a folder" if p.exists() else "no such file or folder"
        raise ConfigError(f"{flag} {path}: {what}; accepted: a CSV with a width,height header or a folder of "
                          "images")  # fmt: skip
    return read_traffic_csv(p, flag=flag, folder=True)


def read_sizes(path: str | None, *, flag: str) -> SizeSet:
    """The images of :func:`read_traffic`'s traffic; None: the embedded sizes."""
    return embedded_sizes() if path is None else images_of(read_traffic(path, flag=flag))


def processor_reach(buckets: tuple[int, ...], min_pixels: int | None,
                    max_pixels: int | None) -> tuple[tuple[int, ...], tuple[int, ...]]:  # fmt: skip
    """(kept, dropped): the vision buckets an image the (112-aligned) processor resizes within ``min_pixels`` and
    ``max_pixels`` can use. The largest image has :func:`largest_patches` patches, so the smallest bucket holding it
    is the last one used; the smallest has :func:`smallest_patches`, so a bucket below it holds none (kept while no
    other would remain). None: no bound that side."""
    ordered = tuple(sorted(buckets))
    kept = ordered
    if max_pixels is not None:
        top = largest_patches(max_pixels)
        covering = [b for b in kept if b >= top]
        kept = tuple(b for b in kept if b < top) + ((covering[0],) if covering else ())
    if min_pixels is not None:
        bottom = smallest_patches(min_pixels)
        reached = tuple(b for b in kept if b >= bottom)
        kept = reached or kept
    return kept, tuple(b for b in ordered if b not in kept)


def choose(
    inputs: PlanInputs,
    sizes: SizeSet | None,
    *,
    max_buckets: int | None,
    mode: AlignMode,
    min_pixels: int = QWEN_MIN_PIXELS,
    max_pixels: int = QWEN_MAX_PIXELS,
    keep: bool = False,
) -> tuple[Plan, BucketChoice | None]:
    """The plan, with the bucket list replaced by the joint optimum when the configured one does not fit or when
    ``sizes`` were given and the optimum does better on them (fewer shrunk images, then higher efficiency).
    ``keep``: never replace (the configured list, pruned to what fits); ``min_pixels`` / ``max_pixels``: the
    processor's (``--mm-processor-kwargs``, else Qwen2.5-VL's own). Only Qwen2.5-VL's list is replanned (the
    optimum is over its processor's aligned sizes and its tower's buckets); another family keeps its runtime's list,
    pruned to what fits."""
    first = plan(inputs)
    graphs = inputs.pool_mode is not PoolMode.NONE and not inputs.enforce_eager
    # a runtime that batches the tower (vllm-gaudi v0.11.2) reads images per pass: nothing in patches to replan
    replannable = inputs.model.vision.aligned_processor_applies and not inputs.vision_patches_per_item
    if keep or not inputs.buckets or not graphs or not first.fits or not replannable or inputs.images_refused:
        return first, None
    if sizes is None and not first.vision_buckets_skipped:
        return first, None
    if not inputs.vision_graphs:  # vllm-fork before 1.22 (since eaa535d2): no pool to plan a list against
        why = (f"{inputs.runtime_words} warms no vision graph: the buckets only cap what the 112-px processor makes, "
               "so no list is planned against a vision pool")  # fmt: skip
        return first, BucketChoice(sizes or embedded_sizes(), None, None, False, why, planned=False)
    sample = sizes if sizes is not None else embedded_sizes()
    k = len(inputs.buckets) if max_buckets is None else max_buckets
    if k < 1:
        raise ConfigError(f"--max-buckets {k} is invalid; accepted: an integer >= 1")
    # No more shrinking than the configured list's largest bucket would do.
    max_pixels = min(max(inputs.buckets) * PIXELS_PER_PATCH, max_pixels)

    captured = first.vision_buckets_captured
    before = bucket_fit.evaluate_list(
        sample.counts, captured, min_pixels=min_pixels, max_pixels=max_pixels, mode=mode, pool=inputs.pool_mode,
        vision=inputs.model.vision, dtype_size=inputs.dtype_size, costs=inputs.costs,
    ) if captured else None  # fmt: skip
    after = bucket_fit.best_fitting_list(
        sample.counts, pool_bytes=first.split.prefill_vision_graph_bytes, pool=inputs.pool_mode, max_buckets=k,
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
    # both reasons where both hold (r22vision 15: the list over the pool, and sizes given it serves better)
    why = "; ".join(
        reason
        for reason, holds in (
            ("the configured list does not fit the vision pool", bool(first.vision_buckets_skipped)),
            ("planned over the given sizes", sizes is not None),
        )
        if holds
    )
    return second, BucketChoice(sample, before, after, True, f"{why}; {after.note}" if after.note else why)

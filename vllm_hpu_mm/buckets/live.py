"""What a running server saw: read a Prometheus ``/metrics`` exposition (a URL or a saved file) into the aligned
patch counts of the images its processor handled, and with vLLM's own text metrics (:mod:`vllm_hpu_mm.traffic.metrics`)
into traffic, for ``--from-metrics``.

The plugin counts every aligned image as ``vllm_hpu_mm_aligned_images_total{patches="<n>",bucket="<b>"}``
(:mod:`vllm_hpu_mm.plugin.metrics`). A bucket planner needs only the patch counts; the size commands work on image
sizes, so each count is handed to them as the 112-px tile grid that has exactly that many patches (the squarest one,
``rows x cols`` tiles with ``rows * cols = n / 64``), with its count: nothing is expanded per image. Any 112-multiple
size aligns to itself under every alignment mode, so the plan sees exactly the counts the server saw
(``tests/buckets/test_buckets_live.py`` checks the round trip).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from typing import Any

from vllm_hpu_mm.buckets.sizes import Size, SizeSet
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.traffic.metrics import FLAG, counts_since, families, nonnegative_count, read_exposition, text_metrics
from vllm_hpu_mm.traffic.requests import Request, Traffic
from vllm_hpu_mm.values import BUCKET_GRANULE, MAX_BUCKET

__all__ = ["LiveCounts", "from_metrics", "parse_exposition", "read_exposition", "tile_size", "traffic_from_metrics"]

IMAGES_METRIC = "vllm_hpu_mm_aligned_images"
PADDING_METRIC = "vllm_hpu_mm_aligned_padding_patches"
TILE = 112
#: Most patches a ``patches`` or ``bucket`` label may say: the largest bucket (2^20, values.MAX_BUCKET), above any
#: image the server accepts; a larger label is no count a server wrote and is refused, whichever command reads it.
MAX_PATCHES = MAX_BUCKET


@dataclasses.dataclass(frozen=True)
class LiveCounts:
    """Images counted by the server's processor, by aligned patch count, and the running list's padding."""

    #: patches -> images.
    images: dict[int, int]
    #: Buckets of the running list that images landed in (from the ``bucket`` label; 'oversize'/'none' left out).
    buckets_hit: tuple[int, ...]
    #: Images above the running list's largest bucket.
    oversize: int
    #: Dummy patches the running list added (``vllm_hpu_mm_aligned_padding_patches_total``).
    padding: int

    @property
    def num_images(self) -> int:
        return sum(self.images.values())

    @property
    def real_patches(self) -> int:
        return sum(p * n for p, n in self.images.items())

    @property
    def live_efficiency(self) -> float:
        """Real / padded patches of the list the server is running (1.0 without padding)."""
        real = self.real_patches
        return real / (real + self.padding) if real else 1.0

    def since(self, earlier: LiveCounts, source: str, earlier_source: str) -> LiveCounts:
        """The images counted after ``earlier`` (a previous page of the same server)."""
        images = counts_since(self.images, earlier.images, IMAGES_METRIC, source, earlier_source)
        extra = counts_since({0: self.oversize, 1: self.padding}, {0: earlier.oversize, 1: earlier.padding},
                             PADDING_METRIC, source, earlier_source)  # fmt: skip
        return LiveCounts(images, self.buckets_hit, extra.get(0, 0), extra.get(1, 0))


def parse_exposition(text: str, source: str = "exposition", model_name: str | None = None) -> LiveCounts:
    """Sum the aligned-image counters over every other label (several API servers, pids)."""
    return _require_images(image_counts(families(text, source, model_name=model_name), source), source)


def image_counts(fams: list[Any], source: str) -> LiveCounts:
    images: Counter[int] = Counter()
    hit: set[int] = set()
    oversize = padding = 0
    for family in fams:
        for sample in family.samples:
            if sample.name == IMAGES_METRIC + "_total":
                raw = _patch_label(sample.labels, "patches", source)
                n = nonnegative_count(sample.value, f'{IMAGES_METRIC}_total{{patches="{raw}"}}', source)
                images[int(raw)] += n
                bucket = sample.labels.get("bucket", "")
                if bucket.isdigit() and n:
                    hit.add(int(_patch_label(sample.labels, "bucket", source)))
                elif bucket == "oversize":
                    oversize += n
            elif sample.name == PADDING_METRIC + "_total":
                padding += nonnegative_count(sample.value, f"{PADDING_METRIC}_total", source)
    counted = {p: n for p, n in sorted(images.items()) if n}
    return LiveCounts(counted, tuple(sorted(hit)), oversize, padding)


def _patch_label(labels: dict[str, str], name: str, source: str) -> str:
    """An image counter's ``patches`` label (an aligned patch count, whole tiles of 64) or numeric ``bucket`` label
    (a running bucket: a multiple of 4 is read too, values.ACCEPTED_FORM), no larger than any bucket can be; anything
    else exits 2 naming the value and the accepted range."""
    raw, step = labels.get(name, ""), BUCKET_GRANULE if name == "patches" else 1
    if not raw.isdigit() or len(raw) > 9 or not 0 < int(raw) <= MAX_PATCHES or int(raw) % step:
        what = (f"an aligned patch count, a multiple of {BUCKET_GRANULE} from {BUCKET_GRANULE}" if step > 1
                else "a bucket, a whole number from 1")  # fmt: skip
        raise ConfigError(
            f"{FLAG} {source}: {IMAGES_METRIC}_total has {name}={raw[:20]!r}; expected {what} to {MAX_PATCHES} "
            "(2^20, the largest bucket, above any image the server accepts)"
        )
    return raw


def _require_images(live: LiveCounts, source: str) -> LiveCounts:
    if not live.images:
        raise ConfigError(
            f"{FLAG} {source}: no images counted ({IMAGES_METRIC}_total is absent or zero); is the vllm-hpu-mm plugin "
            "loaded in that server, and has it processed any images?"
        )
    return live


def tile_size(patches: int) -> Size:
    """``(width, height)`` of the squarest 112-px tile grid with exactly ``patches`` patches (a multiple of 64)."""
    tiles = patches // BUCKET_GRANULE
    rows = next(d for d in range(math.isqrt(tiles), 0, -1) if tiles % d == 0)
    return TILE * (tiles // rows), TILE * rows


def _describe(source: str, live: LiveCounts) -> str:
    running = ",".join(map(str, live.buckets_hit)) or "none hit"
    description = (
        f"{source} ({live.num_images} images counted by the server; its running list, buckets hit {running}, "
        f"live efficiency {live.live_efficiency:.4f}"
        + (f", {live.oversize} above its largest bucket" if live.oversize else "")
        + ")"
    )
    return description


def from_metrics(source: str, model_name: str | None = None) -> tuple[SizeSet, LiveCounts]:
    """The server's images as a :class:`SizeSet` (each count at its tile-grid size) and the counts themselves."""
    live = parse_exposition(read_exposition(source), source, model_name)
    return SizeSet({tile_size(p): n for p, n in live.images.items()}, _describe(source, live)), live


def traffic_from_metrics(source: str, since: str | None = None, model_name: str | None = None) -> Traffic:
    """The server's traffic: its images (our counters), text-only requests (vLLM's prompt histogram beyond our
    multimodal requests), and the text distribution of vLLM's own histograms and prefix-cache counters; with
    ``since`` (an earlier page of the same server), only what it counted after that page."""
    fams = families(read_exposition(source), source, model_name=model_name)
    text = text_metrics(fams, source)
    counted = image_counts(fams, source)
    if since is not None:
        before = families(read_exposition(since, flag="--since"), since, "--since", model_name)
        text = text.since(text_metrics(before, since), source, since)
        counted = counted.since(image_counts(before, since), source, since)
        if not text.found and not counted.images:
            raise ConfigError(f"{FLAG} {source}: no request counted since --since {since}; accepted: a later page "
                              "of the same server, after it served some requests")  # fmt: skip
        source = f"{source} since {since}"
    live = counted if counted.images else None  # none counted: the text alone, or the error below
    counts: Counter[Request] = Counter()
    image_requests = 0
    if live is not None:
        for patches, n in live.images.items():
            counts[Request(tile_size(patches))] += n
        image_requests = sum(text.image_request_prompts.values()) or live.num_images
    text_only = sum(text.prompts.values()) - image_requests
    if text_only > 0:
        counts[Request(None)] += text_only
    if not counts:
        raise ConfigError(f"{FLAG} {source}: no requests counted (neither {IMAGES_METRIC}_total nor "
                          "vllm:request_prompt_tokens); is it a vLLM server's /metrics?")  # fmt: skip
    parts = [_describe(source, live) if live is not None else f"{source} (no image counters)"]
    if text.found:
        share = "no prefix-cache counters" if text.hit_share is None else f"prefix-cache hit share {text.hit_share:.3f}"
        parts.append(f"text from vLLM's histograms ({sum(text.prompts.values())} requests, prompt and answer lengths "
                     f"at their bucket midpoints, taken as independent; {share})")  # fmt: skip
    else:
        parts.append("no text metrics: text drawn from the default traffic")
    rows = text.text_rows() if text.found else None
    if text.running == 0:
        parts.append("vllm:num_requests_running read 0 (an idle server): load unknown")
    # a gauge of 0 is an idle moment, not the load: unknown, so the buckets serve every load
    return Traffic(dict(counts), "; ".join(parts), text.running or None, rows, text_includes_images=text.found)

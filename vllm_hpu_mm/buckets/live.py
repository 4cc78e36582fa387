"""What a running server saw: read a Prometheus ``/metrics`` exposition (a URL or a saved file) into the aligned
patch counts of the images its processor handled, for ``buckets plan|check --from-metrics``.

The plugin counts every aligned image as ``vllm_hpu_mm_aligned_images_total{patches="<n>",bucket="<b>"}``
(:mod:`vllm_hpu_mm.plugin.metrics`). A bucket planner needs only the patch counts; the size commands work on image
sizes, so each count is handed to them as the 112-px tile grid that has exactly that many patches (the squarest one,
``rows x cols`` tiles with ``rows * cols = n / 64``). Any 112-multiple size aligns to itself under every alignment
mode, so the plan sees exactly the counts the server saw (``tests/test_buckets_live.py`` checks the round trip).
"""

from __future__ import annotations

import dataclasses
import math
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

from vllm_hpu_mm.buckets.sizes import Size, SizeSet
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.values import BUCKET_GRANULE

__all__ = ["LiveCounts", "from_metrics", "parse_exposition", "read_exposition", "tile_size"]

IMAGES_METRIC = "vllm_hpu_mm_aligned_images"
PADDING_METRIC = "vllm_hpu_mm_aligned_padding_patches"
FLAG = "--from-metrics"
#: Seconds to wait for a ``/metrics`` URL.
TIMEOUT_S = 10.0
TILE = 112


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


def read_exposition(source: str, *, timeout_s: float = TIMEOUT_S) -> str:
    """The exposition text of a ``http(s)://`` URL or a file path; :class:`ConfigError` naming the flag if not."""
    if source.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(source, timeout=timeout_s) as response:
                body: bytes = response.read()
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ConfigError(
                f"{FLAG} {source}: cannot fetch it ({reason}); expected a server's /metrics URL or a saved file"
            ) from None
        return body.decode("utf-8", errors="replace")
    try:
        return Path(source).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(
            f"{FLAG} {source}: cannot read it ({exc.strerror or exc}); expected a /metrics URL (http://HOST:PORT/"
            "metrics) or a file holding a saved exposition"
        ) from None


def _count(value: float, what: str, source: str) -> int:
    if value < 0 or value != int(value):
        raise ConfigError(f"{FLAG} {source}: {what} has value {value}; expected a non-negative whole count")
    return int(value)


def parse_exposition(text: str, source: str = "exposition") -> LiveCounts:
    """Sum the aligned-image counters over every other label (several API servers, pids)."""
    from prometheus_client.parser import text_string_to_metric_families

    images: Counter[int] = Counter()
    hit: set[int] = set()
    oversize = padding = 0
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as exc:
        raise ConfigError(f"{FLAG} {source}: not a Prometheus text exposition ({exc})") from None
    for family in families:
        for sample in family.samples:
            if sample.name == IMAGES_METRIC + "_total":
                raw = sample.labels.get("patches", "")
                if not raw.isdigit() or int(raw) <= 0 or int(raw) % BUCKET_GRANULE:
                    raise ConfigError(
                        f"{FLAG} {source}: {IMAGES_METRIC}_total has patches={raw!r}; expected a positive multiple "
                        f"of {BUCKET_GRANULE} (an aligned patch count)"
                    )
                n = _count(sample.value, f'{IMAGES_METRIC}_total{{patches="{raw}"}}', source)
                images[int(raw)] += n
                bucket = sample.labels.get("bucket", "")
                if bucket.isdigit() and n:
                    hit.add(int(bucket))
                elif bucket == "oversize":
                    oversize += n
            elif sample.name == PADDING_METRIC + "_total":
                padding += _count(sample.value, f"{PADDING_METRIC}_total", source)
    counted = {p: n for p, n in sorted(images.items()) if n}
    if not counted:
        raise ConfigError(
            f"{FLAG} {source}: no images counted ({IMAGES_METRIC}_total is absent or zero); is the vllm-hpu-mm plugin "
            "loaded in that server, and has it processed any images?"
        )
    return LiveCounts(counted, tuple(sorted(hit)), oversize, padding)


def tile_size(patches: int) -> Size:
    """``(width, height)`` of the squarest 112-px tile grid with exactly ``patches`` patches (a multiple of 64)."""
    tiles = patches // BUCKET_GRANULE
    rows = next(d for d in range(math.isqrt(tiles), 0, -1) if tiles % d == 0)
    return TILE * (tiles // rows), TILE * rows


def from_metrics(source: str) -> tuple[SizeSet, LiveCounts]:
    """The server's images as a :class:`SizeSet` (one tile-grid size per counted image) and the counts themselves."""
    live = parse_exposition(read_exposition(source), source)
    sizes = tuple(tile_size(p) for p, n in live.images.items() for _ in range(n))
    running = ",".join(map(str, live.buckets_hit)) or "none hit"
    description = (
        f"{source} ({live.num_images} images counted by the server; its running list, buckets hit {running}, "
        f"live efficiency {live.live_efficiency:.4f}"
        + (f", {live.oversize} above its largest bucket" if live.oversize else "")
        + ")"
    )
    return SizeSet(sizes, description), live

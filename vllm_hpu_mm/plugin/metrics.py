"""Prometheus counters of the bucketed vision encoder, and the per-pass shape log.

In vLLM V1 the tower runs in the engine-core/worker process while ``/metrics`` is served by the API-server process.
vLLM 0.32 merges metrics across processes only through prometheus_client's multiprocess mode: when
``PROMETHEUS_MULTIPROC_DIR`` is set (vLLM sets it itself for ``--api-server-count > 1``), every process writes its
samples to files there and the API server's ``/metrics`` reads them all (``vllm/v1/metrics/prometheus.py``,
``get_prometheus_registry``). Our counters are ordinary prometheus_client counters, so with that variable set
(an empty directory, inherited by the engine processes) they appear on the API server's ``/metrics``; without it
they stay in the process that ran the tower, which :func:`multiprocess_enabled` lets the startup log say.

The processor-side counters (:func:`record_aligned`) need none of that: vLLM 0.32 runs the multimodal processor in
the API-server process itself (``vllm/renderers/base.py`` builds the processor there and warms it up with
``_warmup_mm_processor``), the same process that serves ``/metrics``; with one API server the default registry is
what ``/metrics`` exposes (``get_prometheus_registry`` returns ``REGISTRY``). With ``--api-server-count > 1`` vLLM's
own ``run_multi_api_server`` sets ``PROMETHEUS_MULTIPROC_DIR`` before it starts the API servers, so each one writes
its counts to that directory and any of them serves the sum. Only counters are used (no gauges), so both modes
report the same totals.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from vllm_hpu_mm.buckets.packing import bucket_for
from vllm_hpu_mm.graphs.base import PassRecord

PREFIX = "vllm_hpu_mm_"
_lock = threading.Lock()
_metrics: dict[str, Any] | None = None


def multiprocess_enabled() -> bool:
    """True when prometheus_client writes samples to files (``PROMETHEUS_MULTIPROC_DIR`` was set at its import)."""
    from prometheus_client import values

    return bool(values.ValueClass.__name__ == "MmapedValue")


#: Edges of the encoder-time histogram (seconds): a millisecond to a minute, about three per decade.
ENCODER_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _counters() -> dict[str, Any]:
    """Create the counters once per process, lazily: importing this module registers nothing."""
    global _metrics
    with _lock:
        if _metrics is None:
            from prometheus_client import Counter, Histogram

            _metrics = {
                "images": Counter(
                    PREFIX + "vision_images",
                    "Images (and video items) encoded, by the bucket their pass ran at ('none' = exact shape).",
                    ["bucket"],
                ),
                "padded": Counter(
                    PREFIX + "vision_padded_patches",
                    "Dummy patches added to fill vision-encoder buckets.",
                    ["bucket"],
                ),
                "passes": Counter(
                    PREFIX + "vision_encoder_passes",
                    "Vision-encoder passes, by bucket and backend.",
                    ["bucket", "backend"],
                ),
                "seconds": Histogram(
                    PREFIX + "vision_encoder_seconds",
                    "Wall seconds of one vision-encoder pass on the engine, by bucket ('none' = exact shape).",
                    ["bucket"],
                    buckets=ENCODER_SECONDS,
                ),
                "oversize": Counter(
                    PREFIX + "oversize_images",
                    "Images above the largest bucket, by the policy applied (shrink, eager, reject, ...).",
                    ["policy"],
                ),
                "aligned": Counter(
                    PREFIX + "aligned_images",
                    "Images aligned by the processor (API server), by aligned patch count and the bucket of the "
                    "effective list it maps to ('oversize' above the largest, 'none' without buckets).",
                    ["patches", "bucket"],
                ),
                "aligned_patches": Counter(
                    PREFIX + "aligned_patches",
                    "Real (aligned) patches of the processor's images, by the bucket they map to.",
                    ["bucket"],
                ),
                "aligned_padding": Counter(
                    PREFIX + "aligned_padding_patches",
                    "Dummy patches the bucket list adds to the processor's aligned images (bucket - patches).",
                    ["bucket"],
                ),
                "requests": Counter(
                    PREFIX + "requests",
                    "Multimodal requests processed (API server), by prompt length (placeholders included) bucketed to "
                    "the upper edge of its quarter octave, and by image count ('8+' above 7).",
                    ["prompt_tokens", "images"],
                ),
                "warmup": Counter(
                    PREFIX + "warmup_captures",
                    "Vision buckets captured/compiled at warm-up, by backend.",
                    ["backend"],
                ),
            }
        return _metrics


def _label(bucket: int | None) -> str:
    return "none" if bucket is None else str(bucket)


def record_pass(record: PassRecord) -> None:
    """Count one tower pass (the runner's ``on_pass`` hook)."""
    c = _counters()
    bucket = _label(record.bucket)
    c["images"].labels(bucket=bucket).inc(len(record.image_patches))
    c["passes"].labels(bucket=bucket, backend=record.backend).inc()
    if record.seconds is not None:
        c["seconds"].labels(bucket=bucket).observe(record.seconds)
    if record.padding:
        c["padded"].labels(bucket=bucket).inc(record.padding)
    if record.oversize and record.oversize_policy:
        c["oversize"].labels(policy=record.oversize_policy).inc(record.oversize)


def record_oversize(policy: str, count: int = 1) -> None:
    """Count images found above the largest bucket by the processor (shrunk or rejected there)."""
    _counters()["oversize"].labels(policy=policy).inc(count)


#: Function names of vLLM's dummy-input paths (start-up warm-up and profiling, ``processing/processor.py``
#: ``get_dummy_mm_inputs``): images aligned under them are not traffic and are not counted.
_DUMMY_CALLERS = frozenset({"get_dummy_mm_inputs"})
#: How many frames up to look for a dummy-input caller (the processor sits about 10 frames below it).
_DUMMY_DEPTH = 40


def _from_dummy_inputs() -> bool:
    """True when called under vLLM's dummy-input builder (checked on the stack so that the processor needs only one
    call into this module)."""
    frame = sys._getframe(2)
    for _ in range(_DUMMY_DEPTH):
        if frame is None:
            return False
        if frame.f_code.co_name in _DUMMY_CALLERS:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def aligned_labels(patches: int, buckets: tuple[int, ...] | None) -> tuple[str, int]:
    """``(bucket label, padding patches)`` of an aligned image under the effective bucket list."""
    if not buckets:
        return "none", 0
    bucket = bucket_for(patches, buckets)
    return ("oversize", 0) if bucket is None else (str(bucket), bucket - patches)


def record_aligned(patches: int, buckets: tuple[int, ...] | None) -> None:
    """Count one image the processor aligned to ``patches`` patches (skipped under vLLM's dummy inputs)."""
    if _from_dummy_inputs():
        return
    c = _counters()
    bucket, padding = aligned_labels(patches, buckets)
    c["aligned"].labels(patches=str(patches), bucket=bucket).inc()
    c["aligned_patches"].labels(bucket=bucket).inc(patches)
    if padding:
        c["aligned_padding"].labels(bucket=bucket).inc(padding)


def record_request(prompt_tokens: int, images: int) -> None:
    """Count one multimodal request (skipped under vLLM's dummy inputs): its prompt length bucketed
    (:func:`vllm_hpu_mm.traffic.metrics.prompt_bucket`, at most 4 labels per doubling) and its image count."""
    from vllm_hpu_mm.traffic.metrics import prompt_bucket

    if _from_dummy_inputs():
        return
    label = str(images) if images < 8 else "8+"
    _counters()["requests"].labels(prompt_tokens=str(prompt_bucket(prompt_tokens)), images=label).inc()


def record_warmup(backend: str, captured: int) -> None:
    _counters()["warmup"].labels(backend=backend).inc(captured)


class ShapeLog:
    """Appends one JSON line per tower pass to a file (``VLLM_HPU_MM_SHAPE_LOG``), for audits and tests.

    Lines are written with one ``write`` on an ``O_APPEND`` descriptor, so several processes can share the file.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, record: PassRecord) -> None:
        line = json.dumps(
            {
                "time": round(time.time(), 3),
                "pid": os.getpid(),
                "backend": record.backend,
                "bucket": record.bucket,
                "images": list(record.image_patches),
                "padding": record.padding,
                "total": record.total_patches,
                "oversize": record.oversize,
                "oversize_policy": record.oversize_policy,
                "seconds": None if record.seconds is None else round(record.seconds, 6),
            }
        )
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


def pass_hook(shape_log: str | None) -> Callable[[PassRecord], None]:
    """The runner's ``on_pass``: counters, plus the shape log when a path is set."""
    log = ShapeLog(shape_log) if shape_log else None

    def on_pass(record: PassRecord) -> None:
        record_pass(record)
        if log is not None:
            log(record)

    return on_pass

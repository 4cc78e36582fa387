"""The bucketed vision-encoder runner: any batch of images in, only bucket-shaped tower passes out.

:class:`BucketedVisionRunner` splits ``pixel_values`` per item (``t*h*w`` rows each), packs the items into bucket
passes with :func:`vllm_hpu_mm.buckets.packing.pack`, appends one dummy image of the missing patch count to each
pass, runs the :class:`~vllm_hpu_mm.graphs.base.PassExecutor`, drops the dummy's output rows and returns the rows of
every item in input order. The dummy is its own attention segment (its own row in ``grid_thw``): full attention is
block-diagonal by item and window attention never crosses items, so the real items' outputs are exactly those of an
unpadded run (``tests/test_runner_tower.py`` proves it on transformers' tower).

Videos (``t > 1``) are items like images: they are bucketed when they fit (each frame is its own full-attention
segment, so padding is exact for them too) and run exact-shape when they do not, whatever the image policy says.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from vllm_hpu_mm.buckets.packing import oversize_error, pack
from vllm_hpu_mm.buckets.policy import OversizePolicy
from vllm_hpu_mm.graphs.base import EncoderFn, PassExecutor, PassRecord
from vllm_hpu_mm.values import Buckets

if TYPE_CHECKING:
    from torch import nn

logger = logging.getLogger(__name__)

#: PassRecord.oversize_policy labels.
EAGER_LABEL = OversizePolicy.EAGER.value
#: An oversize image reached the runner under ``shrink`` (the processor should have resized it): ran exact-shape.
FALLBACK_LABEL = "eager_fallback"
#: An oversize video: never shrunk or rejected here, always exact-shape.
VIDEO_LABEL = "video_eager"


def dummy_grid(padding: int, *, merge_size: int = 2, spatial_window: int = 8) -> tuple[int, int, int]:
    """The (t, h, w) grid of a dummy image of ``padding`` patches, as square as the divisibility allows.

    With ``padding`` a multiple of ``spatial_window**2`` (always, for 112-aligned images and buckets), h and w are
    multiples of the window side so every window of the dummy is full; otherwise they are multiples of
    ``merge_size``. Raises :class:`ValueError` when no such grid exists.
    """
    if padding <= 0:
        raise ValueError(f"dummy padding must be positive, got {padding}")
    unit = spatial_window if padding % (spatial_window * spatial_window) == 0 else merge_size
    if padding % (unit * unit):
        raise ValueError(
            f"cannot pad {padding} patches with one image: the count must be a multiple of merge_size**2 = "
            f"{merge_size * merge_size} (real images have even h and w, so this means a bucket or grid is wrong)"
        )
    cells = padding // (unit * unit)
    # Largest divisor of `cells` not above its square root: the squarest grid of whole units.
    side = next(d for d in range(math.isqrt(cells), 0, -1) if cells % d == 0)
    return 1, side * unit, cells // side * unit


class BucketedVisionRunner:
    """Runs a vision tower on bucket-shaped passes only. See the module docstring.

    ``buckets`` (patch counts, ascending) of None disables bucketing: every call is one exact-shape pass.
    ``on_pass`` receives a :class:`PassRecord` after every tower pass (metrics, shape log).
    """

    def __init__(
        self,
        executor: PassExecutor,
        buckets: tuple[int, ...] | None,
        policy: OversizePolicy,
        *,
        merge_size: int = 2,
        spatial_window: int = 8,
        on_pass: Callable[[PassRecord], None] | None = None,
    ) -> None:
        self.executor = executor
        self.buckets = None if buckets is None else Buckets(buckets, source="BucketedVisionRunner buckets")
        self.policy = OversizePolicy(policy)
        self.merge_size = merge_size
        self.spatial_window = spatial_window
        self.on_pass = on_pass
        self._warned_fallback = False

    @property
    def merge_unit(self) -> int:
        return self.merge_size * self.merge_size

    def __call__(self, pixel_values: torch.Tensor, grid_thw: torch.Tensor | Sequence[Sequence[int]]) -> torch.Tensor:
        """``[P, D]`` pixel rows and ``[N, 3]`` grids -> ``[P / merge**2, H]`` tower output in input order."""
        grid = _as_grid(grid_thw)
        counts = [int(t * h * w) for t, h, w in grid.tolist()]
        if pixel_values.dim() != 2 or pixel_values.shape[0] != sum(counts):
            raise ValueError(
                f"pixel_values has shape {tuple(pixel_values.shape)}; expected [sum of t*h*w over grid_thw = "
                f"{sum(counts)}, patch_dim]"
            )
        if any(h % self.merge_size or w % self.merge_size for _, h, w in grid.tolist()):
            raise ValueError(f"every grid_thw h and w must be a multiple of merge_size={self.merge_size}: {grid}")
        if not counts:
            raise ValueError("grid_thw is empty: nothing to encode")
        rows = list(torch.split(pixel_values, counts))
        outputs: list[torch.Tensor | None] = [None] * len(counts)

        if self.buckets is None:
            self._run([*range(len(counts))], None, rows, grid, counts, outputs)
        else:
            largest = self.buckets[-1]
            fitting = [i for i, c in enumerate(counts) if c <= largest]
            oversize = [i for i, c in enumerate(counts) if c > largest]
            self._run_oversize(oversize, rows, grid, counts, outputs)
            if fitting:
                for p in pack([counts[i] for i in fitting], self.buckets, self.policy):
                    assert p.bucket is not None  # only fitting counts were packed
                    self._run([fitting[j] for j in p.items], p.bucket, rows, grid, counts, outputs)
        missing = [i for i, o in enumerate(outputs) if o is None]
        if missing:  # a packer that dropped items would otherwise return silently short output
            raise RuntimeError(f"items {missing} were not placed in any pass")
        return torch.cat([o for o in outputs if o is not None])

    def _run_oversize(
        self,
        oversize: list[int],
        rows: list[torch.Tensor],
        grid: torch.Tensor,
        counts: list[int],
        outputs: list[torch.Tensor | None],
    ) -> None:
        assert self.buckets is not None
        videos = [i for i in oversize if int(grid[i, 0]) > 1]
        images = [i for i in oversize if int(grid[i, 0]) == 1]
        if videos:
            self._run(videos, None, rows, grid, counts, outputs, label=VIDEO_LABEL)
        if not images:
            return
        largest = self.buckets[-1]
        if self.policy is OversizePolicy.REJECT:
            raise oversize_error(max(counts[i] for i in images), self.buckets)
        label = EAGER_LABEL
        if self.policy is OversizePolicy.SHRINK:
            label = FALLBACK_LABEL
            if not self._warned_fallback:
                self._warned_fallback = True
                logger.warning(
                    "an image of %d patches reached the vision tower above the largest bucket (%d) under the "
                    "'shrink' policy (the processor should have resized it; a profiling batch does this): running "
                    "it at its exact shape. Warned once.",
                    max(counts[i] for i in images),
                    largest,
                )
        self._run(images, None, rows, grid, counts, outputs, label=label)

    def _run(
        self,
        items: list[int],
        bucket: int | None,
        rows: list[torch.Tensor],
        grid: torch.Tensor,
        counts: list[int],
        outputs: list[torch.Tensor | None],
        *,
        label: str | None = None,
    ) -> None:
        real = sum(counts[i] for i in items)
        padding = 0 if bucket is None else bucket - real
        if padding < 0:
            raise RuntimeError(f"packer put {real} patches into bucket {bucket}")
        pixels = [rows[i] for i in items]
        grids = [grid[i] for i in items]
        if padding:
            template = rows[items[0]]
            pixels.append(torch.zeros((padding, template.shape[1]), dtype=template.dtype, device=template.device))
            dummy = dummy_grid(padding, merge_size=self.merge_size, spatial_window=self.spatial_window)
            grids.append(torch.tensor(dummy, dtype=torch.int64))
        started = time.perf_counter()
        out = self.executor(bucket, torch.cat(pixels), torch.stack(grids))
        seconds = time.perf_counter() - started
        expected = (real + padding) // self.merge_unit
        if out.shape[0] != expected:
            raise RuntimeError(
                f"{self.executor.name} executor returned {out.shape[0]} rows for a pass of {real + padding} "
                f"patches; expected {expected}"
            )
        start = 0
        for i in items:
            n = counts[i] // self.merge_unit
            outputs[i] = out[start : start + n]
            start += n
        if self.on_pass is not None:
            self.on_pass(
                PassRecord(
                    backend=self.executor.name,
                    bucket=bucket,
                    image_patches=tuple(counts[i] for i in items),
                    padding=padding,
                    oversize=len(items) if label else 0,
                    oversize_policy=label,
                    seconds=seconds,
                )
            )


def _as_grid(grid_thw: torch.Tensor | Sequence[Sequence[int]]) -> torch.Tensor:
    grid = torch.as_tensor(grid_thw if isinstance(grid_thw, torch.Tensor) else list(grid_thw), dtype=torch.int64)
    grid = grid.detach().to("cpu").reshape(-1, 3) if grid.numel() else grid.reshape(0, 3)
    if (grid <= 0).any():
        raise ValueError(f"grid_thw entries must be positive, got {grid.tolist()}")
    return grid


def transformers_encoder(model: nn.Module) -> EncoderFn:
    """An :class:`EncoderFn` over transformers' ``Qwen2_5_VisionTransformerPretrainedModel``.

    transformers 5.x returns a ``BaseModelOutputWithPooling`` whose ``pooler_output`` is the merged ``[P/4, H]``
    embedding (``last_hidden_state`` is the unmerged, window-permuted block output). It builds its index tensors
    from ``grid_thw`` on the grid's device, so the grid is moved next to the pixels.
    """

    def encode(pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        out: Any = model(pixel_values, grid_thw=grid_thw.to(pixel_values.device))
        merged = out.pooler_output if hasattr(out, "pooler_output") else out
        assert isinstance(merged, torch.Tensor)
        return merged

    return encode

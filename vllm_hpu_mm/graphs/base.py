"""Contracts between the bucketed runner and the graph backends (CPU eager, CUDA graphs, HPU graphs).

The runner (:mod:`vllm_hpu_mm.graphs.runner`) turns a batch of images into bucket-sized *passes* (real images
packed first-fit decreasing, then one dummy image of the missing patch count), hands each pass to an
:class:`PassExecutor`, and strips the dummy's rows from the output. An executor only ever sees bucket shapes:
``pixel_values`` of ``[bucket, patch_dim]`` and a ``grid_thw`` of ``[n_items, 3]`` whose patch counts sum to the
bucket. How it runs that pass (eagerly, a captured CUDA graph, an HPU graph) is its own business.

What an executor can rely on, for every call (``warmup`` and ``__call__``):

- ``pixel_values`` is ``[bucket, patch_dim]`` (``[sum of grid patches, patch_dim]`` when ``bucket`` is None), on
  the tower's device, in the dtype vLLM handed the runner (float, or ``uint8`` when vLLM normalises on the device);
- ``grid_thw`` is an ``int64`` ``[n_items, 3]`` tensor on the **CPU**, so index tensors can be built on the host
  without a device sync; every row has h and w divisible by the merge size; the last row is the dummy when the
  pass was padded;
- the *composition* of a bucket changes between passes (one 4096 pass may be one 64x64 image, the next two images
  plus a dummy): an executor that bakes host values into a graph must take the layout as data (precomputed index
  tensors) or key its graphs per layout;
- the result is ``[patches / merge**2, out_hidden]`` in pass order (the runner strips the dummy and reorders).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch


class EncoderFn(Protocol):
    """A vision tower forward: ``[P, patch_dim]`` pixels and ``[N, 3]`` (t, h, w) grids -> ``[P / merge**2, H]``."""

    def __call__(self, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor: ...


class PassExecutor(Protocol):
    """Runs the tower on one bucket-sized pass; one implementation per graph backend."""

    #: Backend name for logs and metrics: "cpu", "cuda", "hpu", "eager".
    name: str

    def warmup(self, bucket: int, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> None:
        """Capture/compile the graph for ``bucket`` using these example inputs (already bucket-sized).

        Called once per bucket at startup (``vllm_hpu_mm.graphs.select.warmup``) with a single dummy image filling
        the bucket; it may run the tower. Raise :class:`~vllm_hpu_mm.errors.BackendError` if the bucket cannot be
        captured: warm-up then logs it and goes on with the next bucket.
        """

    def __call__(self, bucket: int | None, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        """Run one pass. ``bucket`` is None for an exact-shape pass (oversize image, bucketing disabled, video):
        run it eagerly, never capture it."""


@dataclasses.dataclass(frozen=True)
class PassRecord:
    """What one tower pass did, for metrics and the shape log."""

    backend: str
    #: The bucket (patches) the pass ran at, or None for an exact-shape oversize pass.
    bucket: int | None
    #: Patch counts of the real images in the pass, in pass order.
    image_patches: tuple[int, ...]
    #: Patches of the dummy image appended to fill the bucket (0 if the images filled it exactly).
    padding: int
    #: Number of oversize images handled in this pass and the policy applied ("shrink", "eager"), if any.
    oversize: int = 0
    oversize_policy: str | None = None
    #: Wall seconds of the pass (the executor's call, on the engine's clock): the tower's own time, which a
    #: request's time to first token mixes with the API server's (the server check's step fit reads it). A
    #: measurement, not part of what the pass was.
    seconds: float | None = dataclasses.field(default=None, compare=False)

    @property
    def total_patches(self) -> int:
        return sum(self.image_patches) + self.padding

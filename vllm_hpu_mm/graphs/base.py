"""Contracts between the bucketed runner and the graph backends (CPU eager, CUDA graphs, HPU graphs).

The runner (:mod:`vllm_hpu_mm.graphs.runner`) turns a batch of images into bucket-sized *passes* (real images
packed first-fit decreasing, then one dummy image of the missing patch count), hands each pass to an
:class:`PassExecutor`, and strips the dummy's rows from the output. An executor only ever sees bucket shapes:
``pixel_values`` of ``[bucket, patch_dim]`` and a ``grid_thw`` of ``[n_items, 3]`` whose patch counts sum to the
bucket. How it runs that pass (eagerly, a captured CUDA graph, an HPU graph) is its own business.
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
        """Capture/compile the graph for ``bucket`` using these example inputs (already bucket-sized)."""

    def __call__(self, bucket: int | None, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        """Run one pass. ``bucket`` is None for an exact-shape (oversize, ``eager`` policy) pass."""


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

    @property
    def total_patches(self) -> int:
        return sum(self.image_patches) + self.padding

"""CPU backend: the tower runs eagerly on bucket shapes, optionally ``torch.compile``-d once per bucket.

Compilation is off by default: on the 2-core dev machine it gave no consistent speed-up and cost 5-37 s of warm-up
(``benchmarks/performance/cpu_tower_compile.py``, results in ``benchmarks/performance/results/cpu_tower_compile.md``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import cast

import torch

from vllm_hpu_mm.graphs.base import EncoderFn

logger = logging.getLogger(__name__)


class EagerExecutor:
    """Plain eager call of the encoder under ``torch.inference_mode``; one per process.

    With ``compile=True`` every bucket gets its own ``torch.compile(dynamic=False)`` of the encoder, built at warm-up
    (or on first use); exact-shape passes (``bucket=None``) always run eagerly so an odd shape never compiles.
    """

    def __init__(self, encoder: EncoderFn, *, compile: bool = False, name: str = "cpu") -> None:
        self.encoder = encoder
        self.compile = compile
        self.name = name
        self._compiled: dict[int, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {}

    def _fn(self, bucket: int | None) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        if bucket is None or not self.compile:
            return self.encoder
        fn = self._compiled.get(bucket)
        if fn is None:
            fn = cast(
                "Callable[[torch.Tensor, torch.Tensor], torch.Tensor]",
                torch.compile(self.encoder, dynamic=False),
            )
            self._compiled[bucket] = fn
        return fn

    def warmup(self, bucket: int, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> None:
        """Run the bucket once (compiling it when ``compile`` is on) so the first request pays nothing extra."""
        self(bucket, pixel_values, grid_thw)

    def __call__(self, bucket: int | None, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return self._fn(bucket)(pixel_values, grid_thw)

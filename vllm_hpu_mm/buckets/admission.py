"""Which images the server accepts at all: the served loader refuses, before decoding, an image above
``VLLM_HPU_MM_MAX_IMAGE_PIXELS`` or with an aspect ratio above ``VLLM_HPU_MM_MAX_ASPECT_RATIO``
(:func:`~vllm_hpu_mm.preprocess.image.dimension_problem`, the one rule). A plan counts only the images the server
accepts; the others are reported, never planned for."""

from __future__ import annotations

import dataclasses
from collections import Counter

from vllm_hpu_mm.buckets.sizes import Size, SizeSet
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.preprocess.image import Refusal, dimension_problem

__all__ = ["Admission", "admit"]


@dataclasses.dataclass(frozen=True)
class Admission:
    """The images the server accepts, and how many it refuses by reason."""

    sizes: SizeSet
    refused: dict[Refusal, int]
    max_image_pixels: int
    max_aspect_ratio: float

    @property
    def num_refused(self) -> int:
        return sum(self.refused.values())

    def reasons(self) -> str:
        """How many were refused, by reason: "1 above VLLM_HPU_MM_MAX_IMAGE_PIXELS=..., 2 with ..."."""
        why = {"pixels": f"above VLLM_HPU_MM_MAX_IMAGE_PIXELS={self.max_image_pixels}",
               "aspect_ratio": f"with an aspect ratio above VLLM_HPU_MM_MAX_ASPECT_RATIO={self.max_aspect_ratio:g}",
               "empty": "of zero width or height"}  # fmt: skip
        return ", ".join(f"{n} {why[reason]}" for reason, n in sorted(self.refused.items()))

    def summary(self) -> str:
        """One clause for the output, e.g. "2 images the server refuses left out (1 above ...)"; "" when none."""
        return f"{self.num_refused} images the server refuses left out ({self.reasons()})" if self.num_refused else ""


def admit(sizes: SizeSet, *, max_image_pixels: int, max_aspect_ratio: float) -> Admission:
    """The images of ``sizes`` the server accepts (each distinct size judged once); the source says what was left
    out. :class:`ConfigError` when it accepts none of them."""
    verdicts: dict[Size, Refusal | None] = {}
    kept: list[Size] = []
    refused: Counter[Refusal] = Counter()
    for size in sizes.sizes:
        if size not in verdicts:
            verdicts[size] = dimension_problem(
                *size, max_image_pixels=max_image_pixels, max_aspect_ratio=max_aspect_ratio
            )
        problem = verdicts[size]
        if problem is None:
            kept.append(size)
        else:
            refused[problem] += 1
    admission = Admission(sizes, dict(refused), max_image_pixels, max_aspect_ratio)
    if not refused:
        return admission
    if not kept:
        raise ConfigError(f"{sizes.source}: the server refuses every image ({admission.reasons()}); accepted: "
                          "images within those limits")  # fmt: skip
    source = f"{sizes.source} ({admission.summary()})"
    return dataclasses.replace(admission, sizes=SizeSet(tuple(kept), source))

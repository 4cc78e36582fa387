"""Which images the server accepts at all: the served loader refuses, before decoding, an image above
``VLLM_HPU_MM_MAX_IMAGE_PIXELS`` or with an aspect ratio above ``VLLM_HPU_MM_MAX_ASPECT_RATIO``
(:func:`~vllm_hpu_mm.preprocess.limits.dimension_problem`, the one rule). A plan counts only the images the server
accepts; the others are reported, never planned for. In request traffic a refused image fails its whole request
(HTTP 400), so the request is left out of the traffic too."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from typing import Literal

from vllm_hpu_mm.buckets.sizes import Size, SizeSet, name_unreadable
from vllm_hpu_mm.errors import ConfigError, NothingServed
from vllm_hpu_mm.preprocess.limits import Refusal, dimension_problem
from vllm_hpu_mm.traffic.requests import Traffic

__all__ = ["Admission", "Reason", "admit", "admit_traffic", "served_part"]

#: Why an image is left out: its size (:data:`Refusal`), or a file named as an image that no reader opens or decodes.
Reason = Refusal | Literal["unreadable"]


@dataclasses.dataclass(frozen=True)
class Admission:
    """The images the server accepts, and how many it refuses by reason."""

    sizes: SizeSet
    refused: dict[Reason, int]
    max_image_pixels: int
    max_aspect_ratio: float
    #: The unreadable image files, named in :meth:`reasons`.
    unreadable: tuple[str, ...] = ()
    #: The variable that sets ``max_image_pixels``: ours, or vLLM's own ``VLLM_MAX_IMAGE_PIXELS`` when lower.
    pixels_var: str = "VLLM_HPU_MM_MAX_IMAGE_PIXELS"

    @property
    def num_refused(self) -> int:
        return sum(self.refused.values())

    def reasons(self) -> str:
        """How many were refused, by reason: "1 above VLLM_HPU_MM_MAX_IMAGE_PIXELS=..., 2 with ..."."""
        why = {"pixels": f"above {self.pixels_var}={self.max_image_pixels}",
               "aspect_ratio": f"with an aspect ratio above VLLM_HPU_MM_MAX_ASPECT_RATIO={self.max_aspect_ratio:g}",
               "empty": "of zero width or height", "unreadable": self._unreadable()}  # fmt: skip
        return ", ".join(f"{n} {why[reason]}" for reason, n in sorted(self.refused.items()))

    def _unreadable(self) -> str:
        return name_unreadable(self.unreadable)

    def as_json(self) -> dict[str, int | list[str]]:
        """The JSON ``refused``: how many by reason, and under ``unreadable`` the files themselves (a size from a CSV
        names no file; an unreadable file is one the user has to find and fix)."""
        return {reason: list(self.unreadable) if reason == "unreadable" else n
                for reason, n in sorted(self.refused.items())}  # fmt: skip

    def summary(self) -> str:
        """One clause for the output, e.g. "2 images the server refuses left out (1 above ...)"; "" when none."""
        return f"{self.num_refused} images the server refuses left out ({self.reasons()})" if self.num_refused else ""


def _verdicts(
    counts: Mapping[Size, int], max_image_pixels: int, max_aspect_ratio: float
) -> tuple[dict[Size, int], Counter[Reason]]:
    """The accepted sizes (with their counts) and the refused images by reason; each distinct size judged once."""
    kept: dict[Size, int] = {}
    refused: Counter[Reason] = Counter()
    for size, n in counts.items():
        problem = dimension_problem(*size, max_image_pixels=max_image_pixels, max_aspect_ratio=max_aspect_ratio)
        if problem is None:
            kept[size] = n
        else:
            refused[problem] += n
    return kept, refused


def _refused_all(source: str, admission: Admission) -> str:
    return f"{source}: the server refuses every image ({admission.reasons()}); accepted: images within those limits"


def admit(
    sizes: SizeSet, *, max_image_pixels: int, max_aspect_ratio: float, pixels_var: str = "VLLM_HPU_MM_MAX_IMAGE_PIXELS"
) -> Admission:
    """The images of ``sizes`` the server accepts; the source says what was left out. :class:`ConfigError` when it
    accepts none of them."""
    kept, refused = _verdicts(sizes.counts, max_image_pixels, max_aspect_ratio)
    reasons: dict[Reason, int] = {**refused, **({"unreadable": len(sizes.unreadable)} if sizes.unreadable else {})}
    admission = Admission(sizes, reasons, max_image_pixels, max_aspect_ratio, sizes.unreadable, pixels_var)
    if not reasons:
        return admission
    if not kept:
        raise ConfigError(_refused_all(sizes.source, admission))
    return dataclasses.replace(admission, sizes=SizeSet(kept, f"{sizes.source} ({admission.summary()})"))


def admit_traffic(
    traffic: Traffic,
    *,
    max_image_pixels: int,
    max_aspect_ratio: float,
    pixels_var: str = "VLLM_HPU_MM_MAX_IMAGE_PIXELS",
) -> Traffic:
    """The requests of ``traffic`` the server serves: a request whose image it refuses is left out (text-only
    requests are kept); the source says how many. :class:`NothingServed` (exit 1) when every request carries an
    image the server refuses."""
    served = served_part(traffic, max_image_pixels=max_image_pixels, max_aspect_ratio=max_aspect_ratio,
                         pixels_var=pixels_var)  # fmt: skip
    if served is None:
        images = traffic.images()
        _, refused = _verdicts(images, max_image_pixels, max_aspect_ratio)
        admission = Admission(SizeSet(images, traffic.source), dict(refused), max_image_pixels, max_aspect_ratio,
                              pixels_var=pixels_var)  # fmt: skip
        raise NothingServed(_refused_all(traffic.source, admission))
    return served


def served_part(
    traffic: Traffic,
    *,
    max_image_pixels: int,
    max_aspect_ratio: float,
    pixels_var: str = "VLLM_HPU_MM_MAX_IMAGE_PIXELS",
) -> Traffic | None:
    """:func:`admit_traffic` for a caller that counts the refused requests itself (the replay): None, no error, when
    the server serves no request of ``traffic``."""
    images = traffic.images()
    kept, refused = _verdicts(images, max_image_pixels, max_aspect_ratio)
    if not refused:
        return traffic
    admission = Admission(SizeSet(images, traffic.source), dict(refused), max_image_pixels, max_aspect_ratio,
                          pixels_var=pixels_var)  # fmt: skip
    requests = {r: n for r, n in traffic.counts.items() if r.image is None or r.image in kept}
    if not requests:  # every request carries a refused image (text-only requests, when any, are served)
        return None
    return dataclasses.replace(traffic, counts=requests, source=f"{traffic.source} ({admission.summary()}, with "
                               "their requests)")  # fmt: skip

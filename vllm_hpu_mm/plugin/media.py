"""A header check in front of vLLM's image loader, so oversized images become HTTP 400 with a clear message.

vLLM's ``ImageMediaIO.load_bytes`` (API server, ``vllm/multimodal/media/image.py``) turns ``OSError`` and
``UnidentifiedImageError`` into ``ValueError`` (HTTP 400) but lets Pillow's ``DecompressionBombError`` through, which
the server answers with HTTP 500. We read the header first (Pillow decodes nothing at ``open``) and refuse, with an
:class:`~vllm_hpu_mm.errors.ImageError` (a ``ValueError``, so HTTP 400), any image that is empty, above
``VLLM_HPU_MM_MAX_IMAGE_PIXELS`` or beyond ``VLLM_HPU_MM_MAX_ASPECT_RATIO``, before vLLM decodes it.
"""

from __future__ import annotations

import functools
import io
import warnings
from collections.abc import Callable
from typing import Any

from vllm_hpu_mm.errors import ImageError

_MARK = "_hpu_mm_header_check"


def check_image_header(data: bytes) -> None:
    """Raise :class:`ImageError` when the encoded image's header is one we refuse; decodes no pixels."""
    from PIL import Image

    from vllm_hpu_mm.envs import get_settings
    from vllm_hpu_mm.preprocess.image import check_dimensions

    settings = get_settings()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            width, height = Image.open(io.BytesIO(data)).size
    except Image.DecompressionBombError as exc:
        raise ImageError(
            f"image refused before decoding as a decompression bomb ({exc}); accepted: at most "
            f"{settings.max_image_pixels} pixels (VLLM_HPU_MM_MAX_IMAGE_PIXELS)"
        ) from None
    except Exception:  # not an image we can read: vLLM's loader reports it in its own words
        return
    check_dimensions(
        width, height, max_image_pixels=settings.max_image_pixels, max_aspect_ratio=settings.max_aspect_ratio
    )


def install_image_header_check() -> bool:
    """Wrap ``ImageMediaIO.load_bytes`` once per process; returns False when vLLM has no such loader."""
    try:
        from vllm.multimodal.media.image import ImageMediaIO
    except ImportError:
        return False
    original: Callable[..., Any] = ImageMediaIO.load_bytes
    if getattr(original, _MARK, False):
        return True

    @functools.wraps(original)
    def load_bytes(self: Any, data: bytes) -> Any:
        check_image_header(data)
        return original(self, data)

    setattr(load_bytes, _MARK, True)
    ImageMediaIO.load_bytes = load_bytes  # type: ignore[method-assign]
    return True

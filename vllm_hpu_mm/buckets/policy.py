"""What happens to an image that needs more patches than the largest vision bucket."""

from __future__ import annotations

import enum


class OversizePolicy(str, enum.Enum):
    """Oversize-image policy (``VLLM_HPU_MM_OVERSIZE_POLICY``)."""

    #: Resize the image so it fits the largest bucket, aspect ratio kept (default: no recompilation ever).
    SHRINK = "shrink"
    #: Run the exact shape eagerly; counted and logged as a recompilation.
    EAGER = "eager"
    #: Refuse the request with a clear 4xx error.
    REJECT = "reject"

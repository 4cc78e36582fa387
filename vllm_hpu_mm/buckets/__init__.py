"""Buckets. Vision-encoder buckets: the oversize policy (``policy``), mapping and packing images into bucket passes
(``packing``), coverage of the pixel range (``coverage``), the exact planner (``planner``), where image sizes come
from (``sizes``), which images the server accepts (``admission``), a server's /metrics (``live``), a list against
sizes with the policy applied (``workload``), the plan and check jobs (``job``) and the histogram (``plot``).
vllm-gaudi's prompt and decode buckets planned from traffic: ``text``.

Nothing is imported here: import the submodules by name. The list type and the policy themselves are defined in the
standard-library-only :mod:`vllm_hpu_mm.values`, which the environment registry uses.
"""

__all__: list[str] = []

"""Make PyPI's torchvision importable beside a CPU-only torch (installed by scripts/setup-env, loaded from a .pth).

PyPI's x86-64 torchvision wheels are CUDA builds: beside torch+cpu their C++ extension fails to load and
``torchvision._meta_registrations`` then raises "operator torchvision::nms does not exist". vLLM's Qwen2.5-VL module
and transformers' Qwen2-VL processors import torchvision, but only its pure-PyTorch transforms run for images. So,
just before torchvision is first imported, we declare the two operator schemas it registers meta kernels for (no
kernels: detection ops stay unavailable, which nothing here uses). The hook costs nothing until torchvision is
imported and does nothing if the real extension loads. It imports nothing at start-up (a finder on sys.meta_path needs
only ``find_spec``): every interpreter of this environment loads it.
"""

from __future__ import annotations

import sys
from typing import Any

_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_libraries: list[Any] = []  # keep the Library objects alive, or the definitions vanish


class _Finder:
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname != "torchvision":
            return None
        sys.meta_path.remove(self)
        try:
            import torch

            if not torch.cuda.is_available():
                try:
                    torch.ops.torchvision.nms  # noqa: B018 - present when the real extension loaded
                except (AttributeError, RuntimeError):
                    lib = torch.library.Library("torchvision", "DEF")
                    for schema in _SCHEMAS:
                        lib.define(schema)
                    _libraries.append(lib)
        except Exception:  # never break interpreter start-up or the import itself
            pass
        return None  # let the normal finders import torchvision


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())

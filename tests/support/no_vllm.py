"""A pytest plugin (``-p tests.support.no_vllm``) that makes ``vllm`` unimportable, as on a machine without it.

``tests/test_markers.py`` runs the ``vllm``-marked tests under it to check that they skip instead of failing.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType


class _NoVllm(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "vllm" or fullname.startswith("vllm."):
            raise ModuleNotFoundError(f"No module named {fullname!r} (hidden by tests.support.no_vllm)", name=fullname)
        return None


if "vllm" in sys.modules:
    raise RuntimeError("tests.support.no_vllm must load before anything imports vllm")
sys.meta_path.insert(0, _NoVllm())

"""Stand-in for ``habana_frameworks.torch.hpu`` graph wrapping (tests only). Not Gaudi.

``wrap_in_hpu_graph`` replaces ``module.forward``: the first call with a given input signature (shapes and dtypes of
the tensor arguments) "captures" — runs the module and keeps its output as the graph's static output buffer; later
calls with the same signature "replay" — compute again and write into that same buffer, which is returned. Callers
that keep a previous output without copying it see it overwritten, as on a real HPU graph.
"""

from __future__ import annotations

from typing import Any

import torch

from habana_frameworks import EVENTS


def _signature(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a for a in args)


def wrap_in_hpu_graph(module: torch.nn.Module, disable_tensor_cache: bool = False, **kwargs: Any) -> torch.nn.Module:
    EVENTS.append(("wrap", {"disable_tensor_cache": disable_tensor_cache, **kwargs}))
    original = module.forward
    static: dict[tuple[Any, ...], torch.Tensor] = {}

    def forward(*args: Any) -> torch.Tensor:
        sig = _signature(args)
        out: torch.Tensor = original(*args)
        if sig not in static:
            EVENTS.append(("capture", sig))
            static[sig] = out
            return out
        EVENTS.append(("replay", sig))
        return static[sig].copy_(out)

    module.forward = forward  # type: ignore[method-assign]
    return module

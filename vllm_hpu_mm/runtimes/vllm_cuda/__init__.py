"""vLLM on NVIDIA GPUs (vLLM 0.32/0.33): what it does with your environment.

- Memory: the KV cache is ``total x gpu_memory_utilization`` less what the profiling run measured (weights,
  activation peak, non-torch memory); CUDA graphs are captured after that, from what is left. It reads none of the
  guide's ``VLLM_GRAPH_*`` variables.
- Graphs: one CUDA graph per ``cudagraph_capture_sizes`` entry, by token count (decode and mixed batches alike;
  longer prefills run piecewise), all captured into one shared pool; the vision encoder's own CUDA graphs per token
  budget (:mod:`.encoder_graphs`).
- What ``serve`` hands it: :mod:`.exports` (one ``--compilation-config``).
"""

from __future__ import annotations

import dataclasses

from vllm_hpu_mm.runtimes.base import Bucket, EngineShape, Runtime, RuntimeTraits, TextShapes

__all__ = ["TRAITS", "VllmCuda", "capture_sizes"]

TRAITS = RuntimeTraits(
    backend="cuda",
    reads=frozenset(),
    profiles_forward=True,
    fp32_softmax_default=False,
    fp32_softmax_note="vLLM's CUDA attention backends choose their own softmax precision",
    enforced_by="serve exports the graphs that fit as --compilation-config capture sizes and encoder budgets",
)


def capture_sizes(max_num_seqs: int, max_num_batched_tokens: int) -> list[int]:
    """vLLM 0.32's default ``cudagraph_capture_sizes`` for plain decoding (``VllmConfig._set_cudagraph_sizes``):
    1, 2, 4, multiples of 8 below 256, multiples of 16 from 256, up to min(2 x max_num_seqs, 512,
    max_num_batched_tokens), plus ``max_num_seqs`` when it fits."""
    top = min(2 * max_num_seqs, 512, max_num_batched_tokens)
    sizes = {n for n in (1, 2, 4) if n <= top}
    sizes |= set(range(8, min(top + 1, 256), 8)) | set(range(256, top + 1, 16))
    if max_num_seqs <= top:
        sizes.add(max_num_seqs)
    return sorted(sizes)


@dataclasses.dataclass(frozen=True)
class VllmCuda:
    name: Runtime = Runtime.VLLM_CUDA
    traits: RuntimeTraits = TRAITS

    def text_lookup(self, shape: EngineShape) -> None:
        """Not modelled: replay covers vllm-gaudi's bucket lookup only."""
        return None

    def with_text_buckets(self, prompt: tuple[Bucket, ...], decode: tuple[Bucket, ...]) -> None:
        """Its text graphs are not given as a bucket list."""
        return None

    def text_shapes(self, shape: EngineShape) -> TextShapes:
        decode = tuple((n, 0) for n in capture_sizes(shape.max_num_seqs, shape.max_num_batched_tokens))
        return TextShapes((), decode, "vLLM's CUDA graph capture sizes (by token count)")

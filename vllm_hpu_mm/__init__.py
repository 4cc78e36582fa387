"""vllm-hpu-mm: serve vision-language models (Qwen2.5-VL first) with vLLM on Intel Gaudi, NVIDIA and CPU.

The flow, one subpackage per step: ``preprocess`` (112-px image alignment) -> ``buckets`` (vision-encoder buckets
and their planner) -> ``memory`` (graph/KV memory plan) -> ``graphs`` (CPU/CUDA/HPU graph backends) -> ``plugin``
(the vLLM general plugin) -> ``cli`` (the ``vllm-hpu-mm`` command).

Importing this package is cheap and touches no device: heavy imports (torch, vLLM) happen where they are used.
"""

__all__ = ["__version__"]


__version__ = "0.1.0"

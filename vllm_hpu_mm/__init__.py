"""vllm-hpu-mm: serve vision-language models (Qwen2.5-VL first) with vLLM on Intel Gaudi, NVIDIA and CPU.

Subpackages, by what they hold: ``preprocess`` (112-px image alignment), ``buckets`` (vision-encoder buckets and
their planner), ``models`` (model and device facts), ``plan`` (the runtime-agnostic memory plan), ``runtimes`` (what
each serving runtime does with your environment, and what ``serve`` hands it), ``logs`` (reading server logs: the OOM
doctor, calibration), ``graphs`` (the bucketed vision runner), ``plugin`` (the vLLM general plugin), ``cli`` (the
``vllm-hpu-mm`` command).

Importing this package is cheap and touches no device: heavy imports (torch, vLLM) happen where they are used.
"""

__all__ = ["__version__"]


__version__ = "0.1.0"

"""vllm-hpu-mm: serve vision-language models (Qwen2.5-VL first) with vLLM on Intel Gaudi, NVIDIA and CPU.

Subpackages, by what they hold, bottom floor first (``tests/test_layout.py`` pins the order): ``traffic`` (traffic
as input), ``models`` (model and device facts), ``preprocess`` (112-px image alignment), ``buckets`` (vision buckets
and their planner; vllm-gaudi's text buckets planned from traffic), ``runtimes`` (what each serving runtime does with
your environment, and what ``serve`` hands it), ``graphs`` (the bucketed vision runner), ``replay`` (what a
configuration does with traffic), ``plugin`` (the vLLM general plugin), ``plan`` (the runtime-agnostic memory plan),
``logs`` (reading server logs: the OOM doctor, calibration, comparison), ``jobs`` (what each command runs) and
``cli`` (the ``vllm-hpu-mm`` command: parsing and printing).

Importing this package is cheap and touches no device: heavy imports (torch, vLLM) happen where they are used.
"""

__all__ = ["__version__"]


__version__ = "0.1.0"

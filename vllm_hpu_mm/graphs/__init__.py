"""Running the vision tower on bucket shapes only.

- :mod:`.base`: the contracts (``EncoderFn``, ``PassExecutor``, ``PassRecord``);
- :mod:`.runner`: ``BucketedVisionRunner`` (split, pack, pad with a dummy image, strip, reorder), ``dummy_grid``,
  ``transformers_encoder``;
- :mod:`.cpu`: ``EagerExecutor``; :mod:`.hpu`: ``HpuGraphExecutor`` and the vllm-gaudi routing (not run on Gaudi);
- on CUDA the server runs vLLM's own encoder graphs, configured from the buckets by
  :mod:`vllm_hpu_mm.runtimes.vllm_cuda.encoder_graphs` (the CUDA-graph executor measured on the H100 is research
  code in ``benchmarks/research/``);
- :mod:`.select`: ``select_executor``, ``build_runner``, ``warmup``.

Nothing here imports a device runtime at import time.
"""

__all__: list[str] = []  # import the submodules by name; none loads a device runtime

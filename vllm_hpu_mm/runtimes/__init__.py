"""The serving runtimes, one model each: "what does this runtime do with my environment?"

- :mod:`.vllm_gaudi`: vllm-gaudi, today's Gaudi runtime (its bucketing, warm-up and memory split, modelled at a
  commit and checked against its own code by ``benchmarks/agreement/vllm_gaudi_bucket_counts.py``);
- :mod:`.vllm_fork`: HabanaAI/vllm-fork, the runtime the Gaudi guide describes;
- :mod:`.vllm_cuda`: vLLM on NVIDIA GPUs; :mod:`.vllm_cpu`: vLLM's CPU build.

Each runtime's ``__init__`` holds its traits, the graphs it warms and its registry ``ENTRY``; its ``exports``
module what ``serve`` hands it so that it respects the plan. :mod:`.base` holds the shared types (with
:class:`~.base.RuntimeEntry`), :mod:`.registry` the runtimes by name (one line each) and which one is installed here,
:mod:`.arithmetic` the memory arithmetic several runtimes share, :mod:`.exporting` the pieces every exporter shares
and :mod:`.exports` the dispatch from a plan to its runtime's exporter.

Nothing here imports a runtime, torch or a device stack.
"""

__all__: list[str] = []  # import the submodules by name

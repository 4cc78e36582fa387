"""The device-memory plan, runtime-agnostic: its arguments (:mod:`.args`, one declaration for ``memory plan`` and
``serve``), what vLLM derives from them (:mod:`.derived`), inputs (:mod:`.inputs`, :mod:`.validate`), cost models
(:mod:`.costs`, :mod:`.vision_cost`, :mod:`.text_cost`), rules (:mod:`.rules`, one pure function each), the text
graphs that fit (:mod:`.text_graphs`), findings and their fixes (:mod:`.findings`, :mod:`.fixes`), the plan itself
(:mod:`.planner`), the bucket list planned with the vision pool (:mod:`.bucket_fit`, :mod:`.bucket_choice`), the
text buckets chosen from traffic (:mod:`.text_choice`), the measured-cost profile it reads (:mod:`.profile`), the
steps the jobs compose (:mod:`.pipeline`) and its rendering (:mod:`.render`).

The plan reads a runtime only through its model (``vllm_hpu_mm.runtimes.base.RuntimeModel``): its traits and the
graphs it warms.
"""

__all__: list[str] = []  # import the submodules by name

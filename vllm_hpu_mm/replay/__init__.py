"""Replay: what a configuration would do with your traffic. The engine's schedule under continuous batching
(:mod:`.scheduler`), a runtime's bucket lookup over it (:mod:`.run`: compiles at run time, padding, graphs warmed),
the schedules a traffic produces and what the text planner (:mod:`vllm_hpu_mm.buckets.text`) reads from them
(:mod:`.schedules`), the report (:mod:`.report`) and the plot (:mod:`.plot`). ``vllm-hpu-mm buckets replay`` and
``serve``'s bucket file use it.

Nothing is imported here: import the submodules by name.
"""

__all__: list[str] = []

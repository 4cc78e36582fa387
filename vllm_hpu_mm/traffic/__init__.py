"""Traffic as input: the requests a server gets, as counts over distinct requests (:mod:`.requests`), read from the
request-level CSV (:mod:`.csvfile`), the embedded default traffic (:mod:`.default`) or a running server's
``/metrics`` (:mod:`.metrics`). The planners (vision and text buckets) and the replay read it.

Nothing is imported here: import the submodules by name.
"""

__all__: list[str] = []

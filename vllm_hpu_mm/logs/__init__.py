"""Reading server logs: streaming and decoding a log file (:mod:`.reading`), every pattern once (:mod:`.patterns`),
the OOM doctor (:mod:`.doctor`), and calibration of graph costs from a warm-up log (:mod:`.calibrate`) into a
profile file (:mod:`.profile`)."""

__all__: list[str] = []  # import the submodules by name

"""Facts about what is served and where: a model's dimensions and the bytes they cost (:mod:`.dims`), reading a
Hugging Face ``config.json`` (:mod:`.config_json`), the embedded public checkpoints (:mod:`.catalog`), finding a
model's config (:mod:`.lookup`: local folder, Hugging Face cache, catalog), and device totals and readers
(:mod:`.devices`)."""

__all__: list[str] = []  # import the submodules by name

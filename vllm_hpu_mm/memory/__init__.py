"""Device-memory planning: model sizes, devices, the plan and its rules, the OOM doctor."""

__all__: list[str] = []  # import the submodules by name

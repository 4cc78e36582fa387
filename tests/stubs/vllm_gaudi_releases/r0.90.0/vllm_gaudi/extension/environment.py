"""Stand-in (our own code): the values the runner hands the extension."""

_VLLM_VALUES: dict[str, object] = {}

"""Stand-in (our own code): the extension's config, read from the environment when finalized."""

from __future__ import annotations

import os
import types

_CONFIG: types.SimpleNamespace | None = None


def clear_config() -> None:
    global _CONFIG
    _CONFIG = None


def finalize_config() -> None:
    global _CONFIG
    bs_max = os.environ.get("VLLM_PROMPT_BS_BUCKET_MAX")
    _CONFIG = types.SimpleNamespace(
        use_bucketing=os.environ.get("VLLM_ENABLE_BUCKETING", "true").lower() in ("1", "true"),
        merged_prefill=False,
        VLLM_PROMPT_BS_BUCKET_MAX=int(bs_max) if bs_max is not None else None,
    )


def get_config() -> types.SimpleNamespace:
    assert _CONFIG is not None, "finalize_config() first"
    return _CONFIG

"""Our vision buckets as vLLM's own encoder CUDA-graph configuration (vLLM 0.32), not a second graph system.

vLLM captures the vision encoder per *token budget* when ``CompilationConfig.cudagraph_mm_encoder`` is on
(``vllm/v1/worker/encoder_cudagraph.py``): images are greedy-packed into the smallest budget that holds them and
items above the largest budget run eagerly. A budget counts merged tokens (``patches / merge_size**2``), so bucket
``b`` patches is budget ``b / 4``. The manager also needs the fixed number of items per captured batch
(``encoder_cudagraph_max_vision_items_per_batch``), which it requires to be at most the smallest budget.

``--enforce-eager`` turns this off: it sets ``cudagraph_mode`` to NONE and vLLM then skips every capture, encoder
graphs included (``GPUModelRunner.capture_model``); the buckets still shape passes through our eager runner.
"""

from __future__ import annotations

from typing import Any

from vllm_hpu_mm.errors import BucketError, ConfigError


def token_budgets(buckets: tuple[int, ...], *, merge_size: int = 2) -> list[int]:
    """Bucket patch counts -> vLLM encoder token budgets (merged tokens), ascending."""
    unit = merge_size * merge_size
    bad = [b for b in buckets if b <= 0 or b % unit]
    if bad:
        raise BucketError(f"buckets {bad} are not positive multiples of merge_size**2 = {unit} patches")
    return sorted(b // unit for b in buckets)


def encoder_cudagraph_config(
    buckets: tuple[int, ...] | None,
    *,
    max_items: int | None = None,
    max_frames: int | None = None,
    merge_size: int = 2,
) -> dict[str, Any]:
    """``CompilationConfig`` fields that make vLLM capture one encoder graph per bucket.

    ``max_items`` (items per captured batch) defaults to vLLM's own rule for auto-inferred batches,
    ``min(largest // smallest, smallest)`` budgets; it must be at most the smallest budget. ``max_frames`` is left to
    vLLM (frames of the model's longest video times ``max_items``) unless given. ``buckets`` None (bucketing
    disabled) turns encoder graphs off.
    """
    if buckets is None:
        return {"cudagraph_mm_encoder": False}
    budgets = token_budgets(buckets, merge_size=merge_size)
    smallest, largest = budgets[0], budgets[-1]
    items = min(largest // smallest, smallest) if max_items is None else max_items
    if not 1 <= items <= smallest:
        raise ConfigError(
            f"max_items={items} vision items per encoder graph is invalid; accepted: 1 to the smallest token budget "
            f"({smallest} = smallest bucket {smallest * merge_size * merge_size} / {merge_size * merge_size})"
        )
    config: dict[str, Any] = {
        "cudagraph_mm_encoder": True,
        "encoder_cudagraph_token_budgets": budgets,
        "encoder_cudagraph_max_vision_items_per_batch": items,
    }
    if max_frames is not None:
        if max_frames < 0:
            raise ConfigError(f"max_frames={max_frames} is invalid; accepted: an integer >= 0 (0 = images only)")
        config["encoder_cudagraph_max_frames_per_batch"] = max_frames
    return config

"""vllm-hpu-extension's exponential strategy as vllm-fork v0.9.0.1+Gaudi-1.22.0 runs it (extension @8211e0b,
``bucketing/exponential.py``; our own code, from our reading). The fork made it selectable in d6718b21c (#642,
2025-04-11); at 1.22 it is the default (``VLLM_EXPONENTIAL_BUCKETING`` unset).

Its ranges ignore the ``VLLM_*_BUCKET_*`` variables (it warns that they are overwritten): each dimension gets
ceil(log2(max)) + 1 values spaced geometrically from min to max and rounded up to the step, a value taken twice
moved to the nearest free multiple of the step. A prompt maximum of 8192 or more spaces half of them geometrically
up to max / count and the rest linearly up to max. Prompt buckets over the token budget or max_model_len are
dropped; decode buckets are every (batch, blocks) pair.

The 1.21 lines (fork @0275ce4c2 with extension @2b4ba56, fork @3bcdfd4af with extension @29bc7a4) run an earlier form
of it, opt-in (``VLLM_EXPONENTIAL_BUCKETING`` == "true"): min, step and max fixed by the engine limits (batch 1, 1,
max_num_seqs; query block, block, max_model_len; decode blocks block, block, the KV blocks), each count
``VLLM_<DIM>_BUCKET_LIMIT`` (default ceil(log2(max)) + 1, the decode blocks' max_num_seqs x max_model_len // block),
no long-context spacing, and the last value max itself only at @29bc7a4 under contiguous PA (:func:`buckets_121`).
"""

from __future__ import annotations

import math

__all__ = ["LIMITED", "buckets_121", "decode_buckets", "limits_121", "prompt_buckets", "spaced_range"]


def _limit(most: int) -> int:
    return math.ceil(math.log2(most)) + 1


def spaced_range(bmin: int, bstep: int, bmax: int, count: int, *, long_context: bool, contiguous_pa: bool) -> list[int]:
    """``warmup_range_with_limit(fill=True)``: float64 powers as numpy's ``float_power`` (C ``pow``) computes them."""
    if count == 1:
        return [bmax]
    steps = set(range(bmin, bmax + 1, bstep))
    out: set[int] = set()
    geometric = count // 2 if long_context else count
    top = bmax / count if long_context else bmax
    for i in range(geometric):
        unpadded = bmin * math.pow(top / bmin, (1.0 / float(geometric - 1)) * i)
        # the last of the full count is max itself under contiguous PA (never reached in long-context spacing)
        value = bmax if i == count - 1 and contiguous_pa else math.ceil(unpadded / bstep) * bstep
        if value in out:
            free = steps.difference(out)
            if not free:
                break
            out.add(int(min(free, key=lambda x: abs(x - unpadded))))
        else:
            out.add(int(value))
    if long_context:
        linear = count - geometric
        stride = (bmax - top) / linear
        for i in range(1, linear + 1):
            out.add(math.ceil((top + i * stride) / bstep) * bstep)
    return sorted(out)


def prompt_buckets(
    max_num_prefill_seqs: int, block_size: int, max_num_batched_tokens: int, max_model_len: int, contiguous_pa: bool
) -> list[tuple[int, int, int]]:
    bs = spaced_range(1, 2, max_num_prefill_seqs, _limit(max_num_prefill_seqs), long_context=False,
                      contiguous_pa=contiguous_pa)  # fmt: skip
    seq = spaced_range(block_size, block_size, max_model_len, _limit(max_model_len),
                       long_context=max_model_len >= 8192, contiguous_pa=contiguous_pa)  # fmt: skip
    every = [(b, q, 0) for b in bs for q in seq]
    kept = [t for t in every if t[0] * t[1] <= max_num_batched_tokens and t[1] <= max_model_len]
    return sorted(kept or every)


def decode_buckets(max_num_seqs: int, block_size: int, num_blocks: int, contiguous_pa: bool) -> list[tuple[int, int]]:
    bs = spaced_range(1, 2, max_num_seqs, _limit(max_num_seqs), long_context=False, contiguous_pa=contiguous_pa)
    blocks = spaced_range(block_size, block_size, num_blocks, _limit(num_blocks), long_context=False,
                          contiguous_pa=contiguous_pa)  # fmt: skip
    return sorted((b, n) for b in bs for n in blocks)


#: The dimensions whose bucket count the 1.21 lines read from ``VLLM_<DIM>_BUCKET_LIMIT`` under this strategy.
LIMITED = ("PROMPT_BS", "DECODE_BS", "PROMPT_SEQ", "DECODE_BLOCK")


def limits_121(max_num_seqs: int, block_size: int, max_model_len: int) -> dict[str, int]:
    """Each dimension's default count (``HPUExponentialBucketingContext._setup_buckets``, ``bucketing/exponential.py``
    :53-82 @2b4ba56 and @29bc7a4; the runner passes max_num_prefill_seqs = max_num_seqs and max_model_len,
    ``hpu_model_runner.py:765-770`` @3bcdfd4af, ``:682-687`` @0275ce4c2): the decode blocks' from the worst case
    max(block, max_num_seqs x max_model_len // block), not from the KV blocks that become their max."""
    blocks = max(block_size, max_num_seqs * max_model_len // block_size)
    return {"PROMPT_BS": _limit(max_num_seqs), "DECODE_BS": _limit(max_num_seqs),
            "PROMPT_SEQ": _limit(max_model_len), "DECODE_BLOCK": _limit(blocks)}  # fmt: skip


def buckets_121(
    max_num_seqs: int,
    block_size: int,
    max_num_batched_tokens: int,
    max_model_len: int,
    num_blocks: int,
    limits: dict[str, int],
    last_is_max: bool,
) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]]:
    """(prompt, decode) of the 1.21 lines. ``limits``: each dimension's count, >= 1 (the extension asserts it,
    ``warmup_range_with_limit`` :374 @29bc7a4, :369 @2b4ba56); ``last_is_max``: @29bc7a4 with VLLM_CONTIGUOUS_PA
    "true" (:381-383; @2b4ba56 always rounds the last up to the step). Prompt (``generate_prompt_buckets`` :227-272
    @29bc7a4, :222-267 @2b4ba56): the product, those over the token budget or max_model_len dropped unless that drops
    all. Decode (``generate_decode_buckets`` :275-309, :270-304): the block range's max becomes the KV blocks the
    runner passes (``warmup_model``, ``hpu_model_runner.py:2326-2327`` @3bcdfd4af, ``:2246-2247`` @0275ce4c2), its
    count kept; every (batch, blocks) pair (``skip_invalid`` is False there)."""

    def spaced(bmin: int, bstep: int, bmax: int, dim: str) -> list[int]:
        return spaced_range(bmin, bstep, bmax, limits[dim], long_context=False, contiguous_pa=last_is_max)

    prompt_bs = spaced(1, 1, max_num_seqs, "PROMPT_BS")
    seq = spaced(block_size, block_size, max_model_len, "PROMPT_SEQ")
    every = [(b, q, 0) for b in prompt_bs for q in seq]
    kept = [t for t in every if t[0] * t[1] <= max_num_batched_tokens and t[1] <= max_model_len]
    decode_bs = spaced(1, 1, max_num_seqs, "DECODE_BS")
    blocks = spaced(block_size, block_size, num_blocks, "DECODE_BLOCK")
    return sorted(kept or every), sorted((b, n) for b in decode_bs for n in blocks)

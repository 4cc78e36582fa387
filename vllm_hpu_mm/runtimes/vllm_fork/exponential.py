"""vllm-hpu-extension's exponential strategy as vllm-fork v0.9.0.1+Gaudi-1.22.0 runs it (extension @8211e0b,
``bucketing/exponential.py``; our own code, from our reading). The fork made it selectable in d6718b21c (#642,
2025-04-11); at 1.22 it is the default (``VLLM_EXPONENTIAL_BUCKETING`` unset).

Its ranges ignore the ``VLLM_*_BUCKET_*`` variables (it warns that they are overwritten): each dimension gets
ceil(log2(max)) + 1 values spaced geometrically from min to max and rounded up to the step, a value taken twice
moved to the nearest free multiple of the step. A prompt maximum of 8192 or more spaces half of them geometrically
up to max / count and the rest linearly up to max. Prompt buckets over the token budget or max_model_len are
dropped; decode buckets are every (batch, blocks) pair.
"""

from __future__ import annotations

import math

__all__ = ["decode_buckets", "prompt_buckets", "spaced_range"]


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

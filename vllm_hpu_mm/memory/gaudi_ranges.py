"""The three bucketing strategies' value ranges, as vllm-gaudi main @ 091bbadd computes them (our own code).

``exp_range``: ``extension/bucketing/exponential.py`` ``warmup_range_with_limit``; ``lin_range``:
``extension/bucketing/linear.py`` ``warmup_range``; ``pad_range``: ``extension/bucketing/padding_aware.py``
``warmup_range_with_limits``. Where vllm-gaudi asserts, loops forever or divides by zero, these raise
:class:`ConfigError` instead.
"""

from __future__ import annotations

import math

from vllm_hpu_mm.errors import ConfigError

__all__ = ["exp_range", "lin_range", "pad_range"]


def exp_range(bmin: int, bstep: int, bmax: int, count: int, contiguous_pa: bool) -> list[int]:
    # exponential.py warmup_range_with_limit @ 091bbadd: `count` values spaced geometrically from bmin (or from
    # bstep when bmin is 0 or 1, which is then added back) to bmax, each rounded up to a multiple of bstep.
    edge = bmin if bmin in (0, 1) else None
    if edge is not None:
        bmin = bstep
    if count <= 0:
        raise ConfigError(f"exponential bucket count {count} is invalid; vllm-gaudi asserts a positive count")
    if count == 1:
        return [bmax]
    values: set[int] = set()
    for i in range(count):
        if i == count - 1 and contiguous_pa:
            values.add(bmax)
        else:
            scaled = bmin * math.pow(bmax / bmin, (1.0 / float(count - 1)) * i)
            values.add(math.ceil(scaled / bstep) * bstep)
    if edge is not None:
        values.add(edge)
    out = sorted(values)
    if out[-1] > bmax:
        out[-1] = bmax
    return out


def lin_range(bmin: int, bstep: int, bmax: int, what: str) -> list[int]:
    # linear.py warmup_range @ 091bbadd: doubling from bmin while below bstep, then every bstep up to bmax;
    # 0 as bmin means "start at bstep and add a 0 bucket".
    if bmin > bmax:
        raise ConfigError(f"{what}: min {bmin} > max {bmax}; vllm-gaudi asserts min <= max (linear strategy)")
    add_zero = bmin == 0
    if add_zero:
        if bmax == 0:
            return [0]
        bmin = bstep
    if bstep <= 0 or bmin < 0:
        raise ConfigError(f"{what}: step {bstep} / min {bmin} is invalid; accepted: step >= 1, min >= 0")
    ramp: list[int] = []
    value = bmin
    while value < bstep and value <= bmax:
        ramp.append(value)
        value *= 2
        if value == 0:  # bmin 0 cannot reach here; guard against a loop anyway
            break
    out = [b for b in ramp + list(range(bstep, bmax + 1, bstep)) if b >= bmin]
    if add_zero:
        out.append(0)
    return out


def pad_range(bmin: int, bstep: int, bmax: int, pad_max: int, pad_percent: int, what: str) -> list[int]:
    # padding_aware.py warmup_range_with_limits @ 091bbadd: doubling up to bstep, then keep a multiple of bstep
    # only where skipping it would exceed pad_percent or pad_max of padding (or it is a multiple of pad_max).
    if pad_max == 0:
        pad_max = bmax
    if bmin > bmax:
        raise ConfigError(f"{what}: min {bmin} > max {bmax}; vllm-gaudi asserts min <= max (padding-aware)")
    if bstep <= 0:
        raise ConfigError(f"{what}: step {bstep} is invalid; accepted: step >= 1 (vllm-gaudi asserts it)")
    if not 0 <= pad_percent <= 50:
        raise ConfigError(f"{what}: pad_percent {pad_percent} is invalid; accepted: 0..50 (vllm-gaudi asserts it)")
    if bmin < 0:
        raise ConfigError(f"{what}: min {bmin} is invalid; accepted: min >= 0 (vllm-gaudi would never finish)")
    out = [bmin]
    current = bmin
    while current <= bmax:
        last = out[-1]
        if current <= bstep:
            nxt = last * 2 or 1
            if nxt <= bmax:
                out.append(nxt)
        else:
            nxt = current + bstep
            padding = nxt - last - 1
            if pad_max == 0:
                raise ConfigError(f"{what}: pad_max 0 with max 0 divides by zero in vllm-gaudi")
            keep = padding / nxt > pad_percent / 100.0 or padding > pad_max or current % pad_max == 0
            if keep and current != last:
                out.append(current)
        current = nxt
    if out[-1] != bmax:
        out.append(bmax)
    return out

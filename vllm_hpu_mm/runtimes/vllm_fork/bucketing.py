"""vllm-fork's text buckets for a release line, configured by the user's variables as that release reads them.

What each line reads (all through Python ``int()``; a bad token stops the fork at start-up, so it is refused here):
``VLLM_{PROMPT,DECODE}_BS_BUCKET_{MIN,STEP,MAX}``, ``VLLM_PROMPT_SEQ_BUCKET_*``, and decode by sequence length
(``VLLM_DECODE_SEQ_BUCKET_*``, 1.17) or by KV blocks (``VLLM_DECODE_BLOCK_BUCKET_*``, 1.18 on). 1.21.x reads
``VLLM_EXPONENTIAL_BUCKETING`` == "true" (opt-in exponential, :func:`.exponential.buckets_121`: it reads only
``VLLM_{PROMPT_BS,PROMPT_SEQ,DECODE_BS,DECODE_BLOCK}_BUCKET_LIMIT``) and ``VLLM_CONTIGUOUS_PA`` (default "true");
1.22 parses every ``VLLM_*_BUCKET_{MIN,STEP,MAX,LIMIT}`` at start-up, defaults to exponential
(``VLLM_EXPONENTIAL_BUCKETING`` false picks linear) and drops prompt lengths at or above ``VLLM_FUSEDSDPA_SLIDE_THLD``
(8192) not a multiple of ``PT_HPU_SDPA_BC_FACTOR`` (1024) when ``PT_HPU_SDPA_QKV_SLICE_MODE_FWD`` is on. Prefix
caching (3-D prompt buckets) and merged prefill are not modelled: the fork's V0 engine runs without them by default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes.vllm_fork import exponential
from vllm_hpu_mm.runtimes.vllm_fork.linear import (
    Range,
    decode_by_blocks,
    linear_buckets,
    prompt_product,
    read_bucket_settings,
    warmup_range,
)
from vllm_hpu_mm.runtimes.vllm_fork.releases import NEWEST, Release

__all__ = ["ForkBucketing", "boolean_readings", "config_from_env", "generate", "not_read", "overwritten", "strategy_of"]

Prompt = tuple[tuple[int, int, int], ...]
Decode = tuple[tuple[int, int], ...]
#: The extension's ``boolean`` (1.22 ``config.py``): anything else is false.
_TRUE = ("true", "t", "1", "yes", "y", "on")
_PHASE_DIMS = ("PROMPT_BS", "PROMPT_SEQ", "DECODE_BS", "DECODE_BLOCK", "DECODE_SEQ")


@dataclasses.dataclass(frozen=True)
class ForkBucketing:
    """A release line and the bucket variables the user set (validated as that release reads them)."""

    release: Release = NEWEST
    env: tuple[tuple[str, str], ...] = ()
    #: ``VLLM_SKIP_WARMUP`` as the line reads it (the fork's traits say how).
    warmup_skipped: bool = False

    def get(self, name: str) -> str | None:
        return dict(self.env).get(name)


def _int_of(name: str, raw: str, line: str) -> None:
    try:
        int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is invalid; accepted: an integer as Python int() reads it (vllm-fork {line} "
                          "fails at start-up)") from None  # fmt: skip


def boolean_readings(release: Release) -> tuple[tuple[str, frozenset[str], str], ...]:
    """How the line reads its bucketing booleans: (variable, the values it reads as true after ``.lower()``, where).
    ``VLLM_EXPONENTIAL_BUCKETING``: 1.21.x only 'true' (``get_bucketing_context``, ``bucketing/common.py:42-43``
    @2b4ba56 and @29bc7a4), 1.22 the extension's ``boolean`` (``features.py:16``, ``config.py:122-124`` @8211e0b).
    ``VLLM_CONTIGUOUS_PA``: 1.19 - 1.21.0 only 'true' (the runner, ``hpu_model_runner.py:569`` @61f141c62, ``:664``
    @6af2f6752, ``:696`` @0275ce4c2), 1.22 the extension's ``boolean``; 1.21.2 - 1.21.3 read it twice (the extension's
    decode buckets only 'true', the runner 'true' or '1'), so no single reading is listed there."""
    gen, ext, commit = release.generation, release.extension, release.commit
    out = []
    if gen in ("ext1210", "ext1212"):
        out.append(("VLLM_EXPONENTIAL_BUCKETING", frozenset({"true"}),
                    f"vllm_hpu_extension/bucketing/common.py:42-43 @{ext}: only 'true'"))  # fmt: skip
    if gen in ("ext119", "ext1210"):
        out.append(
            ("VLLM_CONTIGUOUS_PA", frozenset({"true"}), f"vllm/worker/hpu_model_runner.py @{commit}: only 'true'")
        )
    if gen == "ext122":
        out += [(name, frozenset(_TRUE), f"vllm_hpu_extension/config.py boolean @{ext}")
                for name in ("VLLM_EXPONENTIAL_BUCKETING", "VLLM_CONTIGUOUS_PA")]  # fmt: skip
    return tuple(out)


def _reads_true(release: Release, name: str, raw: str) -> bool:
    return any(raw.lower() in true for n, true, _ in boolean_readings(release) if n == name)


def not_read(release: Release, exp_picked: bool = False) -> tuple[tuple[str, str], ...]:
    """The bucketing variables the line does not read, with where that shows: ``VLLM_EXPONENTIAL_BUCKETING`` before
    1.21.0 (no exponential strategy: ``git grep`` at 1e0e492e1 - 6af2f6752 and extensions 4ff86cf / d4b0d38),
    ``VLLM_CONTIGUOUS_PA`` at 1.17 / 1.18, decode by blocks at 1.17 and by sequence length from 1.18 (1.22 declares
    no ``VLLM_DECODE_SEQ_BUCKET_*``, ``features.py:17-33`` @8211e0b), and every ``*_LIMIT`` before 1.22 but those
    1.21's exponential strategy takes. ``exp_picked``: 1.21.x with that strategy picked, which reads the four
    ``*_LIMIT`` of :data:`.exponential.LIMITED` and none of their ``MIN`` / ``STEP`` / ``MAX`` (its
    ``read_bucket_settings`` passes them as fixed defaults, ``bucketing/exponential.py:191-196`` @29bc7a4, ``:187-192``
    @2b4ba56)."""
    gen = release.generation
    exp121 = exp_picked and gen in ("ext1210", "ext1212")
    where = f"vllm-fork {release.name} (@{release.commit}" + (f", extension @{release.extension})"
                                                              if release.extension else ")")  # fmt: skip
    out = []
    if gen in ("intree2024", "intree118", "ext119"):
        out.append(("VLLM_EXPONENTIAL_BUCKETING", f"no exponential bucketing in {where}; 1.21.0 added it"))
    if gen in ("intree2024", "intree118"):
        out.append(("VLLM_CONTIGUOUS_PA", f"no contiguous PA in {where}; 1.19 added it"))
    dims = ("DECODE_BLOCK",) if gen == "intree2024" else ("DECODE_SEQ",)
    out += [(f"VLLM_{d}_BUCKET_{p}", f"{where} decodes by {'sequence length' if gen == 'intree2024' else 'KV blocks'}")
            for d in dims for p in ("MIN", "STEP", "MAX")]  # fmt: skip
    if gen != "ext122":
        why = "its linear buckets take no limit in {where}; {then}"
        then = "1.22 reads one" if gen not in ("ext1210", "ext1212") else \
            "its exponential strategy (VLLM_EXPONENTIAL_BUCKETING=true) reads one"  # fmt: skip
        out += [(f"VLLM_{d}_BUCKET_LIMIT", why.format(where=where, then=then)) for d in _PHASE_DIMS
                if d not in dims and not (exp121 and d in exponential.LIMITED)]  # fmt: skip
    if exp121:
        out += [(f"VLLM_{d}_BUCKET_{p}", f"the exponential strategy of {where} fixes its ranges from the engine "
                 "limits and reads only the *_LIMIT counts") for d in exponential.LIMITED
                for p in ("MIN", "STEP", "MAX")]  # fmt: skip
    return tuple(out)


def overwritten(cfg: ForkBucketing) -> tuple[str, ...]:
    """The user's bucket ranges that the line's exponential strategy replaces by its own, one sentence (1.22:
    ``ExponentialBucketingStrategy.check_for_user_flags`` warns "will be overwritten" and builds its ranges from the
    engine limits alone, ``bucketing/exponential.py:15-41`` @8211e0b); () under linear."""
    if cfg.release.generation != "ext122" or strategy_of(cfg) != "exp":
        return ()
    dims = ("PROMPT_BS", "PROMPT_SEQ", "DECODE_BS", "DECODE_BLOCK")
    mine = [f"{n}={v}" for n, v in cfg.env if any(n == f"VLLM_{d}_BUCKET_{p}" for d in dims
                                                   for p in ("MIN", "STEP", "MAX", "LIMIT"))]  # fmt: skip
    if not mine:
        return ()
    how = "VLLM_EXPONENTIAL_BUCKETING unset" if cfg.get("VLLM_EXPONENTIAL_BUCKETING") is None else \
        f"VLLM_EXPONENTIAL_BUCKETING={cfg.get('VLLM_EXPONENTIAL_BUCKETING')}"  # fmt: skip
    return (
        f"your {', '.join(mine)}: overwritten by vllm-fork {cfg.release.name}'s exponential bucketing ({how}), "
        "which builds its buckets from the engine limits alone (vllm_hpu_extension/bucketing/exponential.py "
        f"check_for_user_flags @{cfg.release.extension}); set VLLM_EXPONENTIAL_BUCKETING=false for linear "
        "buckets that read them",
    )


def strategy_of(cfg: ForkBucketing) -> str:
    """exp or lin, as the line picks it (:func:`boolean_readings`; 1.22 defaults to exp)."""
    raw = cfg.get("VLLM_EXPONENTIAL_BUCKETING")
    if cfg.release.generation == "ext122" and raw is None:
        return "exp"
    return "exp" if raw is not None and _reads_true(cfg.release, "VLLM_EXPONENTIAL_BUCKETING", raw) else "lin"


def config_from_env(env: Mapping[str, str], release: Release = NEWEST, warmup_skipped: bool = False) -> ForkBucketing:
    """The variables the line reads, checked as it checks them; ConfigError (one line) where it would fail."""
    names = {f"VLLM_{pd}_BUCKET_{p}" for pd in _PHASE_DIMS for p in ("MIN", "STEP", "MAX", "LIMIT")}
    names |= {"VLLM_EXPONENTIAL_BUCKETING", "VLLM_CONTIGUOUS_PA", "PT_HPU_SDPA_QKV_SLICE_MODE_FWD",
              "PT_HPU_SDPA_BC_FACTOR", "VLLM_FUSEDSDPA_SLIDE_THLD"}  # fmt: skip
    cfg = ForkBucketing(release, tuple(sorted((k, v) for k, v in env.items() if k in names)), warmup_skipped)
    gen = release.generation
    ints = {"VLLM_FUSEDSDPA_SLIDE_THLD", "PT_HPU_SDPA_BC_FACTOR"} if gen == "ext122" else set()
    if _exp121(cfg):  # only the counts are read (not_read); each through int(), then asserted > 0
        for name in (f"VLLM_{d}_BUCKET_LIMIT" for d in exponential.LIMITED):
            raw = cfg.get(name)
            if raw is not None:
                _int_of(name, raw, release.name)
                if int(raw) < 1:
                    raise ConfigError(f"{name}={raw!r}: no buckets; accepted: a count >= 1 (vllm-fork "
                                      f"{release.name}'s exponential strategy asserts 'num_buckets must be a positive "
                                      f"integer', vllm_hpu_extension/bucketing/exponential.py "
                                      f"warmup_range_with_limit @{release.extension})")  # fmt: skip
        return cfg
    for name, raw in cfg.env:
        param = name.rsplit("_", 1)[-1]
        if name.startswith("VLLM_") and name.endswith(("_MIN", "_STEP", "_MAX", "_LIMIT")):
            dim_ok = ("_SEQ_BUCKET" not in name or name.startswith("VLLM_PROMPT")) if gen != "intree2024" else \
                "_BLOCK_BUCKET" not in name  # fmt: skip
            if dim_ok and (param != "LIMIT" or gen == "ext122"):
                ints.add(name)
        if name in ints:
            _int_of(name, raw, release.name)
    return cfg


def _exp121(cfg: ForkBucketing) -> bool:
    """A 1.21.x line with its opt-in exponential strategy picked."""
    return cfg.release.generation in ("ext1210", "ext1212") and strategy_of(cfg) == "exp"


def _buckets_121(cfg: ForkBucketing, s: EngineShape) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]]:
    """1.21.x exponential: each count from ``VLLM_<DIM>_BUCKET_LIMIT`` or its default (``read_bucket_settings``,
    ``bucketing/exponential.py:196`` @29bc7a4, ``:192`` @2b4ba56); the last value is the max only at @29bc7a4 with
    ``VLLM_CONTIGUOUS_PA`` "true" (read there as the extension reads it, default "true")."""
    limits = exponential.limits_121(s.max_num_seqs, s.block_size, s.max_model_len)
    for dim in exponential.LIMITED:
        raw = cfg.get(f"VLLM_{dim}_BUCKET_LIMIT")
        if raw is not None:
            limits[dim] = int(raw)
    last_is_max = cfg.release.generation == "ext1212" and _contiguous(cfg)
    return exponential.buckets_121(s.max_num_seqs, s.block_size, s.max_num_batched_tokens, s.max_model_len,
                                   s.num_kv_blocks, limits, last_is_max)  # fmt: skip


def _range(cfg: ForkBucketing, phase: str, dim: str, defaults: Range) -> Range:
    return read_bucket_settings(dict(cfg.env), phase, dim, defaults, cfg.release.name)


def _checked(cfg: ForkBucketing, config: Range, prefix: str) -> list[int]:
    """The range's values, checked where the line checks them: a line that builds its ranges only at warm-up
    (:attr:`.releases.Release.ranges_at_warmup_only`) never builds, so never refuses, one under a skipped warm-up
    (none then: it warms nothing)."""
    try:
        return warmup_range(config, prefix=prefix)
    except ConfigError:
        if cfg.warmup_skipped and cfg.release.ranges_at_warmup_only:
            return []
        raise


def _lin(cfg: ForkBucketing, phase: str, dim: str, defaults: Range) -> list[int]:
    config = _range(cfg, phase, dim, defaults)
    return _checked(cfg, config, f"VLLM_{phase}_{dim}_BUCKET".upper())


def _contiguous(cfg: ForkBucketing) -> bool:
    raw = cfg.get("VLLM_CONTIGUOUS_PA")
    if cfg.release.generation == "ext122":  # a feature value: the extension's boolean, default on (no prefix caching)
        return raw is None or raw.lower() in _TRUE
    return (raw if raw is not None else "true").lower() == "true"


def _extension_linear(cfg: ForkBucketing, s: EngineShape) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    gen, seqs, block = cfg.release.generation, s.max_num_seqs, s.block_size
    prompt_max = 1024 if gen == "ext119" else s.max_model_len
    prompt = prompt_product(
        _lin(cfg, "prompt", "bs", (1, 32, seqs)),
        _lin(cfg, "prompt", "seq", (block, block, prompt_max)),
        s.max_num_batched_tokens,
    )
    bs = _lin(cfg, "decode", "bs", (1, 32, seqs))
    worst = (
        s.num_kv_blocks
        if gen == "ext122"
        else max(block, seqs * (2048 if gen == "ext119" else s.max_model_len) // block)
    )
    block_cfg = _range(cfg, "decode", "block", (block, block, worst))
    clamp = gen in ("ext1212", "ext122") and cfg.get("VLLM_DECODE_BLOCK_BUCKET_MAX") is None and _contiguous(cfg)
    if clamp:
        block_cfg = (block_cfg[0], block_cfg[1], s.num_kv_blocks)
    blocks = _checked(cfg, block_cfg, "VLLM_DECODE_BLOCK_BUCKET")
    if clamp and s.num_kv_blocks not in blocks:
        blocks.append(s.num_kv_blocks)
    decode = decode_by_blocks(bs, blocks, s.num_kv_blocks, skip_below_batch=gen in ("ext1212", "ext122"),
                              cap_inclusive=True)  # fmt: skip
    return prompt, decode


def _in_tree_118(cfg: ForkBucketing, s: EngineShape) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    seqs, block = s.max_num_seqs, s.block_size
    prompt = prompt_product(_lin(cfg, "prompt", "bs", (1, min(seqs, 32), min(seqs, 64))),
                            _lin(cfg, "prompt", "seq", (block, block, 1024)), s.max_num_batched_tokens)  # fmt: skip
    bs = _lin(cfg, "decode", "bs", (min(seqs, 32), min(seqs, 32), seqs))
    block_cfg = _range(cfg, "decode", "block", (128, 128, max(128, seqs * 2048 // block)))
    blocks = _checked(cfg, block_cfg, "VLLM_DECODE_BLOCK_BUCKET")
    last = -(-s.num_kv_blocks // block_cfg[1]) * block_cfg[1]  # the KV blocks rounded up to the step
    return prompt, decode_by_blocks(bs, blocks, last, skip_below_batch=True, cap_inclusive=False)


def largest_prompt_shape(cfg: ForkBucketing, s: EngineShape) -> tuple[int, int]:
    """(batch, query) of the largest prompt shape the line reports to its profiling pass: the prompt bucket
    config's maxima up to 1.21 (1.17 / 1.18 in-tree ``prompt_bs_bucket_cfg[-1]``, ``prompt_seq_bucket_cfg[-1]``;
    1.19 - 1.21 the extension's ``get_max_prompt_shape``, the seq config's maximum; 1.21's exponential strategy
    fixes those at max_num_seqs and max_model_len, ``bucketing/exponential.py:123-125`` @29bc7a4), and from 1.22
    the longest query of the generated prompt buckets (vllm-hpu-extension
    ``HPUBucketingManager.get_max_prompt_shape``), with the largest batch of those buckets."""
    gen, seqs, block = cfg.release.generation, s.max_num_seqs, s.block_size
    if gen in ("intree2024", "intree118"):
        bs_step = 32 if gen == "intree2024" else min(seqs, 32)
        bs = _range(cfg, "prompt", "bs", (1, bs_step, min(seqs, 64)))[2]
        return bs, _range(cfg, "prompt", "seq", (block, block, 1024))[2]
    if gen == "ext122":
        if strategy_of(cfg) == "exp":
            prompt3 = exponential.prompt_buckets(seqs, block, s.max_num_batched_tokens, s.max_model_len,
                                                 _contiguous(cfg))  # fmt: skip
            prompt = [(b, q) for b, q, _ in prompt3]
        else:
            bs_range = _lin(cfg, "prompt", "bs", (1, 32, seqs))
            prompt = prompt_product(bs_range, _lin(cfg, "prompt", "seq", (block, block, s.max_model_len)),
                                    s.max_num_batched_tokens)  # fmt: skip
        return max(b for b, _ in prompt), max(q for _, q in prompt)
    if _exp121(cfg):
        return seqs, s.max_model_len
    seq_max = 1024 if gen == "ext119" else s.max_model_len
    return _range(cfg, "prompt", "bs", (1, 32, seqs))[2], _range(cfg, "prompt", "seq", (block, block, seq_max))[2]


def _sliding_window(cfg: ForkBucketing, prompt: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    on = cfg.get("PT_HPU_SDPA_QKV_SLICE_MODE_FWD")
    if cfg.release.generation != "ext122" or on is None or on.lower() not in _TRUE:
        return prompt
    size = int(cfg.get("PT_HPU_SDPA_BC_FACTOR") or 1024)
    threshold = int(cfg.get("VLLM_FUSEDSDPA_SLIDE_THLD") or 8192)
    return [t for t in prompt if t[1] < threshold or t[1] % size == 0]


def generate(cfg: ForkBucketing, s: EngineShape) -> tuple[Prompt, Decode]:
    """Prompt (batch, query, 0) and decode (batch, KV blocks) buckets, sorted. 1.17 decodes by sequence length:
    its (batch, length) bucket is given as (batch, batch x blocks per length)."""
    gen = cfg.release.generation
    if gen == "intree2024":
        p2, d2 = linear_buckets(dict(cfg.env), max_num_seqs=s.max_num_seqs, block_size=s.block_size)
        return tuple(sorted((b, q, 0) for b, q in p2)), tuple(sorted({(b, b * -(-q // s.block_size)) for b, q in d2}))
    if gen == "ext122" and strategy_of(cfg) == "exp":
        contiguous = _contiguous(cfg)
        prompt3 = exponential.prompt_buckets(s.max_num_seqs, s.block_size, s.max_num_batched_tokens, s.max_model_len,
                                             contiguous)  # fmt: skip
        decode = exponential.decode_buckets(s.max_num_seqs, s.block_size, s.num_kv_blocks, contiguous)
        return tuple(sorted(_sliding_window(cfg, prompt3))), tuple(sorted(decode))
    if _exp121(cfg):
        prompt3, decode = _buckets_121(cfg, s)
        return tuple(prompt3), tuple(decode)
    prompt, decode = _in_tree_118(cfg, s) if gen == "intree118" else _extension_linear(cfg, s)
    prompt3 = _sliding_window(cfg, [(b, q, 0) for b, q in prompt])
    return tuple(sorted(set(prompt3))), tuple(sorted(set(decode)))

"""vllm-gaudi's prompt and decode buckets: an exact, pure model of what its bucketing generates and warms.

Modelled on vllm-gaudi main @ 091bbadd (``VLLM_GAUDI_COMMIT``), read file by file; our own code, not a copy. This
module mirrors ``vllm_gaudi/extension/bucketing/common.py`` (``HPUBucketingManager.generate_{prompt,decode}_buckets``,
``generate_buckets`` with its filters, the long-context "edge" buckets, the decode corrector, spec-decode buckets);
the strategies' ranges are :mod:`.exponential`, :mod:`.linear` and :mod:`.padding_aware`, a bucket file is
:mod:`.file_strategy`, the variables are parsed in :mod:`.config`. From ``v1/worker/hpu_model_runner.py``:
``max_num_prefill_seqs`` (``VLLM_PROMPT_BS_BUCKET_MAX``, default 1) and ``warmup_model`` (what is generated, when
warm-up is skipped).

Nothing here imports vllm, torch or habana_frameworks, and nothing here was run on Gaudi. The harness
``benchmarks/agreement/vllm_gaudi_bucket_counts.py`` checks this model against vllm-gaudi's own code on CPU.

A run-time input we cannot know before launch: ``EngineShape.num_kv_blocks`` (vllm-gaudi sets it from the KV cache
it allocates from free memory after the weights load; decode buckets depend on it under every strategy). Callers
pass the plan's estimate.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
from collections.abc import Callable

from vllm_hpu_mm.engine import Bucket, EngineShape
from vllm_hpu_mm.errors import ConfigError, WouldNotStart
from vllm_hpu_mm.runtimes.vllm_gaudi import exponential, linear, padding_aware
from vllm_hpu_mm.runtimes.vllm_gaudi.config import (
    PARAMS,
    RANGE_VARIABLES,
    BucketingConfig,
    Cfg,
    effective_strategy,
    var_name,
)
from vllm_hpu_mm.runtimes.vllm_gaudi.exponential import LONG_CTX_THRESHOLD
from vllm_hpu_mm.runtimes.vllm_gaudi.file_strategy import parse_bucket_file
from vllm_hpu_mm.runtimes.vllm_gaudi.releases import parse_version

__all__ = [
    "STRATEGY_OBJECTS",
    "BucketLookup",
    "ExponentialStrategy",
    "FileStrategy",
    "LinearStrategy",
    "PaddingAwareStrategy",
    "Strategy",
    "calc_fallback_value",
    "check_startup",
    "decode_buckets",
    "dropped_file_buckets",
    "overridden_ranges",
    "overridden_variables",
    "prefill_seqs",
    "prompt_buckets",
    "strategy_for",
    "strategy_resolution",
]


#: Most steps one range may take (values for lin, loop turns for pad). The largest a default range takes is
#: lin's decode blocks at vLLM's largest limits: max_model_len 1,010,000 (Qwen2.5-1M) x 1,024 sequences / 128-token
#: blocks / a 128-block step, about 63,000; this is 16 times that. vllm-gaudi builds such a range as a Python list
#: (VLLM_DECODE_BLOCK_BUCKET_MAX=10**12 is a list of 7.8e9 values: it runs out of host memory at start-up).
MAX_RANGE_STEPS = 1_000_000
#: Most (batch, query, context) combinations one phase's generation visits, after the values its filters drop for
#: certain are left out. lin at max_model_len 1,048,576 with the default limits visits about 530,000 prompt
#: combinations (tests/runtimes); vllm-gaudi's own start-up loop visits the same, in Python, bucket by bucket.
MAX_COMBINATIONS = 2_000_000


#: The engine flags each range's defaults come from (linear.py / padding_aware.py get_*_cfgs @ 091bbadd), named in
#: an error about a default range: the user sets those, not the range.
_DERIVED_FROM = {
    ("prompt", "bs"): "--max-num-seqs",
    ("prompt", "query"): "--block-size (min) and --max-num-batched-tokens (max)",
    ("prompt", "ctx"): "--max-model-len and --block-size",
    ("decode", "bs"): "--max-num-seqs",
    ("decode", "block"): "--block-size (min) and --max-model-len x --max-num-seqs or the KV blocks (max)",
}


def _named(cfg: BucketingConfig, phase: str, dim: str) -> str:
    """The variables the user set for one range, as spelled (``VLLM_PROMPT_QUERY_BUCKET_MIN=4096``), for messages."""

    def value(variable: str) -> int | None:
        return cfg.setting(variable) if variable in RANGE_VARIABLES else None  # decode query has no variable

    out = []
    for param in PARAMS:
        variable = var_name(f"{phase}_{dim}", param)
        if value(variable) is None and dim == "query":  # read_range's fallback to the deprecated SEQ spelling
            variable = var_name(f"{phase}_seq", param)
        if value(variable) is not None:
            out.append(f"{variable}={value(variable)}")
    return (
        ", ".join(out) or f"the defaults vllm-gaudi derives from {_DERIVED_FROM.get((phase, dim), 'the engine limits')}"
    )


def _prune(cfg: BucketingConfig, shape: EngineShape, is_prompt: bool, mnps: int,
           ranges: tuple[list[int], list[int], list[int]]) -> tuple[list[int], list[int], list[int]]:  # fmt: skip
    """The ranges less the values generate_buckets' filters drop whatever they combine with (the result is the same
    buckets): prompt queries above max_model_len (the ranges are sorted: nothing after them survives) and contexts
    above the filter's cap but the largest (long-context edge buckets replace it); decode contexts above the
    largest batch x blocks per sequence but the first (the corrector caps every one of them to the same bucket)."""
    bs_range, query_range, ctx_range = ranges
    mml, blk = shape.max_model_len, shape.block_size
    if is_prompt:
        top = max(ctx_range, default=0)
        cap = mnps * (mml // blk) if cfg.merged_prefill else math.ceil((mml - 1) / blk)
        queries = query_range if cfg.merged_prefill else [q for q in query_range if q <= mml]
        return bs_range, queries, [c for c in ctx_range if c <= cap or c == top]
    if cfg.contiguous_pa or not bs_range:
        return ranges
    cap = max(bs_range) * math.ceil(mml / blk)
    above = [c for c in ctx_range if c > cap]
    return bs_range, query_range, [c for c in ctx_range if c <= cap] + above[:1]


# --- bucket generation (common.py generate_buckets) -----------------------------------------------------------------


def _prompt_filter(cfg: BucketingConfig, shape: EngineShape, mnps: int) -> Callable[[int, int, int], bool]:
    mml, blk = shape.max_model_len, shape.block_size
    if cfg.merged_prefill:
        return lambda b, q, c: c <= mnps * ((mml - math.floor(q / mnps)) // blk)
    mnbt = shape.max_num_batched_tokens
    if cfg.release.prompt_filter == "query+ctx":  # before v0.19.0 (6e5d74b2 #1362 loosened it)
        return lambda b, q, c: q + c * blk <= mml and b * q <= mnbt
    ctx_cap = math.ceil((mml - 1) / blk)
    return lambda b, q, c: c <= ctx_cap and q <= mml and b * q <= mnbt


def _decode_fix(cfg: BucketingConfig, shape: EngineShape) -> Callable[[int, int, int], Bucket | None]:
    if cfg.release.mamba_decode_floor and shape.mamba_chunk_size > 0:
        # before v0.19.0 hybrid models' own corrector: floor, and applied under contiguous PA too
        floor = shape.max_model_len // shape.block_size
        if cfg.contiguous_pa:
            return lambda b, q, c: (b, q, min(c, b * floor))
        return lambda b, q, c: (b, q, min(c, b * floor)) if b <= c else None
    if cfg.contiguous_pa:
        return lambda b, q, c: (b, q, c)
    per_seq = math.ceil(shape.max_model_len / shape.block_size)
    return lambda b, q, c: (b, q, min(c, b * per_seq)) if b <= c else None


def _generate(
    cfg: BucketingConfig,
    shape: EngineShape,
    is_prompt: bool,
    ranges: tuple[list[int], list[int], list[int]] | None,
    file_buckets: list[Bucket] | None,
    mnps: int,
) -> list[Bucket]:
    if not cfg.release.mamba_aware:  # v0.13.0's manager is never told the mamba chunk size
        shape = dataclasses.replace(shape, mamba_chunk_size=0, mamba_chunk_size_is_explicit=False)
    prompt_ok = _prompt_filter(cfg, shape, mnps)
    decode_fix = _decode_fix(cfg, shape)

    def admit(b: int, q: int, c: int) -> Bucket | None:
        if is_prompt:
            return (b, q, c) if prompt_ok(b, q, c) else None
        return decode_fix(b, q, c)

    out: set[Bucket] = set()
    if file_buckets is not None:
        out = {k for k in (admit(*f) for f in file_buckets) if k is not None}
    elif ranges is not None:
        bs_range, query_range, ctx_range = ranges
        explicit = shape.mamba_chunk_size_is_explicit or not cfg.release.mamba_round_explicit_only
        if is_prompt and shape.mamba_chunk_size > 0 and explicit:
            m = shape.mamba_chunk_size
            query_range = [math.ceil(q / m) * m for q in query_range]
        if not bs_range or not ctx_range:
            raise WouldNotStart("a bucket range is empty; vllm-gaudi fails on max() of no buckets")
        bs_range, query_range, ctx_range = _prune(cfg, shape, is_prompt, mnps, (bs_range, query_range, ctx_range))
        combinations = len(set(bs_range)) * len(set(ctx_range)) * len(query_range)
        if combinations > MAX_COMBINATIONS:
            phase = "prompt" if is_prompt else "decode"
            dims = ("bs", "query", "ctx") if is_prompt else ("bs", "block")
            named = "; ".join(dict.fromkeys(_named(cfg, phase, d) for d in dims))
            raise ConfigError(
                f"{named}: vllm-gaudi's {phase} ranges combine into {combinations:,} buckets to generate; accepted: "
                f"at most {MAX_COMBINATIONS:,} (its start-up enumerates every one)"
            )
        top_ctx = max(ctx_range)
        rules = cfg.release.long_ctx_rules
        long_ctx = is_prompt and (rules == "every" or (rules == "long" and shape.max_model_len >= LONG_CTX_THRESHOLD))
        ctx_cap = cfg.prompt_ctx_max
        for b in set(bs_range):
            for c0 in set(ctx_range):
                c = c0
                for q in query_range:
                    if long_ctx and c0 == top_ctx:
                        # the largest context is replaced per query by what still fits max_model_len; the
                        # replacement carries over to the next query when VLLM_PROMPT_CTX_BUCKET_MAX rejects it
                        edge = (shape.max_model_len - q) // shape.block_size
                        if edge >= 0 and (ctx_cap is None or edge < ctx_cap or not cfg.release.edge_ctx_capped):
                            c = edge
                    k = admit(b, q, c)
                    if k is not None:
                        out.add(k)
    if not out:
        phase = "prompt" if is_prompt else "decode"
        where = f"{cfg.file_named}: " if file_buckets is not None else ""
        # generate_buckets @ 091bbadd: a phase with no file line takes the strategy branch with no ranges and fails
        # on max() of no buckets (ValueError); one whose lines are all filtered out raises "Generated 0 ... buckets"
        why = (f"the file has no {phase} line: ValueError from max() of no buckets" if file_buckets == [] else
               "'Please adjust the bucketing configuration'")  # fmt: skip
        # every file bucket dropped: which, and by which filter (the runtime logs each before it raises)
        drops = _drops(cfg, shape, file_buckets or [], is_prompt, mnps)
        dropped = f": its filters drop all {drops[0]:,} of the file's {phase} buckets ({drops[1]})" if drops else ""
        raise WouldNotStart(f"{where}vllm-gaudi would generate 0 {phase} buckets from this configuration and fail at "
                            f"start-up ({why}){dropped}")  # fmt: skip
    return sorted(out)


def prefill_seqs(cfg: BucketingConfig, shape: EngineShape) -> int:
    # hpu_model_runner.py __init__ @ 091bbadd: merged prefill uses max_num_seqs, else VLLM_PROMPT_BS_BUCKET_MAX or 1.
    if cfg.merged_prefill:
        return shape.max_num_seqs
    mnps = 1 if cfg.prompt_bs_max is None else cfg.prompt_bs_max
    if mnps < 1:
        raise ConfigError(
            f"VLLM_PROMPT_BS_BUCKET_MAX={mnps} is invalid; accepted: an integer >= 1 (vllm-gaudi fails on it)"
        )
    return mnps


def _file_buckets(cfg: BucketingConfig) -> tuple[list[Bucket], list[Bucket]]:
    if cfg.file_text is None:
        raise ConfigError(f"{cfg.file_named}: the file's content is needed; pass it as BucketingConfig.file_text")
    return parse_bucket_file(cfg.file_text, cfg.file_named, evaluate=cfg.release.file_parse == "eval")


def _drop_reason(cfg: BucketingConfig, shape: EngineShape, bucket: Bucket, is_prompt: bool, mnps: int) -> str | None:
    """Why generate_buckets' filters drop a file bucket (None: kept), in the runtime's own terms."""
    b, q, c = bucket
    mml, blk = shape.max_model_len, shape.block_size
    if not is_prompt:
        # batch_size_smaller_than_blocks (common.py @091bbadd), the decode filter without contiguous PA: each of the
        # batch's sequences holds a block at least
        return None if cfg.contiguous_pa or b <= c else f"batch {b} above its {c} blocks"
    if cfg.merged_prefill:
        cap = mnps * ((mml - math.floor(q / mnps)) // blk)
        return None if c <= cap else f"context {c} blocks above {cap} (merged prefill)"
    if cfg.release.prompt_filter == "query+ctx" and q + c * blk > mml:  # before v0.19.0 (see _prompt_filter)
        return f"query + context {q + c * blk} tokens above max_model_len {mml}"
    if c > math.ceil((mml - 1) / blk):
        return f"context {c} blocks above ceil((max_model_len - 1) / block_size) = {math.ceil((mml - 1) / blk)}"
    if q > mml:
        return f"query {q} above max_model_len {mml}"
    if b * q > shape.max_num_batched_tokens:
        return f"batch x query {b * q} above max_num_batched_tokens {shape.max_num_batched_tokens}"
    return None


#: The first release whose generate_buckets warns about the file buckets its filters drop ("The following prompt
#: buckets from custom bucketing file (VLLM_BUCKETING_FROM_FILE) were omitted during warmup", 3522491e #1364, first
#: tagged v0.20.1rc0; v0.21.0 - 091bbadd too); before, e.g. v0.16.0rc0 @dd472742, only when no bucket is left.
_WARNS_OMITTED = parse_version("0.20.1rc0")


def _filter_of(why: str) -> str:
    """The filter a drop reason names: its words before its first figure (``batch x query``, ``context``, ...)."""
    return " ".join(w for w in why.split(" ")[:3] if not w[0].isdigit()).split(" above")[0].strip()


def dropped_file_buckets(cfg: BucketingConfig, shape: EngineShape) -> tuple[str, ...]:
    """One sentence per phase whose bucket-file buckets vllm-gaudi's filters drop (common.py generate_buckets), each
    filter's count with one example: a context beyond max_model_len, a query beyond it or beyond
    max_num_batched_tokens, a batch beyond its blocks."""
    if not isinstance(strategy_for(cfg), FileStrategy) or not cfg.enable_bucketing or cfg.file_text is None:
        return ()
    mnps = prefill_seqs(cfg, shape)
    prompt, decode = _file_buckets(cfg)
    where = f"common.py generate_buckets @{cfg.release.commit}"
    said = (
        f"it warns at start-up, listing them as omitted during warmup ({where})"
        if cfg.release.first >= _WARNS_OMITTED
        else f"it names them only when none is left ({where})"
    )
    out = []
    for phase, buckets in (("prompt", prompt), ("decode", decode)):
        drops = _drops(cfg, shape, buckets, phase == "prompt", mnps)
        if drops:
            out.append(f"{cfg.file_named}: vllm-gaudi drops {drops[0]:,} of its {len(set(buckets)):,} {phase} "
                       f"buckets, so they are never warmed ({drops[1]}); {said}")  # fmt: skip
    return tuple(out)


def _drops(cfg: BucketingConfig, shape: EngineShape, buckets: list[Bucket], is_prompt: bool,
           mnps: int) -> tuple[int, str] | None:  # fmt: skip
    """The file buckets of a phase the filters drop: their count, and each filter's count with one example (None:
    none dropped)."""
    by_filter: dict[str, list[tuple[Bucket, str]]] = {}
    for k in dict.fromkeys(buckets):
        why = _drop_reason(cfg, shape, k, is_prompt, mnps)
        if why is not None:
            by_filter.setdefault(_filter_of(why), []).append((k, why))
    if not by_filter:
        return None
    each = "; ".join(f"{len(v):,} by {name} (e.g. {v[0][0]}: {v[0][1]})" for name, v in by_filter.items())
    return sum(len(v) for v in by_filter.values()), each


@functools.lru_cache(maxsize=16)  # pure, and asked for again by every pass of a plan
def prompt_buckets(cfg: BucketingConfig, shape: EngineShape) -> tuple[Bucket, ...]:
    """(batch, query_len, ctx_blocks) prompt buckets exactly as vllm-gaudi 091bbadd generates them, sorted.

    Empty when VLLM_ENABLE_BUCKETING is off. VLLM_SKIP_WARMUP keeps them generated but warms none
    (:func:`warmup_enabled`). hpu_model_runner.py warmup_graphs then skips a bucket whose query length exceeds
    max_num_batched_tokens, which only a bucket file under merged prefill can produce (not subtracted here).
    """
    check_startup(cfg, shape)
    if not cfg.enable_bucketing:
        return ()
    buckets = strategy_for(cfg).prompt_buckets(cfg, shape, prefill_seqs(cfg, shape))
    if cfg.sliding_window:  # common.py generate_prompt_buckets: FusedSDPA slicing drops unsliceable long queries
        size = 1024 if cfg.slice_size is None else cfg.slice_size
        threshold = 8192 if cfg.slice_threshold is None else cfg.slice_threshold
        buckets = [k for k in buckets if k[2] != 0 or k[1] < threshold or k[1] % size == 0]
    return tuple(buckets)


def _spec_decode(cfg: BucketingConfig, shape: EngineShape, seeds: list[Bucket]) -> list[Bucket]:
    # common.py generate_spec_decode_buckets @ 091bbadd
    tokens = 1 + shape.num_speculative_tokens
    per_seq = math.ceil(shape.max_model_len / shape.block_size)

    def fix(b: int, q: int, c: int) -> Bucket:
        return (b, q, c) if cfg.contiguous_pa else (b, q, min(c, b * per_seq))

    out = set(seeds)
    for b, q, c in seeds:
        if b * tokens <= c:
            out.add(fix(b * tokens, q, c))
        out.add(fix(b * tokens, q, c * tokens))
    return sorted(out)


@functools.lru_cache(maxsize=16)  # pure, and asked for again by every pass of a plan
def decode_buckets(cfg: BucketingConfig, shape: EngineShape) -> tuple[Bucket, ...]:
    """(batch, 1, ctx_blocks) decode buckets exactly as vllm-gaudi 091bbadd generates them, sorted.

    Depends on ``shape.num_kv_blocks``, a run-time number (see :class:`EngineShape`). With speculative decoding
    the seeds are expanded as vllm-gaudi does (from b8515d5f #624).
    """
    check_startup(cfg, shape)
    if not cfg.enable_bucketing:
        return ()
    buckets = strategy_for(cfg).decode_buckets(cfg, shape, prefill_seqs(cfg, shape))
    if shape.num_speculative_tokens and cfg.release.spec_decode_buckets:
        buckets = _spec_decode(cfg, shape, buckets)
    return tuple(buckets)


def check_startup(cfg: BucketingConfig, shape: EngineShape) -> None:
    """Raise ConfigError where the release's runner refuses ``shape`` at start-up, bucketing on or off: v0.11.2's
    (before b8515d5f #624) takes at most one speculative token (HPUModelRunner.__init__ raises NotImplementedError)."""
    if not cfg.release.spec_decode_buckets and shape.num_speculative_tokens > 1:
        raise ConfigError(
            f"num_speculative_tokens={shape.num_speculative_tokens}: {cfg.release} refuses more than one speculative "
            "token at start-up (NotImplementedError in its HPUModelRunner); accepted there: 0 or 1"
        )


# --- which variables count -------------------------------------------------------------------------------------------


def overridden_variables(cfg: BucketingConfig) -> tuple[str, ...]:
    """Set range variables (and strategy variables) that have no effect on what vllm-gaudi warms.

    Under ``exp`` (the default) every range variable is overwritten except VLLM_PROMPT_BS_BUCKET_MAX (prefill batch
    size), VLLM_PROMPT_CTX_BUCKET_MAX (caps the long-context edge buckets) and VLLM_PROMPT_QUERY_BUCKET_MIN=1;
    ``lin`` ignores the PAD_* variables; a bucket file makes every range variable and the strategy moot.
    VLLM_PROMPT_BS_BUCKET_MAX is never listed: the runner always reads it (max prefill batch).
    """
    strategy = strategy_for(cfg).name
    out = [v for v in cfg.set_variables() if v not in strategy_for(cfg).counted(cfg)]
    if strategy == "file":
        if cfg.strategy_given is not None:  # only a strategy the user set is theirs to be told about
            out.append("VLLM_BUCKETING_STRATEGY")
        if cfg.exponential_bucketing is not None:
            out.append("VLLM_EXPONENTIAL_BUCKETING")
    elif cfg.exponential_bucketing is not None and strategy != cfg.strategy:
        out.append("VLLM_BUCKETING_STRATEGY")
    if not cfg.enable_bucketing:
        out = [*cfg.set_variables(), *(["VLLM_BUCKETING_STRATEGY"] if cfg.strategy_given is not None else [])]
    return tuple(dict.fromkeys(out))


def overridden_ranges(cfg: BucketingConfig) -> tuple[str, ...]:
    """The range variables of :func:`overridden_variables` (not the strategy variables): what the plan's own buckets
    say they overwrite (``VllmGaudi.text_shapes``)."""
    return tuple(v for v in overridden_variables(cfg) if v.endswith(("_MIN", "_STEP", "_MAX", "_LIMIT")))


#: Releases before v0.20.0rc0: VLLM_BUCKETING_STRATEGY's accepted names, and the strategy each would name.
_OLD_NAMES = {"exponential_bucketing": "exp", "linear_bucketing": "lin"}


def strategy_resolution(cfg: BucketingConfig, *, planned: bool = False) -> str | None:
    """Which of the user's strategy settings wins where ``cfg.release`` resolves them against each other, and why, in
    one sentence (None: nothing is resolved). ``planned``: the bucket file is ours, not a setting of the user's.

    bucketing/common.py at each tag: with a bucket file set, get_bucketing_strategy is never called; from v0.20.0rc0
    (c2641a62 #762) a set VLLM_EXPONENTIAL_BUCKETING replaces the strategy VLLM_BUCKETING_STRATEGY chose (true: exp,
    otherwise lin; vllm-gaudi warns "Overriding bucketing strategy"); before, only VLLM_EXPONENTIAL_BUCKETING picks
    (unset: exp) and VLLM_BUCKETING_STRATEGY is checked against its list and read nowhere."""
    release, given, exp = cfg.release, cfg.strategy_given, cfg.exponential_bucketing
    where = "its extension/bucketing/common.py get_bucketing_strategy"
    if cfg.from_file is not None and not planned:
        named = [f"VLLM_BUCKETING_STRATEGY={given}"] if given is not None else []
        named += ["VLLM_EXPONENTIAL_BUCKETING"] if exp is not None else []
        if not named:
            return None
        return (f"your bucket file ({cfg.file_named}) wins over {' and '.join(named)}: {release} reads its buckets "
                f"from the file and chooses no strategy ({where})")  # fmt: skip
    wins = "exp" if exp is None or exp else "lin"
    exp_words = f"VLLM_EXPONENTIAL_BUCKETING (read as {'true' if exp else 'false'}: {wins})"
    if release.strategy_variable:
        if exp is None or wins == cfg.strategy:
            return None
        chosen = f"VLLM_BUCKETING_STRATEGY={given}" if given is not None else "the default VLLM_BUCKETING_STRATEGY=exp"
        return (f"{exp_words} overrides {chosen}: {release} warms {wins}, because a set VLLM_EXPONENTIAL_BUCKETING "
                f"(deprecated) replaces the strategy chosen by name ({where})")  # fmt: skip
    if given is None or _OLD_NAMES.get(given, wins) == wins:
        return None
    picker = exp_words if exp is not None else "VLLM_EXPONENTIAL_BUCKETING (unset: exp)"
    return (
        f"{picker} wins over VLLM_BUCKETING_STRATEGY={given}: {release} warms {wins}, because it picks the "
        f"strategy by VLLM_EXPONENTIAL_BUCKETING alone and reads VLLM_BUCKETING_STRATEGY nowhere ({where})"
    )


# --- the strategies (bucketing/common.py get_bucketing_strategy: one class per strategy file, chosen once) -----------


class Strategy:
    """One of vllm-gaudi's bucketing strategies: its prompt and decode range configurations (``get_prompt_cfgs``,
    ``get_decode_cfgs``), the range each yields (``get_range``), the buckets they generate, and the range variables
    that can change them. Stateless: one object per strategy (:data:`STRATEGY_OBJECTS`), chosen once per
    configuration by :func:`strategy_for`."""

    #: ``VLLM_BUCKETING_STRATEGY``'s value (``file`` for a bucket file).
    name: str = ""
    #: The range parameters it reads (``min``, ``step``, ``max``, and for ``pad`` its two padding limits).
    params: tuple[str, ...] = PARAMS

    def prompt_cfgs(self, cfg: BucketingConfig, shape: EngineShape, mnps: int) -> tuple[Cfg, Cfg, Cfg]:
        raise NotImplementedError  # pragma: no cover - every range strategy has its own

    def decode_cfgs(self, cfg: BucketingConfig, shape: EngineShape) -> tuple[Cfg, Cfg, Cfg]:
        raise NotImplementedError  # pragma: no cover - every range strategy has its own

    def get_range(self, cfg: BucketingConfig, rng: Cfg, what: str, dense: bool = False) -> list[int]:
        raise NotImplementedError  # pragma: no cover - every range strategy has its own

    def _range(self, cfg: BucketingConfig, rng: Cfg, phase: str, dim: str, dense: bool = False) -> list[int]:
        return sorted(self.get_range(cfg, rng, f"{_named(cfg, phase, dim)} ({phase} {dim} range)", dense))

    def prompt_buckets(self, cfg: BucketingConfig, shape: EngineShape, mnps: int) -> list[Bucket]:
        bs_cfg, q_cfg, ctx_cfg = self.prompt_cfgs(cfg, shape, mnps)
        dense = cfg.release.exp_prompt_densified and shape.max_model_len >= LONG_CTX_THRESHOLD
        ranges = (
            self._range(cfg, bs_cfg, "prompt", "bs", dense),
            self._range(cfg, q_cfg, "prompt", "query", dense),
            self._range(cfg, ctx_cfg, "prompt", "ctx", dense),
        )
        return _generate(cfg, shape, True, ranges, None, mnps)

    def decode_buckets(self, cfg: BucketingConfig, shape: EngineShape, mnps: int) -> list[Bucket]:
        bs_cfg, q_cfg, blk_cfg = self.decode_cfgs(cfg, shape)
        blocks = self._range(cfg, blk_cfg, "decode", "block")
        if cfg.contiguous_pa and blocks[-1] < shape.num_kv_blocks:
            blocks.append(shape.num_kv_blocks)
        ranges = (self._range(cfg, bs_cfg, "decode", "bs"), self._range(cfg, q_cfg, "decode", "query"), blocks)
        return _generate(cfg, shape, False, ranges, None, mnps)

    def counted(self, cfg: BucketingConfig) -> set[str]:
        """Range variables that can change the generated buckets under this strategy: every range parameter it
        reads (a SEQ one only where its QUERY twin is unset), less what merged prefill replaces."""
        counted = set(_ALWAYS_COUNTED)
        for dim in ("prompt_bs", "prompt_query", "prompt_ctx", "decode_bs", "decode_block"):
            counted.update(var_name(dim, p) for p in self.params)
        for p in self.params:  # a SEQ parameter counts only where its QUERY twin is unset
            if cfg.setting(var_name("prompt_query", p)) is None:
                counted.add(var_name("prompt_seq", p))
        if cfg.merged_prefill:  # merged prefill replaces the batch range (1, 1, 1) and the query max
            counted -= {var_name("prompt_bs", p) for p in PARAMS if p != "max"}
            counted -= {var_name("prompt_query", "max"), var_name("prompt_seq", "max")}
        return counted


#: Read whatever the strategy: the prefill batch size and the long-context edge buckets' cap.
_ALWAYS_COUNTED = frozenset({"VLLM_PROMPT_BS_BUCKET_MAX", "VLLM_PROMPT_CTX_BUCKET_MAX"})


class ExponentialStrategy(Strategy):
    """exponential.py ``ExponentialBucketingStrategy``: ranges it derives from the limits (the variables mostly
    overwritten)."""

    name = "exp"

    def prompt_cfgs(self, cfg: BucketingConfig, shape: EngineShape, mnps: int) -> tuple[Cfg, Cfg, Cfg]:
        return exponential.prompt_cfgs(cfg, shape, mnps)

    def decode_cfgs(self, cfg: BucketingConfig, shape: EngineShape) -> tuple[Cfg, Cfg, Cfg]:
        return exponential.decode_cfgs(cfg, shape)

    def get_range(self, cfg: BucketingConfig, rng: Cfg, what: str, dense: bool = False) -> list[int]:
        release = cfg.release
        return exponential.exp_range(rng[0], rng[1], rng[2], rng[3], cfg.contiguous_pa, dense,
                                     release.exp_range_clamped, release.exp_min_one)  # fmt: skip

    def counted(self, cfg: BucketingConfig) -> set[str]:
        counted = set(_ALWAYS_COUNTED)
        if cfg.prompt_query_min == 1 and cfg.release.exp_min_one:  # v0.11.2 always takes the block size
            counted.add("VLLM_PROMPT_QUERY_BUCKET_MIN")
        return counted


class _SteppedStrategy(Strategy):
    """A strategy whose ranges are built value by value (lin, pad): bounded in steps before it is built."""

    def get_range(self, cfg: BucketingConfig, rng: Cfg, what: str, dense: bool = False) -> list[int]:
        if rng[1] > 0 and rng[2] // rng[1] > MAX_RANGE_STEPS:
            raise ConfigError(
                f"{what}: max {rng[2]:,} in steps of {rng[1]:,} is {rng[2] // rng[1]:,} steps; accepted: at most "
                f"{MAX_RANGE_STEPS:,} per range (vllm-gaudi builds the range as a list at start-up)"
            )
        return self.steps(rng, what)

    def steps(self, rng: Cfg, what: str) -> list[int]:
        raise NotImplementedError  # pragma: no cover - lin and pad have their own


class LinearStrategy(_SteppedStrategy):
    """linear.py ``LinearBucketingStrategy``: (min, step, max) per range; the PAD_* variables are not read."""

    name = "lin"
    params = ("min", "step", "max")

    def prompt_cfgs(self, cfg: BucketingConfig, shape: EngineShape, mnps: int) -> tuple[Cfg, Cfg, Cfg]:
        return linear.prompt_cfgs(cfg, shape, mnps)

    def decode_cfgs(self, cfg: BucketingConfig, shape: EngineShape) -> tuple[Cfg, Cfg, Cfg]:
        return linear.decode_cfgs(cfg, shape)

    def steps(self, rng: Cfg, what: str) -> list[int]:
        return linear.lin_range(rng[0], rng[1], rng[2], what)


class PaddingAwareStrategy(_SteppedStrategy):
    """padding_aware.py ``PaddingAwareBucketingStrategy``: (min, step, max, pad_max, pad_percent) per range."""

    name = "pad"

    def prompt_cfgs(self, cfg: BucketingConfig, shape: EngineShape, mnps: int) -> tuple[Cfg, Cfg, Cfg]:
        return padding_aware.prompt_cfgs(cfg, shape, mnps)

    def decode_cfgs(self, cfg: BucketingConfig, shape: EngineShape) -> tuple[Cfg, Cfg, Cfg]:
        return padding_aware.decode_cfgs(cfg, shape)

    def steps(self, rng: Cfg, what: str) -> list[int]:
        return padding_aware.pad_range(rng[0], rng[1], rng[2], rng[3], rng[4], what)


class FileStrategy(Strategy):
    """file_strategy.py ``FileBucketingStrategy``: the buckets a file lists, through the same filters; no range is
    read (only the runner's prefill batch size)."""

    name = "file"

    def prompt_buckets(self, cfg: BucketingConfig, shape: EngineShape, mnps: int) -> list[Bucket]:
        return _generate(cfg, shape, True, None, _file_buckets(cfg)[0], mnps)

    def decode_buckets(self, cfg: BucketingConfig, shape: EngineShape, mnps: int) -> list[Bucket]:
        return _generate(cfg, shape, False, None, _file_buckets(cfg)[1], mnps)

    def counted(self, cfg: BucketingConfig) -> set[str]:
        return {"VLLM_PROMPT_BS_BUCKET_MAX"}  # read by the runner (max prefill batch), not by the file path


#: One object per strategy, by ``VLLM_BUCKETING_STRATEGY``'s value (``file``: a bucket file is set).
STRATEGY_OBJECTS: dict[str, Strategy] = {
    s.name: s for s in (ExponentialStrategy(), LinearStrategy(), PaddingAwareStrategy(), FileStrategy())
}


def strategy_for(cfg: BucketingConfig) -> Strategy:
    """common.py get_bucketing_strategy: the file strategy when a bucket file is set, else the configured one
    (after the deprecated VLLM_EXPONENTIAL_BUCKETING override)."""
    return STRATEGY_OBJECTS[effective_strategy(cfg)]


# --- lookup (common.py find_prompt_bucket / find_decode_bucket / generate_fallback_bucket) ----------------------------

#: common.py HPUBucketingManager.initialize @ 091bbadd: the fallback rounding steps (sequence: max(32, mamba chunk)).
FALLBACK_BS_STEP = 2
FALLBACK_SEQ_STEP = 32
FALLBACK_BLOCKS_STEP = 32


def calc_fallback_value(n: int, base_step: int) -> int:
    """common.py calc_fallback_value @ 091bbadd: ``n`` rounded up to a multiple of ``ceil(n ** (1/3)) * base_step``."""
    if n <= 1:
        return n
    size = math.ceil(math.pow(n, 1 / 3)) * base_step
    return math.ceil(n / size) * size


def _first_covering(ordered: list[Bucket], key: Bucket) -> Bucket | None:
    # find_equal_or_closest_greater_config: bisect, then the first bucket >= the key in all three dimensions. A bucket
    # that covers the key sorts at or after it, so the bisect skips none: it is the first covering one in sorted order.
    bs, seq, ctx = key
    for i in range(bisect.bisect_left(ordered, key), len(ordered)):  # by index: a slice would copy the tail
        b = ordered[i]
        if b[0] >= bs and b[1] >= seq and b[2] >= ctx:
            return b
    return None


class BucketLookup:
    """``HPUBucketingManager``'s retrieve functions over its generated buckets, stateful as its own: a lookup that
    finds no bucket generates a fallback bucket, appends it (the graph is compiled while the request waits) and later
    lookups find it. Results are memoised until a bucket is appended (the lists only change then).

    ``added`` lists every fallback in the order it was generated: ("prompt" | "decode", bucket).
    """

    def __init__(
        self,
        cfg: BucketingConfig,
        shape: EngineShape,
        generated: tuple[tuple[Bucket, ...], tuple[Bucket, ...]] | None = None,
    ) -> None:
        """``generated``: the (prompt, decode) buckets the installed vllm-gaudi generated, instead of the model's."""
        self.shape = shape
        # hpu_model_runner.py: without VLLM_ENABLE_BUCKETING the manager is never initialised: every lookup returns
        # the shape itself
        self.enabled = cfg.enable_bucketing
        if generated is None:
            generated = (prompt_buckets(cfg, shape), decode_buckets(cfg, shape))
        self.prompt: list[Bucket] = list(generated[0])
        self.decode: list[Bucket] = list(generated[1])
        # generate_decode_buckets: the fallback cap is the largest prepared decode context (spec expansions included).
        self.max_decode_ctx = max((c for _, _, c in self.decode), default=0)
        self.sliding_window = cfg.sliding_window
        self.slice_size = 1024 if cfg.slice_size is None else cfg.slice_size
        self.slice_threshold = 8192 if cfg.slice_threshold is None else cfg.slice_threshold
        self.per_phase = cfg.release.fallback_caps_per_phase
        self.cap_over_kv = cfg.release.fallback_cap_over_kv
        self.seq_step_mamba = cfg.release.fallback_seq_step_mamba
        self.bs_capped = cfg.release.fallback_bs_capped
        self.added: list[tuple[str, Bucket]] = []
        self._memo: dict[tuple[str, Bucket], Bucket | None] = {}

    def fallback(self, bs: int, seq: int, ctx: int, *, is_prompt: bool) -> Bucket:
        """generate_fallback_bucket (num_hpu_blocks is set: the runner sets it to the KV blocks before serving)."""
        s = self.shape
        new_bs = calc_fallback_value(bs, FALLBACK_BS_STEP)
        if self.bs_capped:  # not before v0.14.1
            new_bs = min(new_bs, s.max_num_seqs)
        if self.sliding_window and seq >= self.slice_threshold:
            new_seq = math.ceil(seq / self.slice_size) * self.slice_size
        else:
            seq_step = max(FALLBACK_SEQ_STEP, s.mamba_chunk_size) if self.seq_step_mamba else FALLBACK_SEQ_STEP
            new_seq = min(calc_fallback_value(seq, seq_step), s.max_num_batched_tokens)
        new_ctx = calc_fallback_value(ctx, FALLBACK_BLOCKS_STEP)
        if self.cap_over_kv is not None:  # before #1124: every fallback context capped at (about) the KV blocks
            new_ctx = min(new_ctx, s.num_kv_blocks + self.cap_over_kv * s.block_size)
        elif is_prompt and self.per_phase:
            new_ctx = min(new_ctx, math.ceil((s.max_model_len - 1) / s.block_size))
        elif 0 < self.max_decode_ctx < new_ctx:  # before v0.19.0 prompt fallbacks too
            new_ctx = self.max_decode_ctx
        return (new_bs, new_seq, new_ctx)

    def _cached(self, phase: str, ordered: list[Bucket], key: Bucket) -> Bucket | None:
        memo = (phase, key)
        if memo not in self._memo:
            self._memo[memo] = _first_covering(ordered, key)
        return self._memo[memo]

    def covering_prompt(self, bs: int, seq: int, ctx: int = 0) -> Bucket | None:
        """What :meth:`find_prompt` answers in this state without generating a fallback; None where it would
        generate one (nothing changes)."""
        if not self.enabled:
            return (bs, seq, ctx)
        return self._cached("prompt", self.prompt, (bs, seq, ctx))

    def find_prompt(self, bs: int, seq: int, ctx: int = 0) -> Bucket:
        """find_prompt_bucket: the first prepared bucket covering (bs, seq, ctx), else a fallback (appended even when an
        equal bucket is there: its capped fallback may not cover the key, and vllm-gaudi appends it again)."""
        found = self.covering_prompt(bs, seq, ctx)
        if found is not None:
            return found
        new = self.fallback(bs, seq, ctx, is_prompt=True)
        bisect.insort(self.prompt, new)
        self.added.append(("prompt", new))
        self._memo.clear()
        return new

    def _decode_blocks(self, blocks: int) -> int:
        """find_decode_bucket's ``blocks``, first capped at the largest prepared decode context."""
        return self.max_decode_ctx if self.per_phase and 0 < self.max_decode_ctx < blocks else blocks

    def covering_decode(self, bs: int, blocks: int) -> Bucket | None:
        """What :meth:`find_decode` answers in this state without generating a fallback; None where it would
        generate one (nothing changes)."""
        if not self.enabled:
            return (bs, 1, blocks)
        return self._cached("decode", self.decode, (bs, 1, self._decode_blocks(blocks)))

    def find_decode(self, bs: int, blocks: int) -> Bucket:
        """find_decode_bucket (no spec decode): ``blocks`` is first capped at the largest prepared decode context."""
        found = self.covering_decode(bs, blocks)
        if found is not None:
            return found
        new = self.fallback(bs, 1, self._decode_blocks(blocks), is_prompt=False)
        if new not in self.decode or not self.per_phase:  # before v0.19.0 appended again (it may not cover the key)
            bisect.insort(self.decode, new)
            self.added.append(("decode", new))
            self._memo.clear()
        return new

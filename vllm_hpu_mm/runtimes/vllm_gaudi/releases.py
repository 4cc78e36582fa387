"""vllm-gaudi's release lines: which bucketing behaviour each release ships, keyed by version range.

A line is a run of releases whose bucketing code generates the same buckets for the same inputs, read at each tag
in vllm-project/vllm-gaudi (``git log v0.11.2..091bbadd -- vllm_gaudi/extension/bucketing``, and the tree of
``extension/bucketing`` and the runner's multimodal warm-up diffed tag to tag) and checked against
that tag's own code by ``benchmarks/agreement/vllm_gaudi_releases.py``. Only the differences are here; the model itself
(:mod:`.common`, :mod:`.exponential`, :mod:`.linear`, ...) reads them from the :class:`Release` on its config.

What changed, newest first (our reading; commits cited):

- after v0.27.0rc0 (main @091bbadd): exponential decode blocks clamped to 3x the KV blocks without contiguous PA
  (5c5402c3 #1700, c459da1b #1745).
- v0.26.0rc0 (f9c2e673): extension/bucketing (dd6b5dbf), features.py and the runner's multimodal warm-up as
  v0.26.0's.
- v0.26.0 (b059f9c9; release-branch ports of #1652 f9608fa6, #1665 1cb885ce and #1617 807da17d, on main as
  #1661 29791097 and #1637 3a0b4ce4): the multimodal warm-up as main runs it: vision.py reads
  ``VLLM_MULTIMODAL_RESOLUTIONS``; each guessed aspect-ratio shape warms one item, explicit shapes follow, and
  vision.py's table lists qwen3_5, kimi_k25 and gemma4 as native-resolution towers with no default buckets.
- v0.24.0: with the worst case above 3x the KV blocks, the exponential decode range gets extra steps
  ("compensate for wider range", 8c0480ac #1584).
- v0.24.0rc0 (1ba0374e): v0.21.0's bucketing; it only makes the manager per instance (c3adc66a #1478), no bucket
  changes.
- v0.21.0: ``VLLM_BUCKETING_STRATEGY`` = exp | lin | pad (padding-aware strategy c2641a62 #762, its PAD variables);
  exponential decode blocks reach the worst case (every sequence at max_model_len); linear clamps its decode block
  max to the KV blocks only under contiguous PA.
- v0.20.1rc0 (8ddfdc9e, a main snapshot): v0.21.0 but for exponential decode blocks 3x the KV blocks without
  contiguous PA (the KV blocks with it) and linear always clamping its decode block max to the KV blocks; the
  multimodal warm-up is v0.19.0's.
- v0.20.0rc0 (8a9d6985, a main snapshot): v0.19.0rc0's bucketing and warm-up (the query + context filter, #1160's
  capped decode steps, ...) with the pad strategy and ``VLLM_BUCKETING_STRATEGY`` = exp | lin | pad (c2641a62 #762).
- v0.19.0 (v0.19.0.post1 is the same commit): exponential decode blocks max(min(worst, KV x seqs // 3), 3 x KV)
  without contiguous PA, the KV blocks with it; linear always clamps its decode block max to the KV blocks; the
  strategy is exp unless ``VLLM_EXPONENTIAL_BUCKETING`` is false; ``VLLM_BUCKETING_STRATEGY`` accepts only
  exponential_bucketing | linear_bucketing (anything else stops start-up) and picks nothing.
- v0.19.0 - v0.24.0 (vision.py identical at the four tags, ``warmup_multimodal_graphs`` differing by blank lines):
  every warm-up step batches the modality's own ``--limit-mm-per-prompt`` count of one dummy item
  (``_get_mm_dummy_batch``; no per-step count is passed); the only explicit shape is the first warmed modality's
  limit width/height, warmed before the guessed shapes and not deduplicated; qwen3_5 has patch buckets
  (196 ... 1156) and kimi_k25 / gemma4 are unlisted (batch based 1, 2, 4, 8).

- v0.19.0rc0 (9dffb979, a main snapshot): v0.18.1rc1 with the exponential decode block steps capped at
  max(6, batch steps) (#1160 9dffb979, reverted for v0.19.0 by #1388 81960942).
- v0.18.1rc1 (67e4a6b1, main): before v0.19.0's #1362 (6e5d74b2), #1376 (bb033d0f) and #1312 (6f5e2068): the prompt
  filter is query + context x block_size <= max_model_len; exponential decode blocks are 3x the KV blocks without
  contiguous PA (#1124 4ee8db0e), the KV blocks with it; hybrid (mamba) decode contexts are floored at
  batch x floor(max_model_len / block_size), contiguous PA or not; every fallback context is capped at the largest
  decode bucket (prompt ones too), the decode key is not capped and a fallback is appended each time; the runner
  takes the limit's width/height from the first warmed modality only, with or without one.
- v0.17.1 (dafb170c; release-branch cherry-picks of #1124 as #1252 c508c8c8, #1245 as #1246 7bda16f8 and #1207 as
  b6e3adf1 onto v0.17.0rc1's bucketing): v0.18.1rc1 but for
  what #1226 (22264a62) and #1153 (25a31874) changed: features.py declares ``unified_attn`` (VLLM_UNIFIED_ATTN; on, the
  runner warms unified-attention buckets, not modelled: refused), hybrid prompt queries are rounded to the mamba chunk
  even when it is not explicit, and vision.py has no qwen3_5 (batch based 1, 2, 4, 8).

- v0.17.0rc1 - v0.17.1rc1 and v0.18.0rc0 (715451c2, a main snapshot older than v0.17.1's ports; extension/bucketing
  is bb358250 at all three): v0.17.1 before its ports of #1124 (4ee8db0e; #1252 c508c8c8), #1207 (b6e3adf1) and #1245
  (7c1fcbde; #1246 7bda16f8), with the multimodal warm-up of #1085 (26751a40) that #1247 (59922d98; #1256 fa35cdb7)
  undid: exponential decode blocks KV + block_size without contiguous PA (b631d73f #1091), their step count the KV
  blocks'; every fallback context capped at KV + block_size; a fallback query rounded in steps of 32 whatever the
  mamba chunk; bucket-file lines evaluated with ``eval`` (a line it fails on, or not a 3-tuple, skipped); the runner
  reads vLLM's limits as integers: image is warmed unless its count is 0, named or not, no width/height is read and
  every step batches one item.
- v0.16.0rc1 - v0.17.0rc0 (77551b5e; extension/bucketing 511f48f5 at the three): before b631d73f (#1091) exponential
  decode blocks min(batch x floor(max_model_len / block_size), KV x seqs // 4) without contiguous PA, their step count
  the KV blocks', and fallback contexts capped at the KV blocks; vision.py without ernie4_5_moe_vl (3b901095 #813);
  the warm-up reads vLLM's limit options (``get_dummy_options``; batch the named count, the first warmed modality's
  width/height) as v0.17.1 does.
- v0.15.1 (5d6a2db3, release branch): v0.16.0rc1's bucketing and warm-up; vision.py lacks ovis (4866f50b #846),
  pixtral and mistral3 (c27c76ae #871) and deepseek_ocr (53feb4d2 #954).
- v0.16.0rc0 (dd472742) and v0.15.1rc1 (0a4615b7), main snapshots with extension/bucketing @ 37baba9d, from before
  #915 (94643f9d) and #759 (d6b955b5): v0.14.1's rules but for the long-context ones applying at every
  max_model_len (the edge contexts, and the exponential context max (max_model_len - max_num_batched_tokens) //
  block_size), long-context exponential prompt ranges densified (half geometric up to max / count, half in equal
  steps), qwen3_vl listed with VisionArena buckets (512 ... 131076), and a multimodal warm-up that runs vLLM's own
  dummy image (its processor's largest: 3584 x 3584 for Qwen2.5-VL, shrunk to a smaller limit width/height) once
  per vision bucket (five times for batch-based towers), image whatever its limit, video never;
  VLLM_MULTIMODAL_RESOLUTIONS and the buckets do not size it.
- v0.14.1 (c4ecd716, release branch): v0.15.1 but for #980 (1e012ecf, the port of #915 94643f9d): a long-context edge
  context replaces the largest one whenever it is not negative, VLLM_PROMPT_CTX_BUCKET_MAX or not.

- v0.13.0 - v0.13.0.post1 (de3d735d / 906abe3f, extension/bucketing 15eb06d1 at both): 37baba9d's but from before
  #739 (c799e577: no long-context rules at all), #795 (4d05a35e: an exponential range max left rounded up to its
  step), #816 (38558ede: fallback batches not capped at max_num_seqs), #818 (17706394: exponential decode blocks
  min(floor worst case, KV)) and #886 (60beb0f9: no mamba chunk); the warm-up asks vLLM for the dummy image at a
  per-bucket size (a square of the bucket's patches; 896 x 896 for batch-based towers), capped at the processor's
  largest, the limit's width/height not read.

- v0.11.2 (f9b64469): v0.13.0's but from before #645 (955914b0: the exponential query minimum is always the block
  size, VLLM_PROMPT_QUERY_BUCKET_MIN unread, and a range minimum of 1 is spaced from itself: no batch of 1, decode
  blocks from max_num_seqs), #624 (b8515d5f: no speculative-decoding buckets; its runner refuses more than one
  token), #643 (35fbcaea: vision.py's table, gemma-3 and ovis2.5 only, searched with the model's path) and #700
  (e2694850: every tower batch based, and the warm-up batches each bucket's count of vLLM's dummy item for every
  modality, video included, whatever its limit; a limit of 0 fails it).

Recognised but not modelled (:func:`release_for` refuses them with one line; on a host that runs one, the runtime's
own code is asked instead, :mod:`.installed`): v0.11.3 - v0.12 (no tag between v0.11.2 and v0.13.0 to read).
Before v0.11.2 there is no bucket file to plan. Pre-releases are ordered by their number (:func:`parse_version`:
rc0 < rc1 < the release).

A *named* release (``vllm-gaudi==X``, :func:`release_for`) must be one of the tags above (:data:`TAGGED`: every tag
from v0.11.2 to v0.27.0rc0 in the mirror @091bbadd; v0.22.x, v0.23.x and v0.25.x were never tagged) or newer than
the newest of them: such a release came after the code read here, and plans as main @091bbadd, the newest code read,
which the plan says. An installed build (``auto``; a development version between tags) plans as the line its
version falls in (:func:`line_of`).
"""

from __future__ import annotations

import dataclasses

from packaging.version import InvalidVersion
from packaging.version import Version as PackagingVersion

from vllm_hpu_mm.errors import ConfigError

__all__ = [
    "FIRST_FILE_BUCKETING",
    "LINES",
    "MAIN",
    "NEWEST_TAG",
    "TAGGED",
    "Release",
    "beyond_tags",
    "line_of",
    "parse_version",
    "release_for",
]

Version = tuple[int, int, int, int]
#: v0.11.2: the first tag with extension/bucketing/file_strategy.py (VLLM_BUCKETING_FROM_FILE) and vision.py
#: (VLLM_MULTIMODAL_BUCKETS).
FIRST_FILE_BUCKETING: Version = (0, 11, 2, 0)

#: Where a pre-release sorts below its release: dev < a < b < rc, each by its number (capped below the next kind).
_PRE_RELEASE = {"dev": -4000, "a": -3000, "b": -2000, "rc": -1000}
_ACCEPTED_FORM = "accepted: vllm-gaudi==X.Y.Z[rcN|.postN|.devN], e.g. vllm-gaudi==0.26.0"


def parse_version(text: str) -> Version:
    """``0.26.0``, ``v0.27.0rc0``, ``0.19.0.post1``, ``0.28.0.dev12+g091bbadd`` -> an ordered tuple; a pre-release
    sorts before its release and by its number (``0.17.0rc0 < 0.17.0rc1 < 0.17.0 < 0.17.0.post1``). Read as pip reads
    it (PEP 440, the ``packaging`` pip vendors): ``0.19.1-1`` is 0.19.1.post1, ``0.26.0-rc0`` 0.26.0rc0. Raises
    ConfigError naming the accepted form for what pip refuses, and for an epoch or a fourth release number (no
    vllm-gaudi release has one)."""
    try:
        v = PackagingVersion(text.strip())
    except InvalidVersion:
        v = None
    if v is None or v.epoch or len(v.release) > 3:
        raise ConfigError(f"vllm-gaudi version {text!r} is not a version; {_ACCEPTED_FORM}")
    major, minor, patch = (*v.release, 0, 0)[:3]
    # pre-releases (rcN, devN) count as negative, below the release; a post-release as its number above it
    if v.pre is not None:
        return (major, minor, patch, _PRE_RELEASE[v.pre[0]] + min(v.pre[1], 999))
    if v.dev is not None and v.post is None:
        return (major, minor, patch, _PRE_RELEASE["dev"] + min(v.dev, 999))
    return (major, minor, patch, v.post or 0)


@dataclasses.dataclass(frozen=True)
class Release:
    """One release line and the bucketing behaviours that set it apart."""

    #: The line in words, e.g. "v0.24.0 - v0.27.0rc0".
    name: str
    #: First version of the line (inclusive).
    first: Version
    #: The tags checked against their own code (benchmarks/agreement/vllm_gaudi_releases.py); the last one is cited.
    tags: tuple[str, ...]
    #: The short commit of the newest checked tag (or main), cited in messages.
    commit: str
    #: VLLM_BUCKETING_STRATEGY = exp | lin | pad (v0.21.0+); before, VLLM_EXPONENTIAL_BUCKETING picks exp or lin.
    strategy_variable: bool = True
    #: Exponential decode block maximum without contiguous PA: "clamped" (3x KV, main), "worst" (every sequence at
    #: max_model_len), "v0.19" (max(min(worst, KV x seqs // 3), 3 x KV)), "kv3" (3 x KV whatever the worst case;
    #: before v0.19.0), "kv+block" (KV + block_size, its step count that of the KV blocks alone; before #1124),
    #: "seqs/4" (min(worst with floor, KV x seqs // 4), the steps of the KV blocks; before b631d73f #1091), "kv-cap"
    #: (v0.13.0, before 17706394 #818: min(worst with floor, KV), the steps of the KV blocks). With contiguous PA
    #: "v0.19", "kv3", "kv+block", "seqs/4" and "kv-cap" take the KV blocks, the others min(KV, worst).
    exp_decode_max: str = "clamped"
    #: Exponential decode block steps capped at max(6, the decode batch steps) (v0.19.0rc0 only: 9dffb979 #1160,
    #: reverted for v0.19.0 by 81960942 #1388).
    exp_decode_limit_cap: bool = False
    #: Extra exponential decode steps when the worst case exceeds 3x the KV blocks (v0.24.0+).
    exp_decode_compensation: bool = True
    #: Prompt filter (non-merged prefill): "ctx-cap" (v0.19.0+: context <= ceil((max_model_len - 1) / block_size)
    #: and query <= max_model_len) or "query+ctx" (before: query + context x block_size <= max_model_len).
    prompt_filter: str = "ctx-cap"
    #: Hybrid (mamba) models' decode contexts capped at batch x floor(max_model_len / block_size), contiguous PA or
    #: not (before v0.19.0; 6f5e2068 #1312 dropped it); from v0.19.0 the dense rule (ceil, non-contiguous only).
    mamba_decode_floor: bool = False
    #: Fallback buckets (lookups that find none): True (v0.19.0+: a prompt fallback's context capped at
    #: ceil((max_model_len - 1) / block_size), decode keys first capped at the largest prepared context, a duplicate
    #: decode fallback not added again); False (before: every fallback context capped at the largest prepared decode
    #: context, the key not capped, the fallback always appended).
    fallback_caps_per_phase: bool = True
    #: Every fallback context capped at the KV blocks plus this many block sizes instead (None: not): 1 before #1124
    #: (4ee8db0e; #1252 c508c8c8 on v0.17.1, which brought the cap at the largest decode bucket), 0 before b631d73f
    #: #1091. The key is not capped and the fallback always appended.
    fallback_cap_over_kv: int | None = None
    #: A fallback's query rounded with a step of max(32, mamba chunk) (b6e3adf1 #1207); before, 32.
    fallback_seq_step_mamba: bool = True
    #: How a bucket file's lines are read: "literal" (``ast.literal_eval`` after range() expansion, an invalid line
    #: stops start-up; 7c1fcbde #1245 / 7bda16f8 #1246) or "eval" (before: Python ``eval`` with only ``range``; a line
    #: it cannot evaluate, or that is not a 3-tuple, is skipped with a print).
    file_parse: str = "literal"
    #: features.py declares ``unified_attn`` (VLLM_UNIFIED_ATTN; removed by 22264a62 #1226 for v0.18.1rc1): turned on,
    #: the runner warms unified-attention buckets (query, shared blocks, unique blocks), which are not modelled.
    unified_attn_variable: bool = False
    #: Config ``model_type`` values extension/features.py turns fp32 softmax on for: qwen2 and qwen2_5_vl from v0.14.1
    #: (there, while ``unified_attn`` is off, its default, until v0.18.1rc1); qwen2 alone before (v0.13.0 line 69).
    fp32_softmax_model_types: tuple[str, ...] = ("qwen2", "qwen2_5_vl")
    #: Hybrid (mamba) prompt queries are rounded up to the chunk size only when the chunk size is explicit
    #: (v0.18.1rc1+, 25a31874 #1153); before, whenever the model has one.
    mamba_round_explicit_only: bool = True
    #: A long-context edge context replaces the largest one only below VLLM_PROMPT_CTX_BUCKET_MAX (#915 94643f9d /
    #: #980 1e012ecf on v0.15.1); before, whenever it is not negative.
    edge_ctx_capped: bool = True
    #: Where the long-context rules apply, the prompt edge contexts (what still fits max_model_len per query replaces
    #: the largest context) and the exponential context max (max_model_len - max_num_batched_tokens) // block_size
    #: (else the query min replaces max_num_batched_tokens): "long" (max_model_len >= 8192: #915 94643f9d; #918
    #: 35230841 on v0.14.1, #980 1e012ecf on v0.15.1), "every" (@ 37baba9d) or "none" (v0.13.0, before c799e577
    #: #739: neither exists).
    long_ctx_rules: str = "long"
    #: At max_model_len >= 8192 the exponential prompt ranges (batch, query, context) take floor(count / 2) values
    #: geometrically from their min to max / count and the rest in equal steps up to the max (@ 37baba9d; #915
    #: 94643f9d removed it); decode ranges never (a fresh strategy object is not long-context).
    exp_prompt_densified: bool = False
    #: warmup_range_with_limit's last value is clamped to the range max (4d05a35e #795); before (v0.13.0) a max that
    #: is not a multiple of the step stays rounded up (e.g. decode blocks 8781 in steps of 256 -> 8960).
    exp_range_clamped: bool = True
    #: The manager knows hybrid (mamba) models' chunk size (60beb0f9 #886 / edb9b733 #885 on v0.14.1); before
    #: (v0.13.0) it does not: no query rounding, no hybrid decode corrector.
    mamba_aware: bool = True
    #: A fallback's batch is capped at max_num_seqs (38558ede #816); before (v0.13.0) not.
    fallback_bs_capped: bool = True
    #: A VLLM_PROMPT_QUERY_BUCKET_MIN of 1 makes the exponential query minimum 1, and warmup_range_with_limit treats
    #: a minimum of 1 as it does 0: spaced from the step, then added back (955914b0 #645). Before (v0.11.2) the query
    #: minimum is always the block size and a minimum of 1 is spaced geometrically from 1 itself, so the exponential
    #: batch ranges have no 1 and the decode blocks start at max_num_seqs.
    exp_min_one: bool = True
    #: With speculative decoding the manager adds decode buckets for batch x (1 + tokens) (b8515d5f #624); before
    #: (v0.11.2) it is given no token count and adds none (its runner then allows one speculative token).
    spec_decode_buckets: bool = True
    #: vision.py's table is searched with the model's path (``--model`` as vLLM holds it) and every model is batch
    #: based whatever the table says (v0.11.2: the runner passes ``model_config.model``, the manager's is_batch_based
    #: defaults to True); the runner passes the model's type from 35fbcaea (#643) and the table's flag counts from
    #: e2694850 (#700).
    vision_by_path: bool = False
    #: vision.py MULTIMODAL_CONFIG entries whose default buckets this release lists differently: (key, buckets).
    vision_table_buckets: tuple[tuple[str, tuple[int, ...]], ...] = ()
    #: How the multimodal warm-up picks its images: "shapes" (a width/height per step, as the mm_* fields say) or
    #: "dummy" (@ 37baba9d: vLLM's own dummy image, its processor's size, once per vision bucket, five times for
    #: batch-based towers; image only, whatever its limit; VLLM_MULTIMODAL_RESOLUTIONS and the buckets do not size
    #: it, a smaller --limit-mm-per-prompt image width/height shrinks it; #759 d6b955b5 / #958 b3c0ca62 replaced it)
    #: or "options" (v0.13.0: the same loop, the dummy image asked for at a per-bucket size: a square of
    #: int(sqrt(patches)) x int(patches / that) patches, 896 x 896 for batch-based towers, each side capped at the
    #: processor's largest; the limit's width/height not read) or "bucket-count" (v0.11.2, until e2694850 #700: every
    #: modality vLLM's budget lists, video included and whatever its limit, one step per bucket batching the
    #: bucket's count of vLLM's dummy item for that modality, its processor's largest shrunk to a smaller limit
    #: width/height; vLLM refuses a dummy item over a modality's limit, so a limit of 0 fails the warm-up).
    mm_warmup: str = "shapes"
    #: vision.py MULTIMODAL_CONFIG keys this release does not list yet (their models fall back to batch based).
    vision_table_absent: tuple[str, ...] = ()
    #: Why this line is recognised but not modelled ("" = modelled): :func:`release_for` refuses it with this reason.
    not_modelled: str = ""
    #: Linear strategy: the decode block max is clamped to the KV blocks only under contiguous PA (v0.21.0+).
    lin_clamp_contiguous_only: bool = True
    #: Whether vision.py reads VLLM_MULTIMODAL_RESOLUTIONS (v0.26.0+).
    reads_resolutions: bool = True
    #: Items per vision warm-up step: "per-shape" (v0.26.0+: guessed shapes 1, explicit ones their WxHxN count or
    #: the limit's, falling back across image/video) or "limit" (before: every step the modality's own limit count).
    #: ``"one"``: every step one item (v0.17.0rc1 - v0.18.0rc0: the runner reads vLLM's limit as an integer,
    #: 26751a40 #1085, which has no count attribute).
    mm_step_items: str = "per-shape"
    #: The limit's width/height: "every" (v0.26.0+: each modality's, after the guessed shapes, deduplicated) or
    #: "first" (v0.19.0 - v0.24.0: the first warmed modality that has one, image before video, before the guessed
    #: shapes) or "first-warmed" (before v0.19.0: the first warmed modality's, if it has one; no search further).
    #: ``"none"``: no width/height is read (v0.17.0rc1 - v0.18.0rc0: an integer limit has none).
    mm_limit_shapes: str = "every"
    #: Image is warmed unless its limit is 0, also when --limit-mm-per-prompt does not name it (vLLM's 999;
    #: v0.17.0rc1 - v0.18.0rc0, 26751a40 #1085, until #1247 59922d98 / #1256 fa35cdb7 read the named options again).
    mm_image_warmed_unnamed: bool = False
    #: vision.py lists qwen3_5, kimi_k25 and gemma4 as native-resolution towers without default buckets (v0.26.0+);
    #: before, qwen3_5 has patch buckets and the other two fall back to batch based 1, 2, 4, 8.
    native_resolution_towers: bool = True

    def __str__(self) -> str:
        return f"vllm-gaudi {self.name} (@{self.commit})"


VLLM_MAIN_FULL = "091bbadda10bee4fd3f6d0efc1844d2610dd2707"


def _before_v0_26_vision(release: Release) -> Release:
    """``release`` with the multimodal warm-up of v0.19.0 - v0.24.0 (hpu_model_runner.py and vision.py @ 90815f2f,
    the same at da9f1820)."""
    return dataclasses.replace(release, reads_resolutions=False, mm_step_items="limit", mm_limit_shapes="first",
                               native_resolution_towers=False)  # fmt: skip


def _before_v0_19(release: Release) -> Release:
    """``release`` with what v0.18.1rc1 (67e4a6b1) does differently from v0.19.0 (da9f1820): common.py's prompt filter,
    hybrid decode corrector and fallback caps, exponential.py's 3x KV decode maximum, and the runner's search for the
    limit's width/height."""
    return dataclasses.replace(release, prompt_filter="query+ctx", mamba_decode_floor=True, exp_decode_max="kv3",
                               fallback_caps_per_phase=False, mm_limit_shapes="first-warmed")  # fmt: skip


def _v0_17_1(name: str, first: Version, tags: tuple[str, ...], commit: str) -> Release:
    """v0.17.1 (dafb170c): v0.18.1rc1 but for what #1226 (22264a62) and #1153 (25a31874) changed."""
    return _before_v0_19(_before_v0_26_vision(Release(
        name, first, tags, commit, strategy_variable=False, exp_decode_compensation=False,
        lin_clamp_contiguous_only=False, unified_attn_variable=True, mamba_round_explicit_only=False,
        vision_table_absent=("qwen3_5",),
    )))  # fmt: skip


def _before_v0_17_1(release: Release) -> Release:
    """``release`` with what v0.17.0rc1 - v0.17.1rc1 and v0.18.0rc0 (extension/bucketing @ bb358250) do differently
    from v0.17.1: the decode range and fallback before #1124, the fallback query step before #1207, the bucket file
    read with ``eval`` before #1245, and the multimodal warm-up reading vLLM's integer limits (#1085 until #1247)."""
    return dataclasses.replace(release, exp_decode_max="kv+block", fallback_cap_over_kv=1,
                               fallback_seq_step_mamba=False, file_parse="eval", mm_step_items="one",
                               mm_limit_shapes="none", mm_image_warmed_unnamed=True)  # fmt: skip


def _before_v0_17_0rc1(release: Release, absent: tuple[str, ...] = ()) -> Release:
    """``release`` with what v0.16.0rc1 - v0.17.0rc0 (extension/bucketing @ 511f48f5) do differently from v0.17.0rc1:
    the decode range and fallback cap before b631d73f (#1091), no ernie4_5_moe_vl in vision.py (3b901095 #813), and
    the multimodal warm-up reading vLLM's limit options (``get_dummy_options``) as v0.17.1 does. ``absent``: more
    vision.py entries the release lacks."""
    return dataclasses.replace(release, exp_decode_max="seqs/4", fallback_cap_over_kv=0,
                               vision_table_absent=(*release.vision_table_absent, "ernie4_5_moe_vl", *absent),
                               mm_step_items="limit", mm_limit_shapes="first-warmed",
                               mm_image_warmed_unnamed=False)  # fmt: skip


#: vision.py @ 37baba9d lists qwen3_vl with buckets sized for lmarena-ai/VisionArena-Chat.
_QWEN3_VL_VISIONARENA = (512, 1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192, 9216, 10240, 11264, 12288, 131076)


def _bucketing_37baba9d(release: Release) -> Release:
    """``release`` (v0.14.1's rules) with what extension/bucketing @ 37baba9d and its runner do differently (main
    before #915 94643f9d and #759 d6b955b5): long-context rules at every max_model_len, densified long-context
    exponential prompt ranges, qwen3_vl's VisionArena buckets and the warm-up of vLLM's own dummy image."""
    return dataclasses.replace(release, long_ctx_rules="every", exp_prompt_densified=True,
                               vision_table_buckets=(("qwen3_vl", _QWEN3_VL_VISIONARENA),),
                               mm_warmup="dummy")  # fmt: skip


def _v0_14_1(name: str, first: Version, tags: tuple[str, ...], commit: str) -> Release:
    """v0.14.1 (c4ecd716): v0.15.1 but for #980 (1e012ecf): the edge contexts are not held below
    VLLM_PROMPT_CTX_BUCKET_MAX."""
    return dataclasses.replace(
        _before_v0_17_0rc1(_before_v0_17_1(_v0_17_1(name, first, tags, commit)),
                           absent=("ovis", "pixtral", "mistral3", "deepseek_ocr")),
        edge_ctx_capped=False,
    )  # fmt: skip


def _v0_13_0(release: Release) -> Release:
    """``release`` (@ 37baba9d) with what v0.13.0 (de3d735d; extension/bucketing 15eb06d1) does differently, before
    #739 (c799e577: edge contexts, densified long-context ranges), #795 (4d05a35e: range max not above bmax), #816
    (38558ede: fallback batch capped), #818 (17706394: decode max KV x seqs // 4) and #886 (60beb0f9: mamba chunk),
    and with the dummy image asked for at a per-bucket size."""
    return dataclasses.replace(release, long_ctx_rules="none", exp_prompt_densified=False, exp_decode_max="kv-cap",
                               exp_range_clamped=False, mamba_aware=False, fallback_bs_capped=False,
                               mm_warmup="options", fp32_softmax_model_types=("qwen2",))  # fmt: skip


#: vision.py's MULTIMODAL_CONFIG keys v0.11.2 lacks: it lists only gemma-3 and ovis2.5.
_ABSENT_AT_V0_11_2 = ("ovis", "qwen2_5_vl", "qwen3_vl", "ernie4_5_moe_vl", "pixtral", "mistral3", "deepseek_ocr",
                      "qwen3_5")  # fmt: skip


def _v0_11_2(release: Release) -> Release:
    """``release`` (v0.13.0's) with what v0.11.2 (f9b64469) does differently: before #645 (955914b0: no query
    minimum of 1, a range minimum of 1 spaced from itself), #624 (b8515d5f: no speculative-decoding buckets), #643
    (35fbcaea: the vision table, without qwen2_5_vl, searched with the model's path) and #700 (e2694850: every model
    batch based, no qwen3_vl, and each bucket's count of every modality's dummy item warmed)."""
    return dataclasses.replace(release, exp_min_one=False, spec_decode_buckets=False, vision_by_path=True,
                               mm_warmup="bucket-count", vision_table_absent=_ABSENT_AT_V0_11_2)  # fmt: skip


#: main @091bbadd, the newest line (and any version from 0.27.0 on: no later tag was available to read).
MAIN = Release("main", (0, 27, 0, 0), (VLLM_MAIN_FULL,), "091bbadd")

#: Newest first. ``first`` of each line is the first release tag with that behaviour.
LINES: tuple[Release, ...] = (
    MAIN,
    Release(
        "v0.26.0rc0 - v0.27.0rc0",
        parse_version("0.26.0rc0"),
        ("v0.26.0rc0", "v0.26.0", "v0.27.0rc0"),
        "d01a3cae",
        exp_decode_max="worst",
    ),
    _before_v0_26_vision(
        Release(
            "v0.24.0",
            (0, 24, 0, 0),
            ("v0.24.0",),
            "90815f2f",
            exp_decode_max="worst",
        )
    ),
    _before_v0_26_vision(
        Release(
            "v0.21.0 - v0.24.0rc0",
            (0, 21, 0, 0),
            ("v0.21.0", "v0.24.0rc0"),
            "1ba0374e",
            exp_decode_max="worst",
            exp_decode_compensation=False,
        )
    ),
    # main snapshots between v0.19.0's branch point and v0.21.0: the pad strategy and VLLM_BUCKETING_STRATEGY
    # (c2641a62 #762), with v0.19.0's common.py (v0.20.1rc0) or v0.19.0rc0's (v0.20.0rc0)
    _before_v0_26_vision(
        Release(
            "v0.20.1rc0",
            parse_version("0.20.1rc0"),
            ("v0.20.1rc0",),
            "8ddfdc9e",
            exp_decode_max="kv3",
            exp_decode_compensation=False,
            lin_clamp_contiguous_only=False,
        )
    ),
    _before_v0_19(
        _before_v0_26_vision(
            Release(
                "v0.20.0rc0",
                parse_version("0.20.0rc0"),
                ("v0.20.0rc0",),
                "8a9d6985",
                exp_decode_compensation=False,
                exp_decode_limit_cap=True,
                lin_clamp_contiguous_only=False,
            )
        )
    ),
    _before_v0_26_vision(
        Release(
            "v0.19.0 - v0.19.1.post1",
            (0, 19, 0, 0),
            ("v0.19.0", "v0.19.0.post1", "v0.19.1", "v0.19.1.post1"),
            "56775fdd",
            strategy_variable=False,
            exp_decode_max="v0.19",
            exp_decode_compensation=False,
            lin_clamp_contiguous_only=False,
        )
    ),
    _before_v0_19(
        _before_v0_26_vision(
            Release(
                "v0.19.0rc0",
                parse_version("0.19.0rc0"),
                ("v0.19.0rc0",),
                "9dffb979",
                strategy_variable=False,
                exp_decode_compensation=False,
                exp_decode_limit_cap=True,
                lin_clamp_contiguous_only=False,
            )
        )
    ),
    _before_v0_19(
        _before_v0_26_vision(
            Release(
                "v0.18.1rc1",
                parse_version("0.18.1rc1"),
                ("v0.18.1rc1",),
                "67e4a6b1",
                strategy_variable=False,
                exp_decode_compensation=False,
                lin_clamp_contiguous_only=False,
            )
        )
    ),
    # a main snapshot older than v0.17.1's release-branch ports (the same bucketing as v0.17.0rc1 and v0.17.1rc1)
    _before_v0_17_1(_v0_17_1("v0.18.0rc0", parse_version("0.18.0rc0"), ("v0.18.0rc0",), "715451c2")),
    _v0_17_1("v0.17.1", (0, 17, 1, 0), ("v0.17.1",), "dafb170c"),
    _before_v0_17_1(
        _v0_17_1("v0.17.0rc1 - v0.17.1rc1", parse_version("0.17.0rc1"), ("v0.17.0rc1", "v0.17.1rc1"), "4072009a")
    ),
    _before_v0_17_0rc1(
        _before_v0_17_1(
            _v0_17_1(
                "v0.16.0rc1 - v0.17.0rc0",
                parse_version("0.16.0rc1"),
                ("v0.16.0rc1", "v0.16.0", "v0.17.0rc0"),
                "77551b5e",
            )
        )
    ),
    # a main snapshot with v0.15.1rc1's bucketing (extension/bucketing @ 37baba9d)
    _bucketing_37baba9d(_v0_14_1("v0.16.0rc0", parse_version("0.16.0rc0"), ("v0.16.0rc0",), "dd472742")),
    # v0.16.0rc1's bucketing and warm-up (release-branch ports of #915 as 1e012ecf #980 and #759 as b3c0ca62 #958)
    # without the vision.py entries #846, #871 and #954 added on main
    _before_v0_17_0rc1(
        _before_v0_17_1(
            _v0_17_1("v0.15.1", (0, 15, 1, 0), ("v0.15.1",), "5d6a2db3"),
        ),
        absent=("ovis", "pixtral", "mistral3", "deepseek_ocr"),
    ),
    # a main snapshot with the bucketing v0.16.0rc0 has
    _bucketing_37baba9d(_v0_14_1("v0.15.1rc1", parse_version("0.15.1rc1"), ("v0.15.1rc1",), "0a4615b7")),
    _v0_14_1("v0.14.1", (0, 14, 1, 0), ("v0.14.1",), "c4ecd716"),
    _v0_13_0(
        _bucketing_37baba9d(
            _v0_14_1("v0.13.0 - v0.13.0.post1", (0, 13, 0, 0), ("v0.13.0", "v0.13.0.post1"), "906abe3f")
        )
    ),
    # no tag between v0.11.2 and v0.13.0 in vllm-project/vllm-gaudi: nothing to read such a version's code at
    Release(
        "v0.11.3 - v0.12",
        parse_version("0.11.3.dev0"),
        (),
        "f9b64469..de3d735d",
        not_modelled="no vllm-gaudi tag lies between v0.11.2 and v0.13.0 to read its bucketing at",
    ),
    _v0_11_2(_v0_13_0(_bucketing_37baba9d(_v0_14_1("v0.11.2", FIRST_FILE_BUCKETING, ("v0.11.2",), "f9b64469")))),
)


def line_of(version: str | None) -> Release:
    """The line any vllm-gaudi version falls in, tagged or not (an installed development build; None or "main" =
    main @091bbadd). Versions from 0.27.0 on plan as main; versions before the oldest modelled line, or from 1.0 on
    (no release has one), are refused."""
    if version is None or version.strip().lower() in ("main", "091bbadd", VLLM_MAIN_FULL):
        return MAIN
    v = parse_version(version)
    if v >= _BEYOND_MAIN:
        # vllm-gaudi follows vLLM's 0.x versions: a later 0.x plans as the newest model (main), a 1.0 or later
        # is no release at all (a typo, or a version no code has been read for)
        raise ConfigError(f"vllm-gaudi=={version}: no vllm-gaudi release has it (they follow vLLM's 0.x versions; "
                          f"after {NEWEST_TAG_NAME} they plan as main @091bbadd, the newest code read); "
                          f"{_ASK_ITS_OWN}; {_ACCEPTED}")  # fmt: skip
    for line in LINES:
        if v >= line.first:
            if line.not_modelled:
                raise ConfigError(f"vllm-gaudi=={version}: {line.not_modelled}; {_ASK_ITS_OWN}; {_ACCEPTED}")
            return line
    # only versions before v0.11.2 are left: no line starts below it
    why = (
        "older than the oldest release modelled, v0.11.2: before it vllm-gaudi has no bucket file "
        "(VLLM_BUCKETING_FROM_FILE) nor vision buckets to plan"
    )
    raise ConfigError(f"vllm-gaudi=={version}: {why}; {_ACCEPTED}")


def release_for(version: str | None) -> Release:
    """The line of a *named* release (``vllm-gaudi==X``; None or "main" = main @091bbadd): X must be a tag read here
    (:data:`TAGGED`) or newer than the newest (it then plans as main, :func:`beyond_tags`); a version between tags
    that no release has (0.22.0, 0.11.3, 0.26.1) is refused in one line listing the releases accepted."""
    line = line_of(version)
    if beyond_tags(version):  # newer than every tag read, a pre-release too (0.27.0rc1): main's code stands for it
        return MAIN
    if version is not None and line is not MAIN and parse_version(version) not in TAGGED:
        raise ConfigError(f"vllm-gaudi=={version}: no vllm-gaudi release has it (vllm-project/vllm-gaudi has no tag "
                          f"for it up to {NEWEST_TAG_NAME}); {_ASK_ITS_OWN}; {_ACCEPTED}")  # fmt: skip
    return line


def beyond_tags(version: str | None) -> bool:
    """Whether a version is newer than the newest tag read (it plans as main @091bbadd, whose code stands for it)."""
    if version is None or version.strip().lower() in ("main", "091bbadd", VLLM_MAIN_FULL):
        return False
    return parse_version(version) > NEWEST_TAG


#: The first version no vllm-gaudi release can have (they follow vLLM's 0.x).
_BEYOND_MAIN = parse_version("1.0.0.dev0")
#: Every release tag of vllm-project/vllm-gaudi from v0.11.2 on, as read here (the lines' tags): a named release
#: must be one of them or newer than the newest.
_TAG_NAMES = sorted({t for line in LINES for t in line.tags if t.startswith("v")}, key=parse_version)
TAGGED: frozenset[Version] = frozenset(parse_version(t) for t in _TAG_NAMES)
NEWEST_TAG: Version = parse_version(_TAG_NAMES[-1])
NEWEST_TAG_NAME = _TAG_NAMES[-1]
_ASK_ITS_OWN = "on a host that runs it, auto (--runtime, or --plan-runtime under serve) asks its own code"
_ACCEPTED = (
    f"accepted: a tagged release ({', '.join(t.removeprefix('v') for t in _TAG_NAMES)}), a later 0.x "
    f"(after {NEWEST_TAG_NAME}: planned as main @091bbadd, the newest code read), or main"
)

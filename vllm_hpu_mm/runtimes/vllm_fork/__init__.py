"""HabanaAI/vllm-fork (habana_main, the runtime the Gaudi guide describes): what it does with your environment.

- Memory: available = free x ``gpu_memory_utilization``; graphs = available x ``VLLM_GRAPH_RESERVED_MEM``. It runs a
  profiling forward pass before sizing the KV cache.
- Graphs, as the release line planned for (:mod:`.releases`; newest v0.9.0.1+Gaudi-1.22.0) warms them
  (:func:`traits_for`): 1.17 - 1.21.3 give prefill graphs x ``VLLM_GRAPH_PROMPT_RATIO`` and capture ascending while
  the per-bucket estimate fits each pool, the rest skipped; 1.22 reads no ratio and warms every prompt, decode and
  vision bucket (``VLLM_MULTIMODAL_BUCKETS``, read from 1.22 only) with no memory check. No release reads
  ``VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO`` (the guide documents it; only development branches such as
  ig/qwen2_5-vl_visionTransformer read it). Its text buckets are generated as that line's code does
  (:mod:`.bucketing`, :mod:`.linear`, :mod:`.exponential`) from the user's ``VLLM_*_BUCKET_*`` variables.
- What ``serve`` hands it: :mod:`.exports`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from vllm_hpu_mm.engine import EngineShape, TextShapes
from vllm_hpu_mm.runtimes.arithmetic import gaudi_guide_split
from vllm_hpu_mm.runtimes.base import (
    EXTENSION_TRUE,
    FP32_SOFTMAX,
    FP32_SOFTMAX_VISION,
    GRAPH_PROMPT_RATIO,
    GRAPH_RESERVED_MEM,
    SKIP_WARMUP,
    VISION_BUCKETS,
    BatchLimits,
    DeviceFacts,
    MemoryInputs,
    MemorySplit,
    NoBucketList,
    ProfileCosts,
    ReleaseParser,
    Runtime,
    RuntimeEntry,
    RuntimeTraits,
    UnwarmedGraphs,
    VisionBucketing,
)
from vllm_hpu_mm.runtimes.vllm_fork import bucketing as _bucketing
from vllm_hpu_mm.runtimes.vllm_fork.bucketing import (
    ForkBucketing,
    config_from_env,
    generate,
    largest_prompt_shape,
    strategy_of,
)
from vllm_hpu_mm.runtimes.vllm_fork.releases import LINES, NEWEST, Release, architectures_of, release_for
from vllm_hpu_mm.values import MIB

__all__ = [
    "ENTRY",
    "PROFILE_RESIDUE_BYTES",
    "TRAITS",
    "VllmFork",
    "describe_release",
    "model_from_env",
    "profile_pass",
    "profile_residue_bytes",
    "traits_for",
]

#: What the fork's profiling run leaves held when its pass cannot be sized (no engine sizes given): the development
#: log's "Model profiling run took 355 MiB" (tests/data/gaudi_logs/dev/vllm_gaudi_perf_tuning_llama31_8b_gaudi2.log).
PROFILE_RESIDUE_BYTES = 355 * MIB

#: The fork's flag for loading weights on the host before they move to the card.
WEIGHTS_LOAD_DEVICE = "--weights-load-device"


def profile_pass(p: ProfileCosts, bucketing: ForkBucketing | None = None) -> tuple[int, int]:
    """The fork's profiling pass, (batch, tokens per sequence), as the line of ``bucketing`` runs it (None: the
    newest line, no bucket variables). Every released line profiles its largest prompt shape, never the whole
    ``max_model_len`` unless its prompt buckets reach it (:func:`.bucketing.largest_prompt_shape`):

    - 1.17 (``habana_model_runner.py`` ``profile_run`` @1e0e492e1:1032): the prompt batch and seq maxima;
    - 1.18 (@84922944d:1295): the prompt batch maximum, each sequence ``min(seq maximum, max_num_batched_tokens //
      batch)``;
    - 1.19 - 1.22 (#415, 892c09026; ``hpu_model_runner.py`` @6af2f6752, @2e9b2b3d4:2803): the largest prompt
      query, ``min(max_num_seqs, max_num_batched_tokens // query)`` sequences; 1.22 profiles an mrope / multimodal
      model at batch 1.

    habana_main after #1908 (c23295567, 2025-09-12, in no release tag) runs ``max_model_len`` tokens instead; it is
    planned as the newest line, whose exponential prompt buckets reach ``max_model_len`` whenever the token budget
    does (the V0 default, ``max(max_model_len, 2048)``)."""
    cfg = bucketing if bucketing is not None else ForkBucketing()
    e = p.engine
    bs_max, seq = largest_prompt_shape(cfg, e)
    if cfg.release.generation == "intree2024":
        return bs_max, seq
    if cfg.release.generation == "intree118":
        return bs_max, max(1, min(seq, e.max_num_batched_tokens // bs_max))
    if p.multimodal and cfg.release.generation == "ext122":
        return 1, seq
    return max(1, min(e.max_num_seqs, e.max_num_batched_tokens // seq)), seq


def profile_residue_bytes(p: ProfileCosts | None, bucketing: ForkBucketing | None = None) -> int:
    """What the profiling pass leaves held before free memory is read (``hpu_worker.determine_num_available_blocks``
    reads ``mem_get_info`` after it: "the maximum workspace for all recipes"): one layer's activations over the
    pass's tokens, the sequences' logits and, for a multimodal model, the vision tower's peak. Without engine sizes
    the development log's 355 MiB."""
    if p is None or not p.token_bytes:
        return PROFILE_RESIDUE_BYTES
    batch, length = profile_pass(p, bucketing)
    return batch * length * p.token_bytes + batch * p.logits_bytes_per_seq + (p.vision_bytes if p.multimodal else 0)


def _contiguous_pa(generation: str) -> Callable[[str | None, bool, bool], bool]:
    """Whether a line's V0 runner turns contiguous PA on, from the raw ``VLLM_CONTIGUOUS_PA`` (None: unset), prefix
    caching asked for and a multimodal model (its V0 engine drops prefix caching for one from 1.21.2:
    ``arg_utils.py`` ``_set_default_args_v0``, "not supported for multimodal models in V0")."""

    def on(raw: str | None, prefix_caching: bool, multimodal: bool) -> bool:
        caching = prefix_caching and not (multimodal and generation in ("ext1212", "ext122"))
        if generation == "ext122":  # the extension's Value: VLLM_CONTIGUOUS_PA as its boolean, else not prefix caching
            return raw.lower() in EXTENSION_TRUE if raw is not None else not caching
        if raw is None and caching and generation != "ext119":  # 1.21 defaults the variable to "False" then
            raw = "False"
        value = (raw if raw is not None else "true").lower()
        # 1.21.2 - 1.21.3 end on envs.VLLM_USE_HPU_CONTIGUOUS_CACHE_FETCH, which takes "1" too (vllm/envs.py:652)
        return value in ("1", "true") if generation == "ext1212" else value == "true"

    return on


def _with_speculative(traits: RuntimeTraits, release: Release) -> RuntimeTraits:
    """``traits`` with ``release``'s speculative-decoding refusal (:attr:`.releases.Release.speculative_refused`)."""
    source = release.speculative_refused
    return dataclasses.replace(traits, speculative_refused_with_contiguous_pa=source,
                               contiguous_pa=_contiguous_pa(release.generation) if source else None)  # fmt: skip


def _with_registry(traits: RuntimeTraits, release: Release) -> RuntimeTraits:
    """``traits`` with the architectures ``release`` can load: its registry, and whether vLLM falls back to its
    Transformers backend for an unlisted text model (``TransformersModel`` first in 1.21.0 ``registry.py:194``
    @0275ce4c2)."""
    names = architectures_of(release)
    source = f"vllm-fork {release.name}'s model registry (vllm/model_executor/models/registry.py @{release.commit})"
    return dataclasses.replace(traits, architectures=names, architectures_source=source,
                               transformers_fallback=any(a.startswith("Transformers") for a in names),
                               releases_listing=_lines_listing)  # fmt: skip


def _lines_listing(architecture: str) -> tuple[str, ...]:
    """The lines whose registry lists ``architecture``, as ``--runtime vllm-fork==X`` takes each (its base and, where
    a base has two lines, the Gaudi suffix that picks it), newest first."""
    return tuple(f"vllm-fork=={r.spec} ({r.name})" for r in LINES if architecture in architectures_of(r))


def _no_kv_cache_memory_bytes(release: Release) -> str:
    """Why the release's server refuses --kv-cache-memory-bytes: ``git grep -i kv.cache.memory`` finds nothing in
    ``vllm/engine/arg_utils.py`` nor ``vllm/config.py`` at any tag modelled (1e0e492e1 to 2e9b2b3d4), nor at
    habana_main @95af7009."""
    return (f"its vLLM (vllm/engine/arg_utils.py @{release.commit}, {release.name}) has no kv_cache_memory_bytes: "
            "its server refuses the flag")  # fmt: skip


#: The newest line's traits (what a plain ``vllm-fork`` plans); :func:`traits_for` gives each line's.
TRAITS = RuntimeTraits(
    backend="hpu",
    reads=frozenset({GRAPH_RESERVED_MEM}),
    profiles_forward=True,
    fp32_softmax_default=True,
    fp32_softmax_model_types=("qwen2",),
    fp32_softmax_note=f"vllm-fork {NEWEST.name} turns fp32 softmax on for qwen2 ({NEWEST.fp32_softmax_source}); "
    "VLLM_FP32_SOFTMAX overrides it",
    enforced_by="serve exports the vision buckets that fit; the text buckets are the release's own, all warmed",
    # 1.22 reads 'None' as no list (VisionBuckets, :116-117), copies it for an mrope model (profile_run, :2811), and
    # its warm-up summary then takes len() of it; only VLLM_SKIP_WARMUP or --enforce-eager skips that (:3209, :3231)
    none_buckets_fail_warmup="its warm-up summary takes len() of the bucket list (log_graph_warmup_summary, "
    f"vllm/worker/hpu_model_runner.py:3155 @{NEWEST.commit})",
    warms_all_graphs=True,
    # warmup_model returns on skip_warmup (:3209) and _use_graphs reads only --enforce-eager (:1402)
    unwarmed_graphs=UnwarmedGraphs(
        True, f"warmup_model returns, _use_graphs does not read it: vllm/worker/hpu_model_runner.py @{NEWEST.commit}"
    ),
    own_knobs=frozenset({VISION_BUCKETS, SKIP_WARMUP, WEIGHTS_LOAD_DEVICE}),
    # its V0 worker and executor paths and early names; vLLM V0 on Gaudi is the fork's (vllm-gaudi is a V1 plugin)
    log_marks=r"vllm-fork|vllm/worker/hpu_|vllm/executor/hpu_|habana_main|# HPU blocks"
    r"|habana_(?:model_runner|worker|executor)|Initializing a V0 LLM engine|VllmWorkerProcess",
    # its newest release tag is v0.9.0.1+Gaudi-1.22.0 (2e9b2b3d4), and no branch describes past it (habana_main
    # @95af7009 is v0.6.2-5496): its servers print vLLM 0.9.x or older; vllm-gaudi's first tag is v0.10.0
    newest_vllm=(0, 9),
    warmup_era=NEWEST.warmup_era,
    # 0.9 at every tag modelled: EngineArgs.gpu_memory_utilization in vllm/engine/arg_utils.py 1.17 - 1.21.0
    # (@1e0e492e1:63 to @0275ce4c2:127), CacheConfig.gpu_memory_utilization in vllm/config.py from 1.21.2
    # (@9f1222c50 and @3bcdfd4af:1346, @2e9b2b3d4:1453)
    default_gpu_memory_utilization=0.9,
    kv_cache_memory_bytes="unknown",
    null_block=False,
    # 1.18 to 1.22 (1.17 lacks fp8_inc): bfloat16 / float16 are vLLM's later additions
    kv_cache_dtypes=("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"),
    kv_cache_dtypes_source="the choices of its --kv-cache-dtype, CacheDType in vllm/config.py @2e9b2b3d4",
    kv_cache_memory_bytes_source=_no_kv_cache_memory_bytes(NEWEST),
    image="vllm-gaudi:latest",  # the Gaudi image name the docs use for both Gaudi runtimes
    booleans=tuple(
        (v, EXTENSION_TRUE, f"vllm_hpu_extension/config.py boolean @{NEWEST.extension}")
        for v in (SKIP_WARMUP, FP32_SOFTMAX)
    )
    + _bucketing.boolean_readings(NEWEST),
    not_read=_bucketing.not_read(NEWEST),
)
TRAITS = _with_speculative(_with_registry(TRAITS, NEWEST), NEWEST)


def _booleans(release: Release) -> tuple[tuple[str, frozenset[str], str], ...]:
    """How a line before 1.22 reads its booleans: the V0 runner compares VLLM_SKIP_WARMUP with 'true' only
    (``habana_model_runner.py:1505`` @84922944d, ``hpu_model_runner.py:837-838`` @3bcdfd4af, the same at every tag
    in between), and the extension's EnvFlag VLLM_FP32_SOFTMAX with 'true' or '1' (``flags.py:90`` @d4b0d38,
    ``:93`` @29bc7a4)."""
    runner = "habana_model_runner.py" if release.extension is None else "hpu_model_runner.py"
    out = [(SKIP_WARMUP, frozenset({"true"}), f"vllm/worker/{runner} @{release.commit}: only 'true'")]
    if release.fp32_softmax_source:
        out.append((FP32_SOFTMAX, frozenset({"true", "1"}),
                    f"vllm_hpu_extension/flags.py EnvFlag @{release.extension}: only 'true' or '1'"))  # fmt: skip
    return tuple(out) + _bucketing.boolean_readings(release)


def _unwarmed(release: Release) -> UnwarmedGraphs:
    """What a line before 1.22 graphs under a skipped warm-up (:attr:`.releases.Release.graphs_unwarmed`)."""
    runner = "habana_model_runner.py" if release.extension is None else "hpu_model_runner.py"
    if release.graphs_unwarmed:
        return UnwarmedGraphs(True, f"_use_graphs returns True on skip_warmup: vllm/worker/{runner} @{release.commit}")
    return UnwarmedGraphs(False, f"_use_graphs: vllm/worker/{runner} @{release.commit}")


def _not_read(release: Release) -> tuple[tuple[str, str], ...]:
    """Our variables a line before 1.22 does not read, with where that shows: the vision buckets (1.22's
    ``VisionBuckets``, #1178 6bac2f76b), the vision tower's fp32 softmax (1.22's ``qwen2_5_vl.py``) and, before 1.20,
    ``VLLM_FP32_SOFTMAX`` (``git grep`` at each tag and the extension it pins)."""
    where = f"vllm-fork {release.name} (@{release.commit}" + (f", extension @{release.extension})" if release.extension
                                                              else ")")  # fmt: skip
    out = []
    if not release.fp32_softmax_source:
        out.append((FP32_SOFTMAX, f"no fp32 softmax in {where}; it came with 1.20"))
    if not release.reads_vision_buckets:
        out.append((VISION_BUCKETS, f"no vision bucketing in {where}; 1.22 added it (#1178 6bac2f76b)"))
    if not release.fp32_softmax_vision_source:
        out.append((FP32_SOFTMAX_VISION, f"nothing in {where} reads it; 1.22's qwen2_5_vl.py does"))
    return tuple(out) + _bucketing.not_read(release)


def traits_for(release: Release) -> RuntimeTraits:
    """The fork's traits at a release line: which of the guide's variables it reads and whether it warms every graph
    (:class:`.releases.Release`, read at each tag), and the architectures its registry lists."""
    if release is NEWEST:
        return TRAITS
    return _with_registry(_traits_for(release), release)


def _traits_for(release: Release) -> RuntimeTraits:
    if release.fp32_softmax_source:
        note = (f"vllm-fork {release.name} turns fp32 softmax on for qwen2 ({release.fp32_softmax_source}); "
                "VLLM_FP32_SOFTMAX overrides it")  # fmt: skip
        traits = dataclasses.replace(TRAITS, fp32_softmax_note=note)
    else:
        where = f"extension @{release.extension}" if release.extension else "its in-tree ops"
        note = (f"vllm-fork {release.name} has no fp32 softmax: neither its vllm/ (@{release.commit}) nor {where} "
                "reads VLLM_FP32_SOFTMAX (it came with 1.20, extension @d4b0d38)")  # fmt: skip
        traits = dataclasses.replace(TRAITS, fp32_softmax_default=False, fp32_softmax_note=note)
    traits = dataclasses.replace(traits, booleans=_booleans(release), not_read=_not_read(release),
                                 unwarmed_graphs=_unwarmed(release),
                                 warmup_era=release.warmup_era,
                                 kv_cache_memory_bytes_source=_no_kv_cache_memory_bytes(release))  # fmt: skip
    traits = _with_speculative(traits, release)
    if release.graph_defaults is not None:
        reserved, prompt, source = release.graph_defaults
        traits = dataclasses.replace(traits, default_graph_reserved_mem=reserved, default_graph_prompt_ratio=prompt,
                                     graph_defaults_source=source)  # fmt: skip
    if not release.reads_vision_buckets:  # before 1.22 no VisionBuckets: the variable is not read at all
        traits = dataclasses.replace(traits, none_buckets_fail_warmup="", warms_vision_buckets=False)
    if not release.reads_prompt_ratio:
        return traits
    return dataclasses.replace(traits, reads=frozenset({GRAPH_RESERVED_MEM, GRAPH_PROMPT_RATIO}),
                               enforced_by="serve exports VLLM_GRAPH_RESERVED_MEM and VLLM_GRAPH_PROMPT_RATIO",
                               warms_all_graphs=False)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class VllmFork(NoBucketList):
    """vllm-fork at a release line, with the user's bucketing variables."""

    bucketing: ForkBucketing = dataclasses.field(default_factory=ForkBucketing)
    name: Runtime = Runtime.VLLM_FORK
    traits: RuntimeTraits = TRAITS

    @property
    def version(self) -> str | None:
        """The release planned for, as :func:`model_from_env` takes it (None: the newest line)."""
        release = self.bucketing.release
        return None if release is NEWEST else release.spec

    def text_shapes(self, shape: EngineShape) -> TextShapes:
        prefill, decode = generate(self.bucketing, shape)
        return TextShapes(prefill, decode, f"{self.bucketing.release}'s {strategy_of(self.bucketing)} bucketing "
                          "(modelled)", resolved=_bucketing.overwritten(self.bucketing))  # fmt: skip

    def memory(self, m: MemoryInputs) -> MemorySplit:
        """``determine_num_available_blocks``, the same formula at every tag modelled (1.17 and 1.18
        ``vllm/worker/habana_worker.py`` @1e0e492e1:112 and @84922944d:124, from 1.19 ``hpu_worker.py`` @61f141c62:149
        to @2e9b2b3d4:310): a profiling forward pass, then free = the card's free memory; usable = free x
        utilisation; graphs = usable x VLLM_GRAPH_RESERVED_MEM; the KV cache the rest (``--kv-cache-memory-bytes`` is
        not read)."""
        residue = profile_residue_bytes(m.profile, self.bucketing)
        in_free = m.free_after_load_bytes is not None  # read after the pass: its residue is inside that figure
        if m.free_after_load_bytes is not None:
            free, profile = m.free_after_load_bytes, 0
        else:
            profile = residue
            free = m.free_before_load_bytes - m.weight_bytes - profile
        usable, graphs, kv = gaudi_guide_split(free, m)
        batch, length = profile_pass(m.profile, self.bucketing) if m.profile is not None else (0, 0)
        shape = f" (batch {batch} x {length} tokens)" if batch else ""
        formula = (
            "vllm-fork hpu_worker.determine_num_available_blocks: (total - weights - profiling residue "
            f"{residue / MIB:.0f} MiB{shape}) x gpu_memory_utilization x (1 - VLLM_GRAPH_RESERVED_MEM)"
        )
        return MemorySplit(free, profile, usable, graphs, kv, formula, profile_in_free=in_free)

    def batch_defaults(self, device: DeviceFacts) -> BatchLimits:
        """vLLM V0's scheduler defaults, which the fork's HPU engine runs without chunked prefill: 256 sequences
        and max(max_model_len, 2048) tokens (``config.py`` ``SchedulerConfig``, V0)."""
        return BatchLimits(256, 2048, "vLLM V0 SchedulerConfig as the fork runs it (no chunked prefill)",
                           chunked_prefill=False,
                           refused_where="the fork's vllm/config.py SchedulerConfig._verify_args")  # fmt: skip

    def vision_bucketing(self, model_type: str, *, model: str | None = None) -> VisionBucketing:
        release = self.bucketing.release
        if not release.reads_vision_buckets:
            return VisionBucketing(False, False, (), f"vllm-fork {release.name} reads no VLLM_MULTIMODAL_BUCKETS (1.22 "
                                   "added them, #1178 6bac2f76b): its vision tower is not bucketed")  # fmt: skip
        if "qwen2_5_vl" in model_type:
            return VisionBucketing(True, False, (1600, 3136, 4096, 6400, 7744, 9216, 12544),
                                   "vllm-fork qwen2_5_vl.py: VLLM_MULTIMODAL_BUCKETS, patches per image",
                                   bucket_multiple=8, bucket_multiple_source=f"vllm-fork {release.name} stops at "
                                   "start-up: VisionBuckets._process_buckets asserts 'bucket % 8 == 0' "
                                   f"(vllm/worker/hpu_model_runner.py:130-134 @{release.commit})")  # fmt: skip
        return VisionBucketing(False, False, (), f"vllm-fork buckets only Qwen2.5-VL's tower, not {model_type}'s")


def model_from_env(
    env: Mapping[str, str],
    spelled: Mapping[str, str] | None = None,
    version: str | None = None,
    bucket_file: str | None = None,
) -> VllmFork:
    """vllm-fork at the line of ``version`` (None: the newest), configured by the bucket variables in ``env`` (it
    reads no bucket file: the registry refuses ``bucket_file`` for it)."""
    release = release_for(version)
    traits = traits_for(release)
    raw_skip = env.get(SKIP_WARMUP)
    skip = raw_skip is not None and bool((traits.read_boolean(SKIP_WARMUP, raw_skip) or (False,))[0])
    cfg = config_from_env(env, release, warmup_skipped=skip)
    if release.generation in ("ext1210", "ext1212") and strategy_of(cfg) == "exp":  # it reads the counts, not ranges
        linear = _bucketing.not_read(release)
        kept = tuple(entry for entry in traits.not_read if entry not in linear)
        traits = dataclasses.replace(traits, not_read=kept + _bucketing.not_read(release, exp_picked=True))
    return VllmFork(cfg, traits=traits)


def describe_release(version: str | None) -> str:
    """How a vllm-fork version is planned, in words (None: no release named, the newest line, as habana_main is);
    ConfigError naming what is accepted when it is not modelled."""
    if version is None:
        return f"planned as {NEWEST}, the newest line modelled (habana_main plans as it)"
    return f"planned as {release_for(version)}"


def _server_parser(version: str | None) -> ReleaseParser:
    """The named line's own server parser (:mod:`.server_options`)."""
    from vllm_hpu_mm.runtimes.vllm_fork.server_options import release_parser

    return release_parser(release_for(version))


ENTRY = RuntimeEntry(Runtime.VLLM_FORK, TRAITS, model_from_env, "gaudi2", "vllm_hpu_mm.runtimes.vllm_fork.exports",
                     releases=describe_release, distribution="vllm",
                     server_parser=_server_parser)  # fmt: skip

"""vllm-gaudi (vllm-project/vllm-gaudi, today's Gaudi runtime), modelled at @091bbadd: what it does with your
environment.

- Memory (``v1/worker/hpu_worker.py``): reads ``VLLM_GRAPH_RESERVED_MEM`` (0 under ``--enforce-eager``) and takes it
  from free memory measured after the weights load; ``profile_run(initialize_only=True)`` runs no profiling forward
  pass. ``VLLM_GRAPH_PROMPT_RATIO`` and ``VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO`` are read nowhere in ``vllm_gaudi/``.
- Text graphs: its bucketing variables (:mod:`.config`), strategies (:mod:`.exponential`, :mod:`.linear`,
  :mod:`.padding_aware`), a bucket file (:mod:`.file_strategy`) and the generated sets (:mod:`.common`) — the file
  names of its own ``extension/bucketing/``.
- Vision graphs: ``VLLM_MULTIMODAL_BUCKETS`` / ``VLLM_MULTIMODAL_RESOLUTIONS`` (:mod:`.vision`), warmed only when
  ``--limit-mm-per-prompt`` names ``image``.
- fp32 softmax is a feature on by default for ``qwen2``/``qwen2_5_vl`` (``VLLM_FP32_SOFTMAX`` overrides it); the
  vision tower reads ``VLLM_FP32_SOFTMAX_VISION`` (default off) in ``models/qwen2_5_vl.py``.
- What ``serve`` hands it: :mod:`.exports`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from vllm_hpu_mm.engine import Bucket, EngineShape, TextLookup, TextShapes
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes.arithmetic import gaudi_guide_split, vllm_batch_defaults
from vllm_hpu_mm.runtimes.base import (
    EXTENSION_TRUE,
    FP32_SOFTMAX,
    GRAPH_RESERVED_MEM,
    SKIP_WARMUP,
    VISION_BUCKETS,
    BatchLimits,
    DeviceFacts,
    MemoryInputs,
    MemorySplit,
    ProfileCosts,
    Runtime,
    RuntimeEntry,
    RuntimeTraits,
    UnwarmedGraphs,
    VisionBucketing,
    listed_text_shapes,
)
from vllm_hpu_mm.runtimes.vllm_gaudi import common
from vllm_hpu_mm.runtimes.vllm_gaudi.config import (
    COMMIT_SHORT,
    STRATEGIES,
    BucketingConfig,
    config_from_env,
    effective_strategy,
)
from vllm_hpu_mm.runtimes.vllm_gaudi.file_strategy import FILE_BOUND, MAX_FILE_BUCKETS, bucket_file
from vllm_hpu_mm.runtimes.vllm_gaudi.installed import InstalledUnavailable, InstalledVllmGaudi, find_installed
from vllm_hpu_mm.runtimes.vllm_gaudi.releases import (
    FIRST_FILE_BUCKETING,
    MAIN,
    NEWEST_TAG_NAME,
    Release,
    beyond_tags,
    line_of,
    release_for,
)
from vllm_hpu_mm.runtimes.vllm_gaudi.runner import RunnerLookup
from vllm_hpu_mm.runtimes.vllm_gaudi.vision import BATCH_WARMUP_SIDE, dummy_image_size, vision_table_entry
from vllm_hpu_mm.values import size_cap

__all__ = [
    "BUCKET_FILE_VAR",
    "ENTRY",
    "PLANNED_FILE",
    "PROFILING_TAGS",
    "TRAITS",
    "VllmGaudi",
    "describe_release",
    "model_from_env",
    "profile_pass",
    "traits_for",
]

#: The name a planned bucket file goes by in the model (``serve`` writes it under its own path).
PLANNED_FILE = "planned from traffic"

#: The modelled tags whose ``determine_available_memory`` runs ``profile_run()`` with a forward pass before reading
#: free memory (v0.15.1rc1 @0a4615b7, v0.16.0rc0 @dd472742). Every other modelled line runs none: v0.11.2 -
#: v0.13.0.post1's ``profile_run`` returns at once, v0.14.1, v0.15.1 and v0.16.0rc1 on call it with
#: ``initialize_only=True`` (#916 / #932, cada871d), which returns at once.
PROFILING_TAGS = frozenset({"v0.15.1rc1", "v0.16.0rc0"})


def profile_pass(p: ProfileCosts, release: Release) -> tuple[int, int] | None:
    """The line's profiling pass, (sequences, query tokens each), None where it runs none (:data:`PROFILING_TAGS`).
    ``hpu_model_runner.py`` ``profile_run`` @dd472742:5260: below the token budget, ``max_model_len`` tokens for
    ``min(max_num_seqs, max_num_batched_tokens // max_model_len)`` sequences (one for a multimodal model); at or
    above it, one chunk of ``max_num_batched_tokens`` query tokens with the rest of the sequence as context (never a
    whole long sequence). Unified attention (VLLM_UNIFIED_ATTN, off by default) is not modelled."""
    if not PROFILING_TAGS.intersection(release.tags):
        return None
    e = p.engine
    if e.max_model_len < e.max_num_batched_tokens:
        batch = 1 if p.multimodal else max(1, min(e.max_num_seqs, e.max_num_batched_tokens // e.max_model_len))
        return batch, e.max_model_len
    return 1, e.max_num_batched_tokens


TRAITS = RuntimeTraits(
    offloads_weights=False,  # no offloader installed; hpu_model_runner.py only asserts the value is 0 (@091bbadd)
    backend="hpu",
    reads=frozenset({GRAPH_RESERVED_MEM}),
    profiles_forward=False,
    fp32_softmax_default=True,
    fp32_softmax_model_types=("qwen2", "qwen2_5_vl"),
    fp32_softmax_note=f"vllm-gaudi turns fp32 softmax on for qwen2 and qwen2_5_vl (extension/features.py @ "
    f"{COMMIT_SHORT}); VLLM_FP32_SOFTMAX overrides it",
    enforced_by="serve bounds each graph part by the buckets it exports instead: VLLM_BUCKETING_FROM_FILE, "
    "VLLM_MULTIMODAL_BUCKETS",
    none_buckets_fail_warmup=f"it takes len() of the bucket list, hpu_model_runner.py @{COMMIT_SHORT}",
    warms_all_graphs=True,
    # warmup_model returns on skip_warmup and _use_graphs never reads it (v1/worker/hpu_model_runner.py :6218, :5006
    # @091bbadd; the same at every tag from v0.10.0): each bucket's graph is captured when a step first runs it
    unwarmed_graphs=UnwarmedGraphs(
        True, f"warmup_model returns, _use_graphs does not read it: v1/worker/hpu_model_runner.py @{COMMIT_SHORT}"
    ),
    own_knobs=frozenset({VISION_BUCKETS, SKIP_WARMUP}),
    log_marks=r"vllm_gaudi|vllm-gaudi",
    warmup_era="one_pass",
    oldest_release=".".join(map(str, FIRST_FILE_BUCKETING[:3])),
    kv_cache_memory_bytes="ignored",
    # every release tagged in the mirror, v0.10.0 to v0.27.0rc0, has the same check
    bfloat16_for_float32=f"its platform.py check_and_update_config @{COMMIT_SHORT} replaces float16 and float32 by "
    "bfloat16",
    kv_cache_memory_bytes_source=f"nothing in vllm-gaudi @{COMMIT_SHORT} reads cache_config.kv_cache_memory_bytes: its "
    "HPU worker sizes the KV cache from free memory x --gpu-memory-utilization less VLLM_GRAPH_RESERVED_MEM",
    image="vllm-gaudi:latest",  # the Gaudi image name the docs use
    booleans=tuple(
        (v, EXTENSION_TRUE, f"extension/config.py boolean @{COMMIT_SHORT}") for v in (SKIP_WARMUP, FP32_SOFTMAX)
    ),
)


def traits_for(release: Release) -> RuntimeTraits:
    """vllm-gaudi's traits at ``release``: its own fp32-softmax model types (extension/features.py at its tag)."""
    if release is MAIN:
        return TRAITS
    types = release.fp32_softmax_model_types
    unless = " while VLLM_UNIFIED_ATTN is off" if release.unified_attn_variable and "qwen2_5_vl" in types else ""
    note = (f"vllm-gaudi {release.name} turns fp32 softmax on for {' and '.join(types)}{unless} (extension/features.py "
            f"@ {release.commit}); VLLM_FP32_SOFTMAX overrides it")  # fmt: skip
    not_read = TRAITS.not_read
    if not release.reads_resolutions:  # listed where every unread setting is (r21gaudi 14: it was in a note alone)
        warms = {
            "dummy": "vLLM's own dummy image once per vision bucket",
            "options": "vLLM's own dummy image once per vision bucket",
            "bucket-count": "each vision bucket's count of vLLM's largest dummy item",
        }.get(release.mm_warmup, "its guessed aspect ratios per vision bucket")
        not_read = (
            *not_read,
            (
                "VLLM_MULTIMODAL_RESOLUTIONS",
                f"vision.py reads it from v0.26.0; {release.name} "
                f"(@{release.commit}) warms {warms}, and other real shapes compile at run time",
            ),
        )
    return dataclasses.replace(TRAITS, fp32_softmax_model_types=types, fp32_softmax_note=note, not_read=not_read)


@dataclasses.dataclass(frozen=True)
class VllmGaudi:
    """vllm-gaudi with the user's bucketing variables (and bucket file, when one is named)."""

    bucketing: BucketingConfig = dataclasses.field(default_factory=BucketingConfig)
    name: Runtime = Runtime.VLLM_GAUDI
    traits: RuntimeTraits = TRAITS
    #: The bucket file is ours (planned from traffic, :meth:`with_text_buckets`), to be exported by ``serve``.
    planned: bool = False
    #: The vllm-gaudi installed here, asked for its buckets with ``env`` (its own code); None = the model only.
    installed: InstalledVllmGaudi | None = None
    env: tuple[tuple[str, str], ...] = ()
    model_type: str = "qwen2_5_vl"

    def with_compilation_config(self, config: Mapping[str, object]) -> VllmGaudi:
        """Its graphs are its buckets: the compilation config's capture sizes are not read."""
        return self

    @property
    def version(self) -> str | None:
        """The release this model plans for, as :func:`model_from_env` takes it (None: main, nothing installed)."""
        if self.installed is not None:
            return self.installed.version
        release = self.bucketing.release
        if release is MAIN:
            return None
        if release.first[3] < 0:  # a line that starts at a pre-release (v0.19.0rc0): its tag, so it plans as itself
            return release.tags[0].removeprefix("v")
        return ".".join(str(x) for x in release.first[:3])

    def _generated(self, shape: EngineShape) -> tuple[tuple[tuple[Bucket, ...], tuple[Bucket, ...]] | None, str]:
        """The installed vllm-gaudi's own buckets (None when there is none to ask, or it failed), and the source in
        words: which code the counts come from, and why the model was used where it was."""
        release = self.bucketing.release
        modelled = (
            f"vllm-gaudi {release.name}'s {effective_strategy(self.bucketing)} bucketing (modelled, @{release.commit})"
        )
        if self.installed is None:
            return None, modelled
        if self.planned:  # our own file: the model reads it exactly as its file_strategy.py does
            planned = f"a bucket file planned against {self.installed}'s own buckets"
            return None, f"{planned}, read as its file_strategy.py reads one ({modelled})"
        try:
            generated = self.installed.buckets(dict(self.env), shape, model_type=self.model_type)
        except InstalledUnavailable as exc:
            return None, f"{modelled}; asking the installed code failed ({exc})"
        return generated, f"{self.installed}'s own bucketing code (imported)"

    def text_shapes(self, shape: EngineShape) -> TextShapes:
        generated, source = self._generated(shape)
        if generated is None:
            generated = (common.prompt_buckets(self.bucketing, shape), common.decode_buckets(self.bucketing, shape))
        prefill, decode = generated[0], tuple((bs, blocks) for bs, _, blocks in generated[1])
        notes = () if self.planned else common.dropped_file_buckets(self.bucketing, shape)
        resolved = common.strategy_resolution(self.bucketing, planned=self.planned)
        said: tuple[str, ...] = (resolved,) if resolved else ()
        # the user's range variables the strategy (or file) in use overwrites, said wherever these buckets are
        # (r16text 3: buckets replay warmed exp's 104 graphs and said nothing of the two set); a planned file's
        # overrides are said by the exports that replace the user's buckets with it
        ignored = () if self.planned else common.overridden_ranges(self.bucketing)
        if ignored:
            said += (f"your {', '.join(ignored)}: not applied by vllm-gaudi {self.bucketing.release.name}'s "
                     f"{effective_strategy(self.bucketing)} bucketing, which builds its ranges otherwise (exp from "
                     "the engine limits: exponential.py check_for_user_flags 'will be overwritten'; a bucket file "
                     "from its lines)",)  # fmt: skip
        return TextShapes(prefill, decode, source, notes, said)

    def text_lookup(self, shape: EngineShape) -> TextLookup:
        listed = None
        if shape.num_speculative_tokens:  # the runtime warms more decode graphs than its list has
            seeds = listed_text_shapes(self, shape)
            listed = (len(seeds.prefill), len(seeds.decode))
        return RunnerLookup(self.bucketing, shape, self._generated(shape)[0], listed)

    def with_text_buckets(self, prompt: tuple[Bucket, ...], decode: tuple[Bucket, ...]) -> VllmGaudi | None:
        """Its bucket file (``VLLM_BUCKETING_FROM_FILE``) holding exactly these, unless the user named a file or the
        buckets are not looked up as planned (bucketing off, merged prefill)."""
        cfg = self.bucketing
        if cfg.from_file is not None or not cfg.enable_bucketing or cfg.merged_prefill:
            return None
        text = bucket_file(prompt, decode)
        return dataclasses.replace(self, bucketing=dataclasses.replace(cfg, from_file=PLANNED_FILE, file_text=text),
                                   planned=True)  # fmt: skip

    def memory(self, m: MemoryInputs) -> MemorySplit:
        """``v1/worker/hpu_worker.py`` ``determine_available_memory`` @091bbadd: ``profile_run(initialize_only=True)``
        returns at once (no profiling forward pass), so free = the card's free memory after the weights load;
        usable = free x utilisation; graphs = usable x VLLM_GRAPH_RESERVED_MEM (0 under --enforce-eager); the KV
        cache gets the rest less one dummy block (a block over every layer, allocated to bind the cache first). It
        reads no --kv-cache-memory-bytes at this commit. The lines of :data:`PROFILING_TAGS` run a pass first
        (:func:`profile_pass`); what it leaves held is counted as the fork's is (one layer's activations over its
        tokens, its sequences' logits, the vision tower's peak)."""
        release = self.bucketing.release
        shape = profile_pass(m.profile, release) if m.profile is not None and m.profile.token_bytes else None
        residue = 0
        if shape is not None and m.profile is not None:
            batch, length = shape
            vision = m.profile.vision_bytes if m.profile.multimodal else 0
            residue = batch * length * m.profile.token_bytes + batch * m.profile.logits_bytes_per_seq + vision
        if m.free_after_load_bytes is not None:
            free, profile = m.free_after_load_bytes, 0
        else:
            free, profile = m.free_before_load_bytes - m.weight_bytes - residue, residue
        usable, graphs, kv = gaudi_guide_split(free, m)
        pass_words = (
            f"less its profiling residue {residue / 2**20:.0f} MiB (batch {shape[0]} x {shape[1]} tokens, "
            f"{release.name})"
            if shape is not None
            else "no profiling pass"
        )
        formula = (
            f"vllm-gaudi @{release.commit} hpu_worker.determine_available_memory: free after load x "
            f"gpu_memory_utilization x (1 - VLLM_GRAPH_RESERVED_MEM) - one dummy KV block; {pass_words}"
        )
        in_free = shape is not None and m.free_after_load_bytes is not None
        return MemorySplit(free, profile, usable, graphs, max(0, kv - m.kv_block_bytes), formula,
                           profile_in_free=in_free)  # fmt: skip

    def batch_defaults(self, device: DeviceFacts) -> BatchLimits:
        """vLLM's server defaults as vllm-gaudi meets them: its platform reports a total of 0 bytes
        (``platform.py`` ``get_device_total_memory`` @091bbadd, a stated workaround), so 256 / 2048."""
        d = vllm_batch_defaults(device, reported_total_bytes=0)
        return dataclasses.replace(d, source=f"{d.source}; vllm-gaudi @{COMMIT_SHORT} platform.py reports 0 bytes")

    def vision_bucketing(self, model_type: str, *, model: str | None = None) -> VisionBucketing:
        release = self.bucketing.release
        batch_based, buckets = vision_table_entry(model_type, release, model=model)
        where = f"vllm-gaudi @{release.commit} extension/bucketing/vision.py MULTIMODAL_CONFIG"
        if release.vision_by_path:
            where += f" (searched with the model's path {model!r}; every model batch based)"
        if not buckets:
            return VisionBucketing(False, False, (), f"{where}: no default buckets for {model_type} (native "
                                   "resolution; warmed only for VLLM_MULTIMODAL_RESOLUTIONS)")  # fmt: skip
        unit = "images per pass" if batch_based else "patches per image"
        side = BATCH_WARMUP_SIDE if batch_based else 0
        if release.mm_warmup == "bucket-count":  # v0.11.2 batches vLLM's largest dummy image, not 896 x 896 ones
            side = (dummy_image_size(model_type) or (BATCH_WARMUP_SIDE, 0))[0]
            unit += f" of vLLM's dummy image ({side} px a side; its dummy video too, not sized)"
        elif release.mm_warmup in ("dummy", "options"):  # docs/memory-plan.md "The release": said where planned
            unit += (f"; {release} warms vLLM's own dummy image once per vision bucket, which no variable steers "
                     "(VLLM_MULTIMODAL_RESOLUTIONS is not read)")  # fmt: skip
        return VisionBucketing(True, batch_based, buckets, f"{where}: {unit}", side)


#: The variable naming a bucket file; :func:`model_from_env` reads the file it names, once.
BUCKET_FILE_VAR = "VLLM_BUCKETING_FROM_FILE"
#: Most bytes of a bucket file read: five times a file of MAX_FILE_BUCKETS buckets one per line (~16 bytes a line).
MAX_BUCKET_FILE_BYTES = 16 << 20


def model_from_env(
    env: Mapping[str, str],
    spelled: Mapping[str, str] | None = None,
    version: str | None = None,
    bucket_file: str | None = None,
) -> VllmGaudi:
    """vllm-gaudi as the user's variables configure it, with the bucket file ``VLLM_BUCKETING_FROM_FILE`` names (or
    ``bucket_file``, which replaces it) read here (``spelled``: how the user gave the variable or ``bucket_file``,
    e.g. ``--bucket-file``, for the error), for the release ``version`` (None: the one installed here, else main).
    On a host that runs vllm-gaudi (the release asked for, or any when none is named) its own code is asked for the
    buckets, the model being the fallback."""
    spelled = dict(spelled or {})
    if bucket_file is not None:  # the override is the variable the runtime reads, as the user spelled it
        env = {**env, BUCKET_FILE_VAR: bucket_file}
        if "bucket_file" in spelled:
            spelled[BUCKET_FILE_VAR] = spelled["bucket_file"]
    here = find_installed()
    ask = here if here is not None and here.is_release(version) else None
    try:
        # a release named and not the one installed must be a tag; the installed build plans as its version's line
        release = (release_for(version) if ask is None else
                   line_of(version if version is not None else here.version if here is not None else None))  # fmt: skip
    except ConfigError:
        if ask is None:
            raise
        release = MAIN  # not modelled: the installed code answers, the newest model is only the fallback
    cfg = config_from_env(env, release)
    if cfg.from_file is not None:
        given = spelled.get(BUCKET_FILE_VAR, BUCKET_FILE_VAR)
        source = f"{given}={cfg.from_file}" if given == BUCKET_FILE_VAR else f"{given} {cfg.from_file}"
        try:
            with Path(cfg.from_file).expanduser().open("rb") as f:
                raw = f.read(MAX_BUCKET_FILE_BYTES + 1)  # a device or an endless file stops at the cap
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ConfigError(f"{source}: cannot read it ({why}); accepted: a readable vllm-gaudi bucket "
                              "file") from None  # fmt: skip
        if len(raw) > MAX_BUCKET_FILE_BYTES:
            raise ConfigError(f"{source}: larger than {size_cap(MAX_BUCKET_FILE_BYTES)}; accepted: a vllm-gaudi bucket "
                              f"file (at most {MAX_FILE_BUCKETS:,} buckets, a few megabytes)")  # fmt: skip
        cfg = dataclasses.replace(cfg, file_text=text, file_source=source)
    return VllmGaudi(cfg, traits=traits_for(release), installed=ask, env=tuple(sorted(env.items())))


def describe_release(version: str | None) -> str:
    """How a vllm-gaudi version is planned, in words (None: no release named, the installed one, else main, as
    :func:`model_from_env` plans it); ConfigError when it can be neither modelled nor asked."""
    here = find_installed()
    if version is None:
        if here is None:
            return f"planned as {MAIN}"
        version = here.version
    asked = here is not None and here.is_release(version)
    try:
        planned = f"planned as {line_of(version) if asked else release_for(version)}"
        if beyond_tags(version):
            planned += f" ({version} is newer than the newest tag read, {NEWEST_TAG_NAME}: main's code stands for it)"
    except ConfigError:
        if not asked:
            raise
        planned = "a release not modelled"
    return f"{planned}; its own bucketing code is asked (imported)" if asked else planned


def strategies(env: Mapping[str, str], version: str | None = None) -> tuple[VllmGaudi, ...]:
    """vllm-gaudi under each built-in strategy of the release planned for (``version``, as :func:`model_from_env`
    takes it; no bucket file), configured otherwise by ``env``: exp, lin and pad by ``VLLM_BUCKETING_STRATEGY`` from
    v0.20.0rc0 (c2641a62 #762), exp and lin by ``VLLM_EXPONENTIAL_BUCKETING`` before (no pad there)."""
    rest = {k: v for k, v in env.items() if k not in (BUCKET_FILE_VAR, "VLLM_EXPONENTIAL_BUCKETING",
                                                      "VLLM_BUCKETING_STRATEGY")}  # fmt: skip
    release = model_from_env(rest, version=version).bucketing.release
    if release.strategy_variable:
        return tuple(model_from_env({**rest, "VLLM_BUCKETING_STRATEGY": s}, version=version) for s in STRATEGIES)
    return tuple(model_from_env({**rest, "VLLM_EXPONENTIAL_BUCKETING": b}, version=version) for b in ("true", "false"))


ENTRY = RuntimeEntry(Runtime.VLLM_GAUDI, TRAITS, model_from_env, "gaudi2", "vllm_hpu_mm.runtimes.vllm_gaudi.exports",
                     strategies, releases=describe_release, distribution="vllm-gaudi",
                     bucket_file_variable=BUCKET_FILE_VAR, bucket_file_bound=FILE_BOUND)  # fmt: skip

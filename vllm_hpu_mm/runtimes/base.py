"""What every runtime model says, as types: the runtime's name, its traits (which of the guide's variables it reads,
whether it profiles before sizing the KV cache), the text graphs it warms for an engine shape, and what ``serve``
hands it (:class:`Exports`: environment, arguments, files, and how each part of the plan is enforced).

Nothing here imports the plan: the plan reads runtimes through :class:`RuntimeModel`, and each runtime's exporter
(``runtimes/<runtime>/exports.py``) reads the plan.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol

from vllm_hpu_mm.engine import Bucket, EngineShape, TextLookup, TextShapes
from vllm_hpu_mm.runtimes.warmup import WarmupEstimate, warmup_estimate
from vllm_hpu_mm.values import AlignMode, Backend

__all__ = [
    "ESTIMATE_CUDAGRAPHS",
    "EXTENSION_TRUE",
    "FP32_SOFTMAX",
    "FP32_SOFTMAX_VISION",
    "GRAPH_MULTIMODAL_PROMPT_RATIO",
    "GRAPH_PROMPT_RATIO",
    "GRAPH_RESERVED_MEM",
    "PARTS",
    "RUNTIME_CHOICES",
    "SKIP_WARMUP",
    "VISION_BUCKETS",
    "BatchLimits",
    "DeviceFacts",
    "ExportContext",
    "Exports",
    "MemoryInputs",
    "MemorySplit",
    "NoBucketList",
    "Part",
    "PartName",
    "ProfileCosts",
    "Runtime",
    "RuntimeEntry",
    "RuntimeModel",
    "RuntimeTraits",
    "ServerFlags",
    "UnwarmedGraphs",
    "VisionBucketing",
    "WarmupEstimate",
    "listed_text_shapes",
    "warmup_estimate",
]

#: The guide's memory variables: planning inputs everywhere, read by some runtimes only (:attr:`RuntimeTraits.reads`).
GRAPH_RESERVED_MEM = "VLLM_GRAPH_RESERVED_MEM"
GRAPH_PROMPT_RATIO = "VLLM_GRAPH_PROMPT_RATIO"
GRAPH_MULTIMODAL_PROMPT_RATIO = "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO"
#: The Gaudi runtimes' own variables a fix may name (:attr:`RuntimeTraits.env`): the vision buckets warmed (patch
#: counts) and skipping warm-up.
VISION_BUCKETS = "VLLM_MULTIMODAL_BUCKETS"
SKIP_WARMUP = "VLLM_SKIP_WARMUP"
FP32_SOFTMAX = "VLLM_FP32_SOFTMAX"
FP32_SOFTMAX_VISION = "VLLM_FP32_SOFTMAX_VISION"
#: The extension's ``boolean`` (vllm-gaudi ``extension/config.py:135-137`` @091bbadd, the same at every tag;
#: vllm-hpu-extension ``config.py:122-124`` @8211e0b, the fork's 1.22): any other value is false, never an error.
EXTENSION_TRUE = frozenset({"true", "t", "1", "yes", "y", "on"})


class Runtime(str, enum.Enum):
    VLLM_GAUDI = "vllm-gaudi"
    VLLM_FORK = "vllm-fork"
    VLLM_CUDA = "vllm-cuda"
    VLLM_CPU = "vllm-cpu"


RUNTIME_CHOICES = ("auto", *(r.value for r in Runtime))


@dataclasses.dataclass(frozen=True)
class UnwarmedGraphs:
    """What a runtime's graphs are when ``VLLM_SKIP_WARMUP`` (as it reads it) skips its warm-up: the one rule that
    the plan's rows, its findings and the exports' notes word a skipped warm-up from (:attr:`PlanInputs.unwarmed
    <vllm_hpu_mm.plan.inputs.PlanInputs.unwarmed>`)."""

    #: True: every bucket still runs as a graph, none warmed at start-up, each captured on its first use with no pool
    #: check (nothing but the buckets bounds them); False: the runner graphs only the buckets its warm-up captured,
    #: so it runs none (vllm-fork 1.17 / 1.18).
    graphs: bool
    #: Where the runtime's source shows it.
    source: str

    @property
    def what(self) -> str:
        if self.graphs:
            return "none warmed at start-up, each captured on its first use with no pool check"
        return "no graph runs, the runner graphs only the buckets its warm-up captured"

    @property
    def words(self) -> str:
        return f"{SKIP_WARMUP}: {self.what}"


@dataclasses.dataclass(frozen=True)
class RuntimeTraits:
    """What a runtime does with the guide's knobs, as its source shows. Exports and the plan's fixes are worded
    from these: a fix never asks a user to set a variable the runtime does not read without saying so."""

    backend: Backend
    #: The guide's memory variables the runtime reads (:data:`GRAPH_RESERVED_MEM`, the two prompt ratios).
    reads: frozenset[str]
    #: Runs a profiling forward pass before sizing the KV cache (its activation peak is then not free).
    profiles_forward: bool
    #: The runtime's own fp32-softmax default for the language model, and who owns it.
    fp32_softmax_default: bool
    fp32_softmax_note: str
    #: How ``serve`` makes this runtime respect the parts of the plan it does not read as ratios (for fix texts).
    enforced_by: str
    #: Why ``VLLM_MULTIMODAL_BUCKETS=None`` with warm-up on makes this runtime fail (its source); "" where it does not.
    none_buckets_fail_warmup: str = ""
    #: The container image ``fleet plan`` deploys this runtime from when --image is not given; "" where none is known
    #: (the deployment then names a placeholder and a note asks for --image).
    image: str = ""
    #: Warms every text bucket with no memory check (vllm-gaudi, vllm-fork 1.22), instead of capturing while they fit
    #: (vllm-fork 1.17 - 1.21.3).
    warms_all_graphs: bool = False
    #: Captures a graph for each vision bucket at warm-up (vllm-gaudi, vllm-fork 1.22); False where the runtime
    #: buckets no tower: vllm-fork before 1.22 runs each image at its own shape inside the prompt graphs, none warmed.
    warms_vision_buckets: bool = True
    #: Captures its graphs during profiling and takes their memory out of the KV cache (vLLM on CUDA).
    profiles_graphs: bool = False
    #: Whether ``--cpu-offload-gb`` moves weights to host memory (vLLM on CUDA: a UVA offloader per layer); False
    #: where the runtime installs no offloader (vllm-gaudi @091bbadd); None where not checked.
    offloads_weights: bool | None = None
    #: Builds no vision tower (no weights) when ``--limit-mm-per-prompt`` sets every one of its modalities to 0, as
    #: vLLM 0.32's model classes do (``interfaces.py`` ``_mark_tower_model``; :func:`vllm_hpu_mm.plan.derived.
    #: vision_tower_built`). vllm-gaudi's Qwen2.5-VL rebuilds ``visual`` whatever the limits (``models/
    #: qwen2_5_vl.py:499`` @091bbadd) and the fork's vLLM predates the rule: both keep the tower.
    tower_follows_limits: bool = False
    #: A variable that, set and non-empty, replaces the KV-cache size (``--kv-cache-memory-bytes`` included) with its
    #: whole GiB; "" where none does.
    kv_cache_space_var: str = ""
    #: Config ``model_type`` values the fp32-softmax default applies to (empty: every model).
    fp32_softmax_model_types: tuple[str, ...] = ()
    #: Our variables beyond the guide's graph knobs (:attr:`reads`) that the runtime does not read, each with where
    #: that shows (e.g. vllm-fork before 1.22: ``VLLM_MULTIMODAL_BUCKETS``; vLLM CUDA: ``VLLM_FP32_SOFTMAX``): a value
    #: set is then ignored by the plan and named as not read (``PlanInputs.knobs_not_read``).
    not_read: tuple[tuple[str, str], ...] = ()
    #: The runtime's own knobs, beyond vLLM's engine flags and the guide's memory variables, that fixes and the OOM
    #: doctor may name (variables and flags; a runtime that does not read a knob is never told to set it).
    own_knobs: frozenset[str] = frozenset()
    #: Words only this runtime's logs hold (a regular expression: its package paths, its own lines), by which the
    #: OOM doctor tells it from another runtime of the same backend; "" for none.
    log_marks: str = ""
    #: The newest vLLM (major, minor) the runtime's releases are built on: a log whose banner names a later vLLM is
    #: not this runtime's (the OOM doctor's source sniffer); None: no bound.
    newest_vllm: tuple[int, int] | None = None
    #: How the runtime warms at start-up, for its warm-up time (``runtimes/warmup.py``: ``one_pass`` or
    #: ``two_pass``); "" where no time was fitted.
    warmup_era: str = ""
    #: The runtime's ``gpu_memory_utilization`` default: vLLM 0.32's 0.92 (``config/cache.py``), the fork's 0.9.
    default_gpu_memory_utilization: float = 0.92
    #: The runtime's own ``VLLM_GRAPH_RESERVED_MEM`` and ``VLLM_GRAPH_PROMPT_RATIO`` defaults where they are not the
    #: guide's 0.1 and 0.3 (vllm-fork 1.17 / 1.18: 0.4 and 0.5), planned when neither a flag nor the variable sets
    #: them; None: the guide's. ``graph_defaults_source`` cites where the runtime sets them.
    default_graph_reserved_mem: float | None = None
    default_graph_prompt_ratio: float | None = None
    graph_defaults_source: str = ""
    #: The oldest release modelled, for runtimes planned per release (``vllm-gaudi==X``); "" where none is.
    oldest_release: str = ""
    #: What the runtime does with vLLM's ``--kv-cache-memory-bytes``: ``read`` (the KV cache is that size),
    #: ``ignored`` (the flag parses, the worker sizes the KV cache its own way) or ``unknown`` (its server has no such
    #: flag); :attr:`kv_cache_memory_bytes_source` says where in its code.
    kv_cache_memory_bytes: Literal["read", "ignored", "unknown"] = "read"
    kv_cache_memory_bytes_source: str = ""
    #: A ``--kv-cache-memory-bytes`` of 0 reads as unset (the KV cache is sized from the utilization): vLLM 0.32's
    #: CUDA worker tests it for truth (``v1/worker/gpu_worker.py`` 649); its CPU worker tests ``is not None``
    #: (``cpu_worker.py`` 217), so there 0 is a 0-byte cache, refused at start-up.
    kv_cache_memory_bytes_zero_unset: bool = False
    #: Its block pool keeps one KV block aside (the null block) and its start-up check and ``-1`` fit plan without
    #: it: vLLM 0.32's V1 engine (``v1/core/block_pool.py`` ``null_block``, ``kv_cache_utils.py``
    #: ``get_kv_cache_configs``). The fork runs vLLM V0, which checks every block (``hpu_worker.py``
    #: ``raise_if_cache_size_invalid`` @2e9b2b3d4).
    null_block: bool = True
    #: Why the runtime serves a 4-byte ``--dtype`` in bfloat16 (its source); "" where it keeps the dtype asked for.
    bfloat16_for_float32: str = ""
    #: The ``--kv-cache-dtype`` values the runtime's own parser accepts, and where; () for vLLM 0.32's.
    kv_cache_dtypes: tuple[str, ...] = ()
    kv_cache_dtypes_source: str = ""
    #: The model architectures the runtime's model registry lists (None: not modelled, every one assumed served), and
    #: the release that is (for the words); an unlisted one is refused at start-up unless :attr:`transformers_fallback`
    #: lets vLLM load a text model through its Transformers backend (causal LMs only in the fork's vLLM 0.7 - 0.9).
    architectures: frozenset[str] | None = None
    architectures_source: str = ""
    #: The releases of this runtime whose registry lists an architecture, as ``--runtime`` takes them, newest first
    #: (vllm-fork: each line's registry at its tag); None where releases are not modelled so.
    releases_listing: Callable[[str], tuple[str, ...]] | None = None
    transformers_fallback: bool = False

    #: Where the runtime refuses ``--speculative-config`` at start-up while contiguous PA is on (its source), and
    #: whether contiguous PA is on, from the raw ``VLLM_CONTIGUOUS_PA`` (None: unset), whether prefix caching is
    #: asked for, and whether the model is multimodal; "" / None where the runtime has no such refusal.
    speculative_refused_with_contiguous_pa: str = ""
    contiguous_pa: Callable[[str | None, bool, bool], bool] | None = None

    #: What its graphs are when ``VLLM_SKIP_WARMUP`` skips the warm-up; None where the runtime reads no such variable.
    unwarmed_graphs: UnwarmedGraphs | None = None

    #: How the runtime reads its boolean variables: (variable, the values it reads as true after ``.lower()``, where
    #: in its source). A variable not listed is read as our registry reads it (``envs.py``).
    booleans: tuple[tuple[str, frozenset[str], str], ...] = ()

    @property
    def not_read_names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.not_read)

    @property
    def reads_fp32_softmax(self) -> bool:
        """Reads ``VLLM_FP32_SOFTMAX`` (vllm-gaudi, vllm-fork from 1.20); where it does not, a value set is ignored."""
        return FP32_SOFTMAX not in self.not_read_names

    def read_boolean(self, variable: str, raw: str) -> tuple[bool, str] | None:
        """``raw`` as the runtime reads ``variable`` (no strip: the runtimes compare the raw value), with where;
        None where the variable is not listed in :attr:`booleans`."""
        for name, true, source in self.booleans:
            if name == variable:
                return raw.lower() in true, source
        return None

    def boolean_as_read(self, variable: str, env: Mapping[str, str], ours: bool, runtime: str) -> tuple[bool, str]:
        """A boolean variable as the runtime reads it, else as our registry read it (``ours``), with a note where the
        two differ: a value the runtime accepts is read as it reads it, and said."""
        raw = env.get(variable)
        reading = None if raw is None else self.read_boolean(variable, raw)
        if raw is None or reading is None or reading[0] == ours:
            return ours, ""
        value, source = reading
        return value, (f"{variable}={raw!r} is read as {str(value).lower()} by {runtime} ({source}); planned as it "
                       "reads it")  # fmt: skip

    def misread_booleans(self, env: Mapping[str, str], runtime: str) -> tuple[str, ...]:
        """A note for each boolean of :attr:`booleans` set in ``env`` that the runtime reads otherwise than the
        common spellings mean (the extension's ``boolean``: :data:`EXTENSION_TRUE`), beyond ``VLLM_SKIP_WARMUP`` and
        ``VLLM_FP32_SOFTMAX``, which the plan words where it uses them (e.g. vllm-fork 1.21.x reads
        ``VLLM_EXPONENTIAL_BUCKETING=1`` as false)."""
        names = [n for n, _, _ in self.booleans if n not in (SKIP_WARMUP, FP32_SOFTMAX) and n in env]
        notes = (self.boolean_as_read(n, env, env[n].lower() in EXTENSION_TRUE, runtime)[1] for n in names)
        return tuple(note for note in notes if note)

    def fp32_softmax_for(self, model_type: str) -> bool:
        """The runtime's fp32-softmax default for a model of ``model_type``."""
        return self.fp32_softmax_default and (not self.fp32_softmax_model_types
                                              or model_type in self.fp32_softmax_model_types)  # fmt: skip

    def knobs(self, runtime: Runtime, *variables: str) -> str:
        """How a fix names the guide's ``variables`` (alternatives, "A or B"): as they are where the runtime reads
        them, else marked as planning inputs, with how ``serve`` enforces the plan instead."""
        text = " or ".join(variables)
        unread = [v for v in variables if v not in self.reads]
        if not unread:
            return text
        if len(unread) == 1:
            what = f"{unread[0]} is a planning input here: {runtime.value} does not read it"
        else:
            what = f"planning inputs here: {runtime.value} reads {'neither' if len(unread) == 2 else 'none of them'}"
        return f"{text} ({what}; {self.enforced_by})"


#: vLLM's switch for taking the profiled CUDA-graph memory out of the KV cache (on by default in 0.32).
ESTIMATE_CUDAGRAPHS = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"


@dataclasses.dataclass(frozen=True)
class ProfileCosts:
    """What a profiling forward pass costs by part, for a runtime that runs one to take at its own pass shape: one
    text layer's activations per token, a sequence's float32 logits, the vision tower's eager peak at its largest
    bucket, and the engine sizes the runtime picks its shape from."""

    token_bytes: int
    logits_bytes_per_seq: int
    vision_bytes: int
    #: Its KV blocks are not known before the pass (1).
    engine: EngineShape
    #: The model has a vision tower (the fork profiles such models, mrope ones, at batch 1).
    multimodal: bool = False


@dataclasses.dataclass(frozen=True)
class MemoryInputs:
    """What a runtime's memory arithmetic reads, per card. Sizes the runtime measures at start-up are the plan's
    estimates (``weight_bytes``, ``activation_peak_bytes``, ``graph_estimate_bytes``) unless a measurement is given
    (``free_after_load_bytes``: the free memory the runtime itself printed or ``--free-memory-gib``)."""

    total_bytes: int
    #: Free device memory when the engine starts (a reading, or the total of a named device).
    free_before_load_bytes: int
    weight_bytes: int
    #: The transient peak of a profiling forward pass at the engine's sizes (text, sampler, vision encoder).
    activation_peak_bytes: int
    gpu_memory_utilization: float
    graph_reserved_mem: float
    #: Memory of the graphs the runtime captures, as the plan estimates it (CUDA profiles them before the KV cache).
    graph_estimate_bytes: int
    #: One KV block over every layer (vllm-gaudi keeps one back as a dummy block).
    kv_block_bytes: int
    #: Graphs are captured at all (not --enforce-eager, not a graph-less backend).
    graphs: bool
    kv_cache_memory_bytes: int | None = None
    free_after_load_bytes: int | None = None
    tensor_parallel_size: int = 1
    #: The runtime's own variables that are set (name -> raw value).
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: The profiling pass by part, for a runtime that shapes its own pass (vllm-fork); None where not known.
    profile: ProfileCosts | None = None


@dataclasses.dataclass(frozen=True)
class MemorySplit:
    """The runtime's split of one card: what it finds free after loading (and profiling), what it calls usable,
    what it keeps for graphs and what the KV cache gets, with its formula in words and where it is in its source."""

    free_after_load_bytes: int
    #: What the profiling run leaves held or peaks at (counted against the KV cache), 0 where none runs.
    profile_bytes: int
    usable_bytes: int
    graph_bytes: int
    kv_cache_bytes: int
    formula: str
    #: Memory outside the tensors the runtime accounts for itself (vLLM CUDA's non-torch memory: NCCL, workspaces).
    non_torch_bytes: int = 0
    #: A profiling pass runs before the runtime reads its free memory, and a given free memory after load (measured
    #: or stated) already holds what it left: ``profile_bytes`` is then 0, not because no pass runs.
    profile_in_free: bool = False


@dataclasses.dataclass(frozen=True)
class DeviceFacts:
    """What a runtime's defaults depend on: the backend, the card's total as the runtime reads it, its name, and the
    ranks of one replica (tensor x pipeline)."""

    backend: Backend
    total_bytes: int
    name: str
    world_size: int = 1


@dataclasses.dataclass(frozen=True)
class BatchLimits:
    """The scheduler's ``max_num_seqs`` / ``max_num_batched_tokens`` and whether it chunks prefills, with where they
    come from: a runtime's own defaults for its OpenAI server (``RuntimeModel.batch_defaults``), or what vLLM derives
    from those and the flags (:func:`vllm_hpu_mm.plan.derived.scheduler_limits`)."""

    max_num_seqs: int
    max_num_batched_tokens: int
    source: str
    #: Whether prefills are chunked (by default: vLLM V1 yes, the fork's V0 HPU engine no).
    chunked_prefill: bool = True
    #: Where the runtime refuses batched tokens below max_model_len without chunked prefill.
    refused_where: str = "config/scheduler.py verify_max_model_len"


@dataclasses.dataclass(frozen=True)
class VisionBucketing:
    """Whether the runtime runs a family's vision tower on bucketed shapes, how (patches per image or images per
    pass) and its default buckets, with where that is in its source."""

    bucketed: bool
    batch_based: bool
    default_buckets: tuple[int, ...]
    note: str
    #: Side in pixels of the square images a batch-based warm-up pass holds (0: not batch based).
    batch_image_side: int = 0
    #: Every patch bucket must be a multiple of this, or the runtime stops at start-up (1: any integer, as vllm-gaudi
    #: pads to any bucket), and where its source says so.
    bucket_multiple: int = 1
    bucket_multiple_source: str = ""


class RuntimeModel(Protocol):
    """One serving runtime, as the plan sees it."""

    @property
    def name(self) -> Runtime: ...

    @property
    def traits(self) -> RuntimeTraits: ...

    def text_shapes(self, shape: EngineShape) -> TextShapes:
        """The prefill and decode graphs the runtime warms for ``shape`` (not called without graphs)."""
        ...

    def text_lookup(self, shape: EngineShape) -> TextLookup | None:
        """The runtime's bucket lookup for replaying traffic, or None where it is not modelled."""
        ...

    def with_text_buckets(
        self, prompt: tuple[tuple[int, int, int], ...], decode: tuple[tuple[int, int, int], ...]
    ) -> RuntimeModel | None:
        """The runtime told to warm exactly these prompt and decode buckets (what ``serve`` exports), or None where
        buckets cannot be given to it, or the user already gave their own."""
        ...

    def memory(self, m: MemoryInputs) -> MemorySplit:
        """The runtime's own arithmetic from what it finds on the card to its KV cache."""
        ...

    def with_compilation_config(self, config: Mapping[str, object]) -> RuntimeModel:
        """The runtime as the user's ``--compilation-config`` sets its graphs (itself where the runtime reads none of
        it)."""
        ...

    def batch_defaults(self, device: DeviceFacts) -> BatchLimits:
        """The runtime's default ``max_num_seqs`` / ``max_num_batched_tokens`` on ``device``."""
        ...

    def vision_bucketing(self, model_type: str, *, model: str | None = None) -> VisionBucketing:
        """Whether and how the runtime buckets the vision tower of a ``model_type``; ``model``: the model as given to
        --model (a Hugging Face id or folder), for a runtime that keys on it (vllm-gaudi v0.11.2)."""
        ...


def listed_text_shapes(runtime: RuntimeModel, shape: EngineShape) -> TextShapes:
    """The text buckets ``runtime`` lists for ``shape`` (its strategy's, or its bucket file's lines that its filters
    keep), before speculative decoding adds decode buckets to them. vllm-gaudi keeps that list as the seeds and warms
    them with the buckets ``generate_spec_decode_buckets`` adds (batch x (1 + tokens) each):
    ``HPUBucketingManager.generate_decode_buckets``, extension/bucketing/common.py lines 222-226, and
    ``generate_spec_decode_buckets`` lines 325-363 @ v0.26.0 (b059f9c9). Nothing else in the list depends on the
    speculative tokens, so it is the runtime's list without them."""
    return runtime.text_shapes(dataclasses.replace(shape, num_speculative_tokens=0))


class NoBucketList:
    """For a runtime whose text graphs are not a bucket list: replay does not model its lookup, and ``serve`` cannot
    hand it buckets (the two :class:`RuntimeModel` methods that answer None)."""

    def text_lookup(self, shape: EngineShape) -> None:
        """Not modelled: replay covers vllm-gaudi's bucket lookup only."""
        return None

    def with_text_buckets(self, prompt: tuple[Bucket, ...], decode: tuple[Bucket, ...]) -> None:
        """Its text graphs are not given as a bucket list."""
        return None

    def with_compilation_config(self, config: Mapping[str, object]) -> Any:
        """Reads none of it (vLLM CUDA overrides this)."""
        return self


PartName = Literal["kv_cache", "decode_graphs", "prefill_text_graphs", "prefill_vision_graphs"]
PARTS: tuple[PartName, ...] = ("kv_cache", "decode_graphs", "prefill_text_graphs", "prefill_vision_graphs")


@dataclasses.dataclass(frozen=True)
class Part:
    """How one part of the plan is enforced: the knobs that make the runtime respect it, and whether it does."""

    by: tuple[str, ...]
    honoured: bool
    note: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"by": list(self.by), "honoured": self.honoured, "note": self.note}


@dataclasses.dataclass(frozen=True)
class ServerFlags:
    """What the user's server arguments and environment already say about the knobs we might set."""

    #: ``--limit-mm-per-prompt`` as given (JSON text), or None.
    limit_mm_per_prompt: str | None = None
    #: The user's ``--compilation-config`` as a dict, or None when not given.
    compilation_config: Mapping[str, object] | None = None
    kv_cache_memory_bytes_given: bool = False
    #: Variables the user already set for the runtime (we never override those).
    user_env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    skip_warmup: bool = False
    #: The user's VLLM_FP32_SOFTMAX as parsed by our environment registry, None when unset.
    fp32_softmax: bool | None = None
    #: ``--language-model-only``: vLLM sets every modality's limit to 0 (``config/multimodal.py``
    #: ``get_limit_per_prompt``).
    language_model_only: bool = False

    @property
    def refuses_images(self) -> bool:
        """Whether ``--limit-mm-per-prompt`` gives image a count of 0 (``{"image": 0}`` or ``{"image": {"count":
        0}}``), or ``--language-model-only`` sets every limit to 0: vLLM then refuses every request with an image
        (vllm/multimodal/processing/context.py @ 0.32)."""
        if self.language_model_only:
            return True
        try:
            value = json.loads(self.limit_mm_per_prompt or "{}")
        except ValueError:
            return False
        image = value.get("image") if isinstance(value, dict) else None
        return (image.get("count") if isinstance(image, Mapping) else image) == 0


@dataclasses.dataclass(frozen=True)
class Exports:
    env: dict[str, str]
    args: tuple[str, ...]
    #: File name -> content, written beside each other by ``serve`` (the bucket file for vllm-gaudi).
    files: dict[str, str]
    enforcement: dict[PartName, Part]
    notes: tuple[str, ...]
    #: The language model's effective fp32-softmax setting and who owns it.
    precision: dict[str, object]

    def enforcement_dict(self) -> dict[str, dict[str, object]]:
        return {name: part.to_dict() for name, part in self.enforcement.items()}


@dataclasses.dataclass(frozen=True)
class ExportContext:
    """What the serve job knows besides the plan, for the exporters that need it."""

    flags: ServerFlags
    #: The traffic's images, (width, height) -> count (vllm-gaudi warms the shapes they take); empty when none.
    images: Mapping[tuple[int, int], int] = dataclasses.field(default_factory=dict)
    align_mode: AlignMode = AlignMode.NEAREST
    #: Where ``serve`` writes the runtime's files (vllm-gaudi's bucket file).
    output_dir: str = ""


@dataclasses.dataclass(frozen=True)
class ReleaseParser:
    """A release's own server parser, where it is not vLLM 0.32's (vllm-fork's older argparse): it decides which
    server arguments are taken and how their values are read."""

    #: The release, as refusals name it (``vllm-fork v0.7.2+Gaudi-1.21.0``).
    name: str
    #: Its options: option strings, nargs (argparse's: 0 for none), destination, how one value is read (None: as
    #: text) and the choices (as text; None: any).
    options: tuple[tuple[tuple[str, ...], Any, str, Callable[[str], Any] | None, tuple[str, ...] | None], ...]
    #: Raises ConfigError, naming the flag, the release and what it takes, where it refuses the arguments (as vLLM's
    #: FlexibleArgumentParser hands them to argparse; the callable gives a flag as the user typed it).
    refuse: Callable[[Sequence[str], Callable[[str], str]], None]


@dataclasses.dataclass(frozen=True)
class RuntimeEntry:
    """One runtime, whole: what :mod:`.registry` knows of it. Adding a runtime is its folder (whose ``__init__``
    exports ``ENTRY``), its :class:`Runtime` member and one line in the registry's list."""

    runtime: Runtime
    traits: RuntimeTraits
    #: The runtime's model as the user's environment configures it; ``spelled`` maps a variable (or
    #: ``bucket_file``) to how the user gave it, for errors; the third argument is the release
    #: (``vllm-gaudi==0.26.0``; None: the installed one, else the newest modelled); the fourth a bucket file to warm
    #: instead of the environment's (``--bucket-file``; a runtime without bucket files ignores it: see
    #: ``bucket_file_variable``).
    model_from_env: Callable[[Mapping[str, str], Mapping[str, str], str | None, str | None], RuntimeModel]
    #: The device it is planned on when it is named but is not the runtime installed here.
    reference_device: str
    #: The module whose ``exports(draft, context)`` builds what ``serve`` hands the runtime. Named, not imported:
    #: the exporters read the plan, which sits above the runtimes (imported by :mod:`.exports` when serve exports).
    exporter: str
    #: The runtime's built-in bucketing strategies, each as the environment otherwise configures it (vllm-gaudi's
    #: exp, lin and pad), of a release (as ``model_from_env`` takes it), for a replay to set beside the configured
    #: one; None: it has no choice of strategy.
    strategies: Callable[[Mapping[str, str], str | None], tuple[RuntimeModel, ...]] | None = None
    #: Its releases: a version -> how it is planned, in words (ConfigError naming what is accepted when it cannot
    #: be), None -> how the runtime named with no release is; None when the runtime's releases are not modelled apart
    #: (a version is then refused).
    releases: Callable[[str | None], str] | None = None
    #: The distribution whose installed version ``auto`` reads for ``releases``.
    distribution: str | None = None
    #: The variable naming the bucket file the runtime warms (vllm-gaudi's); None: it reads no bucket file.
    bucket_file_variable: str | None = None
    #: The most buckets such a file may expand to, with why, in words (for --help); None: no bucket file is read.
    bucket_file_bound: str | None = None
    #: Vision buckets (patches) -> the runtime's own encoder-graph settings (vLLM CUDA's ``CompilationConfig``
    #: fields), for the plugin to set; None: the runtime captures no encoder graphs of its own.
    encoder_graphs: Callable[[tuple[int, ...]], dict[str, Any]] | None = None
    #: The release's own server parser, where it is not vLLM 0.32's (vllm-fork's lines), for a release as named or
    #: installed (None: the runtime's default line).
    server_parser: Callable[[str | None], ReleaseParser] | None = None
    #: Why the runtime's config build refuses a compilation config at a batched-token budget (vLLM CUDA's capture
    #: sizes), in words; None when it takes it. None: the runtime has no such check.
    compilation_refused: Callable[[Mapping[str, object], int], str | None] | None = None

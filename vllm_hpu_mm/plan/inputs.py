"""The plan's inputs: :class:`PlanInputs` (frozen, every default resolved) built from :class:`~.args.SizingArgs`,
the environment settings and the runtime's own variables, with every bad value reported against the flag or
variable it came from, as the user spelled it. Shared by ``memory plan``, ``serve`` and the OOM doctor."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.envs import Settings, default_of
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models import devices
from vllm_hpu_mm.models.catalog import DEFAULT_MODEL
from vllm_hpu_mm.models.dims import ModelDims, dtype_bytes
from vllm_hpu_mm.models.lookup import resolve
from vllm_hpu_mm.plan import validate
from vllm_hpu_mm.plan.args import MAX_MODEL_LEN_AUTO, VLLM_FLAGS, SizingArgs
from vllm_hpu_mm.plan.costs import ESTIMATES, HPU_LAZY_GRAPHS, CostProfile
from vllm_hpu_mm.plan.derived import kv_dtype_size, scheduler_limits, speculative_tokens
from vllm_hpu_mm.plan.vision_cost import DEFAULT_POOL_MODE, PoolMode
from vllm_hpu_mm.runtimes import registry
from vllm_hpu_mm.runtimes.base import (
    GRAPH_MULTIMODAL_PROMPT_RATIO,
    GRAPH_PROMPT_RATIO,
    GRAPH_RESERVED_MEM,
    SKIP_WARMUP,
    VISION_BUCKETS,
    DeviceFacts,
    Runtime,
    RuntimeModel,
    UnwarmedGraphs,
    VisionBucketing,
)
from vllm_hpu_mm.values import GIB, Backend, Buckets, nearest_tiles, parse_buckets

#: The guide's graph memory variables, in the order the plan names them.
GRAPH_KNOBS = (GRAPH_RESERVED_MEM, GRAPH_PROMPT_RATIO, GRAPH_MULTIMODAL_PROMPT_RATIO)

__all__ = [
    "DEFAULT_MAX_NUM_BATCHED_TOKENS",
    "DEFAULT_MAX_NUM_SEQS",
    "PlanInputs",
    "build",
    "provenance",
    "runtime_words",
]

#: vLLM's scheduler fallbacks (``SchedulerConfig.DEFAULT_MAX_NUM_SEQS`` / ``..._BATCHED_TOKENS``); the plan uses the
#: runtime's own per-device defaults (``RuntimeModel.batch_defaults``), these only where a runtime has none.
DEFAULT_MAX_NUM_SEQS = 128
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
#: vLLM's switch to accept a --max-model-len above the model's derived maximum.
ALLOW_LONG_MAX_MODEL_LEN = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"


@dataclasses.dataclass(frozen=True)
class PlanInputs:
    model: ModelDims
    device: str
    #: hpu, cuda or cpu: picks the default pool model and the wording of warnings.
    backend: Backend
    total_bytes: int
    #: Free device memory *before* loading the model (a reading, or the nominal total); ignored when
    #: ``free_after_load_bytes`` is given.
    free_before_load_bytes: int
    #: Free memory after weights and profiling, stated directly (the guide's starting point) or measured (a profile's,
    #: then ``free_after_load_measured_by`` says where), or None to estimate.
    free_after_load_bytes: int | None
    dtype_size: int
    tensor_parallel_size: int
    gpu_memory_utilization: float
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    buckets: tuple[int, ...] | None
    graph_reserved_mem: float
    graph_prompt_ratio: float
    graph_multimodal_prompt_ratio: float
    pool_mode: PoolMode
    #: The serving runtime's model: its traits and the text graphs it warms (:mod:`vllm_hpu_mm.runtimes`).
    runtime: RuntimeModel
    #: An explicit KV-cache size (vLLM's --kv-cache-memory-bytes): it then replaces rule 2's KV share.
    kv_cache_memory_bytes: int | None = None
    #: vLLM's --quantization, for the weight size (see models.dims.QUANTIZED_WEIGHT_BITS).
    quantization: str | None = None
    #: Graph cost coefficients: the built-in estimates, or what a warm-up log measured (``memory calibrate``).
    costs: CostProfile = ESTIMATES
    pipeline_parallel_size: int = 1
    #: Replicas: each plans the same card, so it changes nothing per card (reported only).
    data_parallel_size: int = 1
    #: No graphs at all: ``--enforce-eager`` on any runtime, or on vLLM CUDA a ``cudagraph_mode`` that resolves to
    #: NONE (``-O0``, the compilation config's): :func:`vllm_hpu_mm.plan.derived.graphs_off_by`, the one rule.
    enforce_eager: bool = False
    #: What turned the graphs off, as the user gave it (for the plan's words).
    eager_by: str = "--enforce-eager"
    #: VLLM_SKIP_WARMUP: the runtime warms no graph at startup.
    skip_warmup: bool = False
    #: How the runtime was chosen (what ``auto`` found installed), for the plan's output.
    runtime_found: str = ""
    #: The release planned for, named (``vllm-gaudi==X``) or installed (``auto``), in PEP 440's normal form; None: no
    #: release (the runtime's newest modelled code, or a runtime not planned per release).
    runtime_release: str | None = None
    #: Ranks the routed experts are spread over (--enable-expert-parallel: TP x DP), 0 when off.
    expert_parallel_size: int = 0
    #: The runtime's own variables that are set (what its arithmetic reads, e.g. VLLM_MEMORY_PROFILER_...).
    runtime_env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: Where the sequence and token defaults came from (the runtime's own, for this device), or "given".
    defaults_source: str = ""
    #: The vision buckets apply to this model's tower on this runtime (its family is bucketed by patches).
    vision_bucketed: bool = True
    #: For a tower the runtime buckets by images per pass (vllm-gaudi: Gemma 3, and families it does not list): the
    #: patches one image of a pass holds, ``buckets`` being images x this; 0 when the buckets are patches per image.
    vision_patches_per_item: int = 0
    #: ``--max-model-len auto`` (or -1): vLLM fits the longest sequence its KV cache holds, up to the model's
    #: maximum (``max_model_len`` is that maximum until :func:`.pipeline.fit_max_model_len` fits it).
    max_model_len_auto: bool = False
    #: The sizing fields the user gave (the rest are defaults), so that errors name only what was typed.
    given: frozenset[str] = frozenset()
    #: Bytes per KV-cache element (``--kv-cache-dtype``; the model's dtype under ``auto``).
    kv_dtype_size: int = 2
    #: Where an explicit KV-cache size came from when not ``--kv-cache-memory-bytes`` (``VLLM_CPU_KVCACHE_SPACE=4``).
    kv_cache_memory_source: str = ""
    #: Why the planned dtype is not the one ``--dtype`` asked for (the runtime replaces it); "" when it is.
    dtype_note: str = ""
    #: Why a given ``--kv-cache-memory-bytes`` is not planned (0, which the runtime reads as unset); "" otherwise.
    kv_cache_note: str = ""
    #: Whether vLLM chunks prefills (``--enable-chunked-prefill``, else the runtime's default).
    chunked_prefill: bool = True
    #: ``--num-gpu-blocks-override``: the KV blocks vLLM allocates whatever memory allows, or None.
    num_gpu_blocks_override: int | None = None
    #: Tokens proposed per step under ``--speculative-config`` (0: none).
    num_speculative_tokens: int = 0
    #: ``--enable-prefix-caching`` / ``--no-enable-prefix-caching`` as given; None: the runtime's default.
    enable_prefix_caching: bool | None = None
    #: vLLM's ``--performance-mode`` (balanced, interactivity or throughput).
    performance_mode: str = "balanced"
    #: ``--limit-mm-per-prompt`` sets image to 0: vLLM refuses every image, so no image bucket is captured, warmed
    #: or exported (``vision_bucketed`` is then False); ``buckets`` still shape the profiling pass's tower estimate.
    images_refused: bool = False
    #: Where the runtime reads a boolean variable set in the environment otherwise than our registry does (its own
    #: parsing: :meth:`~vllm_hpu_mm.runtimes.base.RuntimeTraits.read_boolean`), what it makes of it.
    reading_notes: tuple[str, ...] = ()
    #: Where the graph reserve or prompt ratio is the runtime's own default, not the guide's: what and why ("": not).
    graph_defaults_note: str = ""
    #: Where ``free_after_load_bytes`` was measured when a profile's figure was applied (``profile FILE, its source
    #: log``: set by :func:`.pipeline.apply_profile` alone); None when it was stated (``--free-memory-gib``) or is
    #: estimated.
    free_after_load_measured_by: str | None = None
    #: The runtime builds the vision tower: False when vLLM drops it because every one of its modalities' limits is 0
    #: (:func:`vllm_hpu_mm.plan.derived.vision_tower_built`, on a runtime whose traits say it follows the rule); its
    #: weights and profiling peak are then not planned.
    vision_tower_built: bool = True

    def vision_listed(self, buckets: Iterable[int]) -> str:
        """Vision buckets comma-separated in the unit the runtime reads: patches per image, or images per pass."""
        per_item = self.vision_patches_per_item or 1
        return ",".join(str(b // per_item) for b in buckets)

    def engine(self, kv_blocks: int) -> EngineShape:
        """The engine's shape these inputs give, with ``kv_blocks`` KV blocks (at least 1: a plan with no room for
        the KV cache still has the shape its graphs are warmed at)."""
        return EngineShape(max_model_len=self.max_model_len, max_num_seqs=self.max_num_seqs,
                           max_num_batched_tokens=self.max_num_batched_tokens, block_size=self.block_size,
                           num_kv_blocks=max(kv_blocks, 1),
                           num_speculative_tokens=self.num_speculative_tokens,
                           performance_mode=self.performance_mode)  # fmt: skip

    @property
    def vision_graphs(self) -> bool:
        """Whether the runtime warms graphs for this model's tower: a vision model on a runtime that captures its
        buckets (not vllm-fork before 1.22, whose prompt graphs then take the whole prefill share)."""
        return self.model.vision.present and self.runtime.traits.warms_vision_buckets

    @property
    def unwarmed(self) -> UnwarmedGraphs | None:
        """What a skipped warm-up leaves of the runtime's graphs (:attr:`.RuntimeTraits.unwarmed_graphs`, per runtime
        and release): every line about graphs under ``VLLM_SKIP_WARMUP`` is worded from this. None where warm-up runs,
        where no graph runs anyway (--enforce-eager), or where the runtime reads no such variable."""
        if not self.skip_warmup or self.enforce_eager:
            return None
        return self.runtime.traits.unwarmed_graphs

    @property
    def runtime_name(self) -> Runtime:
        return self.runtime.name

    @property
    def runtime_words(self) -> str:
        """The runtime planned for, with its release where one is named or installed."""
        return runtime_words(self.runtime.name, self.runtime_release)

    @property
    def knobs_not_read(self) -> tuple[str, ...]:
        """The guide's memory variables the runtime planned for does not read: those its traits leave out, and
        every one under no graphs (the Gaudi workers read the reserve only ``if not enforce_eager``, else 0:
        vllm-gaudi ``v1/worker/hpu_worker.py:410-411`` @091bbadd, vllm-fork ``hpu_worker.py:345-347`` @2e9b2b3d4,
        ``habana_worker.py:152-154`` @84922944d; the fork's prompt ratio only under ``if not self.enforce_eager``,
        ``hpu_model_runner.py:2385-2399`` @3bcdfd4af). The plan still splits its pools by them: what the table and
        the exports say of each, one rule. Then our other variables it does not read (:attr:`RuntimeTraits.not_read`:
        e.g. vllm-fork before 1.22 reads no ``VLLM_MULTIMODAL_BUCKETS``), which the plan ignores."""
        reads = frozenset() if self.enforce_eager else self.runtime.traits.reads
        graph = tuple(v for v in GRAPH_KNOBS if v not in reads)
        return graph + tuple(name for name, _ in self.runtime.traits.not_read)

    @property
    def settings_ignored(self) -> tuple[tuple[str, str, str], ...]:
        """(variable, value, where) for each variable set in the environment that the runtime planned for does not
        read, beyond the graph knobs (whose rows and exports say it): the plan ignores it."""
        return tuple((name, self.runtime_env[name], why) for name, why in self.runtime.traits.not_read
                     if name in self.runtime_env)  # fmt: skip

    @property
    def cards_per_replica(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size


def provenance(args: SizingArgs, i: PlanInputs) -> dict[str, str]:
    """Where the plan's model dimensions and device total came from, for the plan's output."""
    out = {}
    if i.max_model_len_auto:
        out["max_model_len_source"] = (
            f"{args.flag('max_model_len')} auto: {i.max_model_len}, the longest sequence the planned KV cache holds "
            f"(at most the model's {i.model.max_position_embeddings}), as vLLM fits it at start-up from the memory it "
            "measures"
        )
    if args.total_memory_gib is not None:
        device = f"{args.flag('total_memory_gib')} {args.total_memory_gib:g}"
    elif i.device in devices.KNOWN_DEVICES:
        device = devices.KNOWN_DEVICES[i.device].source
    else:
        device = f"read at plan time with {devices.READING_SOURCE[i.backend]}"
    if i.backend == "cpu" and i.tensor_parallel_size > 1:
        device += f"; divided by --tensor-parallel-size {i.tensor_parallel_size} (CPU ranks share the host)"
    return {"model_source": i.model.source, "device_source": device, **out}


def _ratio(args: SizingArgs, field: str, setting: float) -> float:
    """A guide ratio: the flag's (already bounded), else the environment's (validated by envs.load())."""
    value: float | None = getattr(args, field)
    return setting if value is None else value


def _runtime_graph_defaults(
    args: SizingArgs, settings: Settings, runtime: RuntimeModel, reserved: float, prompt: float
) -> tuple[float, float, str]:
    """The graph reserve and prompt ratio a runtime whose own defaults differ from the guide's uses where neither a
    flag nor the variable sets them (vllm-fork 1.17 / 1.18: 0.4 and 0.5), with a note saying so ("" where none)."""
    traits = runtime.traits
    used: list[str] = []
    if (
        traits.default_graph_reserved_mem is not None
        and args.graph_reserved_mem is None
        and GRAPH_RESERVED_MEM not in settings.given
    ):
        reserved = traits.default_graph_reserved_mem
        used.append(f"{GRAPH_RESERVED_MEM} {reserved:g}")
    if (
        traits.default_graph_prompt_ratio is not None
        and GRAPH_PROMPT_RATIO in traits.reads
        and args.graph_prompt_ratio is None
        and GRAPH_PROMPT_RATIO not in settings.given
    ):
        prompt = traits.default_graph_prompt_ratio
        used.append(f"{GRAPH_PROMPT_RATIO} {prompt:g}")
    if not used:
        return reserved, prompt, ""
    note = (f"planned at {' and '.join(used)}, {runtime.name.value}'s own default{'s' if len(used) > 1 else ''} "
            f"where unset ({traits.graph_defaults_source}), not the guide's {GRAPH_RESERVED_MEM} 0.1 / "
            f"{GRAPH_PROMPT_RATIO} 0.3 (the fork's from 1.19); serve exports the values planned")  # fmt: skip
    return reserved, prompt, note


def _device(args: SizingArgs) -> tuple[devices.DeviceSpec, int, int]:
    """(device, total bytes, free bytes before loading) for ``--device``, with ``--total-memory-gib`` applied."""
    name = (args.device or registry.default_device(args.runtime)).strip().lower()
    if name == "auto":
        reading = devices.read_device("auto")
        spec = devices.reading_spec(reading)
        free_before = reading.free_bytes
    else:
        spec = devices.device_spec(name, source=args.flag("device"))
        free_before = devices.read_cpu().free_bytes if spec.backend == "cpu" else spec.total_bytes
    total = spec.total_bytes
    if args.total_memory_gib is not None:
        total = round(args.total_memory_gib * GIB)
        # A stated total is a stated machine, free before loading as a named device is: this machine's live free
        # memory is no part of it (the plan is the same wherever it is made).
        free_before = total
    tp = args.tensor_parallel_size or 1
    if spec.backend == "cpu" and tp > 1:
        # vLLM's CPU tensor-parallel ranks are processes on one host: each plans against its share of host memory.
        total, free_before = total // tp, free_before // tp
    return spec, total, free_before


def _runtime_model(args: SizingArgs, backend: Backend, runtime_env: Mapping[str, str],
                   device: str | None = None) -> tuple[RuntimeModel, registry.Detection]:  # fmt: skip
    detection = registry.resolve(args.runtime or "auto", backend, source=args.flag("runtime"), device=device)
    return registry.model_for(detection.runtime, runtime_env, version=detection.version), detection


def _buckets(args: SizingArgs, settings: Settings) -> Buckets | None:
    """The vision buckets: the flag's (``None`` disables them), else VLLM_MULTIMODAL_BUCKETS."""
    if args.buckets is None:
        return settings.multimodal_buckets
    if args.buckets.strip().lower() == "none":
        return None
    return parse_buckets(args.buckets, source=args.flag("buckets"))


def _pool_mode(args: SizingArgs, backend: Backend) -> PoolMode:
    if args.vision_pool is None:
        return DEFAULT_POOL_MODE[backend]
    try:
        return PoolMode(args.vision_pool)
    except ValueError:
        raise ConfigError(
            f"{args.flag('vision_pool')}={args.vision_pool!r}; accepted: {', '.join(m.value for m in PoolMode)}"
        ) from None


def runtime_words(runtime: Runtime, release: str | None) -> str:
    """A runtime as the plan names it, with its release where one is named or installed ("vllm-fork 0.7.2")."""
    return f"{runtime.value} {release}" if release else runtime.value


def _check_multiple(buckets: Buckets | None, vb: VisionBucketing, source: str) -> None:
    """Refuse patch buckets the runtime's own validation stops the server on (vllm-fork 1.22: multiples of 8)."""
    off = [n for n in buckets or () if vb.bucketed and n % vb.bucket_multiple]
    if buckets is None or not off:
        return
    m = vb.bucket_multiple
    raise ConfigError(f"{source}={','.join(map(str, buckets))}: {', '.join(map(str, off))} not a multiple of "
                      f"{m}: {vb.bucket_multiple_source}; accepted: patch counts each a multiple of {m}, e.g. whole "
                      f"112-px tiles (multiples of 64): {nearest_tiles(off)}")  # fmt: skip


def _vision_buckets(
    model: ModelDims, runtime: RuntimeModel, configured: Buckets | None, env: Mapping[str, str], source: str
) -> tuple[tuple[int, ...] | None, bool, int]:
    """The buckets the plan sizes the tower's graphs for, whether they apply at all, and the patches per image of a
    batch-bucketed tower's pass (0 otherwise): Qwen2.5-VL takes the configured list unless the runtime batches it
    (vllm-gaudi v0.11.2 batches every tower); another family takes its runtime's default list (or
    VLLM_MULTIMODAL_BUCKETS when set), in patches, where the runtime buckets it by patches; a batch-bucketed tower
    (Gemma 3, and Qwen2-VL, which vllm-gaudi does not list) costs the buckets' images x patches per image; a tower the
    runtime does not bucket, or a text model, has none."""
    if not model.vision.present:
        return None, False, 0
    vb = runtime.vision_bucketing(model.model_type, model=model.name)
    if model.vision.aligned_processor_applies and not (vb.bucketed and vb.batch_based):
        # Qwen2.5-VL's patch buckets, unless the runtime batches every tower (vllm-gaudi v0.11.2: images per pass)
        _check_multiple(configured, vb, source)
        return configured, True, 0
    if not vb.bucketed:
        return None, False, 0
    raw = env.get("VLLM_MULTIMODAL_BUCKETS", "").strip()
    buckets = (
        tuple(int(b) for b in raw.split(",") if b.strip().isdigit()) if raw and raw != "None" else (vb.default_buckets)
    )
    if vb.batch_based:
        # a pass of n images: at the tower's fixed size, else its fixed tokens, else (a native-resolution tower, e.g.
        # Qwen2-VL) at the side the runtime's warm-up uses
        v = model.vision
        side = v.image_size or (0 if v.tokens_per_image else vb.batch_image_side)
        per_image = (side // v.patch_size) ** 2 if side else v.tokens_per_image * v.spatial_merge_size**2
        buckets = tuple(n * max(per_image, 1) for n in buckets)
        return buckets or None, True, max(per_image, 1)
    return buckets or None, True, 0


def _kv_cache_space(args: SizingArgs, runtime: RuntimeModel, env: Mapping[str, str]) -> tuple[int | None, str]:
    """The explicit KV-cache size the runtime uses and where it came from ("": ``--kv-cache-memory-bytes``): the
    runtime's own variable (:attr:`RuntimeTraits.kv_cache_space_var`) wins, in whole GiB, read with ``int()`` as vLLM
    reads it."""
    var = runtime.traits.kv_cache_space_var
    raw = env.get(var, "") if var else ""
    if raw == "":
        return args.kv_cache_memory_bytes, ""
    try:
        gib = int(raw)
    except ValueError:
        gib = -1
    # 0 is a 0-byte KV cache, refused at start-up as --kv-cache-memory-bytes 0 is (the plan's finding, exit 1);
    # a value int() refuses fails vLLM's config build (platforms/cpu.py check_and_update_config)
    if gib < 0:
        raise ConfigError(f"{var}={raw!r}: {runtime.name.value} reads it with int() as GiB of KV cache; accepted: a "
                          "whole number of GiB, 0 or more (or unset it)")  # fmt: skip
    return gib * GIB, f"{var}={raw}"


def build(args: SizingArgs, settings: Settings, runtime_env: Mapping[str, str] | None = None) -> PlanInputs:
    """Resolve defaults and validate; raises :class:`ConfigError` naming the flag or variable as it was spelled.
    ``runtime_env``: the runtime's own variables that are set (vllm-gaudi's bucketing), name -> raw value."""
    flag = args.flag
    model = resolve(DEFAULT_MODEL if args.model is None else args.model, source=flag("model"), revision=args.revision)
    size = dtype_bytes(args.dtype or "auto", source=flag("dtype"))
    tp, pp, dp = (args.tensor_parallel_size or 1, args.pipeline_parallel_size or 1, args.data_parallel_size or 1)
    args.check_bounds()
    reserved = _ratio(args, "graph_reserved_mem", settings.graph_reserved_mem)
    prompt = _ratio(args, "graph_prompt_ratio", settings.graph_prompt_ratio)
    mm = _ratio(args, "graph_multimodal_prompt_ratio", settings.graph_multimodal_prompt_ratio)
    buckets = _buckets(args, settings)

    spec, total, free_before = _device(args)
    free_after = round(args.free_memory_gib * GIB) if args.free_memory_gib is not None else None
    total_note = (
        f"stated by {flag('total_memory_gib')}" if args.total_memory_gib is not None else f"{spec.name}'s total"
    )
    total_flag = flag("total_memory_gib")
    validate.check_within_total(free_after, total, flag("free_memory_gib"), "free memory", total_note, total_flag)
    block_size = args.block_size or spec.block_size
    validate.check_block_size(spec.backend, block_size, flag("block_size"))
    validate.check_tensor_parallel(model, tp, flag("tensor_parallel_size"))
    env = dict(runtime_env or {})
    auto = args.max_model_len in (None, MAX_MODEL_LEN_AUTO)
    max_model_len = model.max_model_len if auto or args.max_model_len is None else args.max_model_len
    allow_long = env.get(ALLOW_LONG_MAX_MODEL_LEN, "0").strip().lower() in ("1", "true")
    validate.check_max_model_len(model, max_model_len, flag("max_model_len"), allow_long=allow_long)
    quant_flag = (
        flag("quantization") if args.quantization is not None else f"{model.source}: quantization_config.quant_method"
    )
    # vLLM reads the method lower-cased (0.32 config/model.py ModelConfig.validate_quantization_before): FP8 is fp8
    given_quantization = args.quantization.lower() if args.quantization is not None else None
    quantization = validate.check_quantization(given_quantization or model.quantization, quant_flag)
    validate.check_quantization_matches(model, given_quantization, quant_flag, spec.backend)
    validate.check_quantization_config_present(model, given_quantization, quant_flag)

    runtime, detection = _runtime_model(args, spec.backend, env, spec.name)
    # a prompt ratio the runtime does not read (vllm-gaudi, fork 1.22) is a planning input only as a flag: a value in
    # the shell, which the server ignores, must not change what is planned for it
    if GRAPH_PROMPT_RATIO not in runtime.traits.reads and args.graph_prompt_ratio is None:
        prompt = default_of(GRAPH_PROMPT_RATIO)
    if GRAPH_MULTIMODAL_PROMPT_RATIO not in runtime.traits.reads and args.graph_multimodal_prompt_ratio is None:
        mm = default_of(GRAPH_MULTIMODAL_PROMPT_RATIO)
    if VISION_BUCKETS in runtime.traits.not_read_names and args.buckets is None:  # the same for the vision buckets
        buckets = default_of(VISION_BUCKETS)
    reserved, prompt, defaults_note = _runtime_graph_defaults(args, settings, runtime, reserved, prompt)
    if args.kv_cache_memory_bytes is not None and runtime.traits.kv_cache_memory_bytes == "unknown":
        raise ConfigError(f"{flag('kv_cache_memory_bytes')}: {runtime.name.value} does not take it "
                          f"({runtime.traits.kv_cache_memory_bytes_source}); accepted: leave it out and size the KV "
                          f"cache with {flag('gpu_memory_utilization')} and VLLM_GRAPH_RESERVED_MEM")  # fmt: skip
    # a KV cache above the device's memory is no invalid input: vLLM's parser takes it and the server refuses it at
    # start-up (vLLM 0.32 v1/worker/cpu_worker.py determine_available_memory; an allocation beyond the card on CUDA),
    # so the plan says it as it says every start-up refusal (findings: kv_cache_over_memory, exit 1)
    kv_bytes, kv_source = _kv_cache_space(args, runtime, env)
    kv_note = ""
    if kv_bytes == 0 and not kv_source and runtime.traits.kv_cache_memory_bytes_zero_unset:
        kv_bytes = None
        kv_note = (f"{flag('kv_cache_memory_bytes')} 0: {runtime.name.value} reads 0 as unset (vLLM 0.32 "
                   "v1/worker/gpu_worker.py determine_available_memory tests it for truth), so the KV cache is "
                   f"sized from {flag('gpu_memory_utilization')} as without the flag")  # fmt: skip
    accepted_kv = runtime.traits.kv_cache_dtypes
    if accepted_kv and args.kv_cache_dtype is not None and args.kv_cache_dtype not in accepted_kv:
        raise ConfigError(f"{flag('kv_cache_dtype')}={args.kv_cache_dtype}: {runtime.name.value} refuses it "
                          f"({runtime.traits.kv_cache_dtypes_source}); accepted: {', '.join(accepted_kv)}")  # fmt: skip
    dtype_note = ""
    if size > 2 and runtime.traits.bfloat16_for_float32:
        size = 2
        dtype_note = (f"{flag('dtype')}={args.dtype}: {runtime.name.value} serves bfloat16 instead "
                      f"({runtime.traits.bfloat16_for_float32}); weights and KV cache planned at 2 bytes")  # fmt: skip
    given_util = args.gpu_memory_utilization
    util = runtime.traits.default_gpu_memory_utilization if given_util is None else given_util
    defaults = runtime.batch_defaults(DeviceFacts(spec.backend, total, spec.name, tp * pp))
    limits = scheduler_limits(defaults, max_model_len, args)
    given = args.max_num_seqs is not None and args.max_num_batched_tokens is not None
    buckets_from = flag("buckets") if args.buckets is not None else "VLLM_MULTIMODAL_BUCKETS"
    plan_buckets, vision_bucketed, per_item = _vision_buckets(model, runtime, buckets, env, buckets_from)
    pool = _pool_mode(args, spec.backend)
    release = runtime_words(runtime.name, detection.version)
    skip_warmup, skip_note = runtime.traits.boolean_as_read(SKIP_WARMUP, env, settings.skip_warmup, release)
    return PlanInputs(
        model=model,
        device=spec.name,
        backend=spec.backend,
        total_bytes=total,
        free_before_load_bytes=free_before,
        free_after_load_bytes=free_after,
        dtype_size=size,
        tensor_parallel_size=tp,
        gpu_memory_utilization=util,
        max_model_len=max_model_len,
        max_num_seqs=limits.max_num_seqs,
        max_num_batched_tokens=limits.max_num_batched_tokens,
        block_size=block_size,
        buckets=plan_buckets,
        graph_reserved_mem=reserved,
        graph_prompt_ratio=prompt,
        graph_multimodal_prompt_ratio=mm,
        pool_mode=pool,
        runtime=runtime,
        kv_cache_memory_bytes=kv_bytes,
        kv_cache_memory_source=kv_source,
        quantization=quantization,
        pipeline_parallel_size=pp,
        data_parallel_size=dp,
        enforce_eager=bool(args.enforce_eager),
        skip_warmup=skip_warmup,
        reading_notes=(*((skip_note,) if skip_note else ()), *runtime.traits.misread_booleans(env, release)),
        graph_defaults_note=defaults_note,
        runtime_found=detection.found,
        runtime_release=detection.version,
        expert_parallel_size=tp * dp if args.enable_expert_parallel and model.moe.present else 0,
        runtime_env=env,
        defaults_source="given" if given else limits.source,
        vision_bucketed=vision_bucketed,
        vision_patches_per_item=per_item,
        costs=HPU_LAZY_GRAPHS if spec.backend == "hpu" else ESTIMATES,
        max_model_len_auto=args.max_model_len == MAX_MODEL_LEN_AUTO,
        given=frozenset(o.field for o in VLLM_FLAGS if getattr(args, o.field) is not None),
        kv_dtype_size=kv_dtype_size(args.kv_cache_dtype, size, flag("kv_cache_dtype"), spec.backend),
        dtype_note=dtype_note,
        kv_cache_note=kv_note,
        chunked_prefill=limits.chunked_prefill,
        num_gpu_blocks_override=args.num_gpu_blocks_override,
        num_speculative_tokens=speculative_tokens(args.speculative_config, flag("speculative_config")),
        enable_prefix_caching=args.enable_prefix_caching,
        performance_mode=args.performance_mode or "balanced",
    )

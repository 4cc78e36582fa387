"""Building :class:`~vllm_hpu_mm.memory.planner.PlanInputs` from settings and explicit overrides, with every bad
value reported against the flag or variable it came from. Shared by ``memory plan`` and ``serve``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from vllm_hpu_mm.buckets.spec import parse_buckets
from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.memory import devices, runtimes, validate
from vllm_hpu_mm.memory.models import dtype_bytes, resolve_model
from vllm_hpu_mm.memory.rules import PlanInputs
from vllm_hpu_mm.memory.vision_cost import DEFAULT_POOL_MODE, PoolMode

GIB = 2**30
#: vLLM 0.32's EngineArgs default for --gpu-memory-utilization.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192


@dataclasses.dataclass(frozen=True)
class Request:
    """What the user asked for; None means "the default" (from the settings, the device or the model)."""

    model: str
    device: str = "gaudi2"
    free_memory_gib: float | None = None
    total_memory_gib: float | None = None
    dtype: str = "auto"
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    buckets: str | None = None
    graph_reserved_mem: float | None = None
    graph_prompt_ratio: float | None = None
    graph_multimodal_prompt_ratio: float | None = None
    vision_pool: str | None = None
    kv_cache_memory_bytes: int | None = None
    quantization: str | None = None
    #: auto, or a runtime name (:mod:`.runtimes`).
    runtime: str = "auto"
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enforce_eager: bool = False
    #: The runtime's own variables the user set (vllm-gaudi's bucketing), name -> raw value.
    runtime_env: tuple[tuple[str, str], ...] = ()
    #: Names of the flags, for error messages (serve spells some of them differently).
    flag_prefix: str = "--"
    #: The flag that names the runtime, for error messages.
    runtime_flag: str = "--runtime"
    #: The Hub revision whose cached config.json to read (vLLM's --revision); None: main.
    revision: str | None = None


def check_ratio(value: float, flag: str, *, allow_zero: bool = True) -> float:
    if not (0.0 < value <= 1.0 if not allow_zero else 0.0 <= value <= 1.0):
        lo = "0" if allow_zero else "above 0"
        raise ConfigError(f"{flag}={value} is out of range; accepted: a number from {lo} to 1")
    return value


#: The largest count we accept for a token/sequence/block flag: vLLM keeps positions and block tables in int32.
MAX_COUNT = 2**31 - 1


def check_positive(value: int | None, flag: str, *, maximum: int = MAX_COUNT) -> int | None:
    if value is not None and not 0 < value <= maximum:
        raise ConfigError(f"{flag}={value} is out of range; accepted: a positive integer up to {maximum}")
    return value


def check_memory(value: float | None, flag: str, *, positive: bool = False) -> float | None:
    """A GiB flag: finite, not negative (or positive), at most validate.MAX_MEMORY_GIB (rejects inf, NaN, 1e300)."""
    return validate.check_gib(value, flag, positive=positive)


def provenance(r: Request, i: PlanInputs) -> dict[str, str]:
    """Where the plan's model dimensions and device total came from, for the plan's output."""
    if r.total_memory_gib is not None:
        device = f"{r.flag_prefix}total-memory-gib {r.total_memory_gib:g}"
    elif i.device in devices.KNOWN_DEVICES:
        device = devices.KNOWN_DEVICES[i.device].source
    else:
        device = f"read at plan time with {devices.READING_SOURCE[i.backend]}"
    if i.backend == "cpu" and i.tensor_parallel_size > 1:
        device += f"; divided by --tensor-parallel-size {i.tensor_parallel_size} (CPU ranks share the host)"
    return {"model_source": i.model.source, "device_source": device}


def build(r: Request, settings: Settings) -> PlanInputs:
    """Resolve defaults and validate; raises :class:`ConfigError` naming the flag or variable."""
    f = r.flag_prefix
    model = resolve_model(r.model, source=f"{f}model", revision=r.revision)
    size = dtype_bytes(r.dtype, source=f"{f}dtype")
    check_positive(r.tensor_parallel_size, f"{f}tensor-parallel-size")
    check_positive(r.pipeline_parallel_size, f"{f}pipeline-parallel-size")
    check_positive(r.data_parallel_size, f"{f}data-parallel-size")
    for value, name in ((r.max_model_len, "max-model-len"), (r.max_num_seqs, "max-num-seqs"),
                        (r.max_num_batched_tokens, "max-num-batched-tokens"),
                        (r.block_size, "block-size")):  # fmt: skip
        check_positive(value, f + name)
    check_positive(r.kv_cache_memory_bytes, f"{f}kv-cache-memory-bytes", maximum=int(validate.MAX_MEMORY_GIB) * GIB)
    check_memory(r.free_memory_gib, f"{f}free-memory-gib")
    check_memory(r.total_memory_gib, f"{f}total-memory-gib", positive=True)
    util = r.gpu_memory_utilization if r.gpu_memory_utilization is not None else DEFAULT_GPU_MEMORY_UTILIZATION
    check_ratio(util, f"{f}gpu-memory-utilization", allow_zero=False)

    def ratio(flag_value: float | None, env_value: float, name: str) -> float:
        if flag_value is None:
            return env_value  # already validated by envs.load()
        return check_ratio(flag_value, f"{f}{name}")

    reserved = ratio(r.graph_reserved_mem, settings.graph_reserved_mem, "graph-reserved-mem")
    prompt = ratio(r.graph_prompt_ratio, settings.graph_prompt_ratio, "graph-prompt-ratio")
    mm = ratio(r.graph_multimodal_prompt_ratio, settings.graph_multimodal_prompt_ratio,
               "graph-multimodal-prompt-ratio")  # fmt: skip
    if r.buckets is None:
        buckets = settings.multimodal_buckets
    elif r.buckets.strip().lower() == "none":
        buckets = None
    else:
        buckets = parse_buckets(r.buckets, source=f"{f}buckets")

    name = r.device.strip().lower()
    if name == "auto":
        reading = devices.read_device("auto")
        spec = devices.reading_spec(reading)
        free_before = reading.free_bytes
    else:
        spec = devices.device_spec(name, source=f"{f}device")
        free_before = devices.read_cpu().free_bytes if spec.backend == "cpu" else spec.total_bytes
    total = spec.total_bytes
    if r.total_memory_gib is not None:
        total = round(r.total_memory_gib * GIB)
        free_before = min(free_before, total) if name in ("auto", "cpu") else total
    free_after = round(r.free_memory_gib * GIB) if r.free_memory_gib is not None else None

    # --- issue 10: the host shared by CPU ranks, sizes against the total, what vLLM refuses (memory/validate.py) ---
    if spec.backend == "cpu" and r.tensor_parallel_size > 1:
        # vLLM's CPU tensor-parallel ranks are processes on one host: each plans against its share of host memory.
        total, free_before = total // r.tensor_parallel_size, free_before // r.tensor_parallel_size
    total_note = f"stated by {f}total-memory-gib" if r.total_memory_gib is not None else f"{spec.name}'s total"
    validate.check_within_total(free_after, total, f"{f}free-memory-gib", "free memory", total_note)
    validate.check_within_total(r.kv_cache_memory_bytes, total, f"{f}kv-cache-memory-bytes", "a KV cache",
                                total_note)  # fmt: skip
    validate.check_block_size(spec.backend, r.block_size or spec.block_size, f"{f}block-size")
    validate.check_tensor_parallel(model, r.tensor_parallel_size, f"{f}tensor-parallel-size")
    quant_flag = (
        f"{f}quantization" if r.quantization is not None else f"{model.source}: quantization_config.quant_method"
    )
    quantization = validate.check_quantization(r.quantization or model.quantization, quant_flag)
    # --- end issue 10 ---

    detection = runtimes.resolve(r.runtime, spec.backend, source=r.runtime_flag)
    bucket_file = dict(r.runtime_env).get("VLLM_BUCKETING_FROM_FILE")
    bucket_file_text = None
    if bucket_file and detection.runtime is runtimes.Runtime.VLLM_GAUDI:
        try:
            bucket_file_text = Path(bucket_file).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"VLLM_BUCKETING_FROM_FILE={bucket_file!r}: cannot read it ({exc.strerror or exc}); "
                              "accepted: a readable vllm-gaudi bucket file") from None  # fmt: skip
    if r.vision_pool is None:
        pool = DEFAULT_POOL_MODE[spec.backend]
    else:
        try:
            pool = PoolMode(r.vision_pool)
        except ValueError:
            raise ConfigError(
                f"{f}vision-pool={r.vision_pool!r}; accepted: {', '.join(m.value for m in PoolMode)}"
            ) from None
    return PlanInputs(
        model=model,
        device=spec.name,
        backend=spec.backend,
        total_bytes=total,
        free_before_load_bytes=free_before,
        free_after_load_bytes=free_after,
        dtype_size=size,
        tensor_parallel_size=r.tensor_parallel_size,
        gpu_memory_utilization=util,
        max_model_len=r.max_model_len or model.max_position_embeddings,
        max_num_seqs=r.max_num_seqs or DEFAULT_MAX_NUM_SEQS,
        max_num_batched_tokens=r.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS,
        block_size=r.block_size or spec.block_size,
        buckets=buckets,
        graph_reserved_mem=reserved,
        graph_prompt_ratio=prompt,
        graph_multimodal_prompt_ratio=mm,
        pool_mode=pool,
        kv_cache_memory_bytes=r.kv_cache_memory_bytes,
        quantization=quantization,
        runtime=detection.runtime,
        pipeline_parallel_size=r.pipeline_parallel_size,
        data_parallel_size=r.data_parallel_size,
        runtime_env=tuple(sorted(r.runtime_env)),
        bucket_file_text=bucket_file_text,
        enforce_eager=r.enforce_eager,
        skip_warmup=settings.skip_warmup,
        runtime_found=detection.found,
    )

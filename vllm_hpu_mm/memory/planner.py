"""The memory plan: pure functions from frozen inputs to a frozen :class:`Plan`, one rule per function.

The split follows the Gaudi guide (vllm-gaudi / HabanaAI vllm-fork README):

1. free memory after weights and profiling -> usable = free x ``gpu_memory_utilization``;
2. graphs = usable x ``VLLM_GRAPH_RESERVED_MEM``; KV cache = the rest (-> blocks, sequences at max_model_len);
3. prefill graphs = graphs x ``VLLM_GRAPH_PROMPT_RATIO``; decode graphs = the rest;
4. prefill text = prefill x ``VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO``; prefill vision = the rest. (The guide's
   reading. The older fork's *code* gave the ratio to vision and the rest to text, the other way round.)
5. vision buckets captured ascending while they fit the vision pool (:mod:`.vision_cost`); the rest are skipped;
6. text prefill / decode graphs that fit their pools (:mod:`.text_cost`);
7. verdict and warnings, each with the smallest change that fixes it, computed by re-running the rules.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from vllm_hpu_mm.memory import text_cost, vision_cost
from vllm_hpu_mm.memory.costs import ESTIMATES, CostProfile
from vllm_hpu_mm.memory.models import ModelDims, kv_bytes_per_token, weight_bytes
from vllm_hpu_mm.memory.vision_cost import PoolMode
from vllm_hpu_mm.preprocess.align import QWEN_MAX_PIXELS

#: Tokens of the largest image stock Qwen2.5-VL accepts (its processor's max_pixels / 28²).
STOCK_MAX_IMAGE_TOKENS = QWEN_MAX_PIXELS // (28 * 28)

GIB = 2**30


@dataclasses.dataclass(frozen=True)
class PlanInputs:
    model: ModelDims
    device: str
    #: hpu, cuda or cpu: picks the default pool model and the wording of warnings.
    backend: str
    total_bytes: int
    #: Free device memory *before* loading the model (a reading, or the nominal total); ignored when
    #: ``free_after_load_bytes`` is given.
    free_before_load_bytes: int
    #: Free memory after weights and profiling, stated directly (the guide's starting point), or None to estimate.
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
    #: An explicit KV-cache size (vLLM's --kv-cache-memory-bytes): it then replaces rule 2's KV share.
    kv_cache_memory_bytes: int | None = None
    #: vLLM's --quantization, for the weight size (see models.QUANTIZED_WEIGHT_BYTES).
    quantization: str | None = None
    #: Graph cost coefficients: the built-in estimates, or what a warm-up log measured (``memory calibrate``).
    costs: CostProfile = ESTIMATES


@dataclasses.dataclass(frozen=True)
class Split:
    usable_bytes: int
    graph_bytes: int
    kv_cache_bytes: int
    prefill_graph_bytes: int
    decode_graph_bytes: int
    prefill_text_graph_bytes: int
    prefill_vision_graph_bytes: int


@dataclasses.dataclass(frozen=True)
class Warning_:
    """One finding: where it fails (``stage``), how bad (``severity``: error = will not start, warning = will
    compile or OOM later, info = a limit worth knowing), and the fix."""

    severity: str
    stage: str
    message: str
    fix: str


@dataclasses.dataclass(frozen=True)
class Plan:
    inputs: PlanInputs
    weight_bytes: int
    profile_bytes: int
    free_after_load_bytes: int
    split: Split
    kv_bytes_per_token: int
    kv_blocks: int
    max_concurrent_seqs: int
    vision_buckets_captured: tuple[int, ...]
    vision_buckets_skipped: tuple[int, ...]
    vision_capture_bytes: int
    prefill_graphs_fit: int
    prefill_graphs_total: int
    decode_graphs_fit: int
    decode_graphs_total: int
    warnings: tuple[Warning_, ...]

    @property
    def verdict(self) -> str:
        if any(w.severity == "error" for w in self.warnings):
            return "does_not_fit"
        return "fits_with_warnings" if any(w.severity == "warning" for w in self.warnings) else "fits"

    @property
    def fits(self) -> bool:
        return self.verdict != "does_not_fit"


# --- rules -----------------------------------------------------------------------------------------------------


def model_weight_bytes(i: PlanInputs) -> int:
    """Rule 0: weights held by one device (all sharded over TP)."""
    return weight_bytes(i.model, i.dtype_size, i.tensor_parallel_size, i.quantization)


def profile_peak_bytes(i: PlanInputs) -> int:
    """Rule 0b: the profiling run's activation peak above weights (an estimate): one text layer's activations for
    ``max_num_batched_tokens`` tokens, the sampler's float32 logits for ``max_num_seqs`` sequences, and the vision
    tower's eager peak at the largest bucket."""
    m = i.model
    tokens = i.max_num_batched_tokens
    text = tokens * (4 * m.hidden_size + 2 * m.intermediate_size // i.tensor_parallel_size) * i.dtype_size
    logits = i.max_num_seqs * m.vocab_size * 4
    largest = max(i.buckets) if i.buckets else 0
    vision = vision_cost.eager_peak_bytes(largest, m.vision, i.dtype_size) if largest else 0
    return text + logits + vision


def free_after_load(i: PlanInputs, weights: int, profile: int) -> int:
    """Rule 1a: free memory after weights and profiling (stated, or free before load minus both)."""
    if i.free_after_load_bytes is not None:
        return i.free_after_load_bytes
    return i.free_before_load_bytes - weights - profile


def usable_bytes(free: int, gpu_memory_utilization: float) -> int:
    """Rule 1: usable = free x gpu_memory_utilization (nothing when nothing is free)."""
    return max(0, round(free * gpu_memory_utilization))


def graph_bytes(usable: int, graph_reserved_mem: float, pool_mode: PoolMode) -> int:
    """Rule 2a: graph memory = usable x VLLM_GRAPH_RESERVED_MEM; none without graphs (CPU / eager)."""
    return 0 if pool_mode is PoolMode.NONE else round(usable * graph_reserved_mem)


def kv_cache_bytes(usable: int, graphs: int, explicit: int | None) -> int:
    """Rule 2b: the KV cache gets the rest of usable memory, unless its size is given (--kv-cache-memory-bytes)."""
    return explicit if explicit is not None else usable - graphs


def kv_blocks(kv_bytes: int, per_token: int, block_size: int) -> int:
    """Rule 2c: whole KV blocks in the KV cache."""
    return kv_bytes // (per_token * block_size) if per_token > 0 else 0


def max_concurrent_seqs(blocks: int, block_size: int, max_model_len: int) -> int:
    """Rule 2d: sequences of full ``max_model_len`` the cache holds at once."""
    return blocks // -(-max_model_len // block_size)


def prefill_decode_split(graphs: int, prompt_ratio: float) -> tuple[int, int]:
    """Rule 3: (prefill, decode) = graphs x VLLM_GRAPH_PROMPT_RATIO and the rest."""
    prefill = round(graphs * prompt_ratio)
    return prefill, graphs - prefill


def text_vision_split(prefill: int, multimodal_prompt_ratio: float) -> tuple[int, int]:
    """Rule 4: (text, vision) = prefill x VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO and the rest (the guide's way)."""
    text = round(prefill * multimodal_prompt_ratio)
    return text, prefill - text


def split_memory(i: PlanInputs, free: int) -> Split:
    """Rules 1-4 together."""
    usable = usable_bytes(free, i.gpu_memory_utilization)
    graphs = graph_bytes(usable, i.graph_reserved_mem, i.pool_mode)
    kv = kv_cache_bytes(usable, graphs, i.kv_cache_memory_bytes)
    prefill, decode = prefill_decode_split(graphs, i.graph_prompt_ratio)
    text, vision = text_vision_split(prefill, i.graph_multimodal_prompt_ratio)
    return Split(usable, graphs, kv, prefill, decode, text, vision)


def vision_fit(i: PlanInputs, vision_pool: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Rule 5: buckets captured ascending until the vision pool is exhausted; the rest are skipped."""
    if not i.buckets:
        return (), ()
    return vision_cost.fit_buckets(i.buckets, vision_pool, i.pool_mode, i.model.vision, i.dtype_size, i.costs)


def text_graph_fit(i: PlanInputs, s: Split, blocks: int) -> tuple[int, int, int, int]:
    """Rule 6: (prefill fit, prefill total, decode fit, decode total) graph counts; zero totals without graphs."""
    if i.pool_mode is PoolMode.NONE:
        return 0, 0, 0, 0
    common = {"dtype_size": i.dtype_size, "tp": i.tensor_parallel_size, "block_size": i.block_size,
              "max_num_seqs": i.max_num_seqs, "max_model_len": i.max_model_len}  # fmt: skip
    prefill = text_cost.prefill_buckets(i.model, max_num_batched_tokens=i.max_num_batched_tokens, costs=i.costs,
                                        **common)  # fmt: skip
    decode = text_cost.decode_buckets(i.model, num_kv_blocks=blocks, costs=i.costs, **common)
    return (text_cost.count_fitting(prefill, s.prefill_text_graph_bytes), len(prefill),
            text_cost.count_fitting(decode, s.decode_graph_bytes), len(decode))  # fmt: skip


# --- fixes: the smallest change, found by re-running the rules ---------------------------------------------------


def _ceil2(x: float) -> float:
    return math.ceil(x * 100 - 1e-9) / 100


def _floor2(x: float) -> float:
    return math.floor(x * 100 + 1e-9) / 100


def _search_up(start: float, ok: Callable[[float], bool]) -> float | None:
    """Smallest value in 0.01 steps from ``start`` up to 1.0 for which ``ok`` holds."""
    if not start <= 1.0:  # beyond any ratio (also inf / NaN from a vanishing denominator)
        return None
    v = _ceil2(start)
    while v <= 1.0 + 1e-9:
        if ok(v):
            return v
        v = round(v + 0.01, 2)
    return None


def _search_down(start: float, ok: Callable[[float], bool]) -> float | None:
    """Largest value in 0.01 steps from ``start`` down to 0.0 for which ``ok`` holds."""
    if not start >= 0.0:
        return None
    v = _floor2(start)
    while v >= -1e-9:
        if ok(v):
            return v
        v = round(v - 0.01, 2)
    return None


def _holds_one_seq(i: PlanInputs, s: Split) -> bool:
    blocks = kv_blocks(s.kv_cache_bytes, kv_bytes_per_token(i.model, i.dtype_size, i.tensor_parallel_size),
                       i.block_size)  # fmt: skip
    return max_concurrent_seqs(blocks, i.block_size, i.max_model_len) >= 1


def vision_fix(i: PlanInputs, free: int) -> str:
    """The smallest VLLM_GRAPH_RESERVED_MEM (or else the largest VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO) that captures
    every bucket while the KV cache still holds one sequence."""
    assert i.buckets
    need = vision_cost.capture_bytes(sorted(i.buckets), i.pool_mode, i.model.vision, i.dtype_size, i.costs)
    largest = max(i.buckets)

    def with_reserved(r: float) -> bool:
        s = split_memory(dataclasses.replace(i, graph_reserved_mem=r), free)
        return s.prefill_vision_graph_bytes >= need and _holds_one_seq(i, s)

    usable = usable_bytes(free, i.gpu_memory_utilization)
    share = i.graph_prompt_ratio * (1 - i.graph_multimodal_prompt_ratio)
    if usable and share:
        r = _search_up(max(i.graph_reserved_mem, need / (usable * share)), with_reserved)
        if r is not None:
            return f"raise VLLM_GRAPH_RESERVED_MEM to {r:.2f} to capture bucket {largest} (and every smaller one)"

    def with_mm(m: float) -> bool:
        return (
            split_memory(dataclasses.replace(i, graph_multimodal_prompt_ratio=m), free).prefill_vision_graph_bytes
            >= need
        )

    m = _search_down(i.graph_multimodal_prompt_ratio, with_mm)
    if m is not None:
        return f"lower VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO to {m:.2f} to capture bucket {largest}"
    return f"drop buckets above {largest}, or free device memory (lower --max-model-len or raise TP)"


def kv_fix(i: PlanInputs, free: int, s: Split, per_token: int) -> str:
    """Ways to fit one ``max_model_len`` sequence: shorter max_model_len, less graph memory, or more utilization."""
    fixes = []
    tokens = kv_blocks(s.kv_cache_bytes, per_token, i.block_size) * i.block_size
    if tokens >= i.block_size:
        fixes.append(f"lower --max-model-len to {tokens}")
    if i.kv_cache_memory_bytes is not None:
        need = -(-i.max_model_len // i.block_size) * i.block_size * per_token
        fixes.append(f"raise --kv-cache-memory-bytes to {need}")
        return "; or ".join(fixes)
    r = _search_down(i.graph_reserved_mem, lambda v: _holds_one_seq(i, split_memory(
        dataclasses.replace(i, graph_reserved_mem=v), free)))  # fmt: skip
    if r is not None and r < i.graph_reserved_mem:
        fixes.append(f"lower VLLM_GRAPH_RESERVED_MEM to {r:.2f}")
    u = _search_up(i.gpu_memory_utilization, lambda v: _holds_one_seq(i, split_memory(
        dataclasses.replace(i, gpu_memory_utilization=v), free)))  # fmt: skip
    if u is not None and u > i.gpu_memory_utilization:
        fixes.append(f"raise --gpu-memory-utilization to {u:.2f}")
    return "; or ".join(fixes) or "raise --tensor-parallel-size or use a device with more memory"


def tp_fix(i: PlanInputs) -> str:
    """The smallest power-of-two TP at which weights and profiling leave memory free."""
    tp = i.tensor_parallel_size
    while tp <= 64:
        tp *= 2
        j = dataclasses.replace(i, tensor_parallel_size=tp)
        if free_after_load(j, model_weight_bytes(j), profile_peak_bytes(j)) > 0:
            return f"raise --tensor-parallel-size to {tp} (weights per device {model_weight_bytes(j) / GIB:.1f} GiB)"
    return "use a device with more memory, or a quantized model"


def encoder_cache_tokens(i: PlanInputs) -> tuple[int, int]:
    """Rule 8: (ours, stock) size of vLLM's encoder cache, in tokens.

    vLLM 0.32 sizes it as ``max(max_num_batched_tokens, largest tokens per image)``. Capping images at the largest
    bucket (``shrink``) lowers that maximum, so fewer encoded images stay cached than stock vLLM would keep.
    """
    stock = max(i.max_num_batched_tokens, STOCK_MAX_IMAGE_TOKENS)
    if not i.buckets:
        return stock, stock
    return max(i.max_num_batched_tokens, max(i.buckets) // 4), stock


def findings(i: PlanInputs, p_free: int, s: Split, captured: tuple[int, ...], skipped: tuple[int, ...],
             per_token: int, seqs: int, text_counts: tuple[int, int, int, int]) -> tuple[Warning_, ...]:  # fmt: skip
    """Rule 7: what will fail where, each with its smallest fix."""
    out: list[Warning_] = []
    if p_free <= 0:
        out.append(Warning_("error", "startup", f"weights and profiling need {-p_free / GIB:.1f} GiB more than the "
                            f"device has free: OOM while loading or profiling", tp_fix(i)))  # fmt: skip
        return tuple(out)
    if seqs < 1:
        out.append(Warning_("error", "kv_cache", f"the KV cache ({s.kv_cache_bytes / GIB:.2f} GiB) cannot hold one "
                            f"sequence of --max-model-len {i.max_model_len}: vLLM refuses to start",
                            kv_fix(i, p_free, s, per_token)))  # fmt: skip
    elif seqs < i.max_num_seqs:
        out.append(Warning_("info", "kv_cache", f"only {seqs} sequences of --max-model-len {i.max_model_len} fit "
                            f"the KV cache at once (--max-num-seqs {i.max_num_seqs}); longer requests queue",
                            f"lower --max-num-seqs to {seqs} or --max-model-len"))  # fmt: skip
    if skipped:
        stock = (
            " (stock vllm-gaudi captures every bucket without a check: OOM at warm-up)" if i.backend == "hpu" else ""
        )
        out.append(Warning_("warning", "graph_capture", f"vision buckets {','.join(map(str, skipped))} do not fit the "
                            f"vision graph pool ({s.prefill_vision_graph_bytes / GIB:.2f} GiB); they would compile at "
                            f"run time{stock}", vision_fix(i, p_free)))  # fmt: skip
    pf, pt, df, dt = text_counts
    if pf < pt:
        out.append(Warning_("warning", "graph_capture", f"{pf} of {pt} text prefill graphs fit their pool "
                            f"({s.prefill_text_graph_bytes / GIB:.2f} GiB); the rest compile at run time",
                            "raise VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO or VLLM_GRAPH_PROMPT_RATIO"))  # fmt: skip
    if df < dt:
        out.append(Warning_("warning", "graph_capture", f"{df} of {dt} decode graphs fit their pool "
                            f"({s.decode_graph_bytes / GIB:.2f} GiB); the rest compile at run time",
                            "lower --max-num-seqs, or raise VLLM_GRAPH_RESERVED_MEM"))  # fmt: skip
    cache_tokens, stock_tokens = encoder_cache_tokens(i)
    if cache_tokens < stock_tokens:
        # Measured (benchmarks/results/reliability_cpu_quiet.md): 14.8 vs 31.9 req/s on repeated images, 32.4 after.
        message = (
            f"vLLM's encoder cache will hold {cache_tokens} tokens (stock vLLM: {stock_tokens}): with images capped "
            "at the largest bucket, fewer encoded images stay cached, and traffic that repeats images with new text "
            "re-runs the vision encoder"
        )
        fix = f"raise --max-num-batched-tokens to {stock_tokens} if your traffic repeats images"
        out.append(Warning_("info", "runtime", message, fix))
    return tuple(out)


def plan(i: PlanInputs) -> Plan:
    """Run every rule."""
    weights = model_weight_bytes(i)
    profile = profile_peak_bytes(i)
    free = free_after_load(i, weights, profile)
    s = split_memory(i, max(free, 0))
    per_token = kv_bytes_per_token(i.model, i.dtype_size, i.tensor_parallel_size)
    blocks = kv_blocks(s.kv_cache_bytes, per_token, i.block_size)
    seqs = max_concurrent_seqs(blocks, i.block_size, i.max_model_len)
    captured, skipped = vision_fit(i, s.prefill_vision_graph_bytes)
    counts = text_graph_fit(i, s, blocks)
    return Plan(
        inputs=i,
        weight_bytes=weights,
        profile_bytes=profile,
        free_after_load_bytes=free,
        split=s,
        kv_bytes_per_token=per_token,
        kv_blocks=blocks,
        max_concurrent_seqs=seqs,
        vision_buckets_captured=captured,
        vision_buckets_skipped=skipped,
        vision_capture_bytes=vision_cost.capture_bytes(captured, i.pool_mode, i.model.vision, i.dtype_size, i.costs),
        prefill_graphs_fit=counts[0],
        prefill_graphs_total=counts[1],
        decode_graphs_fit=counts[2],
        decode_graphs_total=counts[3],
        warnings=findings(i, free, s, captured, skipped, per_token, seqs, counts),
    )

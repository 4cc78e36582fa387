"""A roofline time model of one forward step: what a prefill pass, a decode pass or a vision pass at a given shape
costs for one model on one device. Used *relatively* (padded shapes against the real ones, one bucket set against
another), so a calibration error of the efficiency factors moves both sides of a comparison together
(``benchmarks/agreement/results/step_time_check.md`` says by how much it can move a verdict).

The model, per step and per device (tensor parallelism divides the work):

- **linear layers**: 2 FLOPs per active parameter per token (attention projections, dense MLPs, shared experts,
  routed experts at ``experts_per_token / num_experts``), plus the LM head for one token per sequence (vLLM computes
  logits for the last position only); they read the language model's weights once per step (the embedding table
  only when tied to the LM head; of the routed experts, the share a step's tokens touch:
  ``1 - (1 - k/E)^tokens``), plus the activations (4 x hidden + 2 x intermediate per token per layer);
- **attention**: 4 x heads x head_dim FLOPs per (query, key) pair per layer (QK^T and AV), over the cached context
  and the causal half of the query itself (sliding layers see at most their window); it reads the cached K/V of the
  context and writes the K/V of the new tokens;
- **vision**: 2 FLOPs per tower parameter per patch, attention over the tower's windows (Qwen2.5-VL: 8 x 8 patch
  windows, full attention in one block of eight) and reading the tower's weights;
- each part is a roofline of its compute time ``c = FLOPs / (peak x compute_efficiency)`` and memory time
  ``m = bytes / (bandwidth x memory_efficiency)``, linear and attention apart (decode attention is memory-bound while a
  large batch's linear layers are not), plus a fixed ``overhead_s`` per step (launch and host work: what a graph
  replay costs even for no work). The roofline is smooth, ``(c^p + m^p)^(1/p)`` with the device's fitted
  ``roofline_exponent`` p: a matmul streams its weights while it multiplies, but near the ridge (a prompt of a few
  hundred tokens) neither engine is kept busy by the other's pipeline, so the step costs more than the larger of the
  two (p = 1: no overlap at all; p -> infinity: the ideal ``max(c, m)``, the value for devices without a fit);
- **tensor parallelism**: two all-reduces of the hidden state per layer, a ring over the card's scale-up links plus
  a fixed ``allreduce_latency_s`` each.

Approximations, named: linear-attention (state-space) layers are priced as attention layers of the same width;
quantized weights are read at their width and multiplied at the bf16 rate, fp8 ones at the device's fp8 rate
(attention runs at the same matrix rate).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.dims import (
    ModelDims,
    VisionDims,
    active_linear_parameters,
    expert_parameters,
    expert_weight_bytes,
    kv_bytes_per_token,
    vision_parameters,
    weight_bytes,
)

__all__ = [
    "ALLREDUCE_LATENCY_S",
    "COMPUTE_EFFICIENCY",
    "DEVICE_FITS",
    "DEVICE_RATES",
    "MEMORY_EFFICIENCY",
    "STEP_OVERHEAD_S",
    "DeviceFit",
    "DeviceRates",
    "PhaseInterval",
    "StepTime",
    "has_public_fit",
    "has_time_model",
    "interval_dict",
    "interval_text",
    "step_time",
    "time_interval_lines",
    "tokens_per_second",
    "verdict_note",
]

TERA = 10**12


@dataclasses.dataclass(frozen=True)
class DeviceRates:
    """A device's dense bf16 and fp8 matrix peaks (FLOP/s) and memory bandwidth (bytes/s), with their public
    source."""

    name: str
    bf16_flops: float
    bandwidth: float
    source: str
    fp8_flops: float = 0.0
    #: One card's scale-up bandwidth to its peers (bytes/s, one direction): what a tensor-parallel all-reduce uses.
    link_bandwidth: float = 0.0


#: Vendor peak figures of one card (dense bf16 matrix engine, HBM bandwidth).
DEVICE_RATES: dict[str, DeviceRates] = {
    r.name: r
    for r in (
        DeviceRates("gaudi2", 432 * TERA, 2.46 * TERA,
                    "Habana Gaudi2 white paper / Intel Gaudi2 product brief: 432 TFLOPS bf16 and 865 TFLOPS fp8 "
                    "(MME), 96 GB HBM2E at 2.46 TB/s; 21 of its 24 100 GbE RoCE ports reach the other 7 cards of an "
                    "HLS-Gaudi2 (262.5 GB/s)", 865 * TERA, 262.5e9),
        DeviceRates("gaudi3", 1835 * TERA, 3.7 * TERA,
                    "Intel Gaudi 3 AI accelerator white paper (2024): 1835 TFLOPS bf16 and fp8 matrix (MME), 128 GB "
                    "HBM2e at 3.7 TB/s; 21 of its 24 200 GbE ports reach the other 7 cards (525 GB/s)", 1835 * TERA,
                    525e9),
        DeviceRates("h100", 989 * TERA, 3.35 * TERA,
                    "NVIDIA H100 datasheet (SXM5 80GB): 989 TFLOPS dense bf16 and 1979 dense fp8 tensor core, "
                    "3.35 TB/s HBM3, NVLink 900 GB/s (450 each way)", 1979 * TERA, 450e9),
        DeviceRates("h200", 989 * TERA, 4.8 * TERA,
                    "NVIDIA H200 datasheet (SXM 141GB): 989 TFLOPS dense bf16 and 1979 dense fp8 tensor core, "
                    "4.8 TB/s HBM3e, NVLink 900 GB/s (450 each way)", 1979 * TERA, 450e9),
    )
}  # fmt: skip

#: Share of the matrix peak a step's matmuls reach and of the bandwidth its reads reach, the fixed cost of one step
#: (graph launch, sampling, host work) and of one tensor-parallel all-reduce (two per layer), for a device without a
#: fit (:data:`DEVICE_FITS` has the fitted ones): the values shipped before the per-device fit.
COMPUTE_EFFICIENCY = 0.55
MEMORY_EFFICIENCY = 0.9
STEP_OVERHEAD_S = 4e-3
ALLREDUCE_LATENCY_S = 100e-6
#: Phases a time figure belongs to (vision has no public point: its interval is unbounded).
PHASES = ("decode", "prefill", "vision")
_FIT_FILE = "step_time_fit.json"
_FIT_REPORT = "benchmarks/fits/results/step_time_fit.md"


@dataclasses.dataclass(frozen=True)
class PhaseInterval:
    """Held-out evidence for one device and phase: the published time over the modelled one ranged over
    ``[low, high]`` on ``n`` public points the fit never saw; median and largest |modelled / published - 1|. Where
    fewer than three held-out points check the phase, the range is widened to also cover the ``fit_rows`` fitted
    points of that phase (their in-sample errors are a floor, not a test)."""

    low: float
    high: float
    n: int
    median_error: float
    max_error: float
    fit_rows: int = 0

    @property
    def half_width(self) -> float:
        """The +- share that covers every held-out point: max(1 - low, high - 1)."""
        return max(1.0 - self.low, self.high - 1.0)


@dataclasses.dataclass(frozen=True)
class DeviceFit:
    """One device's constants fitted on public points (``benchmarks/fits/step_time_fit.py``), with the held-out
    interval of each phase."""

    compute_efficiency: float
    memory_efficiency: float
    overhead_s: float
    #: Per tensor-parallel size; sizes without a fit point take ``allreduce_other_tp_s``.
    allreduce_latency_s: Mapping[int, float]
    allreduce_other_tp_s: float
    intervals: Mapping[str, PhaseInterval]
    evidence: str
    #: How sharply compute and memory time overlap (:attr:`StepTime.roofline_exponent`).
    roofline_exponent: float = math.inf

    def allreduce_s(self, tp: int) -> float:
        return self.allreduce_latency_s.get(tp, self.allreduce_other_tp_s)


def _load_fits() -> dict[str, DeviceFit]:
    """The package's fitted constants (vllm_hpu_mm/data/step_time_fit.json, written by the fitting script)."""
    data: dict[str, Any] = json.loads(resources.files("vllm_hpu_mm.data").joinpath(_FIT_FILE).read_text())
    evidence = f"{data['evidence']}; held-out split declared at {data.get('split_commit', '?')}: {_FIT_REPORT}"
    fits: dict[str, DeviceFit] = {}
    for name, d in data["devices"].items():
        intervals = {phase: PhaseInterval(v["true_over_model_min"], v["true_over_model_max"], v["n"],
                                          v["median_error"], v["max_error"], v.get("widened_to_fit_rows", 0))
                     for phase, v in d["intervals"].items() if v.get("n")}  # fmt: skip
        fits[name] = DeviceFit(d["compute_efficiency"], d["memory_efficiency"], d["overhead_s"],
                               {int(k): v for k, v in d["allreduce_latency_s"].items()},
                               d["allreduce_latency_other_tp_s"], intervals, evidence,
                               d.get("roofline_exponent", math.inf))  # fmt: skip
    return fits


#: Per device: compute efficiency (compute-bound prefill), memory efficiency (bandwidth-bound decode), step
#: overhead and all-reduce latency per TP size, fitted on Intel's published Gaudi 2 / Gaudi 3 tables with a held-out
#: split declared before the fit (``benchmarks/fits/results/step_time_fit.md``).
DEVICE_FITS: dict[str, DeviceFit] = _load_fits()
#: Of the Qwen2.5-VL tower's blocks, one in this many attends over the whole image (``fullatt_block_indexes``
#: 7, 15, 23, 31 of 32); the rest attend within windows of ``window_size`` pixels.
_FULL_ATTENTION_EVERY = 8
#: --quantization methods whose matmuls run at the device's fp8 rate (Gaudi's INC fp8 and vLLM's fp8).
_FP8_METHODS = frozenset({"fp8", "inc", "fp8_per_tensor", "fp8_per_channel", "fp8_per_block", "fbgemm_fp8"})


def has_time_model(device: str) -> bool:
    """Whether :func:`step_time` knows the device's rates (the named accelerators; not a host CPU)."""
    return device.strip().lower() in DEVICE_RATES


#: Most prices one step model keeps per kind.
PRICES_KEPT = 1 << 16


def _keep(memo: dict[tuple[int, int], float], key: tuple[int, int], value: float) -> None:
    if len(memo) >= PRICES_KEPT:
        memo.clear()
    memo[key] = value


@dataclasses.dataclass(frozen=True)
class StepTime:
    """The per-step costs of one model on one device, per card. Build it with :func:`step_time`."""

    device: DeviceRates
    #: The matrix rate the model's linear layers run at (fp8 weights on a device with an fp8 rate: that rate).
    matrix_flops: float
    block_size: int
    tensor_parallel_size: int
    #: FLOPs per token of the linear layers without the routed experts, and of the routed experts when every
    #: expert ran (scaled by the active share); the LM head per sequence.
    linear_flops_per_token: float
    expert_flops_per_token: float
    head_flops_per_sequence: float
    #: Bytes read per step: dense weights, all routed experts (times the touched share), activations per token.
    dense_weight_bytes: float
    expert_weight_bytes: float
    experts_active_share: float
    activation_bytes_per_token: float
    #: Attention FLOPs per (query, key) pair over all layers; KV bytes per cached token over all layers.
    attention_flops_per_pair: float
    kv_bytes_per_token: float
    #: Sliding-window layers' share of the attention layers and their window (tokens), 0 when none.
    sliding_share: float
    sliding_window: int
    #: Vision tower: FLOPs per patch of its weights, attention FLOPs per (patch, patch) pair per block, blocks with
    #: full attention and with windowed attention, patches per window, weight bytes.
    vision_flops_per_patch: float
    vision_pair_flops: float
    vision_full_blocks: int
    vision_window_blocks: int
    vision_window_patches: int
    vision_weight_bytes: float
    #: Tensor parallelism: all-reduces per step (two per layer) and bytes each reduces per token.
    allreduces: int = 0
    allreduce_bytes_per_token: float = 0.0
    compute_efficiency: float = COMPUTE_EFFICIENCY
    memory_efficiency: float = MEMORY_EFFICIENCY
    overhead_s: float = STEP_OVERHEAD_S
    allreduce_latency_s: float = ALLREDUCE_LATENCY_S
    #: p of the smooth roofline ``(c^p + m^p)^(1/p)`` (infinity: ``max(c, m)``, compute and memory fully overlapped).
    roofline_exponent: float = math.inf
    #: The public fit the constants come from (None: given by the caller, or a device without one).
    fit: DeviceFit | None = None
    #: Prices kept by what they read (a replay prices the same chunks and token counts in many steps; the planner
    #: the same shapes in many tries): one chunk's attention (query, context blocks) and the linear layers at
    #: (tokens, sequences); at most :data:`PRICES_KEPT` each (past it, a memo starts again).
    _attention: dict[tuple[int, int], float] = dataclasses.field(default_factory=dict, init=False, repr=False,
                                                                 compare=False)  # fmt: skip
    _linear: dict[tuple[int, int], float] = dataclasses.field(default_factory=dict, init=False, repr=False,
                                                              compare=False)  # fmt: skip

    def interval(self, phase: str) -> tuple[float, float, int, str]:
        """(low, high, n, evidence): the published time over this model's time for ``phase`` ranged over
        [low, high] on n held-out public points; (0, inf, 0, why) where no public point checks it."""
        if phase not in PHASES:
            raise ConfigError(f"step phase {phase!r} is invalid; accepted: {', '.join(PHASES)}")
        if self.fit is None:
            return 0.0, math.inf, 0, f"{self.device.name}: constants not fitted on public points (unbounded)"
        iv = self.fit.intervals.get(phase)
        if iv is None:
            return 0.0, math.inf, 0, f"{self.device.name} {phase}: no public point (unbounded)"
        return iv.low, iv.high, iv.n, self.fit.evidence

    def _roof(self, flops: float, nbytes: float) -> float:
        c = flops / (self.matrix_flops * self.compute_efficiency)
        m = nbytes / (self.device.bandwidth * self.memory_efficiency)
        top = max(c, m)
        p = self.roofline_exponent
        if top <= 0 or math.isinf(p):
            return top
        return top * math.pow(math.pow(c / top, p) + math.pow(m / top, p), 1 / p)

    def _touched(self, tokens: int) -> float:
        """Share of the routed experts' weights a step of ``tokens`` tokens reads."""
        if self.experts_active_share <= 0:
            return 0.0
        return 1.0 - (1.0 - self.experts_active_share) ** tokens

    def _allreduce_s(self, tokens: int) -> float:
        """A ring all-reduce moves 2 (tp - 1) / tp of the data over each card's links, plus a fixed cost each."""
        if not self.allreduces:
            return 0.0
        tp = self.tensor_parallel_size
        moved = tokens * self.allreduce_bytes_per_token * 2 * (tp - 1) / tp
        bandwidth = (self.device.link_bandwidth or self.device.bandwidth) * self.memory_efficiency
        return self.allreduces * self.allreduce_latency_s + moved / bandwidth

    def _linear_s(self, tokens: int, sequences: int) -> float:
        got = self._linear.get((tokens, sequences))
        if got is None:
            flops = tokens * (self.linear_flops_per_token + self.expert_flops_per_token) + (
                sequences * self.head_flops_per_sequence
            )
            nbytes = self.dense_weight_bytes + self.expert_weight_bytes * self._touched(tokens)
            got = self._roof(flops, nbytes + tokens * self.activation_bytes_per_token) + self._allreduce_s(tokens)
            _keep(self._linear, (tokens, sequences), got)
        return got

    def _pairs(self, query: int, context: int) -> float:
        """(query, key) pairs of one sequence over the layers, averaged over full and sliding layers: every query
        token sees the context and the causal part of the query."""
        full = query * context + query * (query + 1) / 2
        if not self.sliding_share:
            return full
        w = self.sliding_window
        # token i of the query sees min(w, context + i + 1) keys in a sliding layer: the first k grow, the rest see w
        k = max(0, min(w - context, query))
        windowed = k * context + k * (k + 1) / 2 + (query - k) * w
        return (1 - self.sliding_share) * full + self.sliding_share * windowed

    def prefill_s(self, batch: int, query_tokens: int, context_blocks: int) -> float:
        """One prefill pass: ``batch`` sequences of ``query_tokens`` new tokens, each over ``context_blocks`` blocks
        of cached context."""
        _check(batch=batch, query_tokens=query_tokens, context_blocks=context_blocks)
        if batch == 0 or query_tokens == 0:
            return self.overhead_s
        context = context_blocks * self.block_size
        tokens = batch * query_tokens
        attention = self._roof(
            batch * self._pairs(query_tokens, context) * self.attention_flops_per_pair,
            batch * (context + query_tokens) * self.kv_bytes_per_token,
        )
        return self._linear_s(tokens, batch) + attention + self.overhead_s

    def chunks_s(self, chunks: Sequence[tuple[int, int]]) -> float:
        """One prefill forward running these (query tokens, context blocks) chunks unpadded, each over its own
        context: the real work a bucket pads (the weights read once, attention per chunk)."""
        chunks = [(q, c) for q, c in chunks if q > 0]
        for q, c in chunks:
            _check(query_tokens=q, context_blocks=c)
        if not chunks:
            return self.overhead_s
        attention = sum(self._chunk_attention(q, c) for q, c in chunks)
        return self._linear_s(sum(q for q, _ in chunks), len(chunks)) + attention + self.overhead_s

    def _chunk_attention(self, q: int, c: int) -> float:
        """One chunk's attention: ``q`` query tokens over ``c`` blocks of context."""
        got = self._attention.get((q, c))
        if got is None:
            got = self._roof(self._pairs(q, c * self.block_size) * self.attention_flops_per_pair,
                             (c * self.block_size + q) * self.kv_bytes_per_token)  # fmt: skip
            _keep(self._attention, (q, c), got)
        return got

    def decode_s(self, batch: int, blocks: int) -> float:
        """One decode pass of ``batch`` sequences holding ``blocks`` KV blocks in all (vllm-gaudi's decode bucket
        ``(batch, 1, blocks)``: its attention reads every block of the bucket, padded ones included)."""
        _check(batch=batch, blocks=blocks)
        if batch == 0:
            return self.overhead_s
        keys = blocks * self.block_size
        window = self.sliding_window * batch if self.sliding_share else 0
        pairs = (1 - self.sliding_share) * keys + self.sliding_share * min(keys, window)
        attention = self._roof(pairs * self.attention_flops_per_pair, (pairs + batch) * self.kv_bytes_per_token)
        return self._linear_s(batch, batch) + attention + self.overhead_s

    def vision_s(self, patches: int) -> float:
        """One vision-tower pass over ``patches`` patches (one image, or several packed)."""
        _check(patches=patches)
        if patches == 0 or not self.vision_flops_per_patch:
            return 0.0
        window = min(patches, self.vision_window_patches) if self.vision_window_patches else patches
        pairs = patches * (self.vision_full_blocks * patches + self.vision_window_blocks * window)
        linear = self._roof(patches * self.vision_flops_per_patch, self.vision_weight_bytes)
        attention = self._roof(pairs * self.vision_pair_flops, 0.0)
        return linear + attention + self.overhead_s


def _check(**values: int) -> None:
    for name, value in values.items():
        if value < 0:
            raise ConfigError(f"step shape {name}={value} is invalid; accepted: an integer >= 0")


def _vision_terms(v: VisionDims, dtype_size: int, tp: int) -> tuple[float, float, int, int, int, float]:
    if not v.present:
        return 0.0, 0.0, 0, 0, 0, 0.0
    params = vision_parameters(v)
    blocks_full, blocks_window = v.depth, 0
    window_patches = 0
    if v.window_size and v.family == "qwen2_5_vl":
        blocks_full = max(1, v.depth // _FULL_ATTENTION_EVERY)
        blocks_window = v.depth - blocks_full
        window_patches = (v.window_size // v.patch_size) ** 2
    return (2 * params / tp, 4 * v.hidden_size / tp, blocks_full, blocks_window, window_patches,
            params * dtype_size / tp)  # fmt: skip


def has_public_fit(device: str) -> bool:
    """Whether ``device``'s step model is fitted on public points (and so has a held-out interval)."""
    return device.strip().lower() in DEVICE_FITS


def step_time(model: ModelDims, device: str, *, block_size: int, tensor_parallel_size: int = 1,
              dtype_size: int = 2, kv_dtype_size: int | None = None, quantization: str | None = None,
              compute_efficiency: float | None = None, memory_efficiency: float | None = None,
              overhead_s: float | None = None, allreduce_latency_s: float | None = None,
              roofline_exponent: float | None = None) -> StepTime:  # fmt: skip
    """The step costs of ``model`` on one card of ``device`` (a name :data:`DEVICE_RATES` knows) under tensor
    parallelism ``tensor_parallel_size``, with KV blocks of ``block_size`` tokens. Constants left out come from the
    device's public fit (:data:`DEVICE_FITS`), else the unfitted defaults; the result carries the fit (and so its
    held-out interval) only when every constant came from it."""
    key = device.strip().lower()
    if key not in DEVICE_RATES:
        raise ConfigError(f"device {device!r} has no time model; accepted: {', '.join(DEVICE_RATES)}")
    if block_size < 1 or tensor_parallel_size < 1:
        raise ConfigError(f"block size {block_size} and tensor parallel size {tensor_parallel_size} must be >= 1")
    fit = DEVICE_FITS.get(key)
    given = (compute_efficiency, memory_efficiency, overhead_s, allreduce_latency_s, roofline_exponent)
    if compute_efficiency is None:
        compute_efficiency = fit.compute_efficiency if fit else COMPUTE_EFFICIENCY
    if memory_efficiency is None:
        memory_efficiency = fit.memory_efficiency if fit else MEMORY_EFFICIENCY
    if overhead_s is None:
        overhead_s = fit.overhead_s if fit else STEP_OVERHEAD_S
    if allreduce_latency_s is None:
        allreduce_latency_s = fit.allreduce_s(tensor_parallel_size) if fit else ALLREDUCE_LATENCY_S
    if roofline_exponent is None:
        roofline_exponent = fit.roofline_exponent if fit else math.inf
    if not (0 < compute_efficiency <= 1 and 0 < memory_efficiency <= 1) or overhead_s < 0:
        raise ConfigError("step-time efficiencies are accepted in (0, 1] and the overhead >= 0 s")
    if not roofline_exponent >= 1:
        raise ConfigError(f"roofline exponent {roofline_exponent} is invalid; accepted: >= 1 (infinity: max)")
    tp = tensor_parallel_size
    h = model.hidden_size
    rates = DEVICE_RATES[key]
    fp8 = (quantization or "").lower() in _FP8_METHODS
    experts = expert_parameters(model)
    active = active_linear_parameters(model)
    share = model.moe.experts_per_token / model.moe.num_experts if model.moe.present else 0.0
    dense_linear = active - experts * share
    # Weights read by a text step: everything but the vision tower, and the embedding table unless it is the head.
    all_bytes = weight_bytes(model, dtype_size, tp, quantization)
    vision_bytes = vision_parameters(model.vision) * dtype_size / tp
    embed_bytes = 0 if model.tie_word_embeddings else model.vocab_size * h * dtype_size / tp
    expert_bytes = expert_weight_bytes(model, dtype_size, tp, quantization)
    dense_bytes = all_bytes - vision_bytes - embed_bytes - expert_bytes
    heads = model.num_heads / tp
    kv = kv_bytes_per_token(model, kv_dtype_size or dtype_size, tp)
    a = model.attention
    attn_layers = max(1, model.num_layers - a.linear_layers)
    sliding = a.sliding_layers / attn_layers if a.sliding_layers and a.sliding_window else 0.0
    v = _vision_terms(model.vision, dtype_size, tp)
    return StepTime(
        device=DEVICE_RATES[key],
        matrix_flops=rates.fp8_flops if fp8 and rates.fp8_flops else rates.bf16_flops,
        block_size=block_size,
        tensor_parallel_size=tp,
        linear_flops_per_token=2 * dense_linear / tp,
        expert_flops_per_token=2 * experts * share / tp,
        head_flops_per_sequence=2 * model.vocab_size * h / tp,
        dense_weight_bytes=dense_bytes,
        expert_weight_bytes=max(0.0, expert_bytes),
        experts_active_share=share,
        activation_bytes_per_token=model.num_layers * (4 * h + 2 * model.intermediate_size / tp) * dtype_size,
        attention_flops_per_pair=model.num_layers * 4 * heads * model.head_dim,
        # full-attention layers hold the per-token cache; sliding layers' reads are bounded by the window above
        kv_bytes_per_token=kv * model.num_layers / max(1, model.attention_layers),
        sliding_share=sliding,
        sliding_window=a.sliding_window if sliding else 0,
        vision_flops_per_patch=v[0],
        vision_pair_flops=v[1],
        vision_full_blocks=v[2],
        vision_window_blocks=v[3],
        vision_window_patches=v[4],
        vision_weight_bytes=v[5],
        compute_efficiency=compute_efficiency,
        memory_efficiency=memory_efficiency,
        overhead_s=overhead_s,
        allreduces=2 * model.num_layers if tp > 1 else 0,
        allreduce_bytes_per_token=h * dtype_size,
        allreduce_latency_s=allreduce_latency_s,
        roofline_exponent=roofline_exponent,
        fit=fit if all(v is None for v in given) else None,
    )


def tokens_per_second(t: StepTime, batch: int, context_tokens: int) -> float:
    """Decode tokens per second of ``batch`` sequences each at ``context_tokens`` (a throughput-table row's
    steady state)."""
    blocks = batch * math.ceil((context_tokens + 1) / t.block_size)
    return batch / t.decode_s(batch, blocks)


def interval_dict(t: StepTime) -> dict[str, Any]:
    """The held-out intervals per phase for --json: published / modelled time range, points, evidence (high is
    None where unbounded)."""
    out: dict[str, Any] = {}
    for phase in PHASES:
        low, high, n, evidence = t.interval(phase)
        out[phase] = {"low": low, "high": high if math.isfinite(high) else None, "points": n, "evidence": evidence}
    return out


def interval_text(t: StepTime) -> str:
    """The time model's held-out intervals in words: "decode +-20% (4 held-out points), prefill +-17% (3)"."""
    parts = []
    for phase in ("decode", "prefill"):
        low, high, n, _ = t.interval(phase)
        iv = t.fit.intervals.get(phase) if t.fit is not None else None
        if n:
            half = max(1.0 - low, high - 1.0)
            widened = f", widened to the {iv.fit_rows} fitted ones" if iv is not None and iv.fit_rows else ""
            parts.append(f"{phase} ±{half:.0%} ({n} held-out public point{'s' if n > 1 else ''}{widened})")
        else:
            parts.append(f"{phase} unbounded (no held-out public point)")
    evidence = t.fit.evidence if t.fit is not None else "constants not fitted on public points"
    return f"time model on {t.device.name}: {', '.join(parts)}; vision unbounded (no public point); {evidence}"


def verdict_note(t: StepTime, label: str, seconds: float, other: str, other_seconds: float) -> str:
    """Whether ``label``'s modelled seconds differ from ``other``'s by more than the time model's interval (the wider
    of decode and prefill): inside it, which is faster holds only as far as the model errs alike on both (the same
    calibration prices both columns)."""
    halves = [max(1.0 - lo, hi - 1.0) for lo, hi, n, _ in (t.interval(p) for p in ("decode", "prefill")) if n]
    half = max(halves) if len(halves) == 2 else math.inf
    base = min(seconds, other_seconds)
    diff = abs(seconds - other_seconds) / base if base > 0 else 0.0
    faster = label if seconds <= other_seconds else other
    if diff <= half:
        where = f"inside the time model's interval ±{half:.0%}" if math.isfinite(half) else "with no bounded interval"
        return (f"{label} vs {other}: {diff:.1%} apart in modelled busy time, {where}: the order holds only if "
                "the model errs alike on both")  # fmt: skip
    return f"{label} vs {other}: {faster} faster by {diff:.1%} in modelled busy time, outside the interval ±{half:.0%}"


def time_interval_lines(t: StepTime, columns: Sequence[tuple[str, float]]) -> list[str]:
    """What a report prints under its time figures: the model's intervals, then each column's verdict against the
    first (``columns``: label, modelled busy seconds)."""
    lines = [interval_text(t)]
    if columns:
        label, seconds = columns[0]
        lines += [verdict_note(t, other, s, label, seconds) for other, s in columns[1:]]
    return lines

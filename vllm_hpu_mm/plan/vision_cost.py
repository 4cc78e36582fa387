"""Activation-memory model of the Qwen2.5-VL vision tower per bucket: eager peak, one graph's pool, and what a
set of captured buckets reserves under private pools or one shared pool.

All coefficients live here, as named constants with their provenance. They were measured on an NVIDIA H100 80GB
HBM3 (torch 2.11, transformers 5.17, Qwen2.5-VL-7B vision tower, bfloat16, random weights; one image of b patches
per graph, varlen attention; ``benchmarks/performance/results/vision_memory_calibration.md``) with our research
CUDA-graph executor over *transformers'* tower (``benchmarks/research/cuda_graphs.py``).

**That is not what the CUDA server runs.** There vLLM's own encoder CUDA graphs run vLLM's tower
(``EncoderCudaGraphManager``, ``vllm/v1/worker/encoder_cudagraph.py`` in vLLM 0.32: one graph per token budget,
captured largest first into one pool, the same shared-pool structure as below). Their pools were not measured here,
so on CUDA the vision figures are an estimate from the research executor, not a calibration of the served graphs.
Gaudi (HPU) costs are *estimated* with the same model, not measured: HPU graphs keep their own memory per captured
shape, which is the private-pool case below.

Pool modes:

- ``private``: every captured shape keeps its own pool, so the cost is the *sum* over captured buckets. This is
  vllm-gaudi's and the older HabanaAI fork's behaviour (``wrap_in_hpu_graph`` per shape).
- ``shared``: graphs captured largest first into one pool (``torch.cuda.graph(pool=...)``) and replayed one at a
  time reserve about the *largest* graph's pool plus a little per extra graph (810 MiB measured for the seven
  default buckets, against 2926 MiB for seven private pools).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from vllm_hpu_mm.models.dims import VisionDims
from vllm_hpu_mm.plan.costs import ESTIMATES, CostProfile
from vllm_hpu_mm.values import MIB

#: Eager forward peak above inputs, MiB per patch and fixed MiB (H100, 7B tower, bf16; 44 MiB at 1024 patches).
EAGER_MIB_PER_PATCH = 0.0424
EAGER_FIXED_MIB = 3.0
#: One captured graph's private pool, MiB per patch and fixed MiB: least-squares fit (relative error) to our CUDA-graph
#: executor's pools on an H100 80GB HBM3 (benchmarks/performance/results/vision_memory_calibration.md: 1024 -> 82 MiB,
#: 1600 -> 118, 4096 -> 266, 12544 -> 808, 16384 -> 1046; every bucket within 3%). An earlier 0.0624 x b + 5 was
#: 16% low at 1024 patches.
GRAPH_POOL_MIB_PER_PATCH = 0.0625
GRAPH_POOL_FIXED_MIB = 17.0
#: Shared pool, largest first: growth per graph beyond the largest. The calibration run measured 810 MiB for the
#: seven default buckets against 808 MiB for the largest alone, (810 - 808) / 6 = 0.3 MiB per extra graph; 0.4 is
#: from an earlier run. Either way it is noise next to the largest graph's pool.
SHARED_POOL_MIB_PER_EXTRA_GRAPH = 0.4
#: The tower the coefficients were measured on; other widths scale by the per-patch activation proxy below.
REFERENCE_VISION = VisionDims()
REFERENCE_DTYPE_BYTES = 2


class PoolMode(str, enum.Enum):
    PRIVATE = "private"
    SHARED = "shared"
    #: No graphs at all (CPU, eager): nothing is captured and the vision pool is not used.
    NONE = "none"


#: Which pool model the plan assumes per backend. HPU: vllm-gaudi / the fork wrap each shape in its own HPU graph.
#: CUDA: vLLM's encoder graphs capture the buckets largest first into one shared pool (estimated, see the module
#: docstring). CPU: eager, no graphs.
DEFAULT_POOL_MODE: dict[str, PoolMode] = {"hpu": PoolMode.PRIVATE, "cuda": PoolMode.SHARED, "cpu": PoolMode.NONE}


def _activation_proxy(v: VisionDims) -> int:
    """Activation elements per patch in one block (q/k/v/out, gate/up/act): what scales with width."""
    return 4 * v.hidden_size + 3 * v.intermediate_size


def per_patch_mib(v: VisionDims, dtype_size: int, costs: CostProfile = ESTIMATES) -> float:
    """One graph pool's MiB per patch for this tower and dtype (the affine model's slope); ``costs`` replaces the H100
    coefficients with measured ones (the one place a calibration enters the vision model, with :func:`fixed_mib`)."""
    per_patch = GRAPH_POOL_MIB_PER_PATCH if costs.vision_mib_per_patch is None else costs.vision_mib_per_patch
    return per_patch * _scale(v, dtype_size)


def fixed_mib(costs: CostProfile = ESTIMATES) -> float:
    """One graph pool's fixed MiB (the affine model's intercept), measured when ``costs`` has it."""
    return GRAPH_POOL_FIXED_MIB if costs.vision_fixed_mib is None else costs.vision_fixed_mib


def _scale(v: VisionDims, dtype_size: int) -> float:
    return _activation_proxy(v) / _activation_proxy(REFERENCE_VISION) * dtype_size / REFERENCE_DTYPE_BYTES


def eager_peak_bytes(patches: int, vision: VisionDims = REFERENCE_VISION, dtype_size: int = 2) -> int:
    """Peak memory above inputs of one eager forward over ``patches`` patches."""
    mib = EAGER_MIB_PER_PATCH * patches * _scale(vision, dtype_size) + EAGER_FIXED_MIB
    return round(mib * MIB)


def graph_pool_bytes(
    patches: int, vision: VisionDims = REFERENCE_VISION, dtype_size: int = 2, costs: CostProfile = ESTIMATES
) -> int:
    """Memory pool of one graph captured at ``patches`` patches."""
    return round((per_patch_mib(vision, dtype_size, costs) * patches + fixed_mib(costs)) * MIB)


def capture_bytes(
    buckets: Sequence[int],
    mode: PoolMode,
    vision: VisionDims = REFERENCE_VISION,
    dtype_size: int = 2,
    costs: CostProfile = ESTIMATES,
) -> int:
    """What capturing exactly these buckets reserves under ``mode``."""
    if not buckets or mode is PoolMode.NONE:
        return 0
    if mode is PoolMode.PRIVATE:
        # Affine in the buckets' sum, rounded once: the joint bucket planner (bucket_fit) relies on exactly this.
        mib = per_patch_mib(vision, dtype_size, costs) * sum(buckets) + fixed_mib(costs) * len(buckets)
        return round(mib * MIB)
    pools = [graph_pool_bytes(b, vision, dtype_size, costs) for b in buckets]
    return max(pools) + round(SHARED_POOL_MIB_PER_EXTRA_GRAPH * MIB) * (len(pools) - 1)


def fit_buckets(
    buckets: Sequence[int],
    pool_bytes: int,
    mode: PoolMode,
    vision: VisionDims = REFERENCE_VISION,
    dtype_size: int = 2,
    costs: CostProfile = ESTIMATES,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(captured, skipped): buckets taken in ascending order while their capture cost fits ``pool_bytes``.

    The first bucket that does not fit stops the capture: it and every larger bucket are skipped (they would
    compile at run time). With no graphs (``NONE``) nothing is captured and nothing is skipped.
    """
    ordered = sorted(buckets)
    if mode is PoolMode.NONE:
        return (), ()
    for n in range(len(ordered), -1, -1):
        if capture_bytes(ordered[:n], mode, vision, dtype_size, costs) <= pool_bytes:
            return tuple(ordered[:n]), tuple(ordered[n:])
    return (), tuple(ordered)  # pragma: no cover - n = 0 always fits a non-negative pool

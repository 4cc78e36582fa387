"""Every environment variable vllm-hpu-mm reads, declared once: name, type, default, accepted form and doc.

This is the only module that reads ``os.environ``, and it imports nothing of the package but the standard-library
only :mod:`vllm_hpu_mm.values` and :mod:`vllm_hpu_mm.errors`. Everything else receives a frozen :class:`Settings` from
:func:`load` (parsed once per process and cached by :func:`get_settings`), so a bad value fails at startup,
before any device memory is taken, with a :class:`~vllm_hpu_mm.errors.ConfigError` that names the variable,
the bad token and the accepted form.

The ``VLLM_*`` names and meanings follow the Gaudi guide (vllm-gaudi / HabanaAI vllm-fork); the
``VLLM_HPU_MM_*`` ones are ours.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from vllm_hpu_mm.errors import ConfigError, InputNote
from vllm_hpu_mm.values import ACCEPTED_FORM as BUCKETS_FORM
from vllm_hpu_mm.values import (
    DEFAULT_BUCKETS,
    GRAPH_BACKENDS,
    AlignMode,
    Buckets,
    OversizePolicy,
    parse_buckets,
)

T = TypeVar("T")

# t and y too: the Gaudi runtimes' boolean (vllm-gaudi extension/config.py:135-137 @091bbadd, vllm-hpu-extension
# config.py:122-124 @8211e0b, fork 1.22) reads them as true, so the server starts on them; f and n, false there alike
_TRUE = frozenset({"1", "true", "yes", "on", "t", "y"})
_FALSE = frozenset({"0", "false", "no", "off", "", "f", "n"})


@dataclasses.dataclass(frozen=True)
class EnvVar(Generic[T]):
    """One declared environment variable."""

    name: str
    default: str
    accepted: str
    doc: str
    parse: Callable[[str, str], T]  # (name, raw value) -> typed value; raises ConfigError

    @property
    def field(self) -> str:
        """The :class:`Settings` attribute: the name without its ``VLLM_HPU_MM_`` or ``VLLM_`` prefix, lowercased."""
        return self.name.removeprefix("VLLM_HPU_MM_").removeprefix("VLLM_").lower()

    def read(self, environ: Mapping[str, str]) -> T:
        """The parsed value; each :class:`InputNote` its parsing raises is raised again naming this variable (its
        ``setting``), so that a plan for a runtime that does not read the variable can leave the note out."""
        raw = environ.get(self.name)
        with warnings.catch_warnings(record=True) as raised:
            warnings.simplefilter("always")
            value = self.parse(self.name, self.default if raw is None else raw)
        for w in raised:
            message = w.message
            if isinstance(message, InputNote) and message.setting is None:
                message.setting = self.name
            warnings.warn(message, stacklevel=2)
        return value


def _bad(name: str, raw: str, accepted: str) -> ConfigError:
    return ConfigError(f"{name}={raw!r} is invalid; accepted: {accepted}")


def _runtime_bool(name: str, raw: str) -> bool:
    """A boolean the runtimes read themselves: what neither set holds (``enabled``, ``2``) starts the server all the
    same, as false, for every reader of it takes true only from its own list (vllm-gaudi extension/config.py:135-137
    @091bbadd ``boolean``; vllm-hpu-extension config.py:122-124 @8211e0b; the fork before 1.22 ``== 'true'``): read
    so, with a note, never refused (README: a value the runtime accepts is read as it reads it)."""
    token = raw.strip().lower()
    if token in _TRUE or token in _FALSE:
        return token in _TRUE
    note = (f"{name}={raw!r} is none of 0/1, true/false, yes/no, on/off, t/f, y/n: read as false, as the Gaudi "
            "runtimes read anything outside their true spellings; set true to mean true")  # fmt: skip
    warnings.warn(InputNote(note), stacklevel=2)
    return False


def _ratio(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise _bad(name, raw, "a number between 0 and 1, e.g. 0.3") from None
    if not 0.0 <= value <= 1.0:  # also rejects NaN
        raise _bad(name, raw, "a number between 0 and 1, e.g. 0.3")
    return value


def _positive_int(name: str, raw: str) -> int:
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        raise _bad(name, raw, "a positive integer, e.g. 178956970") from None
    if value <= 0:
        raise _bad(name, raw, "a positive integer, e.g. 178956970")
    return value


def _int_flag(name: str, raw: str) -> bool:
    """vLLM's integer switches (``bool(int(value))``, vLLM 0.32 ``envs.py``): ``true`` stops vLLM, so it is refused."""
    try:
        return bool(int(raw))
    except ValueError:
        raise _bad(name, raw, "an integer: 0 off, any other on (vLLM reads int(value))") from None


def _aspect(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise _bad(name, raw, "a number >= 1, e.g. 200") from None
    if not value >= 1.0:
        raise _bad(name, raw, "a number >= 1, e.g. 200")
    return value


def _buckets(name: str, raw: str) -> Buckets | None:
    """vllm-gaudi's reading (vision.py HPUVisionBucketManager @ 091bbadd; the fork's VisionBuckets in
    hpu_model_runner.py @ v0.9.0.1+Gaudi-1.22.0 reads it alike): exactly ``None`` is no bucketing, exactly empty is
    the model's default list and the list is sorted with repeats kept (its warm-up then warms a repeated bucket
    twice); where it accepts a value the server must start, so an empty value and a repeat are read here too, with a
    note, not refused."""
    if raw == "None":  # "no vision bucketing": compared exactly by vllm-gaudi and vllm-fork alike
        return None
    if raw.strip().lower() == "none":  # any other spelling reaches their int() and stops the server at start-up
        raise _bad(name, raw, "None spelled exactly so (vllm-gaudi and vllm-fork compare the value with 'None'), or "
                   "patch counts, each a multiple of 64, joined by commas")  # fmt: skip
    if raw == "":
        # no runtime named: the runtime planned for is not known yet, and vllm-fork before 1.22 reads no list at all
        warnings.warn(InputNote(f"{name} is empty: read as the default list {','.join(map(str, DEFAULT_BUCKETS))}; "
                                "unset it, or give a list"), stacklevel=2)  # fmt: skip
        return DEFAULT_BUCKETS
    return parse_buckets(raw, source=name)  # a repeat once and an off-tile bucket as is, each with a note


def _choice(choices: tuple[str, ...]) -> Callable[[str, str], str]:
    def parse(name: str, raw: str) -> str:
        token = raw.strip().lower()
        if token not in choices:
            raise _bad(name, raw, "one of " + ", ".join(choices))
        return token

    return parse


def _enum(kind: type[AlignMode] | type[OversizePolicy]) -> Callable[[str, str], Any]:
    def parse(name: str, raw: str) -> Any:
        try:
            return kind(raw.strip().lower())
        except ValueError:
            raise _bad(name, raw, "one of " + ", ".join(m.value for m in kind)) from None

    return parse


def _optional_path(name: str, raw: str) -> str | None:
    return raw.strip() or None


def _path(name: str, raw: str) -> str:
    if not raw.strip():
        raise _bad(name, raw, "a folder path")
    return os.path.expanduser(raw.strip())


_VARIABLES: tuple[EnvVar[Any], ...] = (
    EnvVar(
        "VLLM_MULTIMODAL_BUCKETS",
        ",".join(map(str, DEFAULT_BUCKETS)),
        BUCKETS_FORM + " (a repeat is read once, an empty value as the default, each with a note, as vllm-gaudi "
        "reads them), or None to disable vision bucketing",
        "Vision-encoder buckets in patches ((W*H)/(14*14)); each is precompiled as one graph.",
        _buckets,
    ),
    EnvVar(
        "VLLM_GRAPH_RESERVED_MEM",
        "0.1",
        "a number between 0 and 1",
        "Share of usable device memory reserved for graphs; the KV cache gets the rest.",
        _ratio,
    ),
    EnvVar(
        "VLLM_GRAPH_PROMPT_RATIO",
        "0.3",
        "a number between 0 and 1",
        "Share of graph memory for prefill (prompt) graphs; decode graphs get the rest.",
        _ratio,
    ),
    EnvVar(
        "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO",
        "0.3",
        "a number between 0 and 1",
        "Share of prefill graph memory for the text part; vision-encoder graphs get the rest (as in the guide).",
        _ratio,
    ),
    EnvVar(
        "VLLM_FP32_SOFTMAX",
        "0",
        "0/1, true/false",
        "Run the language model's attention softmax in float32 where our code controls it.",
        _runtime_bool,
    ),
    EnvVar(
        "VLLM_FP32_SOFTMAX_VISION",
        "0",
        "0/1, true/false",
        "Run the vision tower's attention softmax in float32 where our code controls it.",
        _runtime_bool,
    ),
    EnvVar(
        "VLLM_SKIP_WARMUP",
        "false",
        "0/1, true/false",
        "Skip capturing/compiling the vision buckets at startup (they are then built on first use).",
        _runtime_bool,
    ),
    EnvVar(
        "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS",
        "1",
        "an integer: 0 off, any other on",
        "vLLM on CUDA: take the profiled CUDA-graph memory out of the KV cache (vLLM 0.32 envs.py:2221, "
        "v1/worker/gpu_worker.py:709); the CUDA plan follows it.",
        _int_flag,
    ),
    EnvVar(
        "VLLM_HPU_MM_OVERSIZE_POLICY",
        OversizePolicy.SHRINK.value,
        "one of " + ", ".join(p.value for p in OversizePolicy),
        "Images above the largest bucket: shrink to fit it, run the exact shape eagerly, or reject the request.",
        _enum(OversizePolicy),
    ),
    EnvVar(
        "VLLM_HPU_MM_ALIGN_MODE",
        AlignMode.NEAREST.value,
        "one of " + ", ".join(m.value for m in AlignMode),
        "How images reach 112-px multiples: nearest grid, down (never more tokens), or pad the canvas.",
        _enum(AlignMode),
    ),
    EnvVar(
        "VLLM_HPU_MM_MAX_IMAGE_PIXELS",
        "178956970",
        "a positive integer",
        "Largest image (decoded pixels) accepted before decoding; larger ones are refused as decompression bombs.",
        _positive_int,
    ),
    EnvVar(
        "VLLM_HPU_MM_MAX_ASPECT_RATIO",
        "200",
        "a number >= 1",
        "Largest accepted ratio of an image's long side to its short side.",
        _aspect,
    ),
    EnvVar(
        "VLLM_HPU_MM_GRAPH_BACKEND",
        "auto",
        "one of " + ", ".join(GRAPH_BACKENDS),
        "Vision-encoder graph backend: auto picks hpu, cuda or cpu (exact shapes: no graphs) from the platform; "
        "cpu pads to buckets (to test bucket behaviour); none runs eager unbucketed.",
        _choice(GRAPH_BACKENDS),
    ),
    EnvVar(
        "VLLM_HPU_MM_SHAPE_LOG",
        "",
        "a file path, or empty for none",
        "Append one line per vision-encoder pass (bucket, images, padding) to this file, for audits and tests.",
        _optional_path,
    ),
    EnvVar(
        "VLLM_HPU_MM_CACHE_DIR",
        "~/.cache/vllm-hpu-mm",
        "a folder path",
        "Where serve writes files for the runtime (vllm-gaudi's bucket file); created when needed.",
        _path,
    ),
    EnvVar(
        "VLLM_HPU_MM_PROFILE",
        "",
        "a file path, or empty for ~/.cache/vllm-hpu-mm/memory-profile.json",
        "Memory-cost profile that `memory calibrate` writes and `memory plan` / `serve` read (measured graph costs); "
        "not there yet: the plan says so and uses its estimates.",
        _optional_path,
    ),
)

#: name -> declaration, in declaration order.
ENVIRONMENT_VARIABLES: dict[str, EnvVar[Any]] = {v.name: v for v in _VARIABLES}


#: vLLM's own image cap, read as vLLM 0.32 reads it (``vllm/envs.py:1064-1066``: ``int(os.getenv(...,
#: "178956970"))``) and applied in ``ImageMediaIO.load_bytes`` (``vllm/multimodal/media/image.py:83-84``: refused when
#: ``max_pixels > 0 and w * h > max_pixels``) to every image a request carries, after our header check.
VLLM_IMAGE_PIXELS_VAR = "VLLM_MAX_IMAGE_PIXELS"
VLLM_IMAGE_PIXELS_DEFAULT = 178_956_970


def _vllm_image_pixels(env: Mapping[str, str]) -> int | None:
    raw = env.get(VLLM_IMAGE_PIXELS_VAR, str(VLLM_IMAGE_PIXELS_DEFAULT))
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{VLLM_IMAGE_PIXELS_VAR}={raw!r} is invalid (vLLM reads it with int()); accepted: an "
                          "integer, 0 or less for no limit") from None  # fmt: skip
    return value if value > 0 else None


@dataclasses.dataclass(frozen=True)
class Settings:
    """All our environment settings, parsed and validated."""

    multimodal_buckets: Buckets | None
    graph_reserved_mem: float
    graph_prompt_ratio: float
    graph_multimodal_prompt_ratio: float
    fp32_softmax: bool
    fp32_softmax_vision: bool
    skip_warmup: bool
    memory_profiler_estimate_cudagraphs: bool
    oversize_policy: OversizePolicy
    align_mode: AlignMode
    max_image_pixels: int
    max_aspect_ratio: float
    graph_backend: str
    shape_log: str | None
    cache_dir: str
    profile: str | None
    #: vLLM's own cap (``VLLM_MAX_IMAGE_PIXELS``), None when it sets none.
    vllm_max_image_pixels: int | None = VLLM_IMAGE_PIXELS_DEFAULT
    #: The declared variables that are set (the others hold our default, which a runtime may not share).
    given: frozenset[str] = frozenset()

    @property
    def served_max_image_pixels(self) -> int:
        """The largest image the server accepts: our header check (``plugin/media.py``) runs first, then vLLM's own
        loader refuses ``w * h > VLLM_MAX_IMAGE_PIXELS``, so the lower of the two applies."""
        vllm = self.vllm_max_image_pixels
        return self.max_image_pixels if vllm is None else min(self.max_image_pixels, vllm)

    @property
    def max_image_pixels_var(self) -> str:
        """The variable that sets :attr:`served_max_image_pixels` (ours on a tie: our check refuses first)."""
        vllm = self.vllm_max_image_pixels
        return (
            VLLM_IMAGE_PIXELS_VAR
            if vllm is not None and vllm < self.max_image_pixels
            else "VLLM_HPU_MM_MAX_IMAGE_PIXELS"
        )


def load(environ: Mapping[str, str] | None = None) -> Settings:
    """Parse every declared variable from ``environ`` (default: the process environment).

    Raises :class:`ConfigError` for the first invalid value.
    """
    env = os.environ if environ is None else environ
    values = {var.field: var.read(env) for var in _VARIABLES}
    given = frozenset(var.name for var in _VARIABLES if var.name in env)
    return Settings(**values, vllm_max_image_pixels=_vllm_image_pixels(env), given=given)


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process environment's settings, parsed once."""
    return load()


#: OpenBLAS (numpy's BLAS) runs a call on every core: the planner's many small dot products then spend more time
#: waking and spinning threads than computing (the main job's plan took twice the CPU time of one thread on a loaded
#: 2-core machine, benchmarks/performance/results/plan_speed.md), and a threaded sum's order follows the core count.
BLAS_THREADS = "OPENBLAS_NUM_THREADS"
#: The BLAS thread setting this process made itself (so that a child process is launched without it).
_SET_HERE: dict[str, str] = {}


def single_thread_blas() -> None:
    """numpy's BLAS on one thread in this process, unless the user set :data:`BLAS_THREADS`: called by the command
    before numpy is imported (OpenBLAS reads the variable when it loads)."""
    if BLAS_THREADS not in os.environ:
        os.environ[BLAS_THREADS] = _SET_HERE[BLAS_THREADS] = "1"


def process_environ() -> dict[str, str]:
    """A copy of the process environment, for launching a child process with changed settings (without the BLAS
    setting the command made for itself: the server's own threads are its business)."""
    env = dict(os.environ)
    for name, value in _SET_HERE.items():
        if env.get(name) == value:
            del env[name]
    return env


def getter(name: str) -> Callable[[], str | None]:
    """A zero-argument reader of one declared variable, in the form ``vllm.envs.environment_variables`` expects."""
    if name not in ENVIRONMENT_VARIABLES:
        raise KeyError(name)
    return lambda: os.environ.get(name)


def default_of(name: str) -> Any:
    """One declared variable's default, parsed as :func:`load` parses it (what a plan uses where the runtime does not
    read the variable, so that a value set in the shell changes nothing)."""
    return ENVIRONMENT_VARIABLES[name].read({})


def read_if_set(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """One declared variable parsed as :func:`load` parses it, or None when it is not set (for settings whose
    default belongs to the runtime, such as ``VLLM_FP32_SOFTMAX``)."""
    env = os.environ if environ is None else environ
    return None if name not in env else ENVIRONMENT_VARIABLES[name].read(env)


#: Prefixes of the serving runtimes' own variables (vllm-gaudi's bucketing and warm-up, the Habana bridge's), read
#: raw so that the planner can model what the runtime will do with them; their parsing is the runtime's (see
#: ``runtimes.vllm_gaudi.config.config_from_env``).
RUNTIME_PREFIXES = ("VLLM_", "PT_HPU_")


def runtime_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The runtime variables that are set (``VLLM_*`` and ``PT_HPU_*``, ours included), name -> raw value."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if k.startswith(RUNTIME_PREFIXES)}


@contextlib.contextmanager
def runtime_variables(env: Mapping[str, str]) -> Iterator[None]:
    """Run a block with the runtime variables (``VLLM_*``, ``PT_HPU_*``) being exactly ``env``'s, then restore them:
    for asking an installed runtime's own code, which reads the process environment itself."""
    saved = runtime_environ()
    try:
        for key in saved:
            del os.environ[key]
        os.environ.update({k: v for k, v in env.items() if k.startswith(RUNTIME_PREFIXES)})
        yield
    finally:
        for key in runtime_environ():
            del os.environ[key]
        os.environ.update(saved)

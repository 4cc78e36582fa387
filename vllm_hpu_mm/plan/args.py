"""The plan's arguments, declared once: vLLM's own server sizing flags (same spelling wherever they are typed) and
the planner's options (``--device`` under ``memory plan``, ``--plan-device`` under ``serve``), read into one frozen
:class:`SizingArgs` that remembers how its flags were spelled, so that every error names the flag the user typed.

``memory plan`` adds both tables to its parser; ``serve`` adds the planner's options under the ``plan-`` prefix and
reads vLLM's flags out of the arguments it passes through to the server (``cli/serve_args.py``, built from the same
table). Each flag is one :class:`Option`: its field, spelling and aliases, value type, bound and help together.
Values are parsed here (vLLM's spellings: ``32k``, ``-tp``); :meth:`SizingArgs.check_bounds` checks every bound,
each error naming the flag as it was spelled (:meth:`SizingArgs.flag`). Checks across flags and against the model or
device (:mod:`.validate`) run when the plan inputs are built (:mod:`.inputs`).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.devices import DEVICE_CHOICES, DEVICE_TOTALS
from vllm_hpu_mm.models.dims import DTYPE_BYTES
from vllm_hpu_mm.plan import validate
from vllm_hpu_mm.plan.profile import ProfileRead
from vllm_hpu_mm.runtimes.registry import TRAITS
from vllm_hpu_mm.values import GIB, GRAPH_BUDGET_CEILING

__all__ = [
    "KV_CACHE_DTYPES",
    "MAX_MODEL_LEN_AUTO",
    "PERFORMANCE_MODES",
    "PLAN_OPTIONS",
    "TYPED",
    "VLLM_FLAGS",
    "Option",
    "SizingArgs",
    "add_options",
    "choice",
    "count_up_to",
    "dtype",
    "fraction",
    "human_readable_int",
    "human_readable_int_or_auto",
    "integer",
    "nonempty",
    "number",
    "optional_human_int",
    "optional_int",
    "optional_json",
    "optional_str",
    "positive_int",
]

#: vLLM 0.32's human-readable integers (``vllm/utils/argparse_utils.py`` ``human_readable_int``): a whole number, or
#: a number with a suffix, decimal (k, m, g, t: x1000...) or binary (K, M, G, T: x1024...); decimals only with the
#: decimal suffixes, truncated (``1.5k`` is 1500, ``1.0005k`` 1000).
_HUMAN = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_HUMAN_FORMS = "e.g. 32768, 32k (x1000) or 32K (x1024)"
#: vLLM's ``--max-model-len`` value for "fit the longest sequence the KV cache holds" (``auto`` or ``-1``).
MAX_MODEL_LEN_AUTO = -1


def human_readable_int(raw: str, *, forms: str = _HUMAN_FORMS) -> int:
    """An integer as vLLM 0.32's parser reads it: ``32768``, ``32k`` (32000), ``32K`` (32768), ``1.5k`` (1500); a
    decimal with a binary suffix (``1.5K``) is refused, as vLLM refuses it. ``forms``: the accepted forms, for the
    error."""
    value = raw.strip()
    m = _HUMAN.fullmatch(value)
    if m:
        number, suffix = m.groups()
        if suffix in _BINARY:
            try:
                return int(number) * _BINARY[suffix]
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"{raw!r}: vLLM allows no decimals with a binary suffix ({suffix} is x1024); did you mean "
                    f"{number}{suffix.lower()} (x1000)?"
                ) from None
        scaled = float(number) * _DECIMAL[suffix]
        if not math.isfinite(scaled):
            raise argparse.ArgumentTypeError(f"{raw!r} is too large; accepted: {forms}")
        return int(scaled)
    try:
        return int(value)
    except ValueError:
        unit = _UNIT.fullmatch(value)
        if unit is not None:  # 8GiB, 8GB: vLLM reads the suffix alone
            number, suffix, binary = unit.groups()
            # a binary suffix takes no decimals in vLLM: those are said in bytes
            whole = "." not in number
            kib = f"{number}{suffix.upper()} (x1024)" if whole else f"{round(float(number) * _BINARY[suffix.upper()])}"
            meant = kib if binary else f"{kib} or {number}{suffix.lower()} (x1000)"
            raise argparse.ArgumentTypeError(f"{raw!r}: vLLM reads a size's suffix alone, with no B after it; did you "
                                             f"mean {meant}?; accepted: {forms}") from None  # fmt: skip
        raise argparse.ArgumentTypeError(f"{raw!r} is not an integer; accepted: {forms}") from None


#: A size written with a unit vLLM's human_readable_int refuses: ``8GiB``, ``8GB``, ``512MB``.
_UNIT = re.compile(r"(\d+(?:\.\d+)?)\s*([kKmMgGtT])(i)?[bB]")


def human_readable_int_or_auto(raw: str) -> int:
    """vLLM 0.32's ``--max-model-len``: a :func:`human_readable_int`, or ``auto`` / ``-1``
    (:data:`MAX_MODEL_LEN_AUTO`: vLLM fits the longest sequence its KV cache holds)."""
    value = raw.strip()
    if value == "-1" or value.lower() == "auto":
        return MAX_MODEL_LEN_AUTO
    return human_readable_int(value, forms=f"{_HUMAN_FORMS}, or auto (-1: the longest the KV cache holds)")


def nonempty(accepted: str) -> Callable[[str], str]:
    """Our own flags' text values: an empty one (a shell variable left unset) or one holding a NUL is refused, never
    read as "not given" (vLLM's optional flags, :func:`optional_str`, read "" as unset; ours have no such form)."""

    def read(raw: str) -> str:
        if not raw.strip():
            raise argparse.ArgumentTypeError(f"{raw!r} is empty; accepted: {accepted}")
        if "\x00" in raw:
            raise argparse.ArgumentTypeError(f"the value holds a NUL byte; accepted: {accepted}")
        return raw

    return read


def optional_str(raw: str) -> str | None:
    """vLLM's optional strings (``--quantization``, ``--revision``): ``""`` and ``None`` mean unset."""
    return None if raw in ("", "None") else raw


def optional_int(raw: str) -> int | None:
    """vLLM's optional integers (``--num-gpu-blocks-override``: ``optional_type(int)``): ``""`` and ``None`` mean
    unset."""
    return None if raw in ("", "None") else integer(raw)


#: vLLM 0.32's ``--kv-cache-dtype`` choices (``config/cache.py:39-59`` ``CacheDType``) and ``--performance-mode``
#: choices (``config/vllm.py:139`` ``PerformanceMode``); a test checks both against the installed vLLM's parser.
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_ds_mla", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
                   "fp8_per_token_head", "int4_per_token_head", "int8_per_token_head", "nvfp4", "nvfp4_4over6",
                   "nvfp4_ds_mla", "turboquant_3bit_nc", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_k8v4",
                   "ultraquant_4bit")  # fmt: skip
PERFORMANCE_MODES = ("balanced", "interactivity", "throughput")


def optional_json(raw: str) -> Any:
    """vLLM's optional JSON values (``--speculative-config``: ``optional_type(json.loads)``): ``""`` and ``None`` mean
    unset; anything else must be JSON."""
    if raw in ("", "None"):
        return None
    try:
        return json.loads(raw)
    except ValueError:
        short = repr(raw) if len(raw) <= 60 else f"{raw[:60]!r}..."
        raise argparse.ArgumentTypeError(f"{short} is not JSON; accepted: a JSON object") from None


def choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    """One of vLLM's choices, exactly as spelled (its parser is case-sensitive)."""

    def read(raw: str) -> str:
        if raw not in choices:
            raise argparse.ArgumentTypeError(f"{raw!r} is not a value vLLM accepts; accepted: {', '.join(choices)}")
        return raw

    return read


def optional_human_int(raw: str) -> int | None:
    """vLLM's optional :func:`human_readable_int` (``--kv-cache-memory-bytes``): ``""`` and ``None`` mean unset."""
    return None if raw in ("", "None") else human_readable_int(raw)


def dtype(raw: str) -> str:
    """vLLM 0.32's ``--dtype`` choices, exactly as spelled (its parser is case-sensitive)."""
    if raw not in DTYPE_BYTES:
        hint = "; 8-bit weights are --quantization fp8, an 8-bit KV cache is --kv-cache-dtype fp8" if "8" in raw else ""
        raise argparse.ArgumentTypeError(f"{raw!r} is not a dtype vLLM accepts; accepted: {', '.join(DTYPE_BYTES)}"
                                         f"{hint}")  # fmt: skip
    return raw


def integer(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an integer; accepted: a whole number, e.g. 4") from None


def _count(raw: str) -> int:
    """:func:`integer` for a count (bound :data:`COUNT`): its refusal names the range the bound then checks."""
    try:
        return int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an integer; accepted: a positive integer up to "
                                         f"{validate.MAX_COUNT}, e.g. 4") from None  # fmt: skip


def _whole(raw: str, accepted: str) -> int:
    """``raw`` as an integer (``_`` between digits allowed), else an error that says what is ``accepted``."""
    try:
        return int(raw.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an integer; {accepted}") from None


def positive_int(raw: str) -> int:
    """A positive integer with no cap (``_`` between digits allowed); a capped one is :func:`count_up_to`'s."""
    value = _whole(raw, "expected a positive integer")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{raw!r} is not positive; expected a positive integer")
    return value


def count_up_to(maximum: int, above: str = "too many") -> Callable[[str], int]:
    """An option's integer from 1 to ``maximum``: every refusal (not an integer, below 1, above the cap) states the
    whole range, so that a 0 is told the cap too; ``above`` says why a larger value is refused."""
    accepted = f"accepted: 1 to {maximum:,}"

    def read(raw: str) -> int:
        value = _whole(raw, accepted)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{raw!r} is not positive; {accepted}")
        if value > maximum:
            raise argparse.ArgumentTypeError(f"{raw!r} is {above}; {accepted}")
        return value

    return read


def number(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number; accepted: e.g. 0.9") from None


def fraction(raw: str) -> float:
    """A number in (0, 1], e.g. an efficiency target."""
    value = number(raw)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"{raw!r} is outside (0, 1]; expected e.g. 0.95")
    return value


#: vLLM 0.32's default for --gpu-memory-utilization (``config/cache.py``); the plan takes the runtime's own
#: (``RuntimeTraits.default_gpu_memory_utilization``: the fork's is 0.9).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92

#: A flag's bound: checks a parsed value, raising ConfigError that names the flag as spelled (the second argument).
Bound = Callable[[Any, str], object]


def _graph_budget(value: int, flag: str) -> object:
    # Only the count's own range here: the least budget depends on the limits and the traffic (the planner refuses
    # a smaller one with it: buckets/text.py), the most on the runtime's own graph count (check_budget); a floor of
    # 2 here would be a least that the planner then refuses too.
    if not 1 <= value <= validate.MAX_COUNT:
        raise ConfigError(f"{flag}={value} is out of range; accepted: a positive number of graphs, at most "
                          f"{GRAPH_BUDGET_CEILING}; a budget below the least these limits and traffic need is refused "
                          "with that least")  # fmt: skip
    return value


def _model_len(value: int, flag: str) -> object:
    return value == MAX_MODEL_LEN_AUTO or validate.check_positive(value, flag, auto=True)


COUNT: Bound = validate.check_positive
MODEL_LEN: Bound = _model_len
GRAPH_BUDGET: Bound = _graph_budget
RATIO: Bound = validate.check_ratio
SHARE: Bound = functools.partial(validate.check_ratio, allow_zero=False)
GIB_SIZE: Bound = validate.check_gib
GIB_TOTAL: Bound = functools.partial(validate.check_gib, positive=True)
BYTES: Bound = functools.partial(validate.check_bytes, maximum=int(validate.MAX_MEMORY_GIB) * GIB)


@dataclasses.dataclass(frozen=True)
class Option:
    """One flag: the :class:`SizingArgs` field it fills, its long name (without ``--`` or a prefix), its other
    spellings (``-tp``, ``--device-memory-utilization``), how its value is read, its bound and its help text (which
    states the default: None means the runtime's, the device's, the model's or the environment's)."""

    field: str
    name: str
    help: str
    type: Callable[[str], Any] | None = None
    aliases: tuple[str, ...] = ()
    boolean: bool = False
    metavar: str | None = None
    bound: Bound | None = None


#: vLLM's server flags that size the plan, with vLLM 0.32's spellings (long name, then its aliases) and value types
#: (``EngineArgs.add_cli_args``); a test checks both against the installed vLLM's parser.
VLLM_FLAGS: tuple[Option, ...] = (
    Option("model", "model", "a local model folder with config.json, or a Hugging Face id: its config.json from the "
           "local Hugging Face cache (never downloaded), else the catalog size named in the id (Qwen2.5-VL "
           "3B/7B/32B/72B, quantization from -AWQ/-GPTQ/-FP8) (default: Qwen/Qwen2.5-VL-7B-Instruct)"),
    Option("dtype", "dtype", "vLLM's --dtype: auto (the checkpoint's bfloat16), bfloat16, float16, half, float32, "
           "float (default: auto; vllm-gaudi serves float32 in bfloat16)", dtype),
    Option("tensor_parallel_size", "tensor-parallel-size", "tensor-parallel ranks sharing the model; must divide the "
           "attention heads (default: 1)", integer, ("-tp",), bound=COUNT),
    Option("pipeline_parallel_size", "pipeline-parallel-size", "pipeline stages; the plan is per card of the first "
           "stage (default 1)", integer, ("-pp",), bound=COUNT),
    Option("data_parallel_size", "data-parallel-size", "replicas; each plans the same card, so it changes nothing per "
           "card (default 1)", integer, ("-dp",), bound=COUNT),
    Option("gpu_memory_utilization", "gpu-memory-utilization", "share of memory vLLM may use (default: the runtime's, "
           "0.92 in vLLM 0.32 and vllm-gaudi, 0.9 in vllm-fork)", number, ("--device-memory-utilization",),
           bound=SHARE),
    Option("max_model_len", "max-model-len", "longest sequence, e.g. 32768, 32k (32000) or 32K (32768); auto or -1: "
           "the longest one sequence the KV cache holds, as vLLM fits it at start-up (default: the model's)",
           human_readable_int_or_auto, bound=MODEL_LEN),
    Option("max_num_seqs", "max-num-seqs", "most sequences per step (default: the runtime's for the device, e.g. "
           "1024 on a vLLM GPU of 70 GiB or more, 256 on vllm-gaudi, 128 on vLLM CPU)", integer, bound=COUNT),
    Option("max_num_batched_tokens", "max-num-batched-tokens", "most tokens per step, e.g. 8192 or 8K (default: the "
           "runtime's, e.g. 8192 on a vLLM GPU of 70 GiB or more, 2048 on vllm-gaudi and vLLM CPU)",
           human_readable_int, bound=COUNT),
    Option("block_size", "block-size", "KV block size; a multiple of 16 on HPU and CUDA (default: 128 on HPU and "
           "CPU, 16 on CUDA)", integer, bound=COUNT),
    Option("kv_cache_memory_bytes", "kv-cache-memory-bytes", "explicit KV-cache size in bytes, e.g. 8g or 8G: vLLM "
           "CUDA and CPU size the KV cache so (0: unset on CUDA, an empty cache on CPU, which does not start); "
           "vllm-gaudi ignores it (the plan says so), vllm-fork has no such flag",
           optional_human_int, bound=BYTES),
    Option("quantization", "quantization", "vLLM's --quantization method, for the weight size (fp8 family: 1 byte, "
           "awq/gptq: 0.5 byte) (default: the checkpoint's quantization_config, or the id's -AWQ/-GPTQ/-FP8)",
           optional_str, ("-q",)),
    Option("enforce_eager", "enforce-eager", "plan for vLLM's --enforce-eager: no graphs at all", boolean=True),
    Option("enable_expert_parallel", "enable-expert-parallel", "vLLM's --enable-expert-parallel: routed experts "
           "spread over TP x DP ranks instead of split by TP", aliases=("-ep",), boolean=True),
    Option("revision", "revision", "the Hub revision whose cached config.json is read (default: main)", optional_str),
    Option("enable_chunked_prefill", "enable-chunked-prefill", "vLLM's chunked prefill; off, the batched-token "
           "default rises to --max-model-len and a smaller --max-num-batched-tokens is refused, as vLLM refuses it "
           "(default: the runtime's: on in vLLM V1 and vllm-gaudi, off in vllm-fork)", boolean=True),
    Option("enable_prefix_caching", "enable-prefix-caching", "vLLM's prefix caching; vllm-fork turns contiguous PA "
           "off under it from 1.21, which its speculative decoding needs (default: the runtime's: on in vLLM V1 and "
           "vllm-gaudi, off in vllm-fork's V0 engine)", boolean=True),
    Option("performance_mode", "performance-mode", "vLLM's --performance-mode: throughput doubles the default "
           f"--max-num-seqs and --max-num-batched-tokens; one of {', '.join(PERFORMANCE_MODES)} (default: balanced)",
           choice(PERFORMANCE_MODES)),
    Option("kv_cache_dtype", "kv-cache-dtype", "vLLM's --kv-cache-dtype: the KV cache's element type (auto: the "
           "model's dtype; the fp8 family: 1 byte per element) (default: auto)", choice(KV_CACHE_DTYPES)),
    Option("num_gpu_blocks_override", "num-gpu-blocks-override", "vLLM's --num-gpu-blocks-override: the KV blocks "
           "vLLM allocates instead of what memory allows", optional_int, bound=COUNT),
    Option("speculative_config", "speculative-config", "vLLM's --speculative-config JSON; its num_speculative_tokens "
           "shapes vllm-gaudi's decode buckets (batch x (1 + tokens))", optional_json, ("-sc",)),
)  # fmt: skip

#: The runtimes planned per release, each as NAME==X with its oldest modelled release (vllm-gaudi's first bucket file).
_RELEASES = " or ".join(f"{r.value}==X ({t.oldest_release} or newer)" for r, t in TRAITS.items() if t.oldest_release)

#: The planner's own options (no vLLM equivalent): ``--NAME`` under ``memory plan``, ``--plan-NAME`` under ``serve``.
PLAN_OPTIONS: tuple[Option, ...] = (
    Option("device", "device", f"device to plan for: {', '.join(DEVICE_CHOICES[:-1])} or auto; named devices plan "
           f"against the total their runtime reports ({DEVICE_TOTALS}), auto reads the accelerator, cpu reads host "
           "memory (shared by the TP ranks)", nonempty(f"{', '.join(DEVICE_CHOICES[:-1])} or auto")),
    Option("runtime", "runtime", "serving runtime: auto, vllm-gaudi, vllm-fork, vllm-cuda or vllm-cpu, or a release as "
           f"{_RELEASES} (default auto: the one installed, at its installed "
           "version, where it serves the device planned for, else that device's: vllm-gaudi main on HPU; with no "
           "device named a plan or dry run is for Gaudi2, a launch for the accelerator here); it decides which knobs "
           "are exported",
           nonempty("auto, vllm-gaudi, vllm-fork, vllm-cuda or vllm-cpu, or NAME==VERSION")),
    Option("free_memory_gib", "free-memory-gib", "free device memory after weights and profiling, GiB (the guide's "
           "starting point) (default: estimated from the device)", number, bound=GIB_SIZE),
    Option("total_memory_gib", "total-memory-gib", "override the device's total memory, GiB (on cpu: the host's, "
           "shared by the TP ranks) (default: the device's)", number, bound=GIB_TOTAL),
    Option("buckets", "buckets", "vision buckets in patches, multiples of 64, or None (default: "
           "VLLM_MULTIMODAL_BUCKETS)"),
    Option("graph_reserved_mem", "graph-reserved-mem", "share of usable memory for graphs (default: "
           "VLLM_GRAPH_RESERVED_MEM)", number, bound=RATIO),
    Option("graph_prompt_ratio", "graph-prompt-ratio", "share of graph memory for prefill graphs (default: "
           "VLLM_GRAPH_PROMPT_RATIO)", number, bound=RATIO),
    Option("graph_multimodal_prompt_ratio", "graph-multimodal-prompt-ratio", "share of prefill graph memory for text; "
           "vision gets the rest (default: VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO)", number, bound=RATIO),
    Option("vision_pool", "vision-pool", "vision graph memory model: private (HPU default), shared (CUDA default) or "
           "none"),
    Option("sizes", "sizes", "traffic to plan over: a CSV with a width,height header (optional text_tokens, "
           "output_tokens, cached_tokens, count; empty width,height = a text-only request) or a folder of images: "
           "the vision buckets are planned jointly with the vision graph pool, vllm-gaudi's text buckets from the "
           "requests (default: the embedded default traffic)", nonempty("a request CSV or a folder of images"),
           metavar="CSV|DIR"),
    Option("text_graph_budget", "text-graph-budget", "most prompt + decode graphs in the text buckets planned for "
           "vllm-gaudi, as it warms them (speculative decoding's added decode buckets counted) "
           "(default: a third of what its own strategy warms for the same limits, raised at most to a "
           f"half only as far as the buckets need to match its own efficiencies on the traffic; at least the fewest "
           "graphs that keep every shape (a smaller budget is refused with that least), at most "
           f"{GRAPH_BUDGET_CEILING})", integer,
           bound=GRAPH_BUDGET),
    Option("concurrency", "concurrency", "requests running at once, for the decode batches the text buckets are "
           "planned for (default: every load up to --max-num-seqs)", integer, bound=COUNT),
    Option("keep_buckets", "keep-buckets", "keep the configured bucket list, only pruning the largest buckets that do "
           "not fit (default: re-plan it jointly with the vision pool when it does not fit, or when --sizes is given "
           "and a list planned over them serves them better)", boolean=True),
    Option("max_buckets", "max-buckets", "most vision buckets in a jointly planned list (default: as many as the "
           "configured list)", integer, bound=COUNT),
    Option("profile", "profile", "measured graph costs from `vllm-hpu-mm memory calibrate` (default: "
           "$VLLM_HPU_MM_PROFILE, else ~/.cache/vllm-hpu-mm/memory-profile.json when it exists; none: the built-in "
           "estimates only)", nonempty("a profile file, or none"), metavar="FILE|none"),
)  # fmt: skip


#: Where :func:`add_options` with ``keep_typed`` keeps the flags as typed, in order: (option string, its text; None
#: for a flag that takes no value), for a runtime release whose own server parser reads them (a vllm-fork line).
TYPED = "typed_flags"


def _keep_typed(namespace: argparse.Namespace, option_string: str | None, text: str | None) -> None:
    kept = list(getattr(namespace, TYPED, None) or ())  # a new list: never argparse's shared default
    setattr(namespace, TYPED, [*kept, (option_string, text)])


class _StoreTyped(argparse.Action):
    """Stores the value read (``values``: its text and the value, from :func:`_with_text`) and keeps the text."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:  # fmt: skip
        text, value = values
        setattr(namespace, self.dest, value)
        _keep_typed(namespace, option_string, text)


class _BooleanTyped(argparse.BooleanOptionalAction):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:  # fmt: skip
        super().__call__(parser, namespace, values, option_string)
        _keep_typed(namespace, option_string, None)


def _with_text(read: Callable[[str], Any] | None) -> Callable[[str], tuple[str, Any]]:
    """``read`` that also returns the text it read (its name kept: argparse names the type in its errors)."""
    given = read or str

    @functools.wraps(given)
    def both(raw: str) -> tuple[str, Any]:
        return raw, given(raw)

    return both


def add_options(p: argparse.ArgumentParser, options: Iterable[Option], *, prefix: str = "", help: bool = True,
                keep_typed: bool = False) -> None:  # fmt: skip
    """Add ``options`` to ``p`` as ``--{prefix}{name}`` (aliases only without a prefix); every default is None (the
    plan fills in the runtime's, the device's or the settings' default). ``keep_typed``: each flag given is also kept
    as typed, under :data:`TYPED`."""
    for o in options:
        names = [f"--{prefix}{o.name}", *(() if prefix else o.aliases)]
        if o.type is integer and o.bound is COUNT:
            o = dataclasses.replace(o, type=_count)  # a count's refusal says its range (r16loads 15: "4.5")
        kw: dict[str, Any] = {"dest": f"{prefix.replace('-', '_')}{o.field}", "default": None}
        if help:
            kw["help"] = o.help
        if o.boolean:
            kw["action"] = _BooleanTyped if keep_typed else argparse.BooleanOptionalAction
        elif keep_typed:
            kw["type"] = _with_text(o.type)
            kw["action"] = _StoreTyped
            if o.metavar:
                kw["metavar"] = o.metavar
        else:
            kw["type"] = o.type
            if o.metavar:
                kw["metavar"] = o.metavar
        p.add_argument(*names, **kw)


@dataclasses.dataclass(frozen=True)
class SizingArgs:
    """What the user asked the plan for; None means "the default" (the runtime's, the device's, the model's or the
    settings'). ``prefix`` is how the planner's options were spelled (``plan-`` under ``serve``)."""

    model: str | None = None
    dtype: str | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    kv_cache_memory_bytes: int | None = None
    quantization: str | None = None
    enforce_eager: bool | None = None
    enable_expert_parallel: bool | None = None
    revision: str | None = None
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None
    performance_mode: str | None = None
    kv_cache_dtype: str | None = None
    num_gpu_blocks_override: int | None = None
    speculative_config: Any = None
    device: str | None = None
    runtime: str | None = None
    free_memory_gib: float | None = None
    total_memory_gib: float | None = None
    buckets: str | None = None
    graph_reserved_mem: float | None = None
    graph_prompt_ratio: float | None = None
    graph_multimodal_prompt_ratio: float | None = None
    vision_pool: str | None = None
    sizes: str | None = None
    keep_buckets: bool | None = None
    max_buckets: int | None = None
    profile: str | None = None
    text_graph_budget: int | None = None
    concurrency: int | None = None
    prefix: str = ""
    #: How the user spelled vLLM's flags where it differs from the long name (field, spelling): ``-tp``, a prefix
    #: vLLM's parser resolves (``--gpu-memory-util``), an alias, ``--max_model_len``.
    spelled: tuple[tuple[str, str], ...] = ()
    #: ``profile`` read and validated, once per command before any planning (``jobs.serve.with_profile_read``); None
    #: until then.
    profile_read: ProfileRead | None = dataclasses.field(default=None, compare=False, repr=False)

    def flag(self, field: str) -> str:
        """The flag of ``field`` as the user spelled it, else as this front end spells it: ``--max-model-len``,
        ``--plan-device``."""
        for name, spelling in self.spelled:
            if name == field:
                return spelling
        for o in VLLM_FLAGS:
            if o.field == field:
                return f"--{o.name}"
        for o in PLAN_OPTIONS:
            if o.field == field:
                return f"--{self.prefix}{o.name}"
        raise KeyError(field)

    def with_plan_options(self, ns: argparse.Namespace, *, prefix: str = "") -> SizingArgs:
        """These arguments (vLLM's flags, parsed apart: ``serve``) with the planner's options argparse read into
        ``ns`` under ``prefix``."""
        dest = prefix.replace("-", "_")
        values: dict[str, Any] = {o.field: getattr(ns, dest + o.field, None) for o in PLAN_OPTIONS}
        return dataclasses.replace(self, **values, prefix=prefix)

    def check_bounds(self) -> None:
        """Every given value within its flag's bound; the error names the flag as the user spelled it."""
        for o in (*VLLM_FLAGS, *PLAN_OPTIONS):
            value = getattr(self, o.field)
            if o.bound is not None and value is not None:
                o.bound(value, self.flag(o.field))

    @classmethod
    def from_namespace(
        cls,
        ns: argparse.Namespace,
        *,
        prefix: str = "",
        vllm: argparse.Namespace | None = None,
        spelled: tuple[tuple[str, str], ...] = (),
    ) -> SizingArgs:
        """The arguments argparse read into ``ns`` (the planner's options under ``prefix``); vLLM's flags from
        ``vllm`` when they were parsed apart (``serve``), else from ``ns``."""
        dest = prefix.replace("-", "_")
        values: dict[str, Any] = {o.field: getattr(vllm if vllm is not None else ns, o.field, None) for o in VLLM_FLAGS}
        values |= {o.field: getattr(ns, dest + o.field, None) for o in PLAN_OPTIONS}
        return cls(**values, prefix=prefix, spelled=spelled)

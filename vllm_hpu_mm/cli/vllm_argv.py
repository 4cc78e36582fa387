"""vLLM's OpenAI-server command line read the way vLLM's own parser reads it, without importing vLLM.

``python -m vllm.entrypoints.openai.api_server`` parses its arguments with ``FlexibleArgumentParser`` (vLLM 0.32
``vllm/utils/argparse_utils.py``) over every option of ``make_arg_parser`` (``vllm/entrypoints/launchers/
cli_args.py``). What decides how a token is read:

- the full option list: argparse resolves an unambiguous prefix (``--gpu-memory-util`` is
  ``--gpu-memory-utilization``, ``-t`` is ``-tp``) only against every option the server has, and refuses an
  ambiguous or unknown one. vLLM 0.32's list is stored in ``data/vllm_0.32_server_options.json`` (option strings,
  how many values each takes, destination); a test checks it against the installed vLLM, and a launch reads the
  installed vLLM's own list instead (:func:`options_of`).
- what ``FlexibleArgumentParser.parse_args`` does before argparse (reimplemented here from its behaviour, and checked
  against it by property tests): ``--config FILE`` (spelled exactly so) inserts the YAML's flags before the command
  line, so the command line wins; underscores in ``--flag_names`` become dashes; ``-O3`` and ``-O 3`` are
  ``--optimization-level 3``; dotted flags (``--limit-mm-per-prompt.image 2``) merge into one JSON value.

The tokens keep where they came from (:class:`Arg`), so that the launch can move a positional model to ``--model``
and errors can name a flag as the user typed it.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import re
from collections.abc import Callable, Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.kept import kept_property
from vllm_hpu_mm.plan.args import human_readable_int
from vllm_hpu_mm.runtimes.base import ReleaseParser

__all__ = [
    "MAX_SERVER_ARGS",
    "Arg",
    "OptionTable",
    "ServerOption",
    "bounds_words",
    "expand",
    "options_of",
    "redacted",
    "release_table",
    "resolve",
    "scrub",
    "secret_options",
    "table_json",
    "vllm_032_table",
]

#: The stored option list: vLLM 0.32's server parser.
TABLE_FILE = "vllm_0.32_server_options.json"
#: The most server arguments read: argparse's time grows with the square of the number of flags (8,000 flags took
#: 0.9 s on the 2-core development machine, 40,000 took 18 s), in vLLM's parser as in ours.
MAX_SERVER_ARGS = 4096
Nargs = int | str | None


@dataclasses.dataclass(frozen=True)
class ServerOption:
    """One argument of vLLM's server parser: its option strings (none for the positional model), how many values it
    takes (argparse's ``nargs``: None one, 0 none, ``?``, ``*``, ``+``), where it is stored, how its value is read
    (:data:`KINDS`; None: as a string) and its choices; ``convert``: the live parser's own type, where read from an
    installed vLLM (not stored); ``bounds``: the bounds of the vLLM config field it fills (``(("ge", 0),)`` for
    ``UVAOffloadConfig.cpu_offload_gb``), which vLLM's parser does not check but its config class does."""

    strings: tuple[str, ...]
    nargs: Nargs
    dest: str
    kind: str | None = None
    choices: tuple[str, ...] | None = None
    convert: Callable[[str], Any] | None = dataclasses.field(default=None, compare=False, repr=False)
    bounds: tuple[tuple[str, float], ...] = ()

    def reader(self) -> Callable[[str], Any] | None:
        """How argparse reads one value of this option: the installed vLLM's own type, else the stored kind's."""
        if self.convert is not None:
            return self.convert
        if self.kind is None:
            return None
        kind = self.kind
        optional = kind.startswith("optional ")
        read = KINDS[kind.removeprefix("optional ")]

        def value(raw: str) -> Any:
            if optional and raw in ("", "None"):  # vLLM's optional_type
                return None
            try:
                return read(raw)
            except (ValueError, TypeError, ArithmeticError):
                base = kind.split()[-1]
                raise argparse.ArgumentTypeError(
                    f"{_short(raw)} is not {KIND_WORDS[base]}; accepted: {KIND_ACCEPTED[base]}"
                    + (" (or None: unset)" if optional else "")
                ) from None

        return value


@dataclasses.dataclass(frozen=True)
class OptionTable:
    """Every argument of one vLLM's server parser. ``own_types``: every value is read with the table's own readers,
    the sizing flags and ``--limit-mm-per-prompt`` included (a release whose parser is not vLLM 0.32's, e.g. a
    vllm-fork line: :func:`release_table`); otherwise those get vLLM 0.32's types."""

    version: str
    options: tuple[ServerOption, ...]
    own_types: bool = False

    @kept_property
    def by_string(self) -> dict[str, ServerOption]:
        return {s: o for o in self.options for s in o.strings}


def _short(raw: str) -> str:
    return repr(raw) if len(raw) <= 60 else f"{raw[:60]!r}..."


#: A vLLM config JSON may spell numbers as ``2k`` (``_expand_json_human_readable_numbers``): read as 0 to check form.
_JSON_HUMAN = re.compile(r"(?<![\w\"])\d+(?:\.\d+)?[kKmMgGtT](?![\w\"])")


def _json_config(raw: str) -> Any:
    """A config dataclass's JSON (vLLM: ``TypeAdapter(cls).validate_json``): checked as JSON here; its fields are
    vLLM's to check (a launch reads it with the installed vLLM's own type)."""
    return json.loads(_JSON_HUMAN.sub("0", raw))


#: The value types of vLLM 0.32's server options, by the name the stored table gives them (``optional X``: vLLM's
#: ``optional_type``, where ``""`` and ``None`` mean unset).
KINDS: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "json": json.loads, "json_config": _json_config,
                                          "human_int": human_readable_int}  # fmt: skip
KIND_WORDS = {"int": "an integer", "float": "a number", "json": "JSON", "json_config": "a JSON config",
              "human_int": "an integer (e.g. 32768, 32k, 32K)"}  # fmt: skip
#: What each kind accepts, for the error line (what to type instead).
KIND_ACCEPTED = {"int": "an integer such as 4", "float": "a number such as 0.9",
                 "json": 'a JSON value such as \'{"key": 1}\'', "json_config": "a JSON object of the config's fields",
                 "human_int": "an integer such as 32768, 32k or 32K"}  # fmt: skip


def _kind(convert: Any) -> str | None:
    """The stored kind of one of vLLM's argparse types (None: read as a string, or not modelled)."""
    if convert is None or convert is str:
        return None
    name = getattr(convert, "__qualname__", "")
    if convert is int or convert is float:
        return convert.__name__
    if convert is json.loads:
        return "json"
    if name.endswith("parse_dataclass"):
        return "json_config"
    if name.endswith("human_readable_int"):
        return "human_int"
    inner = [c.cell_contents for c in getattr(convert, "__closure__", None) or ()]
    if name.startswith("optional_type") and inner:
        kind = _kind(inner[0])
        return None if kind is None or kind.startswith("optional") else f"optional {kind}"
    if name.startswith("parse_type") and inner:
        return _kind(inner[0])
    return None


#: A bound's name (annotated_types' Ge, Gt, Le, Lt, as pydantic's Field stores it) and how it reads.
BOUND_SIGNS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
_BOUND_HOLDS: dict[str, Callable[[float, float], bool]] = {
    "ge": lambda v, b: v >= b,
    "gt": lambda v, b: v > b,
    "le": lambda v, b: v <= b,
    "lt": lambda v, b: v < b,
}


def bounds_words(bounds: Iterable[tuple[str, float]]) -> str:
    """Bounds in words: ``a value >= 0``."""
    said = [f"{BOUND_SIGNS[name]} {limit:g}" for name, limit in bounds]
    return "a value " + " and ".join(said) if said else "what vLLM's config accepts"


def out_of_bounds(value: Any, bounds: Iterable[tuple[str, float]]) -> bool:
    """Whether a number breaks one of ``bounds`` (anything else, and None, is not checked here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not all(_BOUND_HOLDS[name](value, limit) for name, limit in bounds)


def options_of(
    parser: argparse.ArgumentParser, bounds: dict[str, tuple[tuple[str, float], ...]] | None = None
) -> tuple[ServerOption, ...]:
    """The arguments of a live argparse parser (vLLM's), in its order, with their types (kept live), choices
    (where read as strings or integers) and ``bounds`` (by destination: those of the config fields they fill)."""
    out = []
    for action in parser._actions:
        nargs = 0 if action.nargs == 0 or (action.nargs is None and _takes_no_value(action)) else action.nargs
        kind = None if nargs == 0 else _kind(action.type)
        # choices a value is compared with as read: strings, or integers an int type reads (--max-lora-rank)
        plain = action.type in (None, str) or (kind == "int" and all(type(c) is int for c in action.choices or ()))
        choices = tuple(str(c) for c in action.choices) if action.choices is not None and plain and nargs != 0 else None
        convert = action.type if nargs != 0 and callable(action.type) else None
        found = (bounds or {}).get(action.dest, ())
        out.append(ServerOption(tuple(action.option_strings), nargs, action.dest, kind, choices, convert, found))
    return tuple(out)


def _takes_no_value(action: argparse.Action) -> bool:
    # store_true, store_const, help, count: argparse gives them nargs=0 or no nargs at all.
    return isinstance(action, argparse._StoreConstAction | argparse._HelpAction | argparse._CountAction)


def table_json(version: str, options: Iterable[ServerOption]) -> str:
    """The stored form of a table: one option per line (a sixth column, its bounds, only where it has some)."""
    rows = ",\n".join(
        "    "
        + json.dumps(
            [list(o.strings), o.nargs, o.dest, o.kind, None if o.choices is None else list(o.choices)]
            + ([dict(o.bounds)] if o.bounds else [])
        )
        for o in options
    )
    return f'{{\n  "vllm": {json.dumps(version)},\n  "options": [\n{rows}\n  ]\n}}\n'


@functools.cache
def vllm_032_table() -> OptionTable:
    """vLLM 0.32's server options, as stored in the package."""
    text = resources.files("vllm_hpu_mm.data").joinpath(TABLE_FILE).read_text(encoding="utf-8")
    data = json.loads(text)
    options = tuple(
        ServerOption(
            tuple(strings),
            nargs,
            dest,
            kind,
            None if choices is None else tuple(choices),
            bounds=tuple(bounds[0].items()) if bounds else (),
        )
        for strings, nargs, dest, kind, choices, *bounds in data["options"]
    )
    return OptionTable(str(data["vllm"]), options)


def release_table(parser: ReleaseParser) -> OptionTable:
    """A release's own server parser (:class:`~vllm_hpu_mm.runtimes.base.ReleaseParser`) as an option table whose
    readers decide every value (``own_types``)."""
    options = tuple(ServerOption(strings, nargs, dest, "int" if read is int else None, choices, read)
                    for strings, nargs, dest, read, choices in parser.options)  # fmt: skip
    # the positional model `vllm serve` takes (serve moves it to --model), as in vLLM 0.32's table
    return OptionTable(parser.name, (ServerOption((), "?", "model_tag"), *options), own_types=True)


class Arg(str):
    """A server argument that remembers its position in the user's command line (None: it came from ``--config``;
    a flag merged from dotted flags: the first of them)."""

    origin: int | None

    def __new__(cls, value: str, origin: int | None) -> Arg:
        arg = super().__new__(cls, value)
        arg.origin = origin
        return arg


#: Everything between the leading ``--`` and the first ``.`` of a flag: the part whose ``_`` vLLM reads as ``-``.
_FLAG_NAME = re.compile(r"(?<=--)[^.]*")


def expand(argv: Sequence[str], table: OptionTable, *, read_config: Callable[[str], dict[str, Any]]) -> list[Arg]:
    """What ``FlexibleArgumentParser.parse_args`` hands argparse for ``argv`` (no subcommand, as the API server
    parses it). ``read_config`` reads the ``--config`` YAML into a mapping."""
    args = [Arg(a, i) for i, a in enumerate(argv)]
    if "--config" in args:
        args = _pull_config(args, table, read_config)
    processed: list[Arg] = []
    for i, arg in enumerate(args):
        if arg.startswith("--help="):
            processed.append(Arg("--help", arg.origin))
        elif arg.startswith("--"):
            key, sep, value = arg.partition("=")
            key = _FLAG_NAME.sub(lambda m: m.group(0).replace("_", "-"), key, count=1)
            processed.append(Arg(key + sep + value, arg.origin))
        elif arg.startswith("-O") and arg != "-O":
            level = arg[3:] if arg[2] == "=" else arg[2:]
            processed += [Arg("--optimization-level", arg.origin), Arg(level, arg.origin)]
        elif arg == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
            processed.append(Arg("--optimization-level", arg.origin))
        else:
            processed.append(arg)
    return _merge_dotted(processed)


def _pull_config(args: list[Arg], table: OptionTable, read_config: Callable[[str], dict[str, Any]]) -> list[Arg]:
    at = [i for i, a in enumerate(args) if a == "--config"]
    if len(at) > 1:
        raise ConfigError("--config is given more than once; accepted: one --config FILE (vLLM reads one config file)")
    index = at[0]
    if index == len(args) - 1:
        raise ConfigError("--config needs a file: a YAML of server flags (key: value)")
    path = args[index + 1]
    if path.split(".")[-1] not in ("yaml", "yml"):
        raise ConfigError(f"--config {path}: vLLM reads only .yaml or .yml config files")
    data = read_config(path)
    for key, value in data.items():
        option = table.by_string.get(f"--{key}") or table.by_string.get(f"--{str(key).replace('_', '-')}")
        if isinstance(value, list) and len(value) > 1 and option is not None and option.nargs is None:
            raise ConfigError(f"--config {path}: the YAML's key '{key}' holds a list of {len(value)} values, but "
                              f"--{key} takes one; accepted: one value under '{key}'")  # fmt: skip
    config = [Arg(a, None) for a in _config_args(data, table)]
    rest = args[:index] + args[index + 2 :]
    if args[0].startswith("-"):
        return config + rest
    return [args[0], *config, *rest[1:]]  # a positional model first stays first


def _config_args(config: dict[str, Any], table: OptionTable) -> list[str]:
    """The YAML's flags as ``FlexibleArgumentParser.load_config_file`` writes them: ``key: true`` is ``--key``,
    ``false`` is ``--no-key`` where the server has that flag (else nothing), a list its items, a mapping JSON."""
    out: list[str] = []
    for key, value in config.items():
        if isinstance(value, bool):
            if value:
                out.append(f"--{key}")
            elif f"--no-{key}" in table.by_string:
                out.append(f"--no-{key}")
        elif isinstance(value, list):
            if value:
                out += [f"--{key}", *map(str, value)]
        elif isinstance(value, dict):
            out += [f"--{key}", json.dumps(value)]
        else:
            out += [f"--{key}", str(value)]
    return out


def _merge_dotted(processed: list[Arg]) -> list[Arg]:
    """``--name.key value`` (and ``--name.key=value``, ``--name.list+ a,b``) merged into ``--name JSON``, after the
    other arguments, as vLLM merges them."""
    delete: set[int] = set()
    merged: dict[str, dict[str, Any]] = {}
    first: dict[str, int | None] = {}  # where each merged flag was first typed
    for i, arg in enumerate(processed):
        if i in delete or not arg.startswith("-") or "." not in arg:
            continue
        if "=" in arg:
            name, raw = arg.split("=", 1)
            if "." not in name:
                continue  # the dot was in the value
        else:
            if i + 1 >= len(processed):
                raise ConfigError(f"{arg} needs a value")
            name, raw = str(arg), str(processed[i + 1])
            delete.add(i + 1)
        if name.endswith("+"):
            name, raw = name[:-1], json.dumps(raw.split(","))
        key, *keys = name.split(".")
        value: Any
        try:
            value = json.loads(raw)
        except ValueError:
            try:
                value = human_readable_int(raw)
            except (ValueError, argparse.ArgumentTypeError):
                value = raw
        for k in reversed(keys):
            value = {k: value}
        _update(merged.setdefault(key, {}), value)
        first.setdefault(key, arg.origin)
        delete.add(i)
    out = [a for i, a in enumerate(processed) if i not in delete]
    for key, value in merged.items():
        out += [Arg(key, first[key]), Arg(json.dumps(value), None)]
    return out


def _update(original: dict[str, Any], update: dict[str, Any]) -> None:
    """Nested merge: mappings merge, lists extend, anything else is replaced."""
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(original.get(k), dict):
            _update(original[k], v)
        elif isinstance(v, list) and isinstance(original.get(k), list):
            original[k] += v
        else:
            original[k] = v


def read_yaml(path: str) -> dict[str, Any]:
    """A ``--config`` YAML file as a mapping, with one-line errors."""
    try:
        import yaml
    except ImportError:
        raise ConfigError(f"--config {path}: reading YAML needs PyYAML (pip install pyyaml)") from None
    try:
        text = Path(path).read_text(encoding="utf-8")  # as vLLM opens it: no ~ expansion
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(
            f"--config {path}: cannot read it ({reason}); accepted: a readable UTF-8 YAML file of vLLM flags"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"--config {path}: not valid YAML ({str(exc).splitlines()[0]}); accepted: a YAML mapping of vLLM flags"
        ) from None
    # vLLM v0.32.0 vllm/utils/argparse_utils.py load_config_file calls .items() on yaml.safe_load's result: an empty
    # file (or only comments: None) or a list fails there with an AttributeError before the server starts
    if not isinstance(data, dict):
        got = "an empty YAML document" if data is None else f"a {type(data).__name__}"
        raise ConfigError(f"--config {path}: {got}, which vLLM cannot read; accepted: a YAML mapping of vLLM flags "
                          "(key: value)")  # fmt: skip
    return {str(k): v for k, v in data.items()}


def resolve(token: str, table: OptionTable) -> str | None:
    """The destination a flag token resolves to (exact, or an unambiguous prefix), or None."""
    key = token.split("=", 1)[0]
    option = table.by_string.get(key)
    if option is None and key.startswith("-") and len(key) > 1:
        found = {table.by_string[s].dest for s in table.by_string if s.startswith(key)}
        return found.pop() if len(found) == 1 else None
    return None if option is None else option.dest


#: The server arguments whose values vLLM never logs (vLLM 0.32 ``vllm/entrypoints/serve/utils/api_utils.py``
#: ``_SENSITIVE_ARG_FIELDS``; ``log_non_default_args`` shows them as ``***``): the API keys clients must send, the
#: Hugging Face token, and the watermark config (its ``key`` is the watermark's secret). Nothing here prints or
#: writes their values either (:func:`redacted`); the launch alone hands vLLM the real ones.
SECRET_DESTS = frozenset({"api_key", "hf_token", "watermark_config"})
#: What a secret value is shown as: vLLM's own mask.
MASK = "***"
#: Where a secret can be given instead of on the command line (where ``ps`` shows it to every user of the host):
#: vLLM 0.32 reads ``VLLM_API_KEY`` when no ``--api-key`` is given (``entrypoints/serve/middleware/register.py``),
#: huggingface_hub reads ``HF_TOKEN`` when vLLM passes no token; the ``--config`` YAML takes any flag.
SECRET_INSTEAD = ("give it instead in the server's environment (VLLM_API_KEY: one API key; HF_TOKEN: the Hugging "
                  "Face token; in Kubernetes from a Secret, env valueFrom secretKeyRef) or in a --config YAML "
                  "readable only by you (any of them)")  # fmt: skip


def _secret_option(token: str, table: OptionTable) -> ServerOption | None:
    """The secret option a flag token names (as vLLM reads it: ``_`` as ``-``, an unambiguous prefix, a dotted
    ``--watermark-config.key``), or None."""
    if not token.startswith("-") or token == "-":
        return None
    key = token.split("=", 1)[0]
    if key.startswith("--"):
        key = _FLAG_NAME.sub(lambda m: m.group(0).replace("_", "-"), key.split(".", 1)[0], count=1)
    dest = resolve(key, table)
    if dest not in SECRET_DESTS:
        return None
    return next((o for o in table.options if o.dest == dest), None)


def redacted(argv: Sequence[str], table: OptionTable | None = None) -> list[str]:
    """``argv`` with every secret value (:data:`SECRET_DESTS`) shown as :data:`MASK`, the flags kept: ``--api-key K``
    and ``--api-key=K``, every key of ``--api-key K1 K2``, ``--hf-token T`` (a bare ``--hf-token``, vLLM's "use the
    stored login", hides nothing), ``--watermark-config.key 7``; spelled as vLLM reads them (``--api_key``, a prefix
    such as ``--api-k``). ``table``: the server's options (vLLM 0.32's by default)."""
    table = table or vllm_032_table()
    out = list(argv)
    i = 0
    while i < len(out):
        option = _secret_option(out[i], table)
        i += 1
        if option is None:
            continue
        flag, sep, _ = out[i - 1].partition("=")
        if sep:
            out[i - 1] = f"{flag}={MASK}"
            continue
        if "." in flag:  # a dotted flag takes the next token whatever it looks like (_merge_dotted)
            taken = min(1, len(out) - i)
        else:  # as argparse takes values: up to nargs, none that looks like a flag
            nargs = option.nargs
            limit = len(out) if nargs in ("+", "*") else 1 if nargs in (None, "?") else int(nargs or 0)
            taken = 0
            while taken < limit and i + taken < len(out) and not out[i + taken].startswith("-"):
                taken += 1
        out[i : i + taken] = [MASK] * taken
        i += taken
    return out


def secret_options(argv: Sequence[str], table: OptionTable | None = None) -> list[str]:
    """The flags of ``argv`` whose values :func:`redacted` hides, as typed (without a value), each once."""
    found: dict[str, None] = {}
    for i, (given, shown) in enumerate(zip(argv, redacted(argv, table), strict=True)):
        if given != shown and shown.endswith(f"={MASK}"):
            found[given.split("=", 1)[0]] = None
        elif given != shown and argv[i - 1].startswith("-"):  # the first value after its flag
            found[argv[i - 1]] = None
    return list(found)


def secret_values(argv: Sequence[str], table: OptionTable | None = None) -> list[str]:
    """The secret values in ``argv`` (what :func:`redacted` hides), longest first."""
    found = set()
    for given, shown in zip(argv, redacted(argv, table), strict=True):
        if given != shown:
            found.add(given.split("=", 1)[1] if shown.endswith(f"={MASK}") else given)
    return sorted((v for v in found if v), key=len, reverse=True)


def scrub(text: str, argv: Sequence[str], table: OptionTable | None = None) -> str:
    """``text`` (an error line) with each secret value of ``argv`` in it shown as :data:`MASK`: a refusal quotes
    what it refuses, and error lines land in logs."""
    for value in secret_values(argv, table):
        text = re.sub(rf"(?<![\w-]){re.escape(value)}(?![\w-])", MASK, text)
    return text

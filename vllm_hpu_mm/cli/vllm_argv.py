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
from vllm_hpu_mm.plan.args import human_readable_int

__all__ = [
    "MAX_SERVER_ARGS",
    "Arg",
    "OptionTable",
    "ServerOption",
    "expand",
    "options_of",
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
    takes (argparse's ``nargs``: None one, 0 none, ``?``, ``*``, ``+``) and where it is stored."""

    strings: tuple[str, ...]
    nargs: Nargs
    dest: str


@dataclasses.dataclass(frozen=True)
class OptionTable:
    """Every argument of one vLLM's server parser."""

    version: str
    options: tuple[ServerOption, ...]

    @functools.cached_property
    def by_string(self) -> dict[str, ServerOption]:
        return {s: o for o in self.options for s in o.strings}


def options_of(parser: argparse.ArgumentParser) -> tuple[ServerOption, ...]:
    """The arguments of a live argparse parser (vLLM's), in its order."""
    out = []
    for action in parser._actions:
        nargs = 0 if action.nargs == 0 or (action.nargs is None and _takes_no_value(action)) else action.nargs
        out.append(ServerOption(tuple(action.option_strings), nargs, action.dest))
    return tuple(out)


def _takes_no_value(action: argparse.Action) -> bool:
    # store_true, store_const, help, count: argparse gives them nargs=0 or no nargs at all.
    return isinstance(action, argparse._StoreConstAction | argparse._HelpAction | argparse._CountAction)


def table_json(version: str, options: Iterable[ServerOption]) -> str:
    """The stored form of a table: one option per line."""
    rows = ",\n".join("    " + json.dumps([list(o.strings), o.nargs, o.dest]) for o in options)
    return f'{{\n  "vllm": {json.dumps(version)},\n  "options": [\n{rows}\n  ]\n}}\n'


@functools.cache
def vllm_032_table() -> OptionTable:
    """vLLM 0.32's server options, as stored in the package."""
    text = resources.files("vllm_hpu_mm.data").joinpath(TABLE_FILE).read_text(encoding="utf-8")
    data = json.loads(text)
    options = tuple(ServerOption(tuple(strings), nargs, dest) for strings, nargs, dest in data["options"])
    return OptionTable(str(data["vllm"]), options)


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
        raise ConfigError("--config is given more than once; vLLM reads one config file")
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
        raise ConfigError(f"--config {path}: cannot read it ({reason})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"--config {path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: expected a mapping of server flags (key: value), got "
                          f"{type(data).__name__}")  # fmt: skip
    return {str(k): v for k, v in data.items()}

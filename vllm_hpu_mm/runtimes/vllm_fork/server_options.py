"""What each vllm-fork release line's own server parser takes: its flags, their choices and value forms, read at the
line's tags by ``benchmarks/agreement/vllm_fork_server_options.py`` into ``data/vllm_fork_server_options.json``.

A fork release parses the server arguments with its own, older ``argparse`` (``make_arg_parser`` over
``EngineArgs.add_cli_args``), not vLLM 0.32's: it exits 2 on a flag it lacks (``--speculative-config`` before 1.21.2),
a value outside its choices (``--block-size 256`` before 1.21.0) or a value its type refuses (``--limit-mm-per-prompt``
as JSON before 1.21.2: ``nullable_kvs`` takes only KEY=VALUE; ``8k`` for an ``int`` option: ``human_readable_int``
reads only ``--max-model-len`` from 1.21.2 and ``--max-num-batched-tokens`` too from 1.22), and takes forms vLLM 0.32
refuses (``image=2``, ``--speculative-model``). :func:`release_parser` is that parser for ``serve`` and ``memory
plan`` (:class:`~vllm_hpu_mm.runtimes.base.ReleaseParser`): its options and value readers read the arguments, and
:func:`refuse_unparsed` refuses, first, what it refuses, in one line naming the flag, the release and what it accepts.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes.base import ReleaseParser
from vllm_hpu_mm.runtimes.vllm_fork.releases import LINES, Release

__all__ = ["SERVER_OPTIONS_FILE", "options_of", "refuse_unparsed", "release_parser"]

SERVER_OPTIONS_FILE = Path(__file__).resolve().parents[2] / "data" / "vllm_fork_server_options.json"


@functools.cache
def options_of(release: Release) -> tuple[tuple[tuple[str, ...], Any, str | None, tuple[Any, ...] | None], ...]:
    """``release``'s server options: (option strings, nargs, value kind, choices)."""
    data = json.loads(SERVER_OPTIONS_FILE.read_text(encoding="utf-8"))[release.spec]
    return tuple((tuple(s), n, k, None if c is None else tuple(c)) for s, n, k, c in data)


def _kvs(raw: str) -> dict[str, int]:
    """The fork's ``nullable_kvs`` (``vllm/engine/arg_utils.py``, 1.19 - 1.22): ``KEY=VALUE[,KEY=VALUE]``, integers."""
    out: dict[str, int] = {}
    for item in raw.split(","):
        parts = [p.lower().strip() for p in item.split("=")]
        if len(parts) != 2:
            raise argparse.ArgumentTypeError("Each item should be in the form KEY=VALUE")
        try:
            out[parts[0]] = int(parts[1])
        except ValueError:
            raise argparse.ArgumentTypeError(f"Failed to parse value of item {parts[0]}={parts[1]}") from None
    return out


def _json_or_kvs(raw: str) -> Any:
    """1.21.2 - 1.22's ``optional_type`` / ``parse_type`` of ``json.loads``: JSON in braces, else ``nullable_kvs``."""
    return json.loads(raw) if re.match("^{.*}$", raw) else _kvs(raw)


def _human_int(raw: str) -> int:
    """The fork's ``human_readable_int`` (``vllm/engine/arg_utils.py`` 1.21.2 - 1.22, e.g. :1713 @2e9b2b3d4): an
    integer, or one with a decimal (k, m, g: x1000...) or binary (K, M, G: x1024..., whole numbers only) suffix; no
    t/T (its pattern matches them, then ``int()`` refuses them), unlike vLLM 0.32's."""
    value = raw.strip()
    found = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgKMG])", value)
    if found is None:
        return int(value)
    number, suffix = found.groups()
    if suffix.islower():
        return int(float(number) * {"k": 10**3, "m": 10**6, "g": 10**9}[suffix])
    try:
        return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30}[suffix]
    except ValueError:
        raise argparse.ArgumentTypeError(f"Decimals are not allowed with binary suffixes like {suffix}") from None


_READERS: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "json": json.loads, "kvs": _kvs,
                                             "json_or_kvs": _json_or_kvs, "human_int": _human_int}  # fmt: skip
#: What each kind takes, for the error line.
FORMS = {
    "int": "an integer",
    "float": "a number",
    "json": "JSON",
    "kvs": "KEY=VALUE pairs, comma-separated (image=2)",
    "json_or_kvs": "a JSON object or KEY=VALUE pairs",
    "human_int": "an integer (32768, 32k = 32000, 32K = 32768)",
}


def _reader(kind: str | None) -> Callable[[str], Any] | None:
    if kind is None:
        return None
    read = _READERS[kind.removeprefix("optional ")]
    if not kind.startswith("optional "):
        return read
    return lambda raw: None if raw in ("", "None") else read(raw)


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise _Refused(message)


@functools.cache
def _parser(release: Release) -> _Parser:
    """``release``'s server parser, rebuilt from its table (abbreviations allowed, as in its argparse)."""
    p = _Parser(add_help=False, allow_abbrev=True)
    p.add_argument("model_tag", nargs="?")  # serve moves a positional model to --model
    for strings, nargs, kind, choices in options_of(release):
        if nargs == 0:
            p.add_argument(*strings, nargs=0, action=_NoValue)
            continue
        read = _reader(kind)
        typed: dict[str, Any] = {} if read is None else {"type": read}
        p.add_argument(*strings, nargs=nargs, choices=choices, **typed)
    return p


class _NoValue(argparse.Action):
    def __call__(self, *args: Any, **kwargs: Any) -> None:
        pass


def _takers(flag: str, value: str | None) -> list[str]:
    """The lines whose parser has ``flag`` (None: any value) or takes it with ``value``, as ``--plan-runtime
    vllm-fork==X`` names them."""
    out = []
    for release in LINES:
        if value is None:
            if flag not in {s for strings, *_ in options_of(release) for s in strings}:
                continue
        else:
            try:
                _parser(release).parse_args([flag, value])
            except _Refused:
                continue
        out.append(f"vllm-fork=={release.spec} ({release.name})")
    return out


def _where(release: Release) -> str:
    return f"its vllm/engine/arg_utils.py and vllm/entrypoints/openai/cli_args.py @{release.commit}"


def refuse_unparsed(args: Sequence[str], typed: Callable[[str], str], release: Release) -> None:
    """ConfigError if ``release``'s own server parser refuses ``args`` (the server arguments as vLLM's
    ``FlexibleArgumentParser`` hands them to argparse); ``typed``: a flag as the user typed it."""
    parser = _parser(release)
    try:
        parser.parse_args(list(args))
        return
    except _Refused as exc:
        message = str(exc)
    head = f"vllm-fork {release.name}'s server"
    unknown = re.match(r"unrecognized arguments: (.*)", message, re.S)
    if unknown:
        flag = next((a for a in unknown.group(1).split() if a.startswith("-")), unknown.group(1).split()[0])
        name = flag.split("=", 1)[0]
        own = [s for strings, *_ in options_of(release) for s in strings]
        near = difflib.get_close_matches(name, own, n=2, cutoff=0.75)
        takers = _takers(name, None)
        hint = f"; it takes {' / '.join(near)} instead" if near else ""
        others = f", or plan for a release whose server takes it: {', '.join(takers)}" if takers else ""
        raise ConfigError(f"server argument {typed(name)}: {head} has no such flag ({_where(release)}{hint}); "
                          f"accepted: leave it out{others}")  # fmt: skip
    named = re.match(r"argument (\S+): (.*)", message, re.S)
    if named is None:
        raise ConfigError(f"server arguments: {head} refuses them ({message}; {_where(release)})")
    spelled = named.group(1).split("/")
    option = next(o for o in options_of(release) if set(spelled) <= set(o[0]))
    flag = next(s for s in option[0] if s.startswith("--"))
    value = _value_of(args, option[0])
    takers = _takers(flag, value) if value is not None else []
    others = f"; or plan for a release that takes it: {', '.join(takers)}" if takers else ""
    if option[3] is not None:
        accepted = ", ".join(map(str, option[3]))
    elif option[2] is not None:
        accepted = FORMS[option[2].removeprefix("optional ")]
    else:
        accepted = "what its parser reads there"
    raise ConfigError(f"server argument {typed(flag)}: {head} refuses {value!r} ({named.group(2)}; "
                      f"{_where(release)}); accepted: {accepted}{others}")  # fmt: skip


def _value_of(args: Sequence[str], strings: Sequence[str]) -> str | None:
    """The last value given to the option of ``strings`` in ``args`` (``--flag V`` or ``--flag=V``)."""
    found = None
    for i, arg in enumerate(args):
        key, sep, raw = arg.partition("=")
        if key in strings:
            found = raw if sep else (args[i + 1] if i + 1 < len(args) else None)
    return found


def _dest(strings: Sequence[str]) -> str:
    """argparse's destination: the first long option string, without its dashes, ``-`` as ``_``."""
    first = next((s for s in strings if s.startswith("--")), strings[0])
    return first.lstrip("-").replace("-", "_")


@functools.cache
def release_parser(release: Release) -> ReleaseParser:
    """``release``'s own server parser: its options with the readers its argparse types are (:data:`_READERS`)."""
    options = tuple((strings, nargs, _dest(strings), None if nargs == 0 else _reader(kind),
                     None if choices is None else tuple(map(str, choices)))
                    for strings, nargs, kind, choices in options_of(release))  # fmt: skip
    return ReleaseParser(f"vllm-fork {release.name}", options,
                         lambda args, typed: refuse_unparsed(args, typed, release))  # fmt: skip

"""The vLLM server flags the plan reads, parsed by our own small parser, so that ``serve --dry-run`` works fast and
without vLLM; everything else passes through to vLLM unparsed. vLLM's own parser (vLLM 0.33's
``vllm.entrypoints.common.cli_args``, 0.32's ``vllm.entrypoints.launchers.cli_args``) validates the whole command
before a real launch, or on request.

What we read: a leading positional model, the sizing flags of :data:`vllm_hpu_mm.plan.args.VLLM_FLAGS` (the same
table ``memory plan`` uses), ``--config`` (YAML; the command line wins over it, as in vLLM),
``--compilation-config/-O`` and ``--limit-mm-per-prompt``. Underscores in flag names are accepted as vLLM accepts
them.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import json
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.plan.args import VLLM_FLAGS, SizingArgs, add_options

__all__ = ["ServerArgs", "parse_server_args", "validate_with_vllm", "vllm_installed"]

#: vLLM's server-argument module: 0.33 moved it (``common``), 0.32 has it under ``launchers``.
CLI_ARGS_MODULES = ("vllm.entrypoints.common.cli_args", "vllm.entrypoints.launchers.cli_args")


@dataclasses.dataclass(frozen=True)
class ServerArgs:
    """The server arguments the plan and the exports read."""

    #: vLLM's sizing flags (the planner's options left unset).
    sizing: SizingArgs
    #: The user's compilation config (from ``--compilation-config``/``-O`` or the YAML), or None.
    compilation_config: dict[str, Any] | None = None
    limit_mm_per_prompt: str | None = None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # a bad value, or a flag without its value
        raise ConfigError(f"server arguments: {message}")


def _parser() -> _Parser:
    p = _Parser(add_help=False, allow_abbrev=False)
    add_options(p, VLLM_FLAGS, help=False)
    p.add_argument("--config")
    p.add_argument("--compilation-config", "-O")
    p.add_argument("--limit-mm-per-prompt")
    return p


def _normalise(argv: Sequence[str]) -> list[str]:
    """``--max_model_len`` -> ``--max-model-len`` (vLLM's parser accepts both); values are left alone."""
    out = []
    for token in argv:
        if token.startswith("--") and "_" in token.split("=", 1)[0]:
            key, sep, value = token.partition("=")
            token = key.replace("_", "-") + sep + value
        out.append(token)
    return out


def _yaml(path: str) -> dict[str, Any]:
    try:
        import yaml
    except ImportError:
        raise ConfigError(f"--config {path}: reading YAML needs PyYAML (pip install pyyaml)") from None
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--config {path}: cannot read it ({exc.strerror or exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"--config {path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"--config {path}: expected a mapping of server flags (key: value), got {type(data).__name__}"
        )
    return {str(k).replace("_", "-"): v for k, v in data.items()}


def _config_argv(config: dict[str, Any]) -> list[str]:
    """The YAML mapping as command-line tokens, for the flags we read."""
    known = {a.lstrip("-") for action in _parser()._actions for a in action.option_strings if a.startswith("--")}
    out: list[str] = []
    for key, value in config.items():
        if key not in known or key == "config":
            continue
        if isinstance(value, bool):
            out.append(f"--{key}" if value else f"--no-{key}")
        elif isinstance(value, dict | list):
            out += [f"--{key}", json.dumps(value)]
        else:
            out += [f"--{key}", str(value)]
    return out


def _json_object(flag: str, raw: str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    if re.fullmatch(r"\d+", raw.strip()):
        return {"mode": int(raw)}  # -O3: an optimisation level
    try:
        value = json.loads(raw)
    except ValueError:
        raise ConfigError(f"{flag} {raw!r} is not JSON; accepted: a JSON object or an optimisation level") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{flag} {raw!r} is not a JSON object")
    return value


def parse_server_args(argv: Sequence[str]) -> ServerArgs:
    """The flags the plan reads (see the module docstring); unknown flags are left to vLLM."""
    tokens = _normalise(argv)
    model = None
    if tokens and not tokens[0].startswith("-"):
        model, tokens = tokens[0], tokens[1:]  # `serve MODEL ...`, as `vllm serve` takes it
    ns, _ = _parser().parse_known_args(tokens)
    if ns.config is not None:
        merged, _ = _parser().parse_known_args(_config_argv(_yaml(ns.config)) + tokens)
        ns = merged
    ns.model = model or ns.model
    return ServerArgs(
        sizing=SizingArgs.from_namespace(argparse.Namespace(), vllm=ns),
        compilation_config=_json_object("--compilation-config", ns.compilation_config),
        limit_mm_per_prompt=ns.limit_mm_per_prompt,
    )


def vllm_installed() -> bool:
    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        return False


def _cli_args_module() -> Any:
    for name in CLI_ARGS_MODULES:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    raise ConfigError(
        "this vLLM has none of the server-argument modules we know "
        f"({', '.join(CLI_ARGS_MODULES)}); supported: vLLM 0.32 and 0.33"
    )


def validate_with_vllm(argv: Sequence[str], prog: str = "vllm-hpu-mm serve") -> None:
    """Parse and validate ``argv`` with vLLM's own server parser; one-line :class:`ConfigError` on anything it
    rejects (its usage text is not printed)."""
    module = _cli_args_module()
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = module.make_arg_parser(FlexibleArgumentParser(prog=prog, allow_abbrev=False))  # type: ignore[no-untyped-call]

    def error(message: str) -> Any:
        raise ConfigError(f"vLLM rejected the server arguments {shlex.join(argv)!r}: {message}")

    parser.error = error
    ns = parser.parse_args(list(argv))
    try:
        module.validate_parsed_serve_args(ns)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"vLLM rejected the server arguments: {exc}") from exc

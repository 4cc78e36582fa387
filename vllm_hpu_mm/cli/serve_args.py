"""The vLLM server flags the plan reads, parsed by our own small parser, so that ``serve --dry-run`` works fast and
without vLLM; everything else passes through to vLLM unparsed. vLLM's own parser (vLLM 0.33's
``vllm.entrypoints.common.cli_args``, 0.32's ``vllm.entrypoints.launchers.cli_args``) validates the whole command
before a real launch, or on request.

What we read, with vLLM's spellings: a leading positional model, ``--model``, ``--config`` (YAML; the command line
wins over it, as in vLLM), ``--dtype``, ``--tensor-parallel-size/-tp``, ``--pipeline-parallel-size/-pp``,
``--data-parallel-size/-dp``, ``--gpu-memory-utilization``, ``--max-model-len`` (also ``32k``/``1M`` forms),
``--max-num-seqs``, ``--max-num-batched-tokens``, ``--block-size``, ``--kv-cache-memory-bytes``,
``--quantization/-q``, ``--enforce-eager``, ``--compilation-config/-O``, ``--limit-mm-per-prompt``,
``--revision``. Underscores in flag names are accepted as vLLM accepts them.
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

__all__ = ["ServerArgs", "parse_server_args", "validate_with_vllm", "vllm_installed"]

#: vLLM's server-argument module: 0.33 moved it (``common``), 0.32 has it under ``launchers``.
CLI_ARGS_MODULES = ("vllm.entrypoints.common.cli_args", "vllm.entrypoints.launchers.cli_args")

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*$")
_DECIMAL = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30}


@dataclasses.dataclass(frozen=True)
class ServerArgs:
    model: str | None
    dtype: str = "auto"
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    kv_cache_memory_bytes: int | None = None
    quantization: str | None = None
    enforce_eager: bool = False
    #: The user's compilation config (from ``--compilation-config``/``-O`` or the YAML), or None.
    compilation_config: dict[str, Any] | None = None
    limit_mm_per_prompt: str | None = None
    revision: str | None = None


def _human_int(raw: str) -> int:
    """vLLM's human-readable integers: ``32768``, ``32k`` (x1000), ``32K`` (x1024), ``1m``/``1M``, ``1.5k``."""
    m = _SIZE.match(raw)
    if not m:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an integer; accepted: e.g. 32768, 32k (x1000) or 32K (x1024)")
    number, unit = m.groups()
    value = float(number) * (_BINARY[unit] if unit in _BINARY else _DECIMAL[unit.lower()])
    if value != int(value):
        raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number")
    return int(value)


def _int(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an integer; accepted: a whole number, e.g. 4") from None


def _float(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number; accepted: e.g. 0.9") from None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # a bad value, or a flag without its value
        raise ConfigError(f"server arguments: {message}")


def _parser() -> _Parser:
    p = _Parser(add_help=False, allow_abbrev=False)
    p.add_argument("--model")
    p.add_argument("--config")
    p.add_argument("--dtype")
    p.add_argument("--tensor-parallel-size", "-tp", type=_int)
    p.add_argument("--pipeline-parallel-size", "-pp", type=_int)
    p.add_argument("--data-parallel-size", "-dp", type=_int)
    p.add_argument("--gpu-memory-utilization", type=_float)
    p.add_argument("--max-model-len", type=_human_int)
    p.add_argument("--max-num-seqs", type=_int)
    p.add_argument("--max-num-batched-tokens", type=_human_int)
    p.add_argument("--block-size", type=_int)
    p.add_argument("--kv-cache-memory-bytes", type=_human_int)
    p.add_argument("--quantization", "-q")
    p.add_argument("--enforce-eager", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--compilation-config", "-O")
    p.add_argument("--limit-mm-per-prompt")
    p.add_argument("--revision")
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
    return ServerArgs(
        model=model or ns.model,
        dtype=ns.dtype or "auto",
        tensor_parallel_size=1 if ns.tensor_parallel_size is None else ns.tensor_parallel_size,
        pipeline_parallel_size=1 if ns.pipeline_parallel_size is None else ns.pipeline_parallel_size,
        data_parallel_size=1 if ns.data_parallel_size is None else ns.data_parallel_size,
        gpu_memory_utilization=ns.gpu_memory_utilization,
        max_model_len=ns.max_model_len,
        max_num_seqs=ns.max_num_seqs,
        max_num_batched_tokens=ns.max_num_batched_tokens,
        block_size=ns.block_size,
        kv_cache_memory_bytes=ns.kv_cache_memory_bytes,
        quantization=ns.quantization,
        enforce_eager=bool(ns.enforce_eager),
        compilation_config=_json_object("--compilation-config", ns.compilation_config),
        limit_mm_per_prompt=ns.limit_mm_per_prompt,
        revision=ns.revision,
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

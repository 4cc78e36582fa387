"""Writes ``vllm_hpu_mm/data/vllm_fork_server_options.json``: the flags each vllm-fork release line's OpenAI server
parser takes, with how many values each takes, how it reads them and its choices, read from the fork's mirror at
every tag the line names (``Release.tags``), so that ``serve`` refuses what that release's own parser refuses (its
argparse exits 2 on an unknown flag, a value outside ``choices`` or one its ``type`` refuses).

The parser is ``make_arg_parser`` (``vllm/entrypoints/openai/cli_args.py``) over ``AsyncEngineArgs.add_cli_args``
(``vllm/engine/arg_utils.py``). Each ``add_argument`` call is read from the source (nothing of the fork is imported):
its option strings, ``nargs``, ``action``, ``type`` and ``choices``; from 1.21.2 most engine flags take their
``**kwargs`` from ``get_kwargs(SomeConfig)``, resolved here as that function does from the field's annotation in
``vllm/config.py`` (``Literal`` -> choices, ``bool`` -> ``--x/--no-x``, ``int``, ``float``, ``dict`` -> JSON, ``list``
-> ``nargs='+'``, ``Optional`` -> ``optional_type``). A type or choice list not resolved is stored as None (not
checked). Tags of one line must agree (checked here).

    PYTHONPATH=. .venv/bin/python benchmarks/agreement/vllm_fork_server_options.py
"""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path
from typing import Any

from vllm_hpu_mm.runtimes.vllm_fork.releases import LINES
from vllm_hpu_mm.runtimes.vllm_fork.server_options import SERVER_OPTIONS_FILE

FORK = Path("/work/.mirror/HabanaAI+vllm-fork/repo")
ENGINE, FRONTEND, CONFIG = "vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py", "vllm/config.py"
_NO_VALUE = {"store_true", "store_false", "store_const", "count", "help", "version"}


def show(tag: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(FORK), "show", f"{tag}:{path}"], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip


def _constants(tree: ast.Module) -> dict[str, ast.expr]:
    return {t.id: node.value for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
            if isinstance(t, ast.Name)}  # fmt: skip


def _fields(tree: ast.Module) -> dict[tuple[str, str], ast.expr]:
    """(class, field) -> annotation, for every class of config.py."""
    return {(c.name, s.target.id): s.annotation for c in tree.body if isinstance(c, ast.ClassDef) for s in c.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}  # fmt: skip


def _hints(node: ast.expr, consts: dict[str, ast.expr], seen: int = 0) -> list[ast.expr]:
    """The flat set of type hints of an annotation (``get_type_hints``: Annotated, Union, Optional unwrapped),
    module aliases resolved."""
    if seen > 8:
        return [node]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _hints(ast.parse(node.value, mode="eval").body, consts, seen + 1)
    if isinstance(node, ast.Name) and node.id in consts and node.id not in ("bool", "int", "float", "str", "dict"):
        return _hints(consts[node.id], consts, seen + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _hints(node.left, consts, seen + 1) + _hints(node.right, consts, seen + 1)
    if isinstance(node, ast.Subscript):
        head = ast.unparse(node.value).split(".")[-1]
        inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Union":
            return [h for e in inner for h in _hints(e, consts, seen + 1)]
        if head == "Optional":
            return [*_hints(inner[0], consts, seen + 1), ast.Constant(None)]
        if head in ("Annotated", "SkipValidation"):
            return _hints(inner[0], consts, seen + 1)
    return [node]


def _head(hint: ast.expr) -> str:
    if isinstance(hint, ast.Constant) and hint.value is None:
        return "None"
    node = hint.value if isinstance(hint, ast.Subscript) else hint
    return ast.unparse(node).split(".")[-1].lower()


def _from_field(annotation: ast.expr, consts: dict[str, ast.expr], name: str, line: str) -> dict[str, Any]:
    """What ``get_kwargs`` gives one field (type kind, choices, nargs, action), statically."""
    hints = _hints(annotation, consts)
    heads = [_head(h) for h in hints]
    optional = "None" in heads
    out: dict[str, Any] = {"kind": None, "choices": None, "nargs": None, "boolean": False}
    if "bool" in heads:
        return out | {"boolean": True, "nargs": 0}
    if "literal" in heads:
        lit = hints[heads.index("literal")]
        assert isinstance(lit, ast.Subscript)
        try:
            values = [ast.literal_eval(consts.get(e.id, e) if isinstance(e, ast.Name) else e)
                      for e in (lit.slice.elts if isinstance(lit.slice, ast.Tuple) else [lit.slice])]  # fmt: skip
        except ValueError:
            return out  # a choice not spelled as a literal: not checked
        kind = "int" if all(isinstance(v, int) for v in values) else None
        choices: list[Any] = sorted(values)
        if optional and line == "0.9.0.1":  # 0.9's get_kwargs appends "None" to an optional field's choices
            choices.append("None")
        out |= {"kind": kind, "choices": choices}
    elif "tuple" in heads or "list" in heads:
        out |= {"nargs": "+"}
    elif "int" in heads:
        big = {"max_model_len"} | ({"max_num_batched_tokens"} if line == "0.9.0.1" else set())
        out |= {"kind": "human_int" if name in big else "int"}
    elif "float" in heads:
        out |= {"kind": "float"}
    elif "dict" in heads and ("str" in heads or any(h not in ("dict", "None") for h in heads)):
        out |= {"kind": None}  # union_dict_and_str: any string
    elif "dict" in heads:
        # 0.8.5: optional_type(json.loads); 0.9: parse_type(json.loads): both fall back to nullable_kvs without {}
        out |= {"kind": "json_or_kvs"}
        optional = optional or line == "0.8.5.post1"
    if optional and out["kind"] is not None:
        out["kind"] = "optional " + out["kind"]
    return out


def _type_kind(node: ast.expr) -> str | None:
    text = ast.unparse(node)
    if text in ("int", "float"):
        return text
    if text == "json.loads":
        return "json"
    if text == "nullable_kvs":
        return "kvs"
    if text == "human_readable_int":
        return "human_int"
    if isinstance(node, ast.Call) and ast.unparse(node.func) in ("optional_type", "parse_type") and node.args:
        inner = ast.unparse(node.args[0])
        kind = {"int": "int", "float": "float", "json.loads": "json_or_kvs"}.get(inner)
        if kind is None:
            return None
        return f"optional {kind}" if ast.unparse(node.func) == "optional_type" else kind
    return None


def options_at(tag: str, line: str) -> list[list[Any]]:
    """Every option of the server parser at ``tag``: [strings, nargs, kind, choices]."""
    config = ast.parse(show(tag, CONFIG))
    config_consts, fields = _constants(config), _fields(config)
    out: list[list[Any]] = []
    for path in (FRONTEND, ENGINE):
        tree = ast.parse(show(tag, path))
        consts = _constants(tree)
        kwargs_of = {t.id: ast.unparse(n.value.args[0]) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                     and isinstance(n.value, ast.Call) and ast.unparse(n.value.func) == "get_kwargs"
                     for t in n.targets if isinstance(t, ast.Name)}  # fmt: skip
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "add_argument"):  # fmt: skip
                continue
            strings = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if not strings or not strings[0].startswith("-"):
                continue  # the positional model of `vllm serve`: added by the reader
            spec: dict[str, Any] = {"kind": None, "choices": None, "nargs": None, "boolean": False}
            for kw in call.keywords:
                if kw.arg is None and isinstance(kw.value, ast.Subscript):  # **cache_kwargs["block_size"]
                    cls = kwargs_of.get(ast.unparse(kw.value.value))
                    field = ast.literal_eval(kw.value.slice)
                    if cls is not None and (cls, field) in fields:
                        spec = _from_field(fields[(cls, field)], config_consts, field, line)
            for kw in call.keywords:
                if kw.arg == "type":
                    spec["kind"] = _type_kind(kw.value)
                elif kw.arg == "choices":
                    node = consts.get(kw.value.id) if isinstance(kw.value, ast.Name) else kw.value
                    try:
                        spec["choices"] = list(ast.literal_eval(node)) if node is not None else None
                    except ValueError:
                        spec["choices"] = None
                elif kw.arg == "nargs":
                    spec["nargs"] = ast.literal_eval(kw.value)
                elif kw.arg == "action":
                    action = ast.unparse(kw.value).strip("'\"").split(".")[-1]
                    if action in _NO_VALUE:
                        spec["nargs"] = 0
                    elif action == "BooleanOptionalAction":
                        spec["boolean"], spec["nargs"] = True, 0
            if spec["boolean"]:
                strings += [f"--no-{s[2:]}" for s in strings if s.startswith("--")]
            if spec["nargs"] == 0:
                spec["kind"] = spec["choices"] = None
            out.append([strings, spec["nargs"], spec["kind"], spec["choices"]])
    return out


def main() -> None:
    out: dict[str, list[list[Any]]] = {}
    for release in LINES:
        found = {tag: options_at(tag, release.spec) for tag in release.tags}
        if len({json.dumps(v, sort_keys=True) for v in found.values()}) != 1:
            raise SystemExit(f"{release.name}: its tags' server options differ")
        out[release.spec] = found[release.tags[0]]
    rows = ",\n".join(
        f"{json.dumps(spec)}: [\n" + ",\n".join(json.dumps(o) for o in options) + "\n]" for spec, options in out.items()
    )
    SERVER_OPTIONS_FILE.write_text("{\n" + rows + "\n}\n")
    print(f"wrote {SERVER_OPTIONS_FILE}")


if __name__ == "__main__":
    main()

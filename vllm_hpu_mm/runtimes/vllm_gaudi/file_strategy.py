"""vllm-gaudi's ``VLLM_BUCKETING_FROM_FILE`` format: read it as vllm-gaudi does, and write one for a bucket set.

The format, as ``vllm_gaudi/extension/bucketing/file_strategy.py`` @ 091bbadd reads it (our own code):

- one entry per line; blank lines and lines starting with ``#`` (after stripping) are skipped;
- ``range(a, b)`` / ``range(a, b, s)`` with integer literals is first replaced by the list it yields (not when
  ``s`` is 0 or the range has more than 10000 elements: then the call stays, and the line is invalid);
- the line must then be a Python literal (``ast.literal_eval``) that is a 3-tuple; each element is a number or a
  list of numbers, and the entry means the Cartesian product, each value passed through ``int()``;
- a bucket whose middle value (query length) is 1 is a decode bucket, every other one a prompt bucket. So a prompt
  bucket with query length 1 cannot be written in a file.

An invalid line is meant to be skipped with a warning, but at 091bbadd the warning call itself fails
(``logger.warning`` on the ``logger()`` function: AttributeError), so any invalid line stops the server at
start-up. :func:`parse_bucket_file` therefore raises :class:`ConfigError` for such a line.

Releases before 7c1fcbde (#1245; v0.17.1 has it as 7bda16f8 #1246) evaluate each line with Python's ``eval``,
only ``range`` in scope (``Release.file_parse == "eval"``): a line it cannot evaluate (a syntax error, an unknown
name, ``range`` given bad arguments), or whose value is not a 3-tuple, is skipped with a print, and ``range(n)``
with any arguments is a range. ``parse_bucket_file(..., evaluate=True)`` reads a line so where it is made of
literals, tuples, lists, ``range(...)`` calls, unary signs and arithmetic on numbers; anything else (comprehensions,
attribute access, ...) raises :class:`ConfigError`, as not modelled.

The buckets read then go through the same filters as generated ones (common.py ``generate_buckets``): prompt
buckets over ``max_model_len`` or ``max_num_batched_tokens`` are dropped, decode buckets need batch <= blocks and
have their blocks capped at ``batch * ceil(max_model_len / block_size)``; a phase left with no bucket fails
the launch; with speculative decoding the decode buckets are expanded again.
"""

from __future__ import annotations

import ast
import functools
import io
import itertools
import operator
import re
from collections.abc import Callable, Iterable
from typing import Any

from vllm_hpu_mm.engine import Bucket
from vllm_hpu_mm.errors import ConfigError

__all__ = ["ACCEPTED_LINE", "FILE_BOUND", "FILE_VAR", "MAX_FILE_BUCKETS", "bucket_file", "clip", "parse_bucket_file"]

FILE_VAR = "VLLM_BUCKETING_FROM_FILE"
ACCEPTED_LINE = "(batch, query_len, ctx_blocks) where each item is an int, a list of ints or range(a, b[, step])"
#: file_strategy.py _MAX_RANGE_ELEMENTS @ 091bbadd
MAX_RANGE_ELEMENTS = 10000
#: Most buckets a file may expand to, all lines together: ours, not vllm-gaudi's. vllm-gaudi bounds each range at
#: MAX_RANGE_ELEMENTS but takes the Cartesian product of a line's three items unbounded (and warms every bucket
#: that passes its filters), so any file it can hold is one it accepts; two full ranges on one line are 10^8
#: buckets, a list it cannot hold in host memory. The plan stores and prices every bucket (whole `memory plan`, on
#: the 2-core dev machine): 102,448 buckets took 9.5 s of CPU and a 116 MB peak; a million passed 2.8 min of CPU and
#: 450 MB unfinished. Twice the first, 200,000 buckets (about 20 s, extrapolated), bounds our time and memory.
MAX_FILE_BUCKETS = 20 * MAX_RANGE_ELEMENTS
#: The bound and its reason as the error line, --help and docs/text-buckets.md state it.
FILE_BOUND = (f"at most {MAX_FILE_BUCKETS:,} buckets in all once ranges are expanded (our bound on the time and "
              f"memory to price them; vllm-gaudi caps each range at {MAX_RANGE_ELEMENTS:,} values, not their "
              "product, and would warm every bucket)")  # fmt: skip
#: Characters of a line an error message echoes.
ECHO_CHARS = 80
_RANGE_CALL = re.compile(r"range\(\s*(-?\d+)\s*,\s*(-?\d+)\s*(?:,\s*(-?\d+)\s*)?\)")


def clip(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` as an error message echoes it: repr'd, cut to about ``limit`` characters with the length said."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"


def _expand(match: re.Match[str]) -> str:
    start, stop = int(match.group(1)), int(match.group(2))
    step = int(match.group(3)) if match.group(3) else 1
    if step == 0 or len(range(start, stop, step)) > MAX_RANGE_ELEMENTS:
        return match.group(0)
    return repr(list(range(start, stop, step)))


def _why_not_literal(line: str) -> str:
    """Why a line is no literal: a range vllm-gaudi leaves unexpanded (step 0, or over MAX_RANGE_ELEMENTS) named."""
    for match in _RANGE_CALL.finditer(line):
        start, stop = int(match.group(1)), int(match.group(2))
        step = int(match.group(3)) if match.group(3) else 1
        if step == 0:
            return f"not a Python literal: {match.group(0)} has step 0, which vllm-gaudi leaves unexpanded"
        if (n := len(range(start, stop, step))) > MAX_RANGE_ELEMENTS:
            return (f"not a Python literal: {match.group(0)} has {n:,} elements, more than the {MAX_RANGE_ELEMENTS:,} "
                    "vllm-gaudi expands (file_strategy.py _MAX_RANGE_ELEMENTS), so it stays a call; split it over "
                    "lines of at most that many")  # fmt: skip
    return "not a Python literal"


#: What vllm-gaudi does with a line that is no literal 3-tuple: file_strategy.py:46-54 means to warn and go on, but
#: calls ``.warning`` on the ``logger`` function (AttributeError), and with an item int() refuses (:61, outside its
#: try). The same file from #1245 (v0.17.1) to 091bbadd; checked by running its reader on such a line.
SKIPS = ("vllm-gaudi v0.17.1 - 091bbadd fails at start-up on such a line: its reader means to skip it with a warning, "
         "but the warning call raises AttributeError (file_strategy.py:49-54)")  # fmt: skip
FAILS = "vllm-gaudi v0.17.1 - 091bbadd fails at start-up on such a line (int() of the item, file_strategy.py:61)"


def _bad(source: str, line_num: int, line: str, why: str, runtime: str = SKIPS) -> ConfigError:
    return ConfigError(f"{source} line {line_num} {clip(line)}: {why}; accepted: {ACCEPTED_LINE} ({runtime})")


class _Skipped(Exception):
    """eval would fail on this line: the release skips it."""


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
    ast.Not: operator.not_,
}


def _value(node: ast.AST, line: str, source: str, line_num: int) -> Any:
    """What ``eval(line, {"__builtins__": None}, {"range": range})`` makes of ``node``, for the modelled subset."""

    def sub(n: ast.AST) -> Any:
        return _value(n, line, source, line_num)

    try:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Tuple | ast.List) and not any(isinstance(e, ast.Starred) for e in node.elts):
            items = [sub(e) for e in node.elts]
            return tuple(items) if isinstance(node, ast.Tuple) else items
        if isinstance(node, ast.Name):
            if node.id == "range":
                return range
            raise _Skipped  # NameError: nothing else is in scope
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](sub(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = sub(node.left), sub(node.right)
            numbers = all(isinstance(v, int | float) for v in (left, right))
            if numbers and not (isinstance(node.op, ast.Pow) and abs(right) > 64):
                return _BINARY[type(node.op)](left, right)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
                and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args)):  # fmt: skip
            return range(*[sub(a) for a in node.args])
    except ConfigError:
        raise
    except (ArithmeticError, TypeError, ValueError):
        raise _Skipped from None
    raise ConfigError(
        f"{source} line {line_num} {clip(line)}: this release evaluates the line with Python eval, and only "
        "literals, tuples, lists, range() and arithmetic on numbers are modelled; accepted: " + ACCEPTED_LINE
    )


def _evaluated(line: str, source: str, line_num: int) -> Any:
    """The line's value as an eval-reading release computes it; raises _Skipped where eval fails."""
    try:
        tree = ast.parse(line, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise _Skipped from None
    return _value(tree.body, line, source, line_num)


def parse_bucket_file(
    text: str, source: str = FILE_VAR, *, evaluate: bool = False
) -> tuple[list[Bucket], list[Bucket]]:
    """(prompt, decode) buckets a bucket file lists, sorted, duplicates kept, before vllm-gaudi's filters.

    ``source`` names the file as the user gave it (``--bucket-file FILE`` or ``VLLM_BUCKETING_FROM_FILE=FILE``);
    every error names it and the line. A negative value is refused: vllm-gaudi's filters bound values from above
    only, so it keeps such a bucket and its warm-up cannot build a batch of that shape. ``evaluate``: read the
    lines as releases before #1245 do (``eval``; lines it fails on, or not 3-tuples, are skipped).
    """
    prompt, decode = _parsed(text, source, evaluate)
    return list(prompt), list(decode)


@functools.lru_cache(maxsize=8)  # pure; every generation and lookup of a plan asks for the same file again
def _parsed(text: str, source: str, evaluate: bool = False) -> tuple[tuple[Bucket, ...], tuple[Bucket, ...]]:
    prompt: list[Bucket] = []
    decode: list[Bucket] = []
    total = 0
    # file iteration splits lines on \\n, \\r and \\r\\n only (str.splitlines would also split on \\f, \\x1c, ...)
    for line_num, raw in enumerate(io.StringIO(text, newline=None), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if evaluate:
            try:
                entry = _evaluated(line, source, line_num)
            except _Skipped:
                continue
            if not isinstance(entry, tuple) or len(entry) != 3:
                continue  # printed and skipped
        else:
            try:
                entry = ast.literal_eval(_RANGE_CALL.sub(_expand, line))
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                raise _bad(source, line_num, line, _why_not_literal(line)) from None
            if not isinstance(entry, tuple) or len(entry) != 3:
                raise _bad(source, line_num, line, "not a 3-tuple")
        axes = [item if isinstance(item, list | range) else [item] for item in entry]
        try:
            total += len(axes[0]) * len(axes[1]) * len(axes[2])
        except OverflowError:  # an evaluated range(...) longer than an index holds
            raise ConfigError(f"{source} line {line_num} {clip(line)}: a range longer than any index; accepted: "
                              f"{FILE_BOUND}") from None  # fmt: skip
        if total > MAX_FILE_BUCKETS:
            raise ConfigError(
                f"{source} line {line_num} {clip(line)}: the file expands to more than {MAX_FILE_BUCKETS:,} buckets "
                f"({total:,} by this line; each item of a line multiplies the others); accepted: {FILE_BOUND}"
            )
        for values in itertools.product(*axes):
            try:
                b, q, c = (int(v) for v in values)
            except (TypeError, ValueError, OverflowError):
                raise _bad(source, line_num, line, f"{clip(repr(values))} is not three integers", FAILS) from None
            if min(b, q, c) < 0:
                raise ConfigError(
                    f"{source} line {line_num} {clip(line)}: bucket {(b, q, c)} has a negative value; accepted: "
                    "batch, query_len and ctx_blocks >= 0 (vllm-gaudi's filters bound values from above only: it "
                    "keeps the bucket, and its warm-up cannot build a batch of that shape)"
                )
            (decode if q == 1 else prompt).append((b, q, c))
    return tuple(sorted(prompt)), tuple(sorted(decode))


def _lines(buckets: list[Bucket]) -> list[str]:
    # one line per (batch, query) with its context blocks as a list: short, and read back as the same product
    grouped: dict[tuple[int, int], list[int]] = {}
    for b, q, c in sorted(set(buckets)):
        grouped.setdefault((b, q), []).append(c)
    return [f"({b}, {q}, {ctx[0] if len(ctx) == 1 else ctx})" for (b, q), ctx in grouped.items()]


def bucket_file(prompt: Iterable[Bucket], decode: Iterable[Bucket]) -> str:
    """Content of a VLLM_BUCKETING_FROM_FILE file that makes vllm-gaudi (every release that reads one) warm exactly
    these buckets.

    Pass buckets that already satisfy vllm-gaudi's filters (e.g. from :func:`prompt_buckets` /
    :func:`decode_buckets`), or it drops the others. With speculative decoding pass the seed decode buckets: it
    expands the file's decode buckets again. Raises :class:`ConfigError` for what a file cannot express: a prompt
    bucket with query length 1, a decode bucket with another query length, negative values, an empty phase
    (vllm-gaudi fails on a phase with no bucket).
    """
    p = [(int(b), int(q), int(c)) for b, q, c in prompt]
    d = [(int(b), int(q), int(c)) for b, q, c in decode]
    for phase, items in (("prompt", p), ("decode", d)):
        if not items:
            raise ConfigError(f"bucket_file: no {phase} bucket; vllm-gaudi fails on a file with none")
        for b, q, c in items:
            if min(b, q, c) < 0 or b < 1:
                raise ConfigError(f"bucket_file: {phase} bucket {(b, q, c)} is invalid; accepted: batch >= 1, >= 0")
            if (q == 1) != (phase == "decode"):
                raise ConfigError(
                    f"bucket_file: {phase} bucket {(b, q, c)} cannot be written: the file format makes every "
                    "bucket with query length 1 a decode bucket and every other one a prompt bucket"
                )
    header = [
        "# vllm-gaudi bucket file (VLLM_BUCKETING_FROM_FILE), written by vllm-hpu-mm",
        "# format of vllm_gaudi/extension/bucketing/file_strategy.py (v0.17.1 - 091bbadd, unchanged since #1245;",
        "# earlier releases eval the same lines): (batch, query_len, ctx_blocks),",
        "# lists mean the Cartesian product; query_len 1 = decode",
        f"# {len(set(p))} prompt + {len(set(d))} decode buckets",
    ]
    return "\n".join([*header, "# prompt", *_lines(p), "# decode", *_lines(d)]) + "\n"

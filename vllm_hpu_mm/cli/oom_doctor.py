"""``vllm-hpu-mm oom-doctor LOG``: find the out-of-memory failure in a vLLM server log, say at which stage it
happened, quote the evidence and recommend settings. Exit 1 when an OOM is found, 0 when none, 2 when the log
cannot be read."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.common import ExitCode, fail, print_json
from vllm_hpu_mm.memory.doctor import diagnose


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("oom-doctor", help="diagnose an out-of-memory failure in a vLLM log",
                              description=__doc__)  # fmt: skip
    p.add_argument("log", help="path of the server log, or - for standard input")
    p.add_argument("--json", action="store_true", help="print one JSON object: stage, evidence, recommendations")
    p.add_argument(
        "--model",
        default=None,
        help="model to re-plan with when the log shows the memory split (default: the log's, else 7B)",
    )
    p.set_defaults(func=run)


def read_lines(path: str) -> list[str] | str:
    """The log's lines, or an error message."""
    try:
        raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        return f"cannot read log {path!r}: {exc.strerror or exc}"
    if b"\x00" in raw[:4096]:
        return f"log {path!r} looks binary, not a text log"
    return raw.decode("utf-8", errors="replace").splitlines()


def run(args: argparse.Namespace) -> int:
    lines = read_lines(args.log)
    if isinstance(lines, str):
        return fail(lines)
    d = diagnose(lines, envs.load(), args.model)
    if args.json:
        print_json({
            "stage": d.stage,
            "oom": d.oom,
            "evidence": [{"line": e.line, "text": e.text} for e in d.evidence],
            "recommendations": list(d.recommendations),
            "gaudi_memory": None if d.gaudi_memory is None else vars(d.gaudi_memory),
            "warmup": None if d.warmup is None else {"kind": d.warmup[0], "index": d.warmup[1], "total": d.warmup[2]},
            "model": d.model,
        })  # fmt: skip
    else:
        print(f"stage: {d.stage}")
        for e in d.evidence:
            print(f"  {args.log}:{e.line}: {e.text}")
        for r in d.recommendations:
            print(f"- {r}")
    return int(ExitCode.NEGATIVE if d.oom else ExitCode.OK)

"""'vllm-hpu-mm oom-doctor LOG': find the out-of-memory failure in a vLLM server log, say at which stage it
happened and how sure that is, quote the evidence and recommend settings that the log's writer reads (vllm-gaudi,
vllm-fork, vLLM on CUDA, ROCm, CPU or another accelerator, TGI, optimum-habana).
The log is streamed (any size), decoded by its byte-order mark (UTF-8 or UTF-16) and stripped of colour codes.
Exit 1 when a failure is found, 0 when none, 2 when the log cannot be read, is empty or --model is unknown."""

from __future__ import annotations

import argparse
from typing import Any

from vllm_hpu_mm import envs
from vllm_hpu_mm.cli.common import ExitCode, print_json
from vllm_hpu_mm.jobs.doctor import diagnose_log
from vllm_hpu_mm.logs.doctor import Diagnosis
from vllm_hpu_mm.logs.numbers import skipped_json


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("oom-doctor", help="diagnose an out-of-memory failure in a vLLM log",
                              description=__doc__)  # fmt: skip
    p.add_argument("log", help="path of the server log, or - for standard input")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: stage, confidence, basis, memory, source (framework, whether the log named it, "
        "another framework's or the host's name, accelerator, runtime, written_by: the writer in words), "
        "evidence, recommendations, settings, run, runs, skipped (default: a text report)",
    )
    p.add_argument(
        "--model",
        default=None,
        help="model to re-plan with when the log shows the memory split: a catalog name or a local model folder "
        "(default: the log's model, else Qwen2.5-VL-7B)",
    )
    p.set_defaults(func=run)


def as_json(d: Diagnosis) -> dict[str, Any]:
    return {
        "stage": d.stage,
        "oom": d.oom,
        "unknown": d.stage == "unknown",
        "confidence": d.confidence,
        "basis": d.basis,
        "cut": d.cut,
        "memory": d.memory,
        "runtime": d.backend,
        "source": d.source.as_json(),
        "evidence": [{"line": e.line, "text": e.text} for e in d.evidence],
        "recommendations": list(d.recommendations),
        "settings": dict(d.settings),
        "run": d.run,
        "runs": d.runs,
        "gaudi_memory": None if d.gaudi_memory is None else vars(d.gaudi_memory),
        "warmup": None if d.warmup is None else {"kind": d.warmup[0], "index": d.warmup[1], "total": d.warmup[2]},
        "model": d.model,
        "skipped": skipped_json(d.skipped),
    }


_BASIS = {
    "kv_refusal": "vLLM's own KV-cache message",
    "traceback": "the traceback's frames",
    "message": "the error message, which names its phase",
    "phase": "the last phase the log reached before the error",
    "learned": "frame names voted on by labelled logs (the phase table knows none of them)",
    "repeated": "the same process failing again and again (it survived its failures, so it was serving)",
    "cut": "a traceback the log stops inside, before its error line, in frames of this phase",
    "stopped": "the log stopping partway through a phase with no error line, traceback or kill: no out-of-memory "
    "failure shown",
    "undecided": "a traceback the log stops inside, before its error line, in frames that say nothing of memory",
    "unknown": "nothing in the log says when it happened",
    "error": "an error of another kind than memory, stated in the log (its traceback ends there, or is cut)",
    "none": "no out-of-memory line and no cut-off phase",
}


def run(args: argparse.Namespace) -> int:
    d = diagnose_log(args.log, envs.load(), args.model)
    if args.json:
        print_json(as_json(d))
    else:
        where = f" ({d.memory} memory)" if d.memory else ""
        run = f" (run {d.run} of {d.runs})"  # of a log of one start too, as --json gives run and runs
        print(f"stage: {d.stage}{where}{run}, confidence {d.confidence:.2f}: from {_BASIS[d.basis]}")
        # whatever the stage: a log with no out-of-memory failure still says whose error it is
        print(f"written by: {d.source.describe}{' (a vision model)' if d.source.multimodal else ''}")
        for e in d.evidence:
            print(f"  {args.log}:{e.line}: {e.text}")
        for r in d.recommendations:
            print(f"- {r}")
        for line in d.skipped.summary(args.log):
            print(line)
    return int(ExitCode.NEGATIVE if d.oom else ExitCode.OK)

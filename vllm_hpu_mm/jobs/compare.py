"""The ``memory compare`` job as one library function, :func:`compare_log`: a started server's log against the plan
for the flags it was started with, on the device the planning commands default to."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.jobs.serve import on_default_device
from vllm_hpu_mm.logs.compare import COMPARED, Comparison, check_writer, compare, run_inputs
from vllm_hpu_mm.logs.doctor.source import SOURCE_LINES, SourceSniffer, platform_neutral
from vllm_hpu_mm.logs.reading import log_lines
from vllm_hpu_mm.logs.reproduce import read_log
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.inputs import build

__all__ = ["compare_log"]


def compare_log(log: str, sizing: SizingArgs, settings: Settings, runtime_env: Mapping[str, str]) -> Comparison:
    """``log`` (a path, or ``-`` for standard input; streamed) against the plan for ``sizing``; a log another
    runtime wrote is refused (:func:`~vllm_hpu_mm.logs.compare.check_writer`). The flags are checked first; then the
    log's writer is read from its first lines, so that every refusal of the log or the plan names both runtimes."""
    sizing = on_default_device(sizing)
    planned = build(sizing, settings, runtime_env)
    lines = iter(log_lines(log, COMPARED))
    head = list(itertools.islice(lines, SOURCE_LINES))  # what the writer is read from: the first lines only
    sniffer = SourceSniffer()
    for line in head:
        sniffer.feed(platform_neutral(line))  # r15logs 18: a stats line's "GPU" was read as a CUDA log
    writer = sniffer.result()
    inputs = run_inputs(planned, sizing.flag, writer=writer, source=log)
    check_writer(writer, inputs.runtime.name, sizing.flag, source=log)
    return compare(read_log(itertools.chain(head, lines)), inputs, sizing.flag, source=log, writer=writer)

"""The ``memory compare`` job as one library function, :func:`compare_log`: a started server's log against the plan
for the flags it was started with, on the device the planning commands default to."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.jobs.serve import on_default_device
from vllm_hpu_mm.logs.compare import Comparison, check_writer, compare, run_inputs
from vllm_hpu_mm.logs.doctor.source import SourceSniffer
from vllm_hpu_mm.logs.reading import log_lines
from vllm_hpu_mm.logs.reproduce import read_log
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.inputs import build

__all__ = ["compare_log"]


def compare_log(log: str, sizing: SizingArgs, settings: Settings, runtime_env: Mapping[str, str]) -> Comparison:
    """``log`` (a path, or ``-`` for standard input; streamed) against the plan for ``sizing``; a log another
    runtime wrote is refused (:func:`~vllm_hpu_mm.logs.compare.check_writer`)."""
    sizing = on_default_device(sizing)
    inputs = run_inputs(build(sizing, settings, runtime_env), sizing.flag)
    sniffer = SourceSniffer()

    def sniffed(lines: Iterable[str]) -> Iterator[str]:
        for line in lines:
            sniffer.feed(line)  # bounded: it reads the first lines only
            yield line

    logged = read_log(sniffed(log_lines(log)))
    check_writer(sniffer.result(), inputs.runtime.name, sizing.flag, source=log)
    return compare(logged, inputs, sizing.flag, source=log)

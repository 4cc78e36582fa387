"""The real server logs the OOM doctor is scored on: each file starts with a citation header (``# ...`` lines) that
names its source and the stage a person read in it (``Expected stage: ...``)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from benchmarks.common import Example
from tests.support.data import LOGS
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose
from vllm_hpu_mm.logs.doctor.decide import Rules, default_rules
from vllm_hpu_mm.logs.doctor.scan import scan

#: The development set (the first logs and the runtime-labelled ones of runtime_dev/), and the held-out set kept aside
#: while the rules were tuned.
RUNTIME_DEV_LOGS = sorted((LOGS / "runtime_dev").glob("*.log"))
DEVELOPMENT_LOGS = sorted(LOGS.glob("*.log")) + RUNTIME_DEV_LOGS
HELDOUT_LOGS = sorted((LOGS / "heldout").glob("*.log"))
#: New public logs labelled with their writer (framework and runtime) as well as the stage, for the advice: scored
#: only, never fitted on or tuned against.
RUNTIME_HELDOUT_LOGS = sorted((LOGS / "runtime_heldout").glob("*.log"))
#: Round 4 (issue 34): public logs labelled and committed before the round-4 doctor scored them; scored only.
HELDOUT_ROUND4_LOGS = sorted((LOGS / "heldout_round4").glob("*.log"))
#: Round 5 (issue 34): public logs of vLLM V1 (CUDA, ROCm, TPU, CPU), TGI, TGI-Gaudi, SGLang, llama.cpp and Ollama,
#: labelled with stage and writer and committed before the doctor ran on them; scored only.
HELDOUT_ROUND5_LOGS = sorted((LOGS / "heldout_round5").glob("*.log"))


def _round_number(folder: Path) -> int:
    return int(folder.name.removeprefix("heldout_round"))


#: Rounds 6 on (issue 34): each round's public logs, collected by a method fixed before searching and committed before
#: the doctor that scored it was merged (SOURCES.md says each round's method, collector and labels); scored once as
#: it came (benchmarks/fits/results/doctor_heldout_round<N>.md), development data since. A new round's folder is
#: found here by its name.
LATER_ROUNDS = {f"round{_round_number(d)}": sorted(d.glob("*.log"))
                for d in sorted(LOGS.glob("heldout_round*"), key=_round_number) if _round_number(d) >= 6}  # fmt: skip
#: Every held-out round, by name, in the order they were collected.
HELDOUT_ROUNDS = {"heldout": HELDOUT_LOGS, "runtime_heldout": RUNTIME_HELDOUT_LOGS, "round4": HELDOUT_ROUND4_LOGS,
                  "round5": HELDOUT_ROUND5_LOGS, **LATER_ROUNDS}  # fmt: skip
#: The doctor's target share of right stages, on any set of real logs.
TARGET_ACCURACY = 0.92


def expected_stage(path: Path) -> str:
    header = "".join(line for line in path.read_text().splitlines(keepends=True) if line.startswith("# "))
    m = re.search(r"Expected stage: (\w+)", header)
    assert m, f"{path.name} has no 'Expected stage:' in its header"
    return m.group(1)


@dataclasses.dataclass(frozen=True)
class WriterLabel:
    """Who wrote a log and what the advice must respect, as read when the log was stored."""

    writer: str
    vision: bool
    host: bool
    others: bool


def writer_label(path: Path) -> WriterLabel | None:
    """The log's ``Expected writer:`` (and vision, memory, other processes) label, or None without one."""
    header = " ".join(line[2:] for line in path.read_text().splitlines() if line.startswith("# "))
    m = re.search(r"Expected writer: ([\w-]+(?:\.[a-z]+)?)", header)  # llama.cpp, not the sentence's full stop
    if m is None:
        return None
    vision = re.search(r"Expected vision: (yes|no)", header)
    return WriterLabel(m.group(1), bool(vision and vision.group(1) == "yes"), "Expected memory: host" in header,
                       "Expected others: yes" in header)  # fmt: skip


def body_lines(path: Path) -> list[str]:
    """The log without its citation header (blanked, so line numbers stay those of the file)."""
    lines = path.read_text().splitlines()
    header = next(k for k, line in enumerate(lines) if not line.startswith("# "))
    return [""] * header + lines[header:]


def examples(paths: list[Path]) -> list[Example]:
    """The labelled examples the doctor's rules are fitted and scored on: (name, features, expected stage)."""
    return [(p.name, scan(body_lines(p)), expected_stage(p)) for p in paths]


#: A vllm-gaudi vision warm-up failure with the memory split, as its lines look (a composed excerpt).
GAUDI_LOG = [
    "INFO habana_worker.py] Free device memory: 72.5 GiB, 66.7 GiB usable (gpu_memory_utilization=0.92), "
    "6.67 GiB reserved for HPUGraphs (VLLM_GRAPH_RESERVED_MEM=0.1), 60.03 GiB reserved for KV cache",
    "INFO hpu_model_runner.py] [Warmup][Graph/Multimodal][1/7] batch_size:1 img_size:1600",
    "INFO hpu_model_runner.py] [Warmup][Graph/Multimodal][2/7] batch_size:1 img_size:3136",
    "INFO hpu_model_runner.py] [Warmup][Graph/Multimodal][3/7] batch_size:1 img_size:4096",
    "Traceback (most recent call last):",
    '  File "vllm_gaudi/v1/worker/hpu_model_runner.py", line 4000, in warmup_model',
    "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::786432000 (750)MB",
]


def cut_read_as_phase() -> Rules:
    """The shipped rules with the undecided cut held off (``Rules.cut_evidence``): a traceback the log stops inside
    is read as its frames' phase, which tests of what frames mean need (the shipped doctor leaves such a cut
    ``unknown`` with no out-of-memory claim)."""
    return dataclasses.replace(default_rules(), cut_evidence=False)


def verdict(lines: list[str]) -> tuple[str, str]:
    """The doctor's stage and the basis it gave for ``lines``, with no settings of the user's (what the stage tests
    that pin a class on composed lines compare)."""
    d = diagnose(lines, load({}))
    return d.stage, d.basis

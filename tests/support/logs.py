"""The real server logs the OOM doctor is scored on: each file starts with a citation header (``# ...`` lines) that
names its source and the stage a person read in it (``Expected stage: ...``)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from benchmarks.common import Example
from tests.support.data import LOGS
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
#: Round 6 (issue 34): public logs of vLLM (CUDA, CPU, Ascend NPU), the Gaudi fork, TGI-Gaudi, optimum-habana,
#: SGLang, TensorRT-LLM, llama.cpp, Ollama and ms-swift, labelled from their threads and committed before the doctor
#: ran on them; scored only.
HELDOUT_ROUND6_LOGS = sorted((LOGS / "heldout_round6").glob("*.log"))
#: Round 7 (issue 34): public logs of vLLM (CUDA, ROCm, CPU, Ascend NPU), the Gaudi fork, SGLang, TGI, TensorRT-LLM,
#: LMDeploy, llama.cpp and Ollama, labelled from their threads by a query method fixed before searching and committed
#: before the doctor ran on them; scored only.
HELDOUT_ROUND7_LOGS = sorted((LOGS / "heldout_round7").glob("*.log"))
#: Round 8 (issue 34): public logs of vLLM (CUDA, ROCm, TPU, Ascend NPU), the Gaudi fork, optimum-habana, TGI, SGLang,
#: LMDeploy and text-generation-webui, each excerpt holding the lines that decide its label, committed before the
#: doctor ran on them; scored only.
HELDOUT_ROUND8_LOGS = sorted((LOGS / "heldout_round8").glob("*.log"))
#: Round 9 (issue 34): public logs of vLLM (CUDA, TPU, CPU, OpenVINO), the Gaudi fork, Ollama, llama.cpp, SGLang,
#: LMDeploy, TensorRT-LLM and Xinference, collected as round 8 was and committed before the doctor ran on them.
HELDOUT_ROUND9_LOGS = sorted((LOGS / "heldout_round9").glob("*.log"))
#: Round 10 (issue 34): collected as rounds 8 and 9 were, committed before the doctor ran on them.
HELDOUT_ROUND10_LOGS = sorted((LOGS / "heldout_round10").glob("*.log"))
#: Round 11 (issue 34): collected as rounds 8-10 were, committed before the doctor ran on them.
HELDOUT_ROUND11_LOGS = sorted((LOGS / "heldout_round11").glob("*.log"))
#: Round 12 (issue 34): collected beside round 11 by a second helper, committed before the doctor ran on them.
HELDOUT_ROUND12_LOGS = sorted((LOGS / "heldout_round12").glob("*.log"))
#: Round 13 (issue 34): collected after rounds 11 and 12 by a third helper, committed before the doctor ran on them.
HELDOUT_ROUND13_LOGS = sorted((LOGS / "heldout_round13").glob("*.log"))
#: Round 14 (issue 34): collected as rounds 11-13 were, committed before the doctor ran on them.
HELDOUT_ROUND14_LOGS = sorted((LOGS / "heldout_round14").glob("*.log"))
#: Round 15 (issue 34): collected as rounds 11-13 were, committed before the doctor ran on them.
HELDOUT_ROUND15_LOGS = sorted((LOGS / "heldout_round15").glob("*.log"))
#: Round 16 (issue 34): collected as rounds 11-13 were, committed before the doctor ran on them.
HELDOUT_ROUND16_LOGS = sorted((LOGS / "heldout_round16").glob("*.log"))
#: Round 17 (issue 34): collected as rounds 11-13 were, committed before the doctor ran on them.
HELDOUT_ROUND17_LOGS = sorted((LOGS / "heldout_round17").glob("*.log"))
#: Round 18 (issue 34): collected as rounds 11-13 were, committed before the doctor ran on them.
HELDOUT_ROUND18_LOGS = sorted((LOGS / "heldout_round18").glob("*.log"))
#: Round 19 (issue 34): collected as rounds 11-13 were, committed before the doctor ran on them.
HELDOUT_ROUND19_LOGS = sorted((LOGS / "heldout_round19").glob("*.log"))
#: Round 20 (issue 34): collected as rounds 11-13 were, committed before the doctor ran on them.
HELDOUT_ROUND20_LOGS = sorted((LOGS / "heldout_round20").glob("*.log"))
#: Round 21 (issue 34): collected as rounds 11-13 were, committed before the doctor ran on them.
HELDOUT_ROUND21_LOGS = sorted((LOGS / "heldout_round21").glob("*.log"))
#: Every held-out round, by name, in the order they were collected.
HELDOUT_ROUNDS = {"heldout": HELDOUT_LOGS, "runtime_heldout": RUNTIME_HELDOUT_LOGS, "round4": HELDOUT_ROUND4_LOGS,
                  "round5": HELDOUT_ROUND5_LOGS, "round6": HELDOUT_ROUND6_LOGS,
                  "round7": HELDOUT_ROUND7_LOGS, "round8": HELDOUT_ROUND8_LOGS,
                  "round9": HELDOUT_ROUND9_LOGS, "round10": HELDOUT_ROUND10_LOGS,
                  "round11": HELDOUT_ROUND11_LOGS,
                  "round12": HELDOUT_ROUND12_LOGS,
                  "round13": HELDOUT_ROUND13_LOGS,
                  "round14": HELDOUT_ROUND14_LOGS,
                  "round15": HELDOUT_ROUND15_LOGS,
                  "round16": HELDOUT_ROUND16_LOGS,
                  "round17": HELDOUT_ROUND17_LOGS,
                  "round18": HELDOUT_ROUND18_LOGS,
                  "round19": HELDOUT_ROUND19_LOGS,
                  "round20": HELDOUT_ROUND20_LOGS,
                  "round21": HELDOUT_ROUND21_LOGS}  # fmt: skip
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

"""A traceback the log stops inside, before its error line (issue 34 item 10): read as its frames' phase where the
frames are where out-of-memory failures happen, left ``unknown`` with no out-of-memory claim where they say nothing
of memory (:func:`vllm_hpu_mm.logs.doctor.decide.silent_cut`). Lines composed after TGI's and vLLM's sources and the
public logs under tests/data/logs (heldout/vllm_fork_484_gaudi2_not_oom.log,
heldout_round5/tgi_883_decode_error_cut.log, heldout_round4/tgi_1769_warmup_oom.log)."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.common import UNDECIDED, false_alarm, stage_said
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose, diagnose_lines
from vllm_hpu_mm.logs.doctor.decide import default_rules, judge
from vllm_hpu_mm.logs.doctor.scan import scan

TGI = "2024-03-02T10:11:12.000000Z ERROR text_generation_launcher: Method {} encountered an error."
#: The shard's command-line entry (typer/click): every RPC's traceback starts here.
CLI = ['  File "/opt/conda/bin/text-generation-server", line 8, in <module>', "    sys.exit(app())",
       '  File "/opt/conda/lib/python3.10/site-packages/typer/main.py", line 311, in __call__',
       "    return get_command(self)(*args, **kwargs)"]  # fmt: skip


def _tgi(method: str, *frames: str) -> list[str]:
    return [TGI.format(method), "Traceback (most recent call last):", *CLI, *frames]


def test_a_relayed_serving_error_cut_in_the_command_line_claims_no_oom() -> None:
    d = diagnose(_tgi("Decode"), load({}))
    assert (d.stage, d.basis, d.cut) == ("unknown", "undecided", "traceback")
    assert not d.oom
    text = "\n".join(d.recommendations)
    assert "nothing says it was out of memory" in text
    assert "MAX_BATCH" not in text  # no memory knob
    assert "dmesg" not in text  # no OOM-killer advice


def test_tgis_warm_up_cut_in_the_command_line_is_still_its_memory_probe() -> None:
    # flash_causal_lm.warmup runs the largest prefill to measure memory: its failures are allocations
    d = diagnose_lines(_tgi("Warmup"))
    assert (d.stage, d.basis) == ("startup", "cut")
    assert d.oom


def test_a_cut_that_reaches_the_shards_own_serving_code_keeps_its_phase() -> None:
    frames = ('  File "/opt/conda/lib/python3.10/site-packages/text_generation_server/server.py", line 85, in Decode',
              "    generations, next_batch = self.model.generate_token(batch)")  # fmt: skip
    assert diagnose_lines(_tgi("Decode", *frames)).stage == "runtime"


HPU = "[rank0]: "
LOAD = [HPU + '  File "/opt/vllm-fork/vllm/executor/hpu_executor.py", line 76, in _init_worker',
        HPU + "    self.driver_worker.load_model()",
        HPU + '  File "/opt/vllm-fork/vllm/worker/hpu_worker.py", line 128, in load_model',
        HPU + "    self.model_runner.load_model()",
        HPU + '  File "/opt/vllm-fork/vllm/worker/hpu_model_runner.py", line 654, in load_model',
        HPU + "    self.model = get_model(vllm_config=self.vllm_config)"]  # fmt: skip


def test_gaudi_weight_loading_cut_before_its_error_is_undecided() -> None:
    # lazy mode compiles the loading's device ops into graphs: a compile failure stops here as often as memory
    d = diagnose_lines(LOAD)
    assert d.backend == "hpu"
    assert (d.stage, d.basis) == ("unknown", "undecided")


def test_the_same_cut_on_cuda_is_read_as_loading() -> None:
    cuda = [line.replace("hpu_", "gpu_") for line in LOAD]
    d = diagnose_lines(cuda)
    assert d.backend != "hpu"
    assert (d.stage, d.basis) == ("startup", "cut")


def test_gaudi_warm_up_cut_keeps_its_phase() -> None:
    path = "/opt/vllm-gaudi/vllm_gaudi/v1/worker/hpu_worker.py"
    lines = [f'  File "{path}", line 292, in initialize_from_config',
             "    self.compile_or_warm_up_model()",
             f'  File "{path}", line 298, in compile_or_warm_up_model',
             "    self.model_runner.warmup_model()"]  # fmt: skip
    d = diagnose_lines(lines)
    assert (d.stage, d.basis) == ("graph_capture", "cut")


def test_an_error_line_after_the_frames_decides_whatever_the_cut_rule() -> None:
    oom = "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::4096"
    d = diagnose_lines([*LOAD, oom])
    assert (d.stage, d.basis) == ("startup", "traceback")


@pytest.mark.parametrize("evidence", [True, False])
def test_the_rule_can_be_switched_off_and_is_scored_as_no_claim(evidence: bool) -> None:
    rules = dataclasses.replace(default_rules(), cut_evidence=evidence)
    features = scan(_tgi("Decode"))
    said = stage_said(features, judge(features, rules))
    assert said == (UNDECIDED if evidence else "runtime")
    assert false_alarm(said, "none") is not evidence

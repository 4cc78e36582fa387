"""A traceback the log stops inside, before its error line (issue 34 item 10): read as its frames' phase where the
frames are where out-of-memory failures happen, left ``unknown`` with no out-of-memory claim where they say nothing
of memory (:func:`vllm_hpu_mm.logs.doctor.decide.silent_cut`). Lines composed after TGI's and vLLM's sources and the
public logs under tests/data/logs (heldout/vllm_fork_484_gaudi2_not_oom.log,
heldout_round5/tgi_883_decode_error_cut.log, heldout_round4/tgi_1769_warmup_oom.log)."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.common import UNDECIDED, false_alarm, stage_said
from tests.support.logs import cut_read_as_phase
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


def test_a_memory_probing_phase_cut_claims_no_oom_either() -> None:
    # flash_causal_lm.warmup runs the largest prefill to measure memory, but a cut there is as often a kernel or
    # compile error (the frames say where, not which): read as its phase only with the cut rule held off. That phase
    # is the warm-up's since stop 50's blind relabels (until then start-up's: test_doctor_relabel50.py)
    d = diagnose_lines(_tgi("Warmup"))
    assert (d.stage, d.basis) == ("unknown", "undecided")
    d = diagnose_lines(_tgi("Warmup"), cut_read_as_phase())
    assert (d.stage, d.basis) == ("graph_capture", "cut")


def test_a_cut_that_reaches_the_shards_own_serving_code_names_its_phase_without_a_claim() -> None:
    frames = ('  File "/opt/conda/lib/python3.10/site-packages/text_generation_server/server.py", line 85, in Decode',
              "    generations, next_batch = self.model.generate_token(batch)")  # fmt: skip
    assert diagnose_lines(_tgi("Decode", *frames)).basis == "undecided"
    assert diagnose_lines(_tgi("Decode", *frames), cut_read_as_phase()).stage == "runtime"


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


def test_the_same_cut_on_cuda_is_undecided_too() -> None:
    cuda = [line.replace("hpu_", "gpu_") for line in LOAD]
    d = diagnose_lines(cuda)
    assert d.backend != "hpu"
    assert (d.stage, d.basis) == ("unknown", "undecided")
    assert diagnose_lines(cuda, cut_read_as_phase()).stage == "startup"


def test_gaudi_warm_up_cut_names_its_phase_only_with_the_cut_rule_off() -> None:
    path = "/opt/vllm-gaudi/vllm_gaudi/v1/worker/hpu_worker.py"
    lines = [f'  File "{path}", line 292, in initialize_from_config',
             "    self.compile_or_warm_up_model()",
             f'  File "{path}", line 298, in compile_or_warm_up_model',
             "    self.model_runner.warmup_model()"]  # fmt: skip
    assert diagnose_lines(lines).basis == "undecided"
    d = diagnose_lines(lines, cut_read_as_phase())
    assert (d.stage, d.basis) == ("graph_capture", "cut")


def test_a_cut_through_the_kv_caches_own_check_is_its_refusal() -> None:
    # vLLM V1's check_enough_kv_cache_memory raises nothing but the KV cache's refusal: the cut says what it was
    path = "/usr/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py"
    lines = [f'  File "{path}", line 600, in get_kv_cache_config', "    check_enough_kv_cache_memory(x)",
             f'  File "{path}", line 540, in check_enough_kv_cache_memory', "    raise ValueError("]  # fmt: skip
    d = diagnose_lines(lines)
    assert (d.stage, d.basis) == ("kv_cache", "cut")
    assert d.oom


def test_ipex_llms_init_device_cut_after_a_collectives_broken_pipe_is_no_alarm() -> None:
    # heldout_round10/ipex_llm_12081: oneCCL's broken pipe, then the worker's init_device traceback, cut; read as a
    # start-up out-of-memory failure it was round 10's false alarm
    tag = "(WrapperWithLoadBit pid=35347) "
    path = "/usr/local/lib/python3.11/dist-packages/vllm/worker/xpu_worker.py"
    lines = [tag + "|CCL_ERROR| exchange_utils.cpp:202 sendmsg_fd: condition failed", tag + " errno: Broken pipe",
             tag + "ERROR 09-13 11:21:50 worker_base.py:386] Error executing method init_device.",
             tag + "ERROR 09-13 11:21:50 worker_base.py:386] Traceback (most recent call last):",
             tag + f'ERROR 09-13 11:21:50 worker_base.py:386]   File "{path}", line 96, in init_device',
             tag + "ERROR 09-13 11:21:50 worker_base.py:386]     self.init_worker_distributed_environment()",
             ]  # fmt: skip
    d = diagnose_lines(lines)
    assert not false_alarm(stage_said(scan(lines), judge(scan(lines), default_rules())), "none")
    assert not d.oom


def test_an_error_line_after_the_frames_decides_whatever_the_cut_rule() -> None:
    oom = "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::4096"
    d = diagnose_lines([*LOAD, oom])
    assert (d.stage, d.basis) == ("startup", "traceback")


def test_a_relayed_traceback_its_exception_line_of_another_kind_closes_is_no_oom_on_that_error() -> None:
    relay = "2024-02-21T05:55:25.318335Z DEBUG text_generation_launcher: "
    frames = ['  File "/usr/local/lib/python3.10/dist-packages/text_generation_server/models/causal_lm.py", line 704, '
              "in generate_token", "    batch.input_ids[:, :token_idx], logits.squeeze(-2)",
              "RuntimeError: Graph compile failed. synStatus=synStatus 26 [Generice failure]."]  # fmt: skip
    for header in ([], ["Traceback (most recent call last):"]):
        d = diagnose([relay + line for line in [*header, *frames]], load({}))
        assert (d.stage, d.basis, d.oom) == ("none", "error", False)
        assert [e.line for e in d.evidence] == [len(header) + 3]
        advice = "\n".join(d.recommendations)
        assert "(line 4: RuntimeError: Graph compile failed." in advice or "(line 3: RuntimeError" in advice
        assert "text_generation_launcher" not in advice  # the relay's prefix read off


@pytest.mark.parametrize("evidence", [True, False])
def test_the_rule_can_be_switched_off_and_is_scored_as_no_claim(evidence: bool) -> None:
    rules = dataclasses.replace(default_rules(), cut_evidence=evidence)
    features = scan(_tgi("Decode"))
    said = stage_said(features, judge(features, rules))
    assert said == (UNDECIDED if evidence else "runtime")
    assert false_alarm(said, "none") is not evidence

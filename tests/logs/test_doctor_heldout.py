"""The OOM doctor on the held-out logs (tests/data/logs/heldout): real public logs collected and labelled before the
rules they are scored with were fitted, and never fitted on (see tests/data/logs/SOURCES.md). This file scores them
with the shipped rules.

Measured when they were first scored (benchmarks/fits/results/doctor_accuracy.md): 25 of 28 right, one false alarm. The
three misses are excerpts that do not show what their issues say: a traceback the excerpt cuts inside the model
loader (the issue's error, a graph compile failure, is not in it; the doctor reads a cut traceback as a failure of
its phase), a vision-attention OOM with no frame or line that names the phase, and a scheduler dump with no
out-of-memory line. The floor below keeps that result; the 92% target is met by the cross-validated development set
(tests/logs/test_doctor.py), not here.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.common import advice_problems
from tests.support.logs import (
    DEVELOPMENT_LOGS,
    HELDOUT_ROUND4_LOGS,
    HELDOUT_ROUND5_LOGS,
    RUNTIME_HELDOUT_LOGS,
    body_lines,
    expected_stage,
    writer_label,
)
from tests.support.logs import HELDOUT_LOGS as HELDOUT
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose, diagnose_lines

#: What the held-out set scored when it was first scored, kept as a floor.
MEASURED_RIGHT, MEASURED_FALSE_ALARMS = 25, 1


def score() -> dict[str, tuple[str, str]]:
    return {p.name: (expected_stage(p), diagnose_lines(body_lines(p)).stage) for p in HELDOUT}


def test_heldout_accuracy_keeps_what_was_measured() -> None:
    verdicts = score()
    misses = {name: v for name, v in verdicts.items() if v[0] != v[1]}
    assert len(HELDOUT) >= 28
    assert len(verdicts) - len(misses) >= MEASURED_RIGHT, misses


def test_heldout_healthy_logs_raise_at_most_the_measured_alarm() -> None:
    verdicts = score()
    alarms = [name for name, (want, got) in verdicts.items() if want == "none" and got != "none"]
    assert len(alarms) <= MEASURED_FALSE_ALARMS, alarms
    assert sum(want == "none" for want, _ in verdicts.values()) >= 10


def test_heldout_logs_are_not_in_the_development_set() -> None:
    names = {p.name for p in HELDOUT}
    assert not names & {p.name for p in DEVELOPMENT_LOGS}


def advice_and_stages(paths: list[Path]) -> tuple[dict[str, list[str]], dict[str, tuple[str, str]]]:
    """What is wrong with each writer-labelled log's advice (only logs with a problem), and its stage read and said."""
    wrong: dict[str, list[str]] = {}
    stages: dict[str, tuple[str, str]] = {}
    for path in paths:
        label = writer_label(path)
        assert label is not None, path.name
        d = diagnose(body_lines(path), load({}))
        problems = advice_problems(d.recommendations, label.writer, vision=label.vision, host=label.host,
                                   others=label.others)  # fmt: skip
        if problems:
            wrong[path.name] = problems
        stages[path.name] = (expected_stage(path), d.stage)
    return wrong, stages


def test_runtime_heldout_advice_names_only_what_each_writer_reads() -> None:
    # tests/data/logs/runtime_heldout: TGI, optimum-habana, vLLM on CUDA and Ascend, vllm-gaudi, vllm-fork; labelled
    # with their writer when stored, before the doctor ran on them (benchmarks/fits/results/doctor_accuracy.md).
    wrong, stages = advice_and_stages(RUNTIME_HELDOUT_LOGS)
    assert len(RUNTIME_HELDOUT_LOGS) >= 10
    assert not wrong, wrong
    assert not [n for n, (want, got) in stages.items() if want == "none" and got != "none"], stages
    # measured when first scored: 9 of 10 stages right (vllm_34643's one-line serving traceback read as graph capture);
    # 10 of 10 since round 5's classes (the executors' RPC loop casts no vote, the V1 runner's request bookkeeping is
    # serving): a figure after seeing that miss, no longer a held-out one
    assert sum(want == got for want, got in stages.values()) >= 9, stages


def test_round4_heldout_at_most_one_wrong_and_no_false_alarm() -> None:
    # tests/data/logs/heldout_round4: labelled and committed before the round-4 doctor scored them. Measured when
    # first scored: 8 of 9 right (club3090_613: a V1 traceback the excerpt cuts inside execute_model, read as no
    # failure), no false alarm on its 3 logs without an out-of-memory failure.
    verdicts = {p.name: (expected_stage(p), diagnose_lines(body_lines(p)).stage) for p in HELDOUT_ROUND4_LOGS}
    assert len(verdicts) >= 9
    wrong = {n: v for n, v in verdicts.items() if v[0] != v[1]}
    assert len(wrong) <= 1, wrong
    assert not [n for n, (want, got) in verdicts.items() if want == "none" and got != "none"], verdicts
    assert not {p.name for p in HELDOUT_ROUND4_LOGS} & {p.name for p in DEVELOPMENT_LOGS}


def test_round5_heldout_keeps_what_the_round5_fixes_measured() -> None:
    # tests/data/logs/heldout_round5: 16 public logs labelled and committed before the doctor ran on them. Scored once
    # as it came (benchmarks/fits/results/doctor_heldout_round5.md): 11 of 16, 2 false alarms. After the round-5
    # classes (a relayed exception line, llama.cpp's own messages): 15 of 16; the one left is TGI's decode traceback
    # cut before its error line (tgi_883), which the log alone cannot tell from an out-of-memory one cut the same way.
    verdicts = {p.name: (expected_stage(p), diagnose_lines(body_lines(p)).stage) for p in HELDOUT_ROUND5_LOGS}
    assert len(verdicts) >= 16
    wrong = {n: v for n, v in verdicts.items() if v[0] != v[1]}
    assert len(wrong) <= 1, wrong
    alarms = [n for n, (want, got) in verdicts.items() if want == "none" and got != "none"]
    assert len(alarms) <= 1, alarms
    assert sum(want == "none" for want, _ in verdicts.values()) >= 7
    assert not {p.name for p in HELDOUT_ROUND5_LOGS} & {p.name for p in DEVELOPMENT_LOGS}


def test_round5_advice_names_only_what_each_writer_reads() -> None:
    # SGLang, llama.cpp and Ollama logs get their own knobs or none; vLLM's flags only go to vLLM's logs
    wrong, _ = advice_and_stages(HELDOUT_ROUND5_LOGS)
    assert not wrong, wrong

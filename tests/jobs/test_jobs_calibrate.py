"""The ``memory calibrate`` job: a profile from a real warm-up log, the device and model it records, and never a
write over an input (the log itself, by any name)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.support.data import DATA
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.jobs.calibrate import CalibrateArgs, calibrate_log

WARMUP_DOC = DATA / "logs" / "vllm_gaudi_warmup_doc.log"
GIB = 2**30


def test_a_warmup_log_gives_a_profile_written_where_asked(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    job = calibrate_log(CalibrateArgs(str(WARMUP_DOC), device="gaudi2", output=str(out)), load())
    assert job.written_to == out
    saved = json.loads(out.read_text())
    assert saved["free_after_load_bytes"] == job.calibration.free_after_load_bytes == round(79.16 * GIB)
    assert saved["device"] == "gaudi2"
    assert "pass --model" in job.model_from  # the sample names no model: the text factors need one


def test_the_default_path_is_the_profile_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_HPU_MM_PROFILE", str(tmp_path / "env-profile.json"))
    job = calibrate_log(CalibrateArgs(str(WARMUP_DOC)), load())
    assert job.written_to == tmp_path / "env-profile.json"
    assert job.written_to.is_file()


def test_a_log_that_measures_nothing_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "none.json"
    job = calibrate_log(CalibrateArgs(str(DATA / "logs" / "cpu_serve_ok.log"), output=str(out)), load())
    assert job.written_to is None
    assert not out.exists()


def test_only_a_device_a_plan_knows_and_of_the_logs_backend_is_recorded(tmp_path: Path) -> None:
    out = str(tmp_path / "p.json")
    with pytest.raises(
        ConfigError, match="--device='tpu' is not a device a plan knows; accepted: gaudi2, gaudi3, h100, h200, cpu"
    ):
        calibrate_log(CalibrateArgs(str(WARMUP_DOC), device="tpu", output=out), load())
    with pytest.raises(ConfigError, match="is a cuda device but the log is a hpu server's"):
        calibrate_log(CalibrateArgs(str(WARMUP_DOC), device="h100", output=out), load())
    job = calibrate_log(CalibrateArgs(str(WARMUP_DOC), device="Gaudi2", output=out), load())
    assert json.loads(Path(out).read_text())["device"] == "gaudi2"
    assert job.written_to == Path(out)


def _copy_of_the_log(tmp_path: Path) -> Path:
    log = tmp_path / "server.log"
    log.write_bytes(WARMUP_DOC.read_bytes())
    return log


@pytest.mark.parametrize("spelling", ["same", "relative", "dotted", "link"])
def test_an_output_that_is_the_log_is_refused_and_the_log_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    log = _copy_of_the_log(tmp_path)
    before = log.read_bytes()
    monkeypatch.chdir(tmp_path)
    if spelling == "link":
        os.symlink(log, tmp_path / "alias.log")
    output = {"same": str(log), "relative": "server.log", "dotted": f"{tmp_path}/./sub/../server.log",
              "link": str(tmp_path / "alias.log")}[spelling]  # fmt: skip
    (tmp_path / "sub").mkdir()
    with pytest.raises(ConfigError) as info:
        calibrate_log(CalibrateArgs(str(log), device="gaudi2", output=output), load())
    message = str(info.value)
    assert message.startswith(f"--output {Path(output).expanduser()} is the same file as the log {log}")
    assert "\n" not in message
    assert log.read_bytes() == before


def test_a_profile_variable_naming_the_log_is_refused_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _copy_of_the_log(tmp_path)
    monkeypatch.setenv("VLLM_HPU_MM_PROFILE", str(log))
    with pytest.raises(ConfigError, match=r"^VLLM_HPU_MM_PROFILE .* is the same file as the log"):
        calibrate_log(CalibrateArgs(str(log)), load())
    assert log.read_bytes() == WARMUP_DOC.read_bytes()


def test_another_file_beside_the_log_is_written(tmp_path: Path) -> None:
    log = _copy_of_the_log(tmp_path)
    job = calibrate_log(CalibrateArgs(str(log), output=str(tmp_path / "server.json")), load())
    assert job.written_to == tmp_path / "server.json"
    assert log.read_bytes() == WARMUP_DOC.read_bytes()


@pytest.mark.parametrize(("log", "writer"), [
    ("tgi_832_healthy_launch.log", "TGI"),
    ("gpustack_3541_mindie_warmup.log", "MindIE (not a vLLM runtime) on npu"),
    ("tpu_inference_223_kv_needed.log", "vLLM on tpu"),
])  # fmt: skip
def test_a_log_another_runtime_wrote_is_refused_naming_it_and_nothing_is_written(
    tmp_path: Path, log: str, writer: str
) -> None:
    """As memory compare: the log's own lines name its writer first (the round before answered 'runtime unknown:
    nothing measurable', exit 1)."""
    out = tmp_path / "profile.json"
    said = rf"^log .*{log}' was written by {re.escape(writer)}: memory calibrate measures"
    with pytest.raises(ConfigError, match=said):
        calibrate_log(CalibrateArgs(str(DATA / "logs" / log), output=str(out)), load())
    assert not out.exists()
    cpu = calibrate_log(CalibrateArgs(str(DATA / "logs" / "cpu_serve_ok.log"), output=str(out)), load())
    assert cpu.calibration.backend == "cpu"


def test_the_profile_records_the_shape_its_free_memory_was_measured_at(tmp_path: Path) -> None:
    # The engine line's tensor-parallel size wins over the flag's default; vllm-gaudi reads free memory right after
    # load (no profiling pass), so the record says the plan's --max-model-len does not change it.
    log = tmp_path / "tp2.log"
    engine = ("INFO [core.py:134] Initializing a V1 LLM engine (v0.32.0) with config: model='Qwen/Qwen2.5-VL-7B-"
              "Instruct', max_seq_len=16384, tensor_parallel_size=2, pipeline_parallel_size=1, "
              "quantization=fp8")  # fmt: skip
    log.write_text(engine + "\n" + WARMUP_DOC.read_text())
    out = tmp_path / "p.json"
    calibrate_log(CalibrateArgs(str(log), device="gaudi2", output=str(out)), load())
    assert json.loads(out.read_text())["free_after_load_measured_at"] == {
        "tensor_parallel_size": 2, "pipeline_parallel_size": 1, "quantization": "fp8", "max_model_len": 16384,
        "after_profile_run": False,
    }  # fmt: skip


def test_the_profile_records_the_runtime_its_log_names_and_none_where_it_names_none(tmp_path: Path) -> None:
    # A plan for another runtime uses none of a profile (r11profile case 10): the profile says whose log it is, only
    # where the log's own lines say so (vLLM 0.32's V1 engine on hpu is vllm-gaudi's; the warm-up sample names
    # neither Gaudi runtime).
    marked = tmp_path / "gaudi.log"
    marked.write_text(
        "INFO 11-02 10:00:01 [core.py:134] Initializing a V1 LLM engine (v0.32.0) with config: model='Qwen/Qwen2.5-VL-"
        "7B-Instruct', max_seq_len=32768, tensor_parallel_size=1, device_config=hpu\n"
        "INFO 11-02 10:00:09 [hpu_worker.py:431] Free device memory: 78.9 GiB, 71.01 GiB usable "
        "(gpu_memory_utilization=0.9)\n"
    )
    out = tmp_path / "p.json"
    calibrate_log(CalibrateArgs(str(marked), device="gaudi2", output=str(out)), load())
    assert json.loads(out.read_text())["measured_by"] == "vllm-gaudi"
    calibrate_log(CalibrateArgs(str(WARMUP_DOC), device="gaudi2", output=str(out)), load())
    assert json.loads(out.read_text())["measured_by"] is None

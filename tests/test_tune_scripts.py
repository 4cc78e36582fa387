"""The guide scripts (scripts/tune-*.sh) and the docs' samples tell the truth: exit codes, --help, --json, no drift."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"


@pytest.fixture
def cli(tmp_path: Path) -> Path:
    """A ``vllm-hpu-mm`` of this tree whose ``serve`` fails the way a crashed server does (exit 1, no OOM)."""
    path = tmp_path / "vllm-hpu-mm"
    path.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = serve ]; then echo "RuntimeError: Engine core initialization failed (no memory involved)"; '
        "exit 1; fi\n"
        f'exec "{sys.executable}" -m vllm_hpu_mm.cli.main "$@"\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def script(cli: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    env.update({"VLLM_HPU_MM": str(cli), "PYTHONPATH": str(ROOT)})
    return subprocess.run(["bash", str(SCRIPTS / name), *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)  # fmt: skip


@pytest.mark.parametrize("name", ["tune-plan.sh", "tune-launch.sh", "tune-doctor.sh"])
def test_help_exits_0(cli: Path, name: str) -> None:
    done = script(cli, name, "--help")
    assert done.returncode == 0
    assert f"scripts/{name}" in done.stdout


@pytest.mark.parametrize("name", ["tune-launch.sh", "tune-doctor.sh"])
def test_a_missing_log_argument_exits_2(cli: Path, name: str) -> None:
    done = script(cli, name)
    assert done.returncode == 2
    assert "missing LOGFILE" in done.stderr


def test_tune_plan_json_prints_only_the_json_object(cli: Path) -> None:
    done = script(cli, "tune-plan.sh", "--device", "h100", "--json")
    assert done.returncode == 0
    assert json.loads(done.stdout)["device"] == "h100"  # the whole stdout is one object


def test_tune_plan_prints_the_plan_then_the_environment(cli: Path) -> None:
    done = script(cli, "tune-plan.sh", "--device", "h100")
    assert done.returncode == 0
    assert "verdict: fits" in done.stdout
    assert "export VLLM_GRAPH_RESERVED_MEM=0.1" in done.stdout


def test_tune_plan_passes_bad_input_and_negative_answers_through(cli: Path) -> None:
    bad = script(cli, "tune-plan.sh", "--free-memory-gib", "inf")
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1
    assert "export" not in bad.stdout
    no_fit = script(cli, "tune-plan.sh", "--model", "Qwen/Qwen2.5-VL-72B-Instruct", "--device", "h100")
    assert no_fit.returncode == 1
    assert "verdict: does_not_fit" in no_fit.stdout


def test_tune_launch_fails_when_the_server_failed_without_an_oom(cli: Path, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    done = script(cli, "tune-launch.sh", str(log), "--model", "x")
    assert done.returncode == 1  # the server's own code, although the doctor found no OOM
    assert "Engine core initialization failed" in log.read_text()
    assert "asking the OOM doctor" in done.stdout
    assert "stage: none" in done.stdout


def test_tune_launch_refuses_an_unwritable_log(cli: Path, tmp_path: Path) -> None:
    done = script(cli, "tune-launch.sh", str(tmp_path / "no-such-dir" / "server.log"), "--dry-run")
    assert done.returncode == 2
    assert "cannot write the log" in done.stderr


def test_the_docs_samples_are_the_real_output() -> None:
    done = subprocess.run([sys.executable, str(SCRIPTS / "docs_samples.py"), "--check"], capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr

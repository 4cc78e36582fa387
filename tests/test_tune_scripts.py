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


#: A ``vllm-hpu-mm`` of this tree whose server fails the way a crashed server does (exit 1, no OOM): a real ``serve``
#: launch prints that instead of starting vLLM; a dry run is the real one (``--validate`` dropped: it needs vLLM).
FAKE_CLI = """\
import sys
from vllm_hpu_mm.cli.main import main
argv = [a for a in sys.argv[1:] if a != "--validate"]
if argv[:1] == ["serve"] and "--dry-run" not in argv:
    print("RuntimeError: Engine core initialization failed (no memory involved)")
    sys.exit(1)
sys.exit(main(argv))
"""


@pytest.fixture
def cli(tmp_path: Path) -> Path:
    path = tmp_path / "vllm-hpu-mm"
    path.write_text(f"#!{sys.executable}\n{FAKE_CLI}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def script(
    cli: Path, name: str, *args: str, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    env.update({"VLLM_HPU_MM": str(cli), "PYTHONPATH": str(ROOT), **(extra_env or {})})
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
    # vLLM CUDA reads no graph ratio: it gets its encoder graphs as a compilation config
    assert "export VLLM_GRAPH_RESERVED_MEM" not in done.stdout
    assert "# server arguments: --compilation-config" in done.stdout


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
    done = script(cli, "tune-launch.sh", str(log), "--plan-device", "h100", "--model", "Qwen/Qwen2.5-VL-3B-Instruct")
    assert done.returncode == 1  # the server's own code, although the doctor found no OOM
    assert "Engine core initialization failed" in log.read_text()
    assert "asking the OOM doctor" in done.stdout
    assert "stage: none" in done.stdout


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (("--plan-device", "h100", "--model", "Qwen/Qwen2.5-VL-72B-Instruct"), 1, "the plan says the server would not"),
        (("--plan-device", "h100", "--max-modle-len", "4096"), 2, "an argument was refused"),
    ],
)
def test_tune_launch_starts_nothing_when_serve_refuses(
    cli: Path, tmp_path: Path, args: tuple[str, ...], code: int, said: str
) -> None:
    log = tmp_path / "server.log"
    done = script(cli, "tune-launch.sh", str(log), *args)
    assert done.returncode == code  # serve's own answer: 1 does not fit, 2 refused
    assert said in done.stdout
    assert "Engine core" not in log.read_text()  # the server was never started
    assert "OOM doctor" not in done.stdout


def test_tune_plan_hands_each_runtime_what_it_reads(cli: Path, tmp_path: Path) -> None:
    env_cache = {"VLLM_HPU_MM_CACHE_DIR": str(tmp_path)}
    budget = ("--text-graph-budget", "60")  # no budget search (seconds a plan): the exports are what this is about
    gaudi = script(cli, "tune-plan.sh", "--device", "gaudi2", "--runtime", "vllm-gaudi", *budget, extra_env=env_cache)
    assert gaudi.returncode == 0
    # vllm-gaudi reads neither prompt ratio; its prompt and decode graphs are bounded by the bucket file
    assert "export VLLM_GRAPH_PROMPT_RATIO" not in gaudi.stdout
    assert "export VLLM_GRAPH_RESERVED_MEM=0.1" in gaudi.stdout
    bucket_file = tmp_path / "vllm-gaudi-buckets.txt"
    assert f"export VLLM_BUCKETING_FROM_FILE={bucket_file}" in gaudi.stdout
    assert bucket_file.read_text().strip()
    fork = script(cli, "tune-plan.sh", "--device", "gaudi2", "--runtime", "vllm-fork", *budget, extra_env=env_cache)
    # the fork's newest release (1.22, @2e9b2b3d4) reads neither prompt ratio, and reads the vision buckets
    assert "export VLLM_GRAPH_PROMPT_RATIO" not in fork.stdout
    assert "export VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO" not in fork.stdout
    assert "export VLLM_MULTIMODAL_BUCKETS=" in fork.stdout


def test_tune_launch_refuses_an_unwritable_log(cli: Path, tmp_path: Path) -> None:
    done = script(cli, "tune-launch.sh", str(tmp_path / "no-such-dir" / "server.log"), "--dry-run")
    assert done.returncode == 2
    assert "cannot write the log" in done.stderr


def test_the_docs_samples_are_the_real_output() -> None:
    done = subprocess.run([sys.executable, str(SCRIPTS / "docs_samples.py"), "--check"], capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_fleet_docs_samples_are_the_real_output() -> None:
    # docs/fleet.md's worked examples are whole fleet plans (about 40 s of CPU): they drifted once when the
    # planned buckets moved and nothing checked them
    done = subprocess.run([sys.executable, str(SCRIPTS / "fleet_docs.py"), "--check"], capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_tune_launch_launches_anyway_when_only_some_requests_of_the_traffic_are_refused(
    cli: Path, tmp_path: Path
) -> None:
    # the dry run's exit 1 for refused requests is a finding about the traffic: the script launches anyway (it grepped
    # for words the refusal line no longer says, and so stopped there)
    sizes = tmp_path / "traffic.csv"
    sizes.write_text("width,height,text_tokens,output_tokens,count\n,,300,40,30\n,,9000,10,2\n")
    log = tmp_path / "server.log"
    done = script(cli, "tune-launch.sh", str(log), "--plan-sizes", str(sizes), "--max-model-len", "8192",
                  "--plan-text-graph-budget", "40")  # fmt: skip
    assert "# launching anyway" in done.stdout
    assert "Engine core initialization failed" in log.read_text()  # the (fake) server was started

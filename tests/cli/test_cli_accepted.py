"""Every invalid-input line says what is accepted (held-out round 8, A14, D34, K23, H01): an unknown option names
the nearest and where all are listed, a missing-argument line names every required argument (a required group
too), and the file readers' refusals name the form they take."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.cli.serve_args import parse_server_args
from vllm_hpu_mm.cli.vllm_argv import read_yaml, vllm_032_table
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.config_json import read_config_json
from vllm_hpu_mm.models.step_fit import step_from_dict
from vllm_hpu_mm.plan.profile import load_profile
from vllm_hpu_mm.traffic.metrics import families


def _line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_an_unknown_option_outside_serve_names_the_nearest_and_where_all_are_listed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = _line(["buckets", "plan", "--nm-buckets", "3"], capsys)
    assert "unrecognized arguments: --nm-buckets 3" in line
    assert "did you mean --num-buckets?" in line
    assert "accepted: the options `vllm-hpu-mm buckets plan --help` lists" in line
    line = _line(["memory", "plan", "--zzzz"], capsys)  # nothing near: still where the accepted ones are
    assert "did you mean" not in line
    assert "`vllm-hpu-mm memory plan --help`" in line


def test_a_missing_argument_line_names_the_required_group_too(capsys: pytest.CaptureFixture[str]) -> None:
    # argparse reports the required options before it checks the required groups
    line = _line(["fleet", "plan"], capsys)
    assert "missing --ttft-p99, --tpot-p99, one of --request-rate/--load-profile" in line
    assert "--request-rate R or --load-profile" in line
    # a group member given (as a prefix argparse takes) is not reported missing
    line = _line(["fleet", "plan", "--request-r", "2"], capsys)
    assert "missing --ttft-p99, --tpot-p99;" in line
    assert "--load-profile" not in line


@pytest.mark.parametrize(
    ("argv", "accepted"),
    [
        (["--mm-processor-kwargs", "{bad"], "accepted: a JSON value such as"),
        (["--max-logprobs", "two"], "accepted: an integer such as 4"),
        (["--speculative-config", "{bad"], "accepted: a JSON object"),
    ],
)
def test_a_server_value_of_the_wrong_kind_says_what_kind_is_accepted(argv: list[str], accepted: str) -> None:
    with pytest.raises(ConfigError, match=accepted):
        parse_server_args(argv, vllm_032_table())


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("read", "accepted"),
    [
        (lambda tmp: load_profile(tmp / "nope.json"), "accepted: a version-1 profile file written by"),
        (lambda tmp: load_profile(_write(tmp, "p.json", "{bad")), "or none"),
        (lambda tmp: load_profile(_write(tmp, "p.json", '{"version": 9}')), "accepted: a version-1 profile"),
        (lambda tmp: read_yaml(str(tmp / "nope.yaml")), "accepted: a readable UTF-8 YAML file"),
        (lambda tmp: read_yaml(str(_write(tmp, "c.yaml", "a: [1"))), "accepted: a YAML mapping"),
        (lambda tmp: read_config_json(tmp / "nope", source="--model x"), "accepted: a readable UTF-8 Hugging Face"),
        (lambda tmp: step_from_dict({"coefficients": 1}, "p.json"), "accepted: the step_time"),
        (lambda tmp: families("a{ 1\n", "m.txt"), "expected a server's /metrics"),
    ],
)
def test_a_file_reader_s_refusal_names_what_it_accepts(
    read: Callable[[Path], object], accepted: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=accepted) as info:
        read(tmp_path)
    assert "\n" not in str(info.value)
    json.dumps(str(info.value))  # one printable line


#: Every command that takes --profile, with the least else it needs (held-out round r6input, case 8b: `fleet plan`
#: searched its shapes with a cut profile, each shape refused for it, and exited 1 "no fleet meets the targets").
PROFILE_TAKERS = [
    ["memory", "plan", "--profile"],
    ["serve", "--dry-run", "Qwen/Qwen2.5-VL-7B-Instruct", "--plan-profile"],
    ["buckets", "replay", "--requests", "20", "--profile"],
    ["buckets", "stale", "--bucket-file", "buckets.txt", "--from-metrics", "metrics.prom", "--profile"],
    ["fleet", "plan", "--request-rate", "5", "--ttft-p99", "2000", "--tpot-p99", "50", "--profile"],
]


@pytest.mark.parametrize("argv", PROFILE_TAKERS, ids=lambda argv: " ".join(argv[:2]))
def test_every_command_refuses_a_cut_profile_before_any_work(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut = _write(tmp_path, "cut.json", '{"version": 1, "costs": {"text_prefill_fac')
    assert main([*argv, str(cut)]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # refused before a plan or a search printed anything
    [line] = err.strip().splitlines()
    assert f"{argv[-1]} {cut}: not JSON" in line, line
    assert "accepted: a version-1 profile file" in line, line


#: Every option with a cap, each under its command, with the range it accepts (held-out round 206, replay 15:
#: `--requests 0` said "expected a positive integer" and left out the 100,000 its help states).
CAPPED = [
    (["buckets", "replay", "--requests"], "1 to 100,000"),
    (["buckets", "stale", "--requests"], "1 to 100,000"),
    (["fleet", "plan", "--cards"], "1 to 65,536"),
    (["fleet", "plan", "--cards-per-node"], "1 to 64"),
    (["fleet", "plan", "--requests"], "1 to 5,000"),
    (["fleet", "plan", "--pipeline-parallel-sizes"], "1 to 16"),
    (["fleet", "plan", "--tensor-parallel-sizes"], "1 to 2,147,483,647"),
    (["fleet", "plan", "--max-num-seqs"], "1 to 2,147,483,647"),
    (["buckets", "plan", "--min-pixels"], "1 to 205,520,896"),
    (["buckets", "check", "--max-pixels"], "1 to 205,520,896"),
]


@pytest.mark.parametrize("value", ["0", "-3", "x", "1e400", "99999999999999"])
@pytest.mark.parametrize(("argv", "accepted"), CAPPED, ids=lambda a: " ".join(a) if isinstance(a, list) else a)
def test_a_capped_option_s_refusal_states_its_whole_range(
    argv: list[str], accepted: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _line([*argv, value], capsys)
    assert f"argument {argv[-1]}: '{value}' " in line
    assert line.endswith(f"; accepted: {accepted} (see --help)"), line


def test_an_option_without_a_cap_still_asks_only_for_a_positive_integer(capsys: pytest.CaptureFixture[str]) -> None:
    line = _line(["buckets", "replay", "--kv-blocks", "0"], capsys)
    assert line.endswith("'0' is not positive; expected a positive integer (see --help)")

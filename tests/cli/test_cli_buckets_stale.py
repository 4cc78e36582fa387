"""``vllm-hpu-mm buckets stale`` through the real dispatcher: exit 0 on the traffic the bucket file was planned for,
1 on drifted traffic, 2 with one line on bad input; ``--textfile`` writes the gauges the alerting rule reads."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.data import DATA
from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.jobs.stale import GAUGES

PAGES = DATA / "metrics"
LIMITS = ["--max-model-len", "4096", "--max-num-seqs", "4", "--requests", "200"]


def stale(*argv: str) -> list[str]:
    return ["buckets", "stale", "--bucket-file", str(PAGES / "short_prompts_plan.txt"), *LIMITS, *argv]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("VLLM_BUCKETING_FROM_FILE", "VLLM_BUCKETING_STRATEGY", "VLLM_HPU_MM_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def test_quiet_on_the_planned_traffic_and_fires_on_the_drifted(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    assert main(stale("--from-metrics", str(PAGES / "planned.txt"))) == 0
    quiet = capsys.readouterr().out.splitlines()
    assert quiet[-1].startswith("verdict: quiet: the plan pads")
    assert "less than exp" in quiet[-1]
    prom = tmp_path / "stale.prom"
    assert main(stale("--from-metrics", str(PAGES / "drifted.txt"), "--textfile", str(prom), "--json")) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["stale"] is True
    assert report["ratio"] > 1
    assert report["ratio"] == pytest.approx(report["plan"]["padded_s"] / report["exp"]["padded_s"], rel=1e-5)
    assert report["exp"]["label"] == "vllm-gaudi main's exp bucketing"
    samples = {s.name: s.value for f in text_string_to_metric_families(prom.read_text()) for s in f.samples}
    assert set(samples) == set(GAUGES)
    assert samples["vllm_hpu_mm_stale_plan_ratio"] == pytest.approx(report["ratio"], rel=1e-5)


def refused_url() -> str:
    with socket.socket() as s:  # a port just freed: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/metrics"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--from-metrics", "URL"], "cannot fetch it"),
        (["--from-metrics", str(PAGES / "short_prompts_plan.txt")], "not a Prometheus text exposition"),
        (["--from-metrics", "EMPTY"], "no requests counted"),
        (["--from-metrics", str(PAGES / "planned.txt"), "--bucket-file", "MISSING"], "cannot read it"),
        (["--from-metrics", str(PAGES / "planned.txt"), "--tolerance", "x"], "is not a number"),
        (["--from-metrics", str(PAGES / "planned.txt"), "--textfile", "/nonexistent-dir/x.prom"], "--textfile"),
    ],
    ids=["unreachable-url", "not-a-page", "no-histograms", "missing-bucket-file", "tolerance", "textfile"],
)
def test_bad_input_is_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                           said: str) -> None:  # fmt: skip
    empty = tmp_path / "empty.txt"
    empty.write_text("# TYPE vllm:request_prompt_tokens histogram\n"
                     'vllm:request_prompt_tokens_bucket{le="+Inf"} 0.0\n')  # fmt: skip
    swap = {"URL": refused_url(), "EMPTY": str(empty), "MISSING": str(tmp_path / "missing.txt")}
    assert main(stale(*(swap.get(a, a) for a in argv))) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("vllm-hpu-mm: error: ")
    assert said in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--bucket-file", "PROMPT_ONLY"], "0 decode buckets"),
        (
            ["--kv-blocks", "20", "--block-size", "128"],
            "--kv-blocks 20 (19 usable: the block pool keeps one null block) cannot hold one sequence of "
            "--max-model-len 4096",
        ),
    ],
)
def test_a_plan_the_server_would_not_start_with_is_a_finding_as_in_replay(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompt_only = tmp_path / "prompt_only.txt"
    prompt_only.write_text("(1, 2048, 0)\n(1, [512, 1024], [0, 8])\n")  # no decode line: vllm-gaudi fails at start
    argv = [str(prompt_only) if a == "PROMPT_ONLY" else a for a in argv]
    assert main([*stale("--from-metrics", str(PAGES / "planned.txt")), *argv]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("vllm-hpu-mm: error: the server would not start: ")
    assert said in err


def test_the_requests_help_says_the_per_level_floor_that_overrides_a_smaller_number(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["buckets", "stale", "--help"]) == 0
    assert "at least 200" in " ".join(capsys.readouterr().out.split())

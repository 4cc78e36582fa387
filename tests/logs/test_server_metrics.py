"""A step-time fit from a server's /metrics: the histograms' sums and counts give back the two-term model that made
them, a page without them is one clear line, and the fit lands in the profile the plan reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.logs.server_metrics import fit_from_metrics, server_times
from vllm_hpu_mm.plan.profile import load_profile

OVERHEAD, PER_TOKEN, FRONTEND = 0.02, 1e-4, 0.01


def histogram(name: str, total: float, count: int, edges: tuple[float, ...]) -> list[str]:
    """An exposition histogram with every sample in the bucket just above the mean."""
    mean = total / count
    lines = [f"# HELP {name} test", f"# TYPE {name} histogram"]
    for edge in edges:
        lines.append(f'{name}_bucket{{le="{edge}",model_name="m"}} {count if edge >= mean else 0}')
    lines.append(f'{name}_bucket{{le="+Inf",model_name="m"}} {count}')
    lines += [f'{name}_sum{{model_name="m"}} {total}', f'{name}_count{{model_name="m"}} {count}']
    return lines


def page(requests: int = 100) -> str:
    """A server that ran ``requests`` of 500 prompt and 40 answer tokens in 1000 iterations (4 decodes each)."""
    batch, prompt = 4.0, 500.0
    itl = OVERHEAD + PER_TOKEN * batch
    prefill = OVERHEAD + PER_TOKEN * (prompt + batch)
    queue = 0.05
    secs = (0.001, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0)
    toks = (1, 8, 64, 512, 2048)
    lines = [
        *histogram("vllm:inter_token_latency_seconds", itl * 39 * requests, 39 * requests, secs),
        *histogram("vllm:request_prefill_time_seconds", prefill * requests, requests, secs),
        *histogram("vllm:request_queue_time_seconds", queue * requests, requests, secs),
        *histogram("vllm:time_to_first_token_seconds", (FRONTEND + queue + prefill) * requests, requests, secs),
        *histogram("vllm:request_prompt_tokens", prompt * requests, requests, toks),
        *histogram("vllm:request_generation_tokens", 40.0 * requests, requests, toks),
        *histogram(
            "vllm:iteration_tokens_total", 40.0 * requests + prompt * requests, int(40 * requests / batch), toks
        ),
    ]
    return "\n".join(lines) + "\n"


def test_the_fit_gives_back_the_model_that_made_the_page(tmp_path: Path) -> None:
    saved = tmp_path / "metrics.txt"
    saved.write_text(page())
    step = fit_from_metrics(server_times(str(saved)), block_size=128)
    assert step.overhead_s == pytest.approx(OVERHEAD, rel=1e-6)
    assert step.token_s == pytest.approx(PER_TOKEN, rel=1e-6)
    assert step.frontend_s == pytest.approx(FRONTEND, rel=1e-6)
    assert step.samples == 3900 + 100
    assert step.decode_s(4, 0) == pytest.approx(OVERHEAD + 4 * PER_TOKEN)
    assert "metrics.txt" in step.describe()
    assert "4000 timings" in step.describe()
    # every inter-token sample in one bucket (0.02 to 0.05 s, mean 0.0204): the page cannot tell them apart within
    # it, so the interval is that bucket's half-width over the mean, never 0 (held-out r6profile case 17 printed ±0%)
    assert step.interval == pytest.approx((0.05 - 0.02) / 2 / (OVERHEAD + PER_TOKEN * 4.0))


def test_a_page_without_the_histograms_or_samples_is_refused(tmp_path: Path) -> None:
    bare = tmp_path / "bare.txt"
    bare.write_text("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n")
    with pytest.raises(ConfigError, match="no vllm:inter_token_latency_seconds"):
        fit_from_metrics(server_times(str(bare)), block_size=128)
    idle = tmp_path / "idle.txt"
    idle.write_text(page(requests=1))
    with pytest.raises(
        ConfigError,
        match=r"too few samples \(vllm:request_prefill_time_seconds 1, .*; at least 3 "
        r"needed in each\)",
    ):  # how many there were, and how many are needed
        fit_from_metrics(server_times(str(idle)), block_size=128)


def test_memory_calibrate_writes_the_fit_into_the_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "metrics.txt"
    saved.write_text(page())
    out = tmp_path / "profile.json"
    assert main(["memory", "calibrate", "--metrics", str(saved), "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "step_time" in printed
    assert "4000 timings" in printed
    profile = load_profile(out)
    assert profile.step_time is not None
    assert profile.step_time.overhead_s == pytest.approx(OVERHEAD, rel=1e-4)
    assert json.loads(out.read_text())["step_time"]["samples"] == 4000
    assert main(["memory", "calibrate"]) == 2
    assert "needs a warm-up log, --metrics, or both" in capsys.readouterr().err


def test_a_page_that_cannot_be_read_is_named_by_the_flag_typed_with_its_bytes_escaped(tmp_path: Path) -> None:
    """memory calibrate's page is --metrics (it said --from-metrics, buckets replay's flag); a binary file's control
    characters never reach the terminal raw."""
    with pytest.raises(ConfigError, match=r"^--metrics .*missing: cannot read it"):
        server_times(str(tmp_path / "missing"))
    binary = tmp_path / "bin"
    binary.write_bytes(b"\x00\x01\x1b[2J garbage\n")
    with pytest.raises(ConfigError, match=r"^--metrics .*bin: not a Prometheus text exposition") as err:
        server_times(str(binary))
    assert "\x00" not in str(err.value)
    assert "\x1b" not in str(err.value)
    with pytest.raises(ConfigError, match=r"^--metrics ftp://host/metrics: a ftp:// URL is not read; expected"):
        server_times("ftp://host/metrics")  # it was read as a file path: "No such file or directory"


def test_calibrate_from_a_page_that_measures_nothing_yet_exits_1_without_a_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    idle = tmp_path / "idle.txt"
    idle.write_text(page(requests=1))
    out = tmp_path / "profile.json"
    assert main(["memory", "calibrate", "--metrics", str(idle), "--output", str(out)]) == 1
    assert "nothing measured from --metrics" in capsys.readouterr().out
    assert not out.exists()

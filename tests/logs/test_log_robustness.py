"""Reading logs under real input: a garbled figure (interleaved output) is skipped and reported, never exit 3, in
every command that reads logs; a NUL run inside a log is a hole, not a binary file; a device is refused and every
read is capped; a worker that fails again and again was serving."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.gaudi_logs import GAUDI_LOGS
from tests.support.logs import GAUDI_LOG
from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.logs import reading
from vllm_hpu_mm.logs.calibrate import parse_warmup
from vllm_hpu_mm.logs.doctor import diagnose_lines
from vllm_hpu_mm.logs.numbers import NUMBER, GarbledNumber, integer, number
from vllm_hpu_mm.logs.reading import log_lines

#: A vllm-gaudi warm-up with memory figures on every line (what `memory calibrate` and the doctor read).
WARMUP = [
    "INFO hpu_worker.py] Free device memory: 79.16 GiB, 39.58 GiB usable (gpu_memory_utilization=0.5), 15.83 GiB "
    "reserved for HPUGraphs (VLLM_GRAPH_RESERVED_MEM=0.4), 23.75 GiB reserved for KV cache",
    "INFO hpu_model_runner.py] [Warmup][Graph/Prompt][1/3] batch_size:1 seq_len:128 free_mem:55.43 GiB",
    "INFO hpu_model_runner.py] [Warmup][Graph/Prompt][2/3] batch_size:1 seq_len:256 free_mem:55.01 GiB",
    "INFO hpu_model_runner.py] [Warmup][Graph/Prompt][3/3] batch_size:2 seq_len:256 free_mem:54.52 GiB",
    "INFO hpu_model_runner.py] Graph/Prompt captured:3 (100.0%) used_mem:1.2 GiB buckets:[(1, 128), (1, 256)]",
    "INFO hpu_model_runner.py] Warmup finished in 42 secs, allocated 2.5 GiB of device memory",
]
FIGURE = re.compile(r"\d+\.\d+|\d+")

garbled_figures = st.one_of(
    st.from_regex(r"\A\d{1,3}\.\d{1,3}\.\d{1,3}\Z"),  # two numbers run together: 79.22.5
    st.from_regex(r"\A\d{1,3}\.\.\d{1,3}\Z"),
    st.from_regex(r"\A\d{1,3}\.\Z"),
    st.from_regex(r"\A\.\d{1,3}\Z"),
    st.from_regex(r"\A\d{19,40}\Z"),  # longer than any figure a runtime prints
)


@given(st.text(alphabet="0123456789.-+e ", max_size=30))
def test_a_number_is_read_only_when_it_is_one(text: str) -> None:
    if NUMBER.fullmatch(text):
        assert number(text) == float(text)
    else:
        with pytest.raises(GarbledNumber):
            number(text)


@given(st.text(alphabet="0123456789.-", max_size=6000))
def test_an_integer_is_read_only_when_it_is_one(text: str) -> None:
    try:
        value = integer(text)
    except GarbledNumber:
        assert not re.fullmatch(r"-?\d{1,18}", text)
    else:
        assert value == int(text)


def _garble(lines: list[str], which: int, figure: str, data: st.DataObject) -> list[str]:
    spots = list(FIGURE.finditer(lines[which]))
    m = spots[data.draw(st.integers(0, len(spots) - 1))]
    out = list(lines)
    out[which] = lines[which][: m.start()] + figure + lines[which][m.end() :]
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, len(WARMUP) - 1), figure=garbled_figures, data=st.data())
def test_a_garbled_figure_never_raises_in_the_doctor_or_the_calibration(which: int, figure: str,
                                                                       data: st.DataObject) -> None:  # fmt: skip
    lines = _garble([*WARMUP, *GAUDI_LOG[-3:]], which, figure, data)
    d = diagnose_lines(lines)
    assert d.stage in ("graph_capture", "startup", "kv_cache", "runtime", "unknown")
    warm = parse_warmup(lines)
    for skipped in (d.skipped, warm.skipped):
        assert skipped.count <= 1
        assert all(s.line == which + 1 for s in skipped.first)


def test_the_garbled_line_of_a_public_log_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "interleaved.log"
    path.write_text("\n".join([WARMUP[0].replace("79.16", "79.22.5"), *WARMUP[1:], *GAUDI_LOG[-3:]]) + "\n")
    assert main(["oom-doctor", str(path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["skipped"]["count"] == 1
    assert out["skipped"]["first"][0]["line"] == 1
    assert "79.22.5" in out["skipped"]["first"][0]["reason"]
    assert out["gaudi_memory"] is None  # the garbled split is not read as a split
    assert main(["memory", "calibrate", str(path), "--output", str(tmp_path / "p.json"), "--json"]) in (0, 1)
    calibrated = json.loads(capsys.readouterr().out)
    assert calibrated["skipped"]["count"] == 1


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(figure=garbled_figures, data=st.data())
def test_no_command_that_reads_logs_exits_3_on_a_garbled_figure(
    figure: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    source = (GAUDI_LOGS / "dev" / "vllm_gaudi_perf_tuning_llama31_8b_gaudi2.log").read_text().splitlines()
    numbered = [k for k, line in enumerate(source) if FIGURE.search(line) and not line.startswith("#")]
    which = data.draw(st.sampled_from(numbered))
    path = tmp_path_factory.mktemp("garbled") / "log.txt"
    path.write_text("\n".join(_garble(source, which, figure, data)) + "\n")
    for argv in (["oom-doctor", str(path)], ["memory", "compare", str(path), "--device", "gaudi2"],
                 ["memory", "calibrate", str(path), "--output", str(path.with_suffix(".json"))]):  # fmt: skip
        assert main(argv) in (0, 1, 2), argv


def test_a_nul_run_inside_a_log_is_a_hole_not_a_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "restart.log"
    text = "\n".join(WARMUP[:2]) + "\n"
    path.write_bytes(text.encode() + b"\x00" * 100_000 + b"\n" + "\n".join(GAUDI_LOG).encode() + b"\n")
    lines = list(log_lines(str(path)))
    assert lines[-1] == GAUDI_LOG[-1]
    assert diagnose_lines(lines).stage == "graph_capture"


def test_a_binary_file_is_still_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "random.bin"
    path.write_bytes(bytes(range(256)) * 64)
    assert main(["oom-doctor", str(path)]) == 2
    assert "binary" in capsys.readouterr().err


def test_a_device_is_refused_before_it_is_read(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["oom-doctor", "/dev/zero"]) == 2
    err = capsys.readouterr().err
    assert "device" in err
    assert err.count("\n") == 1


def test_the_null_device_is_an_empty_log_as_a_path_and_as_standard_input(capsys: pytest.CaptureFixture[str]) -> None:
    # r13input 16: `oom-doctor - < /dev/null` was "a device or a terminal"; it ends at once, so it is read
    assert main(["oom-doctor", os.devnull]) == 2
    assert f"log {os.devnull!r} is empty" in capsys.readouterr().err
    with open(os.devnull, "rb") as null:
        done = subprocess.run([sys.executable, "-m", "vllm_hpu_mm", "oom-doctor", "-"], stdin=null,
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == ("vllm-hpu-mm: error: log '-' is empty: there is nothing to diagnose; accepted: the "
                                   "server's log file")  # fmt: skip


def test_a_fifo_is_read_up_to_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setattr(reading, "MAX_LOG_BYTES", 1 << 20)
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)
    stop = threading.Event()

    def write() -> None:  # an endless writer, as `yes` into a FIFO
        try:
            with fifo.open("wb") as f:
                while not stop.is_set():
                    f.write(b"INFO avg prompt throughput: 1.0 tokens/s\n" * 1024)
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        assert main(["oom-doctor", str(fifo)]) == 2
    finally:
        stop.set()
    err = capsys.readouterr().err
    assert "more than 1 MiB" in err
    assert "tail" in err


def test_a_compressed_log_that_inflates_without_end_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setattr(reading, "MAX_LOG_BYTES", 1 << 20)
    path = tmp_path / "bomb.log.gz"
    path.write_bytes(gzip.compress(b"INFO Loading weights\n" + b"\x00" * (8 << 20)))
    assert main(["oom-doctor", str(path)]) == 2
    # the cap in the one wording of every size cap (values.size_cap, as a /metrics page's: r9metrics cases 17, 18)
    assert "more than 1 MiB (1,048,576 bytes) of text" in capsys.readouterr().err


def test_a_plain_file_over_the_cap_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(reading, "MAX_LOG_BYTES", 1000)
    path = tmp_path / "big.log"
    path.write_text("INFO x\n" * 1000)
    assert main(["memory", "calibrate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "tail -c" in err
    assert "more than 1,000 bytes of text" in err  # not "0 MiB": a cap below a MiB in bytes


def test_lines_are_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setattr(reading, "MAX_LOG_LINES", 100)
    path = tmp_path / "empty_lines.log"
    path.write_text("x\n" + "\n" * 1000)
    assert main(["oom-doctor", str(path)]) == 2
    assert "more than 100 lines" in capsys.readouterr().err


def test_a_worker_that_fails_again_and_again_was_serving() -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    ten = [oom, 'INFO:     127.0.0.1:50312 - "POST /generate HTTP/1.1" 200'] * 10
    d = diagnose_lines(ten)
    assert (d.stage, d.basis) == ("runtime", "repeated")
    # each failure's request answered 500 right after it says so first (phases.answered_error_stage)
    d = diagnose_lines([oom, 'INFO:     127.0.0.1:50312 - "POST /generate HTTP/1.1" 500'] * 10)
    assert (d.stage, d.basis) == ("runtime", "message")
    # the same line ten times with nothing between is one failure reported again: it shows no serving
    assert diagnose_lines([oom] * 10).stage == "unknown"
    # one failure printed by eight ranks once each is not a repetition
    ranks = [f"[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB." for r in range(8)]
    assert diagnose_lines(ranks).stage == "unknown"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=30), st.integers(0, 29))
def test_any_lines_around_a_failure_get_a_verdict(noise: list[str], at: int) -> None:
    lines = [*noise[:at], *GAUDI_LOG, *noise[at:]]
    assert diagnose_lines(lines).stage in ("graph_capture", "startup", "kv_cache", "runtime", "unknown")

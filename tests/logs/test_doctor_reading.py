"""What the doctor reads and what it refuses: lines of any length read in bounded windows, NUL bytes, binary and
compressed files, logs of several server starts, and arbitrary input that never ends in a traceback, exit 3 or memory
that grows with the log."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.logs.doctor import STAGES, diagnose_lines
from vllm_hpu_mm.logs.doctor.scan import AHEAD, BACK, MAX_FRAMES, Scanner
from vllm_hpu_mm.logs.reading import LINE_OVERLAP, MAX_LINE_CHARS, log_records

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79 GiB"
PROFILE_OOM = [
    "Traceback (most recent call last):",
    '  File "vllm/v1/worker/gpu_worker.py", line 300, in determine_available_memory',
    "    self.model_runner.profile_run()",
    OOM,
]
CAPTURE_OOM = [
    "Traceback (most recent call last):",
    '  File "vllm/v1/worker/gpu_worker.py", line 588, in compile_or_warm_up_model',
    "    cuda_graph_memory_bytes = self.model_runner.capture_model()",
    OOM,
]
SERVING_OOM = [
    'INFO:     10.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "Traceback (most recent call last):",
    '  File "vllm/v1/engine/core.py", line 1170, in run_busy_loop',
    "    self._process_engine_step()",
    OOM,
]
BANNER = "INFO 11-26 10:00:00 [api_server.py:1] vLLM API server version 0.32.0"
STARTED = "INFO:     Application startup complete."


def run_doctor(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["oom-doctor", str(path)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- lines of any length --------------------------------------------------------------------------------------


def test_an_oom_line_far_past_the_first_8192_characters_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A whole startup log pasted as one line (newlines lost), the traceback at its end.
    path = tmp_path / "one_line.log"
    path.write_text("INFO Avg prompt throughput: 5 tokens/s, Running: 1 reqs " * 3000 + " ".join(SERVING_OOM) + "\n")
    assert path.stat().st_size > 20 * MAX_LINE_CHARS
    code, out, _ = run_doctor(path, capsys)
    assert code == 1
    assert out.startswith("stage: runtime")


def test_an_over_long_line_comes_in_bounded_overlapping_windows_that_keep_its_number(tmp_path: Path) -> None:
    path = tmp_path / "long.log"
    path.write_text("first\n" + "x" * (5 * MAX_LINE_CHARS + 7) + "\nnext line\n")
    records = list(log_records(str(path)))
    assert records[0] == (1, "first")
    assert records[-1] == (3, "next line")
    windows = [text for number, text in records if number == 2]
    assert len(windows) > 5
    assert all(len(w) <= MAX_LINE_CHARS for w in windows)
    assert sum(len(w) for w in windows) - (len(windows) - 1) * LINE_OVERLAP == 5 * MAX_LINE_CHARS + 7


@pytest.mark.parametrize("context", [400, MAX_LINE_CHARS - 30, MAX_LINE_CHARS - 5, 3 * MAX_LINE_CHARS])
def test_an_over_long_line_is_quoted_around_its_failure_with_ellipses(
    context: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A JSON log record whose message comes after kilobytes of context, the OOM across a window's end or not.
    path = tmp_path / "record.log"
    record = '{"stream":"stderr","ctx":"' + "x" * context + '","msg":"EngineCore encountered a fatal error. ' + OOM
    path.write_text("\n".join([BANNER, STARTED, SERVING_OOM[0], record + '"}' + "y" * 500]) + "\n")
    assert main(["oom-doctor", str(path), "--json"]) == 1
    (quoted,) = [e["text"] for e in json.loads(capsys.readouterr().out)["evidence"] if e["line"] == 4]
    assert "OutOfMemoryError: CUDA out of memory" in quoted
    assert quoted.startswith("...")
    assert quoted.endswith("...")
    assert len(quoted) <= 300
    code, out, _ = run_doctor(path, capsys)
    assert code == 1
    assert f"{path}:4: {quoted}\n" in out  # the text report quotes the same


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=st.integers(0, 4 * MAX_LINE_CHARS), after=st.integers(0, 2 * MAX_LINE_CHARS))
def test_any_message_shorter_than_the_overlap_lies_whole_in_one_window(
    tmp_path_factory: pytest.TempPathFactory, before: int, after: int
) -> None:
    assert len(OOM) < LINE_OVERLAP
    path = tmp_path_factory.mktemp("win") / "log.txt"
    path.write_text("a" * before + OOM + "b" * after + "\n")
    assert any(OOM in text for _, text in log_records(str(path)))


# --- NUL bytes, binary and compressed files ---------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 4096, 100_000, 300_000])
def test_a_file_of_nul_bytes_is_named_for_what_it_is(
    size: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "zeros.log"
    path.write_bytes(b"\x00" * size)
    code, _, err = run_doctor(path, capsys)
    assert code == 2
    assert f"holds only NUL bytes ({size} bytes)" in err
    assert err.count("\n") == 1


def test_a_log_after_a_run_of_nul_bytes_is_diagnosed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Log rotation with copytruncate leaves the truncated part as NUL bytes in front of what follows.
    path = tmp_path / "rotated.log"
    path.write_bytes(b"\x00" * 150_000 + ("\n".join(CAPTURE_OOM) + "\n").encode())
    code, out, _ = run_doctor(path, capsys)
    assert (code, out.split(",")[0]) == (1, "stage: graph_capture (device memory) (run 1 of 1)")


def test_a_log_after_a_binary_stretch_is_read_from_its_text_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A partial write or a crash's garbage (random bytes, not NUL) in front of a real log, colour codes in it.
    junk = bytes(range(1, 256)) * 16 + bytes((7 * k + 3) % 256 or 1 for k in range(4096))
    lines = [*CAPTURE_OOM[:-1], "\x1b[31mERROR\x1b[0m " + OOM]
    path = tmp_path / "mixed.log"
    path.write_bytes(junk + b"\n" + ("\n".join(lines) + "\n").encode() + b"\x00\x00\xff\xfe\n")
    code, out, err = run_doctor(path, capsys)
    assert (code, out.split(",")[0]) == (1, "stage: graph_capture (device memory) (run 1 of 1)")
    assert f"starts with {len(junk) + 1} bytes that are not text" in err
    assert "\x1b" not in out


def test_lines_after_a_binary_stretch_keep_the_files_own_numbers(tmp_path: Path) -> None:
    # The evidence's line numbers are where an editor or `grep -n` finds the line, the skipped stretch's line ends
    # counted; the note says which line the reading starts from.
    junk = bytes(range(1, 256)) * 16
    path = tmp_path / "mixed.log"
    data = junk + b"\n" + ("\n".join(CAPTURE_OOM) + "\n").encode()
    path.write_bytes(data)
    lines = data.split(b"\n")
    first = lines.index(CAPTURE_OOM[0].encode()) + 1
    own = {text: first + k for k, text in enumerate(CAPTURE_OOM)}
    with pytest.warns(Warning, match=rf"read from line {first}, the first line of text"):
        records = list(log_records(str(path)))
    assert [number for number, _ in records] == [own[text] for _, text in records]


@pytest.mark.parametrize("where", [1000, 60_000])
def test_binary_throughout_the_look_ahead_is_still_refused_however_it_ends(
    where: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Text that starts only past the 64 KiB looked ahead is not looked for: the read stays bounded.
    noise = (bytes(range(1, 256)) * 600)[:70_000]
    path = tmp_path / "file.log"
    path.write_bytes(noise + b"\n" + ("\n".join(CAPTURE_OOM) + "\n").encode())
    code, _, err = run_doctor(path, capsys)
    assert code == 2
    assert "looks binary" in err
    # and a named binary is refused at once, whatever text follows it
    path.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(where) + b"\n" + ("\n".join(CAPTURE_OOM) + "\n").encode())
    code, _, err = run_doctor(path, capsys)
    assert (code, "executable" in err) == (2, True)


@pytest.mark.parametrize(
    ("head", "named"),
    [
        (b"\x7fELF\x02\x01\x01" + bytes(64), "executable"),
        (b"PK\x03\x04" + bytes(64), "zip archive"),
        (b"\x28\xb5\x2f\xfd" + bytes(64), "zstd"),
        (b"\x89PNG\r\n\x1a\n" + bytes(64), "PNG image"),
        (bytes(range(256)) * 8, "binary"),
    ],
)
def test_binary_files_are_invalid_input_named_for_what_they_are(
    head: bytes, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "file.log"
    path.write_bytes(head)
    code, _, err = run_doctor(path, capsys)
    assert code == 2
    assert named in err
    assert "accepted: a UTF-8 or UTF-16 text log" in err


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress])
def test_compressed_logs_are_read_as_they_are_decompressed(
    compress: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "server.log.z"
    path.write_bytes(compress(("\n".join(PROFILE_OOM) + "\n").encode()))  # type: ignore[operator]
    code, out, _ = run_doctor(path, capsys)
    assert (code, out.split(",")[0]) == (1, "stage: startup (device memory) (run 1 of 1)")


def test_a_damaged_compressed_log_is_invalid_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "server.log.gz"
    path.write_bytes(gzip.compress(b"INFO a line\n" * 1000)[:60])
    code, _, err = run_doctor(path, capsys)
    assert code == 2
    assert "cannot read log" in err


# --- several server starts --------------------------------------------------------------------------------------


def test_a_log_of_ten_restarts_reports_the_last_runs_failure() -> None:
    runs = [[BANNER, *(PROFILE_OOM if i < 9 else CAPTURE_OOM)] for i in range(10)]
    d = diagnose_lines([line for run in runs for line in run])
    assert (d.stage, d.run, d.runs) == ("graph_capture", 10, 10)
    assert d.evidence[-1].line == 10 * 5  # the last run's error line


def test_a_later_healthy_start_keeps_the_last_failure_and_says_which_run() -> None:
    lines = [BANNER, *PROFILE_OOM, BANNER, *SERVING_OOM, BANNER, "INFO Loading weights took 3 GiB", STARTED]
    d = diagnose_lines(lines)
    assert (d.stage, d.run, d.runs) == ("runtime", 2, 3)


def test_runs_that_stop_partway_without_an_error_show_no_failure() -> None:
    # a restart says the run ended, not that memory ran out: nothing to diagnose, and a real failure of an earlier
    # run is still the one reported
    died = [BANNER, "Loading safetensors checkpoint shards:  40% Completed | 2/5 [00:10<00:15,  5.0s/it]"]
    d = diagnose_lines([*died, *died, *died[:1], "INFO Loading weights took 3 GiB", STARTED])
    assert (d.stage, d.oom, d.runs) == ("none", False, 3)
    d = diagnose_lines([BANNER, *PROFILE_OOM, *died, *died[:1], "INFO Loading weights took 3 GiB", STARTED])
    assert (d.stage, d.run, d.runs) == ("startup", 1, 3)


def test_an_exception_groups_traceback_ends_at_its_own_exception_line() -> None:
    # Python's exception groups (Starlette's ASGI errors in vLLM's API server) print their tracebacks behind "    | ":
    # the group's error line closes the traceback (a failure of another kind), so a log that then stops in the next
    # ASGI error is not a traceback cut inside the serving frames. The excerpt starts inside the group, as a posted
    # one does (round 9's vllm_8826).
    group = [
        '    |   File "/usr/lib/python3.12/vllm/entrypoints/openai/serving_completion.py", line 248, in '
        "completion_stream_generator",
        "    |     async for prompt_idx, res in result_generator:",
        '    |   File "/usr/lib/python3.12/vllm/engine/multiprocessing/client.py", line 486, in _process_request',
        "    |     raise request_output",
        "    | AssertionError",
        "    +------------------------------------",
        "INFO 09-25 18:52:24 multiproc_worker_utils.py:124] Killing local vLLM worker processes",
        'INFO:     172.16.0.87:35352 - "GET /health HTTP/1.1" 500 Internal Server Error',
    ]
    d = diagnose_lines([*group, "ERROR:    Exception in ASGI application"])
    assert (d.stage, d.oom) == ("none", False)
    # the same group ending in an out-of-memory error is one, raised while serving
    oom = [*group[:4], "    | torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", *group[5:]]
    d = diagnose_lines(oom)
    assert (d.stage, d.oom) == ("runtime", True)


def test_banners_of_one_start_are_one_run() -> None:
    # The API server's banner and the engine's configuration line belong to one start.
    lines = [BANNER, "INFO Initializing a V1 LLM engine (v0.32.0) with config: model='m'", *CAPTURE_OOM]
    d = diagnose_lines(lines)
    assert (d.stage, d.runs) == ("graph_capture", 1)


def test_every_start_line_vllm_prints_again_opens_a_new_run() -> None:
    # vLLM 0.32's banner ("vLLM server version X, serving model M", or its logo's version line) and engine config
    # line, printed again by a restart whose first start ended in no failure the doctor reads
    engine = "(EngineCore_DP0 pid={}) INFO [core.py:134] Initializing a V1 LLM engine (v0.32.0) with config: model='m'"
    loaded = "INFO Loading weights took 3 GiB"
    for banner in ("INFO [launcher.py:380] vLLM server version 0.32.0, serving model m",
                   " ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0"):  # fmt: skip
        d = diagnose_lines([banner, engine.format(1), loaded, banner, engine.format(2), *CAPTURE_OOM])
        assert (d.stage, d.run, d.runs) == ("graph_capture", 2, 2)
    # a start that printed only its engine line, then the next start's engine line
    d = diagnose_lines([engine.format(1), loaded, engine.format(2), *CAPTURE_OOM])
    assert (d.run, d.runs) == (2, 2)
    # each data-parallel engine core of one start prints its own
    dp1 = engine.format(2).replace("DP0", "DP1")
    d = diagnose_lines([BANNER, engine.format(1), dp1, loaded, *CAPTURE_OOM])
    assert (d.stage, d.runs) == ("graph_capture", 1)


# --- arbitrary input ----------------------------------------------------------------------------------------------

_FRAGMENTS = [
    *PROFILE_OOM,
    *CAPTURE_OOM,
    *SERVING_OOM,
    BANNER,
    STARTED,
    "Killed",
    "",
    "[Warmup][Graph/Prompt][3/10] batch_size:1 seq_len:128 free_mem:3 GiB",
    "# GPU blocks: 0",
    "Loading safetensors checkpoint shards:  40% Completed | 2/5",
    "ValueError: To serve at least one request with the model's max seq len (4096), (2 GiB KV cache is needed, which "
    "is larger than the available KV cache memory (1 GiB)",
    "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed",
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=300)), max_size=60))
def test_any_lines_get_one_verdict_from_the_closed_set(lines: list[str]) -> None:
    d = diagnose_lines(lines)
    assert d.stage in STAGES
    assert 1 <= d.run <= d.runs
    assert all(0 < e.line <= len(lines) for e in d.evidence)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=5000))
def test_any_bytes_exit_0_1_or_2_never_3(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("bytes") / "log"
    path.write_bytes(data)
    assert main(["oom-doctor", str(path), "--json"]) in (0, 1, 2)


def _endless(lines: list[str], count: int) -> Iterator[str]:
    for k in range(count):
        yield lines[k % len(lines)]


def test_what_the_scanner_keeps_is_bounded_whatever_the_log() -> None:
    scanner = Scanner()
    noisy = [*CAPTURE_OOM[:3], '  File "x.py", line 1, in f', "    f()", BANNER, *SERVING_OOM, "INFO line"]
    for text in _endless(noisy, 20_000):
        scanner.feed(text)
        run = scanner.run
        assert len(scanner.recent) <= BACK
        assert len(run.after) <= AHEAD
        assert run.tb is None or len(run.tb.frames) <= MAX_FRAMES
    assert scanner.result().runs > 1


def test_memory_does_not_grow_with_the_size_of_the_log() -> None:
    serving = ["INFO Avg prompt throughput: 10.0 tokens/s, GPU KV cache usage: 5.0%"] * 40
    noisy = [*PROFILE_OOM, BANNER, *serving, *CAPTURE_OOM, "x" * 20_000, BANNER]

    def peak(count: int) -> int:
        tracemalloc.start()
        diagnose_lines(_endless(noisy, count))
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    small, large = peak(1_000), peak(10_000)
    assert large < 1.5 * small + 256 * 1024, (small, large)


def test_an_over_long_kv_refusal_is_quoted_around_the_figure_the_advice_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # r23doctor 3: vLLM 0.32's refusal (v1/core/kv_cache_utils.py _check_enough_kv_cache_memory) behind its logger's
    # prefix was quoted from its head and cut before "the estimated maximum model length is 59904", the settings' value
    prefix = "(EngineCore_DP0 pid=4121) ERROR 11-28 09:13:02 [core.py:1510] "
    refusal = (prefix + "ValueError: To serve at least one request with the model's max seq len (128000), (7.03 GiB KV "
               "cache is needed, which is larger than the available KV cache memory (3.29 GiB). Based on the "
               "available memory, the estimated maximum model length is 59904. Try increasing "
               "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine. See "
               "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")  # fmt: skip
    path = tmp_path / "kv.log"
    path.write_text("\n".join([BANNER, refusal]) + "\n")
    assert main(["oom-doctor", str(path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["settings"]["--max-model-len"] == 59904
    (quoted,) = [e["text"] for e in report["evidence"] if e["line"] == 2]
    assert "the estimated maximum model length is 59904" in quoted
    assert len(quoted) <= 300

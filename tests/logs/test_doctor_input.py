"""The OOM doctor's input and output contract: encodings, colour codes, empty and huge logs, --model, advice for the
log's runtime, host memory, unknown stages, cut logs, negative KV memory."""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.data import LOGS
from tests.support.logs import GAUDI_LOG
from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import contradictions, diagnose, diagnose_lines, recommend
from vllm_hpu_mm.logs.reading import detect_encoding, log_lines
from vllm_hpu_mm.plan.fixes import Fix

CUDA_CAPTURE = (LOGS / "vllm_15598_cudagraph_capture.log").read_text()
GAUDI_OOM = [
    "INFO 08-02 17:37:54 hpu_worker.py:158] Free device memory: 79.16 GiB, 39.58 GiB usable "
    "(gpu_memory_utilization=0.5), 15.83 GiB reserved for HPUGraphs (VLLM_GRAPH_RESERVED_MEM=0.4), 23.75 GiB "
    "reserved for KV cache",
    "INFO 08-02 17:38:22 hpu_model_runner.py:1066] [Warmup][Graph/Prompt][1/24] batch_size:1 seq_len:128 "
    "free_mem:55.43 GiB",
    "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::939524096 (896)MB",
]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["oom-doctor", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be"])
def test_logs_decode_by_their_byte_order_mark(
    encoding: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(CUDA_CAPTURE.encode(encoding))
    code, out = run_json(capsys, str(path))
    assert code == 1
    assert out["stage"] == "graph_capture"


def test_encoding_detection() -> None:
    assert detect_encoding(codecs.BOM_UTF8 + b"x") == "utf-8-sig"
    assert detect_encoding("abc".encode("utf-16-le")) == "utf-16-le"
    assert detect_encoding("abc".encode("utf-16-be")) == "utf-16-be"
    assert detect_encoding(b"\x7fELF\x02\x01\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00>\x00") is None


def test_colour_codes_are_stripped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "colour.log"
    coloured = [f"\x1b[1;36m(EngineCore pid=1)\x1b[0;0m {line}" for line in GAUDI_OOM]
    coloured.append("^[[1;36m(Worker pid=2)^[[0;0m ERROR tail #033[2m(raylet)#033[0m")
    path.write_text("\n".join(coloured) + "\n")
    _, out = run_json(capsys, str(path))
    texts = [e["text"] for e in out["evidence"]]
    assert texts
    assert not any("\x1b" in t or "[1;36m" in t for t in texts)
    assert all(t.startswith("(EngineCore pid=1) ") for t in texts)
    assert list(log_lines(str(path)))[-1] == "(Worker pid=2) ERROR tail (raylet)"


@pytest.mark.parametrize("content", [b"", b"\n\n  \n", codecs.BOM_UTF16_LE])
def test_an_empty_log_is_invalid_input(content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.log"
    path.write_bytes(content)
    assert main(["oom-doctor", str(path)]) == 2
    err = capsys.readouterr().err
    assert "is empty" in err
    assert err.count("\n") == 1


def test_unknown_model_is_invalid_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "g.log"
    path.write_text("\n".join(GAUDI_OOM) + "\n")
    assert main(["oom-doctor", str(path), "--model", "bogus"]) == 2
    assert "--model" in capsys.readouterr().err


def test_model_flag_is_used_for_the_plan() -> None:
    for model in ("Qwen/Qwen2.5-VL-3B-Instruct", "Qwen/Qwen2.5-VL-72B-Instruct"):
        plan_line = diagnose(GAUDI_LOG, load({}), model).recommendations[0]
        assert plan_line.startswith("plan from this log's numbers")
        assert f"model {model}" in plan_line


def test_gaudi_logs_get_gaudi_advice_and_cuda_logs_cuda_advice() -> None:
    gaudi = "\n".join(diagnose(GAUDI_OOM, load({})).recommendations)
    assert "VLLM_GRAPH_RESERVED_MEM" in gaudi
    assert "cudagraph" not in gaudi
    assert "--enforce-eager" not in gaudi
    cuda = "\n".join(diagnose(CUDA_CAPTURE.splitlines(), load({})).recommendations)
    assert "cudagraph_capture_sizes" in cuda
    assert "VLLM_GRAPH_RESERVED_MEM" not in cuda


def test_no_setting_gets_two_values() -> None:
    settings = load({"VLLM_MULTIMODAL_BUCKETS": "1600,3136,4096"})
    for lines in (GAUDI_OOM, CUDA_CAPTURE.splitlines(), [*GAUDI_OOM[:1], "INFO Warmup finished", GAUDI_OOM[2]]):
        assert not contradictions(recommend(diagnose_lines(lines), settings))
    two = (Fix("raise it", "VLLM_GRAPH_RESERVED_MEM", 0.2), Fix("raise it more", "VLLM_GRAPH_RESERVED_MEM", 0.4))
    assert contradictions(two) == {"VLLM_GRAPH_RESERVED_MEM": {0.2, 0.4}}


def test_an_oom_line_alone_is_unknown_with_low_confidence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bare.log"
    path.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    code, out = run_json(capsys, str(path))
    assert code == 1
    assert out["stage"] == "unknown"
    assert out["unknown"] is True
    assert out["confidence"] < 0.5


@pytest.mark.parametrize(
    ("lines", "stage"),
    [
        # vLLM V0 with Ray: the worker killed for host memory while requests run.
        (
            [
                "INFO Avg prompt throughput: 10.0 tokens/s",
                "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
            ],
            "runtime",
        ),
        # The shell's line after the kernel's OOM killer ended the server during weight loading.
        (["INFO Loading safetensors checkpoint shards:  40% Completed | 2/5", "Killed"], "startup"),
        (["INFO Model loading took 15.4 GB", "MemoryError"], "startup"),
    ],
)
def test_host_memory_kills_are_host_memory_with_their_stage(lines: list[str], stage: str) -> None:
    d = diagnose_lines(lines)
    assert d.memory == "host"
    assert d.stage == stage
    assert "host ran out of memory" in diagnose(lines, load({})).recommendations[0]


def test_a_sigterm_is_not_a_host_kill() -> None:
    assert diagnose_lines(["Worker VllmWorkerProcess pid 1786 died, exit code: -15"]).stage == "none"


def test_a_gaudi_allocation_failure_while_weights_load_is_startup() -> None:
    lines = [
        "INFO 01-20 12:46:06 loader.py:381] Loading weights on hpu...",
        "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::939524096 (896)MB",
    ]
    d = diagnose(lines, load({}))
    assert d.stage == "startup"
    assert d.backend == "hpu"
    assert any("--tensor-parallel-size" in r for r in d.recommendations)


def test_negative_kv_memory_after_profiling_is_a_kv_cache_failure() -> None:
    # vLLM 0.32 v1/worker/gpu_worker.py logs "Available KV cache memory: %s GiB"; a negative value means profiling
    # left nothing, even when the log ends before vLLM's own refusal.
    d = diagnose_lines(["INFO [gpu_worker.py:760] Available KV cache memory: -1.25 GiB"])
    assert d.stage == "kv_cache"
    assert diagnose_lines(["INFO [gpu_worker.py:760] Available KV cache memory: 1.25 GiB"]).stage == "none"


def test_a_log_that_stops_in_warmup_with_nothing_else_claims_no_oom() -> None:
    # no OOM line, no kill, no traceback: an excerpt copied while warm-up ran ends the same way (issue 34 item 10)
    warm = [f"INFO [Warmup][Graph/Multimodal][{i}/7] batch_size:1 img_size:{b}" for i, b in [(1, 1600), (2, 3136)]]
    d = diagnose(warm, load({"VLLM_MULTIMODAL_BUCKETS": "1600,3136,4096,6400,7744,9216,12544"}))
    assert (d.stage, d.basis, d.cut, d.oom) == ("none", "stopped", "phase", False)
    assert [e.line for e in d.evidence] == [2]
    assert "no out-of-memory failure" in d.recommendations[0]
    assert not any("VLLM_MULTIMODAL_BUCKETS" in r for r in d.recommendations)
    # the same warm-up ended by the kernel's kill is a failure, read from the kill line
    killed = diagnose_lines([*warm, "Killed"])
    assert (killed.stage, killed.memory) == ("graph_capture", "host")
    finished = [*warm, "INFO Warmup finished in 42 secs"]
    assert diagnose_lines(finished).stage == "none"
    all_done = ["INFO [Warmup][Graph/Multimodal][7/7] batch_size:1 img_size:12544"]
    assert diagnose_lines(all_done).stage == "none"

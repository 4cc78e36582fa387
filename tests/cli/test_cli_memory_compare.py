"""``vllm-hpu-mm memory compare LOG``: the public Gaudi log excerpts (tests/data/gaudi_logs), compared with the flags
their ``# inputs:`` headers state, come out within tolerance and with the benchmark's figures; a flag the run did
not use is named with its cause; bad logs get one line and exit 2 (the comparisons themselves:
tests/jobs/test_jobs_compare.py)."""

from __future__ import annotations

import gzip
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.data import REPO
from tests.support.gaudi_logs import ALL_GAUDI_LOGS, CONFIGS, GAUDI_LOGS, stated
from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.values import GIB

RESULTS = REPO / "benchmarks" / "agreement" / "results" / "gaudi_log_reproduction.json"
DEV = GAUDI_LOGS / "dev" / "vllm_gaudi_perf_tuning_llama31_8b_gaudi2.log"
HELD_345 = GAUDI_LOGS / "heldout" / "vllm_fork_345_gaudi2.log"
HELD_809 = GAUDI_LOGS / "heldout" / "vllm_fork_809_deepseek_r1_gaudi2.log"


@pytest.fixture(autouse=True)
def _no_reserve_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_GRAPH_RESERVED_MEM", raising=False)


def model_folder(tmp_path: Path, config: str) -> str:
    """A model folder holding the stored config, as a user's checkpoint folder would."""
    folder = tmp_path / Path(config).stem
    folder.mkdir(exist_ok=True)
    shutil.copy(CONFIGS / config, folder / "config.json")
    return str(folder)


def flags(path: Path, tmp_path: Path) -> list[str]:
    """The sizing flags matching what the log's header states (nothing more: the rest stay the plan's defaults)."""
    h = stated(path)
    runtime = f"{h['runtime']}=={h['release']}" if h.get("release") else h["runtime"]
    out = ["--model", model_folder(tmp_path, h["model"]), "--runtime", runtime, "--device", h["device"]]
    out += ["--tensor-parallel-size", str(h["tp"]), "--block-size", str(h["block_size"])]
    if "gpu_memory_utilization" in h:
        out += ["--gpu-memory-utilization", str(h["gpu_memory_utilization"])]
    if "graph_reserved_mem" in h:
        out += ["--graph-reserved-mem", str(h["graph_reserved_mem"])]
    if h.get("quantization"):
        out += ["--quantization", h["quantization"]]
    if h.get("enforce_eager"):
        out.append("--enforce-eager")
    if h.get("engine"):
        mml, seqs, tokens = h["engine"]
        out += ["--max-model-len", str(mml), "--max-num-seqs", str(seqs), "--max-num-batched-tokens", str(tokens)]
    return out


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["memory", "compare", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _figure(name: str, value: int) -> str:
    """A value as the benchmark's table writes it."""
    if name == "warmup_seconds":
        return f"{value} s"
    if name in ("kv_blocks", "kv_tokens"):
        return str(value)
    return f"{value / GIB:.2f} GiB" if abs(value) >= GIB else f"{value / 2**20:.0f} MiB"


@pytest.mark.parametrize("path", ALL_GAUDI_LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_public_log_with_its_stated_flags_is_within_tolerance_with_the_benchmarks_figures(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run_json(capsys, str(path), *flags(path, tmp_path))
    assert code == 0, out["outside"]
    assert out["within"]
    assert out["compared"] > 0
    by_name = {q["name"]: q for q in out["quantities"]}
    benchmark = [r for r in json.loads(RESULTS.read_text()) if r["log"] == path.stem]
    assert benchmark
    for row in benchmark:  # every figure the benchmark holds to a tolerance, the same here and checked here
        q = by_name[row["quantity"]]
        mode = "from_inputs" if row["mode"] == "inputs alone" else "given_logged"
        assert f"{_figure(q['name'], q['logged'])} / {_figure(q['name'], q[mode])}" == row["logged_planned"]
        assert q[f"tolerance_{mode}"] is not None or row["quantity"] in ("warmup_seconds", "profile")


def test_the_help_names_every_key_the_json_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # held-out CLI round r4, case 18: --help named keys (rows, verdict) the object does not hold
    code, out = run_json(capsys, str(DEV), *flags(DEV, tmp_path), "--gpu-memory-utilization", "0.8")
    assert code == 1
    assert main(["memory", "compare", "--help"]) == 0
    helped = " ".join(capsys.readouterr().out.split()).split("--json", 1)[1]
    keys = {*out, *out["quantities"][0], "likely_cause"} - {"name", "given_basis"}
    named = {key for key in keys if not key.startswith(("difference_", "tolerance_"))}  # "their differences ..."
    assert named <= set(re.findall(r"\w+", helped))
    assert not {"rows", "verdict"} & set(out)
    doc = (REPO / "docs" / "memory-plan.md").read_text()
    assert all(f"`{key}`" in doc for key in out)


def test_the_development_log_compares_every_printed_figure_both_ways(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["memory", "compare", str(DEV), *flags(DEV, tmp_path)])
    text = capsys.readouterr().out
    assert code == 0
    assert "arithmetic: vllm-fork hpu_worker.determine_num_available_blocks" in text
    for label in ("device total", "weights", "profiling run", "free memory", "usable", "graph reserve", "KV cache",
                  "KV blocks", "warm-up"):  # fmt: skip
        assert f"\n  {label} " in text
    assert "4107  4111 +0.10% (ok 5%)" in text
    assert "4106 -0.02% (ok 1%)" in text
    assert "verdict: all 8 comparisons within their tolerance" in text


def test_a_quantity_outside_is_printed_with_its_cause_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the causes themselves: tests/jobs/test_jobs_compare.py
    argv = [*flags(DEV, tmp_path), "--gpu-memory-utilization", "0.8"]
    code, out = run_json(capsys, str(DEV), *argv)
    assert code == 1
    assert {"name", "mode", "logged", "planned", "difference", "tolerance", "likely_cause"} == set(out["outside"][0])
    code = main(["memory", "compare", str(DEV), *argv])
    text = capsys.readouterr().out
    assert code == 1
    assert "outside: usable given the logged free memory: logged 71.30 GiB, planned 63.38 GiB (-11.11%" in text
    assert "likely cause: the log ran with gpu_memory_utilization=0.9" in text


def test_a_log_with_a_kv_cache_but_no_free_memory_says_what_it_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["memory", "compare", str(HELD_345), *flags(HELD_345, tmp_path)])
    text = capsys.readouterr().out
    assert code == 0
    assert "3184 +0.00% (ok 1%) (from the logged KV cache)" in text
    assert "note: the log printed its KV cache but no free memory" in text


def test_a_compressed_log_on_standard_input_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(gzip.compress(DEV.read_bytes()))))
    code, out = run_json(capsys, "-", *flags(DEV, tmp_path))
    assert code == 0
    assert out["compared"] == 8


@pytest.mark.parametrize(
    ("content", "said"),
    [
        # what compare reads, not the doctor's "nothing to diagnose"
        (b"", "is empty: there is nothing to compare; accepted: the memory lines of a Gaudi server's log"),
        (b"\x00" * 64, "holds only NUL bytes (64 bytes): there is no text to compare; accepted: the memory lines"),
        (b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 4, "is an executable (ELF), a binary file"),
        (b"INFO Starting vLLM API server\nINFO Application startup complete.\n",
         "has no memory lines of a Gaudi server to compare; expected any of 'Free device memory"),
    ],
    ids=["empty", "nul-only", "binary", "no-memory-lines"],
)  # fmt: skip
def test_a_log_that_cannot_be_compared_gets_one_line_and_exit_2(
    content: bytes, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(content)
    code = main(["memory", "compare", str(log), *flags(DEV, tmp_path)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert said in captured.err
    assert "Traceback" not in captured.err


def test_a_non_gaudi_device_is_refused_naming_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["memory", "compare", str(DEV), "--device", "h100"])
    assert code == 2
    assert "--device='h100'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("log", "argv", "both"),
    [
        # held-out CLI case 19: refused on the flags alone, the line named only the plan's runtime
        (HELD_809, ["--runtime", "vllm-cuda", "--device", "h100"],
         ("was written by vllm-fork, the plan is for vllm-cuda on h100 (--runtime, --device='h100')",)),
        (REPO / "tests" / "data" / "logs" / "cpu_kv_cache_too_small.log", ["--device", "h100"],
         ("was written by vllm-cpu, the plan is for vllm-cuda on h100",)),
        (HELD_809, ["--pipeline-parallel-size", "2"], ("--pipeline-parallel-size=2", "written by vllm-fork)")),
    ],
    ids=["gaudi-log-cuda-plan", "cpu-log-cuda-plan", "pipeline-stages"],
)  # fmt: skip
def test_a_plan_compare_cannot_read_is_refused_naming_the_logs_writer_too(
    log: Path, argv: list[str], both: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["memory", "compare", str(log), *argv])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    err = captured.err.strip().splitlines()
    assert len(err) == 1
    for said in both:
        assert said in err[0]


def test_a_log_with_no_memory_lines_is_refused_naming_its_writer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "INFO 01-21 06:55:07 [__init__.py:45] - hpu -> vllm_gaudi:register\n"
        "INFO 01-21 06:59:35 [api_server.py:1963] Starting vLLM API server 0 on http://0.0.0.0:8000\n"
    )
    assert main(["memory", "compare", str(log), "--runtime", "vllm-gaudi", "--device", "gaudi2"]) == 2
    assert "(written by vllm-gaudi) has no memory lines of a Gaudi server" in capsys.readouterr().err


GAUDI3 = GAUDI_LOGS / "dev" / "vllm_hpu_plugin_llama31_8b_gaudi3.log"
DOCTOR_LOGS = REPO / "tests" / "data" / "logs"


@pytest.mark.parametrize(
    ("log", "runtime", "written"),
    [
        (DOCTOR_LOGS / "cpu_kv_cache_too_small.log", "vllm-fork", "vllm-cpu"),
        (DOCTOR_LOGS / "vllm_29335_healthy_v1_start.log", "vllm-fork", "vllm-cuda"),
        (DOCTOR_LOGS / "tgi_832_healthy_launch.log", "vllm-gaudi", "TGI"),
        (HELD_809, "vllm-gaudi", "vllm-fork"),
    ],
)
def test_a_log_another_runtime_wrote_is_refused_naming_both(
    log: Path, runtime: str, written: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 34 item 8: a vLLM CPU or CUDA log read against a Gaudi plan exited 1 with Gaudi-specific causes
    code = main(["memory", "compare", str(log), "--runtime", runtime])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    err = captured.err.strip().splitlines()
    assert len(err) == 1
    assert f"was written by {written}, the plan is for {runtime} (--runtime)" in err[0]


def test_a_log_run_with_another_length_is_blamed_on_the_profiling_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 34 item 8: the log's engine line says max_seq_len=4096; planned for 131072, the KV share differs because
    # the runtime profiles and splits memory by the length, not because another process held memory
    argv = flags(GAUDI3, tmp_path)
    argv[argv.index("--max-model-len") + 1] = "131072"
    # V0's token budget at that length, max(131072, 2048): the newest line's prompt buckets then reach 131072 tokens
    argv[argv.index("--max-num-batched-tokens") + 1] = "131072"
    code, out = run_json(capsys, str(GAUDI3), *argv)
    assert code == 1
    causes = [m["likely_cause"] for m in out["outside"]]
    assert causes
    for cause in causes:
        assert cause.startswith("the log ran with max_model_len=4096 where --max-model-len says 131072: vllm-fork's "
                                "profiling pass")  # fmt: skip
        assert "another process" not in cause


def test_a_log_of_several_starts_says_which_run_it_compared_as_calibrate_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # round 8: a restart that failed before loading its weights; compare named no run and read the failed start's
    # length. It reads the run memory calibrate reads (the last with a memory figure) and says so in the same words
    start = (
        "INFO 09-24 17:31:30 llm_engine.py:184] Initializing an LLM engine (v0.5.3.post1) with config: max_seq_len={}"
    )
    body = [line for line in DEV.read_text().splitlines() if not line.startswith("#")]
    log = tmp_path / "failed_restart.log"
    failed = "RuntimeError: synStatus=26 [Generic failure] Device acquire failed."
    log.write_text("\n".join([start.format(131072), *body, start.format(8192), failed]) + "\n")
    code, out = run_json(capsys, str(log), *flags(DEV, tmp_path))
    assert code == 0, out["outside"]
    assert (out["run"], out["runs"]) == (1, 2)
    assert main(["memory", "compare", str(log), *flags(DEV, tmp_path)]) == 0
    said = capsys.readouterr().out.splitlines()[1]
    assert main(["memory", "calibrate", str(log), "--output", str(tmp_path / "p.json")]) in (0, 1)
    assert f"  {said}\n" in capsys.readouterr().out
    assert said.startswith("the log holds 2 server starts: read run 1 of 2, the last that printed a memory figure")


FP8_LOG = """\
INFO 03-11 09:12:01 api_server.py:1045] vLLM API server version 0.9.0.1
INFO 03-11 09:12:09 llm_engine.py:240] Initializing a V0 LLM engine (v0.9.0.1) with config: \
model='Qwen/Qwen2.5-VL-7B-Instruct-FP8-Dynamic', dtype=torch.bfloat16, max_seq_len=32768, tensor_parallel_size=1, \
pipeline_parallel_size=1, quantization=fp8, enforce_eager=False, device_config=hpu
INFO 03-11 09:12:13 hpu_model_runner.py:725] Loading model weights took in total 9.40 GiB of device memory \
(9.41 GiB/94.62 GiB used) and 1.21 GiB of host memory (22.3 GiB/1007 GiB used)
INFO 03-11 09:12:19 hpu_worker.py:314] Free device memory: 84.10 GiB, 75.69 GiB usable \
(gpu_memory_utilization=0.9), 7.569 GiB reserved for HPUGraphs (VLLM_GRAPH_RESERVED_MEM=0.1), 68.12 GiB reserved \
for KV cache
"""


def test_weights_outside_are_blamed_on_the_quantization_the_logs_engine_line_printed_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # r12memory 20's note: the engine line says quantization=fp8, the cause named --quantization only in general
    log = tmp_path / "fp8.log"
    log.write_text(FP8_LOG, encoding="utf-8")
    code, out = run_json(capsys, str(log), "--runtime", "vllm-fork", "--device", "gaudi2", "--model",
                         "Qwen/Qwen2.5-VL-7B-Instruct", "--max-model-len", "32768", "--gpu-memory-utilization",
                         "0.9", "--graph-reserved-mem", "0.1")  # fmt: skip
    assert code == 1
    cause = next(m["likely_cause"] for m in out["outside"] if m["name"] == "weights")
    assert cause.startswith("the log's engine ran with quantization=fp8 (model "
                            "'Qwen/Qwen2.5-VL-7B-Instruct-FP8-Dynamic') where --quantization says none: plan with "
                            "--quantization fp8 and --model "
                            "Qwen/Qwen2.5-VL-7B-Instruct-FP8-Dynamic")  # fmt: skip


def test_a_log_of_one_start_says_run_1_of_1_in_text_as_its_json_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # round 13 (logs 2): the text report named the run only for a log of several starts, though the help says it
    # says which run of how many; compare, calibrate and oom-doctor now say it for one start too
    assert main(["memory", "compare", str(DEV), *flags(DEV, tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "the log holds 1 server start: read run 1 of 1"
    assert main(["memory", "calibrate", str(DEV), "--output", str(tmp_path / "p.json")]) == 0
    assert "\n  the log holds 1 server start: read run 1 of 1\n" in capsys.readouterr().out
    main(["oom-doctor", str(DEV)])
    assert capsys.readouterr().out.split(",")[0].endswith(" (run 1 of 1)")


def test_vllms_own_gpu_kv_cache_stat_line_is_no_evidence_of_a_cuda_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # r15logs 18: before vLLM 0.32 the stat logger said "GPU KV cache usage" on every device; a Gaudi log holding
    # only it was refused as written by vllm-cuda instead of as a log with no memory lines
    log = tmp_path / "stats.log"
    log.write_text("(APIServer pid=4010) INFO 11-20 09:30:10 [loggers.py:127] Engine 000: Avg prompt throughput: "
                   "812.3 tokens/s, Avg generation throughput: 95.1 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV "
                   "cache usage: 2.1%, Prefix cache hit rate: 0.0%\n")  # fmt: skip
    assert main(["memory", "compare", str(log), "--runtime", "vllm-gaudi", "--device", "gaudi2"]) == 2
    err = capsys.readouterr().err
    assert "has no memory lines of a Gaudi server to compare" in err
    assert "vllm-cuda" not in err
    cuda = tmp_path / "cuda.log"  # with a CUDA runner's own line beside it, still another runtime's log
    cuda.write_text(log.read_text() + "INFO 11-20 09:30:11 [gpu_worker.py:298] Available KV cache memory: 50 GiB\n")
    assert main(["memory", "compare", str(cuda), "--runtime", "vllm-gaudi", "--device", "gaudi2"]) == 2
    assert "was written by vllm-cuda" in capsys.readouterr().err

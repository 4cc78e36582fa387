"""``vllm-hpu-mm memory plan``: the table, the --json contract, and exit codes (the plan's figures: the job's
tests, tests/jobs/test_jobs_serve.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vllm_hpu_mm.cli.main import main

GUIDE = [  # the guide describes vllm-fork (vllm-gaudi also keeps back one dummy KV block)
    *(
        "memory",
        "plan",
        "--runtime",
        "vllm-fork",
        "--total-memory-gib",
        "100",
        "--free-memory-gib",
        "100",
        "--gpu-memory-utilization",
        "1",
    ),
    *("--graph-reserved-mem", "0.1", "--graph-prompt-ratio", "0.2", "--graph-multimodal-prompt-ratio", "0.3"),
]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_json_has_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    # small limits and a given budget: the keys are the point, not the default budget search
    code, out = run_json(capsys, "memory", "plan", "--keep-buckets", "--max-model-len", "4096", "--max-num-seqs", "8",
                         "--text-graph-budget", "40")  # fmt: skip
    assert code == 0
    assert set(out["exports"]) == {"environment", "server_args", "files", "notes"}  # type: ignore[call-overload]
    assert out["costs"]["profile"] is None  # type: ignore[index]
    keys = ["usable_bytes", "kv_cache_bytes", "graph_bytes", "decode_graph_bytes", "prefill_text_graph_bytes"]
    keys += ["prefill_vision_graph_bytes", "vision_buckets_captured", "vision_buckets_skipped", "warnings"]
    keys += ["runtime", "runtime_release", "runtime_found", "enforcement", "precision", "bucket_plan"]
    keys += ["pipeline_parallel_size"]
    for key in keys:
        assert key in out
    captured, skipped = out["vision_buckets_captured"], out["vision_buckets_skipped"]
    assert isinstance(captured, list)
    assert isinstance(skipped, list)
    assert sorted(captured + skipped) == [1600, 3136, 4096, 6400, 7744, 9216, 12544]


@pytest.mark.parametrize(
    ("spec", "release"),
    [("vllm-fork==0.7.2", "0.7.2"), ("vllm-fork==0.5.3.post1+Gaudi-1.17.0", "0.5.3.post1+gaudi.1.17.0"),
     ("VLLM_Gaudi==0.19.1-1", "0.19.1.post1"), ("vllm-gaudi", None)],
)  # fmt: skip
def test_json_names_the_release_planned_for_beside_the_runtimes_name(
    capsys: pytest.CaptureFixture[str], spec: str, release: str | None
) -> None:
    # r4releases 16, 17: `.runtime` holds only the name; the release was only in the words of `.runtime_found`
    code, out = run_json(capsys, "memory", "plan", "--runtime", spec, "--max-model-len", "4096", "--max-num-seqs", "8",
                         "--text-graph-budget", "40")  # fmt: skip
    assert code == (1 if "0.5.3" in spec else 0)  # 1.17 cannot load Qwen2.5-VL (r6gaudi 4)
    assert out["runtime"] == spec.partition("==")[0].lower().replace("_", "-")
    assert out["runtime_release"] == release


def test_a_fork_release_whose_registry_lacks_the_model_says_the_server_would_not_start(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # r6gaudi 4: 1.20's registry has Qwen2-VL only; vLLM refuses an unlisted architecture at start-up
    code, out = run_json(capsys, "memory", "plan", "--runtime", "vllm-fork==0.6.6.post1", "--max-model-len", "16384")
    assert code == 1
    errors = [w for w in out["warnings"] if w["code"] == "architecture_not_served"]  # type: ignore[attr-defined]
    assert "does not serve Qwen2_5_VLForConditionalGeneration" in errors[0]["message"]
    # r9releases 16: the fix names the lines whose registry lists it, each as --runtime takes it (1.21.0 is the first)
    assert "vllm-fork==0.7.2 (v0.7.2+Gaudi-1.21.0)" in errors[0]["fix"]
    assert "0.6.6.post1" not in errors[0]["fix"]
    code, _ = run_json(capsys, "memory", "plan", "--runtime", "vllm-fork==0.7.2", "--max-model-len", "16384")
    assert code == 0


def test_memory_plan_and_serve_word_a_start_up_refusal_the_same_way(capsys: pytest.CaptureFixture[str]) -> None:
    # r8fork 5: memory plan exited 1 without saying the server would not start, which serve --dry-run said
    sizing = ["--max-model-len", "8192"]
    assert main(["memory", "plan", "--runtime", "vllm-fork==0.6.6.post1", "--free-memory-gib", "60", *sizing]) == 1
    planned = capsys.readouterr().err.splitlines()
    assert main(["serve", "--dry-run", "--plan-runtime", "vllm-fork==0.6.6.post1", "--plan-free-memory-gib", "60",
                 "Qwen/Qwen2.5-VL-7B-Instruct", *sizing]) == 1  # fmt: skip
    served = capsys.readouterr().err.splitlines()
    assert planned == served
    assert planned[0].startswith("vllm-hpu-mm: error: the server would not start: vllm-fork does not serve Qwen2_5_VL")
    assert planned[0].endswith(
        "fix: a vllm-fork release whose registry lists Qwen2_5_VLForConditionalGeneration: "
        "vllm-fork==0.9.0.1 (v0.9.0.1+Gaudi-1.22.0), vllm-fork==0.8.5.post1 (v0.7.2+Gaudi-1.21.2 - "
        "v0.8.5.post1+Gaudi-1.21.3), vllm-fork==0.7.2 (v0.7.2+Gaudi-1.21.0); or another runtime"
    )


def test_table_names_pools_and_fixes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*GUIDE, "--keep-buckets", "--runtime", "vllm-fork"]) == 0
    out = capsys.readouterr().out
    assert "KV cache" in out
    assert "vision" in out
    assert "decode" in out
    assert "raise VLLM_GRAPH_RESERVED_MEM to" in out


def test_plan_that_does_not_fit_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_json(capsys, "memory", "plan", "--model", "Qwen/Qwen2.5-VL-72B-Instruct", "--device", "h100")
    assert code == 1
    assert out["verdict"] == "does_not_fit"
    main(["memory", "plan", "--model", "Qwen/Qwen2.5-VL-72B-Instruct", "--device", "h100"])
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("vllm-hpu-mm: error: the memory plan does not fit: ")


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--graph-reserved-mem", "1.2"], "--graph-reserved-mem"),
        (["--free-memory-gib", "-3"], "--free-memory-gib"),
        (["--model", "gpt-2"], "--model"),
        (["--buckets", "1600,1601"], "--buckets"),
        (["--device", "abacus"], "--device"),
    ],
)
def test_bad_inputs_exit_2_naming_the_flag(capsys: pytest.CaptureFixture[str], argv: list[str], named: str) -> None:
    assert main(["memory", "plan", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert named in err[0]


def test_bad_environment_ratio_exits_2_naming_the_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO", "1.7")
    assert main(["memory", "plan"]) == 2
    assert "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO" in capsys.readouterr().err


def test_an_off_tile_bucket_in_the_shell_gets_no_note_where_the_runtime_reads_no_list(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # r8fork 14: for vllm-fork 1.21.3, which reads no VLLM_MULTIMODAL_BUCKETS, the note said "read as vllm-gaudi
    # reads it"; r12fork 9 / r12releases 14: any note on the value ("an image pads to its bucket") contradicts the
    # plan's own "not read by vllm-fork 0.8.5.post1"
    monkeypatch.setenv("VLLM_MULTIMODAL_BUCKETS", "1604,3136")
    code = main(["memory", "plan", "--runtime", "vllm-fork==0.8.5.post1", "--max-model-len", "8192",
                 "--free-memory-gib", "60", "--profile", "none", "--json"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0
    assert "VLLM_MULTIMODAL_BUCKETS" in json.loads(captured.out)["settings_not_read"]
    assert "1604" not in captured.err
    assert captured.err == ""
    assert "input_notes" not in json.loads(captured.out)  # nothing noted: no key


def test_an_off_tile_bucket_in_the_shell_is_noted_where_the_runtime_reads_the_list(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_MULTIMODAL_BUCKETS", "1608,3136")  # fork 1.22 takes multiples of 8
    code = main(["memory", "plan", "--runtime", "vllm-fork==0.9.0.1", "--max-model-len", "8192",
                 "--free-memory-gib", "60", "--profile", "none", "--json"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0
    assert "VLLM_MULTIMODAL_BUCKETS" not in json.loads(captured.out)["settings_not_read"]
    assert "1608 not a multiple of 64: kept as given" in captured.err
    (note,) = json.loads(captured.out)["input_notes"]
    assert "1608 not a multiple of 64: kept as given" in note


def test_requests_the_engine_refuses_are_said_as_serve_says_them(capsys: pytest.CaptureFixture[str]) -> None:
    """serve --dry-run and buckets replay count the traffic's refused requests (and exit 1); memory plan, the same job
    on the same traffic, said nothing. Its exit stays the memory's verdict."""
    assert main(["memory", "plan", "--max-model-len", "2048", "--max-num-seqs", "8", "--text-graph-budget", "40"]) == 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("vllm-hpu-mm: warning: ")
    assert re.search(r": \d+ of the \d+ requests sampled from the traffic are refused by the engine", err)
    assert len(err.splitlines()) == 1


def test_the_table_says_a_variable_the_runtime_does_not_read_as_serve_does(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # held-out r7agree case 6: the note was in --json's exports.notes only; the table prints the notes serve prints
    monkeypatch.setenv("VLLM_GRAPH_PROMPT_RATIO", "0.6")
    main(["memory", "plan", "--device", "gaudi2", "--text-graph-budget", "120", "--profile", "none"])
    out = capsys.readouterr().out
    assert "note: your VLLM_GRAPH_PROMPT_RATIO=0.6: not read by vllm-gaudi" in out


def test_json_lists_no_vision_bucket_or_pool_for_a_release_that_warms_no_vision_graph(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # r12fork 21: vllm-fork 1.21.3 reads no VLLM_MULTIMODAL_BUCKETS, yet the JSON said vision_buckets [1600, ...]
    # and vision_pool_mode "private" beside vision_buckets_captured []
    code, out = run_json(capsys, "memory", "plan", "--runtime", "vllm-fork==0.8.5.post1", "--max-model-len", "8192",
                         "--profile", "none")  # fmt: skip
    assert code == 0
    assert out["vision_buckets"] == []
    assert out["vision_pool_mode"] == "none"
    assert out["vision"]["bucketed_on_runtime"] is False  # type: ignore[index]
    code, out = run_json(capsys, "memory", "plan", "--runtime", "vllm-fork==0.9.0.1", "--max-model-len", "8192",
                         "--profile", "none")  # fmt: skip
    assert code == 0
    assert out["vision_buckets"]
    assert out["vision_pool_mode"] == "private"


def test_a_replaced_list_gives_every_reason_that_holds(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # r22vision 15: the default list over the main job's vision pool, and sizes given that a planned list serves
    # better: only the first reason was said
    sizes = tmp_path / "traffic.csv"
    sizes.write_text("width,height,count\n448,448,10\n896,672,5\n1120,1120,3\n224,224,2\n")
    assert main(["memory", "plan", "--device", "gaudi2", "--profile", "none", "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)["bucket_plan"]
    assert alone["reason"].startswith("the configured list does not fit the vision pool")
    assert "given sizes" not in alone["reason"]
    assert main(["memory", "plan", "--device", "gaudi2", "--profile", "none", "--sizes", str(sizes), "--json"]) == 0
    given = json.loads(capsys.readouterr().out)["bucket_plan"]
    assert given["replaced"] is True
    assert given["reason"].startswith("the configured list does not fit the vision pool; planned over the given sizes")

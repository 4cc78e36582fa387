"""``vllm-hpu-mm memory plan``: the table, the --json contract, and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.data import DATA
from vllm_hpu_mm.cli.main import main

GIB = 2**30
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


def test_guide_example_through_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_json(capsys, *GUIDE)
    assert code == 0
    assert out["usable_bytes"] == 100 * GIB
    assert out["graph_bytes"] == 10 * GIB
    assert out["kv_cache_bytes"] == 90 * GIB
    assert out["decode_graph_bytes"] == 8 * GIB
    assert out["prefill_text_graph_bytes"] == round(0.6 * GIB)
    assert out["prefill_vision_graph_bytes"] == 2 * GIB - round(0.6 * GIB)


def test_json_has_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run_json(capsys, "memory", "plan", "--keep-buckets")
    keys = ["usable_bytes", "kv_cache_bytes", "graph_bytes", "decode_graph_bytes", "prefill_text_graph_bytes"]
    keys += ["prefill_vision_graph_bytes", "vision_buckets_captured", "vision_buckets_skipped", "warnings"]
    keys += ["runtime", "runtime_found", "enforcement", "precision", "bucket_plan", "pipeline_parallel_size"]
    for key in keys:
        assert key in out
    captured, skipped = out["vision_buckets_captured"], out["vision_buckets_skipped"]
    assert isinstance(captured, list)
    assert isinstance(skipped, list)
    assert sorted(captured + skipped) == [1600, 3136, 4096, 6400, 7744, 9216, 12544]


def test_a_list_that_does_not_fit_is_replanned_with_the_pool_and_the_figures_say_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out = run_json(capsys, "memory", "plan")
    choice = out["bucket_plan"]
    assert isinstance(choice, dict)
    assert choice["replaced"] is True
    before, after = choice["before"], choice["after"]
    assert out["vision_buckets_captured"] == after["buckets"]
    assert out["vision_buckets_skipped"] == []
    assert after["capture_bytes"] <= out["prefill_vision_graph_bytes"]  # type: ignore[operator]
    # The pruned default list shrinks images above 6400 patches; the planned one keeps 12544 as its largest.
    assert after["buckets"][-1] == 12544
    assert after["num_shrunk"] < before["num_shrunk"]
    assert after["efficiency"] > before["efficiency"]


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


@pytest.mark.parametrize("config", ["unsloth_gemma-3-12b-it.json", "Qwen_Qwen2-VL-2B.json"])
def test_a_tower_vllm_gaudi_buckets_by_images_per_pass_gets_image_counts_not_patch_counts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, config: str
) -> None:
    # vllm-gaudi @091bbadd reads VLLM_MULTIMODAL_BUCKETS as images per pass for Gemma 3 and for families its table
    # does not list (Qwen2-VL), warming passes of 896 x 896 images, and reads no resolutions for them
    (tmp_path / "config.json").write_text((DATA / "configs" / config).read_text())
    code, out = run_json(capsys, "memory", "plan", "--model", str(tmp_path))
    assert code == 0
    env = out["exports"]["environment"]  # type: ignore[index]
    counts = [int(n) for n in env["VLLM_MULTIMODAL_BUCKETS"].split(",")]
    assert counts
    assert set(counts) <= {1, 2, 4, 8}, counts  # the runtime's own passes, those that fit
    assert "VLLM_MULTIMODAL_RESOLUTIONS" not in env

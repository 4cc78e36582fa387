"""`vllm-hpu-mm buckets plan|check` through the real dispatcher (vllm_hpu_mm.cli.main.main)."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.data import PHOTOS, SIZES, size_csv
from vllm_hpu_mm.cli.main import build_parser, main

DEFAULT = "1600,3136,4096,6400,7744,9216,12544"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("VLLM_MULTIMODAL_BUCKETS", "VLLM_HPU_MM_OVERSIZE_POLICY", "VLLM_HPU_MM_ALIGN_MODE"):
        monkeypatch.delenv(name, raising=False)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> dict[str, Any]:
    assert main(["buckets", *argv, "--json"]) == code
    out = capsys.readouterr().out
    result: dict[str, Any] = json.loads(out)  # exactly one JSON object on stdout
    return result


def test_plan_with_no_sizes_uses_the_embedded_real_data(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["buckets", "plan", "--num-buckets", "7"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert "coco_val2017.csv (5000 images) + mathvista_testmini.csv (1000 images)" in lines[0]
    assert lines[-1] == "export VLLM_MULTIMODAL_BUCKETS=384,768,1152,1536,2304,4608,12544"
    assert any(line.split()[:2] == ["total", "6000"] for line in lines)


def test_plan_json_on_coco(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_json(capsys, "plan", "--sizes", str(size_csv("coco_val2017.csv")), "--num-buckets", "7")
    assert result["buckets"] == [384, 768, 1152, 1536, 1600, 1920, 2304]
    assert result["efficiency"] == pytest.approx(0.997, abs=0.001)
    assert result["num_images"] == 5000
    assert result["num_shrunk"] == 0
    per_bucket = result["per_bucket"]
    assert isinstance(per_bucket, dict)
    assert sum(per_bucket.values()) == 5000
    default = result["default"]
    assert isinstance(default, dict)
    assert round(default["efficiency"], 2) == 0.85
    assert result["max_pixels"] == 12544 * 196
    assert result["export"] == "export VLLM_MULTIMODAL_BUCKETS=384,768,1152,1536,1600,1920,2304"


def test_plan_keep_largest_covers_max_pixels(capsys: pytest.CaptureFixture[str]) -> None:
    coco = str(size_csv("coco_val2017.csv"))
    result = run_json(capsys, "plan", "--sizes", coco, "--keep-largest")
    assert result["buckets"][-1] == 12544
    assert result["warnings"] == []
    assert result["efficiency"] > 0.99
    plain = run_json(capsys, "plan", "--sizes", coco)
    assert "largest bucket 2304 is below the 12544 patches" in plain["warnings"][0]


def test_plan_target_efficiency_picks_the_fewest_buckets(capsys: pytest.CaptureFixture[str]) -> None:
    csv = str(size_csv("mathvista_testmini.csv"))
    result = run_json(capsys, "plan", "--sizes", csv, "--target-efficiency", "0.95")
    buckets = result["buckets"]
    assert isinstance(buckets, list)
    efficiency = result["efficiency"]
    assert isinstance(efficiency, float)
    assert efficiency >= 0.95
    fewer = run_json(capsys, "plan", "--sizes", csv, "--num-buckets", str(len(buckets) - 1))
    assert fewer["efficiency"] < 0.95


def test_plan_merges_repeated_sizes_and_image_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = str(size_csv("funsd_forms.csv"))
    for photo in PHOTOS:
        shutil.copy(photo, tmp_path / photo.name)
    (tmp_path / "README.txt").write_text("not an image", encoding="utf-8")
    result = run_json(capsys, "plan", "--sizes", csv, "--sizes", csv, "--images", str(tmp_path))
    assert result["num_images"] == 2 * 199 + 7
    assert "1 non-image files skipped" in str(result["source"])


def test_plan_from_a_pixel_range_states_its_assumption(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_json(capsys, "plan", "--min-pixels", "3136", "--max-pixels", "1003520", "--num-buckets", "4")
    assert "log-uniform" in str(result["source"])
    buckets = result["buckets"]
    assert isinstance(buckets, list)
    assert len(buckets) == 4
    assert buckets[-1] <= 1003520 // 196


def test_plan_writes_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "hist.png"
    assert main(["buckets", "plan", "--sizes", str(size_csv("funsd_forms.csv")), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"histogram written to {png}" in capsys.readouterr().out


def test_check_defaults_to_the_environment_then_the_default_list(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    coco = str(size_csv("coco_val2017.csv"))
    result = run_json(capsys, "check", "--sizes", coco)
    assert result["buckets"] == [int(b) for b in DEFAULT.split(",")]
    assert result["buckets_from"] == "the default list"
    assert round(float(result["efficiency"]), 2) == 0.85
    monkeypatch.setenv("VLLM_MULTIMODAL_BUCKETS", "1536,2304")
    result = run_json(capsys, "check", "--sizes", coco)
    assert result["buckets"] == [1536, 2304]
    assert result["buckets_from"] == "$VLLM_MULTIMODAL_BUCKETS"
    assert result["max_pixels"] == 2304 * 196  # largest bucket x 196


def test_check_human_output_ends_with_the_paste_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["buckets", "check", "64,128,1536", "--sizes", str(size_csv("coco_val2017.csv"))]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("Bucket check of 64,128,1536 (from BUCKETS argument)")
    assert out[-1] == "export VLLM_MULTIMODAL_BUCKETS=64,128,1536"


def test_check_counts_shrunk_images_and_warns_with_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    sroie = str(size_csv("sroie_receipts.csv"))  # receipt scans up to 4961x7016
    assert main(["buckets", "check", DEFAULT, "--sizes", sroie, "--max-pixels", "12845056", "--json"]) == 1
    captured = capsys.readouterr()
    result: dict[str, Any] = json.loads(captured.out)
    assert result["num_shrunk"] > 0
    assert result["num_oversize"] == 0  # shrink policy: every image fits after resizing
    assert "policy shrink" in result["warnings"][0]


def test_check_eager_policy_counts_oversize_images(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VLLM_HPU_MM_OVERSIZE_POLICY", "eager")
    sroie = str(size_csv("sroie_receipts.csv"))
    result = run_json(capsys, "check", DEFAULT, "--sizes", sroie, "--max-pixels", "12845056", code=1)
    assert result["oversize_policy"] == "eager"
    assert result["num_oversize"] > 0


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["plan", "--num-buckets", "0"], "'0' is not positive"),
        (["plan", "--num-buckets", "3", "--target-efficiency", "0.9"], "not allowed with argument"),
        (["plan", "--target-efficiency", "1.5"], "outside (0, 1]"),
        (["plan", "--sizes", "/nonexistent/sizes.csv"], "cannot read it"),
        (["plan", "--images", "/nonexistent/folder"], "not a folder"),
        (["plan", "--images", str(SIZES)], "no readable images among"),
        (["plan", "--min-pixels", "9000", "--max-pixels", "5000"], "above --max-pixels"),
        (["check", "1600,1000"], "bucket 1000 is not a multiple of 64"),
        (["check", "--plot", "/nonexistent/folder/hist.png"], "--plot /nonexistent/folder/hist.png: cannot write it"),
        (["plan", "--bogus"], "unrecognized arguments: --bogus"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_invalid_input_exits_2_with_one_line(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        raise SystemExit(main(["buckets", *argv]))
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert needle in err[0]


def test_bad_csv_row_exits_2_naming_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("width,height\n640,480\n640;480\n", encoding="utf-8")
    assert main(["buckets", "plan", "--sizes", str(bad)]) == 2
    assert "bad.csv:3: width '640;480'" in capsys.readouterr().err


def test_bad_environment_bucket_list_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VLLM_MULTIMODAL_BUCKETS", "1600,abc")
    assert main(["buckets", "check"]) == 2
    assert "VLLM_MULTIMODAL_BUCKETS='1600,abc': 'abc' is not an integer" in capsys.readouterr().err
    monkeypatch.setenv("VLLM_MULTIMODAL_BUCKETS", "None")
    assert main(["buckets", "check"]) == 2
    assert "disables vision bucketing" in capsys.readouterr().err


def test_every_option_has_help() -> None:
    root = build_parser()
    buckets = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction)).choices["buckets"]
    subs = next(a for a in buckets._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(subs) == {"plan", "check", "replay"}
    for parser in subs.values():
        for action in parser._actions:
            assert action.help, f"{parser.prog} {action.option_strings or action.dest} has no help"
    plan_options = {o for a in subs["plan"]._actions for o in a.option_strings}
    assert {
        "--sizes",
        "--images",
        "--min-pixels",
        "--max-pixels",
        "--num-buckets",
        "--target-efficiency",
    } <= plan_options
    assert {"--plot", "--json"} <= plan_options

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


def test_plan_json_is_one_object_with_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    # the figures themselves: tests/jobs/test_jobs_buckets.py
    result = run_json(capsys, "plan", "--sizes", str(size_csv("coco_val2017.csv")), "--num-buckets", "7")
    keys = {"buckets", "efficiency", "num_images", "num_shrunk", "num_oversize", "per_bucket", "real_patches",
            "padded_patches", "source", "goal", "align_mode", "min_pixels", "max_pixels", "default", "refused",
            "num_rejected", "oversize_policy", "warnings", "export"}  # fmt: skip
    assert keys <= set(result)
    assert result["export"] == "export VLLM_MULTIMODAL_BUCKETS=" + ",".join(map(str, result["buckets"]))
    assert sum(result["per_bucket"].values()) == result["num_images"]
    assert result["default"]["buckets"] == [int(b) for b in DEFAULT.split(",")]


def test_plan_writes_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "hist.png"
    assert main(["buckets", "plan", "--sizes", str(size_csv("funsd_forms.csv")), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"histogram written to {png}" in capsys.readouterr().out


def test_check_json_says_where_the_list_came_from(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_json(capsys, "check", "--sizes", str(size_csv("coco_val2017.csv")))
    assert result["buckets_from"] == "the default list"
    assert {"oversize_policy", "num_rejected", "refused", "min_pixels", "max_pixels", "warnings"} <= set(result)


def test_json_names_each_unreadable_image_file_under_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # held-out images round 5, case 19: refused.unreadable was a count, and the file to fix was named only inside
    # the source sentence (three at most); the sizes refused by their limits stay counts
    shutil.copy(PHOTOS[0], tmp_path / PHOTOS[0].name)
    (tmp_path / "sub").mkdir()
    for name in ("broken.png", "sub/b.jpg", "c.webp", "d.gif"):
        (tmp_path / name).write_bytes(bytes(range(256)) * 16)
    (tmp_path / "readme.txt").write_text("not an image", encoding="utf-8")
    unreadable = ["broken.png", "c.webp", "d.gif", "sub/b.jpg"]
    planned = run_json(capsys, "plan", "--images", str(tmp_path), "--num-buckets", "1")
    assert planned["refused"] == {"unreadable": unreadable}
    assert planned["num_images"] == 1
    checked = run_json(capsys, "check", DEFAULT, "--images", str(tmp_path))
    assert checked["refused"] == {"unreadable": unreadable}


def test_sizes_takes_a_folder_as_images_does_and_as_the_other_commands_sizes_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # held-out images round 10, case 12: buckets plan --sizes DIR exited 2 "cannot read it (Is a directory)", while
    # memory plan, fleet plan and buckets replay take --sizes CSV|DIR
    for photo in PHOTOS:
        shutil.copy(photo, tmp_path / photo.name)
    (tmp_path / "broken.jpg").write_bytes(bytes(range(256)) * 16)
    as_images = run_json(capsys, "plan", "--images", str(tmp_path), "--num-buckets", "2")
    as_sizes = run_json(capsys, "plan", "--sizes", str(tmp_path), "--num-buckets", "2")
    assert as_sizes == as_images
    assert as_sizes["num_images"] == len(PHOTOS)
    assert as_sizes["refused"] == {"unreadable": ["broken.jpg"]}
    checked = run_json(capsys, "check", DEFAULT, "--sizes", str(tmp_path))
    assert checked["num_images"] == len(PHOTOS)


def test_check_human_output_ends_with_the_paste_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["buckets", "check", "64,128,1536", "--sizes", str(size_csv("coco_val2017.csv"))]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("Bucket check of 64,128,1536 (from BUCKETS argument)")
    assert out[-1] == "export VLLM_MULTIMODAL_BUCKETS=64,128,1536"


def test_a_bucket_vllm_gaudi_accepts_but_not_whole_tiles_is_checked_as_it_pads_with_a_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # held-out vision round, case 17: 1000 was refused (exit 2); vllm-gaudi reads any integer (vision.py
    # _process_buckets @ 091bbadd only sorts) and pads the 960-patch image to 1000 rows (qwen2_5_vl.py)
    sizes = tmp_path / "s960.csv"
    sizes.write_text("width,height\n560,336\n784,784\n", encoding="utf-8")
    assert main(["buckets", "check", "1000,3136", "--sizes", str(sizes), "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["buckets"] == [1000, 3136]
    assert result["efficiency"] == pytest.approx((960 + 3136) / (1000 + 3136), abs=1e-6)
    assert captured.err.strip().splitlines() == [
        "vllm-hpu-mm: note: BUCKETS argument: 1000 not a multiple of 64: kept as given, but images are whole 112-px "
        "tiles of 64 patches, so such a bucket only adds padding (an image pads to its bucket); nearest whole tiles: "
        "1000 -> 960 or 1024"
    ]
    # r20vision 11: a --json reader gets the same notes in the object
    assert [f"vllm-hpu-mm: note: {n}" for n in result["input_notes"]] == captured.err.strip().splitlines()


def test_check_with_warnings_exits_1_and_prints_them_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    sroie = str(size_csv("sroie_receipts.csv"))  # receipt scans up to 4961x7016: some are shrunk
    assert main(["buckets", "check", DEFAULT, "--sizes", sroie, "--max-pixels", "12845056"]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("warning: ")
    assert "policy shrink" in captured.err
    assert captured.out.strip().splitlines()[-1] == f"export VLLM_MULTIMODAL_BUCKETS={DEFAULT}"


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
        (["check", "1600,1002"], "bucket 1002 is not a multiple of 4"),
        (["check", "--plot", "/nonexistent/folder/hist.png"], "--plot /nonexistent/folder/hist.png: the folder"),
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


@pytest.mark.parametrize(
    ("profile", "wrong"),
    [
        # held-out r10loads case 15: '600:2.5' was "not a segment", never that clients are a whole number
        ("600:2.5,600:4", "'600:2.5': '2.5' is not a whole number of clients"),
        ("x:4", "'x:4': 'x' is not a number of seconds"),
        ("600", "'600' is not a segment (no ':' between seconds and clients)"),
        # held-out r18loads case 11: a profile over the day says the total it was given
        ("86400:2,1:2", "'86400:2,1:2' lasts 86,401 s, over a day (86,400 s)"),
        ("86400:2,0.5:2", "'86400:2,0.5:2' lasts 86,400.5 s, over a day (86,400 s)"),
    ],
)
def test_a_load_profile_segment_that_does_not_parse_is_named_with_what_in_it_is_wrong(
    profile: str, wrong: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["buckets", "replay", "--load-profile", profile]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert f"argument --load-profile: {wrong}; accepted: " in err[0]
    assert "CLIENTS a whole number of requests at once from 0 to 100,000" in err[0]


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
    assert set(subs) == {"plan", "check", "replay", "stale"}
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


def _vision_line(out: str) -> str:
    return next(x for x in out.splitlines() if x.startswith("vision buckets ") and x[len("vision buckets ")].isdigit())


def test_replay_serve_and_memory_plan_print_the_same_vision_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # held-out round r3agree, cases 5-7: replay kept the default list (0.693) where serve and memory plan hand the
    # runtime the list planned for the vision pool (1.000)
    traffic = tmp_path / "traffic.csv"
    traffic.write_text("width,height,text_tokens,output_tokens,count\n448,448,400,60,15\n672,672,400,60,10\n"
                       ",,300,60,25\n")  # fmt: skip
    limits = ["--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--max-model-len", "4096", "--max-num-seqs", "8"]
    plan = ["device", "gaudi2", "sizes", str(traffic), "concurrency", "4", "text-graph-budget", "40"]
    mine = [f"--{v}" if i % 2 == 0 else v for i, v in enumerate(plan)]
    theirs = [f"--plan-{v}" if i % 2 == 0 else v for i, v in enumerate(plan)]
    lines = []
    for argv in (["buckets", "replay", *limits, *mine, "--no-strategies"],
                 ["memory", "plan", *limits, *mine], ["serve", "--dry-run", *limits, *theirs]):  # fmt: skip
        assert main(argv) == 0
        lines.append(_vision_line(capsys.readouterr().out))
    assert lines[0] == lines[1] == lines[2]
    assert not lines[0].startswith(f"vision buckets {DEFAULT}:")  # the plan's list, not the runtime's default


def test_replay_replays_a_list_you_give_as_given_and_says_whose_list_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    traffic = tmp_path / "traffic.csv"
    traffic.write_text("width,height,text_tokens,output_tokens,count\n448,448,400,60,15\n,,300,60,25\n")
    argv = ["buckets", "replay", "--max-model-len", "4096", "--max-num-seqs", "8", "--sizes", str(traffic),
            "--concurrency", "4", "--requests", "40", "--no-strategies", "--no-plan"]  # fmt: skip
    assert main(argv) == 0
    assert "vision buckets: the plan's (" in capsys.readouterr().out
    assert main([*argv, "--buckets", "1600,3136"]) == 0
    out = capsys.readouterr().out
    assert _vision_line(out).startswith("vision buckets 1600,3136:")
    assert "vision buckets: yours (--buckets), replayed as given" in out
    monkeypatch.setenv("VLLM_MULTIMODAL_BUCKETS", "1600,3136")
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert _vision_line(out).startswith("vision buckets 1600,3136:")
    assert "vision buckets: yours (VLLM_MULTIMODAL_BUCKETS), replayed as given" in out


def test_check_gives_no_efficiency_where_every_image_is_refused_as_replay_gives_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # r13replay 12's note: check said efficiency 1.0 of 0 / 0 patches where buckets replay says null (no image ran)
    monkeypatch.setenv("VLLM_MULTIMODAL_BUCKETS", "1600,3136")
    monkeypatch.setenv("VLLM_HPU_MM_OVERSIZE_POLICY", "reject")
    sizes = tmp_path / "big.csv"
    sizes.write_text("width,height,count\n2240,2240,1\n")
    result = run_json(capsys, "check", "--sizes", str(sizes), code=1)
    assert (result["num_rejected"], result["efficiency"]) == (1, None)
    assert main(["buckets", "check", "--sizes", str(sizes)]) == 1
    assert "efficiency: none (no image served)" in capsys.readouterr().out

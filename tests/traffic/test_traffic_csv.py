"""The request-level traffic file: the image-size CSV with optional text columns, read as a stream into counts over
distinct rows, every bad value refused with its line (exit 2 at the CLI), never a hang or memory that grows."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.data import SIZES
from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.errors import ConfigError, InputNote
from vllm_hpu_mm.plan.bucket_choice import read_traffic
from vllm_hpu_mm.replay.scheduler import simulate
from vllm_hpu_mm.replay.schedules import Images, prompts
from vllm_hpu_mm.traffic import csvfile
from vllm_hpu_mm.traffic.csvfile import MAX_SIDE, MAX_TOKENS, read_traffic_csv
from vllm_hpu_mm.traffic.default import default_text, default_traffic
from vllm_hpu_mm.traffic.requests import Request


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "traffic.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_rows_with_text_columns_and_text_only_rows_are_requests(tmp_path: Path) -> None:
    t = read_traffic_csv(write(tmp_path, "width,height,text_tokens,output_tokens,cached_tokens\n640,480,100,20,64\n"
                                         ",,300,5,0\n640,480,100,20,64\n"))  # fmt: skip
    assert t.counts == {Request((640, 480), 100, 20, 64): 2, Request(None, 300, 5, 0): 1}
    assert t.text_only_share() == pytest.approx(1 / 3)
    assert t.images() == {(640, 480): 2}


def test_a_plain_image_size_csv_is_traffic_whose_text_is_drawn_from_the_default(tmp_path: Path) -> None:
    t = read_traffic_csv(SIZES / "funsd_forms.csv")
    assert not t.text_known
    drawn = t.sample(50, 1, default_traffic().text_rows())
    assert all(r.text_known and r.image is not None for r in drawn)


def test_a_count_column_weighs_a_row(tmp_path: Path) -> None:
    t = read_traffic_csv(write(tmp_path, "width,height,count\n448,448,1000000000000\n112,112,1\n"))
    assert t.num_requests == 10**12 + 1
    assert t.num_distinct == 2


@pytest.mark.parametrize(
    "text", ["width,height,count\n640,480,0\n", "text_tokens,count,width,height\n9,0,,\n5,0,64,64\n"]
)
def test_every_row_of_count_zero_is_named_as_such(tmp_path: Path, text: str) -> None:
    # issue 34 item 7: rows were read, none of them weighs anything ("no rows after the header" was wrong)
    with pytest.raises(ConfigError) as info:
        read_traffic_csv(write(tmp_path, text))
    assert str(info.value).endswith("traffic.csv: every row has count 0; accepted: at least one row with count >= 1")


def test_a_text_only_row_of_0_tokens_is_an_empty_prompt_the_replay_counts_refused(tmp_path: Path) -> None:
    # docs/text-buckets.md: vLLM 0.32 refuses an empty prompt at request time and serves on (not invalid input)
    traffic = read_traffic_csv(write(tmp_path, "width,height,text_tokens,output_tokens\n,,0,5\n,,100,5\n"))
    assert traffic.counts == {Request(None, 0, 5): 1, Request(None, 100, 5): 1}
    shape = EngineShape(max_num_seqs=4, max_num_batched_tokens=2048, max_model_len=2048, block_size=128,
                        num_kv_blocks=100)  # fmt: skip
    trace = simulate(prompts(traffic, Images(None), 20), shape, 2)
    refused = dict(trace.refusals)
    assert set(refused) == {"empty"}
    assert 0 < refused["empty"] == trace.refused < 20
    assert trace.refused + trace.completed == 20


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("width,height\n640,\n", ":2: width '640' and height '': give both"),
        ("width,height,text_tokens,cached_tokens\n,,10,20\n", ":2: cached_tokens 20 exceeds text_tokens 10"),
        ("width,height\n" + f"{10**30},100\n", f":2: width {10**30} is out of range; accepted: 1..{MAX_SIDE}"),
        ("width,height,output_tokens\n64,64,0\n", ":2: output_tokens 0 is out of range"),
        ("width,height,text_tokens\n64,64,1e9\n", ":2: text_tokens '1e9' is not an integer"),
        ("name\nx\n", ":1: header 'name' lacks width,height"),
        (
            "width,height,text_tokens,cached_tokens\n640,480,10,20\n",
            ":2: cached_tokens 20 exceeds text_tokens 10 of the request",
        ),
        ("width,height,cached_tokens\n640,480,20\n", ":2: cached_tokens 20 without text_tokens"),
        ("width,height,width\n640,480,320\n", ":1: header names width more than once"),
        ("width,height,text_tokens,TEXT_TOKENS\n640,480,1,2\n", ":1: header names text_tokens more than once"),
        ("width,height\n" + "9" * 100_000 + "x,1\n", "... (100,001 characters) is not an integer"),
        ("width,height\n640,480\n640,480,1\n", ":3: 3 fields where the header names 2"),  # its 1 was dropped unread
        ("width,height\n640,480,,7\n", ":2: 4 fields where the header names 2"),
    ],
)
def test_bad_rows_name_the_file_and_line(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        read_traffic_csv(write(tmp_path, text))
    assert "traffic.csv" in str(info.value)
    assert needle in str(info.value)
    assert len(str(info.value)) < 400  # a long cell is cut, never echoed whole


@settings(max_examples=50, deadline=None)
@given(st.integers(MAX_SIDE + 1, 10**40), st.integers(1, 10**40))
def test_any_side_beyond_any_real_image_is_refused_at_once(side: int, other: int) -> None:
    rows = [["width", "height"], [str(side), str(other)]]
    with pytest.raises(ConfigError, match="out of range"):
        csvfile.parse_rows(iter(rows), "t.csv")


@settings(max_examples=50, deadline=None)
@given(st.integers(MAX_TOKENS + 1, 10**40))
def test_token_counts_beyond_any_context_are_refused(tokens: int) -> None:
    with pytest.raises(ConfigError, match="out of range"):
        csvfile.parse_rows(iter([["width", "height", "text_tokens"], ["", "", str(tokens)]]), "t.csv")


def test_a_long_file_of_few_sizes_is_held_as_counts(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["width", "height"])
        out.writerows([(640, 480), (1024, 768), (448, 448)] * 100_000)
    t = read_traffic_csv(path)
    assert t.num_requests == 300_000
    assert t.num_distinct == 3


def test_a_file_with_more_distinct_rows_than_kept_is_sampled_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(csvfile, "MAX_DISTINCT", 100)
    path = tmp_path / "wide.csv"
    path.write_text("width,height,text_tokens\n" + "".join(f"64,64,{i + 1}\n" for i in range(5000)))
    t = read_traffic_csv(path)
    assert t.num_distinct <= 100
    assert "a uniform sample of 100 of 5000 rows" in t.source


def test_the_cli_refuses_an_absurd_size_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, f"width,height\n{10**30},100\n")
    assert main(["buckets", "plan", "--sizes", str(path)]) == 2
    assert "out of range" in capsys.readouterr().err


def test_the_embedded_default_traffic_has_text_answers_prefixes_and_text_only_requests() -> None:
    t = default_traffic()
    assert t.num_requests == 7500
    assert t.text_known
    assert t.text_only_share() == pytest.approx(0.2)
    assert sum(t.images().values()) == 6000
    assert any((r.cached_tokens or 0) > 0 for r in t.counts)


def test_a_known_prompt_without_an_answer_length_draws_only_the_answer(tmp_path: Path) -> None:
    t = read_traffic_csv(write(tmp_path, "width,height,text_tokens\n,,300\n,,900\n"))
    drawn = t.sample(40, 3, default_traffic().text_rows())
    assert {r.text_tokens for r in drawn} <= {300, 900}
    assert len({r.output_tokens for r in drawn}) > 1
    assert all(r.cached_tokens == 0 for r in drawn)


def test_the_default_text_distribution_is_counted_once_and_read_only() -> None:
    """default_text is kept (every schedule asks for it): the default traffic's own text rows, and no caller can
    change what the next one draws from."""
    text = default_text()
    assert text is default_text()
    assert dict(text) == default_traffic().text_rows()
    with pytest.raises(TypeError):
        text[(1, 1, 0)] = 1  # type: ignore[index]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32"])
def test_a_csv_with_a_utf16_or_utf32_byte_order_mark_is_read_as_the_utf8_one(tmp_path: Path, encoding: str) -> None:
    text = "width,height,text_tokens\n640,480,100\n"
    wide = tmp_path / "wide.csv"
    wide.write_text(text, encoding=encoding)
    assert read_traffic_csv(wide).counts == read_traffic_csv(write(tmp_path, text)).counts


def test_utf16_without_a_byte_order_mark_is_named_with_what_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bare.csv"
    path.write_bytes("width,height\n640,480\n".encode("utf-16-le"))
    with pytest.raises(ConfigError, match=r"^--sizes .*bare\.csv: UTF-16 without a byte-order mark; accepted: a UTF-8"):
        read_traffic_csv(path)


@pytest.mark.parametrize(
    ("name", "text", "kind"),
    [("t.json", '[{"width": 640, "height": 480}]', "JSON"), ("t.yaml", "- {width: 640, height: 480}\n", "YAML"),
     ("m.yaml", "width: 640\n", "YAML")],
)  # fmt: skip
def test_json_or_yaml_given_for_traffic_is_named_with_every_form_the_flag_accepts(
    tmp_path: Path, name: str, text: str, kind: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(
        ConfigError, match=rf"^--plan-sizes .*{name}: a {kind} file, not a CSV; .*or a folder of images$"
    ):
        read_traffic(str(path), flag="--plan-sizes")
    with pytest.raises(ConfigError, match=rf"a {kind} file, not a CSV; .* one row per request$"):
        read_traffic_csv(path)  # `buckets plan --sizes` reads a CSV only: no folder offered


def test_an_empty_folder_is_named_by_the_flag_the_user_typed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--plan-sizes .*: no readable images among 0 files; accepted: .*a CSV"):
        read_traffic(str(tmp_path), flag="--plan-sizes")


def test_an_unknown_column_is_read_past_with_one_note_at_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "width,height,colour\n640,480,red\n")
    with pytest.warns(InputNote, match=r"column 'colour' ignored; read: width, height"):
        assert read_traffic_csv(path).counts == {Request((640, 480)): 1}
    assert main(["buckets", "check", "--sizes", str(path), "--json"]) in (0, 1)
    notes = [line for line in capsys.readouterr().err.splitlines() if "colour" in line]
    assert notes == [f"vllm-hpu-mm: note: --sizes {path}: column 'colour' ignored; read: width, height, text_tokens, "
                     "output_tokens, cached_tokens, count"]  # fmt: skip


@pytest.mark.parametrize(
    "command", [["buckets", "plan"], ["buckets", "check"], ["memory", "plan", "--profile", "none"]]
)
def test_an_image_file_given_as_sizes_is_named_as_one_with_every_form_the_flag_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    # r14images 13: a JPEG was "not UTF-8 text; accepted: ... CSV", the folder of images --sizes also takes unsaid
    from PIL import Image

    photo = tmp_path / "a.jpg"
    Image.new("RGB", (64, 48)).save(photo)
    assert main([*command, "--sizes", str(photo)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"--sizes {photo}: an image file (JPEG), not a CSV;" in err
    assert err.endswith("or a folder of images (pass the folder that holds it)")

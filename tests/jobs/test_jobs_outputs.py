"""Every command that writes a file checks where before it runs: never over one of its inputs, never over a file of
the user's that is not of the kind the flag writes, never a folder or a path in a missing folder; a re-run replaces
its own output (a folder output: wholly, as its record lists it). The rules on small files (``jobs/outputs.py``),
then each writing command through the CLI."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.data import REPO
from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.jobs.outputs import RECORD, check_output, check_output_folder, replace_folder

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
PROFILE = json.dumps({"version": 1, "costs": {}}).encode()
GAUGES = (
    b"# HELP vllm_hpu_mm_stale_plan_ratio r\n"
    b"# TYPE vllm_hpu_mm_stale_plan_ratio gauge\nvllm_hpu_mm_stale_plan_ratio 1\n"
)
METRICS = REPO / "tests" / "data" / "metrics" / "planned.txt"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("kind", "ours", "theirs"),
    [("png", PNG, b"width,height\n640,480\n"), ("profile", PROFILE, b"INFO a server log line\n"),
     ("textfile", GAUGES, b"# HELP vllm:num_requests_running x\nvllm:num_requests_running 0\n")],
    ids=["png", "profile", "textfile"],
)  # fmt: skip
def test_a_file_of_the_flags_kind_is_replaced_any_other_file_of_the_users_is_refused(
    tmp_path: Path, kind: str, ours: bytes, theirs: bytes
) -> None:
    mine, yours, empty, new = tmp_path / "mine", tmp_path / "yours", tmp_path / "empty", tmp_path / "new"
    mine.write_bytes(ours)
    yours.write_bytes(theirs)
    empty.write_bytes(b"")
    for path in (mine, empty, new):
        assert check_output(str(path), "--out", kind, []) == path  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^--out .*yours is a file of yours that is not .*: writing .* there would "
                                          r"overwrite it"):  # fmt: skip
        check_output(str(yours), "--out", kind, [])  # type: ignore[arg-type]


def test_an_input_a_folder_and_a_missing_folder_are_refused_naming_the_flag(tmp_path: Path) -> None:
    sizes = tmp_path / "sizes.csv"
    sizes.write_text("width,height\n640,480\n")
    link = tmp_path / "alias.png"
    link.symlink_to(sizes)
    for given in (str(sizes), str(link), f"{tmp_path}/./sub/../sizes.csv"):
        with pytest.raises(ConfigError, match=r"^--plot .* is the same file as the --sizes .*sizes.csv"):
            check_output(given, "--plot", "png", [("--from-metrics", "http://h/metrics"), ("--sizes", str(sizes))])
    with pytest.raises(ConfigError, match=r"is a folder"):
        check_output(str(tmp_path), "--plot", "png", [])
    with pytest.raises(ConfigError, match=r"the folder .*missing does not exist"):
        check_output(str(tmp_path / "missing" / "p.png"), "--plot", "png", [])
    made = tmp_path / "cache" / "profile.json"  # a default path: its folder is made
    assert check_output(str(made), "the default profile path", "profile", [], create_folder=True) == made


def _untouched(path: Path, before: bytes, argv: tuple[str, ...], said: str) -> None:
    code, out, err = run(*argv)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1, err
    assert said in err, err
    assert path.read_bytes() == before


def test_no_writing_command_writes_over_the_users_files(tmp_path: Path) -> None:
    sizes = tmp_path / "traffic.csv"
    sizes.write_text("width,height\n640,480\n1280,720\n")
    metrics = tmp_path / "page.txt"
    metrics.write_bytes(METRICS.read_bytes())
    log = tmp_path / "server.log"
    log.write_bytes((REPO / "tests" / "data" / "logs" / "vllm_gaudi_warmup_doc.log").read_bytes())
    same = "is the same file as the"
    for command in (("buckets", "plan"), ("buckets", "check", "1600,3136")):
        _untouched(sizes, sizes.read_bytes(), (*command, "--sizes", str(sizes), "--plot", str(sizes)), same)
    replay = ("buckets", "replay", "--text-graph-budget", "40", "--requests", "20")
    _untouched(sizes, sizes.read_bytes(), (*replay, "--sizes", str(sizes), "--plot", str(sizes)), same)
    _untouched(metrics, metrics.read_bytes(), (*replay, "--from-metrics", str(metrics), "--plot", str(metrics)), same)
    stale = ("buckets", "stale", "--from-metrics", str(metrics), "--textfile")
    _untouched(metrics, metrics.read_bytes(), (*stale, str(metrics)), same)
    _untouched(sizes, sizes.read_bytes(), (*stale, str(sizes)), "is a file of yours that is not a gauge file")
    _untouched(sizes, sizes.read_bytes(), ("memory", "calibrate", str(log), "--output", str(sizes)),
               "is a file of yours that is not a profile")  # fmt: skip
    _untouched(log, log.read_bytes(), ("memory", "calibrate", "--metrics", str(metrics), "--output", str(log)),
               "is a file of yours that is not a profile")  # fmt: skip
    assert not (tmp_path / "missing").exists()
    code, _, err = run("memory", "calibrate", str(log), "--output", str(tmp_path / "missing" / "p.json"))
    assert code == 2
    assert "does not exist" in err
    assert not (tmp_path / "missing").exists()


def test_no_writing_command_writes_inside_an_input_folder(tmp_path: Path) -> None:
    # held-out vision round, case 19: `buckets plan --images imgs/ --plot imgs/gray16.png` wrote the plot over a PNG
    # the plan was reading (a PNG is the --plot's own kind, so only the folder rule stops it)
    folder = tmp_path / "imgs"
    folder.mkdir()
    image = folder / "gray16.png"
    image.write_bytes(PNG)
    (folder / "config.json").write_text("{}")  # also read as a local model's folder
    log = REPO / "tests" / "data" / "logs" / "vllm_gaudi_warmup_doc.log"
    inside = "is inside the"
    for command in (("buckets", "plan"), ("buckets", "check", "1600,3136")):
        _untouched(image, PNG, (*command, "--images", str(folder), "--plot", str(image)), inside)
        _untouched(image, PNG, (*command, "--images", str(folder), "--plot", str(folder / "new.png")), inside)
    replay = ("buckets", "replay", "--text-graph-budget", "40", "--requests", "20", "--sizes", str(folder))
    _untouched(image, PNG, (*replay, "--plot", str(image)), inside)
    stale = ("buckets", "stale", "--from-metrics", str(METRICS), "--model", str(folder))
    _untouched(image, PNG, (*stale, "--textfile", str(folder / "g.prom")), inside)
    _untouched(image, PNG, ("memory", "calibrate", str(log), "--model", str(folder), "--output",
                            str(folder / "p.json")), inside)  # fmt: skip
    _untouched(image, PNG, ("fleet", "plan", "--model", str(folder), "--request-rate", "1", "--ttft-p99", "1000",
                            "--tpot-p99", "100", "--out", str(folder / "out")), inside)  # fmt: skip
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "gray16.png"]


def test_a_path_inside_an_input_folder_is_refused_naming_the_folder(tmp_path: Path) -> None:
    (tmp_path / "imgs" / "sub").mkdir(parents=True)
    for given in ("imgs/new.png", "imgs/sub/new.png", "imgs/../imgs/new.png"):
        with pytest.raises(ConfigError, match=r"^--plot .*new.png is inside the --images folder .*imgs: writing the "
                                              r"plot there .*; accepted: a path outside"):  # fmt: skip
            check_output(str(tmp_path / given), "--plot", "png", [("--images", str(tmp_path / "imgs"))])
    assert check_output(str(tmp_path / "imgs2.png"), "--plot", "png", [("--images", str(tmp_path / "imgs"))])
    with pytest.raises(ConfigError, match=r"^--out .*imgs/out is inside the --images folder"):
        check_output_folder(str(tmp_path / "imgs" / "out"), "--out", [("--images", str(tmp_path / "imgs"))])


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_folder_output_replaces_its_own_earlier_output_wholly_and_nothing_else(tmp_path: Path) -> None:
    # held-out fleet round, case 14: a smaller plan over a larger one left its node-1..5.sh beside the new node-0.sh
    out = tmp_path / "out"
    larger = {"fleet.json": "{}\n", **{f"dp/node-{n}.sh": f"#!/bin/sh\n# {n}\n" for n in range(6)}}
    replace_folder(str(out), "--out", larger, executable=[f"dp/node-{n}.sh" for n in range(6)])
    smaller = {"fleet.json": '{"smaller": 1}\n', "dp/node-0.sh": "#!/bin/sh\n# new\n", "replica/a.txt": "a\n"}
    written = replace_folder(str(out), "--out", smaller, executable=["dp/node-0.sh"])
    tree = _tree(out)
    assert sorted(tree) == ["dp/node-0.sh", "fleet.json", "replica/a.txt", RECORD]
    assert [p.relative_to(out).as_posix() for p in written] == [*smaller, RECORD]
    assert {k: v.decode() for k, v in tree.items() if k != RECORD} == smaller
    # the record is sha256sum's own format, of every file but itself
    lines = tree[RECORD].decode().splitlines()
    assert [line.split("  ", 1)[1] for line in lines] == sorted(smaller)
    assert all(hashlib.sha256(tree[line[66:]]).hexdigest() == line[:64] for line in lines)
    assert (out / "dp" / "node-0.sh").stat().st_mode & 0o777 == 0o755
    assert (out / "fleet.json").stat().st_mode & 0o111 == 0


@pytest.mark.parametrize(
    ("spoil", "said"),
    [
        (lambda out: (out / "notes.txt").write_text("mine\n"), "holds notes.txt, which its record"),
        (lambda out: (out / "dp" / "node-0.sh").write_text("#!/bin/sh\n# edited\n"),
         "dp/node-0.sh was changed since vllm-hpu-mm wrote it"),
        (lambda out: (out / RECORD).unlink(), "holds fleet.json and no record"),
        (lambda out: (out / "dp" / "link.sh").symlink_to(out / "fleet.json"), "dp/link.sh is a link"),
        (lambda out: (out / RECORD).write_text("not a record\n"), "is not a record vllm-hpu-mm wrote"),
    ],
    ids=["a-file-of-yours", "a-changed-file", "no-record", "a-link", "a-record-not-ours"],
)  # fmt: skip
def test_a_folder_holding_anything_but_its_own_earlier_output_is_refused_and_left_as_it_is(
    tmp_path: Path, spoil: Callable[[Path], object], said: str
) -> None:
    out = tmp_path / "out"
    replace_folder(str(out), "--out", {"fleet.json": "{}\n", "dp/node-0.sh": "#!/bin/sh\n"})
    spoil(out)
    before = _tree(out)
    for attempt in (lambda: check_output_folder(str(out), "--out", []),
                    lambda: replace_folder(str(out), "--out", {"fleet.json": "{}\n"})):  # fmt: skip
        with pytest.raises(ConfigError, match=f"^--out {out}: .*{re.escape(said)}.*; accepted: a new or empty folder"):
            attempt()
    assert _tree(out) == before


def test_a_folder_output_is_new_or_empty_and_never_holds_an_input(tmp_path: Path) -> None:
    assert check_output_folder(str(tmp_path / "new"), "--out", []) == []
    (tmp_path / "empty" / "sub").mkdir(parents=True)  # empty folders hold nothing to lose
    assert check_output_folder(str(tmp_path / "empty"), "--out", []) == []
    sizes = tmp_path / "sizes.csv"
    sizes.write_text("width,height\n640,480\n")
    with pytest.raises(ConfigError, match=r"^--out .* holds the --sizes .*sizes.csv: writing there could replace it"):
        check_output_folder(str(tmp_path), "--out", [("--model", "Qwen/Qwen2.5-VL-7B-Instruct"),
                                                     ("--sizes", str(sizes))])  # fmt: skip
    with pytest.raises(ConfigError, match=r"^--out .*sizes.csv: not a folder"):
        check_output_folder(str(sizes), "--out", [])

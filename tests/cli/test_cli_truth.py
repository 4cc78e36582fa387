"""The commands say what is true: what the served processor does to an image (HTTP 400 under the reject policy, a
refusal above the server's image limits), which input a runtime refuses, and what a plan hands the runtime."""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.buckets.admission import admit, admit_traffic
from vllm_hpu_mm.buckets.sizes import SizeSet
from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.errors import ConfigError, NothingServed
from vllm_hpu_mm.preprocess.image import check_dimensions
from vllm_hpu_mm.preprocess.limits import dimension_problem
from vllm_hpu_mm.traffic.requests import Request, Traffic
from vllm_hpu_mm.values import MAX_BUCKET


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def csv(tmp_path: Path, *rows: tuple[int, int]) -> str:
    path = tmp_path / "sizes.csv"
    path.write_text("width,height\n" + "".join(f"{w},{h}\n" for w, h in rows))
    return str(path)


# --- buckets check under each oversize policy -------------------------------------------------------------------------


def test_under_reject_check_counts_the_images_the_server_answers_with_http_400(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VLLM_HPU_MM_OVERSIZE_POLICY", "reject")
    sizes = csv(tmp_path, (640, 480), (1024, 768), (3000, 2000), (4000, 3000))  # the last two: above 12544 patches
    code, out, err = run("buckets", "check", "--json", "--sizes", sizes)
    report = json.loads(out)
    assert code == 1
    assert report["num_rejected"] == 2
    assert report["num_shrunk"] == 0  # not "shrunk": the server refuses them
    # the efficiency is the served images'
    assert report["padded_patches"] == sum(int(b) * n for b, n in report["per_bucket"].items())
    assert "answers them with HTTP 400" in " ".join(report["warnings"])
    code, out, err = run("buckets", "check", "--sizes", sizes)
    assert code == 1
    assert "(HTTP 400)" in out
    assert "2 rejected" in out
    assert "answers them with HTTP 400" in err


def test_under_shrink_the_same_images_are_shrunk_and_served(tmp_path: Path) -> None:
    sizes = csv(tmp_path, (640, 480), (1024, 768), (3000, 2000), (4000, 3000))
    code, out, _ = run("buckets", "check", "--json", "--sizes", sizes)
    report = json.loads(out)
    assert code == 0
    assert report["num_shrunk"] == 2
    assert report["num_rejected"] == 0


def test_under_eager_the_images_above_run_at_their_own_size(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:  # fmt: skip
    monkeypatch.setenv("VLLM_HPU_MM_OVERSIZE_POLICY", "eager")
    sizes = csv(tmp_path, (640, 480), (3000, 2000))
    _, out, _ = run("buckets", "check", "--json", "--sizes", sizes)
    report = json.loads(out)
    assert report["num_oversize"] == 1
    assert report["num_shrunk"] == 0
    assert report["max_pixels"] == 12845056  # the served processor's own limit, not the largest bucket's


# --- images the server refuses are not planned ------------------------------------------------------------------------


def test_images_the_server_refuses_are_left_out_and_reported(tmp_path: Path) -> None:
    sizes = csv(tmp_path, (640, 480), (100_000, 10), (30_000, 30_000))  # aspect 10000:1; 900 megapixels
    for command in (("buckets", "plan"), ("buckets", "check")):
        code, out, _ = run(*command, "--json", "--sizes", sizes)
        report = json.loads(out)
        assert code in (0, 1)
        assert report["num_images"] == 1
        assert report["refused"] == {"aspect_ratio": 1, "pixels": 1}
        assert "2 images the server refuses left out" in report["source"]
    code, out, _ = run("memory", "plan", "--json", "--sizes", sizes, "--text-graph-budget", "60")  # no search: seconds
    assert "2 images the server refuses left out" in json.loads(out)["bucket_plan"]["sizes"]


def test_when_the_server_refuses_every_image_there_is_nothing_to_plan(tmp_path: Path) -> None:
    code, _, err = run("buckets", "plan", "--sizes", csv(tmp_path, (100_000, 10)))
    assert code == 2
    assert "the server refuses every image (1 with an aspect ratio above VLLM_HPU_MM_MAX_ASPECT_RATIO=200)" in err


def test_a_replay_of_traffic_whose_every_image_the_server_refuses_is_a_finding_with_its_report(tmp_path: Path) -> None:
    # held-out round r4loads, case 13: well-formed traffic of which nothing runs is exit 1 with the counts, not exit 2
    sizes = csv(tmp_path, (30_000, 100), (15_000, 12_000))
    code, out, err = run("buckets", "replay", "--json", "--sizes", sizes, "--requests", "20", "--concurrency", "2",
                         "--no-plan", "--no-strategies")  # fmt: skip
    assert code == 1
    report = json.loads(out)
    assert (report["requests_replayed"], report["requests_refused"]["total"]) == (0, 20)
    assert report["vision"]["images"] == 0
    assert "no request ran" in err


@pytest.mark.parametrize("rows", ["30000,100,200,50,5\n448,448,300,40,5\n,,300,40,10\n",
                                  "30000,100,200,50,5\n15000,12000,200,50,5\n"], ids=["some", "every"])  # fmt: skip
def test_serve_dry_run_memory_plan_and_replay_count_the_requests_whose_image_the_server_refuses_alike(
    tmp_path: Path, rows: str
) -> None:
    # held-out round r4loads, cases 13 and 16: the dry run dropped these requests before sampling (every image
    # refused: exit 2, no report) where buckets replay counts them refused (exit 1)
    sizes = tmp_path / "traffic.csv"
    sizes.write_text("width,height,text_tokens,output_tokens,count\n" + rows)
    common = ("--max-model-len", "8192", "--max-num-seqs", "64", "--block-size", "128")
    code, out, _ = run("buckets", "replay", "--json", "--sizes", str(sizes), "--concurrency", "4", "--no-plan",
                       "--no-strategies", *common)  # fmt: skip
    assert code == 1
    replayed = json.loads(out)
    refused = replayed["requests_refused"]
    assert refused["total"] == refused["image_refused"] > 0
    code, out, err = run("serve", "--dry-run", "--json", "--plan-sizes", str(sizes), "--plan-concurrency", "4",
                         "--plan-output-dir", str(tmp_path / "out"), *common)  # fmt: skip
    assert code == 1
    served = json.loads(out)["plan"]["text_bucket_plan"]
    for key in ("requests_refused", "requests_replayed", "requests_sampled"):
        assert served[key] == replayed[key]
    assert served["vision"]["images"] == replayed["vision"]["images"]
    said = f"{refused['total']} of the {replayed['requests_sampled']} requests sampled from the traffic are refused"
    assert f"error: {said}" in err
    code, _, err = run("memory", "plan", "--json", "--sizes", str(sizes), "--concurrency", "4", *common)
    assert code == 0  # memory plan's exit is the plan's fit; the refusals are its warning
    assert f"warning: {said}" in err


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 10**6), st.integers(1, 10**6)), min_size=1, max_size=40),
    max_image_pixels=st.integers(1, 10**9),
    max_aspect_ratio=st.floats(1, 1000),
)
def test_admission_keeps_exactly_what_the_served_loader_accepts(
    sizes: list[tuple[int, int]], max_image_pixels: int, max_aspect_ratio: float
) -> None:
    accepted = [s for s in sizes if dimension_problem(*s, max_image_pixels=max_image_pixels,
                                                      max_aspect_ratio=max_aspect_ratio) is None]  # fmt: skip
    try:
        admission = admit(SizeSet.of(sizes, "t"), max_image_pixels=max_image_pixels,
                          max_aspect_ratio=max_aspect_ratio)  # fmt: skip
    except ConfigError:
        assert not accepted
        return
    assert dict(admission.sizes.counts) == dict(Counter(accepted))
    assert admission.num_refused == len(sizes) - len(accepted)
    for size in admission.sizes.counts:
        check_dimensions(*size, max_image_pixels=max_image_pixels, max_aspect_ratio=max_aspect_ratio)  # the loader's


def test_traffic_leaves_out_the_requests_whose_image_the_server_refuses_and_keeps_text_only_ones() -> None:
    wide, big, fine = Request((4000, 10), 100, 10), Request((9000, 9000), 200, 20), Request((640, 480), 300, 30)
    text_only = Request(None, 400, 40)
    traffic = Traffic({wide: 3, big: 2, fine: 5, text_only: 7}, "t")
    served = admit_traffic(traffic, max_image_pixels=100_000_000, max_aspect_ratio=500)
    assert served is traffic  # nothing refused: the traffic as it was
    served = admit_traffic(traffic, max_image_pixels=1_000_000, max_aspect_ratio=500)
    assert dict(served.counts) == {wide: 3, fine: 5, text_only: 7}
    assert (
        "2 images the server refuses left out (2 above VLLM_HPU_MM_MAX_IMAGE_PIXELS=1000000), with their requests"
        in (served.source)
    )
    served = admit_traffic(traffic, max_image_pixels=100_000_000, max_aspect_ratio=100)
    assert dict(served.counts) == {big: 2, fine: 5, text_only: 7}
    # every image refused, a text-only request served: the text-only traffic, not "nothing served" (r5fleet case 5)
    served = admit_traffic(Traffic({big: 1, text_only: 1}, "t"), max_image_pixels=1_000_000, max_aspect_ratio=500)
    assert dict(served.counts) == {text_only: 1}
    with pytest.raises(NothingServed, match="refuses every image"):
        admit_traffic(Traffic({big: 1, wide: 2}, "t"), max_image_pixels=1_000_000, max_aspect_ratio=100)


def test_a_plan_over_traffic_counts_the_requests_whose_image_the_server_refuses_as_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    csv = tmp_path / "traffic.csv"
    csv.write_text("width,height,text_tokens,output_tokens,count\n640,480,200,50,40\n20000,20000,200,50,10\n,,300,60,"
                   "20\n", encoding="utf-8")  # fmt: skip
    monkeypatch.setenv("VLLM_HPU_MM_MAX_IMAGE_PIXELS", "100000000")
    assert main(["memory", "plan", "--json", "--sizes", str(csv)]) == 0
    plan = json.loads(capsys.readouterr().out)
    # the vision buckets are chosen over the images served; the text replay counts the others' requests refused
    sizes = plan["bucket_plan"]["sizes"]
    assert "10 images the server refuses left out (10 above VLLM_HPU_MM_MAX_IMAGE_PIXELS=100000000)" in sizes
    text = plan["text_bucket_plan"]
    assert text["requests_refused"]["total"] == text["requests_refused"]["image_refused"] > 0
    assert text["requests_replayed"] > 0


# --- absurd values are refused, naming them ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("buckets", "check", str(64 * 10**50)), f"is larger than any image can be (at most {MAX_BUCKET} patches"),
        (("buckets", "check", f"1600,{MAX_BUCKET + 64}"), "is larger than any image can be"),
        (("memory", "plan", "--buckets", f"{2 * MAX_BUCKET}"), "--buckets: bucket 2097152 is larger"),
        (("buckets", "plan", "--max-pixels", "99999999999999"),
         "--max-pixels: '99999999999999' is larger than any image can be aligned to; accepted: 1 to 205,520,896"),
        (("memory", "plan", "--max-num-batched-tokens", "1"),
         "--max-num-batched-tokens=1: vllm-gaudi would refuse it (exponential bucket count 0 is invalid; vllm-gaudi "
         "asserts a positive count); accepted: at least 2 with these settings"),
        (("memory", "plan", "--max-model-len", "1"),
         "--max-model-len=1: vllm-gaudi would refuse it (vllm-gaudi would generate 0 prompt buckets"),
        (("memory", "plan", "--max-model-len", "1", "--max-num-batched-tokens", "1"),
         "vllm-gaudi would refuse these settings (--max-num-batched-tokens=1, --max-model-len=1)"),
        (("serve", "--dry-run", "--plan-device", "gaudi2", "--max-model-len=1"), "--max-model-len=1: vllm-gaudi would"),
        # a prefix is named by the option vLLM's parser resolves it to, as argparse names it (r6gaudi 15)
        (("serve", "--dry-run", "--plan-device", "gaudi2", "--max-num-b", "1"),
         "--max-num-batched-tokens=1: vllm-gaudi would"),
    ],
)  # fmt: skip
def test_a_bad_input_is_named_with_what_is_accepted(argv: tuple[str, ...], said: str) -> None:
    code, _, err = run(*argv)
    assert code == 2
    assert said in err
    assert len(err.strip().splitlines()) == 1


def test_a_bucket_list_the_runtime_fails_on_is_not_called_a_memory_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_MULTIMODAL_BUCKETS", "None")
    code, _, err = run("serve", "--dry-run", "--plan-device", "gaudi2")
    assert code == 1
    assert "the server would not start: VLLM_MULTIMODAL_BUCKETS=None with warm-up on makes vllm-gaudi fail" in err
    assert "memory plan does not fit" not in err


def test_speculative_decoding_with_the_forks_default_contiguous_pa_says_the_server_would_not_start() -> None:
    spec = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}'
    args = ("serve", "--dry-run", "--plan-runtime", "vllm-fork==0.9.0.1", "--plan-profile", "none",
            "--max-model-len", "4096", "--speculative-config", spec)  # fmt: skip
    code, _, err = run(*args)
    assert code == 1
    assert "the server would not start" in err
    assert "VLLM_CONTIGUOUS_PA=false" in err


@pytest.mark.parametrize(
    ("release", "args", "named"),
    [
        # r10fork 4: 1.21.0 has --speculative-model, no --speculative-config (arg_utils.py:767 @0275ce4c2)
        (
            "0.7.2+Gaudi-1.21.0",
            ("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}'),
            ("--speculative-config", "v0.7.2+Gaudi-1.21.0", "no such flag", "vllm-fork==0.8.5.post1"),
        ),
        # r10fork 5: 1.21.0 reads it with nullable_kvs (arg_utils.py:643-645 @0275ce4c2)
        (
            "0.7.2+Gaudi-1.21.0",
            ("--limit-mm-per-prompt", '{"image": 2}'),
            ("--limit-mm-per-prompt", "v0.7.2+Gaudi-1.21.0", "KEY=VALUE"),
        ),
        # r10fork 6: choices=[8, 16, 32, 64, 128] at 1.20 (arg_utils.py:438-441 @6af2f6752); 1.22's BlockSize Literal
        (
            "0.6.6.post1",
            ("--block-size", "256"),
            ("--block-size", "'256'", "v0.6.6.post1+Gaudi-1.20.0", "accepted: 8, 16, 32, 64, 128;"),
        ),
        ("0.9.0.1", ("--block-size", "48"), ("--block-size", "'48'", "v0.9.0.1+Gaudi-1.22.0", "128, 256")),
    ],
)
def test_a_server_argument_the_planned_fork_releases_own_parser_refuses_is_refused(
    monkeypatch: pytest.MonkeyPatch, release: str, args: tuple[str, ...], named: tuple[str, ...]
) -> None:
    monkeypatch.setenv("VLLM_CONTIGUOUS_PA", "false")
    code, printed, err = run("serve", "--dry-run", "--plan-runtime", f"vllm-fork=={release}", "--plan-profile",
                             "none", "--max-model-len", "4096", *args)  # fmt: skip
    assert code == 2
    assert printed == ""
    assert len(err.strip().splitlines()) == 1
    assert all(word in err for word in named), err
    assert "VLLM_CONTIGUOUS_PA" not in err


@pytest.mark.parametrize(
    ("release", "args", "named"),
    [
        # r12fork 15(a): int at 1.21.3, human_readable_int only for max_model_len (arg_utils.py:206-210 @3bcdfd4af)
        ("0.8.5.post1", ("--max-model-len", "8192", "--max-num-batched-tokens", "8k"),
         ("--max-num-batched-tokens", "'8k'", "v0.8.5.post1+Gaudi-1.21.3", "vllm-fork==0.9.0.1")),
        # r10fork 14 through memory plan too: int at 1.21.0 (arg_utils.py:388-390 @0275ce4c2)
        ("0.7.2+Gaudi-1.21.0", ("--max-model-len", "32k"), ("--max-model-len", "'32k'", "v0.7.2+Gaudi-1.21.0")),
    ],
)  # fmt: skip
def test_serve_and_memory_plan_refuse_a_value_the_planned_fork_releases_parser_refuses_naming_the_release(
    release: str, args: tuple[str, ...], named: tuple[str, ...]
) -> None:
    for command in (("serve", "--dry-run", "--plan-runtime", f"vllm-fork=={release}", "--plan-profile", "none"),
                    ("memory", "plan", "--runtime", f"vllm-fork=={release}", "--profile", "none")):  # fmt: skip
        code, printed, err = run(*command, *args)
        assert code == 2, (command, err)
        assert printed == ""
        assert len(err.strip().splitlines()) == 1
        assert all(word in err for word in named), err


def test_a_form_only_the_planned_fork_release_takes_is_read_as_it_reads_it() -> None:
    # r12fork 16(b): nullable_kvs at 1.21.0 (arg_utils.py:55ff, 643-644 @0275ce4c2); --speculative-model (:767)
    fork = ("serve", "--dry-run", "--plan-runtime", "vllm-fork==0.7.2+Gaudi-1.21.0", "--plan-profile", "none",
            "--max-model-len", "8192")  # fmt: skip
    code, printed, err = run(*fork, "--limit-mm-per-prompt", "image=2")
    assert code == 0, err
    assert "--limit-mm-per-prompt image=2" in printed.splitlines()[-1]
    # and the plan says whose flags read them (r12serve 13's note: "read with vLLM 0.32's server flags")
    assert "read with vllm-fork v0.7.2+Gaudi-1.21.0's own server flags" in printed
    assert "read with vLLM 0.32's" not in printed
    code, _, err = run(*fork, "--speculative-model", "[ngram]", "--num-speculative-tokens", "3")
    assert code == 0, err
    # 1.22's human_readable_int reads 8K as 8192 (arg_utils.py:1713ff @2e9b2b3d4): serve and memory plan alike
    for command in (("serve", "--dry-run", "--plan-runtime", "vllm-fork==0.9.0.1", "--plan-profile", "none"),
                    ("memory", "plan", "--runtime", "vllm-fork==0.9.0.1", "--profile", "none")):  # fmt: skip
        code, printed, err = run(*command, "--max-model-len", "8192", "--max-num-batched-tokens", "8K")
        assert code == 0, err
        assert "max_num_batched_tokens 8192:" in printed
    # vllm-gaudi keeps vLLM 0.32's reading: JSON only
    code, _, err = run("serve", "--dry-run", "--plan-runtime", "vllm-gaudi", "--plan-profile", "none",
                       "--limit-mm-per-prompt", "image=2")  # fmt: skip
    assert code == 2
    assert "'image=2' is not JSON" in err


def test_the_flags_every_fork_release_takes_are_not_refused() -> None:
    common = ("--gpu-memory-utilization", "0.8", "--max-num-seqs", "32", "--port", "8001", "--served-model-name",
              "x", "--trust-remote-code", "--dtype", "bfloat16", "-tp", "1", "--block-size", "128")  # fmt: skip
    for release in ("0.5.3.post1+gaudi117", "0.6.4.post2", "0.7.2", "0.8.5.post1", "0.9.0.1"):
        code, _, err = run("serve", "--dry-run", "--plan-runtime", f"vllm-fork=={release}", "--plan-profile", "none",
                           "Qwen/Qwen2-7B-Instruct", "--max-model-len", "4096", *common)  # fmt: skip
        assert code == 0, (release, err)


def test_calibrate_exit_codes_and_never_over_its_log(tmp_path: Path) -> None:
    # what is recorded and refused: tests/jobs/test_jobs_calibrate.py
    log = tmp_path / "server.log"
    original = (Path(__file__).parents[1] / "data" / "logs" / "vllm_gaudi_warmup_doc.log").read_bytes()
    log.write_bytes(original)
    out = str(tmp_path / "profile.json")
    code, _, err = run("memory", "calibrate", str(log), "--device", "tpu", "--output", out)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert not Path(out).exists()
    code, printed, err = run("memory", "calibrate", str(log), "--output", str(log))
    assert code == 2
    assert printed == ""
    assert err.strip().splitlines() == [f"vllm-hpu-mm: error: --output {log} is the same file as the log {log}: "
                                        "writing the profile there would overwrite it; accepted: another path for "
                                        "the profile"]  # fmt: skip
    assert log.read_bytes() == original
    code, _, _ = run("memory", "calibrate", str(log), "--device", "Gaudi2", "--output", out)
    assert code == 0
    assert json.loads(Path(out).read_text())["device"] == "gaudi2"


def test_a_profile_variable_naming_no_file_is_said_in_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_HPU_MM_PROFILE", "/nonexistent/profile.json")
    code, out, _ = run("memory", "plan", "--text-graph-budget", "60")  # a given budget: no search (seconds)
    assert code == 0
    assert "VLLM_HPU_MM_PROFILE=/nonexistent/profile.json does not exist (yet)" in out
    # --profile names a file to read: a missing one is a typo
    code, _, err = run("memory", "plan", "--profile", "/nonexistent/profile.json")
    assert code == 2
    assert "--profile /nonexistent/profile.json: cannot read it" in err


# --- what a plan hands the runtime ------------------------------------------------------------------------------------


def test_memory_plan_shows_what_serve_hands_vllm_gaudi(capsys: pytest.CaptureFixture[str]) -> None:
    budget = ("--text-graph-budget", "60")  # no budget search: the exports are what this is about
    code, out, _ = run("memory", "plan", "--json", "--device", "gaudi2", "--runtime", "vllm-gaudi", *budget)
    exports = json.loads(out)["exports"]
    assert code == 0
    env = exports["environment"]
    # vllm-gaudi reads neither prompt ratio: none is handed to it; its bucket file is
    assert "VLLM_GRAPH_PROMPT_RATIO" not in env
    assert "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO" not in env
    assert env["VLLM_BUCKETING_FROM_FILE"] in exports["files"]
    assert exports["server_args"] == ["--limit-mm-per-prompt", '{"image": 999}']
    # the fork's 1.21 line reads VLLM_GRAPH_PROMPT_RATIO (its 1.22, the default, reads neither ratio)
    code, out, _ = run("memory", "plan", "--json", "--device", "gaudi2", "--runtime", "vllm-fork==0.8.5.post1", *budget)
    env = json.loads(out)["exports"]["environment"]
    assert env["VLLM_GRAPH_PROMPT_RATIO"] == "0.3"
    assert "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO" not in env


def test_a_plan_without_graphs_on_vllm_gaudi_writes_no_bucket_file() -> None:
    code, out, _ = run("memory", "plan", "--json", "--device", "gaudi2", "--vision-pool", "none")
    plan = json.loads(out)
    assert code == 0
    assert plan["exports"]["files"] == {}
    assert plan["enforcement"]["decode_graphs"]["honoured"] is False
    assert "vllm-gaudi warms them unless --enforce-eager" in plan["enforcement"]["decode_graphs"]["note"]


@pytest.mark.parametrize("spelling", ["auto", "-1", "AUTO"])
def test_max_model_len_auto_is_planned_as_vllm_fits_it(spelling: str) -> None:
    # a small KV cache: vllm-gaudi sizes it from free memory (it ignores --kv-cache-memory-bytes); a given text-graph
    # budget: the KV cache the length is fitted to does not depend on it, and the search would take seconds a spelling
    code, out, _ = run("memory", "plan", "--json", "--device", "gaudi2", "--free-memory-gib", "4",
                       f"--max-model-len={spelling}", "--text-graph-budget", "60")  # fmt: skip
    plan = json.loads(out)
    assert code == 0
    # vLLM 0.32 (_auto_fit_max_model_len): the longest sequence whose blocks fit the KV cache, less the block the
    # block pool holds back; at most the model's 128000
    assert plan["max_model_len"] == (plan["kv_blocks"] - 1) * plan["block_size"] < 128000
    assert plan["max_concurrent_seqs"] >= 1
    assert "auto" in plan["max_model_len_source"]


def test_max_model_len_auto_is_the_models_maximum_where_the_whole_context_fits() -> None:
    _, out, _ = run("memory", "plan", "--json", "--device", "gaudi2", "--max-model-len=auto", "--text-graph-budget=60")
    assert json.loads(out)["max_model_len"] == 128000


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("--limit-mm-per-prompt", '{"image": "x"}'), "image: 'x' is not a count; accepted: an integer >= 0"),
        (("--limit-mm-per-prompt", "image=2"), "'image=2' is not JSON"),
        (("--limit-mm-per-prompt", "[]"), "'[]' is not a JSON object"),
        (("--model", ""), "the model is empty"),
        (("a", "b"), "unrecognized arguments: b (vLLM's server takes one positional argument, the model)"),
        (("m", "x\x1ey"), "unrecognized arguments: x\\x1ey"),  # a control character is escaped: still one line
    ],
)
def test_serve_refuses_what_vllm_refuses_in_one_line(argv: tuple[str, ...], said: str) -> None:
    code, _, err = run("serve", "--dry-run", "--plan-device", "gaudi2", *argv)
    assert code == 2
    assert said in err
    assert len(err.strip().splitlines()) == 1

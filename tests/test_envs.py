"""The environment registry (vllm_hpu_mm.envs): a good/bad table for every declared variable."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from vllm_hpu_mm import envs
from vllm_hpu_mm.buckets.policy import OversizePolicy
from vllm_hpu_mm.errors import BucketError, ConfigError, InputNote
from vllm_hpu_mm.values import DEFAULT_BUCKETS, AlignMode

BOOL_GOOD = [("1", True), ("true", True), ("TRUE", True), ("yes", True), ("on", True)]
BOOL_GOOD += [("0", False), ("false", False), ("no", False), ("off", False), ("", False), (" False ", False)]
# the Gaudi runtimes' boolean (vllm-hpu-extension config.py:122-124 @8211e0b) takes t and y as true: so do we
BOOL_GOOD += [("t", True), ("Y", True), ("f", False), ("n", False)]


def verbatim(raws: list[str]) -> list[tuple[str, str]]:
    """Bad values whose error must quote the whole value."""
    return [(raw, raw.strip()) for raw in raws]


#: Not booleans of ours: the runtimes that read these start on them, as false (true only from their list).
NOT_BOOLEANS = ["2", "maybe", "-1", "truee", "enabled"]
RATIO_GOOD = [("0", 0.0), ("1", 1.0), ("0.3", 0.3), (" 0.05 ", 0.05), ("1e-1", 0.1)]
RATIO_BAD = verbatim(["-0.1", "1.01", "abc", "", "nan", "30%"])

#: name -> (good: [(raw, parsed)], bad: [(raw, the bad token the error must quote)], a fragment of the accepted form)
TABLE: dict[str, tuple[list[tuple[str, Any]], list[tuple[str, str]], str]] = {
    "VLLM_MULTIMODAL_BUCKETS": (
        [
            ("1600,3136", (1600, 3136)),
            ("4096, 64", (64, 4096)),
            ("None", None),
            ("", DEFAULT_BUCKETS),
            ("6912,768,256,768", (256, 768, 6912)),
        ],
        [
            (" ", "empty"),
            ("none", "'none'"),  # both Gaudi runtimes compare with 'None' exactly, then fail on int('none')
            (" None", "' None'"),
            ("1600,abc", "'abc'"),
            ("1600,1002", "bucket 1002"),
            ("-64", "bucket -64"),
            ("1600,,3136", "'1600,,3136'"),
        ],
        "multiple of 64",
    ),
    "VLLM_GRAPH_RESERVED_MEM": (RATIO_GOOD, RATIO_BAD, "between 0 and 1"),
    "VLLM_GRAPH_PROMPT_RATIO": (RATIO_GOOD, RATIO_BAD, "between 0 and 1"),
    "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO": (RATIO_GOOD, RATIO_BAD, "between 0 and 1"),
    # read by the runtimes themselves, which start on any value (true only from their list): none is refused
    "VLLM_FP32_SOFTMAX": (BOOL_GOOD, [], "0/1, true/false"),
    "VLLM_FP32_SOFTMAX_VISION": (BOOL_GOOD, [], "0/1, true/false"),
    "VLLM_SKIP_WARMUP": (BOOL_GOOD, [], "0/1, true/false"),
    # vLLM reads bool(int(value)): "true" stops it at start-up
    "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": (
        [("1", True), ("0", False), (" 2 ", True)],
        verbatim(["true", "", "off"]),
        "0 off, any other on",
    ),
    "VLLM_HPU_MM_OVERSIZE_POLICY": (
        [("shrink", OversizePolicy.SHRINK), ("EAGER", OversizePolicy.EAGER), (" reject ", OversizePolicy.REJECT)],
        verbatim(["split", "", "resize"]),
        "one of shrink, eager, reject",
    ),
    "VLLM_HPU_MM_ALIGN_MODE": (
        [("nearest", AlignMode.NEAREST), ("Down", AlignMode.DOWN), ("pad", AlignMode.PAD)],
        verbatim(["up", "", "112"]),
        "one of nearest, down, pad",
    ),
    "VLLM_HPU_MM_MAX_IMAGE_PIXELS": (
        [("178956970", 178956970), ("1_000_000", 1_000_000), (" 12 ", 12)],
        verbatim(["0", "-5", "1e6", "lots", ""]),
        "a positive integer",
    ),
    "VLLM_HPU_MM_MAX_ASPECT_RATIO": (
        [("200", 200.0), ("1", 1.0), ("12.5", 12.5)],
        verbatim(["0.5", "0", "-3", "wide", "nan"]),
        "a number >= 1",
    ),
    "VLLM_HPU_MM_GRAPH_BACKEND": (
        [("auto", "auto"), ("CPU", "cpu"), ("cuda", "cuda"), ("hpu", "hpu"), ("none", "none")],
        verbatim(["gpu", "", "xla"]),
        "one of auto, cpu, cuda, hpu, none",
    ),
    "VLLM_HPU_MM_SHAPE_LOG": ([("/tmp/shapes.log", "/tmp/shapes.log"), ("", None), ("  ", None)], [], ""),
    "VLLM_HPU_MM_CACHE_DIR": (
        [("/tmp/vhm", "/tmp/vhm"), (" /tmp/x ", "/tmp/x")],
        [("", ""), ("  ", "  ")],
        "a folder path",
    ),
    "VLLM_HPU_MM_PROFILE": ([("/tmp/profile.json", "/tmp/profile.json"), ("", None)], [], ""),
}


def test_the_table_covers_every_declared_variable() -> None:
    assert set(TABLE) == set(envs.ENVIRONMENT_VARIABLES)


GOOD = [(name, raw, parsed) for name, (good, _, _) in TABLE.items() for raw, parsed in good]
BAD = [(name, raw, token, form) for name, (_, bad, form) in TABLE.items() for raw, token in bad]


@pytest.mark.parametrize(("name", "raw", "parsed"), GOOD)
def test_good_values_parse(name: str, raw: str, parsed: Any) -> None:
    settings = envs.load({name: raw})
    assert getattr(settings, envs.ENVIRONMENT_VARIABLES[name].field) == parsed


@pytest.mark.parametrize(("name", "raw", "token", "form"), BAD)
def test_bad_values_name_the_variable_the_token_and_the_accepted_form(
    name: str, raw: str, token: str, form: str
) -> None:
    with pytest.raises(ConfigError) as info:
        envs.load({name: raw})
    message = str(info.value)
    assert name in message
    assert form in message
    assert token in message


@pytest.mark.parametrize("name", ["VLLM_SKIP_WARMUP", "VLLM_FP32_SOFTMAX", "VLLM_FP32_SOFTMAX_VISION"])
@pytest.mark.parametrize("raw", NOT_BOOLEANS)
def test_a_boolean_the_runtime_reads_is_never_refused_but_read_as_false_as_it_reads_it_with_a_note(
    name: str, raw: str
) -> None:
    # r10gaudi 13: VLLM_SKIP_WARMUP=enabled was refused (exit 2) where vllm-gaudi's boolean() starts on it as false
    # (extension/config.py:135-137 @091bbadd), the README's "read as the runtime reads it, with a warning"
    with pytest.warns(InputNote, match=rf"{name}={raw!r} is none of .*: read as false"):
        settings = envs.load({name: raw})
    assert getattr(settings, envs.ENVIRONMENT_VARIABLES[name].field) is False


def test_bucket_errors_are_bucket_errors_naming_the_bad_entry() -> None:
    with pytest.raises(BucketError, match=r"VLLM_MULTIMODAL_BUCKETS: bucket 1002 is not a multiple of 4"):
        envs.load({"VLLM_MULTIMODAL_BUCKETS": "1600,1002"})


@pytest.mark.parametrize(
    ("raw", "said"),
    [("", "VLLM_MULTIMODAL_BUCKETS is empty: read as the default list 1600,3136,4096,6400,7744,9216,12544"),
     ("6912,768,256,1536,768,64,64", "VLLM_MULTIMODAL_BUCKETS='6912,768,256,1536,768,64,64' lists 64, 768 more than "
                                     "once: read once"),
     ("1000,3136", "VLLM_MULTIMODAL_BUCKETS: 1000 not a multiple of 64: kept as given")],
)  # fmt: skip
def test_a_bucket_list_vllm_gaudi_accepts_is_read_with_a_note_not_refused(raw: str, said: str) -> None:
    # vllm-gaudi vision.py @ 091bbadd: "" is the model's default list, a list is sorted with repeats kept; the plugin
    # reads the variable at server start, so refusing these would stop a server the runtime starts
    with pytest.warns(InputNote) as notes:
        envs.load({"VLLM_MULTIMODAL_BUCKETS": raw})
    assert [str(n.message) for n in notes if str(n.message).startswith(said)]


def test_defaults_when_nothing_is_set() -> None:
    settings = envs.load({})
    assert settings.multimodal_buckets == DEFAULT_BUCKETS
    assert (settings.graph_reserved_mem, settings.graph_prompt_ratio, settings.graph_multimodal_prompt_ratio) == (
        0.1,
        0.3,
        0.3,
    )
    assert settings.fp32_softmax is False
    assert settings.fp32_softmax_vision is False
    assert settings.skip_warmup is False
    assert settings.oversize_policy is OversizePolicy.SHRINK
    assert settings.align_mode is AlignMode.NEAREST
    assert settings.graph_backend == "auto"
    assert settings.shape_log is None
    for var in envs.ENVIRONMENT_VARIABLES.values():  # every declared default is itself valid
        var.parse(var.name, var.default)


@pytest.mark.parametrize(
    ("environ", "cap", "var"),
    [({}, 178956970, "VLLM_HPU_MM_MAX_IMAGE_PIXELS"),
     ({"VLLM_MAX_IMAGE_PIXELS": "100000000"}, 100000000, "VLLM_MAX_IMAGE_PIXELS"),
     ({"VLLM_HPU_MM_MAX_IMAGE_PIXELS": "200000000"}, 178956970, "VLLM_MAX_IMAGE_PIXELS"),
     ({"VLLM_HPU_MM_MAX_IMAGE_PIXELS": "200000000", "VLLM_MAX_IMAGE_PIXELS": "0"}, 200000000,
      "VLLM_HPU_MM_MAX_IMAGE_PIXELS"),
     ({"VLLM_HPU_MM_MAX_IMAGE_PIXELS": "1000", "VLLM_MAX_IMAGE_PIXELS": "2000"}, 1000, "VLLM_HPU_MM_MAX_IMAGE_PIXELS")],
    ids=["defaults", "vllm-lower", "ours-above-vllms", "vllm-off", "ours-lower"],
)  # fmt: skip
def test_the_served_image_cap_is_the_lower_of_ours_and_vllms_own(environ: dict[str, str], cap: int, var: str) -> None:
    # held-out vision round, case 14: vLLM 0.32's ImageMediaIO.load_bytes refuses w * h > VLLM_MAX_IMAGE_PIXELS (0 or
    # less: no limit) after our header check, so an image above either never reaches the model
    settings = envs.load(environ)
    assert (settings.served_max_image_pixels, settings.max_image_pixels_var) == (cap, var)
    with pytest.raises(ConfigError, match=r"^VLLM_MAX_IMAGE_PIXELS='1e8' is invalid \(vLLM reads it with int\(\)\)"):
        envs.load({**environ, "VLLM_MAX_IMAGE_PIXELS": "1e8"})


def test_every_variable_is_documented() -> None:
    for name, var in envs.ENVIRONMENT_VARIABLES.items():
        assert var.accepted, name
        assert var.doc.endswith("."), name


def test_no_other_module_reads_the_environment() -> None:
    package = Path(envs.__file__).parent
    pattern = re.compile(r"os\.environ|os\.getenv|getenv\(|from os import environ")
    readers = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path.name != "envs.py" or path.parent != package
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert readers == []


def test_the_readme_table_names_every_variable_once_with_its_default() -> None:
    """The README's environment table is the user's view of envs.py: the same variables, in order, each default as
    declared (the long ones, the bucket list and the profile path, are given under the table)."""
    from tests.support.data import REPO

    rows = re.findall(r"^\| `([A-Z0-9_]+)` \| ([^|]+) \|", (REPO / "README.md").read_text(encoding="utf-8"), re.M)
    assert [name for name, _ in rows] == list(envs.ENVIRONMENT_VARIABLES)
    for name, shown in rows:
        default = envs.ENVIRONMENT_VARIABLES[name].default
        if default and len(default) <= 24:
            assert shown.strip() == f"`{default}`", name
        elif default:
            assert "below" in shown, name


def test_the_command_runs_blas_on_one_thread_but_launches_a_server_without_that(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(envs, "_SET_HERE", {})
    monkeypatch.delenv(envs.BLAS_THREADS, raising=False)
    envs.single_thread_blas()
    assert os.environ[envs.BLAS_THREADS] == "1"
    assert envs.BLAS_THREADS not in envs.process_environ()  # the server's threads are its own business
    monkeypatch.setattr(envs, "_SET_HERE", {})
    monkeypatch.setenv(envs.BLAS_THREADS, "4")  # the user's own setting is kept, and handed on
    envs.single_thread_blas()
    assert os.environ[envs.BLAS_THREADS] == "4"
    assert envs.process_environ()[envs.BLAS_THREADS] == "4"

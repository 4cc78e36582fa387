"""Any model: a local config.json validated field by field, the Hugging Face cache offline, the catalog by id."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import huggingface_hub.constants
import pytest

from tests.support.data import REPO
from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.errors import ConfigError, ModelConfigUnavailable
from vllm_hpu_mm.models.catalog import CATALOG, catalog_by_id, quantization_from_id
from vllm_hpu_mm.models.dims import weight_bytes
from vllm_hpu_mm.models.lookup import plan_skipped_warning, resolve


def qwen_config(**text: Any) -> dict[str, Any]:
    """A small Qwen2.5-VL config.json in the Hugging Face layout."""
    return {
        "architectures": ["Qwen2_5_VLForConditionalGeneration"],
        "model_type": "qwen2_5_vl",
        "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 256, "vocab_size": 1000, "max_position_embeddings": 4096, **text,
        "vision_config": {"depth": 2, "hidden_size": 64, "num_heads": 2, "intermediate_size": 128,
                          "out_hidden_size": 128, "patch_size": 14, "in_chans": 3},
    }  # fmt: skip


def write(folder: Path, cfg: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def test_a_local_folder_is_read(tmp_path: Path) -> None:
    m = resolve(str(write(tmp_path / "m", qwen_config())))
    assert (m.hidden_size, m.num_heads, m.num_kv_heads, m.head_dim, m.max_position_embeddings) == (128, 4, 2, 32, 4096)
    assert m.source == f"config.json in {tmp_path / 'm'}"
    assert m.quantization is None


@pytest.mark.parametrize(
    ("section", "key", "value", "accepted"),
    [
        ("vision", "patch_size", 14.5, "a positive integer"),
        ("text", "head_dim", "128", "a positive integer"),
        ("text", "num_key_value_heads", 1.5, "a positive integer"),
        ("text", "num_key_value_heads", -2, "a positive integer"),
        ("vision", "in_chans", True, "a positive integer"),
        ("vision", "out_hidden_size", [128], "a positive integer"),
        ("text", "max_position_embeddings", 0, "a positive integer"),
        ("text", "hidden_size", 2**40, "a positive integer up to 2147483647"),
        ("text", "tie_word_embeddings", "yes", "true or false"),
    ],
)
def test_every_field_is_validated_with_the_key_named(
    tmp_path: Path, section: str, key: str, value: Any, accepted: str
) -> None:  # fmt: skip
    cfg = qwen_config()
    (cfg["vision_config"] if section == "vision" else cfg)[key] = value
    prefix = "vision_config." if section == "vision" else ""
    with pytest.raises(ConfigError, match=rf"{prefix}{key}=.*accepted: {accepted}"):
        resolve(str(write(tmp_path, cfg)))


def test_integral_floats_are_integers(tmp_path: Path) -> None:
    cfg = qwen_config(num_key_value_heads=2.0)
    assert resolve(str(write(tmp_path, cfg))).num_kv_heads == 2


def test_inconsistent_heads_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="num_attention_heads=4 is not a multiple of num_key_value_heads=3"):
        resolve(str(write(tmp_path, qwen_config(num_key_value_heads=3))))


@pytest.mark.parametrize(
    ("content", "message"),
    [("", "is empty"), ("{not json", "is not valid JSON"), ("[1, 2]", "holds a JSON list"),
     ('{"hidden_size": NaN}', "is not valid JSON")],
)  # fmt: skip
def test_unreadable_config_files_are_config_errors(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "config.json").write_text(content)
    with pytest.raises(ConfigError, match=message):
        resolve(str(tmp_path))


def test_a_folder_without_config_json_and_a_plain_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no config\.json"):
        resolve(str(tmp_path))
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(ConfigError, match="is a file"):
        resolve(str(tmp_path / "weights.bin"))


def test_a_text_model_of_another_family_is_planned_with_no_vision_tower(tmp_path: Path) -> None:
    cfg = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 100,
    }
    m = resolve(str(write(tmp_path, cfg)))
    assert (m.model_type, m.vision.present, m.num_kv_heads, m.head_dim) == ("llama", False, 2, 16)


def test_quantization_comes_from_the_config(tmp_path: Path) -> None:
    cfg = qwen_config(quantization_config={"quant_method": "GPTQ", "bits": 8})
    m = resolve(str(write(tmp_path, cfg)))
    assert (m.quantization, m.quant_weight_bits) == ("gptq", 8)
    # The checkpoint's 8 bits count, not GPTQ's usual 4.
    assert weight_bytes(m, 2, 1, "gptq") > weight_bytes(m, 2, 1, "awq")
    cfg = qwen_config(quantization_config={"bits": 4})
    with pytest.raises(ConfigError, match=r"quantization_config\.quant_method=None"):
        resolve(str(write(tmp_path, cfg)))


# --- the Hugging Face cache, offline --------------------------------------------------------------------------


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face hub cache that huggingface_hub uses instead of the user's."""
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return cache


def cache_config(cache: Path, repo_id: str, cfg: dict[str, Any]) -> Path:
    """Lay out one cached config.json the way huggingface_hub stores downloads (refs/main -> snapshot)."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0123abcd")
    return write(repo / "snapshots" / "0123abcd", cfg) / "config.json"


def test_a_cached_config_is_read_offline(hf_cache: Path) -> None:
    path = cache_config(hf_cache, "someorg/my-vl-finetune", qwen_config(quantization_config={"quant_method": "awq"}))
    m = resolve("someorg/my-vl-finetune")
    assert m.hidden_size == 128
    assert m.quantization == "awq"
    assert m.source == f"Hugging Face cache: {path}"


def test_the_cache_wins_over_the_catalog_and_bad_fields_are_named(hf_cache: Path) -> None:
    cache_config(hf_cache, "Qwen/Qwen2.5-VL-7B-Instruct", qwen_config(head_dim=0))
    with pytest.raises(ConfigError, match=r"head_dim=0 is invalid"):
        resolve("Qwen/Qwen2.5-VL-7B-Instruct")


def test_an_uncached_id_falls_back_to_the_catalog_by_family_and_size(hf_cache: Path) -> None:
    m = resolve("Qwen/Qwen2.5-VL-7B-Instruct-AWQ")
    assert m.hidden_size == CATALOG["Qwen/Qwen2.5-VL-7B-Instruct"].hidden_size
    assert (m.name, m.quantization) == ("Qwen/Qwen2.5-VL-7B-Instruct-AWQ", "awq")
    assert "parsed from the id" in m.source
    assert resolve("someorg/qwen2.5-vl-72b-finetune").num_layers == 80
    assert resolve("Qwen2_5_VL_32B").num_layers == 64


def test_an_unknown_id_says_what_was_tried(hf_cache: Path) -> None:
    with pytest.raises(ModelConfigUnavailable, match=r"--model='meta-llama/Llama-3-8B'.*Hugging Face cache"):
        resolve("meta-llama/Llama-3-8B")
    with pytest.raises(ModelConfigUnavailable):
        resolve("Qwen/Qwen2.5-VL-13B-Instruct")  # no such size
    with pytest.raises(ModelConfigUnavailable):
        resolve("s3://bucket/model")  # vLLM streams object storage: serve may launch it without a plan


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("./models/missing", "no such folder"),
        ("/no/such/model", "no such folder"),
        ("~no-such-user-here/model", "no such folder"),
        ("--dry-run", "neither a local folder nor a valid Hugging Face model id (after `--`"),
        ("not a//valid repo id", "neither a local folder nor a valid Hugging Face model id"),
        ("a" * 5000, "neither a local folder nor a valid Hugging Face model id"),
        ("x/" + "b" * 300, "neither a local folder nor a valid Hugging Face model id"),
    ],
)
def test_a_model_vllm_could_not_serve_is_invalid_not_merely_unplanned(hf_cache: Path, model: str, said: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(said)) as info:
        resolve(model)
    assert not isinstance(info.value, ModelConfigUnavailable)


@pytest.mark.parametrize("model", ["", "  ", "Qwen/Qwen2.5-VL-7B-Instruct\n", "a\x00b", "x\ty"])
def test_empty_ids_and_control_characters_are_refused(model: str) -> None:
    with pytest.raises(ConfigError, match="empty or holds control characters"):
        resolve(model)


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [("Qwen/Qwen2.5-VL-7B-Instruct-AWQ", ("awq", 4)), ("x/Qwen2.5-VL-72B-Instruct-GPTQ-Int8", ("gptq", 8)),
     ("x/qwen2.5-vl-7b-gptq-int4", ("gptq", 4)), ("x/Qwen2.5-VL-7B-Instruct-FP8-Dynamic", ("fp8", 8)),
     ("x/Qwen2.5-VL-7B-Instruct", (None, None)), ("x/hawq-qwen2.5-vl-7b", (None, None))],
)  # fmt: skip
def test_quantization_from_the_id(model_id: str, expected: tuple[str | None, int | None]) -> None:
    assert quantization_from_id(model_id) == expected


def test_catalog_by_id_needs_family_and_a_known_size() -> None:
    assert catalog_by_id("Qwen/Qwen2-VL-7B-Instruct") is None
    assert catalog_by_id("Qwen/Qwen2.5-7B-Instruct") is None
    assert catalog_by_id("Qwen/Qwen2.5-VL-3B-Instruct") is CATALOG["Qwen/Qwen2.5-VL-3B-Instruct"]


def test_a_fine_tune_id_plans_through_the_cli(hf_cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["memory", "plan", "--model", "someorg/qwen2.5-vl-7b-finetune-AWQ", "--json", "--text-graph-budget", "60"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["settings"]["quantization"] == "awq"
    assert "parsed from the id" in out["model_source"]
    assert main(["memory", "plan", "--model", "meta-llama/Llama-3-8B"]) == 2
    assert "no config.json found" in capsys.readouterr().err


def test_the_skip_warning_says_how_to_give_a_config(hf_cache: Path) -> None:
    with pytest.raises(ModelConfigUnavailable) as info:
        resolve("meta-llama/Llama-3-8B")
    warning = plan_skipped_warning(info.value)
    assert warning.startswith("the memory plan was skipped: --model='meta-llama/Llama-3-8B'")
    assert "huggingface-cli download MODEL config.json" in warning
    assert "\n" not in warning


def test_huggingface_hubs_own_variables_point_at_the_cache(tmp_path: Path) -> None:
    # A new process with HF_HOME set: huggingface_hub resolves <HF_HOME>/hub itself; we never build cache paths.
    cache_config(tmp_path / "hub", "someorg/my-vl-finetune", qwen_config(num_hidden_layers=3))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "VLLM_"))}
    env.update({"HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)})
    done = subprocess.run([sys.executable, "-m", "vllm_hpu_mm.cli.main", "memory", "plan", "--model",
                           "someorg/my-vl-finetune", "--json"], capture_output=True, text=True, env=env, timeout=120,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["model_source"] == f"Hugging Face cache: {tmp_path / 'hub' / 'models--someorg--my-vl-finetune'}" + (
        "/snapshots/0123abcd/config.json"
    )

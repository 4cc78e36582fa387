"""Model catalog, config.json reading, weight and KV bytes, devices, the vision-cost model and input validation."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.support.data import LOGS
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.errors import BackendError, BucketError, ConfigError
from vllm_hpu_mm.models import devices
from vllm_hpu_mm.models.catalog import CATALOG
from vllm_hpu_mm.models.dims import dtype_bytes, kv_bytes_per_token, text_parameters, vision_parameters, weight_bytes
from vllm_hpu_mm.models.lookup import resolve
from vllm_hpu_mm.plan import vision_cost
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.inputs import build
from vllm_hpu_mm.plan.vision_cost import PoolMode

MIB = 2**20


@pytest.mark.parametrize(
    ("name", "params"),
    [
        # Published parameter counts of the Hugging Face checkpoints (safetensors metadata).
        ("Qwen/Qwen2.5-VL-3B-Instruct", 3_754_622_976),
        ("Qwen/Qwen2.5-VL-7B-Instruct", 8_292_166_656),
    ],
)
def test_catalog_parameter_counts_match_the_public_checkpoints(name: str, params: int) -> None:
    m = CATALOG[name]
    assert text_parameters(m) + vision_parameters(m.vision) == params


def test_weights_shard_over_tensor_parallel_ranks_and_scale_with_dtype() -> None:
    m = CATALOG["Qwen/Qwen2.5-VL-72B-Instruct"]
    assert weight_bytes(m, 2, 4) == weight_bytes(m, 2, 1) // 4
    assert weight_bytes(m, 1, 1) * 2 == weight_bytes(m, 2, 1)


def test_kv_bytes_per_token_is_2_layers_kv_heads_head_dim_dtype_over_tp() -> None:
    m = CATALOG["Qwen/Qwen2.5-VL-7B-Instruct"]  # 28 layers, 4 KV heads, head_dim 128
    assert kv_bytes_per_token(m, 2, 1) == 2 * 28 * 4 * 128 * 2
    assert kv_bytes_per_token(m, 2, 2) == 2 * 28 * 2 * 128 * 2
    # TP above the KV-head count replicates heads: never less than one head per device.
    assert kv_bytes_per_token(m, 2, 8) == 2 * 28 * 1 * 128 * 2


def test_short_catalog_names_resolve() -> None:
    assert resolve("Qwen/Qwen2.5-VL-7B-Instruct") is CATALOG["Qwen/Qwen2.5-VL-7B-Instruct"]
    for short, full in (("qwen2.5-vl-7b", "Qwen/Qwen2.5-VL-7B-Instruct"),
                        ("Qwen2.5-VL-32B-Instruct", "Qwen/Qwen2.5-VL-32B-Instruct")):  # fmt: skip
        m = resolve(short)
        assert m.name == short
        assert dataclasses.replace(m, name=full, source=CATALOG[full].source) == CATALOG[full]


def test_unknown_model_names_the_flag_and_the_accepted_names() -> None:
    with pytest.raises(ConfigError, match=r"--model='llama'.*Qwen/Qwen2.5-VL-7B-Instruct"):
        resolve("llama")


def test_local_config_json_is_read(tmp_path: Path) -> None:
    config = {
        "text_config": {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
                        "num_key_value_heads": 1, "intermediate_size": 256, "vocab_size": 151936},
        "vision_config": {"depth": 2, "hidden_size": 64, "num_heads": 2, "intermediate_size": 128,
                          "out_hidden_size": 128},
        "tie_word_embeddings": True,
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    m = resolve(str(tmp_path))
    assert (m.hidden_size, m.num_layers, m.num_kv_heads, m.head_dim) == (128, 2, 1, 64)
    assert m.vision.depth == 2
    assert m.vision.out_hidden_size == 128
    assert kv_bytes_per_token(m, 2, 1) == 2 * 2 * 1 * 64 * 2


def test_a_config_missing_a_dimension_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(ConfigError, match="num_attention_heads is missing"):
        resolve(str(tmp_path))


def test_a_qwen25vl_config_without_its_vision_section_is_rejected(tmp_path: Path) -> None:
    config = {"model_type": "qwen2_5_vl", "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
              "intermediate_size": 256, "vocab_size": 1000}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="no 'vision_config' section"):
        resolve(str(tmp_path))


def test_dtype_spellings_are_vllms() -> None:
    assert dtype_bytes("auto") == dtype_bytes("bfloat16") == dtype_bytes("half") == 2
    assert dtype_bytes("float32") == dtype_bytes("float") == 4
    # vLLM 0.32's --dtype choices only: int8 / fp8 are quantization or KV-cache dtypes there, bf16 is no spelling.
    for bad in ("int3", "int8", "fp8", "bf16"):
        with pytest.raises(ConfigError, match=f"--dtype='{bad}'.*accepted: auto, bfloat16"):
            dtype_bytes(bad)


def test_known_devices_use_the_runtime_totals_with_their_source() -> None:
    gib = 2**30
    assert devices.KNOWN_DEVICES["h100"].total_bytes / gib == pytest.approx(79.19, abs=0.005)
    assert devices.KNOWN_DEVICES["gaudi2"].total_bytes / gib == pytest.approx(94.62, abs=0.005)
    assert devices.KNOWN_DEVICES["h200"].total_bytes / gib == pytest.approx(139.80, abs=0.005)
    assert devices.KNOWN_DEVICES["gaudi3"].total_bytes / gib == pytest.approx(126.55, abs=0.005)
    assert "public Gaudi3 log" in devices.KNOWN_DEVICES["gaudi3"].source
    for spec in devices.KNOWN_DEVICES.values():
        assert f"{spec.total_bytes / gib:.2f}".rstrip("0").rstrip(".") in spec.source
    with pytest.raises(ConfigError, match="--device='tpu'"):
        devices.device_spec("tpu")


def test_the_gaudi2_total_is_the_one_its_log_prints() -> None:
    log = (LOGS / "vllm_fork_345_gaudi_no_oom.log").read_text()
    assert "GiB/94.62 GiB used" in log
    assert "vllm_fork_345_gaudi_no_oom.log" in devices.KNOWN_DEVICES["gaudi2"].source


def test_auto_device_reads_real_memory_on_this_machine() -> None:
    reading = devices.read_device("auto")
    assert 0 < reading.free_bytes <= reading.total_bytes
    assert reading.backend in ("hpu", "cuda", "cpu")


def test_vision_pool_matches_the_h100_measurements() -> None:
    # benchmarks/performance/results/vision_memory_calibration.md (H100 80GB HBM3, 7B tower, bf16, our CUDA-graph
    # executor):
    # one graph's private pool 118 MiB at 1600 patches, 266 at 4096, 808 at 12544; all seven default buckets take
    # 2926 MiB in private pools and 810 MiB in one shared pool captured largest first.
    for patches, measured in ((1600, 118), (4096, 266), (12544, 808)):
        assert vision_cost.graph_pool_bytes(patches) / MIB == pytest.approx(measured, rel=0.05)
    buckets = (1600, 3136, 4096, 6400, 7744, 9216, 12544)
    assert vision_cost.capture_bytes(buckets, PoolMode.PRIVATE) / MIB == pytest.approx(2926, rel=0.02)
    assert vision_cost.capture_bytes(buckets, PoolMode.SHARED) / MIB == pytest.approx(810, rel=0.02)
    # Issue 4's eager anchors: 44 MiB at 1024 patches, 173 at 4096, 293 at 6912 (the 1024 point is 5.5% off).
    for patches, measured in ((1024, 44), (4096, 173), (6912, 293)):
        assert vision_cost.eager_peak_bytes(patches) / MIB == pytest.approx(measured, rel=0.06)


def test_no_graphs_capture_nothing_and_skip_nothing() -> None:
    assert vision_cost.fit_buckets((1600, 3136), 0, PoolMode.NONE) == ((), ())
    assert vision_cost.capture_bytes((1600,), PoolMode.NONE) == 0


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (SizingArgs(model="qwen2.5-vl-7b", graph_reserved_mem=1.5), "--graph-reserved-mem=1.5"),
        (SizingArgs(model="qwen2.5-vl-7b", graph_prompt_ratio=-0.1), "--graph-prompt-ratio=-0.1"),
        (SizingArgs(model="qwen2.5-vl-7b", gpu_memory_utilization=0.0), "--gpu-memory-utilization=0.0"),
        (SizingArgs(model="qwen2.5-vl-7b", free_memory_gib=-1), "--free-memory-gib=-1"),
        (SizingArgs(model="qwen2.5-vl-7b", total_memory_gib=-2), "--total-memory-gib=-2"),
        (SizingArgs(model="qwen2.5-vl-7b", max_model_len=0), "--max-model-len=0"),
        (SizingArgs(model="qwen2.5-vl-7b", vision_pool="giant"), "--vision-pool='giant'"),
    ],
)
def test_bad_inputs_name_the_flag(request_: SizingArgs, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("+", r"\+")):
        build(request_, load({}))


def test_buckets_not_multiple_of_4_name_the_flag() -> None:
    with pytest.raises(BucketError, match="--buckets: bucket 1002 is not a multiple of 4"):
        build(SizingArgs(model="qwen2.5-vl-7b", buckets="1002"), load({}))


def test_ratios_come_from_the_environment_unless_a_flag_overrides_them() -> None:
    settings = load({"VLLM_GRAPH_RESERVED_MEM": "0.25", "VLLM_MULTIMODAL_BUCKETS": "1600,3136"})
    i = build(SizingArgs(model="qwen2.5-vl-7b"), settings)
    assert i.graph_reserved_mem == 0.25
    assert i.buckets == (1600, 3136)
    assert build(SizingArgs(model="qwen2.5-vl-7b", graph_reserved_mem=0.4), settings).graph_reserved_mem == 0.4
    with pytest.raises(ConfigError, match="VLLM_GRAPH_PROMPT_RATIO"):
        load({"VLLM_GRAPH_PROMPT_RATIO": "3"})


def test_quantized_language_weights_are_counted_at_their_width() -> None:
    m = CATALOG["Qwen/Qwen2.5-VL-72B-Instruct"]
    bf16 = weight_bytes(m, 2, 1)
    fp8 = weight_bytes(m, 2, 1, "fp8")
    awq = weight_bytes(m, 2, 1, "awq")
    assert awq < fp8 < bf16
    # The public Qwen2.5-VL-72B-Instruct-AWQ checkpoint is about 41 GB of files; the estimate lands near it.
    assert 36 * 2**30 < awq < 42 * 2**30
    assert weight_bytes(m, 2, 1, "no-such-method") == bf16


def test_hpu_memory_is_read_through_habana_frameworks(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    class FakeHpu:
        @staticmethod
        def is_available() -> bool:
            return True

        @staticmethod
        def mem_get_info() -> tuple[int, int]:
            return 90 * 10**9, 96 * 10**9

    monkeypatch.setitem(sys.modules, "habana_frameworks", types.ModuleType("habana_frameworks"))
    monkeypatch.setitem(sys.modules, "habana_frameworks.torch", types.ModuleType("habana_frameworks.torch"))
    torch = types.ModuleType("torch")  # a stand-in: the HPU build of torch is the Gaudi stack's
    torch.hpu = FakeHpu  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    reading = devices.read_device("auto")
    assert (reading.backend, reading.free_bytes, reading.total_bytes) == ("hpu", 90 * 10**9, 96 * 10**9)
    assert reading.source == "torch.hpu.mem_get_info"


def test_a_missing_backend_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "read_cuda", lambda: None)
    with pytest.raises(BackendError, match="no cuda device"):
        devices.read_device("cuda")

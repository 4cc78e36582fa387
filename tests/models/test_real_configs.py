"""Every real public config in tests/data/configs (sources in its SOURCES.md) plans from a model folder, its sizes
match the published parameter count or checkpoint size, and the plan says whether vllm-gaudi buckets its vision tower
and whether the 112-px processor applies. One case per family vllm-gaudi serves that has a public config here, and a
dense, an MoE and an MLA text model."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.support.data import DATA
from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.models.dims import kv_bytes_per_token, text_parameters, vision_parameters, weight_bytes
from vllm_hpu_mm.models.lookup import resolve
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.inputs import build
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.plan.render import to_dict
from vllm_hpu_mm.runtimes.vllm_gaudi.vision import vision_table_entry
from vllm_hpu_mm.values import GIB

CONFIGS = DATA / "configs"
#: The text graph budget the CLI cases plan with: a third of the graphs vllm-gaudi's own strategy warms at 8,192
#: tokens (the default search's first step).
TEXT_GRAPH_BUDGET = 44


@dataclasses.dataclass(frozen=True)
class Case:
    config: str
    #: Published parameter count (model card, or the checkpoint's tensors as a public report counts them).
    params: float | None
    #: Published checkpoint size in GiB (a public report of the safetensors files), when one is known.
    checkpoint_gib: float | None = None
    device: str = "gaudi2"
    tp: int = 1
    quantization: str | None = None
    #: (family, bucketed by vllm-gaudi, 112-px processor applies), or None for a text model.
    vision: tuple[str, bool, bool] | None = None


CASES = (
    Case("Qwen_Qwen2-VL-2B.json", 2_208_985_600, 4.11, vision=("qwen2_vl", True, False)),
    Case("Qwen_Qwen2.5-VL-3B-Instruct.json", 3.75e9, vision=("qwen2_5_vl", True, True)),
    Case("Qwen_Qwen3-VL-4B-Instruct.json", 4.44e9, vision=("qwen3_vl", True, False)),
    Case(
        "Qwen_Qwen3-VL-30B-A3B-Instruct.json", 31_070_754_032, 57.87, device="gaudi3", vision=("qwen3_vl", True, False)
    ),
    Case("Qwen_Qwen3.5-35B-A3B.json", 35e9, device="gaudi3", vision=("qwen3_5", False, False)),
    Case("unsloth_gemma-3-12b-it.json", 12.2e9, vision=("gemma3", True, False)),
    Case("google_gemma-4-31B-it.json", 31e9, device="gaudi3", vision=("gemma4", False, False)),
    Case("AIDC-AI_Ovis2.5-9B.json", 9_174_807_784, 17.09, vision=("ovis", True, False)),
    Case("mistral3_24b_flux2_text_encoder.json", 24e9, device="gaudi3", vision=("mistral3", True, False)),
    Case("moonshotai_Kimi-K2.5.json", None, 554.30, device="gaudi3", tp=8, vision=("kimi_k25", False, False)),
    Case("deepseek-ai_DeepSeek-OCR.json", 3_336_106_240, 6.21, vision=("deepseek_ocr", True, False)),
    Case("meta-llama_Llama-3.1-8B-Instruct.json", 8_030_261_248, 14.96),
    Case("Qwen_Qwen3-30B-A3B.json", 30.5e9, device="gaudi3"),
    Case("deepseek-ai_DeepSeek-V2-Lite-Chat.json", 15_706_484_224, 29.26),
    Case("deepseek-ai_DeepSeek-R1.json", 671e9, device="gaudi3", tp=8, quantization="fp8"),
)


def _folder(tmp_path: Path, name: str) -> str:
    (tmp_path / "config.json").write_text((CONFIGS / name).read_text())
    return str(tmp_path)


def test_every_config_in_the_folder_has_a_case_and_a_source() -> None:
    files = {p.name for p in CONFIGS.glob("*.json")}
    assert files == {c.config for c in CASES}
    sources = (CONFIGS / "SOURCES.md").read_text()
    assert all(f in sources for f in files)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.config.removesuffix(".json"))
def test_a_real_config_plans_with_its_published_size(tmp_path: Path, case: Case) -> None:
    model = _folder(tmp_path, case.config)
    m = resolve(model)
    if case.params is not None:
        params = text_parameters(m) + vision_parameters(m.vision)
        assert params == pytest.approx(case.params, rel=0.02)
    if case.checkpoint_gib is not None:
        assert weight_bytes(m, 2, 1, m.quantization) / GIB == pytest.approx(case.checkpoint_gib, rel=0.02)
    args = SizingArgs(model=model, device=case.device, max_model_len=8192, tensor_parallel_size=case.tp,
                      quantization=case.quantization)  # fmt: skip
    p = plan(build(args, load({})))
    assert p.fits, [f.message for f in p.findings]
    vision = to_dict(p)["vision"]
    if case.vision is None:
        assert vision is None
        assert p.inputs.buckets is None
    else:
        assert (vision["family"], vision["bucketed_on_runtime"], vision["aligned_processor_applies"]) == case.vision
        assert (p.inputs.buckets is not None) == case.vision[1]


def test_gemma4_full_attention_layers_cache_their_own_head_width(tmp_path: Path) -> None:
    m = resolve(_folder(tmp_path, "google_gemma-4-31B-it.json"))
    assert (m.attention.full_head_dim, m.attention.full_kv_heads, m.attention.sliding_layers) == (512, 4, 50)
    # 10 full-attention layers x K and V x 4 global KV heads x 512 x 2 bytes grow with the sequence
    assert kv_bytes_per_token(m, 2, 1) == 10 * 2 * 4 * 512 * 2


def test_kimi_k25_keeps_attention_at_bf16_and_packs_only_its_experts(tmp_path: Path) -> None:
    m = resolve(_folder(tmp_path, "moonshotai_Kimi-K2.5.json"))
    assert (m.quantization, m.quant_weight_bits, m.quant_group_size, m.quant_experts_only) == (
        "compressed-tensors", 4, 32, True)  # fmt: skip
    assert (m.vision.hidden_size, m.vision.depth, m.vision.spatial_merge_size) == (1152, 27, 2)


def test_ovis25_counts_its_visual_head_and_word_table_in_place_of_a_merger(tmp_path: Path) -> None:
    m = resolve(_folder(tmp_path, "AIDC-AI_Ovis2.5-9B.json"))
    assert (m.vision.hidden_size, m.vision.depth, m.vision.spatial_merge_size, m.vision.visual_vocab_size) == (
        1152, 27, 2, 65536)  # fmt: skip
    # the checkpoint's 9,174,807,784 parameters less the Qwen3-8B language model counted here (8,190,726,144)
    assert vision_parameters(m.vision) == pytest.approx(984_081_640, rel=0.002)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.config.removesuffix(".json"))
def test_a_real_config_plans_through_the_cli_and_exports_buckets_in_the_runtimes_own_units(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: Case
) -> None:
    # the whole served path (bucket choice, text buckets over the replayed traffic, exports), not only the split; at
    # a given text graph budget (a third of vllm-gaudi's own 132 graphs at 8,192 tokens): the default budget search
    # is tested in tests/buckets/test_text_budget.py, and here it would plan every case's text buckets many times
    folder = _folder(tmp_path, case.config)
    argv = ["memory", "plan", "--model", folder, "--device", case.device, "--max-model-len",
            "8192", "--tensor-parallel-size", str(case.tp), "--text-graph-budget", str(TEXT_GRAPH_BUDGET),
            "--json"]  # fmt: skip
    if case.quantization:
        argv += ["--quantization", case.quantization]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    exported = out["exports"]["environment"].get("VLLM_MULTIMODAL_BUCKETS")
    if case.vision is None or not case.vision[1]:
        assert exported is None
        return
    buckets = [int(b) for b in exported.split(",")]
    batch_based, defaults = vision_table_entry(resolve(folder).model_type)
    if batch_based or not case.vision[2]:  # images per pass, or another family's patches: its runtime's own list,
        assert set(buckets) <= set(defaults), buckets  # pruned to what fits
    else:  # ours: planned multiples of 64
        assert all(b % 64 == 0 for b in buckets), buckets

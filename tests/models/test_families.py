"""Real configs of other families plan end to end: a Qwen3-VL tower (patch 16, merge 2, bucketed by vllm-gaudi,
not by our 112-px processor), a dense text model, and an MoE + MLA model with expert parallelism."""

from __future__ import annotations

import pytest

from tests.support.data import REPO
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.models.lookup import resolve
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.inputs import build
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.plan.render import to_dict

CONFIGS = REPO / "tests" / "data" / "configs"


def _folder(tmp_path, name: str) -> str:  # type: ignore[no-untyped-def]
    (tmp_path / "config.json").write_text((CONFIGS / name).read_text())
    return str(tmp_path)


def test_a_qwen3_vl_config_plans_with_its_own_tower_and_vllm_gaudis_buckets(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = _folder(tmp_path, "Qwen_Qwen3-VL-4B-Instruct.json")
    m = resolve(model)
    assert (m.vision.family, m.vision.patch_size, m.vision.alignment, m.vision.deepstack_layers) == (
        "qwen3_vl",
        16,
        32,
        3,
    )
    p = plan(build(SizingArgs(model=model, device="gaudi2", max_model_len=32768), load({})))
    vision = to_dict(p)["vision"]
    assert vision["bucketed_on_runtime"]
    assert not vision["aligned_processor_applies"]
    assert p.inputs.buckets == (196, 256, 441, 480, 576, 900, 1156)
    assert p.fits


@pytest.mark.parametrize("device", ["gaudi2", "h100", "gaudi3"])
def test_a_dense_text_model_plans_with_no_vision_part(tmp_path, device: str) -> None:  # type: ignore[no-untyped-def]
    model = _folder(tmp_path, "meta-llama_Llama-3.1-8B-Instruct.json")
    p = plan(build(SizingArgs(model=model, device=device, max_model_len=8192), load({})))
    assert p.inputs.buckets is None
    assert to_dict(p)["vision"] is None
    assert p.fits
    assert p.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2


def test_an_moe_mla_model_shards_experts_by_expert_parallelism(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = _folder(tmp_path, "deepseek-ai_DeepSeek-R1.json")
    args = {"model": model, "device": "h200", "tensor_parallel_size": 8, "max_model_len": 8192}
    tp = plan(build(SizingArgs(**args), load({})))  # type: ignore[arg-type]
    ep = plan(build(SizingArgs(**args, data_parallel_size=2, enable_expert_parallel=True), load({})))  # type: ignore[arg-type]
    assert ep.weight_bytes < tp.weight_bytes
    assert tp.kv_bytes_per_token == 61 * (512 + 64) * 2  # the MLA latent, not split by TP

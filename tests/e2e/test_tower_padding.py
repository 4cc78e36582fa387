"""vLLM's own Qwen2.5-VL vision tower (built on CPU, no server) through our bucketed seam: padded and packed passes
give exactly the rows of unpadded per-image passes, and only bucket shapes reach the stock forward."""

from __future__ import annotations

import copy
import json
import socket
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from vllm_hpu_mm import envs
from vllm_hpu_mm.plugin import model as plugin_model

# (t, h, w) grids of 112-aligned images: 336x224, 448x448, 224x224, 112x560 -> 384, 1024, 256, 320 patches.
GRIDS = [[1, 24, 16], [1, 32, 32], [1, 16, 16], [1, 8, 40]]
BUCKETS = "512,1024,2048"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def vllm_tower(tiny_model: Path) -> Iterator[tuple[Any, Any]]:
    """vLLM's ``Qwen2_5_VisionTransformer`` with the tiny checkpoint's vision config and random weights (fp32)."""
    from transformers import AutoConfig
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import (
        destroy_distributed_environment,
        destroy_model_parallel,
        init_distributed_environment,
        initialize_model_parallel,
    )
    from vllm.model_executor.models.qwen2_5_vl import Qwen2_5_VisionTransformer

    config = AutoConfig.from_pretrained(tiny_model)
    vllm_config = VllmConfig()
    with set_current_vllm_config(vllm_config):
        init_distributed_environment(1, 0, f"tcp://127.0.0.1:{_free_port()}", 0, backend="gloo")
        initialize_model_parallel(1, 1)
        try:
            tower = Qwen2_5_VisionTransformer(
                vision_config=config.vision_config, norm_eps=1e-6, quant_config=None, prefix="visual"
            )
            generator = torch.Generator().manual_seed(0)
            with torch.no_grad():
                for p in tower.parameters():
                    p.copy_(torch.randn(p.shape, generator=generator) * 0.05)
            for module in tower.modules():  # what vLLM's loader does after loading (CPU GEMM setup)
                method = getattr(module, "quant_method", None)
                if method is not None:
                    method.process_weights_after_loading(module)
            yield tower, vllm_config
        finally:
            destroy_model_parallel()  # type: ignore[no-untyped-call]
            destroy_distributed_environment()  # type: ignore[no-untyped-call]


def test_fp32_vision_softmax_wraps_the_sdpa_attention(vllm_tower: tuple[Any, Any]) -> None:
    """VLLM_FP32_SOFTMAX_VISION: every SDPA vision attention gets the float32 wrapper; a float32 tower is unchanged."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.models.qwen2_5_vl import Qwen2_5_VisionTransformer

    tower: Any = copy.deepcopy(vllm_tower[0])
    grid = [[1, 16, 16]]
    pixels = torch.randn(256, 1176, generator=torch.Generator().manual_seed(2))
    with set_current_vllm_config(vllm_tower[1]), torch.inference_mode():
        before = Qwen2_5_VisionTransformer.forward(tower, pixels, grid)
        assert plugin_model._fp32_vision_softmax(tower) == len(tower.blocks)
        assert plugin_model._fp32_vision_softmax(tower) == 0  # already wrapped
        after = Qwen2_5_VisionTransformer.forward(tower, pixels, grid)
    assert torch.equal(before, after)


def test_padded_and_packed_equals_unpadded(vllm_tower: tuple[Any, Any], tmp_path: Path) -> None:
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.models.qwen2_5_vl import Qwen2_5_VisionTransformer

    tower: Any = vllm_tower[0]
    vllm_config = vllm_tower[1]
    counts = [t * h * w for t, h, w in GRIDS]
    pixels = torch.randn(sum(counts), 1176, generator=torch.Generator().manual_seed(1))
    with set_current_vllm_config(vllm_config), torch.inference_mode():
        reference = [
            Qwen2_5_VisionTransformer.forward(tower, x, [g])
            for x, g in zip(torch.split(pixels, counts), GRIDS, strict=True)
        ]
        settings = envs.load(
            {
                "VLLM_MULTIMODAL_BUCKETS": BUCKETS,
                "VLLM_HPU_MM_GRAPH_BACKEND": "cpu",  # bucket padding on CPU, as on a graph backend
                "VLLM_HPU_MM_SHAPE_LOG": str(tmp_path / "shapes.jsonl"),
            }
        )
        stand_in_model = types.SimpleNamespace(visual=tower)
        assert plugin_model.install_bucketed_tower(stand_in_model, settings) == 3  # warm-up ran every bucket
        assert plugin_model.BucketedTowerMixin in type(tower).__mro__
        log_start = (
            len((tmp_path / "shapes.jsonl").read_text().splitlines()) if (tmp_path / "shapes.jsonl").exists() else 0
        )
        bucketed = tower(pixels, GRIDS)  # what Qwen2_5_VLForConditionalGeneration calls
    passes = [json.loads(x) for x in (tmp_path / "shapes.jsonl").read_text().splitlines()[log_start:]]
    assert all(p["total"] == p["bucket"] and p["bucket"] in (512, 1024, 2048) for p in passes)
    assert any(p["padding"] > 0 for p in passes), passes
    assert any(len(p["images"]) > 1 for p in passes), passes
    expected = torch.cat(reference)
    assert bucketed.shape == expected.shape
    assert torch.equal(bucketed, expected), (bucketed - expected).abs().max()

"""Zero-padding the vision MLP's intermediate size is the same function (exact in float32) and is idempotent."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel

from benchmarks.research import mlp_pad


def _tower(intermediate: int) -> Any:
    torch.manual_seed(1)
    cfg = Qwen2_5_VLVisionConfig(
        depth=2,
        hidden_size=64,
        num_heads=4,
        intermediate_size=intermediate,
        out_hidden_size=32,
        fullatt_block_indexes=[1],
        hidden_act="silu",
    )
    tower: Any = Qwen2_5_VisionTransformerPretrainedModel._from_config(cfg, attn_implementation="sdpa").eval()  # type: ignore[no-untyped-call]
    with torch.no_grad():  # non-zero biases everywhere, so a wrongly padded bias would show
        for p in tower.parameters():
            if p.ndim == 1:
                p.normal_(0.0, 0.1)
    return tower


@pytest.mark.parametrize(
    ("size", "multiple", "expected"), [(3420, 64, 3456), (3456, 64, 3456), (90, 8, 96), (1, 64, 64)]
)
def test_padded_size(size: int, multiple: int, expected: int) -> None:
    assert mlp_pad.padded_size(size, multiple) == expected


def test_padded_size_rejects_non_positive() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        mlp_pad.padded_size(0)


def test_padded_tower_is_the_same_function_in_fp32() -> None:
    tower = _tower(90)
    grid = torch.tensor([[1, 8, 16], [1, 4, 8]])
    pixels = torch.randn(int(grid.prod(-1).sum()), 3 * 2 * 14 * 14)
    with torch.no_grad():
        before = tower(pixels, grid_thw=grid).pooler_output
        assert mlp_pad.pad_vision_mlps(tower) == 2
        after = tower(pixels, grid_thw=grid).pooler_output
    mlp: Any = tower.blocks[0].mlp
    assert (mlp.gate_proj.weight.shape, mlp.up_proj.bias.shape, mlp.down_proj.weight.shape) == (
        (128, 64),
        (128,),
        (64, 128),
    )
    assert mlp.intermediate_size == 128
    assert torch.count_nonzero(mlp.gate_proj.weight[90:]) == 0
    torch.testing.assert_close(after, before, rtol=1e-6, atol=1e-6)


def test_padding_twice_changes_nothing() -> None:
    tower = _tower(90)
    mlp_pad.pad_vision_mlps(tower)
    weights = [p.clone() for p in tower.parameters()]
    assert mlp_pad.pad_vision_mlps(tower) == 0
    assert all(torch.equal(a, b) for a, b in zip(weights, tower.parameters(), strict=True))


class _MergedMLP(nn.Module):
    """vLLM's layout (one merged gate/up matrix, SiluAndMul over its halves), on plain Linear layers."""

    def __init__(self, hidden: int, inter: int) -> None:
        super().__init__()
        self.gate_up_proj = nn.Linear(hidden, 2 * inter)
        self.down_proj = nn.Linear(inter, hidden)
        self.down_proj.input_size_per_partition = inter  # type: ignore[assignment]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(nn.functional.silu(gate) * up)  # type: ignore[no-any-return]


def test_vllm_layout_pads_each_half() -> None:
    torch.manual_seed(2)
    mlp = _MergedMLP(32, 45)
    x = torch.randn(7, 32)
    with torch.no_grad():
        for p in mlp.parameters():
            p.normal_()
        before = mlp(x)
        assert mlp_pad.pad_vllm_mlp(mlp) == 64
        after = mlp(x)
    assert mlp.gate_up_proj.weight.shape == (128, 32)
    assert mlp.down_proj.input_size_per_partition == 64
    torch.testing.assert_close(after, before, rtol=1e-6, atol=1e-6)


def test_vllm_layout_refuses_odd_merged_rows() -> None:
    mlp = _MergedMLP(8, 4)
    mlp.gate_up_proj = nn.Linear(8, 9)
    with pytest.raises(ValueError, match="9 rows"):
        mlp_pad.pad_vllm_mlp(mlp)

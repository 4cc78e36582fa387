"""HPU graph backend against the stand-in habana_frameworks in tests/stubs (NOT run on Gaudi)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
import torch

from tests.support.data import STUBS
from vllm_hpu_mm.buckets.policy import OversizePolicy
from vllm_hpu_mm.errors import BackendError
from vllm_hpu_mm.graphs.hpu import HpuGraphExecutor, HpuRoute, buckets_for_vllm_gaudi, hpu_route, import_habana
from vllm_hpu_mm.graphs.runner import BucketedVisionRunner, transformers_encoder


def _drop_habana() -> None:
    for name in [m for m in sys.modules if m == "habana_frameworks" or m.startswith("habana_frameworks.")]:
        del sys.modules[name]


@pytest.fixture
def habana(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The stand-in package on sys.path for one test, removed (with its modules) afterwards."""
    _drop_habana()
    monkeypatch.syspath_prepend(str(STUBS))
    import habana_frameworks

    yield habana_frameworks
    _drop_habana()


class Tower(torch.nn.Module):
    """Sums each 4 rows (a 2x2 merge). With ``layout_dependent`` each item's rows are first scaled by its position in
    ``grid_thw`` + 1, so a graph replayed with another pass's layout gives visibly wrong numbers."""

    def __init__(self, *, layout_dependent: bool = True) -> None:
        super().__init__()
        self.layout_dependent = layout_dependent

    def forward(self, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(1, len(grid_thw) + 1) if self.layout_dependent else torch.ones(len(grid_thw))
        scale = torch.repeat_interleave(positions, grid_thw.prod(-1)).to(pixel_values)
        return (pixel_values[:, :1] * scale[:, None]).reshape(-1, 4).sum(-1, keepdim=True)


def events(habana: ModuleType, kind: str) -> list[tuple[Any, ...]]:
    return [e for e in habana.EVENTS if e[0] == kind]


def test_off_gaudi_the_backend_error_says_what_is_missing() -> None:
    _drop_habana()
    with pytest.raises(BackendError, match=r"habana_frameworks\.torch.*VLLM_HPU_MM_GRAPH_BACKEND"):
        import_habana()
    with pytest.raises(BackendError):
        HpuGraphExecutor(Tower())


def test_warmup_captures_once_and_identical_passes_replay(habana: ModuleType) -> None:
    ex = HpuGraphExecutor(Tower())
    grid = torch.tensor([[1, 16, 16]])
    ex.warmup(256, torch.ones(256, 4), grid)
    out = ex(256, torch.full((256, 4), 2.0), grid)
    assert [e[0] for e in habana.EVENTS] == ["wrap", "capture", "mark_step", "replay", "mark_step"]
    assert events(habana, "wrap") == [("wrap", {"disable_tensor_cache": True})]
    assert ex.runtime_captures == 0
    torch.testing.assert_close(out, torch.full((64, 1), 8.0))


def test_a_new_layout_of_a_known_bucket_gets_its_own_graph(habana: ModuleType) -> None:
    ex = HpuGraphExecutor(Tower())
    ex.warmup(256, torch.ones(256, 4), torch.tensor([[1, 16, 16]]))
    out = ex(256, torch.ones(256, 4), torch.tensor([[1, 8, 8], [1, 8, 24]]))
    # Same shapes as the warm-up graph, but replaying it would scale the second image by 1 instead of 2.
    assert len(events(habana, "capture")) == 2
    assert ex.runtime_captures == 1
    torch.testing.assert_close(out[:16], torch.full((16, 1), 4.0))
    torch.testing.assert_close(out[16:], torch.full((48, 1), 8.0))


def test_outputs_survive_the_next_replay_of_the_same_graph(habana: ModuleType) -> None:
    ex = HpuGraphExecutor(Tower())
    grid = torch.tensor([[1, 16, 16]])
    first = ex(256, torch.ones(256, 4), grid)
    ex(256, torch.full((256, 4), 5.0), grid)
    assert len(events(habana, "replay")) == 1
    torch.testing.assert_close(first, torch.full((64, 1), 4.0))


def test_exact_shape_passes_run_without_a_graph(habana: ModuleType) -> None:
    ex = HpuGraphExecutor(Tower())
    ex(None, torch.ones(300, 4), torch.tensor([[1, 10, 30]]))
    assert [e[0] for e in habana.EVENTS] == ["mark_step"]


def test_graph_cache_is_bounded(habana: ModuleType) -> None:
    ex = HpuGraphExecutor(Tower(), max_graphs=1)
    ex(256, torch.ones(256, 4), torch.tensor([[1, 16, 16]]))
    ex(256, torch.ones(256, 4), torch.tensor([[1, 8, 32]]))
    assert len(ex.captured) == 1
    assert len(events(habana, "capture")) == 1


def test_runner_on_hpu_executor_sees_only_buckets_and_matches_eager(habana: ModuleType) -> None:
    tower = Tower(layout_dependent=False)
    runner = BucketedVisionRunner(HpuGraphExecutor(tower), (256, 512), OversizePolicy.SHRINK)
    grids = torch.tensor([[1, 8, 8], [1, 16, 16], [1, 8, 8]])
    pixels = torch.rand(int(grids.prod(-1).sum()), 4)
    out = runner(pixels, grids)
    rows = torch.split(pixels, grids.prod(-1).tolist())
    expected = torch.cat([tower(px, g[None]) for px, g in zip(rows, grids, strict=True)])
    torch.testing.assert_close(out, expected)
    assert {sig[0][0] for _, sig in events(habana, "capture")} <= {(256, 4), (512, 4)}


class _GaudiQwen(torch.nn.Module):
    pass


_GaudiQwen.__module__ = "vllm_gaudi.models.qwen2_5_vl"


class _OurQwen(_GaudiQwen):
    pass


_OurQwen.__module__ = "vllm_hpu_mm.plugin.model"


def test_vllm_gaudi_keeps_its_tower_when_our_class_builds_on_it() -> None:
    assert hpu_route(_OurQwen) is HpuRoute.VLLM_GAUDI
    assert hpu_route(torch.nn.Module, tower=_GaudiQwen()) is HpuRoute.VLLM_GAUDI
    assert hpu_route(torch.nn.Module, tower=torch.nn.Linear(1, 1)) is HpuRoute.OURS


def test_buckets_handed_to_vllm_gaudi_use_its_spelling() -> None:
    assert buckets_for_vllm_gaudi((3136, 1600)) == "1600,3136"
    assert buckets_for_vllm_gaudi(None) == "None"


def test_transformers_tower_through_hpu_graphs_equals_unpadded_runs(habana: ModuleType) -> None:
    modeling = pytest.importorskip("transformers.models.qwen2_5_vl.modeling_qwen2_5_vl")
    configuration = pytest.importorskip("transformers.models.qwen2_5_vl.configuration_qwen2_5_vl")
    torch.manual_seed(0)
    config = configuration.Qwen2_5_VLVisionConfig(
        depth=2, hidden_size=32, num_heads=2, intermediate_size=64, out_hidden_size=32, fullatt_block_indexes=[1]
    )
    config._attn_implementation = "eager"
    tower = modeling.Qwen2_5_VisionTransformerPretrainedModel(config).float().eval()
    encode = transformers_encoder(tower)
    runner = BucketedVisionRunner(HpuGraphExecutor(encode), (256, 512), OversizePolicy.SHRINK)
    for grids in ([[1, 8, 16], [1, 16, 8]], [[1, 8, 8], [1, 8, 24]], [[1, 8, 16], [1, 16, 8]]):
        grid = torch.tensor(grids)
        pixels = torch.randn(int(grid.prod(-1).sum()), 1176)
        out = runner(pixels, grid)
        with torch.inference_mode():
            expected = torch.cat(
                [encode(px, g[None]) for px, g in zip(torch.split(pixels, grid.prod(-1).tolist()), grid, strict=True)]
            )
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    # The third batch has the first one's layout: it replays that graph instead of capturing a new one.
    assert len(events(habana, "capture")) == 2
    assert len(events(habana, "replay")) == 1

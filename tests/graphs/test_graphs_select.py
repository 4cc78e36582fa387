"""Backend selection and warm-up."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator

import pytest
import torch

from tests.support.data import STUBS
from vllm_hpu_mm import envs
from vllm_hpu_mm.errors import BackendError
from vllm_hpu_mm.graphs import select
from vllm_hpu_mm.graphs.cpu import EagerExecutor
from vllm_hpu_mm.graphs.select import build_runner, pads_to_buckets, resolve_backend, select_executor, warmup


def settings(**env: str) -> envs.Settings:
    return envs.load(env)


def tower(pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
    return pixel_values.float().reshape(-1, 4, pixel_values.shape[1]).sum(1)


class Recorder(EagerExecutor):
    def __init__(self, fail_on: int | None = None) -> None:
        super().__init__(tower, name="rec")
        self.warmed: list[tuple[int, tuple[int, ...], torch.dtype, list[list[int]]]] = []
        self.fail_on = fail_on

    def warmup(self, bucket: int, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> None:
        if bucket == self.fail_on:
            raise BackendError("out of graph memory")
        self.warmed.append((bucket, tuple(pixel_values.shape), pixel_values.dtype, grid_thw.tolist()))


@pytest.fixture
def no_habana(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(select, "habana_available", lambda: False)


@pytest.mark.usefixtures("no_habana")
def test_auto_is_cpu_for_a_cpu_tower() -> None:
    assert resolve_backend("auto", "cpu") == "cpu"
    ex = select_executor(settings(), tower, device="cpu")
    assert isinstance(ex, EagerExecutor)
    assert ex.name == "cpu"


def test_auto_is_hpu_on_a_habana_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(select, "habana_available", lambda: True)
    monkeypatch.setattr(select, "platform_is_hpu", lambda: True)
    assert resolve_backend("auto", "cpu") == "hpu"


def test_habana_installed_on_a_non_hpu_platform_is_not_hpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(select, "habana_available", lambda: True)
    monkeypatch.setattr(select, "platform_is_hpu", lambda: False)
    assert resolve_backend("auto", "cpu") == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_cuda_without_cuda_says_what_is_accepted() -> None:
    with pytest.raises(BackendError, match=r"torch\.cuda is not available.*auto, cpu, none"):
        select_executor(settings(VLLM_HPU_MM_GRAPH_BACKEND="cuda"), tower, device="cpu")


@pytest.fixture
def stub_habana(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.syspath_prepend(str(STUBS))
    yield
    for name in [m for m in sys.modules if m.startswith("habana_frameworks")]:
        del sys.modules[name]


@pytest.mark.usefixtures("stub_habana")
def test_hpu_backend_gives_the_hpu_executor() -> None:
    ex = select_executor(settings(VLLM_HPU_MM_GRAPH_BACKEND="hpu"), tower, device="cpu")
    assert ex.name == "hpu"


@pytest.mark.usefixtures("no_habana")
def test_none_backend_runs_unbucketed() -> None:
    runner = build_runner(settings(VLLM_HPU_MM_GRAPH_BACKEND="none"), tower, device="cpu")
    assert runner.buckets is None
    assert runner.executor.name == "eager"


@pytest.mark.usefixtures("no_habana")
def test_runner_takes_buckets_and_policy_from_settings() -> None:
    s = settings(
        VLLM_MULTIMODAL_BUCKETS="256,1024", VLLM_HPU_MM_OVERSIZE_POLICY="reject", VLLM_HPU_MM_GRAPH_BACKEND="cpu"
    )
    runner = build_runner(s, tower, device="cpu")
    assert runner.buckets == (256, 1024)
    assert runner.policy.value == "reject"


@pytest.mark.usefixtures("no_habana")
def test_auto_on_cpu_runs_exact_shapes_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    s = settings(VLLM_MULTIMODAL_BUCKETS="256,1024")
    runner = build_runner(s, tower, device="cpu")
    assert runner.executor.name == "cpu"
    assert runner.buckets is None  # no graph on CPU eager: padding would be work with nothing to reuse
    with caplog.at_level(logging.INFO, logger="vllm_hpu_mm.graphs.select"):
        assert warmup(runner, 8, torch.float32, "cpu", settings=s) == 0
    assert any("exact shapes" in r.message and "GRAPH_BACKEND=cpu" in r.message for r in caplog.records)


def test_only_graph_backends_and_an_explicit_cpu_pad() -> None:
    assert [pads_to_buckets(s, b) for s, b in [("auto", "cpu"), ("cpu", "cpu"), ("none", "none")]] == [
        False,
        True,
        False,
    ]
    assert pads_to_buckets("auto", "hpu")
    assert pads_to_buckets("auto", "cuda")


def test_warmup_visits_every_bucket_largest_first_with_a_bucket_sized_dummy(caplog: pytest.LogCaptureFixture) -> None:
    rec = Recorder()
    runner = build_runner(
        settings(VLLM_MULTIMODAL_BUCKETS="256,1600", VLLM_HPU_MM_GRAPH_BACKEND="cpu"), tower, device="cpu"
    )
    runner.executor = rec
    with caplog.at_level(logging.INFO, logger="vllm_hpu_mm.graphs.select"):
        n = warmup(runner, 1176, torch.uint8, "cpu", settings=settings())
    assert n == 2
    # Largest first, so graphs sharing one memory pool reserve about the largest graph only.
    assert rec.warmed == [
        (1600, (1600, 1176), torch.uint8, [[1, 40, 40]]),
        (256, (256, 1176), torch.uint8, [[1, 16, 16]]),
    ]
    assert any("captured 2/2 vision buckets in" in r.message and "(rec)" in r.message for r in caplog.records)


def test_warmup_goes_on_after_a_bucket_that_cannot_be_captured(caplog: pytest.LogCaptureFixture) -> None:
    rec = Recorder(fail_on=256)
    runner = build_runner(
        settings(VLLM_MULTIMODAL_BUCKETS="256,512", VLLM_HPU_MM_GRAPH_BACKEND="cpu"), tower, device="cpu"
    )
    runner.executor = rec
    with caplog.at_level(logging.INFO, logger="vllm_hpu_mm.graphs.select"):
        assert warmup(runner, 8, torch.float32, "cpu", settings=settings()) == 1
    assert [w[0] for w in rec.warmed] == [512]
    assert any("captured 1/2 vision buckets" in r.message for r in caplog.records)


def test_skip_warmup_captures_nothing() -> None:
    rec = Recorder()
    runner = build_runner(settings(), tower, device="cpu")
    runner.executor = rec
    assert warmup(runner, 8, torch.float32, "cpu", settings=settings(VLLM_SKIP_WARMUP="1")) == 0
    assert rec.warmed == []


def test_cpu_warmup_really_runs_the_tower() -> None:
    calls: list[int] = []

    def counting(pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        calls.append(pixel_values.shape[0])
        return tower(pixel_values, grid_thw)

    runner = build_runner(
        settings(VLLM_MULTIMODAL_BUCKETS="64,128", VLLM_HPU_MM_GRAPH_BACKEND="cpu"), counting, device="cpu"
    )
    assert warmup(runner, 8, torch.float32, "cpu", settings=settings()) == 2
    assert calls == [128, 64]

"""On a host that runs vllm-gaudi, the plan's text buckets come from its own code (imported), and change with the
release installed. CI has no vllm-gaudi: tests/stubs/vllm_gaudi_releases holds two stand-in "releases" (our own
code, only the API surface the adapter calls) that bucket differently; a test puts one on sys.path."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.data import REPO
from vllm_hpu_mm.cli.main import main as cli
from vllm_hpu_mm.engine import EngineShape, PrefillChunk
from vllm_hpu_mm.runtimes import registry
from vllm_hpu_mm.runtimes.base import Runtime
from vllm_hpu_mm.runtimes.vllm_gaudi import VllmGaudi
from vllm_hpu_mm.runtimes.vllm_gaudi.common import decode_buckets, prompt_buckets
from vllm_hpu_mm.runtimes.vllm_gaudi.installed import InstalledUnavailable, find_installed

STANDINS = REPO / "tests" / "stubs" / "vllm_gaudi_releases"
SHAPE = EngineShape(max_model_len=4096, max_num_seqs=4, max_num_batched_tokens=2048, block_size=128, num_kv_blocks=100)


def _forget() -> None:
    for name in [m for m in sys.modules if m == "vllm_gaudi" or m.startswith("vllm_gaudi.")]:
        del sys.modules[name]


@pytest.fixture
def install(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """install("0.90.0") makes that stand-in release the importable, installed vllm-gaudi."""

    def use(version: str) -> None:
        _forget()
        for path in [p for p in sys.path if p.startswith(str(STANDINS))]:
            sys.path.remove(path)
        monkeypatch.syspath_prepend(str(STANDINS / f"r{version}"))

    yield use
    _forget()


def _plan(*argv: str) -> dict[str, object]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli(["memory", "plan", "--device", "gaudi2", "--json", *argv]) == 0
    result: dict[str, object] = json.loads(out.getvalue())
    return result


def test_nothing_installed_here_the_model_answers() -> None:
    assert find_installed() is None
    model = registry.model_for(Runtime.VLLM_GAUDI, {})
    assert isinstance(model, VllmGaudi)
    assert model.installed is None
    shapes = model.text_shapes(SHAPE)
    assert shapes.prefill == prompt_buckets(model.bucketing, SHAPE)
    assert "modelled" in shapes.source


def test_buckets_come_from_the_installed_code(install) -> None:  # type: ignore[no-untyped-def]
    install("0.90.0")
    here = find_installed()
    assert here is not None
    assert here.version == "0.90.0"
    model = registry.model_for(Runtime.VLLM_GAUDI, {})
    assert isinstance(model, VllmGaudi)
    shapes = model.text_shapes(SHAPE)
    # the stand-in's own rule: powers of two from the block size to the batched tokens, contexts 0 and 1
    assert shapes.prefill == tuple((1, q, c) for q in (128, 256, 512, 1024, 2048) for c in (0, 1))
    assert shapes.decode == ((1, 100), (2, 100), (4, 100))
    assert "installed vllm-gaudi 0.90.0's own bucketing code" in shapes.source
    assert shapes.prefill != prompt_buckets(model.bucketing, SHAPE)  # not the model's


def test_the_plan_changes_when_the_installed_release_changes(install) -> None:  # type: ignore[no-untyped-def]
    install("0.90.0")
    first = _plan("--runtime", "auto")
    install("0.91.0")
    second = _plan("--runtime", "auto")
    assert "0.90.0" in str(first["runtime_found"])
    assert "0.91.0" in str(second["runtime_found"])
    assert "installed vllm-gaudi 0.90.0" in str(first["text_graphs_source"])
    assert "installed vllm-gaudi 0.91.0" in str(second["text_graphs_source"])
    assert first["prefill_graphs_total"] != second["prefill_graphs_total"]


def test_the_replay_looks_up_in_the_installed_buckets(install) -> None:  # type: ignore[no-untyped-def]
    install("0.91.0")
    lookup = registry.model_for(Runtime.VLLM_GAUDI, {}).text_lookup(SHAPE)
    assert lookup is not None
    # 0.91.0 prepares queries in steps of 512 tokens: a 600-token prompt runs in the 1024 bucket
    (run,) = lookup.prefill((PrefillChunk(600, 0),))
    assert run.bucket == (1, 1024, 0)


def test_a_failure_of_the_installed_code_falls_back_to_the_model_and_says_why(install) -> None:  # type: ignore[no-untyped-def]
    install("0.90.0")  # its initialize takes no num_speculative_tokens
    model = registry.model_for(Runtime.VLLM_GAUDI, {})
    assert isinstance(model, VllmGaudi)
    spec = EngineShape(max_model_len=4096, max_num_seqs=4, max_num_batched_tokens=2048, block_size=128,
                       num_kv_blocks=100, num_speculative_tokens=1)  # fmt: skip
    shapes = model.text_shapes(spec)
    assert shapes.decode == tuple((b, c) for b, _, c in decode_buckets(model.bucketing, spec))
    assert "asking the installed code failed" in shapes.source
    assert "speculative" in shapes.source
    assert isinstance(model, VllmGaudi)
    assert model.installed is not None
    with pytest.raises(InstalledUnavailable):
        model.installed.buckets({}, spec)


def test_a_named_other_release_is_modelled_not_asked(install) -> None:  # type: ignore[no-untyped-def]
    install("0.90.0")
    model = registry.model_for(Runtime.VLLM_GAUDI, {}, version="0.21.0")
    assert isinstance(model, VllmGaudi)
    assert model.installed is None
    assert model.bucketing.release.name == "v0.21.0 - v0.24.0rc0"


def test_the_installed_release_named_in_another_spelling_pip_takes_is_asked(install) -> None:  # type: ignore[no-untyped-def]
    # r8fork 2: the release reaches the runtime as typed (for its refusals to quote), so V0.90.0 must still be 0.90.0
    install("0.90.0")
    found = registry.resolve("vllm-gaudi==V0.90.0", "hpu")
    assert "its own bucketing code is asked" in found.found
    model = registry.model_for(Runtime.VLLM_GAUDI, {}, version=found.version)
    assert isinstance(model, VllmGaudi)
    assert model.installed is not None


def test_the_environment_is_restored_after_asking(install, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import os

    install("0.90.0")
    monkeypatch.setenv("VLLM_PROMPT_BS_BUCKET_MAX", "7")
    model = registry.model_for(Runtime.VLLM_GAUDI, {"VLLM_ENABLE_BUCKETING": "false"})
    assert model.text_shapes(SHAPE).prefill == ()  # the stand-in read the variables it was given
    assert os.environ["VLLM_PROMPT_BS_BUCKET_MAX"] == "7"
    assert "VLLM_ENABLE_BUCKETING" not in os.environ


def test_stand_ins_are_not_on_the_path_by_default() -> None:
    assert not any(Path(p).is_relative_to(STANDINS) for p in sys.path if p)

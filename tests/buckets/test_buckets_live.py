"""Processor-side counters (plugin/metrics.record_aligned) and re-planning from them (buckets/live.py,
``buckets plan|check --from-metrics``)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY, generate_latest

from vllm_hpu_mm.buckets.live import from_metrics, parse_exposition, tile_size
from vllm_hpu_mm.buckets.planner import evaluate, optimal_buckets
from vllm_hpu_mm.buckets.sizes import patch_counts
from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.plugin.metrics import aligned_labels, record_aligned
from vllm_hpu_mm.values import AlignMode


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("VLLM_MULTIMODAL_BUCKETS", "VLLM_HPU_MM_OVERSIZE_POLICY", "VLLM_HPU_MM_ALIGN_MODE"):
        monkeypatch.delenv(name, raising=False)


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def exposition(counts: dict[int, int], buckets: tuple[int, ...] = (1024, 4096)) -> str:
    """A saved /metrics text as prometheus_client writes it, with the labels our processor uses."""
    lines = ["# HELP vllm_hpu_mm_aligned_images_total x", "# TYPE vllm_hpu_mm_aligned_images_total counter"]
    padding: dict[str, int] = {}
    for patches, n in counts.items():
        bucket, pad = aligned_labels(patches, buckets)
        lines.append(f'vllm_hpu_mm_aligned_images_total{{bucket="{bucket}",patches="{patches}"}} {float(n)}')
        padding[bucket] = padding.get(bucket, 0) + pad * n
    lines += ["# TYPE vllm_hpu_mm_aligned_padding_patches_total counter"]
    lines += [f'vllm_hpu_mm_aligned_padding_patches_total{{bucket="{b}"}} {float(p)}' for b, p in padding.items()]
    return "\n".join(lines) + "\n"


def test_bucket_label_and_padding_come_from_the_list() -> None:
    assert aligned_labels(640, (256, 1024, 4096)) == ("1024", 384)
    assert aligned_labels(1024, (256, 1024, 4096)) == ("1024", 0)
    assert aligned_labels(4160, (256, 1024, 4096)) == ("oversize", 0)
    assert aligned_labels(640, None) == ("none", 0)


def test_record_aligned_counts_patches_bucket_and_padding() -> None:
    images = value("vllm_hpu_mm_aligned_images_total", patches="640", bucket="1024")
    padding = value("vllm_hpu_mm_aligned_padding_patches_total", bucket="1024")
    real = value("vllm_hpu_mm_aligned_patches_total", bucket="1024")
    record_aligned(640, (256, 1024, 4096))
    record_aligned(640, (256, 1024, 4096))
    assert value("vllm_hpu_mm_aligned_images_total", patches="640", bucket="1024") == images + 2
    assert value("vllm_hpu_mm_aligned_padding_patches_total", bucket="1024") == padding + 2 * 384
    assert value("vllm_hpu_mm_aligned_patches_total", bucket="1024") == real + 2 * 640


def get_dummy_mm_inputs() -> None:  # named like vLLM's dummy-input builder on purpose
    record_aligned(704, (256, 1024, 4096))


def test_vllm_dummy_inputs_are_not_counted() -> None:
    before = value("vllm_hpu_mm_aligned_images_total", patches="704", bucket="1024")
    get_dummy_mm_inputs()
    assert value("vllm_hpu_mm_aligned_images_total", patches="704", bucket="1024") == before
    record_aligned(704, (256, 1024, 4096))
    assert value("vllm_hpu_mm_aligned_images_total", patches="704", bucket="1024") == before + 1


@pytest.mark.parametrize("mode", list(AlignMode))
def test_tile_sizes_align_to_exactly_their_count(mode: AlignMode) -> None:
    counts = [64 * t for t in range(1, 300)]
    sizes = [tile_size(c) for c in counts]
    assert patch_counts(sizes, max_pixels=64 * 300 * 196, mode=mode).counts == dict.fromkeys(counts, 1)


def test_parse_sums_over_other_labels_and_reads_padding() -> None:
    text = exposition({640: 3, 2048: 2, 5120: 1})
    text += 'vllm_hpu_mm_aligned_images_total{bucket="1024",patches="640",pid="7"} 2.0\n'
    live = parse_exposition(text)
    assert live.images == {640: 5, 2048: 2, 5120: 1}
    assert live.num_images == 8
    assert live.oversize == 1
    assert live.buckets_hit == (1024, 4096)
    assert live.padding == 3 * 384 + 2 * 2048  # the extra pid sample has no padding line: only what was written
    assert live.live_efficiency == pytest.approx(live.real_patches / (live.real_patches + live.padding))


def test_the_live_registry_round_trips() -> None:
    record_aligned(1088, (256, 1024, 4096))
    live = parse_exposition(generate_latest(REGISTRY).decode())
    assert live.images[1088] >= 1


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "no images counted"),
        ('vllm_hpu_mm_aligned_images_total{patches="100",bucket="256"} 1.0\n', "multiple of 64"),
        ('vllm_hpu_mm_aligned_images_total{patches="128",bucket="256"} 1.5\n', "whole count"),
        # held-out round r9metrics, case 12: 2^21 patches (a label past the largest bucket) was read as images the
        # server refuses; the bound is the largest bucket's, 2^20
        (
            'vllm_hpu_mm_aligned_images_total{patches="2097152",bucket="oversize"} 1.0\n',
            "patches='2097152'; expected an aligned patch count, a multiple of 64 from 64 to 1048576",
        ),
        (
            'vllm_hpu_mm_aligned_images_total{patches="256",bucket="2097152"} 1.0\n',
            "bucket='2097152'; expected a bucket, a whole number from 1 to 1048576",
        ),
        ("this is { not prometheus\n", "not a Prometheus text exposition"),
    ],
)
def test_bad_expositions_name_the_flag(text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match="--from-metrics") as err:
        parse_exposition(text)
    assert needle in str(err.value)


def test_the_largest_bucket_is_read_as_a_label() -> None:
    live = parse_exposition('vllm_hpu_mm_aligned_images_total{patches="1048576",bucket="1048576"} 1.0\n')
    assert live.images == {2**20: 1}
    assert live.buckets_hit == (2**20,)


@pytest.mark.parametrize(
    "argv",
    [
        ["fleet", "plan", "--request-rate", "2", "--ttft-p99", "3000", "--tpot-p99", "150", "--device", "gaudi2",
         "--profile", "none"],
        ["buckets", "plan", "--num-buckets", "3"],
        ["buckets", "check", "1600"],
        ["buckets", "replay", "--max-model-len", "8192", "--max-num-seqs", "16", "--device", "gaudi2", "--profile",
         "none", "--no-strategies"],
        ["buckets", "stale", "--bucket-file", "BUCKETS", "--max-model-len", "8192", "--max-num-seqs", "16",
         "--device", "gaudi2", "--profile", "none"],
    ],
    ids=["fleet-plan", "buckets-plan", "buckets-check", "buckets-replay", "buckets-stale"],
)  # fmt: skip
def test_every_command_refuses_a_patch_label_past_the_largest_bucket(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    page = tmp_path / "metrics.txt"
    page.write_text(exposition({256: 100, 4096: 10}).replace('patches="4096"', 'patches="2097152"')
                    + "# TYPE vllm:request_prompt_tokens histogram\n"
                    + 'vllm:request_prompt_tokens_bucket{le="1000.0"} 110.0\n'
                    + 'vllm:request_prompt_tokens_bucket{le="+Inf"} 110.0\n'
                    + "vllm:request_prompt_tokens_count 110.0\nvllm:request_prompt_tokens_sum 50000.0\n")  # fmt: skip
    buckets = tmp_path / "buckets.txt"
    buckets.write_text("(1, [128, 256, 512, 1024, 2048], [0, 1, 2, 4, 8])\n(4, 1, [4, 8, 16, 32, 64])\n")
    argv = [str(buckets) if a == "BUCKETS" else a for a in argv]
    assert main([*argv, "--from-metrics", str(page)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().count("\n") == 0, captured.err
    assert "patches='2097152'" in captured.err
    assert "to 1048576" in captured.err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> dict[str, Any]:
    assert main(["buckets", *argv, "--json"]) == code
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def test_plan_from_a_saved_exposition_is_the_exact_optimum(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(11)
    counts = {64 * rng.randint(1, 196): rng.randint(1, 9) for _ in range(40)}
    path = tmp_path / "metrics.txt"
    path.write_text(exposition(counts))
    flat = [p for p, n in counts.items() for _ in range(n)]
    for k in (3, 7):
        out = run_json(capsys, "plan", "--from-metrics", str(path), "--num-buckets", str(k))
        best = optimal_buckets(flat, k)
        assert out["buckets"] == list(best)
        assert out["num_images"] == len(flat)
        assert out["padded_patches"] == evaluate(flat, best).padded_patches
        assert "live efficiency" in out["source"]


def test_check_from_metrics_and_bad_sources(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "metrics.txt"
    path.write_text(exposition({640: 2, 1024: 1}))
    out = run_json(capsys, "check", "1024", "--from-metrics", str(path))
    assert out["num_images"] == 3
    assert out["per_bucket"] == {"1024": 3}
    assert main(["buckets", "plan", "--from-metrics", str(tmp_path / "missing.txt")]) == 2
    assert "--from-metrics" in capsys.readouterr().err
    assert main(["buckets", "plan", "--from-metrics", "http://127.0.0.1:9/metrics"]) == 2
    assert "cannot fetch" in capsys.readouterr().err


def test_from_metrics_describes_the_running_list(tmp_path: Path) -> None:
    path = tmp_path / "m.txt"
    path.write_text(exposition({640: 1}))
    sizes, live = from_metrics(str(path))
    assert sizes.counts == {tile_size(640): 1}
    assert "buckets hit 1024" in sizes.source
    assert live.padding == 384

"""Traffic from a server's /metrics: vLLM's own prompt / answer histograms, prefix-cache counters and running gauge,
our processor's image and request counters; counts are used as weights, never expanded, and every value that no
real server would write is refused (exit 2), never a hang or a traceback."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.buckets.live import parse_exposition, tile_size, traffic_from_metrics
from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.traffic.metrics import histogram_values, prompt_bucket

VLLM_TEXT = """# TYPE vllm:request_prompt_tokens histogram
vllm:request_prompt_tokens_bucket{le="100.0",model_name="m"} 10.0
vllm:request_prompt_tokens_bucket{le="200.0",model_name="m"} 30.0
vllm:request_prompt_tokens_bucket{le="+Inf",model_name="m"} 30.0
vllm:request_prompt_tokens_count{model_name="m"} 30.0
vllm:request_prompt_tokens_sum{model_name="m"} 3500.0
# TYPE vllm:request_generation_tokens histogram
vllm:request_generation_tokens_bucket{le="10.0",model_name="m"} 20.0
vllm:request_generation_tokens_bucket{le="50.0",model_name="m"} 30.0
vllm:request_generation_tokens_bucket{le="+Inf",model_name="m"} 30.0
vllm:request_generation_tokens_count{model_name="m"} 30.0
vllm:request_generation_tokens_sum{model_name="m"} 300.0
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{model_name="m"} 1000.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{model_name="m"} 250.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 12.0
"""


def images(patches: str, value: str) -> str:
    return ("# TYPE vllm_hpu_mm_aligned_images counter\n"
            f'vllm_hpu_mm_aligned_images_total{{patches="{patches}",bucket="1600"}} {value}\n')  # fmt: skip


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "metrics.txt"
    path.write_text(text)
    return str(path)


def test_vllm_histograms_become_a_text_distribution_and_the_gauge_the_load(tmp_path: Path) -> None:
    t = traffic_from_metrics(write(tmp_path, VLLM_TEXT + images("1024", "10")))
    assert t.running == 12
    assert t.counts[next(r for r in t.counts if r.image is not None)] == 10
    assert sum(n for r, n in t.counts.items() if r.image is None) == 20  # 30 requests, 10 of them with an image
    assert t.text is not None
    assert t.text_includes_images
    prompts = {p for p, _, _ in t.text}
    assert prompts == {50, 150}  # the bucket midpoints
    assert all(c == int(0.25 * p) for p, _, c in t.text)  # the prefix-cache hit share applied alike


def test_histogram_buckets_stand_at_their_midpoints_and_must_be_cumulative() -> None:
    assert histogram_values({100.0: 10, 200.0: 30, math.inf: 31}, "h", "s") == {50: 10, 150: 20, 200: 1}
    with pytest.raises(ConfigError, match="not cumulative"):
        histogram_values({100.0: 10, 200.0: 5}, "h", "s")


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf", "-1", "1.5", "1e16"])
def test_counter_values_no_server_writes_are_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match="expected a whole count"):
        parse_exposition(images("1024", value), "m")
    assert main(["buckets", "plan", "--from-metrics", write(tmp_path, images("1024", value))]) == 2


@settings(max_examples=40, deadline=None)
@given(st.integers(10**9, 10**200))
def test_a_huge_patches_label_is_refused_at_once(patches: int) -> None:
    with pytest.raises(ConfigError, match="aligned patch count"):
        parse_exposition(images(str(patches * 64), "1"), "m")


def test_a_hundred_million_images_are_counts_not_a_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = images("1024", "100000000") + images("4096", "50000000").split("\n", 1)[1]
    live = parse_exposition(text, "m")
    assert live.num_images == 150_000_000
    assert main(["buckets", "plan", "--from-metrics", write(tmp_path, text), "--json", "--num-buckets", "2"]) == 0
    assert '"num_images": 150000000' in capsys.readouterr().out


def test_tile_sizes_are_found_quickly_for_the_largest_accepted_count() -> None:
    assert tile_size(1 << 24)[0] * tile_size(1 << 24)[1] == (1 << 24) // 64 * 112 * 112


def test_prompt_buckets_bound_label_cardinality_to_four_per_doubling() -> None:
    labels = {prompt_bucket(n) for n in range(1, 1 << 20)}
    assert len(labels) <= 4 * 20 + 1
    assert all(prompt_bucket(n) >= n for n in (1, 2, 3, 100, 1000, 12345, 10**6))
    assert all(prompt_bucket(n) <= n * 2**0.25 + 1 for n in range(1, 5000))


def test_a_prefix_cache_hit_count_above_its_queries_is_refused(tmp_path: Path) -> None:
    bad = VLLM_TEXT.replace("vllm:prefix_cache_hits_total{model_name=\"m\"} 250.0",
                            "vllm:prefix_cache_hits_total{model_name=\"m\"} 2500.0")  # fmt: skip
    with pytest.raises(ConfigError, match="exceeds"):
        traffic_from_metrics(write(tmp_path, bad))


def test_an_idle_servers_running_gauge_leaves_the_load_unknown(tmp_path: Path) -> None:
    idle = VLLM_TEXT.replace(
        'vllm:num_requests_running{model_name="m"} 12.0', 'vllm:num_requests_running{model_name="m"} 0.0'
    )
    t = traffic_from_metrics(write(tmp_path, idle + images("1024", "10")))
    assert t.running is None
    assert "load unknown" in t.source


def test_a_histogram_with_only_the_inf_bucket_is_refused_not_replayed_at_made_up_lengths(tmp_path: Path) -> None:
    finite = ('vllm:request_prompt_tokens_bucket{le="100.0"', 'vllm:request_prompt_tokens_bucket{le="200.0"')
    inf_only = "\n".join(line for line in VLLM_TEXT.splitlines() if not line.startswith(finite))
    with pytest.raises(ConfigError, match=r'vllm:request_prompt_tokens has only the le="\+Inf" bucket'):
        traffic_from_metrics(write(tmp_path, inf_only + "\n"))
    assert main(["buckets", "replay", "--from-metrics", write(tmp_path, inf_only + "\n"), "--requests", "10"]) == 2


def test_a_page_of_two_models_is_refused_naming_both_and_model_name_picks_one(tmp_path: Path) -> None:
    other = VLLM_TEXT.replace('model_name="m"', 'model_name="n"').replace(" 12.0", " 5.0")
    page = write(tmp_path, VLLM_TEXT + "\n".join(line for line in other.splitlines() if not line.startswith("#")))
    with pytest.raises(ConfigError, match=r"series of 2 models \(m, n\).*--model-name NAME"):
        traffic_from_metrics(page)
    assert main(["buckets", "replay", "--from-metrics", page, "--requests", "10"]) == 2
    assert traffic_from_metrics(page, model_name="n").running == 5  # one server's load, not the two summed
    with pytest.raises(ConfigError, match=r"--model-name x: no series of that model.*accepted: m, n"):
        traffic_from_metrics(page, model_name="x")

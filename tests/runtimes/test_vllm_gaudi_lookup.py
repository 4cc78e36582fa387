"""vllm-gaudi's bucket lookup as modelled (extension/bucketing/common.py and v1/worker/hpu_model_runner.py @ 091bbadd):
the first covering bucket in sorted order, the fallback rule, and the runner's calls. The model is checked against
vllm-gaudi's own code in benchmarks/agreement/results/vllm_gaudi_lookup_check.md; these pin the rules one by one."""

from __future__ import annotations

import dataclasses
import random

import pytest

from vllm_hpu_mm.engine import EngineShape, PrefillChunk, prefix_caching_off
from vllm_hpu_mm.runtimes.vllm_gaudi import VllmGaudi
from vllm_hpu_mm.runtimes.vllm_gaudi import runner as runner_module
from vllm_hpu_mm.runtimes.vllm_gaudi.common import BucketLookup, calc_fallback_value
from vllm_hpu_mm.runtimes.vllm_gaudi.config import BucketingConfig
from vllm_hpu_mm.runtimes.vllm_gaudi.file_strategy import bucket_file
from vllm_hpu_mm.runtimes.vllm_gaudi.releases import release_for
from vllm_hpu_mm.runtimes.vllm_gaudi.runner import RunnerLookup
from vllm_hpu_mm.traffic.requests import Request, Traffic

SHAPE = EngineShape(max_model_len=32768, max_num_seqs=64, max_num_batched_tokens=8192, block_size=128,
                    num_kv_blocks=4000)  # fmt: skip


def file_config(prompt: list[tuple[int, int, int]], decode: list[tuple[int, int, int]]) -> BucketingConfig:
    return BucketingConfig(from_file="b.txt", file_text=bucket_file(prompt, decode))


def test_fallback_values_round_up_by_the_cube_root_step_as_vllm_gaudi_documents() -> None:
    # common.py calc_fallback_value's own examples
    assert calc_fallback_value(31, 32) == 128
    assert calc_fallback_value(4001, 32) == 4096
    assert calc_fallback_value(1, 32) == 1
    assert calc_fallback_value(0, 2) == 0


def test_a_lookup_takes_the_first_covering_bucket_in_sorted_order_not_the_tightest() -> None:
    lookup = BucketLookup(file_config([(1, 128, 64), (1, 256, 8)], [(1, 1, 8)]), SHAPE)
    # (1, 128, 64) sorts first and covers (1, 100, 5): taken, though (1, 256, 8) pads less context
    assert lookup.find_prompt(1, 100, 5) == (1, 128, 64)
    assert lookup.find_prompt(1, 200, 5) == (1, 256, 8)
    assert not lookup.added


def test_an_uncovered_shape_adds_a_fallback_bucket_that_later_lookups_find() -> None:
    lookup = BucketLookup(file_config([(1, 128, 0)], [(1, 1, 8)]), SHAPE)
    bucket = lookup.find_prompt(1, 1000, 3)
    assert bucket == (1, calc_fallback_value(1000, 32), calc_fallback_value(3, 32))
    assert lookup.added == [("prompt", bucket)]
    assert lookup.find_prompt(1, 900, 1) == bucket
    assert len(lookup.added) == 1


def test_prompt_fallbacks_are_capped_at_the_batched_tokens_and_the_longest_context() -> None:
    lookup = BucketLookup(file_config([(1, 128, 0)], [(1, 1, 8)]), SHAPE)
    bs, seq, ctx = lookup.find_prompt(200, 9000, 10**6)
    assert bs == SHAPE.max_num_seqs
    assert seq == SHAPE.max_num_batched_tokens
    assert ctx == -(-(SHAPE.max_model_len - 1) // SHAPE.block_size)


def test_decode_blocks_above_every_bucket_are_capped_and_find_the_largest_one() -> None:
    lookup = BucketLookup(file_config([(1, 128, 0)], [(4, 1, 100), (8, 1, 500)]), SHAPE)
    assert lookup.find_decode(3, 10_000) == (8, 1, 500)
    assert not lookup.added


def test_the_runner_looks_up_the_merge_check_at_context_0_before_the_real_prefill() -> None:
    # only (1, 512, 64) is prepared: the merge check's (1, 300, 0) finds it, the real (1, 300, 3 blocks) too
    runner = RunnerLookup(file_config([(1, 512, 64)], [(1, 1, 8)]), SHAPE)
    runs = runner.prefill((PrefillChunk(300, 384),))
    assert [r.bucket for r in runs] == [(1, 512, 64)]
    assert runs[0].tokens == 300
    assert runs[0].blocks == 3
    # a file without a context-0 bucket for long queries: the merge check itself falls back
    runner = RunnerLookup(file_config([(1, 512, 64)], [(1, 1, 8)]), SHAPE)
    runner.prefill((PrefillChunk(600, 0),))
    assert runner.fallbacks()[0] == ("prompt", (1, calc_fallback_value(600, 32), 0))


def test_with_one_prefill_per_batch_each_request_runs_alone() -> None:
    runner = RunnerLookup(BucketingConfig(), SHAPE)
    runs = runner.prefill((PrefillChunk(100, 0), PrefillChunk(200, 0), PrefillChunk(50, 256)))
    assert [r.requests for r in runs] == [1, 1, 1]


def test_a_larger_prefill_batch_merges_requests_without_context_only() -> None:
    cfg = dataclasses.replace(BucketingConfig(), prompt_bs_max=4)
    runner = RunnerLookup(cfg, SHAPE)
    runs = runner.prefill((PrefillChunk(100, 0), PrefillChunk(200, 0), PrefillChunk(50, 256)))
    assert [r.requests for r in runs] == [2, 1]


def test_decode_runs_at_the_padded_batch_and_a_block_list_longer_than_its_bucket_runs_as_is() -> None:
    runner = RunnerLookup(file_config([(1, 128, 0)], [(4, 1, 100), (8, 1, 500)]), SHAPE)
    run = runner.decode(3, 80)
    assert run.bucket == (4, 1, 100)
    assert run.shape == (4, 1, 100)
    big = runner.decode(6, 800)
    assert big.bucket == (8, 1, 500)
    assert big.shape == (8, 1, 800)
    assert ("decode", big.shape) not in runner.warmed


def test_bucketing_off_returns_every_shape_as_it_is_and_warms_nothing() -> None:
    runner = RunnerLookup(BucketingConfig(enable_bucketing=False), SHAPE)
    assert runner.prefill((PrefillChunk(100, 0),))[0].bucket == (1, 100, 0)
    assert runner.decode(3, 7).bucket == (3, 1, 7)
    assert not runner.warmed


def test_vllm_gaudi_told_to_warm_buckets_gets_a_file_of_exactly_them_unless_the_user_has_one() -> None:
    model = VllmGaudi().with_text_buckets(((1, 256, 0), (1, 8192, 255)), ((4, 1, 64), (64, 1, 4000)))
    assert model is not None
    assert model.planned
    shapes = model.text_shapes(SHAPE)
    assert shapes.prefill == ((1, 256, 0), (1, 8192, 255))
    assert shapes.decode == ((4, 64), (64, 4000))
    assert VllmGaudi(BucketingConfig(from_file="mine.txt", file_text="(1, 128, 0)\n(1, 1, 8)\n")).with_text_buckets(
        ((1, 256, 0),), ((4, 1, 64),)) is None  # fmt: skip


@pytest.mark.parametrize("kept", [runner_module.ALONE_KEPT, 2])
def test_one_prefill_per_batch_takes_the_walks_lookups_in_its_order_without_the_walk(
    kept: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the default batch of one, :meth:`RunnerLookup.prefill` skips the merge walk: the same forwards and the
    same fallbacks, generated in the same order, step after step (a sparse file falls back along the way)."""
    rng = random.Random(7)
    steps = [tuple(PrefillChunk(rng.choice((1, 31, 300, 600, 2000, 5000)), rng.choice((0, 0, 1, 128, 129, 9000)))
                   for _ in range(rng.randint(1, 4))) for _ in range(200)]  # fmt: skip
    # first: a chunk with context, whose merge check (at context 0) falls back before its own lookup does
    steps = [(PrefillChunk(600, 129),), (PrefillChunk(31, 0), PrefillChunk(700, 300)), *steps]
    monkeypatch.setattr(runner_module, "ALONE_KEPT", kept)
    short, walked = (RunnerLookup(file_config([(1, 512, 64)], [(1, 1, 8)]), SHAPE) for _ in range(2))
    counts = []
    for s in steps:
        assert short.prefill(s) == walked._prefill_walk(s)
        counts.append((short.fallback_count(), len(short.fallbacks())))
    assert short.fallbacks() == walked.fallbacks() != []
    assert all(n == m for n, m in counts)  # the count the replay's memos read (KeptWhileNoFallback) is the list's
    assert len({n for n, _ in counts}) > 1
    assert 0 < len(short._alone) <= kept  # single chunks kept, at most so many


@pytest.mark.parametrize("version", ["0.11.2", "0.16.0", "0.19.0", None])
def test_contiguous_pa_turns_prefix_caching_off_at_every_release(version: str | None) -> None:
    # held-out round 5 (text), case 16: platform.py sets enable_prefix_caching = False under VLLM_CONTIGUOUS_PA at
    # every tag read (lines 125-127 @ f9b64469 ... 241-243 @ 091bbadd), so a replay computes the cached tokens
    release = release_for(version)
    on = RunnerLookup(BucketingConfig(contiguous_pa=True, release=release), SHAPE)
    off = RunnerLookup(BucketingConfig(release=release), SHAPE)
    said = prefix_caching_off(on)
    assert said is not None
    assert "prefix caching off" in said
    assert str(release) in said
    assert prefix_caching_off(off) is None


def test_traffic_without_cached_tokens_keeps_every_request_and_drops_only_the_hits() -> None:
    traffic = Traffic({Request(None, 900, 10, 512): 3, Request(None, 900, 10, 0): 2, Request((448, 448), 50): 1},
                      "test", text={(300, 5, 128): 4})  # fmt: skip
    plain = traffic.without_cached_tokens()
    assert traffic.has_cached_tokens
    assert not plain.has_cached_tokens
    assert plain.counts == {Request(None, 900, 10, 0): 5, Request((448, 448), 50): 1}
    assert plain.text == {(300, 5, 0): 4}

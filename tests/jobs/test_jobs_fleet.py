"""The ``fleet plan`` job on a calibrated server: a vLLM CPU replica priced on the step model fitted on that server
(the profile's ``step_time``), real shapes, its own interval and API-server time, and the evidence says so."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.jobs import fleet as fleet_job
from vllm_hpu_mm.jobs.fleet import FleetArgs, _impossible, plan_fleet
from vllm_hpu_mm.models.step_fit import FittedStep, step_to_dict
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.fleet import Candidate, Capacity, ReplicaShape, Targets, replicas_for, sized
from vllm_hpu_mm.replay.latency import Latency

STEP = FittedStep(block_size=128, overhead_s=0.02, token_s=3e-4, sequence_s=2e-3, chunk_s=0.0, pair_s=1e-9,
                  image_s=0.01, patch_s=2e-5, frontend_s=0.004, source="/metrics of a test server", samples=40,
                  interval=0.3)  # fmt: skip


def test_a_calibrated_cpu_replica_is_priced_on_its_fitted_step(tmp_path: Path) -> None:
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"version": 1, "costs": {}, "measured": [], "step_time": step_to_dict(STEP)}))
    sizing = SizingArgs(model="Qwen/Qwen2.5-VL-3B-Instruct", device="cpu", runtime="vllm-cpu", total_memory_gib=64,
                        max_model_len=4096, profile=str(profile))  # fmt: skip
    args = FleetArgs(rate=3.0, targets=Targets(2.0, 0.1), tensor_parallel_sizes=(1,), seqs_tried=(8,),
                     requests=30, seeds=1, iterations=4)  # fmt: skip
    fleet = plan_fleet(sizing, args, load(), {})
    chosen = fleet.chosen
    assert chosen is not None
    assert chosen.capacity is not None
    assert chosen.latency is not None
    assert chosen.buckets == "none (real shapes)"
    assert chosen.capacity.interval == 0.3
    assert "a test server" in chosen.capacity.evidence
    assert fleet.evidence["step_time"].startswith("calibrated")
    # the API server's own time is in every first token, and no rate above the saturation throughput is sustained
    assert chosen.latency.ttft[0] >= STEP.frontend_s
    assert chosen.capacity.rate <= chosen.capacity.saturation
    assert chosen.replicas * chosen.capacity.rate >= 3.0 * 1.2
    assert fleet.deploy is not None
    assert "resources" not in fleet.deploy.manifests[-2]["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize(("flags", "said"), [
    ({"speculative_config": {"method": "foo", "num_speculative_tokens": 2}}, "--speculative-config: vLLM refuses it"),
    ({"kv_cache_dtype": "fp8_inc", "device": "h100"}, "--kv-cache-dtype=fp8_inc: no vLLM 0.32 CUDA attention"),
])  # fmt: skip
def test_a_value_no_replica_shape_can_mend_is_invalid_input_before_any_shape_is_tried(
    flags: dict[str, object], said: str
) -> None:
    """It was read as every shape not fitting (exit 1, "no fleet meets the targets", naming TP8's heads)."""
    sizing = SizingArgs(**{"max_model_len": 4096, **flags})  # type: ignore[arg-type]
    args = FleetArgs(rate=3.0, targets=Targets(2.0, 0.1), requests=10, seeds=1, iterations=2)
    with pytest.raises(ConfigError, match=f"^{said}"):
        plan_fleet(sizing, args, load(), {})


def test_a_given_text_budget_too_small_for_every_shape_is_invalid_input_with_the_least_one_needs() -> None:
    # it was "no fleet meets the targets", naming TP8's heads (exit 1): the budget was what kept every other shape out
    sizing = SizingArgs(max_model_len=4096, text_graph_budget=1)
    args = FleetArgs(rate=2.0, targets=Targets(5.0, 0.2), tensor_parallel_sizes=(1, 8), seqs_tried=(8,),
                     requests=10, seeds=1, iterations=2)  # fmt: skip
    with pytest.raises(
        ConfigError,
        match=r"^--text-graph-budget 1 is too small for the text buckets of every replica "
        r"shape it was tried on; accepted: at least \d+ graphs \(the least of them, TP1 seqs 8 ",
    ):
        plan_fleet(sizing, args, load(), {})


def test_prompts_of_max_model_len_or_more_are_counted_as_refused_as_buckets_replay_words_them(tmp_path: Path) -> None:
    # r13replay 15: the note said "the engine refuses them"; buckets replay counts them "(K refused)"
    sizes = tmp_path / "long.csv"
    sizes.write_text("width,height,text_tokens,output_tokens,count\n,,300,40,30\n,,5000,10,10\n")
    sizing = SizingArgs(max_model_len=4096, sizes=str(sizes))
    args = FleetArgs(rate=0.5, targets=Targets(60.0, 1.0), tensor_parallel_sizes=(1,), seqs_tried=(8,), requests=40,
                     seeds=1, iterations=2)  # fmt: skip
    notes = plan_fleet(sizing, args, load(), {}).notes
    assert any("tokens or more: refused by the engine (not run), and no figure counts them" in n for n in notes)


def test_shapes_refused_for_their_heads_are_answered_with_a_tp_size_not_more_memory() -> None:
    # held-out round 8, H05: TP 3 of 28 heads was answered "fits no card count ...; fix: more memory per card"
    args = FleetArgs(rate=2.0, targets=Targets(2.0, 0.1), tensor_parallel_sizes=(3,))
    heads = ("--tensor-parallel-size=3: vLLM refuses it: total number of attention heads (28) must be divisible by "
             "tensor parallel size (3); accepted for Qwen/Qwen2.5-VL-7B-Instruct: 1, 2, 4")  # fmt: skip
    refused = Candidate(ReplicaShape.of(3, 64, 2048, 1), None, why_not=heads)
    line = _impossible([refused], args, None)
    assert "more memory" not in line
    assert "fix: none found: no tensor size within a node" in line
    assert "accepted for Qwen/Qwen2.5-VL-7B-Instruct: 1, 2, 4" in line
    # a shape vLLM takes that memory cannot hold gets the memory fixes planned to fit, and says when none was found
    unheld = Candidate(ReplicaShape.of(2, 64, 2048, 1), None, why_not="does not fit: 90 GiB > 80 GiB", unheld=True)
    fixes = ("--pipeline-parallel-sizes 2 (TP2 PP2 seqs 64 tokens 2048 fits)",)
    assert "fix: --pipeline-parallel-sizes 2 (TP2 PP2" in _impossible([unheld, refused], args, None, fixes)
    assert "fix: none found" in _impossible([unheld, refused], args, None)


def test_every_shape_refused_for_its_tensor_size_is_answered_with_the_sizes_planned_to_work() -> None:
    # held-out round r5fleet, case 10: TP 8 of 28 heads alone said "fix: a --tensor-parallel-sizes the refusal
    # accepts", naming no size; docs/fleet.md promises `--tensor-parallel-sizes N` planned to fit
    sizing = SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", device="gaudi2", runtime="vllm-gaudi")
    args = FleetArgs(rate=5.0, targets=Targets(2.0, 0.05), tensor_parallel_sizes=(8,), requests=10, seeds=1,
                     iterations=2)  # fmt: skip
    fleet = plan_fleet(sizing, args, load(), {})
    assert fleet.chosen is None
    assert "no shape tried is one vLLM would serve" in fleet.reason
    assert "fix: --tensor-parallel-sizes 1,2,4 (" in fleet.reason
    # a TP over a node is answered the same way: the sizes a node of 8 holds that vLLM takes
    over = plan_fleet(sizing, dataclasses.replace(args, tensor_parallel_sizes=(16,)), load(), {})
    assert "fix: --tensor-parallel-sizes 1,2,4 (" in over.reason
    # no shape priced: the evidence still names Gaudi 2's fitted roofline (r5fleet case 10's note said "not fitted")
    assert fleet.evidence["step_time"].startswith("public-data estimate: the roofline fitted on vendor tables")


@pytest.mark.parametrize(("runtime", "device", "tokens"), [
    ("vllm-fork==0.8.5.post1+Gaudi-1.21.3", "gaudi2", 32768),  # V0 without chunked prefill: max(max_model_len, 2048)
    ("vllm-cuda", "h100", 8192),  # vLLM 0.32's default for a card of 70 GiB or more
])  # fmt: skip
def test_each_shape_tries_the_runtimes_own_batched_token_default(runtime: str, device: str, tokens: int) -> None:
    # r10fork 19: the fork's fleet tried vllm-gaudi's 2048 only and refused it itself ("no fleet meets the targets")
    sizing = SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", device=device, runtime=runtime, max_model_len=32768)
    args = FleetArgs(rate=1.0, targets=Targets(60.0, 1.0), tensor_parallel_sizes=(1,), seqs_tried=(64,), requests=10,
                     seeds=1, iterations=2)  # fmt: skip
    fleet = plan_fleet(sizing, args, load(), {})
    assert fleet.chosen is not None, fleet.reason
    assert fleet.chosen.shape.label == f"TP1 seqs 64 tokens {tokens}"


#: A /metrics page whose every request is 750 prompt and 150 answer tokens (the bucket midpoints), no prefix cache hit,
#: and 8 requests running on that server.
_PAGE = """# TYPE vllm:request_prompt_tokens histogram
vllm:request_prompt_tokens_bucket{le="500.0",model_name="m"} 0.0
vllm:request_prompt_tokens_bucket{le="1000.0",model_name="m"} 200.0
vllm:request_prompt_tokens_bucket{le="+Inf",model_name="m"} 200.0
vllm:request_prompt_tokens_count{model_name="m"} 200.0
vllm:request_prompt_tokens_sum{model_name="m"} 150000.0
# TYPE vllm:request_generation_tokens histogram
vllm:request_generation_tokens_bucket{le="100.0",model_name="m"} 0.0
vllm:request_generation_tokens_bucket{le="200.0",model_name="m"} 200.0
vllm:request_generation_tokens_bucket{le="+Inf",model_name="m"} 200.0
vllm:request_generation_tokens_count{model_name="m"} 200.0
vllm:request_generation_tokens_sum{model_name="m"} 30000.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 8.0
"""


def test_traffic_from_metrics_plans_the_replica_as_the_same_traffic_given_as_a_csv(tmp_path: Path) -> None:
    # held-out round r5agree, case 17: the chosen replica's text buckets were planned over the built-in default
    # traffic (only --sizes reached serve's plan), so its capacity, TTFT and warm-up differed from the CSV's
    page, csv = tmp_path / "metrics.txt", tmp_path / "text.csv"
    page.write_text(_PAGE)
    csv.write_text("width,height,text_tokens,output_tokens,cached_tokens,count\n,,750,150,0,200\n")
    sizing = SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", device="gaudi2", max_model_len=4096, text_graph_budget=24)
    args = FleetArgs(rate=4.0, targets=Targets(3.0, 0.1), tensor_parallel_sizes=(1,), seqs_tried=(16,), requests=20,
                     seeds=1, iterations=3)  # fmt: skip
    by_page = plan_fleet(sizing, dataclasses.replace(args, from_metrics=str(page)), load(), {})
    by_csv = plan_fleet(dataclasses.replace(sizing, sizes=str(csv)), args, load(), {})
    assert by_page.chosen is not None
    assert by_page.chosen == by_csv.chosen  # capacity, latencies and warm-up: the page's running gauge is no load
    assert by_page.deploy == by_csv.deploy  # the same bucket file handed to every replica


def _light(ttft: float, tpot: float, e2e: float) -> Capacity:
    """A replica that meets the targets at no load: its p99 figures (seconds) at the lightest load probed."""
    lat = Latency("Poisson arrivals at 0.05 requests/s", 60, (ttft,) * 3, (tpot,) * 3, (tpot,) * 3, (e2e,) * 3,
                  ttft, tpot, 100.0, 0.05, 5.0)  # fmt: skip
    return Capacity(0.0, 3.2, lat, ("e2e_p99",), 2, 0.29, "a test")


def test_a_target_no_load_meets_is_answered_with_its_own_figure_and_how_far_to_loosen_it() -> None:
    # held-out fleet round, case 6: the line quoted TTFT and TPOT, which met their targets, and no end-to-end figure
    targets = Targets(2.0, 0.05, e2e_p99=0.3)
    args = FleetArgs(rate=5.0, targets=targets)
    near = Candidate(ReplicaShape.of(1, 64, 2048), _light(0.275, 0.0097, 4.5508))
    far = Candidate(ReplicaShape.of(2, 64, 2048), _light(0.156, 0.0108, 5.379))
    line = _impossible([far, near], args, None)
    assert (
        "the closest, TP1 seqs 64 tokens 2048, has, at a light load (Poisson arrivals at 0.05 requests/s), p99 "
        "end-to-end 4551 ms against the 300 ms target; fix: looser targets (--e2e-p99 4560 or more" in line
    )
    assert "TTFT" not in line  # met: nothing to loosen there
    assert "TPOT" not in line
    # the fix, followed, meets the targets at that light load
    assert not Targets(2.0, 0.05, e2e_p99=4.56).misses(near.capacity.latency)  # type: ignore[union-attr]
    # two targets missed: each named with its figure and its own bound
    both = _impossible([near], FleetArgs(rate=5.0, targets=Targets(0.2, 0.05, e2e_p99=0.3)), None)
    assert "p99 TTFT 275 ms against the 200 ms target; p99 end-to-end 4551 ms against the 300 ms target" in both
    assert "(--ttft-p99 275 or more, --e2e-p99 4560 or more:" in both


def test_the_lower_rate_a_card_limit_suggests_is_rounded_down_so_that_it_fits() -> None:
    # held-out fleet round, case 7's note: 3 x 5.65 / 1.35 = 12.56 was printed "at most 12.6", which needs 4 cards
    capacity = dataclasses.replace(_light(0.3, 0.01, 1.0), rate=5.65, limited_by=("ttft_p99",))
    args = FleetArgs(rate=13.0, targets=Targets(2.0, 0.05), headroom=0.35, cards=3)
    best = sized(ReplicaShape.of(1, 64, 2048), capacity, 13.0, 0.35, cards_per_node=8)
    line = _impossible([best], args, best)
    assert "the targets need 4 cards" in line
    assert "at most 12.5 req/s on 3" in line
    assert replicas_for(12.5, 0.35, 5.65) == 3


def _sized(tp: int, seqs: int, rate: float) -> Candidate:
    """A shape meeting the targets at ``rate`` requests/s per replica, sized for 20 requests/s with 20% headroom."""
    capacity = dataclasses.replace(_light(0.6, 0.036, 3.0), rate=rate, limited_by=("ttft_p99",))
    return sized(ReplicaShape.of(tp, seqs, 2048), capacity, 20.0, 0.2, cards_per_node=8)


@pytest.mark.parametrize("cards", [None, 4])
def test_cards_of_the_unconstrained_choice_choose_it_on_the_figures_it_is_deployed_on(
    cards: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # held-out fleet round 3, case 14b: TP1 seqs 64 was chosen on 4 cards (6 req/s on serve's buckets), but --cards 4
    # answered "the targets need 5 cards": the limit was applied to the search's figures (5.85 req/s, 5 replicas)
    searched = [_sized(1, 64, 5.85), _sized(1, 256, 5.7), _sized(2, 64, 9.34)]
    repriced = {searched[0].shape: _sized(1, 64, 6.0)}
    planned: list[ReplicaShape] = []

    def evaluate(shape: ReplicaShape, _: object) -> Candidate:
        planned.append(shape)
        return repriced.get(shape) or next(c for c in searched if c.shape == shape)

    monkeypatch.setattr(fleet_job, "prepare", lambda one, *_, **__: SimpleNamespace(planned=one))
    search = SimpleNamespace(args=FleetArgs(rate=20.0, targets=Targets(2.0, 0.05), cards=cards),
                             sizing=SizingArgs(), settings=load(), runtime_env={}, evaluate=evaluate,
                             offered=None)  # fmt: skip
    notes: list[str] = []
    chosen, launch, rows = fleet_job._choose_on_serves_buckets(search, searched, notes)  # type: ignore[arg-type]
    assert chosen is not None
    assert launch is not None
    assert (chosen.shape.label, chosen.total_cards) == ("TP1 seqs 64 tokens 2048", 4)
    assert rows[0] is chosen  # its row is printed with the figures it is chosen on
    assert planned == [chosen.shape]  # one serve plan: shapes over the cards on the search's figures are not tried


def test_a_shape_within_the_cards_is_chosen_when_the_unconstrained_choice_is_not_on_serves_buckets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    searched = [_sized(1, 64, 5.85), _sized(2, 64, 9.34)]  # 5 and 6 cards on the search's figures
    slower = _sized(1, 64, 3.9)  # serve's buckets price the first at 7 cards
    monkeypatch.setattr(fleet_job, "prepare", lambda one, *_, **__: SimpleNamespace(planned=one))
    args = FleetArgs(rate=20.0, targets=Targets(2.0, 0.05), cards=6)
    search = SimpleNamespace(args=args, sizing=SizingArgs(), settings=load(), runtime_env={}, offered=None,
                             evaluate=lambda shape, _: slower if shape == slower.shape else searched[1])  # fmt: skip
    chosen, _, _ = fleet_job._choose_on_serves_buckets(search, searched, [])  # type: ignore[arg-type]
    assert chosen is not None
    assert (chosen.shape.label, chosen.total_cards) == ("TP2 seqs 64 tokens 2048", 6)
    search.args = dataclasses.replace(args, cards=5)
    assert fleet_job._choose_on_serves_buckets(search, searched, [])[0] is None  # type: ignore[arg-type]

"""The replay: efficiencies, run-time compiles (and what compiles under VLLM_SKIP_WARMUP), and the serve / replay
commands (the planner and its budget: tests/buckets/test_text_budget.py, tests/plan/test_text_buckets.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from vllm_hpu_mm.cli.main import main
from vllm_hpu_mm.engine import Bucket, EngineShape, GraphRun, PrefillChunk, TextLookup
from vllm_hpu_mm.models.catalog import CATALOG
from vllm_hpu_mm.replay.run import _INDEXED, _replay_steps, _Tally, prepare, replay, shape_weights
from vllm_hpu_mm.replay.scheduler import Arrivals, DecodeRun
from vllm_hpu_mm.replay.schedules import (
    Images,
    load_levels,
    load_sweep,
    prompts,
    replay_model,
    schedules,
    served_requests,
    timer_for,
)
from vllm_hpu_mm.replay.timing import chunk_key
from vllm_hpu_mm.runtimes.vllm_gaudi import VllmGaudi
from vllm_hpu_mm.runtimes.warmup import era
from vllm_hpu_mm.traffic.default import default_traffic
from vllm_hpu_mm.traffic.requests import Request, Traffic
from vllm_hpu_mm.values import OversizePolicy

SHAPE = EngineShape(max_model_len=16384, max_num_seqs=32, max_num_batched_tokens=4096, block_size=128,
                    num_kv_blocks=3000)  # fmt: skip


def runs(concurrency: int | None = 16):  # type: ignore[no-untyped-def]
    return schedules(default_traffic(), SHAPE, Images((1600, 3136, 12544)), concurrency=concurrency, requests=300)


def test_without_warm_up_every_shape_run_compiles_and_a_sparse_file_compiles_at_run_time() -> None:
    r = runs(8)
    sparse = VllmGaudi().with_text_buckets(((1, 128, 0),), ((1, 1, 8),))
    assert sparse is not None
    result = replay_model(sparse, SHAPE, r, "sparse")
    assert result.compiles
    assert result.fallbacks
    assert sum(result.shapes_run) >= len(result.compiles)
    defaults = replay_model(VllmGaudi(), SHAPE, r, "defaults")
    assert sum(defaults.shapes_run) > 0  # what VLLM_SKIP_WARMUP=true would compile on first use


def test_replay_prints_defaults_and_planned_side_by_side(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plot = tmp_path / "replay.png"
    code = main(["buckets", "replay", "--max-model-len", "8192", "--max-num-seqs", "16", "--concurrency", "8",
                 "--requests", "200", "--json", "--plot", str(plot)])  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    labels = [c["label"] for c in report["configurations"]]
    assert labels == ["vllm-gaudi main's exp bucketing", "planned from traffic", "vllm-gaudi main's lin bucketing",
                      "vllm-gaudi main's pad bucketing"]  # fmt: skip
    defaults, planned = report["configurations"][:2]
    for config in report["configurations"]:  # each in time on the main job's Gaudi2
        time = config["time"]
        assert time["busy_seconds_with_buckets"] >= time["busy_seconds_real_shapes"] > 0
        assert sum(time["padding_share_of_busy_time"].values()) == pytest.approx(
            1 - time["busy_seconds_real_shapes"] / time["busy_seconds_with_buckets"], abs=1e-3
        )
        # whole latencies on the configuration's own schedule: its buckets' step times, queueing included
        (whole,) = config["latency_per_load"]
        assert whole["requests"] == 200
        assert whole["ttft_ms"]["p50"] <= whole["ttft_ms"]["p90"] <= whole["ttft_ms"]["p99"]
        assert whole["e2el_ms"]["p50"] > whole["ttft_ms"]["p50"] > 0
        assert whole["interval"] > 0
        assert "public-data estimate" in whole["evidence"]
        # throughput: the requests over the run (first arrival to last answer)
        busy = whole["duration_s"]
        assert whole["request_throughput"] == pytest.approx(200 / busy, rel=1e-3)
    exp_tpot = report["configurations"][0]["latency_per_load"][0]["tpot_ms"]["p50"]
    pad_tpot = report["configurations"][3]["latency_per_load"][0]["tpot_ms"]["p50"]
    assert pad_tpot != exp_tpot  # each strategy on its own clock
    assert report["requests_refused"]["total"] == 0
    assert planned["run_time_compiles"]["prompt"] == planned["run_time_compiles"]["decode"] == 0
    worst = report["worst_case"]  # the worst shape the limits allow against exp, in words beside the figures
    # at most a half, and the buckets the plan adds beyond it so that no judged load pads longer than exp
    beyond = worst["load_repair_buckets_beyond_budget"]
    assert planned["graphs_warmed"]["total"] <= defaults["graphs_warmed"]["total"] // 2 + beyond
    assert any(note.startswith("planned buckets: budget ") for note in report["notes"])
    assert worst["ratio"] > 0
    assert worst["graphs"] == planned["graphs_warmed"]["total"]
    assert f"planned buckets: {worst['line']}" in report["notes"]
    # one warm-up rule with the plan: the runtime's per-graph time by phase and shape, with its held-out error
    one = era("one_pass").coefficients["graph"]
    assert planned["warmup_seconds_estimate"] >= planned["graphs_warmed"]["total"] * min(
        one["prompt"][0], one["decode"][0]) - 0.1  # fmt: skip
    assert planned["warmup_seconds_estimate"] < defaults["warmup_seconds_estimate"]
    assert "warmup_time_fit.md" in report["warmup_seconds_source"]
    assert report["warmup_heldout_error"] == era("one_pass").heldout_error
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_the_plan_says_which_text_budget_it_took_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "plan", "--json", "--max-model-len", "8192", "--max-num-seqs", "16"]) == 0
    text = json.loads(capsys.readouterr().out)["text_bucket_plan"]
    defaults = text["before"]["graphs_warmed"]["total"]
    worst = text["worst_case"]
    # a third to a half, and the buckets the plan adds beyond it so that no judged load pads longer than exp
    assert defaults // 3 <= text["budget"] <= defaults // 2 + worst["load_repair_buckets_beyond_budget"]
    assert text["after"]["graphs_warmed"]["total"] <= text["budget"]
    assert f"graphs of the runtime's own {defaults}" in text["budget_reason"]
    assert worst["against"] == "vllm-gaudi main's exp bucketing"
    assert worst["line"] in text["notes"]
    assert main(["memory", "plan", "--max-model-len", "8192", "--max-num-seqs", "16"]) == 0
    out = capsys.readouterr().out
    assert f"budget {text['budget_reason']}" in out
    assert worst["line"] in out


def test_replaying_your_bucket_file_exits_1_when_it_compiles(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:  # fmt: skip
    path = tmp_path / "mine.txt"
    path.write_text("(1, 128, 0)\n(1, 1, 8)\n")
    code = main(["buckets", "replay", "--max-model-len", "8192", "--max-num-seqs", "8", "--concurrency", "4",
                 "--requests", "100", "--bucket-file", str(path), "--no-plan"])  # fmt: skip
    assert code == 1
    out = capsys.readouterr().out
    assert "your mine.txt" in out
    assert "compile at run time while a request waits" in out


def test_a_bucket_file_the_server_would_not_start_with_gets_the_table_without_latency_and_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # held-out round 19 (gaudi), case 11: the file stopped the replay on one error line, with no table and no JSON,
    # where --kv-blocks below one sequence gets the table's "no latency or throughput figures" line
    path = tmp_path / "prompt_only.txt"
    path.write_text("(1, 2048, 0)\n(1, [512, 1024], [0, 8])\n")  # no decode line: vllm-gaudi fails at start-up
    argv = ["buckets", "replay", "--max-model-len", "4096", "--max-num-seqs", "8", "--requests", "50",
            "--bucket-file", str(path), "--no-plan", "--no-strategies"]  # fmt: skip
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 1
    assert err.count("\n") == 1
    assert "the server would not start" in err
    assert "0 decode buckets" in err
    assert f"no latency or throughput figures: {err.split('error: ', 1)[1].strip()}" in out
    assert "TTFT p50" not in out
    assert "your prompt_only.txt: not replayed" in out
    assert main([*argv, "--json"]) == 1
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["not_started"] == err.split("error: ", 1)[1].strip()
    assert f"--bucket-file {path}" in report["not_started"]
    assert all(c["latency_per_load"] is None for c in report["configurations"])


def test_kv_blocks_below_one_max_model_len_sequence_say_the_server_would_not_start(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["buckets", "replay", "--max-model-len", "4096", "--block-size", "128", "--max-num-seqs", "8",
                 "--requests", "50", "--kv-blocks", "20", "--no-plan", "--no-strategies"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    assert (
        "the server would not start: --kv-blocks 20 (19 usable: the block pool keeps one null block) "
        "cannot hold one sequence of --max-model-len 4096"
    ) in err
    assert "(32 blocks of 128)" in err


def test_a_bad_bucket_file_or_budget_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["buckets", "replay", "--bucket-file", str(tmp_path / "missing.txt")]) == 2
    assert "--bucket-file" in capsys.readouterr().err
    assert main(["buckets", "replay", "--text-graph-budget", "1", "--requests", "50", "--max-model-len", "4096"]) == 2
    assert "--text-graph-budget" in capsys.readouterr().err


def test_replay_in_time_under_poisson_arrivals_reports_refusals_and_exits_1(capsys: pytest.CaptureFixture[str],
                                                                            tmp_path: Path) -> None:  # fmt: skip
    sizes = tmp_path / "traffic.csv"
    sizes.write_text("width,height,text_tokens,output_tokens,count\n,,300,40,30\n,,9000,10,2\n")
    code = main(["buckets", "replay", "--sizes", str(sizes), "--max-model-len", "8192", "--max-num-seqs", "8",
                 "--request-rate", "5", "--requests", "60", "--no-plan", "--no-strategies", "--json"])  # fmt: skip
    assert code == 1
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["requests_refused"]["prompt_too_long"] > 0
    # the finding said on stderr, one line, as serve --dry-run says it (r14loads 3: exit 1 with stderr empty)
    refused = report["requests_refused"]["total"]
    assert captured.err.strip() == (
        f"vllm-hpu-mm: error: {refused} of the 60 requests sampled from the traffic are "
        f"refused by the engine ({refused} a prompt of max_model_len tokens or more; see "
        "the table); fix: a --max-model-len above the longest prompt, or shorter prompts"
    )
    assert report["load"].startswith("Poisson arrivals at 5 requests/s")
    (config,) = report["configurations"]
    assert config["time"]["idle_seconds"] > 0  # 5 requests/s leaves the server idle between them
    assert config["time"]["requests"] + report["requests_refused"]["total"] == 60
    (whole,) = config["latency_per_load"]
    assert whole["load"].startswith("Poisson arrivals at 5 requests/s")
    assert 0 < whole["request_throughput"] < 5 * 1.5


def test_a_valid_load_under_which_nothing_ran_exits_1_saying_so(capsys: pytest.CaptureFixture[str]) -> None:
    for load in (["--load-profile", "600:0"], ["--load-profile", "60:0,60:0"]):
        code = main(["buckets", "replay", "--max-model-len", "4096", "--max-num-seqs", "8", "--requests", "20",
                     "--no-plan", "--no-strategies", *load])  # fmt: skip
        out, err = capsys.readouterr()
        assert code == 1
        assert "0 requests replayed of 20 sampled (20 never sent" in out
        assert "no request ran" in err
        assert "1.000" not in out


def test_the_least_rate_runs_each_request_alone_with_its_own_latency(capsys: pytest.CaptureFixture[str]) -> None:
    # held-out round r4loads, case 2: at 1e-300 requests/s arrivals 1e300 s apart left no bit for a step and every
    # latency read 0 ms; the least rate accepted still resolves them: each request as at concurrency 1
    argv = ["buckets", "replay", "--max-model-len", "4096", "--max-num-seqs", "8", "--requests", "10", "--no-plan",
            "--no-strategies", "--json"]  # fmt: skip
    latency = []
    for load in (["--concurrency", "1"], ["--request-rate", "1e-6"]):
        assert main([*argv, *load]) in (0, 1)
        (config,) = json.loads(capsys.readouterr().out)["configurations"]
        latency.append(config["latency_per_load"][0])
    alone, slowest = latency
    for figure in ("ttft_ms", "e2el_ms"):
        assert alone[figure]["p50"] > 0
        assert slowest[figure]["p50"] == pytest.approx(alone[figure]["p50"], rel=1e-6)


def test_bad_load_descriptions_exit_2_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--request-rate", "0"], ["--request-rate", "1e9"], ["--request-rate", "1e-300"],
                 ["--load-profile", "600:4,x"], ["--load-profile", ",".join(["1:1"] * 65)], ["--requests", "1000000"],
                 ["--concurrency", "4", "--request-rate", "2"]):  # fmt: skip
        assert main(["buckets", "replay", "--no-plan", "--no-strategies", *argv]) == 2
        err = capsys.readouterr().err
        assert "accepted" in err or "not allowed with" in err or "one of them" in err


@pytest.mark.parametrize(("load", "named"), [(["--request-rate", "2"], "--request-rate R"),
                                             (["--load-profile", "600:4"], "--load-profile S:C,...")])  # fmt: skip
def test_concurrency_beside_a_rate_or_a_profile_is_refused_naming_both_options(
    load: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Held-out r7text case 10: the line named --concurrency and "a request rate or load profile", not the option
    given."""
    assert main(["buckets", "replay", "--no-plan", "--no-strategies", *load, "--concurrency", "8"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert f"--concurrency and {load[0]} both set the load" in err
    assert err.rstrip().endswith(f"accepted: --concurrency N or {named}, not both")


def test_a_covering_file_under_skip_warmup_warms_nothing_and_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cover.txt"
    path.write_text("(1, range(32, 8193, 32), range(0, 65))\n(range(1, 9), 1, range(1, 600))\n(1, 128, 300)\n")
    argv = ["buckets", "replay", "--max-model-len", "8192", "--max-num-seqs", "8", "--concurrency", "4",
            "--requests", "100", "--bucket-file", str(path), "--no-plan", "--no-strategies", "--json"]  # fmt: skip
    assert main(argv) == 0  # it covers every shape: nothing compiles at run time
    warm = json.loads(capsys.readouterr().out)
    # its buckets vllm-gaudi's filters drop are said, naming the file as given
    assert any(n.startswith(f"--bucket-file {path}: vllm-gaudi drops ") for n in warm["notes"])
    monkeypatch.setenv("VLLM_SKIP_WARMUP", "true")
    assert main(argv) == 1  # vllm-gaudi warms nothing: every shape that runs compiles while a request waits
    cold = json.loads(capsys.readouterr().out)["configurations"][1]
    assert cold["graphs_warmed"]["total"] == 0
    assert cold["buckets_listed"]["prompt"] > 0
    # F34: the JSON's run-time compiles and stalls are the text's: every shape that ran, not 0
    compiled = cold["run_time_compiles"]["prompt"] + cold["run_time_compiles"]["decode"]
    assert compiled == sum(cold["compiles_with_skip_warmup"].values()) > 0
    assert cold.get("compile_stall_seconds") == cold.get("compile_stall_seconds_with_skip_warmup")


@pytest.mark.parametrize(
    ("max_num_seqs", "levels"),
    [
        (1, [1]),
        (32, [1, 2, 4, 8, 16, 24, 32]),
        (384, [1, 2, 4, 8, 16, 32, 64, 96, 128, 192, 256, 288, 384]),  # the quarters fall between powers of two
        (6, [1, 2, 3, 4, 6]),
    ],
)
def test_an_unknown_load_is_planned_at_powers_of_two_and_at_each_quarter_of_max_num_seqs(
    max_num_seqs: int, levels: list[int]
) -> None:
    assert load_levels(max_num_seqs) == levels


class _Counted:
    """A lookup that counts its prefill look-ups; ``unkept``: its fallbacks grow at every call, so the replay keeps
    no answer (every step looked up again: the plain recomputation)."""

    def __init__(self, lookup: TextLookup, unkept: bool) -> None:
        self.lookup, self.unkept, self.calls, self.asked = lookup, unkept, 0, 0
        self.warmed, self.max_prefill_batch = lookup.warmed, lookup.max_prefill_batch
        self.decode_block_cap = lookup.decode_block_cap

    def prefill(self, chunks: tuple[PrefillChunk, ...]) -> list[GraphRun]:
        self.calls += 1
        return self.lookup.prefill(chunks)

    def decode(self, sequences: int, blocks: int) -> GraphRun:
        return self.lookup.decode(sequences, blocks)

    def fallbacks(self) -> list[tuple[str, Bucket]]:
        self.asked += 1
        return self.lookup.fallbacks() + [("prompt", (0, 0, 0))] * (self.asked if self.unkept else 0)


def test_prefill_forwards_kept_across_a_replay_equal_every_step_looked_up_again() -> None:
    r = runs(8)
    sparse = VllmGaudi().with_text_buckets(((1, 128, 0),), ((1, 1, 8),))  # fallbacks generated along the trace
    assert sparse is not None
    kept, plain = (_Counted(sparse.text_lookup(SHAPE), unkept) for unkept in (False, True))  # type: ignore[arg-type]
    a, b = (replay(r.traces, lookup, "x") for lookup in (kept, plain))  # type: ignore[arg-type]
    assert kept.lookup.fallbacks() == plain.lookup.fallbacks() != []
    assert (a.per_bucket, a.compiles, a.shapes_run) == (b.per_bucket, b.compiles, b.shapes_run)
    assert (a.prefill_tokens, a.prefill_context) == (b.prefill_tokens, b.prefill_context)
    steps = sum(1 for t in r.traces for e in t.events if not isinstance(e, DecodeRun))
    assert plain.calls == steps > kept.calls  # the kept answers were used


def test_a_steps_forwards_are_kept_by_its_chunks_in_blocks_which_is_all_the_lookup_reads() -> None:
    """The replay keeps a step's forwards under ``chunk_key``: contexts within one KV block run alike (fresh lookups),
    and the key moves with every query, context block and chunk."""
    fresh = VllmGaudi().text_lookup
    same = [((PrefillChunk(300, 129),), (PrefillChunk(300, 256),)),
            ((PrefillChunk(64, 0), PrefillChunk(700, 1)), (PrefillChunk(64, 0), PrefillChunk(700, 128)))]  # fmt: skip
    for a, b in same:
        assert chunk_key(a, SHAPE.block_size) == chunk_key(b, SHAPE.block_size)
        assert fresh(SHAPE).prefill(a) == fresh(SHAPE).prefill(b)
    keys = {chunk_key(c, SHAPE.block_size) for c in ((PrefillChunk(300, 128),), (PrefillChunk(300, 129),),
            (PrefillChunk(301, 129),), (PrefillChunk(300, 129), PrefillChunk(5, 0)),
            (PrefillChunk(5, 0), PrefillChunk(300, 129)))}  # fmt: skip
    assert len(keys) == 5


@pytest.mark.parametrize("buckets", [None, (((1, 128, 0),), ((1, 1, 8),))])
def test_one_trace_replayed_by_its_distinct_events_equals_the_event_by_event_replay_to_the_last_bit(
    buckets: tuple[tuple[Bucket, ...], tuple[Bucket, ...]] | None,
) -> None:
    """A trace weighed by what ran is replayed by its distinct events (each answer counted and priced once, the sums
    over events in event order): every figure, price and fallback equals the replay event by event, with the
    runtime's own buckets and with a sparse file whose fallbacks change the lookup's answers along the trace."""
    images = Images((1600, 3136, 12544))
    timer = timer_for(CATALOG["Qwen/Qwen2.5-VL-7B-Instruct"], "gaudi2", block_size=128, tensor_parallel_size=1,
                      dtype_size=2, quantization=None, images=images)  # fmt: skip
    assert timer is not None
    r = schedules(default_traffic(), SHAPE, images, concurrency=None, requests=150, arrivals=Arrivals(rate=6.0),
                  timer=timer)  # fmt: skip
    model = VllmGaudi() if buckets is None else VllmGaudi().with_text_buckets(*buckets)
    assert model is not None
    _INDEXED.clear()
    stepwise = [list(w.items()) for w in shape_weights(r.traces)]
    prepare(r.traces)
    assert [list(w.items()) for w in shape_weights(r.traces)] == stepwise  # read from the units, keys in order
    assert len(_INDEXED[0][1].places) > 1  # steps of several chunks: their prices added place by place
    fast = replay(r.traces, model.text_lookup(SHAPE), "x", timer=timer)
    slow = _Tally(lookup := model.text_lookup(SHAPE))
    event_by_event = slow.result("x", _replay_steps(r.traces, lookup, slow, False, timer))
    assert fast == event_by_event
    assert bool(fast.fallbacks) == (buckets is not None)
    assert fast.times[0].prices == event_by_event.times[0].prices != ()


def test_the_text_prints_the_jsons_latency_quantiles_and_every_time_figure_with_its_interval(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["buckets", "replay", "--max-model-len", "8192", "--max-num-seqs", "8", "--request-rate", "3",
            "--requests", "60", "--no-plan", "--no-strategies"]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    (whole,) = json.loads(capsys.readouterr().out)["configurations"][0]["latency_per_load"]
    band = f"(±{whole['interval']:.0%})"
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = {line.split(band)[0].strip(): line for line in out.splitlines() if band in line}
    # r19replay 15: the busy times printed bare, their interval only on a line under the table
    for name in ("added TTFT p50 / p99", "added per-token p50 / p99", "busy time, real shapes",
                 "busy time with buckets"):  # fmt: skip
        assert name in rows
    stalls = [line.strip() for line in out.splitlines() if "stalls" in line and line.startswith("  ")]
    assert [line.split(" (±15%)")[0] for line in stalls] == ["compile stalls at run time",
                                                             "first-use stalls, VLLM_SKIP_WARMUP"]  # fmt: skip
    itl = " / ".join(f"{whole['itl_ms'][q]:.1f} ms" for q in ("p50", "p90", "p99"))
    assert itl in rows["ITL p50 / p90 / p99"]


def test_the_sweep_beside_a_known_load_weighs_every_level_even_for_a_page_that_saw_one_load() -> None:
    # a /metrics page's running gauge (8) is one moment's load: the buckets planned beside a replay at a known load
    # are planned over every level, as for the same traffic read from a CSV (r5agree case 17's fixer's note)
    page = dataclasses.replace(default_traffic(), running=8)
    images = Images((1600, 3136, 12544))
    at_eight = schedules(page, SHAPE, images, concurrency=None, requests=100)
    assert not at_eight.balanced
    sweep = load_sweep(at_eight, page, SHAPE, images, 100)
    assert sweep is not None
    assert sweep.balanced
    from_csv = load_sweep(at_eight, default_traffic(), SHAPE, images, 100)
    assert from_csv is not None
    assert sweep.load == from_csv.load
    assert load_sweep(sweep, page, SHAPE, images, 100) is None  # already every level


def test_the_warm_up_row_carries_its_interval_in_its_label_as_the_other_modelled_rows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # r14text 2: the row printed "268 s" bare; its held-out ±15% only on a footnote line
    assert main(["buckets", "replay", "--max-model-len", "8192", "--max-num-seqs", "8", "--concurrency", "4",
                 "--requests", "60", "--no-plan", "--no-strategies", "--profile", "none"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.strip().startswith("warm-up estimate (text graphs"))
    assert row.strip().startswith("warm-up estimate (text graphs, ±15%)")


def test_a_slow_rate_s_throughput_keeps_its_significant_figures() -> None:
    # r16loads 12: 3 requests over 1,964,343 s were rounded to a request_throughput of 0.0
    from vllm_hpu_mm.replay.latency import Latency, latency_dict

    q = (0.1, 0.2, 0.3)
    x = Latency("slow", 3, q, q, q, q, 0.1, 0.01, 1_964_342.9, 3 / 1_964_342.9, 200 / 1_964_342.9, 0.29, "e")
    assert latency_dict(x)["request_throughput"] == pytest.approx(1.527e-06, rel=1e-3)


def test_under_speculative_decoding_buckets_listed_counts_the_list_and_graphs_warmed_what_the_runtime_adds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Held-out r20text case 4: ``buckets_listed`` was the warmed count (exp's 124 decode, the plan's 87 against its
    note's 58 listed). vllm-gaudi v0.26.0 lists 53 exp decode buckets at these limits and warms them with the 71
    ``generate_spec_decode_buckets`` adds (extension/bucketing/common.py lines 222-226, 325-363)."""
    argv = ["buckets", "replay", "--runtime", "vllm-gaudi==0.26.0", "--device", "gaudi2", "--max-model-len", "8192",
            "--max-num-seqs", "64", "--max-num-batched-tokens", "2048", "--block-size", "128", "--kv-blocks", "4000",
            "--profile", "none", "--requests", "100", "--concurrency", "8", "--no-strategies", "--text-graph-budget",
            "90", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}']  # fmt: skip
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    own, planned = report["configurations"]
    assert own["graphs_warmed"] == {"prompt": 72, "decode": 124, "total": 196}
    assert own["buckets_listed"] == {"prompt": 72, "decode": 53}
    listed, warmed = planned["buckets_listed"], planned["graphs_warmed"]
    assert listed["prompt"] == warmed["prompt"]
    assert listed["decode"] < warmed["decode"]
    assert warmed["total"] <= 90
    (note,) = [n for n in report["notes"] if n.startswith("planned buckets: budget 90 graphs")]
    assert f"the runtime warms {warmed['total']} for the {listed['prompt'] + listed['decode']} buckets listed" in note
    # the text table says the same counts as the JSON
    assert main(argv) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.strip().startswith("buckets listed (prompt + decode)"))
    assert row.split()[-8:] == ["125", "(72", "+", "53)", str(listed["prompt"] + listed["decode"]),
                                f"({listed['prompt']}", "+", f"{listed['decode']})"]  # fmt: skip


def test_the_requests_served_are_those_the_replay_does_not_count_refused_for_every_reason() -> None:
    # fleet plan leaves out the requests buckets replay counts refused, by the one rule (r21replay 13)
    traffic = Traffic({Request((2240, 2240), 100, 50): 3, Request((30000, 100), 100, 50): 2,
                       Request((448, 448), 100, 50): 4, Request(None, 300, 40): 1}, "mixed")  # fmt: skip
    images = Images((1600, 3136), OversizePolicy.REJECT, loader=(12845056, 200.0))
    served, refused = served_requests(traffic, images)
    assert refused == {"image_oversize": 3, "image_refused": 2}
    assert served is not None
    assert served.num_requests == 5
    assert not any(p.refused for p in prompts(served, images, 50))
    shrink = Images((1600, 3136), OversizePolicy.SHRINK, loader=(12845056, 200.0))
    assert served_requests(traffic, shrink)[1] == {"image_refused": 2}
    assert served_requests(Traffic({Request((2240, 2240), 100, 50): 1}, "big"), images) == (None, {"image_oversize": 1})


def test_an_image_refusal_is_said_as_the_servers_and_a_prompt_refusal_as_the_engines() -> None:
    # r21replay 13's fixer's note: "refused by the engine" for images the server answers with HTTP 400
    from vllm_hpu_mm.replay.report import refused_line

    line = refused_line((("image_oversize", 3),), 10, see="x")
    assert "3 of the 10 requests sampled from the traffic are refused by the server (" in line
    assert "are refused by the engine (" in refused_line((("prompt_too_long", 2),), 10, see="x")
    both = refused_line((("image_refused", 1), ("prompt_too_long", 2)), 10, see="x")
    assert "are refused by the server or the engine (" in both

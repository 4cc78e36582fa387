"""Drive a running vLLM server with vLLM's own client (``vllm.benchmarks.serve``), fit the step model on probe runs
and compare the replay's prediction with held-out runs: shared by ``benchmarks/performance/server_latency.py`` and
``tests/e2e/test_latency.py``.

The split is fixed before any fit: the probe runs (:func:`probe`: concurrency 1 for prefill, 1/half/full batch for
decode, two image sizes) fit the step model; the bench runs (:func:`bench_at_rates`: Poisson arrivals at rates set
from the fitted model's saturation, and all at once) are only predicted and measured.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.support.probe import (
    BenchRun,
    engine_limits,
    fit_frontend_share,
    fit_wake,
    predict,
    scaled_step,
    speed_against,
)
from vllm_hpu_mm.buckets.packing import bucket_for
from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.models.step_fit import FittedStep, fit_step
from vllm_hpu_mm.preprocess.align import aligned_size, patch_count
from vllm_hpu_mm.replay.latency import Latency
from vllm_hpu_mm.replay.scheduler import Prompt
from vllm_hpu_mm.traffic.metrics import families, read_exposition

#: Requests per second of the idle probes (a request there takes ~0.1-0.2 s: about three in four find the server idle).
IDLE_PROBE_RATE = 2.0
#: Issue 32's bound on each predicted latency figure (relative to the measured one).
LATENCY_BOUND = 0.15
#: vllm bench serve's percentiles, as the replay reports them.
PERCENTILES = "50,90,99"
PROMPT_TOKENS = "vllm:prompt_tokens"


@dataclasses.dataclass(frozen=True)
class Target:
    """A running server and the engine numbers it runs with."""

    base_url: str
    served_model: str
    model_dir: Path
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    block_size: int
    num_kv_blocks: int
    #: The server's vision buckets (patches), when it pads images to them.
    vision_buckets: tuple[int, ...] = ()
    workdir: Path = Path(".")
    #: The server's shape log (``VLLM_HPU_MM_SHAPE_LOG``): the tower's own time per pass, when set.
    shape_log: Path | None = None

    def limits(self) -> EngineShape:
        return engine_limits(max_num_seqs=self.max_num_seqs, max_num_batched_tokens=self.max_num_batched_tokens,
                             max_model_len=self.max_model_len, block_size=self.block_size,
                             num_kv_blocks=self.num_kv_blocks)  # fmt: skip

    def patches(self, width: int, height: int) -> int:
        """Patches the tower runs for one image (our aligned processor; padded to the server's bucket)."""
        h, w = aligned_size(height, width)
        p = patch_count(h, w)
        return (bucket_for(p, self.vision_buckets) or p) if self.vision_buckets else p


@dataclasses.dataclass(frozen=True)
class Traffic:
    """One run's requests: text (random prompts, /v1/completions) or one image each (random-mm, chat)."""

    input_len: int
    output_len: int
    image: tuple[int, int] | None = None
    range_ratio: float = 0.0

    def describe(self) -> str:
        what = f"image {self.image[0]}x{self.image[1]} + " if self.image else ""
        spread = f" ±{self.range_ratio:.0%}" if self.range_ratio else ""
        return f"{what}{self.input_len}{spread} prompt tokens, {self.output_len} out"


def _prompt_tokens(target: Target) -> float:
    fams = families(read_exposition(target.base_url + "/metrics"), "/metrics")
    return float(sum(s.value for f in fams if f.name == PROMPT_TOKENS for s in f.samples if s.name.endswith("_total")))


def _log_size(path: Path | None) -> int:
    return path.stat().st_size if path is not None and path.exists() else 0


def _tower_passes(path: Path | None, start: int) -> tuple[tuple[float, int, int], ...]:
    """(seconds, images, patches) of every timed tower pass the shape log gained from byte ``start`` on."""
    if path is None or not path.exists():
        return ()
    with path.open("rb") as f:
        f.seek(start)
        lines = f.read().decode(errors="replace").splitlines()
    out = []
    for line in lines:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("seconds"), int | float) and rec.get("images"):
            out.append((float(rec["seconds"]), len(rec["images"]), int(rec.get("total", 0))))
    return tuple(out)


def run_bench(target: Target, traffic: Traffic, *, name: str, requests: int, concurrency: int | None = None,
              rate: float | None = None, seed: int = 0) -> BenchRun:  # fmt: skip
    """One ``vllm bench serve`` run (its result saved under ``target.workdir``); the server's prompt tokens read
    from /metrics around it."""
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    from vllm.utils.gc_utils import freeze_gc_heap

    argv = ["--base-url", target.base_url, "--model", target.served_model, "--tokenizer", str(target.model_dir),
            "--num-prompts", str(requests), "--request-rate", "inf" if rate is None else f"{rate:.4f}",
            "--seed", str(seed), "--ignore-eos", "--disable-tqdm", "--save-result", "--save-detailed",
            "--result-dir", str(target.workdir), "--result-filename", f"{name}.json",
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", PERCENTILES,
            "--random-input-len", str(traffic.input_len), "--random-output-len", str(traffic.output_len),
            "--random-range-ratio", str(traffic.range_ratio)]  # fmt: skip
    if concurrency is not None:
        argv += ["--max-concurrency", str(concurrency)]
    patches: tuple[int, ...] = ()
    if traffic.image is None:
        argv += ["--backend", "openai", "--endpoint", "/v1/completions", "--dataset-name", "random"]
    else:
        w, h = traffic.image
        argv += ["--backend", "openai-chat", "--endpoint", "/v1/chat/completions", "--dataset-name", "random-mm",
                 "--random-mm-base-items-per-request", "1", "--random-mm-num-mm-items-range-ratio", "0",
                 "--random-mm-limit-mm-per-prompt", '{"image": 1, "video": 0}',
                 "--random-mm-bucket-config", f"{{({h}, {w}, 1): 1.0}}"]  # fmt: skip
        patches = (target.patches(w, h),)
    parser = FlexibleArgumentParser()  # type: ignore[no-untyped-call]
    add_cli_args(parser)
    args = parser.parse_args(argv)
    # the client's own heap frozen, as vLLM freezes its servers' after start-up: a full collection of everything this
    # process imported would stall the client's event loop mid-run and stamp tokens late
    freeze_gc_heap()
    before = _prompt_tokens(target)
    logged = _log_size(target.shape_log)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        result = main(args)
    (target.workdir / f"{name}.log").write_text(out.getvalue())
    served = _prompt_tokens(target) - before
    tower = _tower_passes(target.shape_log, logged)
    ok = [n for n, e in zip(result["input_lens"], result["errors"], strict=True) if not e]
    # the server also counts failed requests' prompts: the offset is taken over what it billed per request sent
    offset = served / max(1, len(result["input_lens"])) - sum(result["input_lens"]) / max(1, len(result["input_lens"]))
    if not ok:
        raise RuntimeError(f"bench run {name}: every request failed: {result['errors'][:3]}")
    return BenchRun(result, concurrency, max(0.0, offset), patches, tower)


def probe(target: Target, *, requests: int, idle: bool = True) -> list[BenchRun]:
    """The probe runs the step model is fitted on (``requests`` per run, at least 4); ``idle``: with the idle
    probes (the wake-up: TTFT at low load)."""
    n = max(4, requests)
    budget = min(target.max_num_batched_tokens, target.max_model_len) // 2  # one chunk each
    prefill = Traffic(budget // 2, 16, range_ratio=0.9)

    def image(side: int) -> Traffic:
        return Traffic(32, 8, image=(side, side))

    runs = [run_bench(target, prefill, name="probe-prefill", requests=n, concurrency=1)]
    for c in sorted({max(1, target.max_num_seqs // 2), target.max_num_seqs}):
        runs.append(run_bench(target, Traffic(64, 48), name=f"probe-decode-{c}", requests=max(n, 2 * c),
                              concurrency=c))  # fmt: skip
    # prompts of every length joining running decodes: steps that prefill beside decodes (a few in the runs above)
    c = max(1, target.max_num_seqs // 2)
    runs.append(run_bench(target, Traffic(budget // 2, 8, range_ratio=0.9), name=f"probe-mixed-{c}",
                          requests=max(n, 2 * c), concurrency=c))  # fmt: skip
    for side in (224, 448):
        runs.append(run_bench(target, image(side), name=f"probe-image-{side}",
                              requests=max(2, n // 2), concurrency=1))  # fmt: skip
    # images sent while others decode: the API server's work on them against the engine's steps (frontend_share)
    c = target.max_num_seqs
    runs.append(run_bench(target, Traffic(32, 16, image=(448, 448)), name=f"probe-image-448-{c}",
                          requests=max(n, 2 * c), concurrency=c))  # fmt: skip
    # arrivals at random at a low rate: most find the server idle, after idle times spread over 0 to ~2 s (the
    # wake-up, fit_wake); the prompts of the prefill and image probes above, so that their own step is known
    for name, traffic in (("text", prefill), ("image", image(224))) if idle else ():
        run = run_bench(target, traffic, name=f"probe-idle-{name}", requests=n, rate=IDLE_PROBE_RATE, seed=7)
        runs.append(dataclasses.replace(run, idle=True))
    return runs


def fit(target: Target, runs: Sequence[BenchRun]) -> FittedStep:
    source = f"{len(runs)} probe runs of vllm bench serve on {target.base_url}"
    step = fit_frontend_share(runs, lambda obs: fit_step(obs, block_size=target.block_size, source=source))
    return fit_wake(runs, step)


def measured(run: BenchRun) -> dict[str, float]:
    """vllm bench serve's own figures of a run (ms, requests/s, tokens/s)."""
    r = run.result
    keys = [f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for s in ("p50", "p90", "p99", "mean")]
    out = {k: float(r[k]) for k in keys if k in r}
    out |= {"request_throughput": float(r["request_throughput"]), "output_throughput": float(r["output_throughput"]),
            "completed": float(r["completed"]), "failed": float(r.get("failed", 0)),
            "duration_s": float(r["duration"])}  # fmt: skip
    return out


def predicted(x: Latency) -> dict[str, float]:
    out: dict[str, float] = {}
    for m, values in (("ttft", x.ttft), ("tpot", x.tpot), ("itl", x.itl), ("e2el", x.e2el)):
        for s, v in zip(("p50", "p90", "p99"), values, strict=True):
            out[f"{s}_{m}_ms"] = 1000 * v
    return out | {"mean_ttft_ms": 1000 * x.mean_ttft, "mean_tpot_ms": 1000 * x.mean_tpot,
                  "request_throughput": x.request_throughput, "output_throughput": x.output_throughput}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Row:
    """One held-out bench run: its load, what vllm bench measured and what the replay predicted."""

    name: str
    traffic: str
    rate: float | None
    measured: dict[str, float]
    predicted: dict[str, float]
    #: The run's requests as the engine saw them (for a prediction at another load).
    prompts: tuple[Prompt, ...] = ()
    #: The server's speed against the fitted step around the run (the geometric mean of the re-probes just before
    #: and just after it; 1.0: as fitted).
    speed: float = 1.0
    #: Predicted TTFT p50 (ms) on a machine 5% faster and 5% slower than ``speed``: how far the figure moves with
    #: the speed the prediction rests on (near saturation, many times over).
    ttft_p50_range: tuple[float, float] = (math.nan, math.nan)
    #: The re-probes' speeds just before and just after the run.
    speeds: tuple[float, float] = (1.0, 1.0)
    #: Each latency figure predicted at the two re-probes' speeds (lower, higher): where the machine's drift during
    #: the run leaves the prediction.
    bracket: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    #: TTFT p50 and p90 (ms) predicted without the server's wake-up after idleness (the step's ``wake_*`` at 0): what
    #: that term adds.
    without_wake: tuple[float, float] = (math.nan, math.nan)

    def error(self, key: str) -> float:
        m = self.measured.get(key, math.nan)
        return self.predicted.get(key, math.nan) / m - 1 if m else math.nan

    def in_bracket(self, key: str, tolerance: float) -> bool:
        """Whether the measured figure is within ``tolerance`` of the prediction at some speed between the two
        re-probes' (the figure moves monotonically with the speed)."""
        m = self.measured.get(key, math.nan)
        lo, hi = self.bracket.get(key, (math.nan, math.nan))
        return bool(m > 0 and min(lo, hi) / (1 + tolerance) <= m <= max(lo, hi) / (1 - tolerance))


def reprobe(target: Target, step: FittedStep, name: str) -> float:
    """The server's speed now against the fitted step (:func:`speed_against`): a short closed-loop decode run of the
    probe's own shape, just before (and after) a held-out run."""
    c = target.max_num_seqs
    run = run_bench(target, Traffic(64, 48), name=f"reprobe-{name}", requests=2 * c, concurrency=c)
    return speed_against(run, step)


LATENCY_KEYS = ("p50_ttft_ms", "p90_ttft_ms", "p50_tpot_ms", "p90_tpot_ms")


def _row(name: str, traffic: Traffic, rate: float | None, run: BenchRun, at: Callable[[float], Latency],
         speeds: tuple[float, float], asleep: Callable[[float], Latency]) -> Row:  # fmt: skip
    """A held-out run's row: predicted at the geometric mean of the re-probes' speeds, with the prediction at each
    and the one without the wake-up (``asleep``)."""
    speed = math.sqrt(speeds[0] * speeds[1])
    x = predicted(at(speed))
    plain = asleep(speed).ttft
    ends = [predicted(at(k)) for k in sorted(speeds)]
    spread = (1000 * at(0.95 * speed).ttft[0], 1000 * at(1.05 * speed).ttft[0]) if rate is not None else (
        math.nan, math.nan)  # fmt: skip
    bracket = {key: (ends[0][key], ends[1][key]) for key in LATENCY_KEYS}
    return Row(name, traffic.describe(), rate, measured(run), x, tuple(run.prompts()), speed, spread, speeds,
               bracket, (1000 * plain[0], 1000 * plain[1]))  # fmt: skip


def bench_at_rates(target: Target, step: FittedStep, traffic: Traffic, *, name: str, requests: int,
                   shares: Sequence[float], speeds: bool = True) -> list[Row]:  # fmt: skip
    """Held-out runs: all at once (the saturation rate), then Poisson arrivals at each share of the predicted
    saturation rate; each predicted from its own requests, on the step scaled to the machine's speed that re-probes
    measured just before and just after it (one re-probe between two runs serves both; ``speeds`` False: none, the
    step as fitted)."""

    def speed(run_name: str) -> float:
        return reprobe(target, step, run_name) if speeds else 1.0

    rows = []
    limits = target.limits()
    before = speed(f"{name}-inf")
    burst = run_bench(target, traffic, name=f"{name}-inf", requests=requests)
    after = speed(f"{name}-after-inf")
    prompts = burst.prompts()

    asleep = dataclasses.replace(step, wake_s=0.0, wake_image_s=0.0)

    def at_once(k: float, step: FittedStep = step) -> Latency:
        return predict(prompts, limits, scaled_step(step, k), rate=None, load="all at once")

    rows.append(_row(f"{name}-inf", traffic, None, burst, at_once, (before, after),
                     lambda k: at_once(k, asleep)))  # fmt: skip
    sat = rows[-1].predicted["request_throughput"]
    for k, share in enumerate(shares):
        rate = share * sat
        before = after
        run = run_bench(target, traffic, name=f"{name}-{share:g}", requests=requests, rate=rate, seed=k + 1)
        after = speed(f"{name}-after-{share:g}")
        # the run's own arrivals (when the client sent each request): a 120-request run's quantiles near saturation
        # move with its draw far more than with the model
        sent, times = run.sent()

        def at(k: float, sent: list[Prompt] = sent, times: list[float] = times, rate: float = rate,
               step: FittedStep = step) -> Latency:  # fmt: skip
            return predict(sent, limits, scaled_step(step, k), rate=rate, load=f"Poisson {rate:.3g}/s", times=times)

        rows.append(_row(f"{name}-{share:g}", traffic, rate, run, at, (before, after),
                         functools.partial(at, step=asleep)))  # fmt: skip
    return rows


def rows_json(rows: Sequence[Row]) -> list[dict[str, Any]]:
    return [{"name": r.name, "traffic": r.traffic, "request_rate": r.rate, "speed": round(r.speed, 4),
             "speed_before_after": [round(v, 4) for v in r.speeds],
             "predicted_at_reprobe_speeds": {k: [round(v, 3) for v in lo_hi] for k, lo_hi in r.bracket.items()},
             "within_bound_inside_bracket": {k: r.in_bracket(k, LATENCY_BOUND) for k in r.bracket},
             "ttft_p50_p90_ms_without_wake": [round(v, 3) for v in r.without_wake],
             "ttft_p50_ms_at_speed_0.95_1.05": [round(v, 3) for v in r.ttft_p50_range],
             "measured": r.measured,
             "predicted": {k: round(v, 4) for k, v in r.predicted.items()},
             "error": {k: round(r.error(k), 4) for k in r.predicted if k in r.measured}} for r in rows]  # fmt: skip


def save_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")

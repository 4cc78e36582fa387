"""Fit the step-time model's per-device constants on public Gaudi points and score them on the held-out ones.

Data: ``benchmarks/fits/data/step_time_points.json``, every row with its URL, phase and set declared and committed
before it was scored. Fitted: Intel's published Gaudi 2 / Gaudi 3 throughput and latency tables (sets ``fit`` and
``heldout``: the first held-out rows, split at 95f0591, were scored at 04aeac0 and are seen, so they are fitted now).
Held out: ``heldout2`` (optimum-habana's CI throughput baselines, split at 7fcacd1 before any evaluation); no
``heldout2`` row is fitted. Per device: the compute efficiency (what compute-bound prefill reaches of the matrix
peak), the memory efficiency (what bandwidth-bound decode reaches of HBM), the fixed cost per step, the roofline
exponent (how far compute and memory time overlap near the ridge: ``(c^p + m^p)^(1/p)``) and the all-reduce latency
per tensor-parallel size (one per TP size the fit rows have; other sizes take their geometric mean). MoE: the model
reads only the experts a step's tokens touch (``1 - (1 - k/E)^tokens``); no MoE point is scored here.

Each throughput row is one prefill of ``batch x input`` tokens then ``output`` decode steps of ``batch`` sequences
whose context grows from ``input`` (blocks of 128; weights and KV cache at the row's precision: fp8 rows fp8 weights
and KV, bf16 rows bf16 both); a latency row is one prefill of ``input`` tokens. Loss: mean over the two phases of
the mean squared log error of the fit rows (so the fewer prefill rows weigh as much as the decode rows). Search: a
multiplicative pattern search on each constant, bounded, from the unfitted defaults (p from 4). Few parameters: 4 +
one per TP size per device. The fit rows' loss is also printed with p fixed at infinity (the ideal max roofline),
fitted the same way: the evidence for the exponent comes from the fit rows alone.

Writes ``vllm_hpu_mm/data/step_time_fit.json`` (read by vllm_hpu_mm.models.step_time) and
``benchmarks/fits/results/step_time_fit.{md,json}``: per device and phase the held-out median and max error and n.

    PYTHONPATH=. .venv/bin/python benchmarks/fits/step_time_fit.py
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from vllm_hpu_mm.models.dims import TEXT_ONLY, ModelDims
from vllm_hpu_mm.models.step_time import StepTime, step_time

ROOT = Path(__file__).resolve().parents[2]
POINTS = ROOT / "benchmarks" / "fits" / "data" / "step_time_points.json"
RESULTS = ROOT / "benchmarks" / "fits" / "results"
PACKAGE = ROOT / "vllm_hpu_mm" / "data" / "step_time_fit.json"
BLOCK = 128
#: The unfitted defaults the search starts from (one set for every device; p = 4 where it is fitted).
BEFORE = {"compute_efficiency": 0.55, "memory_efficiency": 0.9, "overhead_s": 4e-3, "allreduce_latency_s": 100e-6,
          "roofline_exponent": 4.0}  # fmt: skip
#: The constants shipped before this refit (fitted at 04aeac0 on the first split, max roofline), scored on heldout2
#: for history only: nothing is chosen by it.
PREVIOUS: dict[str, dict[str, Any]] = {
    "gaudi2": {"compute_efficiency": 0.5712, "memory_efficiency": 0.9147, "overhead_s": 0.004338,
               "roofline_exponent": math.inf, "allreduce": {2: 0.00011024, 4: 0.00041321, 8: 0.00012285}},
    "gaudi3": {"compute_efficiency": 0.3566, "memory_efficiency": 0.788, "overhead_s": 0.001,
               "roofline_exponent": math.inf, "allreduce": {2: 8.364e-05, 8: 0.0001311}},
}  # fmt: skip
BOUNDS = {"compute_efficiency": (0.05, 1.0), "memory_efficiency": (0.05, 1.0), "overhead_s": (1e-4, 0.05),
          "roofline_exponent": (1.0, 64.0), "allreduce": (1e-7, 2e-3)}  # fmt: skip
MAX_ROUNDS = 400
#: The commit that declared the held-out set scored here (heldout2), before any evaluation or fit on it.
SPLIT_COMMIT = "7fcacd1"
#: Sets fitted (the first held-out rows are seen since 04aeac0 published their scores) and the set held out.
FITTED = ("fit", "heldout")
HELDOUT = "heldout2"
SCALARS = ("compute_efficiency", "memory_efficiency", "overhead_s", "roofline_exponent")
#: Fewer held-out points than this for a phase: its printed interval also covers the fitted rows of the phase.
MIN_HELDOUT = 3


def models(data: dict[str, Any]) -> dict[str, ModelDims]:
    """The points' checkpoints from their public config values in the data file."""
    out = {}
    for name, c in data["models"].items():
        if name == "about":
            continue
        h, heads = c["hidden_size"], c["num_attention_heads"]
        out[name] = ModelDims(name, h, c["num_hidden_layers"], heads, c["num_key_value_heads"], h // heads,
                              c["intermediate_size"], c["vocab_size"], False, 131072, TEXT_ONLY, model_type="llama",
                              architecture="LlamaForCausalLM")  # fmt: skip
    return out


MODELS = models(json.loads(POINTS.read_text()))

Params = dict[str, Any]  # the SCALARS, allreduce {tp: s}
#: Per precision: bytes per KV element and the quantization the model prices (fp8 rows: fp8 weights, KV and rate).
PRECISIONS = {"fp8": (1, "fp8"), "bf16": (2, None)}


def _step(p: dict[str, Any], params: Params) -> StepTime:
    tp = p["tensor_parallel"]
    ar = params["allreduce"]
    kv, quantization = PRECISIONS[p["precision"]]
    return step_time(MODELS[p["checkpoint"]], p["device"], block_size=BLOCK, tensor_parallel_size=tp, dtype_size=2,
                     kv_dtype_size=kv, quantization=quantization, compute_efficiency=params["compute_efficiency"],
                     memory_efficiency=params["memory_efficiency"], overhead_s=params["overhead_s"],
                     allreduce_latency_s=ar.get(tp, _pooled(ar)),
                     roofline_exponent=params["roofline_exponent"])  # fmt: skip


def _pooled(ar: dict[int, float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in ar.values())) if ar else BEFORE["allreduce_latency_s"]


def true_over_model(p: dict[str, Any], params: Params) -> float:
    """The published time over the modelled time of one point (> 1: the model is too fast)."""
    t = _step(p, params)
    if p["kind"] == "latency":
        return float(p["published"]) / 1000 / t.prefill_s(p["batch"], p["input"], 0)
    b, inp, out = p["batch"], p["input"], p["output"]
    seconds = t.prefill_s(b, inp, 0)
    per_blocks: dict[int, int] = {}
    for k in range(out - 1):  # decode steps grouped by their context's block count
        blocks = b * math.ceil((inp + k + 1) / BLOCK)
        per_blocks[blocks] = per_blocks.get(blocks, 0) + 1
    seconds += sum(n * t.decode_s(b, blocks) for blocks, n in per_blocks.items())
    return float(b * out / seconds / p["published"])


def _loss(points: list[dict[str, Any]], params: Params) -> float:
    per_phase: dict[str, list[float]] = {}
    for p in points:
        per_phase.setdefault(p["phase"], []).append(math.log(true_over_model(p, params)) ** 2)
    return statistics.fmean(statistics.fmean(v) for v in per_phase.values())


def _keys(params: Params) -> list[tuple[str, int | None]]:
    scalars = [(k, None) for k in SCALARS if math.isfinite(params[k])]  # an infinite exponent stays fixed
    return scalars + [("allreduce", tp) for tp in sorted(params["allreduce"])]


def _get(params: Params, key: tuple[str, int | None]) -> float:
    name, tp = key
    return float(params["allreduce"][tp] if tp is not None else params[name])


def _set(params: Params, key: tuple[str, int | None], value: float) -> Params:
    name, tp = key
    new = {**params, "allreduce": dict(params["allreduce"])}
    lo, hi = BOUNDS[name]
    value = min(hi, max(lo, value))
    if tp is not None:
        new["allreduce"][tp] = value
    else:
        new[name] = value
    return new


def fit(points: list[dict[str, Any]], exponent: float = BEFORE["roofline_exponent"]) -> tuple[Params, float]:
    """A bounded multiplicative pattern search from the unfitted defaults (few parameters, smooth loss); an infinite
    ``exponent`` fits the max roofline."""
    tps = sorted({p["tensor_parallel"] for p in points if p["tensor_parallel"] > 1})
    params: Params = {k: BEFORE[k] for k in SCALARS}
    params["roofline_exponent"] = exponent
    params["allreduce"] = dict.fromkeys(tps, BEFORE["allreduce_latency_s"])
    best = _loss(points, params)
    step = 2.0
    for _ in range(MAX_ROUNDS):
        improved = False
        for key in _keys(params):
            for factor in (step, 1 / step):
                trial = _set(params, key, _get(params, key) * factor)
                score = _loss(points, trial)
                if score < best - 1e-12:
                    params, best, improved = trial, score, True
        if not improved:
            step = math.sqrt(step)
            if step < 1.005:
                break
    return params, best


def _errors(points: list[dict[str, Any]], params: Params) -> list[dict[str, Any]]:
    return [{"id": p["id"], "phase": p["phase"], "set": p["set"], "tp": p["tensor_parallel"],
             "true_over_model": round(true_over_model(p, params), 4)} for p in points]  # fmt: skip


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Error of the modelled time against the published one: |model / true - 1|."""
    if not rows:
        return {"n": 0}
    errs = [abs(1 / r["true_over_model"] - 1) for r in rows]
    ratios = [r["true_over_model"] for r in rows]
    return {"n": len(rows), "median_error": round(statistics.median(errs), 4), "max_error": round(max(errs), 4),
            "true_over_model_min": round(min(ratios), 4), "true_over_model_max": round(max(ratios), 4)}  # fmt: skip


def main() -> None:
    data = json.loads(POINTS.read_text())
    points = data["points"]
    devices = sorted({p["device"] for p in points})
    package: dict[str, Any] = {
        "version": 1,
        "fitted_by": "benchmarks/fits/step_time_fit.py",
        "data": "benchmarks/fits/data/step_time_points.json",
        "split_commit": SPLIT_COMMIT,
        "machine": "none: arithmetic on vendor-published tables (no Gaudi was used)",
        "evidence": "fitted on Intel's published Gaudi throughput/latency tables (fp8, optimum-habana, SynapseAI "
        "1.18); held out: optimum-habana's CI throughput baselines (bf16 and fp8)",
        "devices": {},
    }
    report: dict[str, Any] = {"devices": {}}
    for device in devices:
        mine = [p for p in points if p["device"] == device]
        train = [p for p in mine if p["set"] in FITTED]
        params, loss = fit(train)
        _, loss_max = fit(train, math.inf)
        rows = _errors(mine, params)
        rows_before = _errors(mine, PREVIOUS[device])
        intervals: dict[str, Any] = {}
        scores: dict[str, Any] = {}
        for phase in ("decode", "prefill"):

            def pick(rs: list[dict[str, Any]], which: str, phase: str = phase) -> list[dict[str, Any]]:
                return [r for r in rs if r["set"] == which and r["phase"] == phase]

            held = pick(rows, HELDOUT)
            s = _summary(held)
            fitted = [r for r in rows if r["set"] in FITTED and r["phase"] == phase]
            scores[phase] = {"heldout": s, "fit": _summary(fitted),
                             "heldout_before": _summary(pick(rows_before, HELDOUT))}  # fmt: skip
            intervals[phase] = s
            if 0 < s["n"] < MIN_HELDOUT:  # too few to bound the phase alone: cover the fitted rows too
                ratios = [r["true_over_model"] for r in held + fitted]
                intervals[phase] = {
                    **s,
                    "true_over_model_min": round(min(ratios), 4),
                    "true_over_model_max": round(max(ratios), 4),
                    "widened_to_fit_rows": len(fitted),
                }
        package["devices"][device] = {
            "compute_efficiency": round(params["compute_efficiency"], 4),
            "memory_efficiency": round(params["memory_efficiency"], 4),
            "overhead_s": round(params["overhead_s"], 6),
            "roofline_exponent": round(params["roofline_exponent"], 4),
            "allreduce_latency_s": {str(tp): round(v, 8) for tp, v in sorted(params["allreduce"].items())},
            "allreduce_latency_other_tp_s": round(_pooled(params["allreduce"]), 8),
            "fit_points": len(train),
            "intervals": intervals,
        }
        report["devices"][device] = {"params": package["devices"][device], "loss": loss,
                                     "loss_max_roofline": loss_max, "scores": scores, "rows": rows}  # fmt: skip
    PACKAGE.write_text(json.dumps(package, indent=1) + "\n")
    RESULTS.mkdir(parents=True, exist_ok=True)
    report["split"] = data["split"]
    (RESULTS / "step_time_fit.json").write_text(json.dumps(report, indent=1) + "\n")
    lines = [
        "# Step-time model fitted on public Gaudi points",
        "",
        "`benchmarks/fits/step_time_fit.py`; machine: none (arithmetic on vendor tables, on the 2-core dev machine;",
        "no Gaudi was used). Points and their declared split: `benchmarks/fits/data/step_time_points.json` (the",
        f"held-out set heldout2 committed alone at {SPLIT_COMMIT}, before any evaluation or fit on it). Evidence:",
        f"{package['evidence']}.",
        f"Held-out rule (heldout2): {data['split']['heldout2']['rule']}",
        f"Fitted: {data['split']['heldout2']['first_heldout']}. Phases: {data['split']['phase_rule']}.",
        "The first round's figures, as they came: commit: 6d74a8b, "
        "`git show 6d74a8b:benchmarks/fits/results/step_time_fit.md`.",
        "",
        "Error = |modelled time / published time - 1| per point; targets (issue 32): held-out median <= 15% for",
        "decode, <= 25% for prefill, per device. 'previous' = the constants shipped before this refit (fitted on the",
        "first split, max roofline), scored on the same heldout2 rows for history (nothing was chosen by it).",
        "",
        "| device | phase | held-out n | held-out median | held-out max | true/model range | previous: median / max "
        "| fit n | fit median |",
        "|---|---|---:|---:|---:|---|---|---:|---:|",
    ]
    for device, rep in report["devices"].items():
        for phase in ("decode", "prefill"):
            s = rep["scores"][phase]
            h, b, f = s["heldout"], s["heldout_before"], s["fit"]
            if not h["n"]:
                continue
            lines.append(f"| {device} | {phase} | {h['n']} | {h['median_error']:.1%} | {h['max_error']:.1%} | "
                         f"{h['true_over_model_min']}–{h['true_over_model_max']} | {b['median_error']:.1%} / "
                         f"{b['max_error']:.1%} | {f['n']} | {f.get('median_error', 0):.1%} |")  # fmt: skip
    lines += [
        "",
        "## Intervals printed by plans",
        "",
        f"The held-out range per phase; where fewer than {MIN_HELDOUT} held-out points check a phase, widened to",
        "also cover that phase's fitted rows (in-sample: a floor, not a test).",
        "",
        "| device | phase | published / modelled time | held-out n | widened to fit rows |",
        "|---|---|---|---:|---:|",
    ]
    for device, d in package["devices"].items():
        for phase, iv in d["intervals"].items():
            lines.append(
                f"| {device} | {phase} | {iv['true_over_model_min']}–{iv['true_over_model_max']} | {iv['n']} | "
                f"{iv.get('widened_to_fit_rows', 0)} |"
            )
    lines += ["", "## Fitted constants", "",
              "Fit loss = the mean over phases of the mean squared log error of the fit rows; 'max roofline' = "
              "the same",
              "fit with p fixed at infinity (the ideal overlap): the exponent's evidence, from fit rows only.", "",
              "| device | compute eff. | memory eff. | step overhead | roofline p | all-reduce latency per TP "
              "| fit points | fit loss | fit loss, max roofline |",
              "|---|---:|---:|---:|---:|---|---:|---:|---:|"]  # fmt: skip
    for device, d in package["devices"].items():
        ar = ", ".join(f"TP {tp}: {v * 1e6:.1f} us" for tp, v in d["allreduce_latency_s"].items())
        rep = report["devices"][device]
        lines.append(f"| {device} | {d['compute_efficiency']:.3f} | {d['memory_efficiency']:.3f} | "
                     f"{d['overhead_s'] * 1e3:.2f} ms | {d['roofline_exponent']:.2f} | {ar} (other TP "
                     f"{d['allreduce_latency_other_tp_s'] * 1e6:.1f} us) | {d['fit_points']} | {rep['loss']:.4f} | "
                     f"{rep['loss_max_roofline']:.4f} |")  # fmt: skip
    lines += ["", "## Every point (fitted constants)", "", "| point | phase | set | true / modelled time |",
              "|---|---|---|---:|"]  # fmt: skip
    for rep in report["devices"].values():
        for r in rep["rows"]:
            lines.append(f"| {r['id']} | {r['phase']} | {r['set']} | {r['true_over_model']:.3f} |")
    moe = "The heldout2 source has MoE rows (Mixtral 8x7B, Qwen1.5-MoE-A2.7B);"
    lines += ["", f"Not covered: {data['not_found']} {moe}", "they are not scored: this script builds no MoE layout."]
    (RESULTS / "step_time_fit.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:30]))


if __name__ == "__main__":
    main()

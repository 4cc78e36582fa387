"""Rule 7: the plan's findings, each saying where it fails (stage), how bad (severity) and the smallest fix."""

from __future__ import annotations

import dataclasses

from vllm_hpu_mm.memory.fixes import kv_fix, tp_fix, vision_fix
from vllm_hpu_mm.memory.rules import GIB, PlanInputs, Split, encoder_cache_tokens
from vllm_hpu_mm.memory.runtimes import VLLM_GAUDI_COMMIT, Runtime
from vllm_hpu_mm.memory.text_graphs import TextGraphFit


@dataclasses.dataclass(frozen=True)
class Warning_:
    """One finding: where it fails (``stage``), how bad (``severity``: error = will not start, warning = will
    compile or OOM later, info = a limit worth knowing), and the fix."""

    severity: str
    stage: str
    message: str
    fix: str


def findings(i: PlanInputs, p_free: int, s: Split, captured: tuple[int, ...], skipped: tuple[int, ...],
             per_token: int, seqs: int, text: TextGraphFit) -> tuple[Warning_, ...]:  # fmt: skip
    """Rule 7: what will fail where, each with its smallest fix."""
    out: list[Warning_] = []
    if p_free <= 0:
        out.append(Warning_("error", "startup", f"weights and profiling need {-p_free / GIB:.1f} GiB more than the "
                            f"device has free: OOM while loading or profiling", tp_fix(i)))  # fmt: skip
        return tuple(out)
    if seqs < 1:
        out.append(Warning_("error", "kv_cache", f"the KV cache ({s.kv_cache_bytes / GIB:.2f} GiB) cannot hold one "
                            f"sequence of --max-model-len {i.max_model_len}: vLLM refuses to start",
                            kv_fix(i, p_free, s, per_token)))  # fmt: skip
    elif seqs < i.max_num_seqs:
        out.append(Warning_("info", "kv_cache", f"only {seqs} sequences of --max-model-len {i.max_model_len} fit "
                            f"the KV cache at once (--max-num-seqs {i.max_num_seqs}); longer requests queue",
                            f"lower --max-num-seqs to {seqs} or --max-model-len"))  # fmt: skip
    runtime = i.effective_runtime
    if runtime is Runtime.VLLM_GAUDI and i.buckets is None and not i.skip_warmup and not i.enforce_eager:
        message = (
            "VLLM_MULTIMODAL_BUCKETS=None with warm-up on makes vllm-gaudi fail at warm-up (it takes len() of the "
            f"bucket list, hpu_model_runner.py @{VLLM_GAUDI_COMMIT})"
        )
        fix = "give a bucket list (e.g. unset VLLM_MULTIMODAL_BUCKETS for the default), or set VLLM_SKIP_WARMUP=true"
        out.append(Warning_("error", "graph_capture", message, fix))
    if skipped:
        stock = (
            " (stock vllm-gaudi captures every bucket without a check: OOM at warm-up)" if i.backend == "hpu" else ""
        )
        out.append(Warning_("warning", "graph_capture", f"vision buckets {','.join(map(str, skipped))} do not fit the "
                            f"vision graph pool ({s.prefill_vision_graph_bytes / GIB:.2f} GiB); they would compile at "
                            f"run time{stock}", vision_fix(i, p_free)))  # fmt: skip
    pf, pt, df, dt = text.prefill_fit, len(text.prefill), text.decode_fit, len(text.decode)
    if pf < pt:
        out.append(Warning_("warning", "graph_capture", f"{pf} of {pt} text prefill graphs fit their pool "
                            f"({s.prefill_text_graph_bytes / GIB:.2f} GiB); the rest compile at run time",
                            "raise VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO or VLLM_GRAPH_PROMPT_RATIO"))  # fmt: skip
    if df < dt:
        out.append(Warning_("warning", "graph_capture", f"{df} of {dt} decode graphs fit their pool "
                            f"({s.decode_graph_bytes / GIB:.2f} GiB); the rest compile at run time",
                            "lower --max-num-seqs, or raise VLLM_GRAPH_RESERVED_MEM"))  # fmt: skip
    cache_tokens, stock_tokens = encoder_cache_tokens(i)
    if cache_tokens < stock_tokens:
        # Measured (benchmarks/results/reliability_cpu_quiet.md): 14.8 vs 31.9 req/s on repeated images, 32.4 after.
        message = (
            f"vLLM's encoder cache will hold {cache_tokens} tokens (stock vLLM: {stock_tokens}): with images capped "
            "at the largest bucket, fewer encoded images stay cached, and traffic that repeats images with new text "
            "re-runs the vision encoder"
        )
        fix = f"raise --max-num-batched-tokens to {stock_tokens} if your traffic repeats images"
        out.append(Warning_("info", "runtime", message, fix))
    return tuple(out)

"""Rule 7: the plan's findings, each saying where it fails (stage), how bad (severity) and the smallest fix."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Literal

from vllm_hpu_mm.plan.costs import label
from vllm_hpu_mm.plan.fixes import Fix, kv_fix, tp_fix, vision_fix
from vllm_hpu_mm.plan.inputs import PlanInputs
from vllm_hpu_mm.plan.rules import Split, encoder_cache_tokens, usable_kv_blocks
from vllm_hpu_mm.plan.text_graphs import TextGraphFit
from vllm_hpu_mm.runtimes.base import (
    GRAPH_MULTIMODAL_PROMPT_RATIO,
    GRAPH_PROMPT_RATIO,
    GRAPH_RESERVED_MEM,
    SKIP_WARMUP,
)
from vllm_hpu_mm.values import GIB, Stage

__all__ = ["Code", "Finding", "Severity", "findings", "text_cost_evidence"]

#: error = will not start, warning = will compile or OOM later, info = a limit worth knowing.
Severity = Literal["error", "warning", "info"]
#: What the finding is about, for code that acts on findings (the OOM doctor) rather than reading their words.
Code = Literal[
    "weights_do_not_fit",
    "kv_cache_too_small",
    "kv_cache_queues",
    "vision_buckets_none_at_warmup",
    "vision_buckets_skipped",
    "prefill_graphs_skipped",
    "decode_graphs_skipped",
    "text_graphs_over_pool",
    "encoder_cache_smaller",
    "runtime_drops_buckets",
    "flag_not_read",
    "kv_cache_over_memory",
    "dtype_replaced",
    "architecture_not_served",
    "speculative_with_contiguous_pa",
    "kv_cache_from_variable",
    "kv_cache_zero_unset",
    "read_as_runtime_reads",
    "setting_not_read",
    "setting_overridden",
    "runtime_graph_defaults",
]


@dataclasses.dataclass(frozen=True)
class Finding:
    """One finding: what it is about (``code``), where it fails (``stage``), how bad (``severity``), in words
    (``message``), and the smallest fix (``fix.text``; ``fix.setting`` / ``fix.value`` when it names one target)."""

    severity: Severity
    stage: Stage
    code: Code
    message: str
    fix: Fix

    @property
    def about_memory(self) -> bool:
        """The memory plan does not fit (the other errors are configurations the runtime refuses)."""
        return self.code in ("weights_do_not_fit", "kv_cache_too_small", "kv_cache_over_memory")

    @property
    def refusal(self) -> str:
        """The line a command stops on for this error (memory plan, serve): what fails, why, and the fix."""
        what = "the memory plan does not fit" if self.about_memory else "the server would not start"
        return f"{what}: {self.message}; fix: {self.fix.text}"


def findings(i: PlanInputs, p_free: int, s: Split, skipped: tuple[int, ...], per_token: int, seqs: int,
             text: TextGraphFit) -> tuple[Finding, ...]:  # fmt: skip
    """Rule 7: what will fail where, each with its smallest fix. A fix names a variable the runtime does not read
    only as a planning input, and says so (``RuntimeTraits.knobs``)."""
    out: list[Finding] = []
    traits = i.runtime.traits

    def knobs(*variables: str) -> str:
        return traits.knobs(i.runtime.name, *variables)

    names = traits.architectures
    arch = i.model.architecture
    if names is not None and arch not in names and not (traits.transformers_fallback and not i.model.vision.present):
        # vLLM refuses an unlisted architecture at start-up (ModelRegistry._raise_for_unsupported); its Transformers
        # fallback, where the release has one, loads causal LMs only
        message = (f"{i.runtime.name.value} does not serve {arch}: it is not in {traits.architectures_source}, and "
                   "vLLM refuses an unlisted architecture at start-up")  # fmt: skip
        listing = traits.releases_listing(arch) if traits.releases_listing is not None else ()
        which = f": {', '.join(listing)}" if listing else ""
        fix = Fix(f"a {i.runtime.name.value} release whose registry lists {arch}{which}; or another runtime")
        out.append(Finding("error", "startup", "architecture_not_served", message, fix))
    on = traits.contiguous_pa
    raw_pa = i.runtime_env.get("VLLM_CONTIGUOUS_PA")
    if (
        i.num_speculative_tokens
        and on is not None
        and on(raw_pa, bool(i.enable_prefix_caching), i.model.vision.present)
    ):
        set_to = f"VLLM_CONTIGUOUS_PA={raw_pa!r}" if raw_pa is not None else "VLLM_CONTIGUOUS_PA unset"
        message = (f"--speculative-config with contiguous PA on ({set_to}) makes {i.runtime_words} refuse to start: "
                   f"speculative decoding is not supported with contiguous PA "
                   f"({traits.speculative_refused_with_contiguous_pa})")  # fmt: skip
        fix = Fix("set VLLM_CONTIGUOUS_PA=false, or leave out --speculative-config")
        out.append(Finding("error", "startup", "speculative_with_contiguous_pa", message, fix))
    if p_free <= 0:
        message = (
            f"weights and profiling need {-p_free / GIB:.1f} GiB more than the device has free: OOM while loading "
            "or profiling"
        )
        out.append(Finding("error", "startup", "weights_do_not_fit", message, tp_fix(i)))
        return tuple(out)
    if i.kv_cache_memory_bytes is not None and traits.kv_cache_memory_bytes == "ignored":
        message = (f"--kv-cache-memory-bytes {i.kv_cache_memory_bytes} is not read by {i.runtime.name.value} "
                   f"({traits.kv_cache_memory_bytes_source}): the plan sizes the KV cache as the server "
                   "will")  # fmt: skip
        fix = Fix("leave out --kv-cache-memory-bytes; size the KV cache with --gpu-memory-utilization and "
                  f"{knobs(GRAPH_RESERVED_MEM)}")  # fmt: skip
        out.append(Finding("warning", "kv_cache", "flag_not_read", message, fix))
    for name, value, why in i.settings_ignored:
        out.append(Finding("info", "runtime", "setting_not_read", f"your {name}={value}: not read by "
                           f"{i.runtime_words} ({why}); the plan ignores it and serve does not export it",
                           Fix(f"unset {name}, or plan for a release that reads it")))  # fmt: skip
    if i.graph_defaults_note:
        out.append(Finding("info", "runtime", "runtime_graph_defaults", i.graph_defaults_note,
                           Fix(f"set {GRAPH_RESERVED_MEM} / {GRAPH_PROMPT_RATIO} (or their flags) to plan other "
                               "shares")))  # fmt: skip
    for note in i.reading_notes:
        out.append(Finding("warning", "runtime", "read_as_runtime_reads", note,
                           Fix("spell it as the runtime reads it: true or false")))  # fmt: skip
    if i.kv_cache_memory_source:
        message = (
            f"{i.kv_cache_memory_source} sets the KV cache ({i.kv_cache_memory_bytes} bytes): "
            f"{i.runtime.name.value} reads it over --kv-cache-memory-bytes (vLLM 0.32 platforms/cpu.py)"
        )
        var = i.kv_cache_memory_source.split("=", 1)[0]
        out.append(Finding("info", "kv_cache", "kv_cache_from_variable", message,
                           Fix(f"unset {var} to size the KV cache with --kv-cache-memory-bytes")))  # fmt: skip
    if i.kv_cache_note:
        fix = Fix("leave out --kv-cache-memory-bytes (the same plan), or give a size in bytes")
        out.append(Finding("info", "kv_cache", "kv_cache_zero_unset", i.kv_cache_note, fix))
    if i.dtype_note:
        out.append(Finding("info", "runtime", "dtype_replaced", i.dtype_note,
                           Fix("leave out --dtype, or use --dtype bfloat16 (what is served)")))  # fmt: skip
    kv_given = i.kv_cache_memory_bytes
    if kv_given is not None and traits.kv_cache_memory_bytes == "read" and kv_given + s.graph_bytes > p_free:
        # vLLM allocates the given size whatever memory holds (gpu_worker.py:649 skips the utilization)
        room = max(p_free - s.graph_bytes, 0)
        graphs = f" and {s.graph_bytes / GIB:.2f} GiB of graphs" if s.graph_bytes else ""
        given_by = i.kv_cache_memory_source or f"--kv-cache-memory-bytes {kv_given}"
        message = (f"{given_by} ({kv_given / GIB:.2f} GiB){graphs} is more than the "
                   f"{p_free / GIB:.2f} GiB left after the weights and profiling: {i.runtime.name.value} "
                   + ("refuses it at start-up (vLLM 0.32 v1/worker/cpu_worker.py determine_available_memory: more "
                      "than the NUMA node's available memory)" if traits.backend == "cpu" else
                      "allocates it whatever memory holds (--gpu-memory-utilization is not read), out of memory at "
                      "the allocation"))  # fmt: skip
        fix = Fix(f"--kv-cache-memory-bytes {room} or less", "--kv-cache-memory-bytes", room)
        if i.kv_cache_memory_source:  # the variable wins over the flag: only it can lower the size
            var = i.kv_cache_memory_source.split("=", 1)[0]
            fix = Fix(f"{var}={room // GIB} or less", var, room // GIB)
        out.append(Finding("error", "kv_cache", "kv_cache_over_memory", message, fix))
    override = i.num_gpu_blocks_override
    if seqs < 1 and override is not None:
        # the start-up check counts the override's blocks, not memory (vLLM 0.32 get_kv_cache_configs, the fork's
        # raise_if_cache_size_invalid)
        usable = usable_kv_blocks(i, override) * i.block_size
        held_back = override * i.block_size - usable
        need = -(-i.max_model_len // i.block_size) + held_back // i.block_size
        less = ", less the one the block pool holds back" if held_back else ""
        message = (
            f"--num-gpu-blocks-override {override} ({usable} tokens in blocks of {i.block_size}{less}) cannot hold "
            f"one sequence of --max-model-len {i.max_model_len}: vLLM refuses to start"
        )
        how = f"--num-gpu-blocks-override {need} or more" + (
            f", or lower --max-model-len to {usable}" if usable else ""
        )
        fix = Fix(how, "--num-gpu-blocks-override", need)
        out.append(Finding("error", "kv_cache", "kv_cache_too_small", message, fix))
    elif seqs < 1:
        message = (
            f"the KV cache ({s.kv_cache_bytes / GIB:.2f} GiB) cannot hold one sequence of --max-model-len "
            f"{i.max_model_len}: vLLM refuses to start"
        )
        out.append(Finding("error", "kv_cache", "kv_cache_too_small", message, kv_fix(i, p_free, s, per_token)))
    elif seqs < i.max_num_seqs:
        message = (
            f"only {seqs} sequences of --max-model-len {i.max_model_len} fit the KV cache at once (--max-num-seqs "
            f"{i.max_num_seqs}); longer requests queue"
        )
        fix = Fix(f"lower --max-num-seqs to {seqs} or --max-model-len", "--max-num-seqs", seqs)
        out.append(Finding("info", "kv_cache", "kv_cache_queues", message, fix))
    if (traits.none_buckets_fail_warmup and i.buckets is None and i.vision_bucketed and not i.skip_warmup
            and not i.enforce_eager):  # fmt: skip
        message = (
            f"VLLM_MULTIMODAL_BUCKETS=None with warm-up on makes {i.runtime.name.value} fail at warm-up "
            f"({traits.none_buckets_fail_warmup})"
        )
        fix = Fix(
            "give a bucket list (e.g. unset VLLM_MULTIMODAL_BUCKETS for the default), or set VLLM_SKIP_WARMUP=true"
        )
        out.append(Finding("error", "graph_capture", "vision_buckets_none_at_warmup", message, fix))
    if skipped:
        when = "run time" if i.unwarmed is not None and i.unwarmed.graphs else "warm-up"
        stock = (
            f" (stock vllm-gaudi captures every bucket without a check: OOM at {when})" if i.backend == "hpu" else ""
        )
        listed = i.vision_listed(skipped)
        what = f"vision passes of {listed} images" if i.vision_patches_per_item else f"vision buckets {listed}"
        message = (
            f"{what} do not fit the vision graph pool "
            f"({s.prefill_vision_graph_bytes / GIB:.2f} GiB); they would compile at run time{stock}"
        )
        out.append(Finding("warning", "graph_capture", "vision_buckets_skipped", message, vision_fix(i, p_free)))
    out.extend(_text_graph_findings(i, s, text, knobs))
    cache_tokens, stock_tokens = encoder_cache_tokens(i)
    if cache_tokens < stock_tokens:
        # Measured (benchmarks/performance/results/reliability_cpu_quiet.md): 14.8 vs 31.9 req/s on repeated images,
        # 32.4 after.
        message = (
            f"vLLM's encoder cache will hold {cache_tokens} tokens (stock vLLM: {stock_tokens}): with images capped "
            "at the largest bucket, fewer encoded images stay cached, and traffic that repeats images with new text "
            "re-runs the vision encoder"
        )
        raise_to = f"raise --max-num-batched-tokens to {stock_tokens} if your traffic repeats images"
        out.append(Finding("info", "runtime", "encoder_cache_smaller", message,
                           Fix(raise_to, "--max-num-batched-tokens", stock_tokens)))  # fmt: skip
    return tuple(out)


def text_cost_evidence(i: PlanInputs) -> str:
    """How the text graph costs are known (:func:`~vllm_hpu_mm.plan.costs.label`): measured from your own warm-up
    log, calibrated on public logs of another deployment, or estimated."""
    labels = {n: label(i.costs, n) for n in ("text_prefill_factor", "text_decode_factor")}
    measured = [n for n, how in labels.items() if how == "measured"]
    if measured:
        return f"measured from your warm-up log ({i.costs.source or 'profile'}: {', '.join(measured)})"
    if "calibrated" in labels.values():
        return f"calibrated ({i.costs.calibrated_source}; `vllm-hpu-mm memory calibrate LOG` measures yours)"
    return "estimated (built-in activation model; `vllm-hpu-mm memory calibrate LOG` measures it)"


def _reserved_for(i: PlanInputs, s: Split, prefill: int, decode: int, *, split: bool = True) -> float | None:
    """The VLLM_GRAPH_RESERVED_MEM at which both text pools hold these costs (the ratios kept), None if above 1 (or
    nothing is usable, or a pool's share is 0). ``split=False``: the graphs share the whole reserve (captured on first
    use, checked against no pool), so the reserve need only hold their sum."""
    usable = s.usable_bytes
    if split:
        shares = (i.graph_prompt_ratio * i.graph_multimodal_prompt_ratio, 1 - i.graph_prompt_ratio)
        pools = [usable * share for share in shares]
        need = max(cost / pool if pool > 0 else 2.0 for cost, pool in zip((prefill, decode), pools, strict=True))
    else:
        need = (prefill + decode) / usable if usable > 0 else 2.0
    if not math.isfinite(need) or need > 1:
        return None
    value = math.ceil(need * 100) / 100
    return value if value <= 1 else None


def _text_graph_findings(i: PlanInputs, s: Split, text: TextGraphFit, knobs: Callable[..., str]) -> list[Finding]:
    """Text graphs beyond their pools. A runtime that warms every bucket (vllm-gaudi) keeps them all: a shape pads to
    a larger warmed bucket and compiles only when no bucket covers it; what does not fit is an OOM risk at warm-up.
    A runtime that captures while the pool lasts (the fork) leaves the rest without a captured graph. Under a skipped
    warm-up the runtime's rule for it (:attr:`.PlanInputs.unwarmed`) decides: every bucket captured on first use with
    no pool check (an OOM risk at run time), or no graph at all."""
    out: list[Finding] = []
    for note in text.resolved:  # e.g. a deprecated variable that replaces the strategy the user named
        out.append(Finding("info", "runtime", "setting_overridden", note,
                           Fix("unset the setting that loses: it changes nothing here")))  # fmt: skip
    for note in text.notes:  # e.g. buckets of the user's bucket file the runtime's filters drop
        fix = Fix("remove them from the file, or raise the engine limit that drops them (each says which)")
        out.append(Finding("warning", "graph_capture", "runtime_drops_buckets", note, fix))
    pf, pt, df, dt = text.prefill_fit, len(text.prefill), text.decode_fit, len(text.decode)
    evidence = text_cost_evidence(i)
    unwarmed = i.unwarmed  # under a skipped warm-up the runtime's own rule, not its warm-up's, says what runs
    if unwarmed is not None and not unwarmed.graphs:
        return out  # no graph runs, so none is left out of a pool
    if i.runtime.traits.warms_all_graphs or unwarmed is not None:
        prefill = sum(b.cost_bytes for b in text.prefill)
        decode = sum(b.cost_bytes for b in text.decode)
        # a fork line 1.19 - 1.21.3 under the skip: warm-up returns before it reads the prompt ratio, and each graph
        # is captured on first use in what the KV cache left free, the reserve (vllm/worker/hpu_worker.py
        # determine_num_available_blocks, hpu_model_runner.py warmup_model @3bcdfd4af): one pool, not two
        shared = unwarmed is not None and not i.runtime.traits.warms_all_graphs
        pools = (f"the {(s.prefill_text_graph_bytes + s.decode_graph_bytes) / GIB:.2f} GiB reserve the KV cache leaves "
                 f"them ({GRAPH_RESERVED_MEM}; no pool split: {GRAPH_PROMPT_RATIO} is read only by the warm-up)"
                 if shared else f"pools of {s.prefill_text_graph_bytes / GIB:.2f} + "
                 f"{s.decode_graph_bytes / GIB:.2f} GiB")  # fmt: skip
        if (prefill + decode <= s.prefill_text_graph_bytes + s.decode_graph_bytes if shared else
                prefill <= s.prefill_text_graph_bytes and decode <= s.decode_graph_bytes):  # fmt: skip
            return out
        reserved = _reserved_for(i, s, prefill, decode, split=not shared)
        fix_text = (f"raise {knobs(GRAPH_RESERVED_MEM)} to {reserved}" if reserved is not None else
                    "lower --max-num-batched-tokens or --max-num-seqs (the largest buckets cost the most)")  # fmt: skip
        if shared:
            if reserved is not None:
                fix_text += " (the room the KV cache leaves for the graphs captured on first use)"
            fix_text += f"; or unset {SKIP_WARMUP} (its warm-up captures only what each pool holds)"
        how = (f"{unwarmed.words} ({unwarmed.source}): OOM risk at run time, as traffic reaches them. None is "
               "dropped: every shape still pads to its bucket" if unwarmed is not None else
               "it warms every bucket with no memory check (OOM risk at warm-up). None is dropped: every shape still "
               "pads to a warmed bucket")  # fmt: skip
        message = (
            f"the text graphs {i.runtime.name.value} will {'run' if unwarmed else 'warm'} ({pt} prompt, {dt} decode; "
            f"{text.source}) need {prefill / GIB:.2f} + {decode / GIB:.2f} GiB, {evidence}, against {pools}; {how}"
        )
        fix = Fix(f"{fix_text}; or a smaller text graph budget (--text-graph-budget; serve: --plan-text-graph-budget)",
                  GRAPH_RESERVED_MEM if reserved is not None else None, reserved)  # fmt: skip
        out.append(Finding("warning", "graph_capture", "text_graphs_over_pool", message, fix))
        return out
    if pf < pt:
        message = (
            f"{pf} of {pt} text prefill graphs fit their pool ({s.prefill_text_graph_bytes / GIB:.2f} GiB, costs "
            f"{evidence}); the rest are not captured and run without a graph"
        )
        ratios = (GRAPH_MULTIMODAL_PROMPT_RATIO, GRAPH_PROMPT_RATIO) if i.vision_graphs else (GRAPH_PROMPT_RATIO,)
        fix = Fix(f"raise {knobs(*ratios)}")
        out.append(Finding("warning", "graph_capture", "prefill_graphs_skipped", message, fix))
    if df < dt:
        message = (
            f"{df} of {dt} decode graphs fit their pool ({s.decode_graph_bytes / GIB:.2f} GiB, costs {evidence}); "
            "the rest are not captured and run without a graph"
        )
        fix = Fix(f"lower --max-num-seqs, or raise {knobs(GRAPH_RESERVED_MEM)}")
        out.append(Finding("warning", "graph_capture", "decode_graphs_skipped", message, fix))
    return out

"""What ``serve`` hands each runtime so that it respects the plan, and which parts it then honours.

The guide's ratios are the planning inputs everywhere; what reaches the server is chosen per runtime, because each
reads different knobs (see :mod:`.runtimes`):

- **vllm-fork** reads all three ratios. Its code gives ``VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO`` to *vision* (text the
  rest), the opposite of the guide, so we export ``1 - ratio`` to get the guide's split. Plus the captured buckets.
- **vllm-gaudi** (@091bbadd) reads only ``VLLM_GRAPH_RESERVED_MEM`` of the three: the total. Each graph part is
  bounded by what it warms instead: vision by ``VLLM_MULTIMODAL_BUCKETS`` (only buckets whose graphs fit) and
  ``VLLM_MULTIMODAL_RESOLUTIONS`` (the aligned shapes real images take), warmed at all only when
  ``--limit-mm-per-prompt`` names ``image``; prefill and decode by ``VLLM_BUCKETING_FROM_FILE``, a bucket file
  holding exactly the prompt and decode buckets that fit their shares.
- **vLLM CUDA** reads none of them: the buckets become its encoder CUDA-graph budgets, the decode graphs that fit
  become ``cudagraph_capture_sizes`` (one ``--compilation-config``), and vLLM gives the KV cache what is left after
  measuring its graphs.
- **CPU** captures nothing: the KV cache size is passed as ``--kv-cache-memory-bytes``.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping, Sequence

from vllm_hpu_mm.buckets.sizes import Size
from vllm_hpu_mm.buckets.spec import PIXELS_PER_PATCH
from vllm_hpu_mm.graphs.cuda_config import encoder_cudagraph_config
from vllm_hpu_mm.memory import gaudi_warmup
from vllm_hpu_mm.memory.planner import Plan
from vllm_hpu_mm.memory.runtimes import TRAITS, VLLM_GAUDI_COMMIT, Runtime
from vllm_hpu_mm.preprocess.align import aligned_size
from vllm_hpu_mm.preprocess.modes import AlignMode

__all__ = ["PARTS", "Exports", "Part", "ServerFlags", "exports_for", "warmup_resolutions"]

PARTS = ("kv_cache", "decode_graphs", "prefill_text_graphs", "prefill_vision_graphs")
#: vLLM's own per-modality default limit (``MultiModalConfig.get_limit_per_prompt``, vLLM 0.32): naming it keeps
#: vLLM's behaviour and makes vllm-gaudi warm the vision graphs.
VLLM_DEFAULT_MM_LIMIT = 999
#: At most this many explicit warm-up shapes: each adds one vision warm-up pass at startup.
MAX_RESOLUTIONS = 8
BUCKET_FILE_NAME = "vllm-gaudi-buckets.txt"


@dataclasses.dataclass(frozen=True)
class Part:
    """How one part of the plan is enforced: the knobs that make the runtime respect it, and whether it does."""

    by: tuple[str, ...]
    honoured: bool
    note: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"by": list(self.by), "honoured": self.honoured, "note": self.note}


@dataclasses.dataclass(frozen=True)
class ServerFlags:
    """What the user's server arguments already say about the knobs we might set."""

    #: ``--limit-mm-per-prompt`` as given (JSON text), or None.
    limit_mm_per_prompt: str | None = None
    #: The user's ``--compilation-config`` as a dict, or None when not given.
    compilation_config: Mapping[str, object] | None = None
    kv_cache_memory_bytes_given: bool = False
    #: Variables the user already set for the runtime (we never override those).
    user_env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    skip_warmup: bool = False


@dataclasses.dataclass(frozen=True)
class Exports:
    env: dict[str, str]
    args: tuple[str, ...]
    #: File name -> content, written beside each other by ``serve`` (the bucket file for vllm-gaudi).
    files: dict[str, str]
    enforcement: dict[str, Part]
    notes: tuple[str, ...]
    #: The language model's effective fp32-softmax setting and who owns it.
    precision: dict[str, object]

    def enforcement_dict(self) -> dict[str, dict[str, object]]:
        return {name: part.to_dict() for name, part in self.enforcement.items()}


def warmup_resolutions(
    sizes: Sequence[Size], buckets: Sequence[int], *, min_pixels: int, max_pixels: int, mode: AlignMode, limit: int
) -> tuple[tuple[int, int], ...]:
    """The aligned (width, height) shapes real images take under the largest bucket, most frequent first (ties: the
    smaller shape), at most ``limit``: what vllm-gaudi should warm besides its guessed aspect ratios."""
    if not buckets or limit <= 0:
        return ()
    cap = min(max_pixels, max(buckets) * PIXELS_PER_PATCH)
    shapes: Counter[tuple[int, int]] = Counter()
    for w, h in sizes:
        ah, aw = aligned_size(h, w, min_pixels=min(min_pixels, cap), max_pixels=cap, mode=mode)
        shapes[(aw, ah)] += 1
    ranked = sorted(shapes.items(), key=lambda kv: (-kv[1], kv[0][0] * kv[0][1], kv[0]))
    return tuple(shape for shape, _ in ranked[:limit])


def _limit_names_image(raw: str) -> bool | None:
    """Whether a ``--limit-mm-per-prompt`` JSON names ``image`` with a non-zero count (None: not parseable)."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict) or "image" not in value:
        return False
    image = value["image"]
    count = image.get("count", VLLM_DEFAULT_MM_LIMIT) if isinstance(image, dict) else image
    return bool(count)


def _precision(plan: Plan, user_env: Mapping[str, str]) -> dict[str, object]:
    traits = TRAITS[plan.inputs.effective_runtime]
    raw = user_env.get("VLLM_FP32_SOFTMAX")
    if raw is None:
        return {
            "fp32_softmax": traits.fp32_softmax_default,
            "set_by": "runtime default",
            "note": traits.fp32_softmax_note,
        }
    on = raw.strip().lower() in ("1", "true", "yes", "on")
    return {"fp32_softmax": on, "set_by": "VLLM_FP32_SOFTMAX", "note": traits.fp32_softmax_note}


def _eager(plan: Plan, kv: Part, env: dict[str, str], args: list[str], notes: list[str], flags: ServerFlags) -> Exports:
    none = Part(("--enforce-eager",), True, "no graphs: nothing to bound")
    parts = {"kv_cache": kv, "decode_graphs": none, "prefill_text_graphs": none, "prefill_vision_graphs": none}
    return Exports(env, tuple(args), {}, parts, tuple(notes), _precision(plan, flags.user_env))


def exports_for(
    plan: Plan, flags: ServerFlags, *, resolutions: Sequence[tuple[int, int]] = (), bucket_file_path: str = ""
) -> Exports:
    """The environment, extra server arguments and files that make ``plan.inputs.effective_runtime`` respect
    ``plan``, with each part's enforcement."""
    i = plan.inputs
    runtime = i.effective_runtime
    env: dict[str, str] = {}
    args: list[str] = []
    notes: list[str] = []
    if runtime is Runtime.VLLM_CPU:
        if not flags.kv_cache_memory_bytes_given:
            args += ["--kv-cache-memory-bytes", str(plan.split.kv_cache_bytes)]
            notes.append(f"CPU: passing --kv-cache-memory-bytes {plan.split.kv_cache_bytes} from the plan")
        kv = Part(("--kv-cache-memory-bytes",), True)
        none = Part((), True, "no graphs on CPU: nothing to bound")
        parts = {"kv_cache": kv, "decode_graphs": none, "prefill_text_graphs": none, "prefill_vision_graphs": none}
        return Exports(env, tuple(args), {}, parts, tuple(notes), _precision(plan, flags.user_env))
    if runtime is Runtime.VLLM_CUDA:
        return _cuda(plan, flags, env, args, notes)
    reserved = "VLLM_GRAPH_RESERVED_MEM"
    env[reserved] = str(i.graph_reserved_mem)
    kv = Part((reserved, "--gpu-memory-utilization"), True)
    if i.enforce_eager:
        notes.append("--enforce-eager: the runtime reserves no graph memory (VLLM_GRAPH_RESERVED_MEM is read as 0)")
        return _eager(plan, kv, env, args, notes, flags)
    if runtime is Runtime.VLLM_FORK:
        env["VLLM_GRAPH_PROMPT_RATIO"] = str(i.graph_prompt_ratio)
        # The fork's code gives this ratio to vision; the guide (and our plan) gives it to text.
        env["VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO"] = str(round(1 - i.graph_multimodal_prompt_ratio, 6))
        notes.append(
            f"vllm-fork: VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO={env['VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO']} is the "
            f"vision share in the fork's code, which gives text the guide's {i.graph_multimodal_prompt_ratio}"
        )
        vision = _export_buckets(plan, env, flags, notes)
        parts = {
            "kv_cache": kv,
            "decode_graphs": Part((reserved, "VLLM_GRAPH_PROMPT_RATIO"), True),
            "prefill_text_graphs": Part(("VLLM_GRAPH_PROMPT_RATIO", "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO"), True),
            "prefill_vision_graphs": Part(("VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO", *vision), bool(vision)
                                          or not i.buckets),
        }  # fmt: skip
        return Exports(env, tuple(args), {}, parts, tuple(notes), _precision(plan, flags.user_env))
    return _gaudi(plan, flags, env, args, notes, kv, resolutions, bucket_file_path)


def _export_buckets(plan: Plan, env: dict[str, str], flags: ServerFlags, notes: list[str]) -> tuple[str, ...]:
    """Export the captured buckets (never ``None`` while warm-up is on); the knobs used, () when none can be."""
    i = plan.inputs
    captured = plan.vision_buckets_captured
    if not i.buckets:
        if not flags.skip_warmup and i.effective_runtime is Runtime.VLLM_GAUDI:
            return ()
        env["VLLM_MULTIMODAL_BUCKETS"] = "None"
        return ("VLLM_MULTIMODAL_BUCKETS",)
    if not captured:
        notes.append("no vision bucket's graph fits the vision pool: VLLM_MULTIMODAL_BUCKETS not exported")
        return ()
    env["VLLM_MULTIMODAL_BUCKETS"] = ",".join(map(str, captured))
    if plan.vision_buckets_skipped:
        notes.append(
            f"pruned vision buckets {','.join(map(str, plan.vision_buckets_skipped))} (do not fit the vision graph "
            f"pool): VLLM_MULTIMODAL_BUCKETS={env['VLLM_MULTIMODAL_BUCKETS']}; larger images follow "
            "VLLM_HPU_MM_OVERSIZE_POLICY (default shrink: resized to the largest kept bucket)"
        )
    return ("VLLM_MULTIMODAL_BUCKETS",)


def _gaudi(
    plan: Plan,
    flags: ServerFlags,
    env: dict[str, str],
    args: list[str],
    notes: list[str],
    kv: Part,
    resolutions: Sequence[tuple[int, int]],
    bucket_file_path: str,
) -> Exports:
    i = plan.inputs
    files: dict[str, str] = {}
    vision = list(_export_buckets(plan, env, flags, notes))
    if vision and i.buckets:
        if "VLLM_MULTIMODAL_RESOLUTIONS" in flags.user_env:
            gaudi_warmup.parse_resolutions(flags.user_env["VLLM_MULTIMODAL_RESOLUTIONS"])  # vllm-gaudi's own form
            notes.append("VLLM_MULTIMODAL_RESOLUTIONS is yours: kept as it is")
            vision.append("VLLM_MULTIMODAL_RESOLUTIONS")
        elif resolutions:
            # Count 1: "WxH" alone would warm the --limit-mm-per-prompt count (999 by default) of images at once.
            env["VLLM_MULTIMODAL_RESOLUTIONS"] = gaudi_warmup.format_resolutions(resolutions, (1, 1))
            vision.append("VLLM_MULTIMODAL_RESOLUTIONS")
    warmed = True
    if i.buckets and not vision:
        # Nothing fits: naming image would make vllm-gaudi warm its default list (no memory check) and OOM.
        warmed = False
        if flags.limit_mm_per_prompt is not None and _limit_names_image(flags.limit_mm_per_prompt):
            notes.append("no vision bucket fits, but your --limit-mm-per-prompt names image: vllm-gaudi will warm "
                         "its default buckets without a memory check (OOM risk at warm-up)")  # fmt: skip
        else:
            notes.append("no vision bucket fits: vision warm-up left off, every image shape compiles at run time")
    elif flags.limit_mm_per_prompt is None:
        args += ["--limit-mm-per-prompt", json.dumps({"image": VLLM_DEFAULT_MM_LIMIT})]
        notes.append(
            f'vllm-gaudi warms vision graphs only when --limit-mm-per-prompt names image: added {{"image": '
            f"{VLLM_DEFAULT_MM_LIMIT}}} (vLLM's own default count)"
        )
        vision.append("--limit-mm-per-prompt")
    elif _limit_names_image(flags.limit_mm_per_prompt):
        vision.append("--limit-mm-per-prompt")
    else:
        warmed = False
        notes.append(
            f"your --limit-mm-per-prompt {flags.limit_mm_per_prompt} names no image (or a count of 0): vllm-gaudi "
            "will warm no vision graph and every image shape compiles at run time; name image in it"
        )
    text = plan.text_graphs
    if "VLLM_BUCKETING_FROM_FILE" in flags.user_env:
        notes.append("VLLM_BUCKETING_FROM_FILE is yours: the plan counts its buckets and exports none")
        by: tuple[str, ...] = ("VLLM_BUCKETING_FROM_FILE",)
        prefill_ok = text.prefill_fit == len(text.prefill)
        decode_ok = text.decode_fit == len(text.decode)
    else:
        # vllm-gaudi fails on a bucket file without prompt (or decode) buckets: keep at least the cheapest of each,
        # even when it does not fit (that part is then not honoured).
        prefill = text.prefill_kept or text.prefill[:1]
        decode = text.decode_kept or text.decode[:1]
        files[BUCKET_FILE_NAME] = gaudi_warmup.bucket_file(
            [(b.batch, b.size, b.context) for b in prefill], [(b.batch, 1, b.size) for b in decode]
        )
        env["VLLM_BUCKETING_FROM_FILE"] = bucket_file_path or BUCKET_FILE_NAME
        by = ("VLLM_BUCKETING_FROM_FILE",)
        prefill_ok, decode_ok = bool(text.prefill_kept), bool(text.decode_kept)
        dropped = (len(text.prefill) - text.prefill_fit, len(text.decode) - text.decode_fit)
        notes.append(
            f"vllm-gaudi: bucket file with the {text.prefill_fit} prompt and {text.decode_fit} decode buckets that fit "
            f"their shares ({dropped[0]} prompt and {dropped[1]} decode buckets of {text.source} left out)"
        )
    vision_ok = (warmed and "VLLM_MULTIMODAL_BUCKETS" in vision) or not i.buckets
    parts = {
        "kv_cache": kv,
        "decode_graphs": Part(by, decode_ok, "" if decode_ok else "not even the smallest decode graph fits"),
        "prefill_text_graphs": Part(by, prefill_ok, "" if prefill_ok else "not even the smallest prompt graph fits"),
        "prefill_vision_graphs": Part(tuple(vision), vision_ok, "" if warmed else "vision warm-up is off"),
    }
    notes.append(f"vllm-gaudi reads neither prompt ratio (@{VLLM_GAUDI_COMMIT}): none exported")
    return Exports(env, tuple(args), files, parts, tuple(notes), _precision(plan, flags.user_env))


def _cuda(plan: Plan, flags: ServerFlags, env: dict[str, str], args: list[str], notes: list[str]) -> Exports:
    i = plan.inputs
    kv = Part(
        ("--gpu-memory-utilization",),
        True,
        "vLLM measures its graphs and gives the KV cache the rest: at least the planned share while the graph parts "
        "stay within theirs",
    )
    if i.enforce_eager:
        return _eager(plan, kv, env, args, notes, flags)
    config: dict[str, object] = {}
    budgets: tuple[str, ...] = ()
    if i.buckets:
        graph_buckets = plan.vision_buckets_captured or None
        config.update(encoder_cudagraph_config(graph_buckets))
        budgets = ("--compilation-config encoder_cudagraph_token_budgets",) if graph_buckets else ()
    sizes = sorted(b.batch for b in plan.text_graphs.decode_kept)
    if sizes:
        config["cudagraph_capture_sizes"] = sizes
    capture = ("--compilation-config cudagraph_capture_sizes",)
    if flags.compilation_config is not None:
        notes.append(f"CUDA: you pass your own compilation config; merge these fields into it: {json.dumps(config)}")
        unmerged = "your --compilation-config is used as it is"
        parts = {
            "kv_cache": kv,
            "decode_graphs": Part(capture, False, unmerged),
            "prefill_text_graphs": Part(capture, False, unmerged),
            "prefill_vision_graphs": Part(budgets, not i.buckets, unmerged),
        }
        return Exports(env, tuple(args), {}, parts, tuple(notes), _precision(plan, flags.user_env))
    args += ["--compilation-config", json.dumps(config, sort_keys=True)]
    notes.append("CUDA: vision buckets as vLLM encoder CUDA graphs, decode graphs that fit as capture sizes")
    parts = {
        "kv_cache": kv,
        "decode_graphs": Part(capture, True),
        "prefill_text_graphs": Part(capture, True, "vLLM captures by token count; longer prefills run piecewise"),
        "prefill_vision_graphs": Part(budgets, bool(budgets) or not i.buckets),
    }
    return Exports(env, tuple(args), {}, parts, tuple(notes), _precision(plan, flags.user_env))

"""What ``serve`` hands vllm-gaudi (@091bbadd). It reads only ``VLLM_GRAPH_RESERVED_MEM`` of the guide's three
ratios (the total), so each graph part is bounded by what it warms instead:

- vision by ``VLLM_MULTIMODAL_BUCKETS`` (only buckets whose graphs fit) and ``VLLM_MULTIMODAL_RESOLUTIONS`` (the
  aligned shapes real images take, one image each), warmed at all only when ``--limit-mm-per-prompt`` names
  ``image`` (we add vLLM's own default count when the user gives no limit);
- prefill and decode by ``VLLM_BUCKETING_FROM_FILE``: the bucket file planned from the traffic
  (:mod:`vllm_hpu_mm.plan.text_choice`), which covers every shape the limits allow within a graph budget (a user's
  own file is counted and kept). vllm-gaudi warms every bucket with no memory check, so none is dropped to fit an
  estimate; the plan says when they do not fit.

v0.11.2 batches every tower: ``VLLM_MULTIMODAL_BUCKETS`` is exported as images per pass (sized at vLLM's largest
dummy image), and its dummy video passes are said to be unbounded.

The notes also say what vllm-gaudi's warm-up will then run (:func:`.vision.vision_warmup`) and which of the user's
bucketing variables it ignores (:func:`.common.overridden_variables`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from vllm_hpu_mm.buckets.sizes import Sizes, as_counts
from vllm_hpu_mm.preprocess.align import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, aligned_size
from vllm_hpu_mm.runtimes.base import SKIP_WARMUP, ExportContext, Exports, Part, ServerFlags
from vllm_hpu_mm.runtimes.exporting import Draft, export_buckets
from vllm_hpu_mm.runtimes.vllm_gaudi import VllmGaudi
from vllm_hpu_mm.runtimes.vllm_gaudi.common import overridden_ranges, overridden_variables
from vllm_hpu_mm.runtimes.vllm_gaudi.config import config_from_env
from vllm_hpu_mm.runtimes.vllm_gaudi.releases import MAIN, Release
from vllm_hpu_mm.runtimes.vllm_gaudi.vision import (
    format_resolutions,
    parse_resolutions,
    vision_buckets_from_env,
    vision_graph_patches,
    vision_warmup,
)
from vllm_hpu_mm.values import PIXELS_PER_PATCH, UNSET_MM_LIMIT, AlignMode

__all__ = ["BUCKET_FILE_NAME", "MAX_RESOLUTIONS", "exports", "warmup_resolutions"]

#: At most this many explicit warm-up shapes: each adds one vision warm-up pass at startup.
MAX_RESOLUTIONS = 8
BUCKET_FILE_NAME = "vllm-gaudi-buckets.txt"
OVER_POOL = "the buckets' estimated graphs exceed the pool (all are warmed: none is dropped)"


def warmup_resolutions(
    sizes: Sizes, buckets: Sequence[int], *, min_pixels: int, max_pixels: int, mode: AlignMode, limit: int
) -> tuple[tuple[int, int], ...]:
    """The aligned (width, height) shapes real images take under the largest bucket, most frequent first (ties: the
    smaller shape), at most ``limit``: what vllm-gaudi should warm besides its guessed aspect ratios."""
    if not buckets or limit <= 0:
        return ()
    cap = min(max_pixels, max(buckets) * PIXELS_PER_PATCH)
    shapes: Counter[tuple[int, int]] = Counter()
    for (w, h), n in as_counts(sizes).items():
        ah, aw = aligned_size(h, w, min_pixels=min(min_pixels, cap), max_pixels=cap, mode=mode)
        shapes[(aw, ah)] += n
    ranked = sorted(shapes.items(), key=lambda kv: (-kv[1], kv[0][0] * kv[0][1], kv[0]))
    return tuple(shape for shape, _ in ranked[:limit])


def _limit(raw: str) -> Mapping[str, int | Mapping[str, int]] | None:
    """A ``--limit-mm-per-prompt`` JSON object, or None when it is not one."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _limit_names_image(raw: str) -> bool:
    """Whether a ``--limit-mm-per-prompt`` names ``image`` with a non-zero count."""
    value = _limit(raw)
    if value is None or "image" not in value:
        return False
    image = value["image"]
    count = image.get("count", UNSET_MM_LIMIT) if isinstance(image, Mapping) else image
    return bool(count)


def _release(d: Draft) -> Release:
    """The vllm-gaudi release line the plan is for (main @091bbadd unless named or installed)."""
    runtime = d.plan.inputs.runtime
    return runtime.bucketing.release if isinstance(runtime, VllmGaudi) else MAIN


def _vision(d: Draft, resolutions: Sequence[tuple[int, int]]) -> tuple[list[str], str | None]:
    """The vision knobs set (buckets, resolutions, limit) and why vllm-gaudi then warms no vision graph (None: it
    warms them), for the enforcement line to name the setting that turned it off."""
    i, flags = d.plan.inputs, d.flags
    release = _release(d)
    if not i.model.vision.present:
        # no tower: vLLM 0.32 builds no multimodal config for it (config/model.py:818), so a limit would be dead
        return [], "a text-only model has no vision tower"
    vision = list(export_buckets(d))
    if i.unwarmed is not None and not i.images_refused and not flags.language_model_only:
        # warmup_model returns before warmup_multimodal_graphs (v1/worker/hpu_model_runner.py:6218 @091bbadd): the
        # buckets still bound the tower's shapes, each compiled on its first use; resolutions and the limit only
        # steer that warm-up, so neither is exported for it
        if i.buckets and not vision:
            d.notes.append(f"no vision bucket fits, but {release} pads images to its default vision buckets, each "
                           "compiled on its first use with no memory check (OOM risk at run time)")  # fmt: skip
            return vision, "no vision bucket fits the pool"
        d.notes.append(f"{release} runs no vision warm-up ({SKIP_WARMUP}): each vision bucket is compiled on its "
                       "first use; VLLM_MULTIMODAL_RESOLUTIONS and --limit-mm-per-prompt, which only steer that "
                       "warm-up, are not set for it")  # fmt: skip
        return vision, None
    if release.mm_warmup == "bucket-count":
        return _vision_bucket_count(d, release, vision)
    dummy = release.mm_warmup in ("dummy", "options")
    warms = "vLLM's own dummy image once per bucket" if dummy else "5 guessed aspect ratios per bucket"
    if vision and i.buckets and not release.reads_resolutions:
        # vision.py reads VLLM_MULTIMODAL_RESOLUTIONS from v0.26.0: an older release warms its guessed aspect
        # ratios (or vLLM's dummy image) only, so nothing is exported that it would ignore
        if "VLLM_MULTIMODAL_RESOLUTIONS" in flags.user_env:
            pass  # the plan's settings_not_read lists it, with why (traits_for)
        elif resolutions:
            d.notes.append(f"{release} reads no VLLM_MULTIMODAL_RESOLUTIONS (from v0.26.0): the commonest real image "
                           f"shapes cannot be warmed; those other than its {warms} compile at run time")  # fmt: skip
    elif vision and i.buckets and i.vision_patches_per_item:
        # hpu_model_runner.py warmup_multimodal_graphs @091bbadd: resolutions are read for patch-bucketed towers only
        if "VLLM_MULTIMODAL_RESOLUTIONS" in flags.user_env:
            d.notes.append(f"{_yours(flags)}: not read by vllm-gaudi for a tower it buckets by images per pass")
    elif vision and i.buckets:
        if "VLLM_MULTIMODAL_RESOLUTIONS" in flags.user_env:
            parse_resolutions(flags.user_env["VLLM_MULTIMODAL_RESOLUTIONS"])  # vllm-gaudi's own form
            # exported as given, as a user's VLLM_GRAPH_RESERVED_MEM is: the environment lists what the server reads
            # of the plan's knobs (r17gaudi 10: it was only in a note)
            d.env["VLLM_MULTIMODAL_RESOLUTIONS"] = flags.user_env["VLLM_MULTIMODAL_RESOLUTIONS"]
            d.notes.append("VLLM_MULTIMODAL_RESOLUTIONS is yours: kept as it is")
            vision.append("VLLM_MULTIMODAL_RESOLUTIONS")
        elif resolutions:
            # Count 1: "WxH" alone would warm the --limit-mm-per-prompt count (999 by default) of images at once.
            d.env["VLLM_MULTIMODAL_RESOLUTIONS"] = format_resolutions(resolutions, (1, 1))
            vision.append("VLLM_MULTIMODAL_RESOLUTIONS")
    if i.buckets and not vision and not i.images_refused:
        # Nothing fits: naming image would make vllm-gaudi warm its default list (no memory check) and OOM.
        if dummy:
            d.notes.append(f"no vision bucket fits, but {release} warms its default vision buckets whatever "
                           "--limit-mm-per-prompt says, without a memory check (OOM risk at warm-up)")  # fmt: skip
        elif flags.limit_mm_per_prompt is not None and _limit_names_image(flags.limit_mm_per_prompt):
            d.notes.append("no vision bucket fits, but your --limit-mm-per-prompt names image: vllm-gaudi will warm "
                           "its default buckets without a memory check (OOM risk at warm-up)")  # fmt: skip
        else:
            d.notes.append("no vision bucket fits: vision warm-up left off, every image shape compiles at run time")
        return vision, "no vision bucket fits the pool"
    if dummy:
        # warmup_multimodal_graphs @ 37baba9d (and v0.13.0) warms image whatever its limit: no limit is added for it
        how = ("a square of each bucket's patches; the limit's image width/height is not read"
               if release.mm_warmup == "options"
               else "an image width/height in --limit-mm-per-prompt only shrinks that one image")  # fmt: skip
        d.notes.append(f"{release} warms vLLM's own dummy image once per vision bucket whatever --limit-mm-per-prompt "
                       "says: VLLM_MULTIMODAL_RESOLUTIONS and per-bucket widths/heights cannot steer it "
                       f"({how})")  # fmt: skip
        return vision, None
    if flags.language_model_only:  # every limit 0 (config/multimodal.py get_limit_per_prompt): no limit to add
        d.notes.append("--language-model-only: vLLM refuses every image, so no image runs and no vision graph is "
                       "warmed")  # fmt: skip
        return vision, "--language-model-only: no image runs"
    if flags.limit_mm_per_prompt is None:
        d.args += ["--limit-mm-per-prompt", json.dumps({"image": UNSET_MM_LIMIT})]
        d.notes.append(f'vllm-gaudi warms vision graphs only when --limit-mm-per-prompt names image: added {{"image": '
                       f"{UNSET_MM_LIMIT}}} (vLLM's own default count)")  # fmt: skip
        vision.append("--limit-mm-per-prompt")
        return vision, None
    vision.append("--limit-mm-per-prompt")  # the user's: it turns vision warm-up on or off
    if _limit_names_image(flags.limit_mm_per_prompt):
        return vision, None
    if flags.refuses_images:
        d.notes.append(
            f"your --limit-mm-per-prompt {flags.limit_mm_per_prompt} sets image to 0: vLLM refuses every request "
            "with an image ('At most 0 image(s) may be provided in one prompt', vllm/multimodal/processing/"
            "context.py @ 0.32), so no image runs and no vision graph is warmed; give image a count to serve images"
        )
        return vision, f"your --limit-mm-per-prompt {flags.limit_mm_per_prompt} sets image to 0"
    d.notes.append(
        f"your --limit-mm-per-prompt {flags.limit_mm_per_prompt} names no image: vLLM accepts images (its default "
        "count), but vllm-gaudi warms no vision graph and every image shape compiles at run time; name image in it"
    )
    return vision, f"your --limit-mm-per-prompt {flags.limit_mm_per_prompt} names no image"


def _yours(flags: ServerFlags) -> str:
    """The user's VLLM_MULTIMODAL_RESOLUTIONS as every not-read note names a variable (docs/oom-tuning.md: ``your
    VAR=V: not read by ...``)."""
    return f"your VLLM_MULTIMODAL_RESOLUTIONS={flags.user_env['VLLM_MULTIMODAL_RESOLUTIONS']}"


def _vision_bucket_count(d: Draft, release: Release, vision: list[str]) -> tuple[list[str], str | None]:
    """v0.11.2 (hpu_model_runner.py @ f9b64469): every tower batch based, VLLM_MULTIMODAL_BUCKETS read as items per
    pass, each bucket's count of vLLM's largest dummy item warmed for every modality the model takes, whatever
    --limit-mm-per-prompt says (so no limit is added); VLLM_MULTIMODAL_RESOLUTIONS is not read."""
    i, flags = d.plan.inputs, d.flags
    if "VLLM_MULTIMODAL_RESOLUTIONS" in flags.user_env:
        d.notes.append(f"{_yours(flags)}: not read by {release}")
    if i.buckets and not vision and not i.images_refused:
        d.notes.append(f"no vision pass fits, but {release} warms its default passes (1, 2, 4, 8 items) of every "
                       "modality without a memory check (OOM risk at warm-up)")  # fmt: skip
        return vision, "no vision pass fits the pool"
    d.notes.append(f"{release} warms, for each VLLM_MULTIMODAL_BUCKETS entry, that many of vLLM's largest dummy items "
                   "of every modality the model takes, video included, whatever --limit-mm-per-prompt says: the plan "
                   "sizes the image passes only (their video passes it cannot bound), and no image shape or "
                   "resolution steers it")  # fmt: skip
    return vision, None


def _warmup_note(d: Draft) -> str | None:
    """What vllm-gaudi's multimodal warm-up will run with the exported settings (its own warm-up, modelled)."""
    env = {**d.flags.user_env, **d.env}
    limit_text = d.flags.limit_mm_per_prompt or (json.dumps({"image": UNSET_MM_LIMIT}) if "--limit-mm-per-prompt" in
                                                 d.args else None)  # fmt: skip
    limit = _limit(limit_text) if limit_text is not None else {}
    if limit is None or "VLLM_MULTIMODAL_BUCKETS" not in env:
        return None
    model_type, model = d.plan.inputs.model.model_type, d.plan.inputs.model.name
    release = _release(d)  # the release planned for: its own vision warm-up (v0.26.0 changed it)
    buckets = vision_buckets_from_env(env["VLLM_MULTIMODAL_BUCKETS"], model_type, release, model=model)
    resolutions = env.get("VLLM_MULTIMODAL_RESOLUTIONS") if release.reads_resolutions else None
    warm = vision_warmup(buckets, resolutions, limit, model_type, warmup=not d.flags.skip_warmup, release=release)
    if not warm.warmed or release.mm_warmup != "shapes":
        return f"vllm-gaudi's vision warm-up: {warm.reason}"
    if d.plan.inputs.vision_patches_per_item:
        passes = ",".join(str(n) for m, _, _, n in warm.graphs if m == "image")
        return f"vllm-gaudi's vision warm-up: {len(warm.graphs)} steps, passes of {passes} images at 896x896"
    shapes = vision_graph_patches(warm, buckets or ())
    above = [p for p in shapes if not buckets or p > max(buckets)]
    extra = (f"; {len(above)} of them above the largest bucket ({','.join(map(str, above))} patches: the guessed "
             "aspect ratios of a large bucket, compiled without a bucket)") if above else ""  # fmt: skip
    return f"vllm-gaudi's vision warm-up: {len(warm.graphs)} steps over {len(shapes)} tower shapes{extra}"


def exports(d: Draft, context: ExportContext) -> Exports:
    plan, i, flags = d.plan, d.plan.inputs, d.flags
    kv = d.kv_part()
    if i.enforce_eager:
        return d.eager(kv)
    resolutions: tuple[tuple[int, int], ...] = ()
    if plan.vision_buckets_captured:
        resolutions = warmup_resolutions(context.images, plan.vision_buckets_captured, min_pixels=QWEN_MIN_PIXELS,
                                         max_pixels=QWEN_MAX_PIXELS, mode=context.align_mode,
                                         limit=MAX_RESOLUTIONS)  # fmt: skip
    bucket_file_path = str(Path(context.output_dir) / BUCKET_FILE_NAME) if context.output_dir else BUCKET_FILE_NAME
    vision, off = _vision(d, resolutions)
    warmed = off is None
    if warmed and i.unwarmed is None and (note := _warmup_note(d)) is not None:
        d.notes.append(note)
    text = plan.text_graphs
    runtime = i.runtime
    planned = isinstance(runtime, VllmGaudi) and runtime.planned and runtime.bucketing.file_text is not None
    # vllm-gaudi warms every bucket with no memory check: the text parts are bounded by the buckets, never pruned
    over = any(f.code == "text_graphs_over_pool" for f in plan.findings)
    prefill_ok = decode_ok = not over
    unwarmed = i.unwarmed  # a skipped warm-up: each bucket's graph is captured on its first use (traits)
    why_not = (f"the buckets' estimated graphs exceed the pool ({unwarmed.words}; none is dropped)" if unwarmed
               else OVER_POOL)  # fmt: skip
    # where a shape's graph comes from: warm-up, or its first use under a skipped warm-up
    padded = (f"a shape pads to a larger bucket, whose graph is captured on its first use ({unwarmed.words})"
              if unwarmed else "a shape pads to a larger warmed bucket and none is compiled at run time")  # fmt: skip
    if "VLLM_BUCKETING_FROM_FILE" in flags.user_env:
        d.notes.append("VLLM_BUCKETING_FROM_FILE is yours: the plan counts its buckets and exports none")
    elif not text.prefill or not text.decode:
        # a plan without graphs (--vision-pool none): no bucket file can bound what vllm-gaudi still warms
        d.notes.append("the plan models no text graphs (vision pool none): no bucket file; vllm-gaudi warms its "
                       "graphs anyway unless --enforce-eager")  # fmt: skip
        prefill_ok = decode_ok = False
        why_not = "the plan models no graphs (vision pool none); vllm-gaudi warms them unless --enforce-eager"
    elif planned:
        assert isinstance(runtime, VllmGaudi)
        assert runtime.bucketing.file_text is not None
        d.files[BUCKET_FILE_NAME] = runtime.bucketing.file_text
        d.env["VLLM_BUCKETING_FROM_FILE"] = bucket_file_path
        d.notes.append(
            f"vllm-gaudi: bucket file with {len(text.prefill)} prompt and {len(text.decode)} decode buckets planned "
            f"from the traffic; they cover every shape the limits allow, so {padded}"
        )
    else:
        own = (f"vllm-gaudi's own {text.source}: {len(text.prefill)} prompt and {len(text.decode)} decode buckets, "
               f"{unwarmed.what}" if unwarmed else f"vllm-gaudi warms its own {text.source}: {len(text.prefill)} "
               f"prompt and {len(text.decode)} decode buckets")  # fmt: skip
        d.notes.append(f"{own}; a shape that no bucket covers compiles at run time")
    release = _release(d)
    cfg = config_from_env(flags.user_env, release)
    ignored = overridden_variables(cfg)
    if isinstance(runtime, VllmGaudi) and not runtime.planned:  # its own buckets said the overwritten ranges already
        ignored = tuple(v for v in ignored if v not in overridden_ranges(cfg))
    if ignored:
        d.notes.append(f"{release} ignores your {', '.join(ignored)} (the strategy or the bucket file in use "
                       "overrides them)")  # fmt: skip
    batch = flags.user_env.get("VLLM_PROMPT_BS_BUCKET_MAX")
    if batch is not None and ("VLLM_BUCKETING_FROM_FILE" in d.env or "VLLM_BUCKETING_FROM_FILE" in flags.user_env):
        # the runner reads it whatever the buckets' source (v1/worker/hpu_model_runner.py:1513 @091bbadd)
        d.notes.append(f"{release} still reads your VLLM_PROMPT_BS_BUCKET_MAX={batch} beside the bucket file: it "
                       "caps the prefill batch (max_prefill_batch_size); the plan counts it")  # fmt: skip
    by = ("VLLM_BUCKETING_FROM_FILE",)
    vision_ok = (warmed and "VLLM_MULTIMODAL_BUCKETS" in vision) or not i.buckets or i.images_refused
    d.notes.append(
        f"{release} reads neither VLLM_GRAPH_PROMPT_RATIO nor "
        "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO: none exported (they only split the plan's graph pools)"
    )
    return d.finish({
        "kv_cache": kv,
        "decode_graphs": Part(by, decode_ok, "" if decode_ok else why_not),
        "prefill_text_graphs": Part(by, prefill_ok, "" if prefill_ok else why_not),
        "prefill_vision_graphs": Part(tuple(vision), vision_ok, "no image runs: none planned" if i.images_refused
                                      else "" if off is None else f"vision warm-up is off: {off}"),
    })  # fmt: skip

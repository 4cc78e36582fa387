"""vllm-gaudi's multimodal warm-up, modelled: which (modality, width, height, items) dummy batches it runs.

From vllm-gaudi main @ 091bbadd (our own code): ``vllm_gaudi/extension/bucketing/vision.py``
(``HPUVisionBucketManager``: ``VLLM_MULTIMODAL_BUCKETS``, ``VLLM_MULTIMODAL_RESOLUTIONS``,
``bucket_to_image_resolution``) and ``v1/worker/hpu_model_runner.py`` ``warmup_multimodal_graphs`` /
``_resolve_mm_limit_options``, with vLLM's ``MultiModalConfig.limit_per_prompt`` semantics (a modality not named
gets 999 items; ``{"image": 4}`` means count 4; a dict may carry ``count``/``width``/``height``, count defaulting
to 999).

What one warm-up step compiles depends on run-time things we do not model: the processor resizes the dummy
image (Qwen2.5-VL: to multiples of 28 within its min/max pixels) and the tower pads the patches to a bucket, so
two steps may share one compiled graph. The patch size comes from the loaded tower (14 for Qwen2.5-VL).

Releases before v0.26.0 warm differently (read at v0.24.0 @ 90815f2f and v0.19.0 @ da9f1820; the fields of
:class:`~.releases.Release` say how): no ``VLLM_MULTIMODAL_RESOLUTIONS``, every step batches the modality's limit
count, the limit's width/height is warmed first, and the model table has no native-resolution towers. v0.13.0 and
v0.15.1rc1 / v0.16.0rc0 warm vLLM's own dummy image once per vision bucket instead (:func:`dummy_image_size`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.preprocess.align import QWEN_MAX_PIXELS, aligned_size
from vllm_hpu_mm.runtimes.vllm_gaudi.releases import MAIN, Release
from vllm_hpu_mm.values import UNSET_MM_LIMIT, AlignMode

__all__ = [
    "BATCH_WARMUP_SIDE",
    "RESOLUTIONS_FORM",
    "ResolutionEntry",
    "VisionWarmup",
    "default_vision_buckets",
    "dummy_image_size",
    "format_resolutions",
    "parse_resolution_entries",
    "parse_resolutions",
    "vision_buckets_from_env",
    "vision_graph_patches",
    "vision_table_entry",
    "vision_warmup",
]

RESOLUTIONS_FORM = "comma-separated WxH, WxHxN or WxHxN-M (1 <= N <= M), e.g. 1024x768,448x448x1-4"

#: vision.py MULTIMODAL_CONFIG @ 091bbadd, in its order (order matters: the first key contained in the model type
#: wins): (key, batch based, default buckets). Unknown models fall back to batch based [1, 2, 4, 8].
_MODEL_TABLE: tuple[tuple[str, bool, tuple[int, ...]], ...] = (
    ("gemma-3", True, (1, 2, 4, 8)),
    ("ovis", False, (1600, 3136, 4096, 6400)),
    ("ovis2.5", False, (784, 1600, 3136, 4096, 6400, 7744, 9216, 12544)),
    ("qwen2_5_vl", False, (1600, 3136, 4096, 6400, 7744, 9216, 12544)),
    ("qwen3_vl", False, (196, 256, 441, 480, 576, 900, 1156)),
    ("ernie4_5_moe_vl", False, (1600, 3136, 4096, 6400, 7744, 9216, 12544)),
    ("pixtral", False, (512, 1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192, 9216, 10240, 11264, 12288, 131076)),
    ("mistral3", False, (512, 1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192, 9216, 10240, 11264, 12288, 131076)),
    ("deepseek_ocr", False, (1600, 2048, 3072, 6144, 8192, 131076)),
    ("qwen3_5", False, ()),
    ("kimi_k25", False, ()),
    ("gemma4", False, ()),
)
#: vision.py MULTIMODAL_CONFIG before v0.26.0 (@ 90815f2f): qwen3_5 still has patch buckets; kimi_k25 and gemma4
#: (added by #1617 / #1637) are absent, so those models fall back to batch based.
_MODEL_TABLE_BEFORE_V0_26 = tuple(
    (key, False, (196, 256, 441, 480, 576, 900, 1156)) if key == "qwen3_5" else (key, batch_based, buckets)
    for key, batch_based, buckets in _MODEL_TABLE
    if key not in ("kimi_k25", "gemma4")
)
#: hpu_model_runner.py warmup_multimodal_graphs @ 091bbadd: a batch-based warm-up pass holds its bucket's count of
#: 896 x 896 images ("pixels as in gemma3 config"), whatever the family.
BATCH_WARMUP_SIDE = 896
#: bucket_to_image_resolution's aspect ratios (w, h), in its order.
_ASPECTS = ((1, 1), (4, 3), (3, 4), (16, 9), (9, 16))


def _norm(name: str) -> str:
    """A model type or path as vllm-gaudi's table keys are matched against it (case, '-' and '.' ignored)."""
    return name.lower().replace("-", "").replace(".", "")


def _model_entry(model_type: str, release: Release = MAIN, model: str | None = None) -> tuple[bool, tuple[int, ...]]:
    key_of = model_type
    if release.vision_by_path:
        # v0.11.2's runner hands the manager model_config.model (the --model id or folder), not the type
        if model is None:
            raise ConfigError(f"{release} looks its vision buckets up by the model's path, not its type "
                              f"({model_type}); accepted: model= the Hugging Face id or folder given to "
                              "--model")  # fmt: skip
        key_of = model
    table = _MODEL_TABLE if release.native_resolution_towers else _MODEL_TABLE_BEFORE_V0_26
    replaced = dict(release.vision_table_buckets)
    for key, batch_based, buckets in table:
        if key in release.vision_table_absent:
            continue
        if _norm(key) in _norm(key_of):
            # v0.11.2's manager is batch based whatever the table says (its is_batch_based defaults to True)
            return batch_based or release.vision_by_path, replaced.get(key, buckets)
    return True, (1, 2, 4, 8)


def vision_table_entry(
    model_type: str, release: Release = MAIN, *, model: str | None = None
) -> tuple[bool, tuple[int, ...]]:
    """(batch based, default buckets) of ``model_type`` in vllm-gaudi's table (unlisted: batch based 1, 2, 4, 8).
    ``model``: the model as given to --model (Hugging Face id or folder), which v0.11.2 searches the table with
    instead (ConfigError there without it)."""
    return _model_entry(model_type, release, model)


def default_vision_buckets(
    model_type: str = "qwen2_5_vl", release: Release = MAIN, *, model: str | None = None
) -> tuple[int, ...]:
    """vllm-gaudi's default vision buckets for a model type (patches per image, or images for batch-based ones);
    ``model`` as for :func:`vision_table_entry`."""
    return _model_entry(model_type, release, model)[1]


def vision_buckets_from_env(
    value: str | None, model_type: str = "qwen2_5_vl", release: Release = MAIN, *, model: str | None = None
) -> tuple[int, ...] | None:
    """``VLLM_MULTIMODAL_BUCKETS`` as vision.py @ 091bbadd reads it.

    Exactly ``None`` (case-sensitive) -> ``None`` (vision bucketing off; with warm-up on, vllm-gaudi then fails
    taking ``len()`` of it: see :func:`vision_warmup`); unset or empty -> the model's default; otherwise
    ``int()`` of every comma-separated item, sorted (duplicates kept). ``int()`` accepts spaces around an item,
    a sign and ``_`` between digits; an empty item (a trailing comma, ``,,``) or ``none`` is an error.
    """
    if value == "None":
        return None
    if not value:
        return default_vision_buckets(model_type, release, model=model)
    out = []
    for item in value.split(","):
        try:
            out.append(int(item))
        except ValueError:
            raise ConfigError(
                f"VLLM_MULTIMODAL_BUCKETS={value!r}: item {item!r} is not an integer; accepted: comma-separated "
                "integers as Python int() reads them (no empty item, no trailing comma) or exactly None"
            ) from None
    return tuple(sorted(out))


@dataclasses.dataclass(frozen=True)
class ResolutionEntry:
    """One VLLM_MULTIMODAL_RESOLUTIONS entry: ``count`` None = the limit's count, an int = that count, a pair =
    every count in the range (clamped to the limit's count)."""

    width: int
    height: int
    count: int | tuple[int, int] | None


def _int(token: str, item: str, value: str) -> int:
    try:
        return int(token)
    except ValueError:
        raise ConfigError(
            f"VLLM_MULTIMODAL_RESOLUTIONS={value!r}: {token!r} in entry {item!r} is not an integer; "
            f"accepted: {RESOLUTIONS_FORM}"
        ) from None


def parse_resolution_entries(value: str) -> tuple[ResolutionEntry, ...]:
    """VLLM_MULTIMODAL_RESOLUTIONS as vision.py ``_parse_resolutions`` @ 091bbadd reads it: items split on commas
    and stripped (empty items skipped, so trailing commas are fine), lower-cased and split on ``x``; each number
    through ``int()``. Raises ConfigError where vllm-gaudi fails."""
    out: list[ResolutionEntry] = []
    for raw in value.split(","):
        item = raw.strip()
        if not item:
            continue
        parts = item.lower().split("x")
        if len(parts) == 2:
            out.append(ResolutionEntry(_int(parts[0], item, value), _int(parts[1], item, value), None))
        elif len(parts) == 3:
            w, h, n = _int(parts[0], item, value), _int(parts[1], item, value), parts[2]
            if "-" in n:
                lo_s, hi_s = n.split("-", 1)
                lo, hi = _int(lo_s, item, value), _int(hi_s, item, value)
                if lo < 1 or hi < lo:
                    raise ConfigError(
                        f"VLLM_MULTIMODAL_RESOLUTIONS={value!r}: count range {n!r} in {item!r} is invalid (a range "
                        f"N-M needs 1 <= N <= M); accepted: {RESOLUTIONS_FORM}"
                    )
                out.append(ResolutionEntry(w, h, (lo, hi)))
            else:
                out.append(ResolutionEntry(w, h, _int(n, item, value)))
        else:
            raise ConfigError(
                f"VLLM_MULTIMODAL_RESOLUTIONS={value!r}: entry {item!r} is invalid; accepted: {RESOLUTIONS_FORM}"
            )
    return tuple(out)


def parse_resolutions(value: str) -> tuple[tuple[int, int, int, int], ...]:
    """VLLM_MULTIMODAL_RESOLUTIONS -> (w, h, n_min, n_max) per entry: ``WxH`` -> (w, h, 0, 0), 0 meaning "the
    --limit-mm-per-prompt count"; ``WxHxN`` -> (w, h, N, N); ``WxHxN-M`` -> (w, h, N, M).

    Stricter than vllm-gaudi in one place: it accepts ``WxHx0`` (and then warms a batch of 0 items); we raise
    ConfigError, which also keeps 0 unambiguous here. Use :func:`parse_resolution_entries` for the exact view.
    """
    out = []
    for e in parse_resolution_entries(value):
        if e.count is None:
            out.append((e.width, e.height, 0, 0))
        elif isinstance(e.count, tuple):
            out.append((e.width, e.height, e.count[0], e.count[1]))
        elif e.count < 1:
            raise ConfigError(
                f"VLLM_MULTIMODAL_RESOLUTIONS={value!r}: count {e.count} for {e.width}x{e.height} is invalid (N >= 1: "
                f"vllm-gaudi would warm an empty batch); accepted: {RESOLUTIONS_FORM}"
            )
        else:
            out.append((e.width, e.height, e.count, e.count))
    return tuple(out)


def format_resolutions(shapes: Iterable[tuple[int, int]], counts: tuple[int, int] | None = None) -> str:
    """A VLLM_MULTIMODAL_RESOLUTIONS value for these (width, height) shapes, first occurrence order, duplicates
    dropped. ``counts=(n, m)`` warms n..m items per shape (``WxHxn-m``, or ``WxHxn`` when n == m); without it each
    shape warms the --limit-mm-per-prompt count (``WxH``)."""
    suffix = ""
    if counts is not None:
        lo, hi = counts
        if lo < 1 or hi < lo:
            raise ConfigError(f"format_resolutions: counts {counts} are invalid; accepted: (n, m) with 1 <= n <= m")
        suffix = f"x{lo}" if lo == hi else f"x{lo}-{hi}"
    items = []
    for w, h in shapes:
        if w < 1 or h < 1:
            raise ConfigError(f"format_resolutions: shape {w}x{h} is invalid; accepted: width, height >= 1")
        items.append(f"{w}x{h}{suffix}")
    return ",".join(dict.fromkeys(items))


def _bucket_shapes(buckets: tuple[int, ...], patch_size: int, merge_size: int) -> list[tuple[int, int]]:
    # vision.py bucket_to_image_resolution @ 091bbadd: height from the square root of the patch count, width from
    # the aspect ratio, the width's patch count rounded up to the merge size (the height's is not).
    shapes = []
    for patches in buckets:
        grid_h = int(patches**0.5)  # float square root, as vllm-gaudi computes it (callers reject negatives)
        height = grid_h * patch_size
        for rw, rh in _ASPECTS:
            grid_w = int(height * rw / rh) // patch_size
            if grid_w * grid_h // merge_size != 0:
                grid_w = (grid_w + merge_size - 1) // merge_size * merge_size
            shapes.append((grid_w * patch_size, height))
    return shapes


@dataclasses.dataclass(frozen=True)
class VisionWarmup:
    """What vllm-gaudi's multimodal warm-up does. ``graphs``: one (modality, width, height, num_items) per warm-up
    step, in its order (logged as ``[Warmup][Graph/Multimodal(<modality>)][i/n]``). ``fails``: vllm-gaudi fails
    during this warm-up (``reason`` says why)."""

    warmed: bool
    reason: str
    graphs: tuple[tuple[str, int, int, int], ...]
    fails: bool = False


def _limits(
    limit_mm_per_prompt: Mapping[str, int | Mapping[str, int]] | None, modalities: tuple[str, ...]
) -> tuple[dict[str, int], dict[str, Mapping[str, int]]]:
    options: dict[str, Mapping[str, int]] = {}
    for key, value in (limit_mm_per_prompt or {}).items():
        options[key] = {"count": value} if isinstance(value, int) else value
    counts = {m: int(options[m].get("count", UNSET_MM_LIMIT)) if m in options else UNSET_MM_LIMIT for m in modalities}
    return counts, options


def vision_warmup(
    buckets: tuple[int, ...] | None,
    resolutions: str | None,
    limit_mm_per_prompt: Mapping[str, int | Mapping[str, int]] | None,
    model_type: str = "qwen2_5_vl",
    patch_size: int = 14,
    merge_size: int = 2,
    *,
    modalities: tuple[str, ...] = ("image", "video"),
    warmup: bool = True,
    release: Release = MAIN,
) -> VisionWarmup:
    """The multimodal warm-up steps of vllm-gaudi 091bbadd (``warmup_multimodal_graphs``), or of ``release``.

    ``buckets``: as :func:`vision_buckets_from_env` returns; ``resolutions``: the VLLM_MULTIMODAL_RESOLUTIONS value;
    ``limit_mm_per_prompt``: vLLM's ``--limit-mm-per-prompt`` ({"image": 4} or {"image": {"count": 4, "width": ..,
    "height": ..}}); ``modalities``: what the model supports, in its order (Qwen2.5-VL: image, video);
    ``warmup``: False with VLLM_SKIP_WARMUP or bucketing off (:func:`warmup_enabled`); ``patch_size``: what the
    loaded tower reports (a run-time value, 14 for Qwen2.5-VL); ``merge_size``: vllm-gaudi hard-codes 2.

    A modality is warmed only when --limit-mm-per-prompt names it: image with a count other than 0, video with a
    count other than 999. Non-batch models warm five aspect ratios per bucket with 1 item, then each explicit
    resolution (VLLM_MULTIMODAL_RESOLUTIONS, then per-modality width/height from the limit), duplicates dropped;
    a ``WxH`` entry warms the modality's count, ``WxHxN`` min(N, count), ``WxHxN-M`` every count N..min(M, count).
    Before v0.26.0 (``release``): ``resolutions`` is not read, the first warmed modality's limit width/height is
    warmed first, and every step batches the modality's own limit count. v0.17.0rc1 - v0.18.0rc0 read vLLM's limits
    as integers: image is warmed unless its count is 0 (named or not), no width/height is read, each step is one item.
    v0.11.2 batches each bucket's count of every modality's dummy item (its buckets come from the model's path:
    :func:`vision_buckets_from_env` with ``model``).
    """
    # v0.11.2 batches every tower: its table (searched by path) only gives the buckets, already in ``buckets``
    batch_based = release.vision_by_path or _model_entry(model_type, release)[0]
    explicit = list(parse_resolution_entries(resolutions or "")) if release.reads_resolutions else []
    if not warmup:
        return VisionWarmup(False, "warm-up is skipped (VLLM_SKIP_WARMUP or bucketing off)", ())
    counts, options = _limits(limit_mm_per_prompt, modalities)
    if release.mm_warmup == "bucket-count":
        return _bucket_count_warmup(buckets, counts, options, model_type, modalities)
    if release.mm_warmup in ("dummy", "options"):
        sized = release.mm_warmup == "options"
        return _dummy_warmup(buckets, counts, options, model_type, batch_based, modalities, patch_size if sized else 0)
    unnamed_image = release.mm_image_warmed_unnamed
    if release.mm_limit_shapes == "none" and (missing := _integer_limit_lookup_fails(counts, options, modalities)):
        why = (
            f"vllm-gaudi's warm-up looks up the {missing} limit among the model's modalities {modalities}, finds none "
        )
        return VisionWarmup(False, why + "and fails (KeyError) before any graph", (), fails=True)
    if buckets is None and (not batch_based or _warmed_modalities(counts, options, modalities, unnamed_image)):
        return VisionWarmup(
            False,
            "VLLM_MULTIMODAL_BUCKETS=None: vllm-gaudi's multimodal warm-up takes len() of the bucket list and "
            "fails (TypeError) before any graph",
            (),
            fails=True,
        )
    buckets = buckets or ()
    if not batch_based and any(b < 0 for b in buckets):
        return VisionWarmup(
            False, f"negative vision bucket in {buckets}: vllm-gaudi fails on its square root", (), fails=True
        )
    warmed = _warmed_modalities(counts, options, modalities, unnamed_image)
    candidates: list[ResolutionEntry] = []
    if not batch_based:
        guessed = [ResolutionEntry(w, h, 1) for w, h in _bucket_shapes(buckets, patch_size, merge_size)]
        if release.mm_limit_shapes == "none":  # an integer limit has no width/height
            candidates = guessed
        elif release.mm_limit_shapes in ("first", "first-warmed"):
            candidates = _first_limit_shape(options, warmed, release.mm_limit_shapes == "first-warmed") + guessed
        else:
            for m in modalities:  # runner: per-modality width/height in the limit join the explicit shapes
                o = options.get(m)
                if o is not None and "width" in o and "height" in o:
                    explicit.append(ResolutionEntry(int(o["width"]), int(o["height"]), None))
            candidates = list(dict.fromkeys(guessed + explicit))

    graphs: list[tuple[str, int, int, int]] = []
    skipped = [_why_not(m, m in options or unnamed_image) for m in modalities if m not in warmed]
    for m in warmed:
        user_max = _resolved_count(m, options)
        if batch_based:
            graphs.extend((m, 896, 896, b) for b in buckets)
            continue
        if release.mm_step_items == "one":  # the integer limit has no count: one item a step
            graphs.extend((m, e.width, e.height, 1) for e in candidates)
            continue
        if release.mm_step_items == "limit":
            # _get_mm_dummy_batch before v0.26.0: no per-step count; each step batches the modality's own count
            own = counts[m] if m in options else 1
            graphs.extend((m, e.width, e.height, own) for e in candidates)
            continue
        for e in candidates:
            if isinstance(e.count, tuple):
                warm = list(range(e.count[0], min(e.count[1], user_max) + 1))
            elif e.count is not None:
                warm = [min(e.count, user_max)]
            else:
                warm = [user_max]
            graphs.extend((m, e.width, e.height, n) for n in warm)
    if graphs:
        reason = f"{len(graphs)} warm-up steps"
        if skipped:
            reason += "; not warmed: " + ", ".join(skipped)
        return VisionWarmup(True, reason, tuple(graphs))
    if "image" in modalities and "image" in options and counts["image"] == 0:
        return VisionWarmup(False, "no vision graph is warmed: --limit-mm-per-prompt sets image to 0, so vLLM refuses "
                            "every request with an image (none runs, none compiles)", ())  # fmt: skip
    why = ", ".join(skipped) if skipped else "no bucket and no explicit resolution"
    return VisionWarmup(False, f"no vision graph is warmed: {why}; every image shape compiles at run time", ())


#: vLLM's profiling dummy image per model family with the processor's default settings (the size with the most
#: features: Qwen2-VL's processing info from max_pixels 12845056 with 28-pixel units, Qwen3-VL's from 16777216 with
#: 32-pixel units; Gemma 3's image size without pan-and-scan). First key contained in the model type wins.
_DUMMY_IMAGE: tuple[tuple[str, tuple[int, int]], ...] = (
    ("qwen2_5_vl", (3584, 3584)),
    ("qwen2_vl", (3584, 3584)),
    ("qwen3_vl", (4096, 4096)),
    ("gemma3", (896, 896)),
)


def dummy_image_size(model_type: str, image_options: Mapping[str, int] | None = None) -> tuple[int, int] | None:
    """(width, height) of the image vLLM's dummy-input builder makes for ``model_type`` (its processor's defaults),
    each side shrunk to --limit-mm-per-prompt's image width/height where smaller (vLLM ignores a larger one);
    None where the family's processor is not modelled here."""
    size = next((wh for key, wh in _DUMMY_IMAGE if key in _norm(model_type)), None)
    if size is None:
        return None
    o = image_options or {}
    return min(size[0], int(o.get("width") or size[0])), min(size[1], int(o.get("height") or size[1]))


def _dummy_warmup(
    buckets: tuple[int, ...] | None,
    counts: Mapping[str, int],
    options: Mapping[str, Mapping[str, int]],
    model_type: str,
    batch_based: bool,
    modalities: tuple[str, ...],
    patch_size: int = 0,
) -> VisionWarmup:
    # warmup_multimodal_graphs / _get_mm_dummy_batch @ 37baba9d (v0.15.1rc1, v0.16.0rc0): every modality vLLM's
    # budget lists (image whatever its limit), video skipped with a warning; per bucket (five times for a
    # batch-based tower) one step of vLLM's own dummy image, the bucket's count of it if batch based, else one.
    # ``patch_size`` > 0 (v0.13.0): the image is asked for at a per-bucket size instead of the limit's.
    if all(counts.get(m, UNSET_MM_LIMIT) == 0 for m in modalities):  # vLLM: text-only, no multimodal warm-up
        return VisionWarmup(False, "no vision graph is warmed: every modality's limit is 0 (text-only)", ())
    warmed = [m for m in modalities if m != "video"]
    if not warmed:
        return VisionWarmup(False, "no vision graph is warmed: this release does not warm video", ())
    if buckets is None:
        return VisionWarmup(False, "VLLM_MULTIMODAL_BUCKETS=None: vllm-gaudi's multimodal warm-up takes len() of "
                            "the bucket list and fails (TypeError) before any graph", (), fails=True)  # fmt: skip
    if warmed[0] != "image":
        return VisionWarmup(False, f"this release's warm-up asserts image and fails at {warmed[0]}", (), fails=True)
    if batch_based and any(b <= 0 for b in buckets):
        return VisionWarmup(False, f"vision bucket {min(buckets)} batches no image: vllm-gaudi's warm-up fails "
                            "(StopIteration)", (), fails=True)  # fmt: skip
    if patch_size and not batch_based and any(b <= 0 for b in buckets):
        return VisionWarmup(False, f"vision bucket {min(buckets)}: vllm-gaudi's warm-up fails sizing its image "
                            "(a square root or a division by 0)", (), fails=True)  # fmt: skip
    size = dummy_image_size(model_type, None if patch_size else options.get("image"))
    graphs: list[tuple[str, int, int, int]] = []
    for b in buckets:
        w, h = size or (0, 0)
        if patch_size:  # v0.13.0: a square of patches (non-batch) or 896 x 896, no larger than the processor's
            grid_w = int(math.sqrt(b)) if not batch_based else 0
            want = (896, 896) if batch_based else (grid_w * patch_size, int(b / grid_w) * patch_size)
            w, h = min(w, want[0]), min(h, want[1])
        graphs.extend(("image", w, h, b if batch_based else 1) for _ in (_ASPECTS if batch_based else (0,)))
    if size is None:
        what = f"its processor's own size, not modelled for {model_type}: shown as 0x0"
    else:
        what = "sized per bucket, capped at the processor's largest" if patch_size else f"{size[0]}x{size[1]}"
    steers = (
        "the limit's width/height is not read"
        if patch_size
        else "the buckets do not size it (only a smaller --limit-mm-per-prompt image width/height shrinks it)"
    )
    reason = (
        f"{len(graphs)} warm-up steps of vLLM's own dummy image ({what}) once per vision bucket"
        f"{', five times' if batch_based else ''}: VLLM_MULTIMODAL_RESOLUTIONS is not read and {steers}; video is "
        "not warmed"
    )
    return VisionWarmup(True, reason, tuple(graphs))


def _bucket_count_warmup(
    buckets: tuple[int, ...] | None,
    counts: Mapping[str, int],
    options: Mapping[str, Mapping[str, int]],
    model_type: str,
    modalities: tuple[str, ...],
) -> VisionWarmup:
    # warmup_multimodal_graphs / _get_mm_dummy_batch @ f9b64469 (v0.11.2): for every modality vLLM's budget lists,
    # whatever its limit, one step per bucket holding the bucket's count of vLLM's one dummy item of that modality
    # (video frames share the image's size; each shrunk to its own modality's smaller limit width/height).
    if all(counts.get(m, UNSET_MM_LIMIT) == 0 for m in modalities):  # vLLM: text-only, no multimodal warm-up
        return VisionWarmup(False, "no vision graph is warmed: every modality's limit is 0 (text-only)", ())
    if buckets is None:
        return VisionWarmup(False, "VLLM_MULTIMODAL_BUCKETS=None: vllm-gaudi's multimodal warm-up takes len() of "
                            "the bucket list and fails (TypeError) before any graph", (), fails=True)  # fmt: skip
    graphs: list[tuple[str, int, int, int]] = []
    for m in modalities:
        if counts[m] == 0 and buckets:
            return VisionWarmup(False, f"--limit-mm-per-prompt sets {m} to 0, yet this release's warm-up asks vLLM "
                                f"for a dummy {m}, which vLLM refuses (ValueError): start-up fails", tuple(graphs),
                                fails=True)  # fmt: skip
        if any(b <= 0 for b in buckets):
            return VisionWarmup(False, f"vision bucket {min(buckets)} batches no item: vllm-gaudi's warm-up fails "
                                "(StopIteration)", tuple(graphs), fails=True)  # fmt: skip
        w, h = dummy_image_size(model_type, options.get(m)) or (0, 0)
        graphs.extend((m, w, h, b) for b in buckets)
    if not graphs:
        return VisionWarmup(False, "no vision graph is warmed: no vision bucket", ())
    size = "its processor's own size" if dummy_image_size(model_type) is None else "its processor's largest"
    return VisionWarmup(True, f"{len(graphs)} warm-up steps: per bucket, the bucket's count of vLLM's dummy item "
                        f"({size}) for each of {', '.join(modalities)}, whatever --limit-mm-per-prompt says; "
                        "VLLM_MULTIMODAL_RESOLUTIONS is not read", tuple(graphs))  # fmt: skip


def _first_limit_shape(
    options: Mapping[str, Mapping[str, int]], warmed: list[str], first_warmed_only: bool = False
) -> list[ResolutionEntry]:
    # warmup_multimodal_graphs before v0.26.0 (@ 90815f2f): image, then video, if warmed; the first with both
    # width and height gives the one explicit shape. Before v0.19.0 (@ 67e4a6b1) the search stops at the first
    # warmed one, with or without a shape.
    for m in ("image", "video"):
        o = options.get(m)
        if m not in warmed or o is None:
            continue
        if "width" in o and "height" in o:
            return [ResolutionEntry(int(o["width"]), int(o["height"]), None)]
        if first_warmed_only:
            break
    return []


def _integer_limit_lookup_fails(
    counts: Mapping[str, int], options: Mapping[str, Mapping[str, int]], modalities: tuple[str, ...]
) -> str | None:
    # warmup_multimodal_graphs @ 715451c2: the width/height search indexes the model's limits by image, then (image
    # limit 0) video, whenever vLLM's integer limit of that modality is not 0 (999 when not named)
    for m in ("image", "video"):
        count = (
            counts[m]
            if m in counts
            else int(options[m].get("count", UNSET_MM_LIMIT))
            if m in options
            else UNSET_MM_LIMIT
        )
        if count == 0:
            continue
        return m if m not in modalities else None
    return None


def _warmed_modalities(
    counts: Mapping[str, int],
    options: Mapping[str, Mapping[str, int]],
    modalities: tuple[str, ...],
    unnamed_image: bool = False,
) -> list[str]:
    # warmup_multimodal_graphs @ 091bbadd: image needs a named, non-zero limit; video a named limit other than
    # 999 (vLLM's unset value); any other modality is always warmed. ``unnamed_image`` (v0.17.0rc1 - v0.18.0rc0):
    # image needs only a non-zero limit (999 when not named).
    out = []
    for m in modalities:
        if m == "image" and not ((m in options or unnamed_image) and counts[m] != 0):
            continue
        if m == "video" and not (m in options and counts[m] != UNSET_MM_LIMIT):
            continue
        out.append(m)
    return out


def _why_not(modality: str, named: bool) -> str:
    if modality == "image":
        return "image (limit 0)" if named else "image (not named in --limit-mm-per-prompt)"
    return f"{modality} (not named in --limit-mm-per-prompt with a count other than 999)"


def _resolved_count(modality: str, options: Mapping[str, Mapping[str, int]]) -> int:
    # hpu_model_runner.py _resolve_mm_limit_options @ 091bbadd: exact modality, then image/video fallbacks;
    # no options at all -> 1.
    fallbacks = {"image": ("image", "video"), "vision_chunk": ("image", "video"), "video": ("video", "image")}
    for key in (modality, *fallbacks.get(modality, ())):
        if key in options:
            return int(options[key].get("count", UNSET_MM_LIMIT))
    return 1


#: vllm-gaudi's HPUQwen2_5_VLProcessingInfo (models/qwen2_5_vl.py @ 091bbadd) sets min_pixels 112 x 112.
GAUDI_QWEN_MIN_PIXELS = 112 * 112


def vision_graph_patches(
    warmup: VisionWarmup,
    buckets: tuple[int, ...],
    *,
    min_pixels: int = GAUDI_QWEN_MIN_PIXELS,
    max_pixels: int = QWEN_MAX_PIXELS,
    patch_size: int = 14,
    merge_size: int = 2,
) -> tuple[int, ...]:
    """Distinct per-image patch counts the image warm-up steps run the Qwen2.5-VL tower at, first-seen order.

    A model of run-time behaviour, not of vllm-gaudi's warm-up loop itself: the HF processor resizes each dummy
    image with Qwen's factor-28 rule within ``min_pixels`` (vllm-gaudi: 112 x 112) and ``max_pixels`` (the model's
    preprocessor config; 12845056 for Qwen2.5-VL), and vllm-gaudi's tower (models/qwen2_5_vl.py get_image_embeds
    @ 091bbadd) runs one image at a time padded to the smallest bucket that holds it, or at its exact size above
    the largest bucket. So each number is one compiled tower shape, whatever the step's item count; a guessed
    aspect ratio of a large bucket can land above every bucket and compile an unbucketed shape. Video steps are
    left out (their patch count depends on frames).
    """
    factor = patch_size * merge_size
    ordered = sorted(buckets)
    out: dict[int, None] = {}
    for modality, width, height, _ in warmup.graphs:
        if modality != "image":
            continue
        h, w = aligned_size(height, width, min_pixels=min_pixels, max_pixels=max_pixels, mode=AlignMode.NEAREST,
                            factor=factor)  # fmt: skip
        patches = (h // patch_size) * (w // patch_size)
        out[next((b for b in ordered if b >= patches), patches)] = None
    return tuple(out)

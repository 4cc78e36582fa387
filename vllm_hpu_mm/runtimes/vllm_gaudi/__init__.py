"""vllm-gaudi (vllm-project/vllm-gaudi, today's Gaudi runtime), modelled at @091bbadd: what it does with your
environment.

- Memory (``v1/worker/hpu_worker.py``): reads ``VLLM_GRAPH_RESERVED_MEM`` (0 under ``--enforce-eager``) and takes it
  from free memory measured after the weights load; ``profile_run(initialize_only=True)`` runs no profiling forward
  pass. ``VLLM_GRAPH_PROMPT_RATIO`` and ``VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO`` are read nowhere in ``vllm_gaudi/``.
- Text graphs: its bucketing variables (:mod:`.config`), strategies (:mod:`.exponential`, :mod:`.linear`,
  :mod:`.padding_aware`), a bucket file (:mod:`.file_strategy`) and the generated sets (:mod:`.common`) — the file
  names of its own ``extension/bucketing/``.
- Vision graphs: ``VLLM_MULTIMODAL_BUCKETS`` / ``VLLM_MULTIMODAL_RESOLUTIONS`` (:mod:`.vision`), warmed only when
  ``--limit-mm-per-prompt`` names ``image``.
- fp32 softmax is a feature on by default for ``qwen2``/``qwen2_5_vl`` (``VLLM_FP32_SOFTMAX`` overrides it); the
  vision tower reads ``VLLM_FP32_SOFTMAX_VISION`` (default off) in ``models/qwen2_5_vl.py``.
- What ``serve`` hands it: :mod:`.exports`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from vllm_hpu_mm.runtimes.base import (
    GRAPH_RESERVED_MEM,
    Bucket,
    EngineShape,
    Runtime,
    RuntimeTraits,
    TextLookup,
    TextShapes,
)
from vllm_hpu_mm.runtimes.vllm_gaudi import common
from vllm_hpu_mm.runtimes.vllm_gaudi.config import COMMIT_SHORT, BucketingConfig, config_from_env, effective_strategy
from vllm_hpu_mm.runtimes.vllm_gaudi.file_strategy import bucket_file
from vllm_hpu_mm.runtimes.vllm_gaudi.runner import RunnerLookup

__all__ = ["PLANNED_FILE", "TRAITS", "VllmGaudi", "model_from_env"]

#: The name a planned bucket file goes by in the model (``serve`` writes it under its own path).
PLANNED_FILE = "planned from traffic"

TRAITS = RuntimeTraits(
    backend="hpu",
    reads=frozenset({GRAPH_RESERVED_MEM}),
    profiles_forward=False,
    fp32_softmax_default=True,
    fp32_softmax_note=f"vllm-gaudi turns fp32 softmax on for qwen2_5_vl (extension/features.py @ {COMMIT_SHORT}); "
    "VLLM_FP32_SOFTMAX overrides it",
    enforced_by="serve bounds each graph part by the buckets it exports instead: VLLM_BUCKETING_FROM_FILE, "
    "VLLM_MULTIMODAL_BUCKETS",
    none_buckets_fail_warmup=f"it takes len() of the bucket list, hpu_model_runner.py @{COMMIT_SHORT}",
    warms_all_graphs=True,
    # 72 buckets warmed in 49 s and 25 in 32 s (Llama-3.1-8B on Gaudi2): the two sample logs of vllm-gaudi's docs
    seconds_per_graph=(49 / 72, 32 / 25),
    seconds_source=f"the sample warm-up logs of vllm-gaudi's docs @{COMMIT_SHORT} (warm-up.md: 72 buckets in 49 s; "
    "performance_tuning.md: 25 in 32 s; Llama-3.1-8B on Gaudi2, buckets up to 1024 tokens): larger buckets take longer",
)


@dataclasses.dataclass(frozen=True)
class VllmGaudi:
    """vllm-gaudi with the user's bucketing variables (and bucket file, when one is named)."""

    bucketing: BucketingConfig = dataclasses.field(default_factory=BucketingConfig)
    name: Runtime = Runtime.VLLM_GAUDI
    traits: RuntimeTraits = TRAITS
    #: The bucket file is ours (planned from traffic, :meth:`with_text_buckets`), to be exported by ``serve``.
    planned: bool = False

    def text_shapes(self, shape: EngineShape) -> TextShapes:
        prefill = common.prompt_buckets(self.bucketing, shape)
        decode = tuple((bs, blocks) for bs, _, blocks in common.decode_buckets(self.bucketing, shape))
        source = f"vllm-gaudi's {effective_strategy(self.bucketing)} bucketing (modelled on @{COMMIT_SHORT})"
        return TextShapes(prefill, decode, source)

    def text_lookup(self, shape: EngineShape) -> TextLookup:
        return RunnerLookup(self.bucketing, shape)

    def with_text_buckets(self, prompt: tuple[Bucket, ...], decode: tuple[Bucket, ...]) -> VllmGaudi | None:
        """Its bucket file (``VLLM_BUCKETING_FROM_FILE``) holding exactly these, unless the user named a file or the
        buckets are not looked up as planned (bucketing off, merged prefill)."""
        cfg = self.bucketing
        if cfg.from_file is not None or not cfg.enable_bucketing or cfg.merged_prefill:
            return None
        text = bucket_file(prompt, decode)
        return VllmGaudi(dataclasses.replace(cfg, from_file=PLANNED_FILE, file_text=text), planned=True)


def model_from_env(env: Mapping[str, str], bucket_file_text: str | None = None) -> VllmGaudi:
    """vllm-gaudi as the user's variables configure it; ``bucket_file_text`` is the content of the file that
    ``VLLM_BUCKETING_FROM_FILE`` names (read by the caller: the model stays pure)."""
    cfg = config_from_env(env)
    if cfg.from_file is not None:
        cfg = dataclasses.replace(cfg, file_text=bucket_file_text)
    return VllmGaudi(cfg)

"""The model families vllm-gaudi serves (``vllm_gaudi/models/`` and vLLM's own classes it runs, @091bbadd), and
what the plan needs to know of each vision tower: where its sizes live in ``config.json``, its patch and merge, how
many tokens an image costs, and whether this project's 112-px processor applies.

Whether a tower is *bucketed* on Gaudi is the runtime's fact (vllm-gaudi's ``extension/bucketing/vision.py`` table,
modelled in ``runtimes/vllm_gaudi/vision.py``), read through the runtime model, not here.
"""

from __future__ import annotations

import dataclasses

__all__ = ["FAMILIES", "GENERIC", "Family", "family_of", "tower_modalities"]


@dataclasses.dataclass(frozen=True)
class Family:
    """One vision-language family. ``model_types``: the config ``model_type`` values (top level) it covers."""

    key: str
    display: str
    model_types: tuple[str, ...]
    #: Keys naming the tower's width, in preference order (Qwen2-VL's ``hidden_size`` is the *text* width).
    width_keys: tuple[str, ...] = ("hidden_size",)
    patch_size: int = 14
    spatial_merge_size: int = 2
    gated_mlp: bool = False
    norm_bias: bool = True
    patch_bias: bool = True
    #: Images are resized to a fixed square (``vision_config.image_size``) and cost a fixed number of tokens.
    fixed_size: bool = False
    #: The plugin's 112-px aligned processor and bucketed tower apply (only Qwen2.5-VL's class is ours).
    aligned_processor: bool = False
    #: Sections of config.json holding the language model, in preference order (flat when none is present).
    text_sections: tuple[str, ...] = ("text_config",)
    #: Sections of config.json holding the vision tower, in preference order.
    vision_sections: tuple[str, ...] = ("vision_config",)
    #: The modalities vLLM 0.32 marks the tower with (``_mark_tower_model(vllm_config, ...)`` in the family's model
    #: files): it builds no tower when every one's ``--limit-mm-per-prompt`` is 0. Where the family's model types
    #: differ (ovis / ovis2_5, kimi_vl / kimi_k25) the union, so that the tower is dropped only when vLLM drops it.
    tower_modalities: tuple[str, ...] = ("image",)


_IMAGE_VIDEO = ("image", "video")
FAMILIES: tuple[Family, ...] = (
    Family("qwen2_vl", "Qwen2-VL", ("qwen2_vl",), width_keys=("embed_dim",), tower_modalities=_IMAGE_VIDEO),
    Family("qwen2_5_vl", "Qwen2.5-VL", ("qwen2_5_vl",), gated_mlp=True, norm_bias=False, patch_bias=False,
           aligned_processor=True, tower_modalities=_IMAGE_VIDEO),
    Family("qwen3_vl", "Qwen3-VL", ("qwen3_vl", "qwen3_vl_moe"), patch_size=16, tower_modalities=_IMAGE_VIDEO),
    Family("qwen3_5", "Qwen3.5", ("qwen3_5", "qwen3_5_moe"), patch_size=16, tower_modalities=_IMAGE_VIDEO),
    Family("gemma3", "Gemma 3", ("gemma3",), spatial_merge_size=1, fixed_size=True),
    Family("gemma4", "Gemma 4", ("gemma4",), patch_size=16, spatial_merge_size=1, tower_modalities=_IMAGE_VIDEO),
    Family("llama4", "Llama 4", ("llama4",), fixed_size=True),
    Family("mistral3", "Mistral 3 / Pixtral", ("mistral3", "pixtral", "llava"), gated_mlp=True, norm_bias=False,
           patch_bias=False),
    Family("ovis", "Ovis", ("ovis", "ovis2_5", "ovis2.5"), text_sections=("llm_config",),
           vision_sections=("vit_config", "visual_tokenizer_config"), tower_modalities=_IMAGE_VIDEO),
    Family("ernie4_5_vl", "ERNIE 4.5-VL", ("ernie4_5_moe_vl", "ernie4_5_vl"), width_keys=("embed_dim", "hidden_size"),
           tower_modalities=_IMAGE_VIDEO),
    Family("kimi_k25", "Kimi K2.5", ("kimi_k25", "kimi_vl"), text_sections=("text_config",),
           tower_modalities=("image", "vision_chunk")),
    Family("dots_ocr", "dots.ocr", ("dots_ocr",), width_keys=("embed_dim", "hidden_size"), gated_mlp=True,
           norm_bias=False),
    Family("deepseek_ocr", "DeepSeek-OCR", ("deepseek_ocr", "deepseek_vl_v2"), patch_size=16, spatial_merge_size=1,
           text_sections=("language_config", "text_config")),
)  # fmt: skip
#: A vision tower of a family not listed: sized from the usual ViT keys; its modalities unknown (never dropped).
GENERIC = Family("generic", "a vision tower of an unlisted family", (), tower_modalities=())


def family_of(model_type: str, architecture: str = "") -> Family | None:
    """The family of a config's ``model_type`` (or its architecture name), or None for an unlisted one."""
    key = model_type.lower().replace("-", "_")
    for f in FAMILIES:
        if key in f.model_types:
            return f
    arch = architecture.lower()
    for f in FAMILIES:
        if any(t.replace("_", "") in arch for t in f.model_types):
            return f
    return None


def tower_modalities(key: str) -> tuple[str, ...]:
    """The modalities of the family ``key``'s tower as vLLM 0.32 marks it (:attr:`Family.tower_modalities`); () for
    an unlisted family, whose tower vLLM is then assumed to build."""
    return next((f.tower_modalities for f in FAMILIES if f.key == key), ())

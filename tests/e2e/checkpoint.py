"""A tiny, randomly initialised Qwen2.5-VL checkpoint for end-to-end tests on CPU.

Same architecture and special-token ids as the public Qwen2.5-VL checkpoints, so vLLM's stock Qwen2.5-VL code
path (processor, chat template, vision tower, M-RoPE) runs unchanged; only the sizes are small: text hidden 128,
2 layers, head_dim 64; vision depth 2, hidden 64, patch 14, merge 2, window 112.

The tokenizer is byte-level BPE built with ``tokenizers``: the 256 byte symbols, unreachable filler entries up to
id 151642, then the Qwen special tokens on their real ids (``<|endoftext|>`` 151643 ... ``<|image_pad|>`` 151655).
Weights are saved as bf16 safetensors (random, seeded), so the folder loads with or without ``--load-format dummy``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

VOCAB_SIZE = 151936
FIRST_SPECIAL_ID = 151643
#: The Qwen2 / Qwen2.5-VL special tokens, in id order from FIRST_SPECIAL_ID.
SPECIAL_TOKENS = (
    "<|endoftext|>",  # 151643
    "<|im_start|>",  # 151644
    "<|im_end|>",  # 151645
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",  # 151652
    "<|vision_end|>",  # 151653
    "<|vision_pad|>",
    "<|image_pad|>",  # 151655
    "<|video_pad|>",  # 151656
)
TOKEN_IDS = {tok: FIRST_SPECIAL_ID + i for i, tok in enumerate(SPECIAL_TOKENS)}

# Qwen2's pre-tokenizer split (contractions, letters, single digits, punctuation runs, newlines, spaces).
QWEN_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)

TEXT_HIDDEN = 128
VISION_HIDDEN = 64
SEED = 1234

# Our own Jinja template producing the Qwen2-VL chat format: a default system turn, images/videos as
# <|vision_start|><|image_pad|><|vision_end|> in place, and the assistant header as generation prompt.
CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}"
    "{{ message['content'] }}"
    "{%- else %}"
    "{%- for part in message['content'] %}"
    "{%- if part['type'] == 'image' or 'image' in part or 'image_url' in part %}"
    "{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif part['type'] == 'video' or 'video' in part %}"
    "{{ '<|vision_start|><|video_pad|><|vision_end|>' }}"
    "{%- elif 'text' in part %}"
    "{{ part['text'] }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- endif %}"
    "{{ '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{%- endif %}"
)


def _config() -> dict[str, Any]:
    import transformers

    text = {
        "model_type": "qwen2_5_vl_text",
        "hidden_size": TEXT_HIDDEN,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,  # head_dim = 128 / 2 = 64, a size the CPU attention supports
        "num_key_value_heads": 1,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6,
        "vocab_size": VOCAB_SIZE,
        "bos_token_id": TOKEN_IDS["<|endoftext|>"],
        "eos_token_id": TOKEN_IDS["<|im_end|>"],
        "tie_word_embeddings": True,
        "rope_theta": 1000000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]},  # sums to head_dim / 2
        "torch_dtype": "bfloat16",
    }
    vision = {
        "model_type": "qwen2_5_vl_vision",
        "depth": 2,
        "hidden_size": VISION_HIDDEN,
        "intermediate_size": 128,
        "num_heads": 2,
        "in_channels": 3,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "window_size": 112,
        "fullatt_block_indexes": [1],
        "out_hidden_size": TEXT_HIDDEN,
        "hidden_act": "silu",
        "tokens_per_second": 2,
    }
    return {
        "architectures": ["Qwen2_5_VLForConditionalGeneration"],
        "model_type": "qwen2_5_vl",
        "text_config": text,
        "vision_config": vision,
        # Flat copies of the text fields: older readers (and vLLM's own helpers) look at the top level.
        **{k: v for k, v in text.items() if k != "model_type"},
        "image_token_id": TOKEN_IDS["<|image_pad|>"],
        "video_token_id": TOKEN_IDS["<|video_pad|>"],
        "vision_start_token_id": TOKEN_IDS["<|vision_start|>"],
        "vision_end_token_id": TOKEN_IDS["<|vision_end|>"],
        "vision_token_id": TOKEN_IDS["<|vision_pad|>"],
        # Without it transformers 5 suspects a pre-5.0 Mistral tokenizer regex and warns on every load.
        "transformers_version": transformers.__version__,
    }


def _filler_tokens(count: int, alphabet: list[str]) -> list[str]:
    """``count`` distinct multi-symbol strings over the byte alphabet: valid to decode, never produced by BPE."""
    out: list[str] = []
    for a in alphabet:
        for b in alphabet:
            out.append(a + b)
            if len(out) == count:
                return out
    for a in alphabet:
        for b in alphabet:
            for c in alphabet:
                out.append(a + b + c)
                if len(out) == count:
                    return out
    raise AssertionError("alphabet too small")


def _write_tokenizer(directory: Path) -> None:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = sorted(ByteLevel.alphabet())
    vocab = {sym: i for i, sym in enumerate(alphabet)}
    for tok in _filler_tokens(FIRST_SPECIAL_ID - len(alphabet), alphabet):
        vocab[tok] = len(vocab)
    for tok, tid in TOKEN_IDS.items():
        vocab[tok] = tid
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    for tok, tid in TOKEN_IDS.items():  # added tokens already in the vocabulary keep their id
        assert tokenizer.token_to_id(tok) == tid, (tok, tokenizer.token_to_id(tok))
    tokenizer.save(str(directory / "tokenizer.json"))

    tokenizer_config = {
        "tokenizer_class": "Qwen2Tokenizer",
        "model_max_length": 32768,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "bos_token": None,
        "unk_token": None,
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
        "errors": "replace",
        "split_special_tokens": False,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))
    (directory / "chat_template.jinja").write_text(CHAT_TEMPLATE)


def _write_processor_configs(directory: Path) -> None:
    image = {
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen2_5_VLProcessor",
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "rescale_factor": 1 / 255,
        "resample": 3,
        # The public Qwen2.5-VL limits; the plugin tightens max_pixels to the largest bucket under `shrink`.
        "min_pixels": 3136,
        "max_pixels": 12845056,
        "size": {"shortest_edge": 3136, "longest_edge": 12845056},
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
    }
    (directory / "preprocessor_config.json").write_text(json.dumps(image, indent=2))
    generation = {"bos_token_id": TOKEN_IDS["<|endoftext|>"], "eos_token_id": [TOKEN_IDS["<|im_end|>"]]}
    (directory / "generation_config.json").write_text(json.dumps(generation, indent=2))


def _write_weights(directory: Path) -> None:
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    torch.manual_seed(SEED)
    config = Qwen2_5_VLConfig.from_pretrained(directory)
    model = Qwen2_5_VLForConditionalGeneration(config)  # type: ignore[no-untyped-call]
    model.to(dtype=torch.bfloat16)  # type: ignore[call-arg]
    model.save_pretrained(directory, safe_serialization=True)
    # save_pretrained rewrites config.json; put ours back so the file stays the documented one.
    (directory / "config.json").write_text(json.dumps(_config(), indent=2))


def build_tiny_qwen25vl(directory: Path, *, weights: bool = True) -> Path:
    """Write the tiny checkpoint into ``directory / "tiny-qwen25vl"`` (reused if already complete) and return it.

    ``weights=False`` skips the safetensors (then serve with ``--load-format dummy``). Written into a temporary
    folder and renamed, so concurrent or interrupted builds never leave a half-written checkpoint behind.
    """
    target = Path(directory) / "tiny-qwen25vl"
    marker = target / ".complete"
    if marker.exists() and (not weights or any(target.glob("*.safetensors"))):
        return target
    Path(directory).mkdir(parents=True, exist_ok=True)
    if target.exists():  # incomplete, or built without the weights now asked for
        shutil.rmtree(target, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=".tiny-qwen25vl-", dir=directory))
    (staging / "config.json").write_text(json.dumps(_config(), indent=2))
    _write_tokenizer(staging)
    _write_processor_configs(staging)
    if weights:
        _write_weights(staging)
    (staging / ".complete").write_text("ok\n")
    try:
        os.replace(staging, target)
    except OSError:  # another build got there first (target not empty): use it
        shutil.rmtree(staging, ignore_errors=True)
    return target


if __name__ == "__main__":
    import sys

    print(build_tiny_qwen25vl(Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir())))

"""A random tiny Qwen3.5 (vision tower with 16-pixel patches, merge 2) built from a config, no download.

verl's Qwen3.5 scripts set ``data.image_patch_size=16``; this model stands in for their Qwen3.5-2B: its image
processor has the real model's patch, merge and temporal sizes, with a small pixel budget (4 to 64 vision
tokens per image) so toy images stay cheap. The language model alternates linear and full attention as
Qwen3.5's does, at toy width.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase, Qwen3_5Config, Qwen3_5ForConditionalGeneration
from transformers.models.qwen2_vl import Qwen2VLImageProcessorPil

PATCH, MERGE = 16, 2
#: The vision-special token names the config needs an id for, as the Qwen-VL tokenizers spell them.
VISION_TOKENS = {
    "image_token_id": "<|image_pad|>",
    "vision_start_token_id": "<|vision_start|>",
    "vision_end_token_id": "<|vision_end|>",
}


def build_image_processor() -> Qwen2VLImageProcessorPil:
    step = PATCH * MERGE
    return Qwen2VLImageProcessorPil(
        patch_size=PATCH, merge_size=MERGE, temporal_patch_size=2, min_pixels=4 * step * step,
        max_pixels=64 * step * step,
    )


def build_qwen3_5(tokenizer: PreTrainedTokenizerBase, seed: int = 0) -> Qwen3_5ForConditionalGeneration:
    ids = {name: tokenizer.convert_tokens_to_ids(token) for name, token in VISION_TOKENS.items()}
    config = Qwen3_5Config(
        text_config={
            "vocab_size": len(tokenizer), "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "layer_types": ["linear_attention", "full_attention"], "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 16, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
            "linear_key_head_dim": 16, "linear_value_head_dim": 16, "max_position_embeddings": 512,
            "rope_parameters": {
                "rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                "mrope_section": [2, 1, 1], "mrope_interleaved": True,
            },
            "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id,
        },
        vision_config={
            "depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "patch_size": PATCH,
            "spatial_merge_size": MERGE, "temporal_patch_size": 2, "out_hidden_size": 64,
            "num_position_embeddings": 64,
        },
        video_token_id=ids["image_token_id"],
        tie_word_embeddings=True,
        **ids,
    )
    torch.manual_seed(seed)
    return Qwen3_5ForConditionalGeneration(config).eval()


def save_tiny_qwen3_5(directory: Path, tokenizer: PreTrainedTokenizerBase) -> Path:
    """A loadable model dir: weights, ``tokenizer`` and ``preprocessor_config.json``."""
    build_qwen3_5(tokenizer).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    build_image_processor().save_pretrained(directory)
    return directory

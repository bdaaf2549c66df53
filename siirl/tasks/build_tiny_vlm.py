"""Build the embedded VLM: a tiny Qwen2-VL warmed up by SFT on reading a digit off an image.

The model has Qwen2-VL's real architecture (vision tower, patch merger, 3-D mrope) at toy size; its image
processor (patch 7, merge 2) turns a 28x28 image into 16 patches and 4 text tokens. Training stops as soon
as greedy accuracy on the val images enters a target band, leaving GRPO room to improve it. The result is
bit-for-bit reproducible from the seed (single thread, deterministic algorithms).

CLI: ``python -m siirl.tasks.build_tiny_vlm --out siirl/assets/tiny_qwen2_vl --seed 0``
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import (
    GenerationConfig,
    PreTrainedTokenizerBase,
    Qwen2VLConfig,
    Qwen2VLForConditionalGeneration,
    Qwen2VLImageProcessorPil,
)

from siirl.tasks import digit_images
from siirl.tasks.build_tiny_model import BackboneShape, answer_examples, builder_args, save, sft_until_band
from siirl.tasks.tiny_tokenizer import IMAGE_PAD, VISION_END, VISION_START, build_tokenizer
from siirl.tasks.vision_inputs import encode_image_prompts, greedy_image_accuracy


@dataclass
class VlmWarmupConfig(BackboneShape):
    """Vision tower, image processing and SFT schedule on the text model's shape; the defaults produce the
    shipped model."""

    # Split of the rotary frequencies (head_dim / 2 = 16) between the temporal, height and width positions.
    mrope_section: tuple[int, int, int] = (4, 6, 6)
    vision_depth: int = 2
    vision_dim: int = 64
    vision_heads: int = 4
    vision_mlp_ratio: int = 2
    patch_size: int = 7
    merge_size: int = 2
    # 28x28 images pass unresized; larger ones are scaled down to at most 112x112 pixels (64 tokens).
    min_pixels: int = 28 * 28
    max_pixels: int = 112 * 112
    # 2e-3 stalls for 100+ steps at ~0.1 (one digit for every image); at 1e-3 accuracy climbs steadily.
    lr: float = 1e-3
    batch_size: int = 64
    eval_every: int = 5
    max_steps: int = 2000
    # Stop where further training still climbs fast (SFT goes on from ~0.25 to ~0.6 in 200 more steps).
    target_low: float = 0.25
    target_high: float = 0.35
    n_train: int = digit_images.DEFAULT_N_TRAIN
    n_val: int = digit_images.DEFAULT_N_VAL


def build_image_processor(cfg: VlmWarmupConfig) -> Qwen2VLImageProcessorPil:
    """Qwen2-VL's image processor on the PIL backend (no torchvision), sized for the tiny vision tower."""
    return Qwen2VLImageProcessorPil(
        patch_size=cfg.patch_size,
        merge_size=cfg.merge_size,
        temporal_patch_size=2,
        min_pixels=cfg.min_pixels,
        max_pixels=cfg.max_pixels,
    )


def build_model(tokenizer: PreTrainedTokenizerBase, cfg: VlmWarmupConfig) -> Qwen2VLForConditionalGeneration:
    """A freshly initialised tiny Qwen2-VL whose special-token ids match the tokenizer."""
    vision_start, image_pad, vision_end = tokenizer.convert_tokens_to_ids(
        [VISION_START, IMAGE_PAD, VISION_END]
    )
    special = {
        "bos_token_id": tokenizer.eos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    config = Qwen2VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": cfg.hidden_size,
            "intermediate_size": cfg.intermediate_size,
            "num_hidden_layers": cfg.num_layers,
            "num_attention_heads": cfg.num_heads,
            "num_key_value_heads": cfg.num_kv_heads,
            "max_position_embeddings": tokenizer.model_max_length,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": list(cfg.mrope_section),
            },
            **special,
        },
        vision_config={
            "depth": cfg.vision_depth,
            "embed_dim": cfg.vision_dim,
            "hidden_size": cfg.hidden_size,
            "num_heads": cfg.vision_heads,
            "mlp_ratio": cfg.vision_mlp_ratio,
            "patch_size": cfg.patch_size,
            "spatial_merge_size": cfg.merge_size,
            "temporal_patch_size": 2,
        },
        image_token_id=image_pad,
        # No video support: the tokenizer has no video token, so the image pad stands in for it.
        video_token_id=image_pad,
        vision_start_token_id=vision_start,
        vision_end_token_id=vision_end,
        tie_word_embeddings=True,
    )
    model = Qwen2VLForConditionalGeneration(config)
    model.generation_config = GenerationConfig(**special, max_new_tokens=4)
    return model


@dataclass
class DigitRows:
    """Prompt contents, images and answers of one split, rendered from its examples."""

    contents: list[str]
    images: list[list]
    answers: list[str]

    @classmethod
    def of(cls, examples: Sequence[digit_images.DigitExample]) -> DigitRows:
        images = [[digit_images.render(e)] for e in examples]
        return cls([digit_images.PROMPT] * len(examples), images, [str(e.digit) for e in examples])


def warm_up(seed: int, cfg: VlmWarmupConfig):
    """Run SFT until greedy val accuracy is inside the target band.

    Returns (model, tokenizer, image_processor, step, accuracy).
    """
    torch.manual_seed(seed)
    tokenizer = build_tokenizer(vision=True)
    image_processor = build_image_processor(cfg)
    model = build_model(tokenizer, cfg)
    train_examples, val_examples = digit_images.split_examples(seed, cfg.n_train, cfg.n_val)
    train, val = DigitRows.of(train_examples), DigitRows.of(val_examples)
    step, acc = sft_until_band(
        model,
        cfg,
        seed,
        len(train.answers),
        lambda idx: sft_loss(model, tokenizer, image_processor, train, idx),
        lambda: greedy_image_accuracy(
            model, tokenizer, image_processor, val.contents, val.images, val.answers
        ),
    )
    return model, tokenizer, image_processor, step, acc


def sft_loss(model, tokenizer, image_processor, rows: DigitRows, idx: Sequence[int]) -> torch.Tensor:
    """Answer-only cross-entropy of rows ``idx``; ``mm_token_type_ids`` gives the model its 3-D positions."""
    prompts = encode_image_prompts(
        tokenizer, image_processor, [rows.contents[i] for i in idx], [rows.images[i] for i in idx]
    )
    ids, labels = answer_examples(tokenizer, prompts.input_ids, [rows.answers[i] for i in idx])
    return model(
        input_ids=ids,
        attention_mask=(ids != tokenizer.pad_token_id).long(),
        pixel_values=prompts.pixel_values,
        image_grid_thw=prompts.image_grid_thw,
        mm_token_type_ids=(ids == model.config.image_token_id).int(),
        labels=labels,
    ).loss


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="SFT warm-up of the embedded tiny Qwen2-VL on digit images.")
    parser.add_argument(
        "--out", required=True, help="output directory for model, tokenizer and image processor"
    )
    parser.add_argument("--data-out", default=None, help="also write the task parquet files here")
    args = builder_args(parser, argv)
    cfg = VlmWarmupConfig()
    began = time.perf_counter()
    model, tokenizer, image_processor, step, acc = warm_up(args.seed, cfg)
    image_processor.save_pretrained(args.out)
    save(model, tokenizer, args.out)
    print(
        f"saved to {args.out}: {model.num_parameters()} params, stopped at step {step}, val acc {acc:.4f} "
        f"on {cfg.n_val} images, {time.perf_counter() - began:.0f} s"
    )
    if args.data_out:
        train_path, val_path = digit_images.generate(args.data_out, args.seed, cfg.n_train, cfg.n_val)
        print(f"wrote {train_path} and {val_path}")


if __name__ == "__main__":
    main()

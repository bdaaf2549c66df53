"""A random tiny Qwen2-VL saved as a Hugging Face dir, and verl-format image rows for it.

Patch 7 and merge 2: a 28x28 image is 16 patches and 4 text tokens. The tokenizer is one token per
character plus the Qwen-VL vision specials and a ``[U] ... [A]`` chat template.
"""

from __future__ import annotations

import io
import string
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2VLConfig, Qwen2VLForConditionalGeneration
from transformers.models.qwen2_vl import Qwen2VLImageProcessorPil

SPECIALS = ["<pad>", "<eos>", "<|vision_start|>", "<|image_pad|>", "<|vision_end|>", "[U]", "[A]"]
TEMPLATE = (
    "{% for m in messages %}[U]{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}[A]{% endif %}"
)
TOKENS_PER_28PX_IMAGE = 4


def build_vlm_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {t: i for i, t in enumerate(SPECIALS + list(string.ascii_letters + string.digits + " ?<>"))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    core.decoder = decoders.Fuse()
    core.add_special_tokens(SPECIALS)
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<pad>")
    tok.chat_template = TEMPLATE
    return tok


def build_vlm(tokenizer: PreTrainedTokenizerFast, seed: int = 0) -> Qwen2VLForConditionalGeneration:
    ids = tokenizer.convert_tokens_to_ids
    config = Qwen2VLConfig(
        text_config={
            "vocab_size": len(tokenizer), "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
            "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
        },
        vision_config={
            "depth": 1, "embed_dim": 32, "hidden_size": 64, "num_heads": 2, "mlp_ratio": 2, "patch_size": 7,
            "spatial_merge_size": 2, "temporal_patch_size": 2, "in_channels": 3,
        },
        image_token_id=ids("<|image_pad|>"), video_token_id=ids("<pad>"),
        vision_start_token_id=ids("<|vision_start|>"), vision_end_token_id=ids("<|vision_end|>"),
        bos_token_id=None, eos_token_id=ids("<eos>"), pad_token_id=ids("<pad>"), tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    return Qwen2VLForConditionalGeneration(config).eval()


def build_image_processor() -> Qwen2VLImageProcessorPil:
    return Qwen2VLImageProcessorPil(
        patch_size=7, merge_size=2, temporal_patch_size=2, min_pixels=28 * 28, max_pixels=56 * 56
    )


def save_tiny_vlm(directory: Path) -> Path:
    """A loadable model dir: weights, tokenizer and ``preprocessor_config.json``."""
    tokenizer = build_vlm_tokenizer()
    build_vlm(tokenizer).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    build_image_processor().save_pretrained(directory)
    return directory


def png_bytes(seed: int, size: int = 28) -> bytes:
    rng = np.random.default_rng(seed)
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


IMAGE_ROW_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("images", pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", pa.struct([("index", pa.int64())])),
    ]
)


def image_row(i: int, images: list[dict], content: str = "<image>Digit?") -> dict:
    return {
        "data_source": "digits",
        "prompt": [{"role": "user", "content": content}],
        "images": images,
        "reward_model": {"style": "rule", "ground_truth": str(i % 10)},
        "extra_info": {"index": i},
    }


def write_image_rows(path: Path, rows: list[dict], schema: pa.Schema = IMAGE_ROW_SCHEMA) -> str:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return str(path)


#: ``env.name`` of :class:`LookAgain` (loaded as ``module:Class``, in-process with ``env.num_workers=0``).
LOOK_AGAIN = "vlm_testutils:LookAgain"


class LookAgain:
    """A multi-turn environment for the test tokenizer: every turn is answered with "Look again?" until
    ``steps`` turns have passed."""

    def __init__(self, steps: int = 2) -> None:
        self.steps, self.turn = steps, 0

    def reset(self, task, seed=None):
        from siirl.environment import StepResult

        self.turn = 0
        return StepResult("")

    def step(self, action):
        from siirl.environment import StepResult

        self.turn += 1
        return StepResult("Look again?", done=self.turn >= self.steps)

    def close(self) -> None:
        """Nothing to release."""

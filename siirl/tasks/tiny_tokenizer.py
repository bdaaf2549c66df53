"""A byte-level, character-granular Qwen2 tokenizer for the embedded tiny model.

It is a genuine ``Qwen2Tokenizer`` (byte-level BPE) whose vocabulary is the 256 byte symbols plus a few
special tokens and which has no merges, so every byte is one token: digits and operators tokenize one
character at a time and any UTF-8 text still round-trips. Using the Qwen2 class matters: ``AutoTokenizer``
rebuilds the pipeline of the class named by the model type, so a custom pipeline would be silently replaced
when loading from a Qwen2 checkpoint. The chat template lets the trainer render prompts through
``apply_chat_template`` exactly as for full-size chat models.

The vision variant (``build_tokenizer(vision=True)``, for the embedded VLM) adds Qwen2-VL's vision special
tokens after the byte symbols, so text keeps the same ids, and a template that renders list-valued content
the way Qwen2-VL's does: an image part becomes ``<|vision_start|><|image_pad|><|vision_end|>``. String
content passes through unchanged, ``<image>`` placeholders included, for the data loader to expand.
"""

from __future__ import annotations

from tokenizers import pre_tokenizers
from transformers import Qwen2Tokenizer

PAD_TOKEN = "<pad>"
EOS_TOKEN = "<|endoftext|>"
ROLE_TOKENS = {"system": "<|system|>", "user": "<|user|>", "assistant": "<|assistant|>"}
SPECIAL_TOKENS = [PAD_TOKEN, EOS_TOKEN, *ROLE_TOKENS.values()]

VISION_START, IMAGE_PAD, VISION_END = "<|vision_start|>", "<|image_pad|>", "<|vision_end|>"
VISION_TOKENS = [VISION_START, IMAGE_PAD, VISION_END]


def _chat_template(content: str) -> str:
    """Each message becomes "<|role|>content"; assistant turns end with EOS so SFT targets teach stopping."""
    return (
        "{% for message in messages %}"
        f"{{% if message['role'] == 'system' %}}<|system|>{content}"
        f"{{% elif message['role'] == 'user' %}}<|user|>{content}"
        f"{{% elif message['role'] == 'assistant' %}}<|assistant|>{content}<|endoftext|>"
        "{% else %}{{ raise_exception('unknown chat role: ' + message['role']) }}"
        "{% endif %}"
        "{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )


CHAT_TEMPLATE = _chat_template("{{ message['content'] }}")
VISION_CHAT_TEMPLATE = _chat_template(
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    f"{{% if part['type'] == 'image' %}}{VISION_START}{IMAGE_PAD}{VISION_END}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}"
    "{% else %}{{ raise_exception('unsupported content part: ' + part['type']) }}"
    "{% endif %}{% endfor %}{% endif %}"
)


def build_tokenizer(vision: bool = False) -> Qwen2Tokenizer:
    """Build the tokenizer from scratch (no download): special tokens, the 256 byte symbols, then (with
    ``vision``) the vision tokens."""
    byte_symbols = sorted(pre_tokenizers.ByteLevel.alphabet())
    extra = VISION_TOKENS if vision else []
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + byte_symbols + extra)}
    tokenizer = Qwen2Tokenizer(
        vocab=vocab,
        merges=[],
        unk_token=EOS_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        additional_special_tokens=list(ROLE_TOKENS.values()) + extra,
        clean_up_tokenization_spaces=False,
        model_max_length=512,
    )
    tokenizer.chat_template = VISION_CHAT_TEMPLATE if vision else CHAT_TEMPLATE
    return tokenizer

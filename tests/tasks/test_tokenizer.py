"""The embedded tokenizer: character-level round trip, special tokens and the chat template."""

import pytest
from transformers import AutoTokenizer

from siirl.embedded_assets import default_model_path
from siirl.tasks.evaluation import encode_prompt
from siirl.tasks.tiny_tokenizer import build_tokenizer


@pytest.fixture(scope="module")
def shipped():
    return AutoTokenizer.from_pretrained(default_model_path(), local_files_only=True)


def test_shipped_matches_builder(shipped):
    assert shipped.get_vocab() == build_tokenizer().get_vocab()
    assert shipped.chat_template == build_tokenizer().chat_template


@pytest.mark.parametrize("text", ["12+34=", "99+99=198", "0", "hello world (1.5*2)/3-4", "a  b\n\tc"])
def test_ascii_round_trip_one_token_per_character(shipped, text):
    ids = shipped(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text)
    assert shipped.decode(ids) == text
    assert ids == build_tokenizer()(text, add_special_tokens=False)["input_ids"]


def test_any_utf8_text_round_trips(shipped):
    text = "Grüße, 世界! √2 ≈ 1.414"
    assert shipped.decode(shipped(text, add_special_tokens=False)["input_ids"]) == text


def test_special_tokens(shipped):
    assert shipped.pad_token == "<pad>" and shipped.eos_token == "<|endoftext|>"
    assert shipped.pad_token_id != shipped.eos_token_id
    ids = shipped("12", add_special_tokens=False)["input_ids"] + [shipped.eos_token_id, shipped.pad_token_id]
    assert shipped.decode(ids, skip_special_tokens=True) == "12"
    roles = ["<|system|>", "<|user|>", "<|assistant|>"]
    assert shipped.convert_ids_to_tokens(shipped.convert_tokens_to_ids(roles)) == roles
    assert shipped("<|user|>", add_special_tokens=False)["input_ids"] == [
        shipped.convert_tokens_to_ids("<|user|>")
    ]


def test_chat_template_renders_prompt(shipped):
    messages = [{"role": "user", "content": "12+34="}]
    text = shipped.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == "<|user|>12+34=<|assistant|>"
    ids = encode_prompt(shipped, "12+34=")
    assert shipped.convert_ids_to_tokens(ids) == ["<|user|>", "1", "2", "+", "3", "4", "=", "<|assistant|>"]
    assert shipped.decode(ids, skip_special_tokens=True) == "12+34="


def test_chat_template_full_conversation(shipped):
    messages = [
        {"role": "system", "content": "add"},
        {"role": "user", "content": "1+2="},
        {"role": "assistant", "content": "3"},
    ]
    text = shipped.apply_chat_template(messages, tokenize=False)
    assert text == "<|system|>add<|user|>1+2=<|assistant|>3<|endoftext|>"


def test_chat_template_rejects_unknown_role(shipped):
    with pytest.raises(Exception, match="unknown chat role: tool"):
        shipped.apply_chat_template([{"role": "tool", "content": "x"}], tokenize=False)


def test_vision_variant_keeps_text_ids_and_adds_vision_tokens():
    text, vision = build_tokenizer(), build_tokenizer(vision=True)
    assert {t: i for t, i in vision.get_vocab().items() if i < len(text)} == text.get_vocab()
    block = "<|vision_start|><|image_pad|><|vision_end|>"
    assert vision(block, add_special_tokens=False)["input_ids"] == [len(text), len(text) + 1, len(text) + 2]
    assert (
        vision.decode(vision(block + "7", add_special_tokens=False)["input_ids"], skip_special_tokens=True)
        == "7"
    )


def test_vision_chat_template_renders_images_like_qwen2_vl():
    tok = build_tokenizer(vision=True)
    parts = [{"type": "image"}, {"type": "text", "text": "Digit?"}]
    rendered = tok.apply_chat_template(
        [{"role": "user", "content": parts}], add_generation_prompt=True, tokenize=False
    )
    assert rendered == "<|user|><|vision_start|><|image_pad|><|vision_end|>Digit?<|assistant|>"
    placeholder = [{"role": "user", "content": "<image>Digit?"}]
    assert tok.apply_chat_template(placeholder, tokenize=False) == "<|user|><image>Digit?"
    with pytest.raises(Exception, match="unsupported content part: video"):
        tok.apply_chat_template([{"role": "user", "content": [{"type": "video"}]}], tokenize=False)

"""Tiny Qwen2 model dirs, rollout configs and prompt batches for the accelerator tests."""

from __future__ import annotations

import socket
from pathlib import Path

import torch
from tensordict import TensorDict
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from siirl.params.model import ModelConfig, RolloutConfig, ValSamplingConfig

PAD, EOS, VOCAB = 0, 1, 24


def tiny_qwen2_config(**overrides) -> Qwen2Config:
    """2 layers, 4 query heads of 32 dims (the smallest head vLLM's CPU attention takes) over 2 KV heads (GQA),
    tied embeddings; token 0 pads, token 1 ends."""
    fields = {
        "vocab_size": VOCAB, "hidden_size": 128, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
        "tie_word_embeddings": True, "bos_token_id": EOS, "eos_token_id": EOS, "pad_token_id": PAD,
    }
    return Qwen2Config(**{**fields, **overrides})


def save_tiny_model(path: Path, **overrides) -> Path:
    """Wide initialisation and a larger EOS embedding (tied head): greedy samples vary and some end early;
    ``overrides``: config fields (a larger model)."""
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(tiny_qwen2_config(**{"initializer_range": 0.5, **overrides}))
    with torch.no_grad():
        model.model.embed_tokens.weight[EOS] *= 3.0
    model.generation_config = GenerationConfig(eos_token_id=EOS, pad_token_id=PAD, bos_token_id=EOS)
    model.save_pretrained(path)
    vocab = {"<pad>": PAD, "<eos>": EOS, **{f"w{i}": i for i in range(2, VOCAB)}}
    backend = Tokenizer(WordLevel(vocab, unk_token="<pad>"))
    backend.pre_tokenizer = WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>",
                            unk_token="<pad>").save_pretrained(path)
    return path


def model_cfg(path: Path, **overrides):
    return ModelConfig(path=str(path), **overrides)


def rollout_cfg(name: str, **overrides):
    val = overrides.pop("val_kwargs", {})
    return RolloutConfig(name=name, val_kwargs=ValSamplingConfig(**val), **overrides)


def prompt_batch(seed: int = 0, rows: int = 3, width: int = 5) -> TensorDict:
    """Left-padded prompts, row r holding ``width - r`` tokens (at least 1)."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.full((rows, width), PAD, dtype=torch.long)
    mask = torch.zeros(rows, width, dtype=torch.long)
    for r in range(rows):
        length = max(width - r, 1)
        ids[r, width - length:] = torch.randint(2, VOCAB, (length,), generator=gen)
        mask[r, width - length:] = 1
    return TensorDict({"input_ids": ids, "attention_mask": mask}, batch_size=[rows])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]

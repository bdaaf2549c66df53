"""Tiny Qwen2 model dirs, synthetic RL batches and process-group helpers for the engine tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from siirl.params.model import (
    ActorConfig,
    CriticConfig,
    FSDPModelConfig,
    ModelConfig,
    OptimConfig,
    RolloutConfig,
    ValSamplingConfig,
)

PAD, EOS = 0, 1
VOCAB = 32


def save_tiny_model(
    path: Path, *, with_tokenizer: bool = True, seed: int = 0, hidden: int = 32, heads: int = 2, kv_heads: int = 2
) -> Path:
    """A randomly initialised 2-layer Qwen2 (vocab 32) saved as an HF dir; token 0 pads, token 1 ends."""
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        bos_token_id=EOS,
        eos_token_id=EOS,
        pad_token_id=PAD,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=EOS, pad_token_id=PAD, bos_token_id=EOS)
    model.save_pretrained(path)
    if with_tokenizer:
        vocab = {"<pad>": PAD, "<eos>": EOS, **{f"w{i}": i for i in range(2, VOCAB)}}
        backend = Tokenizer(WordLevel(vocab, unk_token="<pad>"))
        backend.pre_tokenizer = WhitespaceSplit()
        tokenizer = PreTrainedTokenizerFast(
            tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>", unk_token="<pad>"
        )
        tokenizer.save_pretrained(path)
    return path


def model_config(path: Path, **overrides: Any) -> Any:
    return ModelConfig(path=str(path), **overrides)


def actor_config(**overrides: Any) -> Any:
    optim = OptimConfig(lr=overrides.pop("lr", 1e-2))
    return ActorConfig(optim=optim, **overrides)


def critic_config(path: Path, **overrides: Any) -> Any:
    optim = OptimConfig(lr=overrides.pop("lr", 1e-2))
    return CriticConfig(model=FSDPModelConfig(path=str(path)), optim=optim, **overrides)


def make_batch(
    rows: int, prompt_len: int = 6, response_len: int = 8, seed: int = 0, min_prompt: int = 1
) -> TensorDict:
    """Left-padded prompts, right-padded responses of random lengths, PPO fields filled with noise."""
    gen = torch.Generator().manual_seed(seed)
    width = prompt_len + response_len
    input_ids = torch.full((rows, width), PAD, dtype=torch.long)
    attention_mask = torch.zeros(rows, width, dtype=torch.long)
    for r in range(rows):
        p = int(torch.randint(min_prompt, prompt_len + 1, (1,), generator=gen))
        n = int(torch.randint(1, response_len + 1, (1,), generator=gen))
        input_ids[r, prompt_len - p : prompt_len + n] = torch.randint(2, VOCAB, (p + n,), generator=gen)
        attention_mask[r, prompt_len - p : prompt_len + n] = 1
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    response_mask = attention_mask[:, prompt_len:].clone()
    return TensorDict(
        {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            "prompts": input_ids[:, :prompt_len].clone(),
            "responses": input_ids[:, prompt_len:].clone(),
            "response_mask": response_mask,
            "old_log_probs": -3.0 + 0.3 * torch.randn(rows, response_len, generator=gen),
            "ref_log_prob": -3.0 + 0.3 * torch.randn(rows, response_len, generator=gen),
            "advantages": torch.randn(rows, response_len, generator=gen),
            "values": 0.1 * torch.randn(rows, response_len, generator=gen),
            "returns": torch.randn(rows, response_len, generator=gen),
        },
        batch_size=[rows],
    )


def single_sample_hf_engine(model_path: str, max_response_length: int) -> tuple[Any, RolloutConfig, Any]:
    """(tokenizer, rollout config with groups of 2, an hf engine sampling one response per prompt): the
    inner engine that the multi-turn and environment rollouts drive one sample at a time."""
    from siirl.engine.rollout import make_rollout_engine
    from siirl.engine.rollout.env_session import single_sample_config
    from siirl.engine.workers.model_loading import load_tokenizer

    model = ModelConfig(path=model_path)
    tokenizer = load_tokenizer(model)
    rollout = RolloutConfig(n=2, val_kwargs=ValSamplingConfig(n=2, do_sample=False))
    inner = make_rollout_engine("hf", model_cfg=model, rollout_cfg=single_sample_config(rollout), backend="cpu",
                                max_response_length=max_response_length, tokenizer=tokenizer)
    return tokenizer, rollout, inner

"""Prompt encoding and greedy exact-match evaluation for the arithmetic task.

Shared by the SFT warm-up script and the tests so both measure accuracy the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase


def render_prompt(tokenizer: PreTrainedTokenizerBase, content: str) -> str:
    """A single-turn user prompt rendered by the chat template, ready for generation."""
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
    )


def encode_prompt(tokenizer: PreTrainedTokenizerBase, content: str) -> list[int]:
    """Token ids of ``render_prompt``."""
    return tokenizer(render_prompt(tokenizer, content), add_special_tokens=False)["input_ids"]


def left_pad(
    sequences: Sequence[Sequence[int]], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Left-pad to a batch; returns (input_ids, attention_mask, position_ids) with positions from 0."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, seq in enumerate(sequences):
        ids[i, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
        mask[i, width - len(seq) :] = 1
    return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


def _text_positions(ids: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"position_ids": (mask.cumsum(-1) - 1).clamp(min=0)}


@torch.no_grad()
def greedy_generate(
    model: PreTrainedModel,
    prompts: Sequence[Sequence[int]],
    eos_id: int,
    pad_id: int,
    max_new_tokens: int = 5,
    step_inputs: Callable[[torch.Tensor, torch.Tensor], dict[str, Any]] | None = None,
    suppress: Sequence[int] = (),
) -> list[list[int]]:
    """Greedy decoding without a KV cache (prompts here are ~10 tokens), stopping each row at EOS.

    Kept independent of ``generate`` so the warm-up's stopping rule does not drift with library versions.
    ``step_inputs(ids, mask)`` gives the model's other inputs at each step; by default the 1-D positions
    of the left-padded rows (a VLM passes its images instead and derives its 3-D positions itself).
    Tokens in ``suppress`` are never chosen (a VLM must not emit image tokens it has no image for).
    """
    step_inputs = step_inputs or _text_positions
    ids, mask, _ = left_pad(prompts, pad_id)
    finished = torch.zeros(len(prompts), dtype=torch.bool)
    outputs: list[list[int]] = [[] for _ in prompts]
    for _ in range(max_new_tokens):
        inputs = step_inputs(ids, mask)
        logits = model(input_ids=ids, attention_mask=mask, use_cache=False, **inputs).logits[:, -1]
        logits[:, list(suppress)] = -torch.inf
        nxt = logits.argmax(-1)
        for i in torch.nonzero(~finished).flatten().tolist():
            outputs[i].append(int(nxt[i]))
        finished |= nxt == eos_id
        if bool(finished.all()):
            break
        ids = torch.cat([ids, nxt.unsqueeze(-1)], dim=-1)
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
    return outputs


def greedy_accuracy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    contents: Sequence[str],
    answers: Sequence[str],
    batch_size: int = 256,
    max_new_tokens: int = 5,
) -> float:
    """Fraction of prompts whose greedy completion (special tokens dropped, stripped) equals the answer."""
    if len(contents) != len(answers):
        raise ValueError(f"got {len(contents)} prompts but {len(answers)} answers")
    if not contents:
        raise ValueError("greedy_accuracy needs at least one prompt")
    was_training = model.training
    model.eval()
    correct = 0
    for start in range(0, len(contents), batch_size):
        chunk = contents[start : start + batch_size]
        prompts = [encode_prompt(tokenizer, c) for c in chunk]
        outs = greedy_generate(model, prompts, tokenizer.eos_token_id, tokenizer.pad_token_id, max_new_tokens)
        correct += count_exact(tokenizer, outs, answers[start : start + batch_size])
    model.train(was_training)
    return correct / len(contents)


def count_exact(
    tokenizer: PreTrainedTokenizerBase, outputs: Sequence[Sequence[int]], answers: Sequence[str]
) -> int:
    """How many completions (special tokens dropped, stripped) equal their answer."""
    return sum(
        tokenizer.decode(out, skip_special_tokens=True).strip() == a for out, a in zip(outputs, answers)
    )

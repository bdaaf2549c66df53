"""The reward-model builder's data: wrong answers are wrong, held-out pairs stay out of training, and the
SFT loss covers exactly the answer and its EOS."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F
from transformers import Qwen2ForSequenceClassification

from siirl.embedded_assets import default_model_path
from siirl.tasks.arithmetic import NUM_PAIRS
from siirl.tasks.build_tiny_reward_model import (
    MISTAKE_FAMILIES,
    TRAIN_WEIGHTS,
    answer_lm_loss,
    encode,
    training_pairs,
    wrong_answer,
)
from siirl.tasks.tiny_tokenizer import build_tokenizer


@pytest.mark.parametrize("kind", [*MISTAKE_FAMILIES, None])
def test_wrong_answers_are_wrong_and_seeded(kind):
    pairs = [(a, b) for a in (0, 1, 9, 50, 99) for b in (0, 1, 9, 50, 99)]
    first = [wrong_answer(a, b, random.Random(3), kind) for a, b in pairs]
    assert first == [wrong_answer(a, b, random.Random(3), kind) for a, b in pairs]
    assert all(guess != str(a + b) for guess, (a, b) in zip(first, pairs))


def test_every_family_is_trained_on():
    assert set(TRAIN_WEIGHTS) == set(MISTAKE_FAMILIES)


def test_off_by_one_is_one_away():
    rng = random.Random(0)
    assert all(abs(int(wrong_answer(a, 7, rng, "off_by_one")) - (a + 7)) == 1 for a in range(100))


def test_training_pairs_hold_out_the_val_split():
    train, val = training_pairs(seed=0, n_val=256)
    assert len(val) == 256 and not set(train) & set(val)
    assert len(set(train)) + len(val) == NUM_PAIRS


def test_answer_lm_loss_scores_only_the_answer_and_eos():
    tokenizer = build_tokenizer()
    model = Qwen2ForSequenceClassification.from_pretrained(default_model_path(), num_labels=1).eval()
    sequences = [encode(tokenizer, 12, 34, "46"), encode(tokenizer, 7, 5, "12")]
    with torch.no_grad():
        got = answer_lm_loss(model, tokenizer, sequences)
        losses = []
        for seq in sequences:
            ids = torch.tensor([seq])
            logits = model.model(input_ids=ids).last_hidden_state[0] @ model.model.embed_tokens.weight.T
            answer_from = seq.index(tokenizer.convert_tokens_to_ids("<|assistant|>")) + 1
            # "46<|endoftext|>": three targets per sequence, each predicted by the position before it.
            assert len(seq) - answer_from == 3
            losses.append(
                F.cross_entropy(logits[answer_from - 1 : -1], ids[0, answer_from:], reduction="none")
            )
    torch.testing.assert_close(got, torch.cat(losses).mean())

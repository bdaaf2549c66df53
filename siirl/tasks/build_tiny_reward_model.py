"""Build the embedded tiny reward model: a Qwen2 sequence classifier that scores ``a+b=`` answers.

It starts from the embedded policy's weights (same tokenizer, chat template and shape; only the one-output
``score`` head is new) and learns to score the rendered chat ``<|user|>a+b=<|assistant|>answer<|endoftext|>``
high for the right sum and low for a wrong one, in two stages: answer-only SFT, so that the backbone can
add, then right vs wrong answers. The wrong answers look like a weak policy's mistakes: off by one, a few
units or ten, one digit changed, dropped or repeated, digits swapped, an operand echoed, or garbage, so
that a reward-model run ranks the policy's own samples as the rule would. Training uses every operand pair
except the policy's val split, on which accuracy is measured. Bit-for-bit reproducible from the seed (one
thread, deterministic algorithms).

CLI: ``python -m siirl.tasks.build_tiny_reward_model [--out siirl/assets/tiny_reward_model --seed 0]``
"""

from __future__ import annotations

import argparse
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerBase, Qwen2ForSequenceClassification

from siirl.embedded_assets import ASSETS_DIR, default_model_path
from siirl.tasks.arithmetic import MAX_OPERAND, format_prompt, split_pairs
from siirl.tasks.build_tiny_model import builder_args, save
from siirl.tasks.tiny_tokenizer import build_tokenizer

logger = logging.getLogger(__name__)

GARBAGE_CHARS = "0123456789+= x-"


@dataclass
class RewardTrainConfig:
    """Training schedule; the defaults produce the shipped model."""

    #: Stage 1, answer-only SFT of the backbone: the cheapest way to teach it the sums it must check.
    sft_steps: int = 1000
    sft_lr: float = 2e-3
    #: Stage 2, the score head and backbone on right vs wrong answers.
    steps: int = 2000
    lr: float = 1e-3
    #: Problems per step, each scored with its right answer and one wrong answer.
    batch_size: int = 64
    #: Weight of the SFT loss kept on during stage 2, so ranking does not erode the arithmetic.
    lm_weight: float = 1.0
    eval_every: int = 250
    #: Held-out problems: the policy's val split, never trained on (every other operand pair is).
    n_val: int = 256


def _digit_slip(answer: str, rng: random.Random) -> str:
    """One digit replaced, dropped, repeated, or two neighbours swapped."""
    i = rng.randrange(len(answer))
    kind = rng.choice(["replace", "drop", "repeat", "swap"])
    if kind == "replace":
        return answer[:i] + str(rng.randrange(10)) + answer[i + 1 :]
    if kind == "drop" and len(answer) > 1:
        return answer[:i] + answer[i + 1 :]
    if kind == "swap" and len(answer) > 1:
        i = min(i, len(answer) - 2)
        return answer[:i] + answer[i + 1] + answer[i] + answer[i + 2 :]
    return answer[: i + 1] + answer[i:]


def _shifted(total: int, offsets: Sequence[int], rng: random.Random) -> str:
    return str(abs(total + rng.choice([-1, 1]) * rng.choice(offsets)))


#: Mistake families, each a wrong-answer generator ``(a, b, rng) -> str`` (it may hit the right answer;
#: ``wrong_answer`` redraws). The numeric near misses are what the policy itself gets wrong.
MISTAKE_FAMILIES: dict[str, Callable[[int, int, random.Random], str]] = {
    "off_by_one": lambda a, b, rng: _shifted(a + b, [1], rng),
    "off_by_ten": lambda a, b, rng: _shifted(a + b, [10], rng),
    "units_shift": lambda a, b, rng: _shifted(a + b, range(2, 10), rng),
    "tens_shift": lambda a, b, rng: _shifted(a + b, [9, 11, 20], rng),
    "digit_slip": lambda a, b, rng: _digit_slip(str(a + b), rng),
    "operand": lambda a, b, rng: rng.choice([str(a), str(b), f"{a}{b}", str(abs(a - b))]),
    "garbage": lambda a, b, rng: "".join(rng.choice(GARBAGE_CHARS) for _ in range(rng.randint(0, 4))),
}

#: Sampling weights of the families in training: mostly numeric near misses, the ones hard to rank.
TRAIN_WEIGHTS = {
    "off_by_one": 25,
    "off_by_ten": 15,
    "units_shift": 30,
    "tens_shift": 15,
    "digit_slip": 7,
    "operand": 4,
    "garbage": 4,
}


def wrong_answer(a: int, b: int, rng: random.Random, kind: str | None = None) -> str:
    """A wrong answer to ``a+b=`` of the given family (drawn by ``TRAIN_WEIGHTS`` if None)."""
    kind = kind or rng.choices(list(TRAIN_WEIGHTS), weights=list(TRAIN_WEIGHTS.values()))[0]
    for _ in range(100):
        guess = MISTAKE_FAMILIES[kind](a, b, rng)
        if guess != str(a + b):
            return guess
    raise ValueError(f"no wrong answer of kind {kind!r} found for {a}+{b}")


def encode(tokenizer: PreTrainedTokenizerBase, a: int, b: int, answer: str) -> list[int]:
    """Token ids of the rendered chat, exactly what the policy's prompt + response are in a run."""
    chat = [{"role": "user", "content": format_prompt(a, b)}, {"role": "assistant", "content": answer}]
    text = tokenizer.apply_chat_template(chat, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def right_pad(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    for i, seq in enumerate(sequences):
        ids[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    return ids, (ids != pad_id).long()


def score(
    model: Qwen2ForSequenceClassification, tokenizer: PreTrainedTokenizerBase, sequences: list[list[int]]
) -> torch.Tensor:
    ids, mask = right_pad(sequences, tokenizer.pad_token_id)
    return model(input_ids=ids, attention_mask=mask).logits[:, 0]


@torch.no_grad()
def evaluate(
    model: Qwen2ForSequenceClassification,
    tokenizer: PreTrainedTokenizerBase,
    pairs: Sequence[tuple[int, int]],
    seed: int,
) -> dict[str, float]:
    """Pairwise accuracy (right answer scored above a wrong one) per mistake family and overall, and
    classification accuracy (score > 0 means right), averaged over right and wrong answers."""
    was_training = model.training
    model.eval()
    rng = random.Random(seed)
    right = score(model, tokenizer, [encode(tokenizer, a, b, str(a + b)) for a, b in pairs])
    metrics, wrong_scores = {}, []
    for kind in MISTAKE_FAMILIES:
        wrong = score(
            model, tokenizer, [encode(tokenizer, a, b, wrong_answer(a, b, rng, kind)) for a, b in pairs]
        )
        metrics[f"pairwise/{kind}"] = float((right > wrong).float().mean())
        wrong_scores.append(wrong)
    wrong_all = torch.cat(wrong_scores)
    metrics["pairwise"] = sum(metrics[f"pairwise/{k}"] for k in MISTAKE_FAMILIES) / len(MISTAKE_FAMILIES)
    metrics["classification"] = 0.5 * float((right > 0).float().mean() + (wrong_all <= 0).float().mean())
    model.train(was_training)
    return metrics


def answer_lm_loss(
    model: Qwen2ForSequenceClassification, tokenizer: PreTrainedTokenizerBase, sequences: list[list[int]]
) -> torch.Tensor:
    """Next-token loss on the answer and EOS of right answers, through the tied embeddings as LM head.

    It teaches the backbone to compute each digit of the sum, the dense signal a yes/no score lacks.
    """
    ids, mask = right_pad(sequences, tokenizer.pad_token_id)
    hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
    logits = hidden[:, :-1] @ model.model.embed_tokens.weight.T
    targets = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
    assistant = tokenizer.convert_tokens_to_ids("<|assistant|>")
    answer_start = (ids == assistant).long().argmax(-1, keepdim=True)
    targets = targets.masked_fill(torch.arange(targets.shape[1]) < answer_start, -100)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)


def training_pairs(seed: int, n_val: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Every operand pair outside the policy's val split (the policy's train split and the unused rest)."""
    _, val_pairs = split_pairs(seed, 0, n_val)
    held_out = set(val_pairs)
    pairs = [(a, b) for a in range(MAX_OPERAND + 1) for b in range(MAX_OPERAND + 1) if (a, b) not in held_out]
    return pairs, val_pairs


def _linear_decay(optimizer: torch.optim.Optimizer, steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / steps)


def train(
    seed: int, cfg: RewardTrainConfig
) -> tuple[Qwen2ForSequenceClassification, PreTrainedTokenizerBase, dict[str, float]]:
    """Start from the policy's weights, SFT the backbone on right answers, then train the score head and
    backbone on right vs wrong answers; returns held-out metrics.

    Stage 2's loss is a logistic loss on each answer (right -> 1, wrong -> 0: scores have a meaningful
    sign), the Bradley-Terry pairwise loss on each problem's pair (what a ranking reward needs) and the
    stage-1 loss. Ranking alone learned the units digit too slowly to catch off-by-one answers.
    """
    torch.manual_seed(seed)
    tokenizer = build_tokenizer()
    model = Qwen2ForSequenceClassification.from_pretrained(default_model_path(), num_labels=1)
    model.config.pad_token_id = tokenizer.pad_token_id
    train_pairs, val_pairs = training_pairs(seed, cfg.n_val)
    rng = random.Random(seed)
    model.train()
    sft_optimizer = torch.optim.AdamW(model.model.parameters(), lr=cfg.sft_lr, weight_decay=0.0)
    sft_schedule = _linear_decay(sft_optimizer, cfg.sft_steps)
    for step in range(1, cfg.sft_steps + 1):
        problems = rng.sample(train_pairs, cfg.batch_size)
        loss = answer_lm_loss(model, tokenizer, [encode(tokenizer, a, b, str(a + b)) for a, b in problems])
        sft_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        sft_optimizer.step()
        sft_schedule.step()
        if step % cfg.eval_every == 0:
            logger.info("sft step %d answer loss %.4f", step, loss.item())
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    schedule = _linear_decay(optimizer, cfg.steps)
    for step in range(1, cfg.steps + 1):
        problems = rng.sample(train_pairs, cfg.batch_size)
        right = [encode(tokenizer, a, b, str(a + b)) for a, b in problems]
        wrong = [encode(tokenizer, a, b, wrong_answer(a, b, rng)) for a, b in problems]
        scores = score(model, tokenizer, right + wrong)
        labels = torch.cat([torch.ones(cfg.batch_size), torch.zeros(cfg.batch_size)])
        pairwise = -F.logsigmoid(scores[: cfg.batch_size] - scores[cfg.batch_size :]).mean()
        loss = (
            F.binary_cross_entropy_with_logits(scores, labels)
            + pairwise
            + cfg.lm_weight * answer_lm_loss(model, tokenizer, right)
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % cfg.eval_every == 0:
            metrics = evaluate(model, tokenizer, val_pairs, seed)
            logger.info(
                "step %d loss %.4f val pairwise %.3f (off_by_one %.3f) classification %.3f",
                step,
                loss.item(),
                metrics["pairwise"],
                metrics["pairwise/off_by_one"],
                metrics["classification"],
            )
    return model, tokenizer, evaluate(model, tokenizer, val_pairs, seed)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train the embedded tiny reward model on addition answers.")
    parser.add_argument("--out", default=str(ASSETS_DIR / "tiny_reward_model"), help="output directory")
    parser.add_argument("--sft-steps", type=int, default=RewardTrainConfig.sft_steps)
    parser.add_argument("--steps", type=int, default=RewardTrainConfig.steps)
    args = builder_args(parser, argv)
    model, tokenizer, metrics = train(
        args.seed, RewardTrainConfig(sft_steps=args.sft_steps, steps=args.steps)
    )
    save(model, tokenizer, args.out)
    kinds = ", ".join(f"{k} {metrics[f'pairwise/{k}']:.3f}" for k in MISTAKE_FAMILIES)
    print(
        f"saved to {args.out}: {model.num_parameters()} params; held-out pairwise accuracy "
        f"{metrics['pairwise']:.3f} ({kinds}), classification accuracy {metrics['classification']:.3f}"
    )


if __name__ == "__main__":
    main()

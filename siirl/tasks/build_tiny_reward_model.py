"""Build the embedded tiny reward model: a Qwen2 sequence classifier that scores ``a+b=`` answers.

It starts from the embedded policy's weights (same tokenizer, chat template and shape; only the one-output
``score`` head is new) and learns to score the rendered chat ``<|user|>a+b=<|assistant|>answer<|endoftext|>``
high for the right sum and low for a wrong one. The wrong answers look like a weak policy's mistakes: off by
one or ten, one digit changed, dropped or repeated, digits swapped, an operand echoed, or garbage, so
that a reward-model run ranks the policy's own samples sensibly. Training uses the policy's train split of
operand pairs; accuracy is measured on its held-out val pairs. Bit-for-bit reproducible from the seed
(one thread, deterministic algorithms).

CLI: ``python -m siirl.tasks.build_tiny_reward_model [--out siirl/assets/tiny_reward_model --seed 0]``
"""

from __future__ import annotations

import argparse
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerBase, Qwen2ForSequenceClassification

from siirl.tasks import ASSETS_DIR, default_model_path
from siirl.tasks.arithmetic import format_prompt, split_pairs
from siirl.tasks.build_tiny_model import save
from siirl.tasks.tiny_tokenizer import build_tokenizer

logger = logging.getLogger(__name__)

GARBAGE_CHARS = "0123456789+= x-"


@dataclass
class RewardTrainConfig:
    """Training schedule; the defaults produce the shipped model."""

    lr: float = 1e-3
    #: Problems per step, each scored with its right answer and one wrong answer.
    batch_size: int = 64
    steps: int = 4000
    eval_every: int = 250
    n_train: int = 8000
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


#: Mistake families and their sampling weights: mostly near misses, which are the hard ones to rank.
MISTAKES = {
    "off_by_one": 3,
    "off_by_ten": 2,
    "digit_slip": 3,
    "operand": 1,
    "garbage": 1,
}


def wrong_answer(a: int, b: int, rng: random.Random, kind: str | None = None) -> str:
    """A wrong answer to ``a+b=`` of the given mistake family (drawn by ``MISTAKES`` weight if None)."""
    right = str(a + b)
    kind = kind or rng.choices(list(MISTAKES), weights=list(MISTAKES.values()))[0]
    for _ in range(100):
        if kind == "off_by_one":
            guess = str(max(a + b + rng.choice([-1, 1]), 0))
        elif kind == "off_by_ten":
            guess = str(abs(a + b + rng.choice([-10, 10])))
        elif kind == "digit_slip":
            guess = _digit_slip(right, rng)
        elif kind == "operand":
            guess = rng.choice([str(a), str(b), f"{a}{b}", str(abs(a - b))])
        else:
            guess = "".join(rng.choice(GARBAGE_CHARS) for _ in range(rng.randint(0, 4)))
        if guess != right:
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
    for kind in MISTAKES:
        wrong = score(
            model, tokenizer, [encode(tokenizer, a, b, wrong_answer(a, b, rng, kind)) for a, b in pairs]
        )
        metrics[f"pairwise/{kind}"] = float((right > wrong).float().mean())
        wrong_scores.append(wrong)
    wrong_all = torch.cat(wrong_scores)
    metrics["pairwise"] = sum(metrics[f"pairwise/{k}"] for k in MISTAKES) / len(MISTAKES)
    metrics["classification"] = 0.5 * float((right > 0).float().mean() + (wrong_all <= 0).float().mean())
    model.train(was_training)
    return metrics


def train(
    seed: int, cfg: RewardTrainConfig
) -> tuple[Qwen2ForSequenceClassification, PreTrainedTokenizerBase, dict[str, float]]:
    """Fine-tune the policy's weights with a score head on right vs wrong answers; returns val metrics.

    The loss is a logistic loss on each answer (right -> 1, wrong -> 0: scores have a meaningful sign)
    plus the Bradley-Terry pairwise loss on each problem's pair (what a ranking reward needs).
    """
    torch.manual_seed(seed)
    tokenizer = build_tokenizer()
    model = Qwen2ForSequenceClassification.from_pretrained(default_model_path(), num_labels=1)
    model.config.pad_token_id = tokenizer.pad_token_id
    train_pairs, val_pairs = split_pairs(seed, cfg.n_train, cfg.n_val)
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / cfg.steps)
    model.train()
    for step in range(1, cfg.steps + 1):
        problems = rng.sample(train_pairs, cfg.batch_size)
        right = [encode(tokenizer, a, b, str(a + b)) for a, b in problems]
        wrong = [encode(tokenizer, a, b, wrong_answer(a, b, rng)) for a, b in problems]
        scores = score(model, tokenizer, right + wrong)
        labels = torch.cat([torch.ones(cfg.batch_size), torch.zeros(cfg.batch_size)])
        pairwise = -F.logsigmoid(scores[: cfg.batch_size] - scores[cfg.batch_size :]).mean()
        loss = F.binary_cross_entropy_with_logits(scores, labels) + pairwise
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % cfg.eval_every == 0:
            metrics = evaluate(model, tokenizer, val_pairs, seed)
            logger.info(
                "step %d loss %.4f val pairwise %.3f classification %.3f",
                step,
                loss.item(),
                metrics["pairwise"],
                metrics["classification"],
            )
    return model, tokenizer, evaluate(model, tokenizer, val_pairs, seed)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train the embedded tiny reward model on addition answers.")
    parser.add_argument("--out", default=str(ASSETS_DIR / "tiny_reward_model"), help="output directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=RewardTrainConfig.steps)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    model, tokenizer, metrics = train(args.seed, RewardTrainConfig(steps=args.steps))
    save(model, tokenizer, args.out)
    kinds = ", ".join(f"{k} {metrics[f'pairwise/{k}']:.3f}" for k in MISTAKES)
    print(
        f"saved to {args.out}: {model.num_parameters()} params; held-out pairwise accuracy "
        f"{metrics['pairwise']:.3f} ({kinds}), classification accuracy {metrics['classification']:.3f}"
    )


if __name__ == "__main__":
    main()

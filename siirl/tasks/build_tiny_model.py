"""Build the embedded default model: a tiny Qwen2 warmed up by SFT on the addition task.

Training stops as soon as greedy val accuracy enters a target band (default [0.20, 0.30]): the model
then answers some problems and samples a mix of right and wrong answers, which is what GRPO needs.
The result is bit-for-bit reproducible from the seed (single thread, deterministic algorithms).

CLI: ``python -m siirl.tasks.build_tiny_model --out siirl/assets/tiny_qwen2 --seed 0``
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from transformers import GenerationConfig, PreTrainedTokenizerBase, Qwen2Config, Qwen2ForCausalLM

from siirl.tasks.arithmetic import format_prompt, generate, split_pairs
from siirl.tasks.evaluation import encode_prompt, greedy_accuracy
from siirl.tasks.tiny_tokenizer import build_tokenizer

logger = logging.getLogger(__name__)


@dataclass
class BackboneShape:
    """The tiny Qwen2 decoder's shape, shared by the text policy and the VLM's language model."""

    hidden_size: int = 128
    num_layers: int = 3
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 384


@dataclass
class WarmupConfig(BackboneShape):
    """Model shape and SFT schedule; the defaults produce the shipped model."""

    initializer_range: float = 0.02
    # Warming up at a high lr leaves the model where GRPO at a few 1e-4 improves it instead of collapsing;
    # a 5e-4 warm-up gave a checkpoint that RL at the same lr degraded.
    lr: float = 2e-3
    batch_size: int = 64
    eval_every: int = 5
    max_steps: int = 3000
    target_low: float = 0.20
    target_high: float = 0.30
    n_train: int = 8000
    n_val: int = 256


def build_model(tokenizer: PreTrainedTokenizerBase, cfg: WarmupConfig) -> Qwen2ForCausalLM:
    """A freshly initialised tiny Qwen2 whose special-token ids match the tokenizer."""
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        max_position_embeddings=tokenizer.model_max_length,
        initializer_range=cfg.initializer_range,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        max_new_tokens=8,
    )
    return model


def make_examples(
    tokenizer: PreTrainedTokenizerBase, pairs: Sequence[tuple[int, int]]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded (input_ids, labels) of the addition problems ``pairs``."""
    prompts = [encode_prompt(tokenizer, format_prompt(a, b)) for a, b in pairs]
    return answer_examples(tokenizer, prompts, [str(a + b) for a, b in pairs])


def answer_examples(
    tokenizer: PreTrainedTokenizerBase, prompts: Sequence[Sequence[int]], answers: Sequence[str]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded (input_ids, labels); labels mask the prompt so the loss covers answer + EOS only."""
    seqs, labels = [], []
    for prompt, text in zip(prompts, answers):
        answer = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        seqs.append(list(prompt) + answer)
        labels.append([-100] * len(prompt) + answer)
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), tokenizer.pad_token_id, dtype=torch.long)
    lab = torch.full((len(seqs), width), -100, dtype=torch.long)
    for i, (s, lb) in enumerate(zip(seqs, labels)):
        ids[i, : len(s)] = torch.tensor(s)
        lab[i, : len(lb)] = torch.tensor(lb)
    return ids, lab


def warm_up(seed: int, cfg: WarmupConfig) -> tuple[Qwen2ForCausalLM, PreTrainedTokenizerBase, int, float]:
    """Run SFT until greedy val accuracy is inside the target band; returns (model, tokenizer, step, acc)."""
    torch.manual_seed(seed)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, cfg)
    train_pairs, val_pairs = split_pairs(seed, cfg.n_train, cfg.n_val)
    ids, labels = make_examples(tokenizer, train_pairs)
    val_contents = [format_prompt(a, b) for a, b in val_pairs]
    val_answers = [str(a + b) for a, b in val_pairs]

    def batch_loss(idx: list[int]) -> torch.Tensor:
        batch_ids = ids[idx]
        mask = (batch_ids != tokenizer.pad_token_id).long()
        return model(input_ids=batch_ids, attention_mask=mask, labels=labels[idx]).loss

    step, acc = sft_until_band(
        model,
        cfg,
        seed,
        len(ids),
        batch_loss,
        lambda: greedy_accuracy(model, tokenizer, val_contents, val_answers),
    )
    return model, tokenizer, step, acc


def sft_until_band(
    model: torch.nn.Module,
    cfg: WarmupConfig,
    seed: int,
    num_rows: int,
    batch_loss: Callable[[list[int]], torch.Tensor],
    val_accuracy: Callable[[], float],
) -> tuple[int, float]:
    """AdamW over seeded reshuffles of ``num_rows`` rows, checking ``val_accuracy`` every ``eval_every``
    steps; returns (step, accuracy) once it is in [target_low, target_high], raises if it overshoots or
    never gets there."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(num_rows, generator=gen)
    cursor = 0
    model.train()
    for step in range(1, cfg.max_steps + 1):
        if cursor + cfg.batch_size > len(order):
            order, cursor = torch.randperm(num_rows, generator=gen), 0
        idx = order[cursor : cursor + cfg.batch_size].tolist()
        cursor += cfg.batch_size
        loss = batch_loss(idx)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % cfg.eval_every:
            continue
        acc = val_accuracy()
        logger.info("step %d loss %.4f val greedy acc %.4f", step, loss.item(), acc)
        if acc > cfg.target_high:
            raise RuntimeError(
                f"val accuracy jumped past the target band to {acc:.3f} at step {step}; lower lr or eval_every"
            )
        if acc >= cfg.target_low:
            return step, acc
    raise RuntimeError(f"val accuracy did not reach {cfg.target_low} within {cfg.max_steps} steps")


def save(model: Qwen2ForCausalLM, tokenizer: PreTrainedTokenizerBase, out_dir: str) -> None:
    """Save model (safetensors) and tokenizer into ``out_dir``."""
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    # safetensors writes owner-only files; package data must be world-readable once installed.
    for name in os.listdir(out_dir):
        os.chmod(os.path.join(out_dir, name), 0o644)


def builder_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse a model builder's command line (``--seed`` added) and make its run bit-for-bit reproducible:
    one thread and deterministic kernels, progress logged."""
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    return args


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="SFT warm-up of the embedded tiny Qwen2 on addition.")
    parser.add_argument("--out", required=True, help="output directory for model + tokenizer")
    parser.add_argument("--data-out", default=None, help="also write the task parquet files here")
    args = builder_args(parser, argv)
    cfg = WarmupConfig()
    model, tokenizer, step, acc = warm_up(args.seed, cfg)
    save(model, tokenizer, args.out)
    print(f"saved to {args.out}: {model.num_parameters()} params, stopped at step {step}, val acc {acc:.3f}")
    if args.data_out:
        train_path, val_path = generate(args.data_out, args.seed, cfg.n_train, cfg.n_val)
        print(f"wrote {train_path} and {val_path}")


if __name__ == "__main__":
    main()

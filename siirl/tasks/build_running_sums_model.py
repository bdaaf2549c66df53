"""Build the long-tail task's policy: the embedded tiny Qwen2 warmed up by SFT on running-sums traces.

The embedded adder answers ``"3+5+1+2="`` with one number and stops, so its responses are all 2-4 tokens and
the task would have no tail. Starting from its weights (it already adds), SFT on the shipped train split
teaches it to write the trace, one partial sum per operand, until greedy whole-trace accuracy on the val
split enters a band (default [0.10, 0.35]): responses then run as long as the task's (1 to 23 tokens) with
room for GRPO to improve them. Bit-for-bit reproducible from the seed (one thread, deterministic algorithms).

CLI: ``python -m siirl.tasks.build_running_sums_model --out siirl/assets/tiny_qwen2_running_sums --seed 0``
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow.parquet as pq
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from siirl.embedded_assets import asset_path, default_model_path
from siirl.tasks.build_tiny_model import WarmupConfig, answer_examples, builder_args, save, sft_until_band
from siirl.tasks.evaluation import encode_prompt, greedy_accuracy

#: The longest correct trace (8 two-digit sums and 7 spaces) and its end-of-sequence token.
MAX_TRACE_TOKENS = 24


@dataclass
class TraceWarmupConfig(WarmupConfig):
    lr: float = 2e-3
    eval_every: int = 20
    max_steps: int = 2000
    target_low: float = 0.10
    target_high: float = 0.35


def split_rows(split: str) -> tuple[list[str], list[str]]:
    """(prompt contents, correct traces) of the shipped split."""
    rows = pq.read_table(asset_path(f"data/running_sums/{split}.parquet")).to_pylist()
    return [r["prompt"][0]["content"] for r in rows], [r["reward_model"]["ground_truth"] for r in rows]


def warm_up(seed: int, cfg: TraceWarmupConfig):
    """SFT from the embedded adder until val accuracy is in the band; returns (model, tokenizer, step, acc)."""
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    model = AutoModelForCausalLM.from_pretrained(default_model_path(), dtype=torch.float32)
    contents, traces = split_rows("train")
    ids, labels = answer_examples(tokenizer, [encode_prompt(tokenizer, c) for c in contents], traces)
    val_contents, val_traces = split_rows("val")

    def batch_loss(idx: list[int]) -> torch.Tensor:
        batch_ids = ids[idx]
        mask = (batch_ids != tokenizer.pad_token_id).long()
        return model(input_ids=batch_ids, attention_mask=mask, labels=labels[idx]).loss

    step, acc = sft_until_band(
        model, cfg, seed, len(ids), batch_loss,
        lambda: greedy_accuracy(model, tokenizer, val_contents, val_traces, max_new_tokens=MAX_TRACE_TOKENS),
    )
    model.generation_config.max_new_tokens = MAX_TRACE_TOKENS
    return model, tokenizer, step, acc


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="SFT warm-up of the tiny Qwen2 on running-sums traces.")
    parser.add_argument("--out", required=True, help="output directory for model + tokenizer")
    args = builder_args(parser, argv)
    model, tokenizer, step, acc = warm_up(args.seed, TraceWarmupConfig())
    save(model, tokenizer, args.out)
    print(f"saved to {args.out}: {model.num_parameters()} params, stopped at step {step}, val acc {acc:.3f}")


if __name__ == "__main__":
    main()

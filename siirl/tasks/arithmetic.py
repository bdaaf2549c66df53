"""Synthetic two-number addition task in the verl parquet format.

The embedded default run trains on this task: it is small enough for a CPU, easy to score exactly and
hard enough that a partially trained model leaves room for RL to improve.

CLI: ``python -m siirl.tasks.arithmetic --out DIR [--seed S --n-train N --n-val M]``
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pyarrow as pa

from siirl.tasks.task_files import task_main, write_splits

DATA_SOURCE = "siirl/arith_add"
ABILITY = "math"
MAX_OPERAND = 99
NUM_PAIRS = (MAX_OPERAND + 1) ** 2

SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        (
            "extra_info",
            pa.struct([("split", pa.string()), ("index", pa.int64()), ("a", pa.int64()), ("b", pa.int64())]),
        ),
    ]
)


def format_prompt(a: int, b: int) -> str:
    """The user message content for one problem, e.g. ``"12+34="``."""
    return f"{a}+{b}="


def make_row(a: int, b: int, split: str, index: int) -> dict:
    """One verl-format record for ``a + b``."""
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": format_prompt(a, b)}],
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": str(a + b)},
        "extra_info": {"split": split, "index": index, "a": a, "b": b},
    }


def split_pairs(seed: int, n_train: int, n_val: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Draw disjoint train/val operand pairs without replacement from all 0..99 x 0..99 pairs.

    Disjointness is what makes val accuracy measure generalisation rather than recall.
    """
    if n_train < 0 or n_val < 0:
        raise ValueError(f"n_train and n_val must be >= 0, got n_train={n_train}, n_val={n_val}")
    if n_train + n_val > NUM_PAIRS:
        raise ValueError(
            f"n_train + n_val = {n_train + n_val} exceeds the {NUM_PAIRS} distinct operand pairs"
        )
    pairs = [(a, b) for a in range(MAX_OPERAND + 1) for b in range(MAX_OPERAND + 1)]
    random.Random(seed).shuffle(pairs)
    return pairs[n_val : n_val + n_train], pairs[:n_val]


def generate(out_dir: str, seed: int = 0, n_train: int = 8000, n_val: int = 256) -> tuple[str, str]:
    """Write ``train.parquet`` and ``val.parquet`` into ``out_dir``; returns their paths."""
    train_pairs, val_pairs = split_pairs(seed, n_train, n_val)
    splits = {"train": train_pairs, "val": val_pairs}
    return write_splits(out_dir, splits, lambda ab, split, i: make_row(*ab, split, i), SCHEMA)


def main(argv: Sequence[str] | None = None) -> None:
    task_main("Generate the synthetic addition task as verl parquet.", generate, 8000, 256, argv)


if __name__ == "__main__":
    main()

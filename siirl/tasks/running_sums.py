"""Running sums (``"3+5+1+2="`` -> ``"8 9 11"``): the embedded long-tail task, in the verl parquet format.

The correct response is the trace of partial sums, one per addition, so its length grows with the number
of operands: 2 to 9 single-digit operands give answers of 1 to 23 characters (the byte-level tokenizer
spends one token per character). Operand counts are drawn with weight ``1 / (k - 1)``: most prompts are
short and a tail is several times longer, the shape of reasoning-trace lengths, which is what a step that
waits for its longest response pays for and what partial rollouts recover. Every partial sum stays within
0..81, inside the embedded adder's range. Scored by ``siirl.reward_score.running_sums``.

CLI: ``python -m siirl.tasks.running_sums --out DIR [--seed S --n-train N --n-val M]``
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

import pyarrow as pa

from siirl.tasks.task_files import task_main, write_splits

DATA_SOURCE = "siirl/running_sums"
MIN_TERMS, MAX_TERMS = 2, 9
MAX_OPERAND = 9

SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", pa.struct([("split", pa.string()), ("index", pa.int64()), ("terms", pa.int64())])),
    ]
)


def trace(operands: Sequence[int]) -> str:
    """The correct response: every partial sum after the first operand, space separated."""
    return " ".join(str(total) for total in list(itertools.accumulate(operands))[1:])


def make_row(operands: Sequence[int], split: str, index: int) -> dict:
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": "+".join(map(str, operands)) + "="}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": trace(operands)},
        "extra_info": {"split": split, "index": index, "terms": len(operands)},
    }


def draw(rng: random.Random) -> tuple[int, ...]:
    counts = range(MIN_TERMS, MAX_TERMS + 1)
    (terms,) = rng.choices(counts, weights=[1 / (k - 1) for k in counts])
    return tuple(rng.randint(0, MAX_OPERAND) for _ in range(terms))


def generate(out_dir: str, seed: int = 0, n_train: int = 2000, n_val: int = 128) -> tuple[str, str]:
    """Write ``train.parquet`` and ``val.parquet`` into ``out_dir``: distinct val problems, none of them in
    train. Train problems may repeat (there are only 100 two-operand ones), so the length distribution
    stays the drawn one."""
    if n_train < 1 or n_val < 0:
        raise ValueError(f"need n_train >= 1 and n_val >= 0, got {n_train}, {n_val}")
    rng, val = random.Random(seed), {}
    while len(val) < n_val:
        val.setdefault(draw(rng), None)
    train = []
    while len(train) < n_train:
        problem = draw(rng)
        if problem not in val:
            train.append(problem)
    return write_splits(out_dir, {"train": train, "val": list(val)}, make_row, SCHEMA)


def main(argv: Sequence[str] | None = None) -> None:
    task_main("Generate the running-sums long-tail task as verl parquet.", generate, 2000, 128, argv)


if __name__ == "__main__":
    main()

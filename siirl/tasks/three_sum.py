"""Three-number addition (``"a+b+c="``) in the verl parquet format: the built-in multi-agent task.

Two agents solve it together with the embedded two-number adder: the first adds ``a+b``, the second adds
``c`` to the first one's answer. Operands keep every partial sum within 0..99, the range the embedded
model was warmed up on.

CLI: ``python -m siirl.tasks.three_sum --out DIR [--seed S --n-train N --n-val M]``
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pyarrow as pa

from siirl.tasks.task_files import task_main, write_splits

DATA_SOURCE = "siirl/arith_add3"
MAX_SUM = 99

SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", pa.struct([("split", pa.string()), ("index", pa.int64())])),
    ]
)


def make_row(a: int, b: int, c: int, split: str, index: int) -> dict:
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": f"{a}+{b}+{c}="}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": str(a + b + c)},
        "extra_info": {"split": split, "index": index},
    }


def draw(rng: random.Random) -> tuple[int, int, int]:
    a = rng.randint(0, MAX_SUM // 2)
    b = rng.randint(0, MAX_SUM // 2)
    return a, b, rng.randint(0, MAX_SUM - a - b)


def generate(out_dir: str, seed: int = 0, n_train: int = 4000, n_val: int = 128) -> tuple[str, str]:
    """Write ``train.parquet`` and ``val.parquet`` (disjoint problems) into ``out_dir``."""
    if n_train < 1 or n_val < 0:
        raise ValueError(f"need n_train >= 1 and n_val >= 0, got {n_train}, {n_val}")
    rng, seen, problems = random.Random(seed), set(), []
    while len(problems) < n_train + n_val:
        problem = draw(rng)
        if problem not in seen:
            seen.add(problem)
            problems.append(problem)
    splits = {"train": problems[n_val:], "val": problems[:n_val]}
    return write_splits(out_dir, splits, lambda abc, split, i: make_row(*abc, split, i), SCHEMA)


def main(argv: Sequence[str] | None = None) -> None:
    task_main("Generate the three-number addition task as verl parquet.", generate, 4000, 128, argv)


if __name__ == "__main__":
    main()

"""What the embedded task generators share: writing their splits as verl parquet, and their command line."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def write_splits(
    out_dir: str, splits: dict[str, Sequence[Any]], make_row: Callable[[Any, str, int], dict],
    schema: pa.Schema,
) -> tuple[str, str]:
    """``<out_dir>/<split>.parquet`` of ``make_row(item, split, index)`` per item; returns (train, val) paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for split, items in splits.items():
        paths[split] = os.path.join(out_dir, f"{split}.parquet")
        rows = [make_row(item, split, index) for index, item in enumerate(items)]
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), paths[split])
    return paths["train"], paths["val"]


def task_main(
    description: str,
    generate: Callable[[str, int, int, int], tuple[str, str]],
    n_train: int,
    n_val: int,
    argv: Sequence[str] | None = None,
) -> None:
    """``--out DIR [--seed S] [--n-train N] [--n-val N]``: write the task's parquet files."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-train", type=int, default=n_train)
    parser.add_argument("--n-val", type=int, default=n_val)
    args = parser.parse_args(argv)
    train_path, val_path = generate(args.out, args.seed, args.n_train, args.n_val)
    print(f"wrote {train_path} ({args.n_train} rows) and {val_path} ({args.n_val} rows)")

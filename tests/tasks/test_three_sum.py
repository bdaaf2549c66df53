"""The three-number task the built-in agent team trains on."""

import re

import pyarrow.parquet as pq
import pytest

from siirl.reward_score import default_compute_score
from siirl.tasks.three_sum import generate


def test_three_sum_files(tmp_path):
    train, val = generate(str(tmp_path), seed=1, n_train=50, n_val=10)
    rows = {split: pq.read_table(path).to_pylist() for split, path in (("train", train), ("val", val))}
    assert len(rows["train"]) == 50 and len(rows["val"]) == 10
    seen = set()
    for row in rows["train"] + rows["val"]:
        a, b, c = map(int, re.fullmatch(r"(\d+)\+(\d+)\+(\d+)=", row["prompt"][0]["content"]).groups())
        assert a + b <= 99 and a + b + c <= 99  # every partial sum stays in the adder's range
        assert row["reward_model"]["ground_truth"] == str(a + b + c)
        seen.add((a, b, c))
    assert len(seen) == 60  # train and val are disjoint
    assert default_compute_score("siirl/arith_add3", rows["val"][0]["reward_model"]["ground_truth"],
                                 rows["val"][0]["reward_model"]["ground_truth"]) == 1.0
    with pytest.raises(ValueError, match="n_train"):
        generate(str(tmp_path), n_train=0)

"""The embedded long-tail task: its files, the length spread of its correct responses, and its score."""

import re

import pyarrow.parquet as pq
import pytest

from siirl.embedded_assets import asset_path
from siirl.reward_score import default_compute_score
from siirl.tasks.running_sums import DATA_SOURCE, generate, trace


def test_trace_is_every_partial_sum():
    assert trace([3, 5, 1, 2]) == "8 9 11"
    assert trace([4, 0]) == "4"


def test_files_follow_the_verl_format_and_keep_val_out_of_train(tmp_path):
    train, val = generate(str(tmp_path), seed=1, n_train=300, n_val=40)
    rows = {split: pq.read_table(path).to_pylist() for split, path in (("train", train), ("val", val))}
    assert len(rows["train"]) == 300 and len(rows["val"]) == 40
    problems = {}
    for split, split_rows in rows.items():
        for row in split_rows:
            operands = [int(x) for x in re.fullmatch(r"(\d(?:\+\d)+)=", row["prompt"][0]["content"]).group(1).split("+")]
            assert 2 <= len(operands) == row["extra_info"]["terms"] <= 9
            assert row["reward_model"]["ground_truth"] == trace(operands) and row["data_source"] == DATA_SOURCE
            problems.setdefault(split, set()).add(tuple(operands))
    assert len(problems["val"]) == 40 and not problems["val"] & problems["train"]
    with pytest.raises(ValueError, match="n_train"):
        generate(str(tmp_path), n_train=0)


def test_shipped_correct_lengths_vary_several_fold_with_a_long_tail():
    lengths = sorted(len(row["reward_model"]["ground_truth"]) for row in
                     pq.read_table(asset_path("data/running_sums/train.parquet")).to_pylist())
    median, p90 = lengths[len(lengths) // 2], lengths[int(0.9 * len(lengths))]
    assert lengths[0] == 1 and lengths[-1] == 23  # 1 to 8 partial sums
    assert p90 >= 2 * median >= 4 * lengths[0]  # most short, a tail more than twice the median


@pytest.mark.parametrize(("response", "score"), [("8 9 11", 1.0), (" 8  9 11\n", 1.0), ("11", 0.0),
                                                 ("8 9 12", 0.0), ("8 9 11 11", 0.0), ("", 0.0)])
def test_score_needs_the_whole_trace(response, score):
    assert default_compute_score(DATA_SOURCE, response, "8 9 11") == score


def test_bad_ground_truth_is_named():
    with pytest.raises(ValueError, match="space-separated integers"):
        default_compute_score(DATA_SOURCE, "1", "eleven")


@pytest.fixture(scope="module")
def greedy_val():
    """The shipped policy's greedy responses to the val prompts, with their correct traces."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from siirl.tasks.build_running_sums_model import MAX_TRACE_TOKENS, split_rows
    from siirl.tasks.evaluation import encode_prompt, greedy_generate

    path = asset_path("tiny_qwen2_running_sums")
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    contents, traces = split_rows("val")
    prompts = [encode_prompt(tokenizer, c) for c in contents]
    outs = greedy_generate(model, prompts, tokenizer.eos_token_id, tokenizer.pad_token_id, MAX_TRACE_TOKENS)
    return [tokenizer.decode(o, skip_special_tokens=True) for o in outs], [len(o) for o in outs], traces


def test_shipped_policy_writes_traces_with_the_long_tail(greedy_val):
    responses, lengths, traces = greedy_val
    lengths = sorted(lengths)
    median, p90 = lengths[len(lengths) // 2], lengths[int(0.9 * len(lengths))]
    assert lengths[0] <= 3 and lengths[-1] >= 20 and p90 >= 2 * median  # shipped: 2, median 6, p90 21, 24
    accuracy = sum(default_compute_score(DATA_SOURCE, r, t) for r, t in zip(responses, traces, strict=True)) / len(traces)
    assert 0.05 <= accuracy <= 0.40  # room for RL; shipped 0.117

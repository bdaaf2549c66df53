"""verl score functions get the row's ``extra_info`` (the embedded task's ``{split, index, a, b}``), and the
keys of a returned dict other than ``score`` / ``acc`` are logged each step as ``reward_extra/<key>`` and kept in
the batch for later nodes (verl's ``reward_extra_info``)."""

from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from config_testutils import typed_config

from siirl.dag_worker.builtin_nodes import compute_reward
from siirl.data_coordinator import build_train_dataloader
from siirl.data_coordinator.tensordict_ops import row_values
from siirl.engine.reward.naive import NaiveRewardManager
from siirl.params.data import DataConfig
from siirl.tasks.arithmetic import SCHEMA, make_row
from tests.reward.helpers import TOKENIZER

ROWS = [make_row(a, b, "train", index) for index, (a, b) in enumerate([(1, 2), (30, 4), (0, 7), (12, 12)])]


def score_with_extra_info(data_source, solution_str, ground_truth, extra_info):
    """A verl score function that reads the row's operands from ``extra_info`` and reports extra values."""
    right = solution_str.strip() == str(extra_info["a"] + extra_info["b"])
    return {"score": float(right), "acc": right, "carry": extra_info["a"] % 10 + extra_info["b"] % 10 >= 10,
            "a": extra_info["a"], "split": extra_info["split"]}


@pytest.fixture
def rollout_batch(tmp_path):
    """A loader batch of the embedded task's rows, with each row's correct answer as its response."""
    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS, schema=SCHEMA), path)
    config = DataConfig(train_files=[str(path)], train_batch_size=4, max_prompt_length=16, shuffle=False)
    batch = next(iter(build_train_dataloader(config, TOKENIZER, 0, 1)))
    answers = [TOKENIZER(row["reward_model"]["ground_truth"], add_special_tokens=False)["input_ids"] for row in ROWS]
    width = max(map(len, answers)) + 1
    responses = torch.full((4, width), TOKENIZER.pad_token_id)
    mask = torch.zeros((4, width), dtype=torch.long)
    for i, ids in enumerate(answers):
        responses[i, : len(ids) + 1] = torch.tensor([*ids, TOKENIZER.eos_token_id])
        mask[i, : len(ids) + 1] = 1
    batch["responses"], batch["response_mask"] = responses, mask
    return batch


def test_the_score_function_receives_each_rows_extra_info(rollout_batch):
    seen = []
    manager = NaiveRewardManager(TOKENIZER, compute_score=lambda *args: seen.append(args[3]) or 1.0)
    manager(rollout_batch)
    assert seen == [row["extra_info"] for row in ROWS]


def test_extra_keys_of_the_returned_dict_are_logged_each_step(rollout_batch):
    ctx = SimpleNamespace(
        reward_manager=NaiveRewardManager(TOKENIZER, compute_score=score_with_extra_info),
        tokenizer=TOKENIZER, cfg=typed_config(),
    )
    metrics = compute_reward(rollout_batch, ctx=ctx).metrics
    assert metrics["reward/mean"] == 1.0
    assert metrics["reward_extra/carry"] == 0.0 and metrics["reward_extra/a"] == (1 + 30 + 0 + 12) / 4
    assert "reward_extra/split" not in metrics  # not a number
    assert "reward_extra/score" not in metrics and "reward_extra/acc" not in metrics  # in the batch already


def test_extra_keys_of_the_returned_dict_stay_in_the_batch_for_later_nodes(rollout_batch):
    ctx = SimpleNamespace(
        reward_manager=NaiveRewardManager(TOKENIZER, compute_score=score_with_extra_info),
        tokenizer=TOKENIZER, cfg=typed_config(),
    )
    batch = compute_reward(rollout_batch, ctx=ctx).batch
    assert batch["carry"].dtype == torch.float32 and batch["carry"].tolist() == [0.0] * 4
    assert batch["a"].tolist() == [1.0, 30.0, 0.0, 12.0]
    assert row_values(batch, "split") == ["train"] * 4  # not a number: one Python value per row


def test_an_extra_key_missing_for_some_samples_is_nan_and_one_naming_a_batch_field_is_refused(rollout_batch):
    def partial_extra(data_source, solution_str, ground_truth, extra_info):
        return {"score": 1.0, **({"bonus": 2} if extra_info["index"] % 2 else {})}

    ctx = SimpleNamespace(
        reward_manager=NaiveRewardManager(TOKENIZER, compute_score=partial_extra), tokenizer=TOKENIZER,
        cfg=typed_config(),
    )
    bonus = compute_reward(rollout_batch.clone(), ctx=ctx).batch["bonus"]
    assert bonus.isnan().tolist() == [True, False, True, False] and bonus[1].item() == 2.0
    ctx.reward_manager = NaiveRewardManager(TOKENIZER, compute_score=lambda *args: {"score": 1.0, "responses": 0})
    with pytest.raises(ValueError, match="extra key 'responses', which names a batch field"):
        compute_reward(rollout_batch, ctx=ctx)

"""Group filters (DAPO dynamic sampling, embodied sampling) and the example's length-penalty node."""

import pytest
import torch
from config_testutils import typed_config
from tensordict import TensorDict

from siirl.errors import ConfigError
from siirl.user_interface.filters import dynamic_sampling, embodied_sampling, row_values, select_rows

#: The group filter on, as ``algorithm.filter_groups.enable=true`` sets it.
FILTER_ON = {"algorithm": {"filter_groups": {"enable": True}}}


def _batch(uids, seq_scores, uid_storage="stack"):
    """Rows with a 3-token response; the score sits on the last valid token, padding has junk."""
    n = len(uids)
    scores = torch.zeros(n, 3)
    scores[:, 1] = torch.tensor(seq_scores, dtype=torch.float32)
    scores[:, 2] = 100.0 * torch.arange(n)  # outside the response mask: must be ignored
    mask = torch.tensor([[1, 1, 0]] * n)
    batch = TensorDict({"token_level_scores": scores, "response_mask": mask, "row": torch.arange(n)}, [n])
    if uid_storage == "stack":
        batch["uid"] = list(uids)
    else:
        batch.set_non_tensor("uid", list(uids))
    batch["data_source"] = [f"src{i}" for i in range(n)]
    return batch


@pytest.mark.parametrize("uid_storage", ["stack", "whole_list"])
def test_dynamic_sampling_drops_zero_variance_groups(uid_storage):
    uids = ["a", "b", "a", "b", "c", "d", "d"]
    scores = [1.0, 0.0, 1.0, 1.0, 0.5, 0.0, 0.0]
    out = dynamic_sampling(_batch(uids, scores, uid_storage), typed_config(FILTER_ON))
    assert out.batch["row"].tolist() == [1, 3, 4]  # "c" is a single response: no variance to judge, kept
    assert row_values(out.batch, "uid") == ["b", "b", "c"]
    assert row_values(out.batch, "data_source") == ["src1", "src3", "src4"]
    assert out.metrics == {
        "dynamic_sampling/kept_groups": 2,
        "dynamic_sampling/dropped_groups": 2,
        "dynamic_sampling/kept_ratio": 3 / 7,
    }
    assert out.info == {"num_kept_groups": 2, "num_kept_samples": 3}


@pytest.mark.parametrize(
    ("metric", "kept"),
    [("seq_reward", [2, 3]), ("seq_final_reward", [0, 1]), ("acc", [0, 1, 2, 3]), ("score", [])],
)
def test_dynamic_sampling_uses_the_configured_metric(metric, kept):
    batch = _batch(["a", "a", "b", "b"], [1.0, 1.0, 0.0, 1.0])
    batch["token_level_rewards"] = torch.tensor([[0.0, 1.0, 0], [0.0, 0.5, 0], [0.0, 0.2, 0], [0.0, 0.2, 0]])
    batch["acc"] = torch.tensor([1.0, 0.0, 0.0, 1.0])
    batch["score"] = torch.tensor([0.5, 0.5, 0.0, 0.0])
    cfg = typed_config({"algorithm": {"filter_groups": {"enable": True, "metric": metric}}})
    assert dynamic_sampling(batch, cfg).batch["row"].tolist() == kept


def test_dynamic_sampling_refuses_unknown_metrics_and_passes_through_when_off():
    batch = _batch(["a", "a"], [1.0, 1.0])
    cfg = typed_config(FILTER_ON)
    cfg.algorithm.filter_groups.metric = "accuracy"
    with pytest.raises(ConfigError, match="unknown group filter metric 'accuracy'; registered: acc, score"):
        dynamic_sampling(batch, cfg)
    out = dynamic_sampling(batch)  # filter_groups.enable=false (the default): verl's DAPO without filtering
    assert out.batch is batch and out.metrics == {}


def test_dynamic_sampling_can_drop_everything():
    out = dynamic_sampling(_batch(["a", "a"], [1.0, 1.0]), typed_config(FILTER_ON))
    assert out.batch.batch_size == torch.Size([0]) and out.info["num_kept_groups"] == 0


def test_filters_name_missing_fields():
    batch = TensorDict({"row": torch.arange(2)}, [2])
    cfg = typed_config(FILTER_ON)
    with pytest.raises(ValueError, match="batch has no 'token_level_scores' field"):
        dynamic_sampling(batch, cfg)
    with pytest.raises(ValueError, match="needs a 'task_success' or 'token_level_scores'"):
        embodied_sampling(batch)
    batch["token_level_scores"] = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="batch has no field 'uid'"):
        dynamic_sampling(batch, cfg)


def test_embodied_sampling_drops_always_and_never_solved_tasks():
    batch = _batch(["t1", "t1", "t2", "t2", "t3", "t3", "t4"], [0.0] * 7)
    batch["task_success"] = torch.tensor([True, True, False, True, False, False, True])
    binary = typed_config({"algorithm": {"embodied": {"sampling": {"drop_all_failed": True}}}})
    out = embodied_sampling(batch, config=binary)
    assert out.batch["row"].tolist() == [2, 3]
    assert out.metrics["embodied_sampling/success_rate"] == pytest.approx(4 / 7)
    assert out.metrics["embodied_sampling/dropped_groups"] == 3
    # default (progress rewards rank failures): all-failed groups stay, all-solved ones go
    assert embodied_sampling(batch).batch["row"].tolist() == [2, 3, 4, 5]


def test_embodied_sampling_falls_back_to_positive_scores():
    out = embodied_sampling(_batch(["t1", "t1", "t2", "t2", "t3"], [1.0, 0.0, 1.0, 1.0, 0.0]))
    assert out.batch["row"].tolist() == [0, 1, 4]


def test_select_rows_splits_whole_list_fields():
    batch = _batch(["a", "b", "c"], [0, 1, 2], uid_storage="whole_list")
    picked = select_rows(batch, [2, 0])
    assert row_values(picked, "uid") == ["c", "a"] and picked["row"].tolist() == [2, 0]


def test_example_length_penalty_node_lowers_the_last_response_token():
    from examples.custom_pipeline.nodes import LengthPenaltyConfig, length_penalty

    scores = torch.tensor([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]])
    batch = TensorDict({"token_level_scores": scores, "response_mask": mask}, [3])
    global_config = {"coef": 9.0}  # the run's config: never where the node's coef comes from
    out = length_penalty(batch, global_config, node_config=LengthPenaltyConfig(coef=0.4))
    expected = torch.tensor([[0.0, 0.8, 0.0, 0.0], [0.0, 0.0, 0.0, 0.6], [0.0, 0.0, 0.0, 0.0]])
    torch.testing.assert_close(out.batch["token_level_scores"], expected)
    assert out.metrics["length_penalty/mean_response_length"] == pytest.approx(2.0)
    assert out.metrics["length_penalty/mean_penalty"] == pytest.approx(0.4 * (0.5 + 1.0 + 0.0) / 3)

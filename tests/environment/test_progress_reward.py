"""SRPO-style progress rewards and embodied sampling over step rows."""

import math

import pytest
import torch
from config_testutils import typed_config
from tensordict import TensorDict

from siirl.data_coordinator.tensordict_ops import set_non_tensor_list
from siirl.engine.reward.env_rewards import ProgressRewards, progress_rewards
from siirl.user_interface.filters import embodied_sampling


def test_progress_formula():
    uids = ["t1", "t1", "t1", "t2", "t2"]
    success = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0])
    signature = torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    progress = torch.tensor([1.0, 0.5, 0.0, 0.5, 0.0])
    error = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0])
    out = progress_rewards(uids, success, signature, progress, error, failure_scale=0.6, sigma=1.0)
    assert out[0] == 1.0
    assert out[1].item() == pytest.approx(0.6 * math.exp(-1 / 2))  # one step away from the success
    assert out[2].item() == pytest.approx(0.6 * math.exp(-2 / 2))  # two steps away
    assert out[3].item() == pytest.approx(0.6 * 0.5)  # no success in its task: the env's progress
    assert out[4] == 0.0  # the environment broke
    assert (out[1:4] < 1.0).all() and out[1] > out[2]


def _step_rows():
    # task t1: trajectory a (2 steps, success), b (2 steps, failure); task t2: c, d both failed; e errored
    batch = TensorDict({
        "response_mask": torch.tensor([[1, 1, 0]] * 10),
        "task_success": torch.tensor([1.0, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
        "env_error": torch.tensor([0.0, 0, 0, 0, 0, 0, 0, 0, 1, 1]),
        "traj_signature": torch.tensor([[1.0, 1], [1, 1], [1, 0], [1, 0], [0, 0], [0, 0], [1, 0], [1, 0],
                                        [0, 0], [0, 0]]),
        "env_progress": torch.tensor([1.0, 1, 0.5, 0.5, 0, 0, 0.5, 0.5, 0, 0]),
        "row": torch.arange(10),
    }, [10])
    set_non_tensor_list(batch, "uid", ["t1"] * 4 + ["t2"] * 4 + ["t3"] * 2)
    set_non_tensor_list(batch, "traj_uid", ["a", "a", "b", "b", "c", "c", "d", "d", "e", "e"])
    return batch


def test_progress_rewards_on_last_token_of_every_step_row():
    scores, extra = ProgressRewards(0.6, 1.0)(_step_rows())
    assert scores[:, 1].tolist() == pytest.approx(extra["trajectory_reward"]) and scores[:, [0, 2]].abs().sum() == 0
    near = 0.6 * math.exp(-0.5)
    assert extra["trajectory_reward"][:4] == pytest.approx([1.0, 1.0, near, near])
    binary, _ = ProgressRewards(0.6, 1.0, enable=False)(_step_rows())
    assert binary.sum(-1).tolist() == [1.0, 1.0] + [0.0] * 8
    with pytest.raises(ValueError, match="failure_scale"):
        ProgressRewards(1.0, 1.0)


def test_embodied_sampling_counts_trajectories_and_drops_env_errors():
    out = embodied_sampling(_step_rows())
    assert out.batch["row"].tolist() == [0, 1, 2, 3, 4, 5, 6, 7]  # errored trajectory e dropped
    assert out.metrics["embodied_sampling/env_errors"] == 2.0
    binary = typed_config({"algorithm": {"embodied": {"sampling": {"drop_all_failed": True}}}})
    assert embodied_sampling(_step_rows(), config=binary).batch["row"].tolist() == [0, 1, 2, 3]
    solved = _step_rows()
    solved["task_success"] = torch.tensor([1.0, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    assert embodied_sampling(solved).batch["row"].tolist() == [4, 5, 6, 7]

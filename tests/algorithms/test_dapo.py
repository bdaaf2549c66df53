"""DAPO: zero-variance group filter, overlong penalty (uids and chunk accumulation: tests/data_coordinator/)."""

import pytest
import torch

from siirl.algorithms import filter_zero_variance_groups, overlong_reward_penalty

UIDS = ["a", "a", "b", "b", "c", "d", "d", "d"]
SCORES = [1.0, 0.0, 1.0, 1.0, 0.5, 0.0, 0.0, 1.0]


def test_filter_drops_constant_groups() -> None:
    kept, stats = filter_zero_variance_groups(UIDS, SCORES)
    assert kept == [0, 1, 4, 5, 6, 7]  # b is constant; singleton c is kept
    assert stats == {"groups_kept": 3, "groups_total": 4, "samples_kept": 6, "samples_total": 8}


def test_filter_can_drop_singletons_and_takes_tensors() -> None:
    kept, stats = filter_zero_variance_groups(UIDS, torch.tensor(SCORES), keep_singletons=False)
    assert kept == [0, 1, 5, 6, 7]
    assert stats["groups_kept"] == 2


def test_filter_bad_inputs() -> None:
    with pytest.raises(ValueError, match="8 uids but the batch has 7"):
        filter_zero_variance_groups(UIDS, SCORES[:7])
    with pytest.raises(ValueError, match="finite"):
        filter_zero_variance_groups(UIDS, [float("nan")] + SCORES[1:])


def test_overlong_penalty_by_hand() -> None:
    # soft zone starts at 10 - 4 = 6 tokens; -1/4 per token beyond it, floor at -penalty_factor
    out = overlong_reward_penalty([0, 6, 7, 8, 10, 12], max_response_length=10, overlong_buffer_len=4)
    torch.testing.assert_close(out, torch.tensor([0.0, 0.0, -0.25, -0.5, -1.0, -1.0]))
    half = overlong_reward_penalty(torch.tensor([8]), 10, 4, penalty_factor=0.5)
    torch.testing.assert_close(half, torch.tensor([-0.25]))


def test_overlong_penalty_bad_inputs() -> None:
    with pytest.raises(ValueError, match="overlong_buffer_len"):
        overlong_reward_penalty([1], 10, 0)
    with pytest.raises(ValueError, match="overlong_buffer_len"):
        overlong_reward_penalty([1], 10, 11)
    with pytest.raises(ValueError, match="penalty_factor"):
        overlong_reward_penalty([1], 10, 4, penalty_factor=-1)
    with pytest.raises(ValueError, match="response_lengths"):
        overlong_reward_penalty([-1], 10, 4)

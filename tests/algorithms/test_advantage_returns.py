"""Return-based estimators: GAE against a plain Python loop, REINFORCE++ and ReMax by hand."""

import math

import pytest
import torch

from siirl.algorithms import compute_advantage
from siirl.params.algorithm import AlgorithmConfig

from .algo_testutils import row_mask


def _whiten_loop(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    valid = [
        values[i, t].item() for i in range(values.shape[0]) for t in range(values.shape[1]) if mask[i, t]
    ]
    mean = sum(valid) / len(valid)
    std = math.sqrt(sum((v - mean) ** 2 for v in valid) / (len(valid) - 1) + 1e-8)
    out = torch.zeros_like(values)
    for i in range(values.shape[0]):
        for t in range(values.shape[1]):
            if mask[i, t]:
                out[i, t] = (values[i, t].item() - mean) / std
    return out


def _gae_loop(rewards, values, mask, gamma, lam):
    """Textbook GAE over each row's valid positions; masked positions are skipped entirely."""
    adv = torch.zeros_like(rewards)
    for i in range(rewards.shape[0]):
        positions = [t for t in range(rewards.shape[1]) if mask[i, t]]
        gae, next_value = 0.0, 0.0
        for t in reversed(positions):
            delta = rewards[i, t].item() + gamma * next_value - values[i, t].item()
            gae = delta + gamma * lam * gae
            adv[i, t] = gae
            next_value = values[i, t].item()
    return adv, (adv + values) * mask


def test_gae_tiny_by_hand() -> None:
    # t=1: delta = 1 - 0.4 = 0.6 -> A1 = 0.6; t=0: delta = 0.5*0.4 - 0.2 = 0 -> A0 = 0.25 * 0.6 = 0.15
    rewards = torch.tensor([[0.0, 1.0]], dtype=torch.float64)
    values = torch.tensor([[0.2, 0.4]], dtype=torch.float64)
    mask = torch.ones(1, 2, dtype=torch.float64)
    adv, ret = compute_advantage(
        "gae",
        token_level_rewards=rewards,
        response_mask=mask,
        values=values,
        config=AlgorithmConfig(gamma=0.5, lam=0.5),
    )
    torch.testing.assert_close(ret, torch.tensor([[0.35, 1.0]], dtype=torch.float64))
    torch.testing.assert_close(adv, _whiten_loop(torch.tensor([[0.15, 0.6]], dtype=torch.float64), mask))


@pytest.mark.parametrize(("gamma", "lam"), [(1.0, 1.0), (0.99, 0.95), (0.5, 0.0)])
def test_gae_matches_python_loop(gamma: float, lam: float) -> None:
    gen = torch.Generator().manual_seed(1)
    rewards = torch.randn(4, 6, generator=gen, dtype=torch.float64)
    values = torch.randn(4, 6, generator=gen, dtype=torch.float64)
    mask = row_mask([6, 4, 1, 5], 6)
    mask[3, 2] = 0.0  # a masked token inside a response (e.g. tool output)
    adv, ret = compute_advantage(
        "gae",
        token_level_rewards=rewards,
        response_mask=mask,
        values=values,
        config=AlgorithmConfig(gamma=gamma, lam=lam),
    )
    raw, expected_ret = _gae_loop(rewards, values, mask, gamma, lam)
    torch.testing.assert_close(ret, expected_ret)
    torch.testing.assert_close(adv, _whiten_loop(raw, mask))


def test_reinforce_plus_plus_by_hand() -> None:
    rewards = torch.tensor([[0.0, 0.0, 1.0], [0.0, 2.0, 9.0]], dtype=torch.float64)  # 9 is masked
    mask = row_mask([3, 2], 3)
    adv, ret = compute_advantage(
        "reinforce_plus_plus", token_level_rewards=rewards, response_mask=mask, config=AlgorithmConfig(gamma=0.5)
    )
    expected_ret = torch.tensor([[0.25, 0.5, 1.0], [1.0, 2.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(ret, expected_ret)
    torch.testing.assert_close(adv, _whiten_loop(expected_ret, mask))


def test_remax_subtracts_greedy_baseline() -> None:
    rewards = torch.tensor([[0.0, 1.0, 0.5], [2.0, 0.0, 0.0]], dtype=torch.float64)  # 0.5 is masked
    mask = row_mask([2, 3], 3)
    adv, ret = compute_advantage(
        "remax",
        token_level_rewards=rewards,
        response_mask=mask,
        reward_baselines=torch.tensor([0.25, 3.0], dtype=torch.float64),
    )
    torch.testing.assert_close(ret, torch.tensor([[1.0, 1.0, 0.0], [2.0, 0.0, 0.0]], dtype=torch.float64))
    torch.testing.assert_close(
        adv, torch.tensor([[0.75, 0.75, 0.0], [-1.0, -3.0, -3.0]], dtype=torch.float64)
    )


def test_missing_inputs_are_named() -> None:
    rewards, mask = torch.zeros(2, 3), torch.ones(2, 3)
    with pytest.raises(ValueError, match="'gae' needs values"):
        compute_advantage("gae", token_level_rewards=rewards, response_mask=mask)
    with pytest.raises(ValueError, match="'remax' needs reward_baselines"):
        compute_advantage("remax", token_level_rewards=rewards, response_mask=mask)
    with pytest.raises(ValueError, match="values has shape"):
        compute_advantage("gae", token_level_rewards=rewards, response_mask=mask, values=torch.zeros(2, 2))
    with pytest.raises(ValueError, match="reward_baselines has shape"):
        compute_advantage(
            "remax", token_level_rewards=rewards, response_mask=mask, reward_baselines=torch.zeros(3)
        )
    with pytest.raises(ValueError, match="2-D of one shape"):
        compute_advantage("remax", token_level_rewards=rewards, response_mask=mask[:, :2])


def test_advantages_carry_no_gradient() -> None:
    values = torch.zeros(1, 2, requires_grad=True)
    adv, ret = compute_advantage(
        "gae", token_level_rewards=torch.ones(1, 2), response_mask=torch.ones(1, 2), values=values
    )
    assert not adv.requires_grad and not ret.requires_grad

"""Optimal token baseline: per-position baselines weighted by path variance, by hand; sum_pi_squared."""

import math

import pytest
import torch

from siirl.algorithms import compute_advantage
from siirl.algorithms.logits import sum_pi_squared_from_logits


def _otb(rewards, mask, pi, sum_sq, index, **kw):
    return compute_advantage(
        "optimal_token_baseline", token_level_rewards=rewards, response_mask=mask, index=index,
        old_log_probs=pi.log(), sum_pi_squared=sum_sq, **kw,
    )


REWARDS = torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
PI = torch.tensor([[0.5, 0.5], [0.25, 1.0], [0.5, 0.5]], dtype=torch.float64)
SUM_SQ = torch.tensor([[0.5, 0.5], [0.5, 1.0], [0.5, 0.5]], dtype=torch.float64)
MASK = torch.ones(3, 2, dtype=torch.float64)


def test_per_position_baseline_by_hand() -> None:
    adv, returns = _otb(REWARDS, MASK, PI, SUM_SQ, ["a", "a", "b"])
    # w = 1 - 2 pi + sum pi^2: row 0 [0.5, 0.5] -> W [0.5, 1.0]; row 1 [1.0, 0.0] -> W [1.0, 1.0]
    # B_0 = (1 * 0.5 + 0 * 1.0) / 1.5 = 1/3, B_1 = (1 * 1.0 + 0 * 1.0) / 2 = 1/2
    expected = torch.tensor([[2 / 3, 0.5], [-1 / 3, -0.5], [2.0, 2.0]], dtype=torch.float64)
    assert torch.allclose(adv, expected, atol=1e-7)  # group "b" has one response: advantage = return
    assert torch.equal(returns, torch.tensor([[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]], dtype=torch.float64))


def test_is_weights_scale_the_variance_squared() -> None:
    weights = torch.tensor([[2.0, 2.0], [1.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
    adv, _ = _otb(REWARDS, MASK, PI, SUM_SQ, ["a", "a", "b"], rollout_is_weights=weights)
    # row 0's w is 4x: W [2.0, 4.0]; B_0 = 2 / 3, B_1 = 4 / 5
    assert adv[0].tolist() == pytest.approx([1 / 3, 1 / 5], abs=1e-7)


def test_padding_takes_no_part() -> None:
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    rewards = torch.tensor([[0.0, 1.0], [0.0, 5.0], [0.0, 2.0]], dtype=torch.float64)
    adv, _ = _otb(rewards, mask, PI, SUM_SQ, ["a", "a", "b"])
    # position 1: only row 0 runs, so its baseline is its own return and the padded entry is 0
    assert adv[0, 1].item() == pytest.approx(0.0, abs=1e-7) and adv[1, 1].item() == 0.0


def test_needs_sum_pi_squared() -> None:
    with pytest.raises(ValueError, match="needs sum_pi_squared"):
        compute_advantage("optimal_token_baseline", token_level_rewards=REWARDS, response_mask=MASK,
                          index=["a", "a", "b"], old_log_probs=PI.log())


def test_sum_pi_squared_matches_softmax() -> None:
    logits = torch.tensor([[[2.0, 0.0, -1.0], [100.0, 100.0, -50.0]]], dtype=torch.float64)
    expected = torch.softmax(logits, dim=-1).square().sum(-1)
    assert torch.allclose(sum_pi_squared_from_logits(logits), expected)
    assert sum_pi_squared_from_logits(logits)[0, 1].item() == pytest.approx(0.5)
    assert not math.isnan(sum_pi_squared_from_logits(torch.full((1, 4), 1e4)).item())

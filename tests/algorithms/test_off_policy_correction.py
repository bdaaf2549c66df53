"""Behaviour log-probs recorded at sampling drive the off-policy objectives of asynchronous training, checked
against values worked out by hand:

- AReaL's decoupled PPO: proximal policy = the actor's recomputed old log-probs, the loss clips
  ``pi / pi_prox`` and multiplies the behaviour importance weight ``pi_prox / pi_behav``, capped: dropped
  outside ``[floor, cap]`` (``rollout_is=token``, ``rollout_is_threshold='floor_cap'``, verl's IcePop) or
  clipped at the cap (``rollout_is_threshold=cap``, verl's token TIS);
- verl's fully-async recipe default (``rollout_correction.bypass_mode=true``, ``loss_type=ppo_clip``): the
  recorded log-probs are the old ones, per token, even where a partial rollout spans two policy versions.
"""

import math

import pytest
import torch

from siirl.algorithms.bypass_loss import compute_bypass_policy_loss
from siirl.algorithms.policy_loss import compute_policy_loss
from siirl.algorithms.rollout_correction import correct_rollout
from siirl.errors import ConfigError
from siirl.params.algorithm import RolloutCorrectionConfig
from siirl.params.is_threshold import parse_is_threshold

MASK = torch.ones(1, 3)
ADV = torch.tensor([[1.0, -1.0, 2.0]])
BEHAVIOUR = torch.tensor([[-1.0, -2.0, -0.5]])
#: pi_prox / pi_behav per token: 1.5, 3.0 (above a cap of 2), 0.8
PROXIMAL = BEHAVIOUR + torch.log(torch.tensor([[1.5, 3.0, 0.8]]))
#: pi / pi_prox per token: 1.1 (inside the 0.2 clip), 0.5 (clipped at 0.8 for a negative advantage), 1.0
CURRENT = PROXIMAL + torch.log(torch.tensor([[1.1, 0.5, 1.0]]))


def decoupled_loss(threshold):
    corrected = correct_rollout(PROXIMAL, BEHAVIOUR, MASK, RolloutCorrectionConfig(rollout_is="token",
                                                                                   rollout_is_threshold=threshold))
    log_prob = CURRENT.clone().requires_grad_(True)
    loss, _ = compute_policy_loss("vanilla", old_log_prob=PROXIMAL, log_prob=log_prob, advantages=ADV,
                                  response_mask=corrected.response_mask, loss_agg_mode="token-mean",
                                  rollout_is_weights=corrected.weights)
    loss.backward()
    return corrected, loss.item(), log_prob.grad


def test_decoupled_ppo_with_a_behaviour_weight_cap_matches_areal():
    corrected, loss, grad = decoupled_loss("0.5_2.0")
    assert torch.allclose(corrected.weights, torch.tensor([[1.5, 0.0, 0.8]]))  # 3.0 > cap drops out
    assert corrected.metrics["rollout_corr/rollout_is_oob_ratio"] == pytest.approx(1 / 3)
    # per token max(-A r, -A clip(r)) * w: -1.1 * 1.5, 0.8 * 0, -2 * 0.8; mean over the 3 tokens
    assert loss == pytest.approx((-1.65 + 0.0 - 1.6) / 3)
    # d/dlogp of -A r w / 3 where the ratio is not clipped (token 2 is, and weighs 0)
    assert torch.allclose(grad, torch.tensor([[-1.1 * 1.5 / 3, 0.0, -2 * 0.8 / 3]]))


def test_decoupled_ppo_with_a_truncated_behaviour_weight():
    corrected, loss, grad = decoupled_loss(2.0)
    assert torch.allclose(corrected.weights, torch.tensor([[1.5, 2.0, 0.8]]))  # 3.0 clipped at 2
    assert loss == pytest.approx((-1.65 + 0.8 * 2.0 - 1.6) / 3)
    assert torch.allclose(grad, torch.tensor([[-1.1 * 1.5 / 3, 0.0, -2 * 0.8 / 3]]))


def test_fully_async_default_trains_on_each_tokens_own_behaviour_log_prob():
    """A partial rollout: tokens 0-1 sampled by version 4, token 2 by version 5 after a weight sync; the loss
    compares the current policy with whichever version sampled each token."""
    version_4, version_5 = torch.tensor([[-1.0, -2.0, -9.0]]), torch.tensor([[-7.0, -7.0, -0.5]])
    recorded = torch.where(torch.tensor([[True, True, False]]), version_4, version_5)
    current = recorded + torch.log(torch.tensor([[1.3, 0.9, 1.0]]))
    advantages = torch.tensor([[1.0, 1.0, -1.0]])
    loss, metrics = compute_bypass_policy_loss(
        RolloutCorrectionConfig(bypass_mode=True), rollout_log_prob=recorded, log_prob=current,
        advantages=advantages, response_mask=MASK, loss_agg_mode="token-mean",
    )
    # ratios 1.3 (clipped to 1.2), 0.9, 1.0: -1.2, -0.9, +1.0
    assert loss.item() == pytest.approx((-1.2 - 0.9 + 1.0) / 3)
    assert metrics["clipfrac_high"] == pytest.approx(1 / 3)
    assert metrics["rollout_corr/kl"] == pytest.approx(-(math.log(1.3) + math.log(0.9)) / 3)


@pytest.mark.parametrize(("value", "parsed"), [(2.0, (2.0, None)), ("3", (3.0, None)), ("0.5_5.0", (5.0, 0.5))])
def test_threshold_forms(value, parsed):
    assert parse_is_threshold(value) == parsed


@pytest.mark.parametrize("value", ["5.0_0.5", "0_2.0", "-2", "a_b", True, None])
def test_bad_threshold_is_one_line(value):
    with pytest.raises(ConfigError, match="rollout_is_threshold") as info:
        parse_is_threshold(value)
    assert "\n" not in str(info.value)

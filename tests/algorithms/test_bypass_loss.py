"""Rollout correction's bypass mode loss against hand-computed values: the correction compares the current
policy with the rollout inside the loss; ppo_clip clips the ratio current / rollout and ignores the IS
weights, reinforce multiplies them in; both drop the rejected tokens."""

import math

import pytest
import torch

from siirl.algorithms.bypass_loss import compute_bypass_policy_loss
from siirl.errors import ConfigError
from siirl.params.algorithm import RolloutCorrectionConfig

ROLLOUT = torch.tensor([[-1.0, -1.0, -2.0, -1.0]])
# current - rollout per token: ratios e^0.1, e^-0.5, e^1 (above the 2.0 threshold), 1
SHIFT = torch.tensor([[0.1, -0.5, 1.0, 0.0]])
ADVANTAGES = torch.tensor([[1.0, 1.0, -1.0, 1.0]])
MASK = torch.ones(1, 4)
RATIOS = [math.exp(0.1), math.exp(-0.5), math.e, 1.0]
CURRENT = [-0.9, -1.5, -1.0, -1.0]


def _loss(**options):
    log_prob = (ROLLOUT + SHIFT).requires_grad_(True)
    loss, metrics = compute_bypass_policy_loss(
        RolloutCorrectionConfig(bypass_mode=True, **options), rollout_log_prob=ROLLOUT, log_prob=log_prob,
        advantages=ADVANTAGES, response_mask=MASK, loss_agg_mode="token-mean",
    )
    loss.backward()
    return loss.item(), log_prob.grad[0].tolist(), metrics


def test_ppo_clip_is_the_clipped_objective_on_current_over_rollout():
    loss, _, metrics = _loss(loss_type="ppo_clip")
    # per token max(-A r, -A clip(r, 0.8, 1.2)): -r0 (inside), -r1 (below, A > 0 keeps r), +r2 (A < 0), -1
    assert loss == pytest.approx((-RATIOS[0] - RATIOS[1] + RATIOS[2] - 1.0) / 4, abs=1e-6)
    assert metrics["ppo_kl"] == pytest.approx(-sum(SHIFT[0].tolist()) / 4, abs=1e-6)
    assert metrics["rollout_corr/kl"] == pytest.approx(-sum(SHIFT[0].tolist()) / 4, abs=1e-6)


def test_ppo_clip_reports_the_is_weights_without_applying_them():
    plain, plain_grad, _ = _loss(loss_type="ppo_clip")
    weighted, weighted_grad, metrics = _loss(loss_type="ppo_clip", rollout_is="token", rollout_is_threshold=2.0)
    assert weighted == pytest.approx(plain) and weighted_grad == pytest.approx(plain_grad)
    assert metrics["rollout_corr/rollout_is_mean"] == pytest.approx(sum(RATIOS) / 4, abs=1e-6)


def test_ppo_clip_drops_rejected_tokens():
    loss, grad, metrics = _loss(loss_type="ppo_clip", rollout_rs="token", rollout_rs_threshold=2.0)
    assert loss == pytest.approx((-RATIOS[0] - RATIOS[1] - 1.0) / 3, abs=1e-6)  # e^1 > 2 rejected
    assert grad[2] == 0.0
    assert metrics["rollout_corr/rollout_rs_masked_fraction"] == pytest.approx(0.25)


def test_reinforce_multiplies_truncated_detached_weights():
    loss, grad, _ = _loss(loss_type="reinforce", rollout_is="token", rollout_is_threshold=2.0)
    weights = [RATIOS[0], RATIOS[1], 2.0, 1.0]
    terms = [-a * lp * w for a, lp, w in zip(ADVANTAGES[0].tolist(), CURRENT, weights)]
    assert loss == pytest.approx(sum(terms) / 4, abs=1e-6)
    # the weights are constants: d/d log pi = -A w / N, no clipping anywhere
    assert grad == pytest.approx([-a * w / 4 for a, w in zip(ADVANTAGES[0].tolist(), weights)], abs=1e-6)


def test_reinforce_drops_rejected_tokens():
    loss, grad, _ = _loss(loss_type="reinforce", rollout_is="token", rollout_rs="token", rollout_rs_threshold=2.0)
    kept = [(0.9 * RATIOS[0]), (1.5 * RATIOS[1]), 1.0]  # -A * log pi * w of tokens 0, 1, 3
    assert loss == pytest.approx(sum(kept) / 3, abs=1e-6)
    assert grad[2] == 0.0


def test_reinforce_without_is_is_plain_policy_gradient():
    loss, _, _ = _loss(loss_type="reinforce")
    assert loss == pytest.approx((0.9 + 1.5 - 1.0 + 1.0) / 4, abs=1e-6)


def test_unknown_loss_type_is_one_line():
    with pytest.raises(ConfigError, match="unknown rollout-correction loss_type 'dpo'"):
        _loss(loss_type="dpo")

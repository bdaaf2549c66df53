"""CISPO and GPG: losses against their direct formulas, gradients, the GPG estimator by hand."""

import pytest
import torch

from siirl.algorithms import compute_advantage, compute_policy_loss
from siirl.config_checks import load_config
from siirl.errors import ConfigError
from siirl.params.model import ActorConfig


def _loss(mode, log_prob, old, adv, mask, config, **kw):
    return compute_policy_loss(
        mode, old_log_prob=old, log_prob=log_prob, advantages=adv, response_mask=mask,
        loss_agg_mode="token-mean", config=config, **kw,
    )


RATIOS = torch.tensor([[0.5, 0.9, 1.1, 1.6, 3.0]], dtype=torch.float64)
ADV = torch.tensor([[1.0, -2.0, 0.5, 1.0, -1.0]], dtype=torch.float64)
MASK = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]], dtype=torch.float64)
OLD = torch.tensor([[-1.0, -0.5, -2.0, -0.3, -1.2]], dtype=torch.float64)


def test_cispo_matches_formula_and_keeps_every_gradient() -> None:
    log_prob = (OLD + RATIOS.log()).requires_grad_(True)
    config = ActorConfig(clip_ratio_low=0.2, clip_ratio_high=0.28)
    loss, metrics = _loss("cispo", log_prob, OLD, ADV, MASK, config)
    weight = torch.tensor([[0.8, 0.9, 1.1, 1.28, 1.28]], dtype=torch.float64)  # clip(r, 0.8, 1.28)
    expected = (-(weight * ADV * log_prob.detach()) * MASK).sum() / 4
    assert loss.item() == pytest.approx(expected.item())
    loss.backward()
    # d loss / d log_prob = -w * A / 4 on every valid token, clipped ones included (unlike PPO)
    assert torch.allclose(log_prob.grad, -(weight * ADV) * MASK / 4)
    assert metrics["clipfrac_low"] == pytest.approx(0.25)
    assert metrics["clipfrac_high"] == pytest.approx(0.25)


def test_cispo_large_low_bound_leaves_weight_unbounded_below() -> None:
    config = ActorConfig(clip_ratio_low=10, clip_ratio_high=0.2)  # verl's example
    loss, metrics = _loss("cispo", OLD + RATIOS.log(), OLD, ADV, MASK, config)
    weight = torch.tensor([[0.5, 0.9, 1.1, 1.2, 1.2]], dtype=torch.float64)
    assert loss.item() == pytest.approx(((-(weight * ADV * OLD.add(RATIOS.log()))) * MASK).sum().item() / 4)
    assert metrics["clipfrac_low"] == 0.0


def test_cispo_negative_range_is_refused_before_ray() -> None:
    with pytest.raises(ConfigError, match=r"^bad config: actor_rollout_ref.actor.clip_ratio_low and clip_ratio_high must "
                       r"be >= 0, got -0.1 and 0.2 \(loss_mode=cispo\)$"):
        load_config(["actor_rollout_ref.actor.policy_loss.loss_mode=cispo", "actor_rollout_ref.actor.clip_ratio_low=-0.1"])
    load_config(["actor_rollout_ref.actor.policy_loss.loss_mode=cispo", "actor_rollout_ref.actor.clip_ratio_low=10"])


def test_gpg_loss_is_plain_policy_gradient() -> None:
    log_prob = (OLD + RATIOS.log()).requires_grad_(True)
    loss, metrics = _loss("gpg", log_prob, OLD, ADV, MASK, ActorConfig())
    assert loss.item() == pytest.approx(((-ADV * log_prob.detach()) * MASK).sum().item() / 4)
    loss.backward()
    assert torch.allclose(log_prob.grad, -ADV * MASK / 4)
    assert set(metrics) == {"ppo_kl"}


def test_rollout_is_weights_scale_each_token() -> None:
    weights = torch.tensor([[2.0, 0.0, 1.0, 0.5, 7.0]], dtype=torch.float64)
    plain, _ = _loss("gpg", OLD, OLD, ADV, MASK, ActorConfig())
    weighted, _ = _loss("gpg", OLD, OLD, ADV, MASK, ActorConfig(), rollout_is_weights=weights)
    assert weighted.item() == pytest.approx(((-ADV * OLD * weights) * MASK).sum().item() / 4)
    assert weighted.item() != pytest.approx(plain.item())


def test_gpg_advantage_by_hand() -> None:
    # group a: scores 1, 0, 0 (mean 1/3); group b: 1, 1 (mean 1); group c: one response scoring 0.
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0])
    rewards = torch.zeros(6, 3)
    rewards[:, -1] = scores
    index = ["a", "a", "a", "b", "b", "c"]
    adv, returns = compute_advantage("gpg", token_level_rewards=rewards, response_mask=torch.ones(6, 3), index=index)
    alpha = 6 / 3  # rows / rows with a non-zero score
    expected = alpha * torch.tensor([2 / 3, -1 / 3, -1 / 3, 0.0, 0.0, 0.0])
    assert torch.allclose(adv[:, 0], expected)
    assert torch.equal(adv, returns)

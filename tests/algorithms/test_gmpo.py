"""GMPO (loss_mode=geo_mean): the geometric-mean sequence objective against numbers worked out by hand."""

import math

import pytest
import torch

from siirl.algorithms import compute_policy_loss
from siirl.config_checks import load_config
from siirl.errors import ConfigError
from siirl.params.model import ActorConfig

# row 0: A = +1 on 3 valid tokens, log ratios 0.1, 0.6 (capped at 0.4), -0.9 (kept: A > 0 caps only above)
# row 1: A = -2 on 2 valid tokens, log ratios -0.7 (floored at -0.4), 0.2
LOG_RATIO = torch.tensor([[0.1, 0.6, -0.9, 5.0], [-0.7, 0.2, 3.0, 3.0]], dtype=torch.float64)
ADV = torch.tensor([[1.0, 1.0, 1.0, 1.0], [-2.0, -2.0, -2.0, -2.0]], dtype=torch.float64)
MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]], dtype=torch.float64)
OLD = torch.full_like(LOG_RATIO, -1.0)
CONFIG = ActorConfig(clip_ratio_low=0.4, clip_ratio_high=0.4)  # verl's example


def _loss(agg_mode="token-mean", config=CONFIG, **kw):
    log_prob = (OLD + LOG_RATIO).requires_grad_(True)
    loss, metrics = compute_policy_loss(
        "geo_mean", old_log_prob=OLD, log_prob=log_prob, advantages=ADV, response_mask=MASK,
        loss_agg_mode=agg_mode, config=config, **kw,
    )
    return loss, metrics, log_prob


def test_geo_mean_loss_and_gradient_by_hand() -> None:
    loss, metrics, log_prob = _loss()
    ratio_0 = math.exp((0.1 + 0.4 - 0.9) / 3)
    ratio_1 = math.exp((-0.4 + 0.2) / 2)
    expected = (-1.0 * ratio_0 + 2.0 * ratio_1) / 2  # mean over the two sequences
    assert loss.item() == pytest.approx(expected)
    loss.backward()
    # d/d log_prob: clipped tokens and padding get none; a kept token gets -A_i * ratio_i / n_i / batch
    grad = torch.tensor([[-ratio_0 / 3 / 2, 0.0, -ratio_0 / 3 / 2, 0.0], [0.0, 2 * ratio_1 / 2 / 2, 0.0, 0.0]])
    assert torch.allclose(log_prob.grad, grad.double())
    assert metrics["clipfrac_high"] == pytest.approx(1 / 5)
    assert metrics["clipfrac_low"] == pytest.approx(1 / 5)
    assert metrics["ppo_kl"] == pytest.approx(-(0.1 + 0.6 - 0.9 - 0.7 + 0.2) / 5)


def test_geo_mean_is_a_sequence_mean_whatever_the_aggregation_mode() -> None:
    token_mean, _, _ = _loss("token-mean")
    seq_sum, _, _ = _loss("seq-mean-token-sum")
    assert seq_sum.item() == pytest.approx(token_mean.item())


def test_geo_mean_data_parallel_counts_give_the_global_mean() -> None:
    local, _, _ = _loss(global_seq_count=8, global_token_count=20, dp_size=2)
    whole, _, _ = _loss()
    assert local.item() == pytest.approx(whole.item() * 2 / 8 * 2)


def test_geo_mean_rollout_weights_enter_as_sequence_geometric_means() -> None:
    weights = torch.tensor([[2.0, 0.5, 4.0, 9.0], [1.0, 0.25, 9.0, 9.0]], dtype=torch.float64)
    loss, _, _ = _loss(rollout_is_weights=weights)
    ratio_0, ratio_1 = math.exp(-0.4 / 3), math.exp(-0.2 / 2)
    weight_0, weight_1 = (2.0 * 0.5 * 4.0) ** (1 / 3), 0.25 ** 0.5
    assert loss.item() == pytest.approx((-ratio_0 * weight_0 + 2.0 * ratio_1 * weight_1) / 2)


def test_geo_mean_negative_range_is_refused_before_ray() -> None:
    with pytest.raises(ConfigError, match=r"clip_ratio_low and clip_ratio_high must be >= 0, got 0.2 and -1.0 "
                       r"\(loss_mode=geo_mean\)$"):
        load_config(["actor_rollout_ref.actor.policy_loss.loss_mode=geo_mean", "actor_rollout_ref.actor.clip_ratio_high=-1"])

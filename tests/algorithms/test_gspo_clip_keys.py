"""GSPO's clip range comes from verl's ``clip_ratio_low/high`` when a command sets them under loss_mode gspo."""

from __future__ import annotations

import math

import pytest
import torch

from siirl.algorithms import compute_policy_loss
from siirl.config_checks import load_config
from siirl.params.model import ActorConfig

# Both rows have sequence log-ratio 0.1 (ratio e^0.1 = 1.105); row 0 has A > 0, row 1 A < 0.
LOG_PROB = torch.tensor([[0.3, -0.1, 0.1], [0.1, 0.1, 0.1]], dtype=torch.float64)
ADV = torch.tensor([[1.0] * 3, [-1.0] * 3], dtype=torch.float64)
MASK = torch.ones(2, 3, dtype=torch.float64)
S = math.exp(0.1)


def _gspo(config: ActorConfig) -> tuple[float, dict]:
    loss, metrics = compute_policy_loss(
        "gspo", old_log_prob=torch.zeros_like(LOG_PROB), log_prob=LOG_PROB, advantages=ADV, response_mask=MASK,
        loss_agg_mode="seq-mean-token-mean", config=config,
    )
    return loss.item(), metrics


def test_clip_ratio_keys_are_gspo_range_when_set():
    # high = 0.2 does not clip e^0.1: loss = (-s + s) / 2 = 0 and nothing is clipped.
    loss, metrics = _gspo(ActorConfig(clip_ratio_low=0.05, clip_ratio_high=0.2))
    assert loss == pytest.approx(0.0) and metrics["clipfrac_high"] == 0.0
    # high = 0.05 clips row 0 at 1.05.
    loss, metrics = _gspo(ActorConfig(clip_ratio_low=0.05, clip_ratio_high=0.05))
    assert loss == pytest.approx((-1.05 + S) / 2) and metrics["clipfrac_high"] == pytest.approx(0.5)


def test_gspo_keys_win_and_defaults_stay_tiny():
    loss, _ = _gspo(ActorConfig(clip_ratio_high=0.2, gspo_clip_ratio_high=0.05))
    assert loss == pytest.approx((-1.05 + S) / 2)
    loss, metrics = _gspo(ActorConfig())  # nothing set: the paper's 4e-4 clips row 0
    assert loss == pytest.approx((-(1 + 4e-4) + S) / 2) and metrics["clipfrac_high"] == pytest.approx(0.5)


def test_clip_ratio_alone_sets_the_token_range_not_gspo():
    """verl's ``clip_ratio`` is the vanilla range where low/high are unset; GSPO keeps its own default."""
    vanilla = compute_policy_loss(
        "vanilla", old_log_prob=torch.zeros(1, 1), log_prob=torch.full((1, 1), 0.5), advantages=torch.ones(1, 1),
        response_mask=torch.ones(1, 1), loss_agg_mode="token-mean", config=ActorConfig(clip_ratio=0.3),
    )[0]
    assert vanilla.item() == pytest.approx(-1.3)
    loss, _ = _gspo(ActorConfig(clip_ratio=0.3))
    assert loss == pytest.approx((-(1 + 4e-4) + S) / 2)


def test_command_line_clip_keys_reach_the_gspo_loss():
    cfg = load_config(["algorithm.adv_estimator=GSPO", "actor_rollout_ref.actor.clip_ratio_low=0.0003",
                       "actor_rollout_ref.actor.clip_ratio_high=0.05"])
    actor = cfg.actor_rollout_ref.actor
    assert actor.policy_loss.loss_mode == "gspo"
    assert _gspo(actor)[0] == pytest.approx((-1.05 + S) / 2)

"""SAPO: the soft gate sigmoid(tau (r - 1)) * 4 / tau against values worked by hand, its gradient, its keys."""

import math

import pytest
import torch

from siirl.algorithms import compute_policy_loss
from siirl.config_checks import load_config
from siirl.errors import ConfigError
from siirl.params.model import ActorConfig, PolicyLossConfig

LN3 = math.log(3.0)
#: Row 0: A=+1 at r=1, A=+2 at r=1+ln3. Row 1: A=-1 at r=1-ln3/2, A=-1 at r=1, A=0 at r=1. One padded token.
ADV = torch.tensor([[1.0, 2.0, 0.0], [-1.0, -1.0, 0.0]], dtype=torch.float64)
RATIO = torch.tensor([[1.0, 1.0 + LN3, 1.0], [1.0 - LN3 / 2, 1.0, 1.0]], dtype=torch.float64)
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
OLD = torch.tensor([[-1.0, -2.0, -0.5], [-0.7, -1.5, -0.2]], dtype=torch.float64)


def _loss(config, loss_agg_mode="token-mean"):
    log_prob = (OLD + RATIO.log()).requires_grad_(True)
    loss, metrics = compute_policy_loss(
        "sapo", old_log_prob=OLD, log_prob=log_prob, advantages=ADV, response_mask=MASK,
        loss_agg_mode=loss_agg_mode, config=config,
    )
    return loss, metrics, log_prob


def test_gate_values_and_sequence_mean_by_hand():
    # tau_pos=1, tau_neg=2. Gates: r=1 -> sigmoid(0) * 4 / tau = 2 / tau; tau (r - 1) = ln3 -> 0.75 * 4 / tau;
    # tau (r - 1) = -ln3 -> 0.25 * 4 / tau.
    #   row 0: A=+1, gate 2 -> -2;  A=+2, gate 3 -> -6;              mean -4
    #   row 1: A=-1, gate 0.5 -> 0.5; A=-1, gate 1 -> 1; A=0 -> 0;   mean 0.5
    # seq-mean-token-mean (verl forces it, whatever loss_agg_mode says): (-4 + 0.5) / 2 = -1.75
    # (token-mean would be -6.5 / 5 = -1.3).
    loss, metrics, log_prob = _loss(ActorConfig(tau_pos=1.0, tau_neg=2.0))
    assert loss.item() == pytest.approx(-1.75)
    assert metrics["clipfrac_low"] == metrics["clipfrac_high"] == 0.0
    assert metrics["ppo_kl"] == pytest.approx(-(math.log(1 + LN3) + math.log(1 - LN3 / 2)) / 5)  # mean -log r
    loss.backward()
    # d(-f(r) A)/d log pi = -A * 4 sigma (1 - sigma) * r; at r = 1 that is -A (the plain policy gradient).
    # Token (0, 0): -1 * 1 / (2 rows * 2 tokens) = -0.25. Token (1, 0): sigma = 0.25 ->
    # +1 * 4 * 0.25 * 0.75 * (1 - ln3/2) / (2 rows * 3 tokens).
    assert log_prob.grad[0, 0].item() == pytest.approx(-0.25)
    assert log_prob.grad[1, 0].item() == pytest.approx(0.75 * (1 - LN3 / 2) / 6)
    assert log_prob.grad[0, 1].item() == pytest.approx(-2 * 4 * 0.75 * 0.25 * (1 + LN3) / 4)
    assert log_prob.grad[0, 2].item() == 0.0  # padding


def test_policy_loss_keys_of_verls_scripts_take_precedence_over_the_actors():
    # policy_loss.tau_neg=2 (as verl's current scripts write it) beats actor.tau_neg=7; tau_pos falls back to 1.
    config = ActorConfig(tau_pos=1.0, tau_neg=7.0, policy_loss=PolicyLossConfig(loss_mode="sapo", tau_neg=2.0))
    loss, _, _ = _loss(config)
    assert loss.item() == pytest.approx(-1.75)


def test_verl_defaults_and_a_bad_temperature():
    # Defaults 1.0 / 1.05: row 1's gates at tau 1.05 are sigmoid(-1.05 ln3 / 2) * 4 / 1.05 and 2 / 1.05.
    loss, _, _ = _loss(ActorConfig())
    sig = 1 / (1 + math.exp(1.05 * LN3 / 2))
    row1 = (sig * 4 / 1.05 + 2 / 1.05) / 3
    assert loss.item() == pytest.approx((-4 + row1) / 2)
    with pytest.raises(ConfigError, match=r"^bad config: actor_rollout_ref.actor.tau_neg=0.0 is invalid; expected > 0$"):
        load_config(["actor_rollout_ref.actor.tau_neg=0"])  # its field's rule, before Ray
    with pytest.raises(ConfigError, match=r"policy_loss.tau_pos=-1.0 is invalid; expected null or > 0$"):
        load_config(["actor_rollout_ref.actor.policy_loss.tau_pos=-1"])

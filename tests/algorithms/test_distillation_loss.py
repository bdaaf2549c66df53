"""On-policy distillation's loss term (verl's definition) against values worked by hand."""

import math

import pytest
import torch

from siirl.algorithms.distillation import distillation_loss, with_distillation
from siirl.params.distillation import DistillationLossConfig

#: One response of three valid tokens and one padded. Student log-probs s, teacher log-probs t:
#: k1 = s - t = [0.5, -1.0, 0.0]; k3 = exp(t - s) - (t - s) - 1 = [e^-0.5 - 0.5, e - 2, 0].
STUDENT = torch.tensor([[-1.0, -2.0, -0.5, -3.0]], dtype=torch.float64)
TEACHER = torch.tensor([[-1.5, -1.0, -0.5, -0.1]], dtype=torch.float64)
MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0]], dtype=torch.float64)
K3 = [math.exp(-0.5) - 0.5, math.e - 2.0, 0.0]


def _term(cfg, old=None):
    log_prob = STUDENT.clone().requires_grad_(True)
    loss, metrics = distillation_loss(
        cfg, log_prob=log_prob, teacher_log_prob=TEACHER, old_log_prob=STUDENT if old is None else old,
        response_mask=MASK, loss_agg_mode="token-mean",
    )
    loss.backward()
    return loss.item(), metrics, log_prob.grad[0].tolist()


def test_supervised_k3_is_the_token_mean_of_the_reverse_kl_estimate():
    loss, metrics, grad = _term(DistillationLossConfig(loss_mode="k3", use_policy_gradient=False))
    assert loss == pytest.approx(sum(K3) / 3)  # (0.10653 + 0.71828 + 0) / 3 = 0.27494
    assert float(metrics["distillation/abs_loss"]) == pytest.approx(sum(K3) / 3)
    # d k3 / d s = 1 - exp(t - s): [1 - e^-0.5, 1 - e, 0], over 3 tokens; padding gets nothing
    assert grad == pytest.approx([(1 - math.exp(-0.5)) / 3, (1 - math.e) / 3, 0.0, 0.0])


def test_loss_max_clamp_caps_each_token():
    loss, _, grad = _term(DistillationLossConfig(loss_mode="k3", use_policy_gradient=False, loss_max_clamp=0.5))
    assert loss == pytest.approx((K3[0] + 0.5) / 3)
    assert grad[1] == 0.0  # the clamped token passes no gradient


def test_policy_gradient_form_rewards_tokens_the_teacher_likes():
    # k1 = [0.5, -1, 0] -> advantages -k1 = [-0.5, 1, 0]; at ratio 1 vanilla PPO's loss is -A per token:
    # token-mean (0.5 - 1 + 0) / 3 = -1/6, and its gradient -A / 3.
    loss, metrics, grad = _term(DistillationLossConfig(loss_mode="k1", use_policy_gradient=True))
    assert loss == pytest.approx(-1 / 6)
    assert grad == pytest.approx([0.5 / 3, -1 / 3, 0.0, 0.0])
    assert float(metrics["distillation/abs_loss"]) == pytest.approx(0.5)  # (0.5 + 1 + 0) / 3
    assert float(metrics["distillation/pg_clipfrac"]) == 0.0


def test_policy_gradient_form_clips_with_its_own_range():
    # The old policy gave token 1 half a nat less: ratio e^0.5 = 1.65 > 1 + 0.2 with A = +1, so PPO clips it
    # to -1.2 and it passes no gradient: loss (0.5 - 1.2 + 0) / 3.
    old = STUDENT - torch.tensor([[0.0, 0.5, 0.0, 0.0]], dtype=torch.float64)
    loss, metrics, grad = _term(DistillationLossConfig(loss_mode="k1", use_policy_gradient=True), old=old)
    assert loss == pytest.approx(-0.7 / 3)
    assert grad[1] == 0.0
    assert float(metrics["distillation/pg_clipfrac"]) == pytest.approx(1 / 3)


def test_task_loss_is_kept_weighted_or_dropped():
    task, term = torch.tensor(2.0), torch.tensor(0.5)
    kept = DistillationLossConfig(use_task_rewards=True, distillation_loss_coef=0.1)
    assert with_distillation(task, term, kept).item() == pytest.approx(2.05)
    assert with_distillation(task, term, DistillationLossConfig(use_task_rewards=False)).item() == 0.5

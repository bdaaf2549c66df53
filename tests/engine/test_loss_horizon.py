"""``loss_agg_horizon`` divides every loss term of seq-mean-token-sum-norm, not only the policy loss."""

from __future__ import annotations

import pytest
import torch
from engine_testutils import actor_config, critic_config, make_batch, model_config

from siirl.algorithms import kl_loss
from siirl.engine.workers import ActorWorker, CriticWorker
from siirl.engine.workers.base import LossScale

ROWS, WIDTH, HORIZON = 4, 6, 4096


def _scale(batch) -> LossScale:
    return LossScale(int(batch["response_mask"].sum()), ROWS, 1)


def _actor_terms(model_dir, horizon: int) -> dict[str, float]:
    cfg = actor_config(
        loss_agg_mode="seq-mean-token-sum-norm", loss_agg_horizon=horizon, use_kl_loss=True,
        kl_loss_type="k3", entropy_coeff=0.01,
    )
    actor = ActorWorker(model_config(model_dir), cfg, "cpu")
    batch = make_batch(ROWS, response_len=WIDTH, seed=5)
    out = actor._micro_loss(batch, _scale(batch))
    return {name: float(out.summed[name].detach()) for name in ("pg_loss", "kl_loss", "entropy")}


def test_entropy_and_kl_follow_the_horizon(tiny_model_dir, single_process_group):
    # Without a horizon the divisor is the (trimmed) micro-batch width, so compare two explicit horizons.
    half_terms = _actor_terms(tiny_model_dir, HORIZON // 2)
    horizon_terms = _actor_terms(tiny_model_dir, HORIZON)
    for name in ("pg_loss", "kl_loss", "entropy"):
        assert horizon_terms[name] == pytest.approx(half_terms[name] / 2, rel=1e-5), name


def test_kl_loss_numbers_of_a_4x6_batch_at_horizon_4096():
    """A 4x6 batch whose k3 KL is 1.963e-3 per token: 2.875e-6 at horizon 4096, 1.963e-3 at the width."""
    gap = 0.06201  # k3 = exp(g) - g - 1 = 1.963e-3 at this log-ratio
    log_prob = torch.full((ROWS, WIDTH), -2.0)
    ref = log_prob + gap
    mask = torch.ones(ROWS, WIDTH)
    at_horizon = kl_loss(log_prob, ref, mask, "k3", "seq-mean-token-sum-norm", global_seq_count=ROWS, horizon=HORIZON)
    at_width = kl_loss(log_prob, ref, mask, "k3", "seq-mean-token-sum-norm", global_seq_count=ROWS)
    assert float(at_horizon) == pytest.approx(2.875e-6, rel=1e-3)
    assert float(at_width) == pytest.approx(1.963e-3, rel=1e-3)


def test_value_loss_follows_the_horizon(tiny_model_dir, single_process_group):
    critic = CriticWorker(critic_config(tiny_model_dir, loss_agg_mode="seq-mean-token-sum-norm"), "cpu")
    critic.model.eval()  # same forward both times; only the divisor differs
    batch = make_batch(ROWS, response_len=WIDTH, seed=5)
    losses = {}
    for horizon in (HORIZON // 2, HORIZON):
        critic.cfg.loss_agg_horizon = horizon
        losses[horizon] = float(critic._micro_loss(batch, _scale(batch)).loss.detach())
    assert losses[HORIZON] == pytest.approx(losses[HORIZON // 2] / 2, rel=1e-5)

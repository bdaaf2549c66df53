"""Critic: values on response tokens only, and a few updates on a fixed batch lower the value loss."""

from __future__ import annotations

import torch
from engine_testutils import critic_config, make_batch, model_config

from siirl.engine.workers import CriticWorker, ReferenceWorker
from siirl.params.model import RefConfig


def test_critic_update_reduces_value_loss(tiny_model_dir, single_process_group):
    critic = CriticWorker(
        critic_config(tiny_model_dir, lr=5e-3, ppo_mini_batch_size=4, ppo_max_token_len_per_gpu=48), "cpu"
    )
    batch = make_batch(8, seed=21)
    values = critic.compute_values(batch)
    assert values.shape == batch["response_mask"].shape
    assert torch.all(values[batch["response_mask"] == 0] == 0)
    assert values[batch["response_mask"] == 1].abs().sum() > 0

    losses = []
    for _ in range(6):
        batch["values"] = critic.compute_values(batch)  # fresh rollout-time values: clipping stays local
        metrics = critic.update_critic(batch)
        losses.append(metrics["critic/vf_loss"])
        assert {"critic/vf_clipfrac", "critic/grad_norm", "critic/lr", "critic/vpred_mean"} <= set(metrics)
    assert losses[-1] < 0.7 * losses[0], losses


def test_reference_is_frozen_and_deterministic(tiny_model_dir, single_process_group):
    ref = ReferenceWorker(
        model_config(tiny_model_dir, use_remove_padding=False),
        RefConfig(log_prob_use_dynamic_bsz=False, log_prob_micro_batch_size_per_gpu=3),
        "cpu",
    )
    batch = make_batch(7, seed=22)
    first = ref.compute_ref_log_prob(batch)
    assert not any(p.requires_grad for p in ref.model.parameters())
    torch.testing.assert_close(ref.compute_ref_log_prob(batch), first, atol=0, rtol=0)
    assert torch.all(first[batch["response_mask"] == 0] == 0)
    assert torch.all(first[batch["response_mask"] == 1] < 0)


def test_critic_has_no_dropout_while_training(tiny_model_dir, single_process_group):
    """The values the critic is trained on are the values it reports (the head's default dropout is off)."""
    critic = CriticWorker(critic_config(tiny_model_dir), "cpu")
    batch = make_batch(4, seed=2)
    reported = critic.compute_values(batch)
    critic.model.train()
    training = critic.forward_batch(batch, critic.batching, lambda head, labels: head[:, 0].float())
    torch.testing.assert_close(training, reported, atol=0, rtol=0)

"""A command that sets a micro-batch size gets micro-batches of that size (dynamic batching off) in the
worker itself; without one, token-budget batching stays on."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from engine_testutils import make_batch, model_config

from siirl.config_checks import load_config
from siirl.engine.workers.actor import ActorWorker

ROWS = 8


def _actor(tiny_model_dir, overrides: list[str], **model_keys) -> ActorWorker:
    cfg = load_config(overrides).actor_rollout_ref
    actor_cfg = replace(cfg.actor, ppo_mini_batch_size=ROWS, optim=replace(cfg.actor.optim, lr=1e-3, lr_scheduler_type="constant"))
    return ActorWorker(replace(model_config(tiny_model_dir), **model_keys), actor_cfg, "cpu", log_prob_cfg=cfg.rollout)


def _micro_rows(worker: ActorWorker, monkeypatch, action) -> list[int]:
    """Rows of every micro-batch the worker runs its model on during ``action``."""
    seen: list[int] = []
    real = worker.forward_micro_batch

    def spy(micro, reduce):
        seen.append(micro.batch_size[0])
        return real(micro, reduce)

    monkeypatch.setattr(worker, "forward_micro_batch", spy)
    action()
    return seen


def test_explicit_sizes_are_the_micro_batches(tiny_model_dir, single_process_group, monkeypatch):
    worker = _actor(tiny_model_dir, ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
                                     "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4"])
    batch = make_batch(ROWS)
    assert _micro_rows(worker, monkeypatch, lambda: worker.compute_log_prob(batch)) == [4, 4]
    assert _micro_rows(worker, monkeypatch, lambda: worker.update_policy(batch)) == [2, 2, 2, 2]


def test_default_keeps_token_budget_batching(tiny_model_dir, single_process_group, monkeypatch):
    worker = _actor(tiny_model_dir, [])
    # The whole batch fits in the default token budget: one micro-batch, whatever the default size says.
    assert _micro_rows(worker, monkeypatch, lambda: worker.compute_log_prob(make_batch(ROWS))) == [ROWS]
    assert worker.train_batching.use_dynamic_bsz and worker.log_prob_batching.use_dynamic_bsz


@pytest.mark.parametrize(
    ("overrides", "dynamic"),
    [
        ([], True),
        (["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2"], False),
        (["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "actor_rollout_ref.actor.use_dynamic_bsz=true"],
         True),
        (["actor_rollout_ref.actor.use_dynamic_bsz=false"], False),
    ],
)
def test_resolution_at_load(overrides, dynamic):
    actor = load_config(overrides).actor_rollout_ref.actor
    assert actor.use_dynamic_bsz is dynamic
    assert actor.ppo_micro_batch_size_per_gpu == (2 if overrides and "=2" in overrides[0] else 64)


def test_every_pair_resolves_on_its_own():
    cfg = load_config(["actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=3",
                       "critic.ppo_micro_batch_size_per_gpu=5"])
    ref = cfg.actor_rollout_ref.ref
    assert (ref.log_prob_micro_batch_size_per_gpu, ref.log_prob_use_dynamic_bsz) == (3, False)
    assert (cfg.critic.ppo_micro_batch_size_per_gpu, cfg.critic.use_dynamic_bsz) == (5, False)
    assert cfg.actor_rollout_ref.actor.use_dynamic_bsz and cfg.actor_rollout_ref.rollout.log_prob_use_dynamic_bsz


def _grouped_batch(groups: int, per_group: int):
    """Rows whose prompts repeat per group (as a rollout's n responses do), group after group interleaved."""
    batch = make_batch(groups * per_group)
    prompt_len = batch["prompts"].shape[1]
    for row in range(groups * per_group):
        leader = row % groups  # rows 0..groups-1 lead; later rows repeat their prompt
        batch["input_ids"][row, :prompt_len] = batch["input_ids"][leader, :prompt_len]
        batch["attention_mask"][row, :prompt_len] = batch["attention_mask"][leader, :prompt_len]
    batch["position_ids"] = (batch["attention_mask"].cumsum(-1) - 1).clamp(min=0)
    batch["prompts"] = batch["input_ids"][:, :prompt_len].clone()
    return batch


def test_prefix_grouper_runs_each_prompt_group_once_per_micro_batch(tiny_model_dir, single_process_group, monkeypatch):
    """verl's use_prefix_grouper (with use_remove_padding=false, as its script sets) is the shared layout: the
    same log-probs as the padded forward, micro-batches of the asked size holding whole prompt groups."""
    keys = ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4"]
    grouper = _actor(tiny_model_dir, [*keys, "actor_rollout_ref.actor.use_prefix_grouper=true"], use_remove_padding=False)
    padded = _actor(tiny_model_dir, keys, use_remove_padding=False)
    assert (grouper.layout, padded.layout) == ("shared", "padded")
    batch = _grouped_batch(groups=2, per_group=4)
    plans = []
    real = grouper.micro_batches
    monkeypatch.setattr(grouper, "micro_batches", lambda b, batching: plans.append(real(b, batching)) or plans[-1])
    log_probs = grouper.compute_log_prob(batch)
    assert plans == [[[0, 2, 4, 6], [1, 3, 5, 7]]]  # rows of one prompt together, in fours
    torch.testing.assert_close(log_probs, padded.compute_log_prob(batch), atol=1e-5, rtol=1e-5)

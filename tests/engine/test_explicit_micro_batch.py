"""A command that sets a micro-batch size gets micro-batches of that size (dynamic batching off) in the
worker itself; without one, token-budget batching stays on."""

from __future__ import annotations

from dataclasses import replace

import pytest
from engine_testutils import make_batch, model_config

from siirl.config_checks import load_config
from siirl.engine.workers.actor import ActorWorker

ROWS = 8


def _actor(tiny_model_dir, overrides: list[str]) -> ActorWorker:
    cfg = load_config(overrides).actor_rollout_ref
    actor_cfg = replace(cfg.actor, ppo_mini_batch_size=ROWS, optim=replace(cfg.actor.optim, lr=1e-3))
    return ActorWorker(model_config(tiny_model_dir), actor_cfg, "cpu", log_prob_cfg=cfg.rollout)


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

"""verl's ``trainer.critic_warmup``: during the first N steps the actor-train node leaves the policy's
weights as they are (and says so in its metrics) while the critic trains; after them the actor trains."""

from __future__ import annotations

import dataclasses

import torch
from engine_testutils import actor_config, critic_config, make_batch, model_config

from siirl.dag_worker.builtin_nodes import train_actor, train_critic
from siirl.dag_worker.context import WorkerContext
from siirl.dag_worker.policy import Policy
from siirl.engine.workers import ActorWorker, CriticWorker
from siirl.params.root import SiirlConfig
from siirl.params.trainer import TrainerConfig


def _weights(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def _changed(before: list[torch.Tensor], module: torch.nn.Module) -> bool:
    return any(not torch.equal(a, p.detach()) for a, p in zip(before, module.parameters()))


def test_actor_waits_for_the_critic(tiny_model_dir, single_process_group):
    actor = ActorWorker(model_config(tiny_model_dir), actor_config(ppo_mini_batch_size=8), "cpu")
    critic = CriticWorker(critic_config(tiny_model_dir, ppo_mini_batch_size=8), "cpu")
    cfg = dataclasses.replace(SiirlConfig(), trainer=TrainerConfig(critic_warmup=1))
    policy = Policy(actor, None, kl_ctrl=None, stale=False)
    ctx = WorkerContext(cfg=cfg, plan=None, rank=0, backend=None, tokenizer=None, graph=None,
                        models={"actor": policy, "critic": critic})
    batch = make_batch(8, seed=3)

    ctx.step = 1
    actor_before, critic_before = _weights(actor.model), _weights(critic.model)
    skipped = train_actor(batch, ctx=ctx)
    train_critic(batch, ctx=ctx)
    assert skipped.metrics == {"actor/critic_warmup": 1.0} and skipped.info["skipped"] == "critic warm-up"
    assert not _changed(actor_before, actor.model) and not policy.stale
    assert _changed(critic_before, critic.model)

    ctx.step = 2
    trained = train_actor(batch, ctx=ctx)
    assert "actor/critic_warmup" not in trained.metrics and "actor/pg_loss" in trained.metrics
    assert _changed(actor_before, actor.model) and policy.stale

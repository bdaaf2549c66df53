"""The node functions the built-in pipelines point at.

Each has the public node signature ``fn(batch, config=None, **kwargs) -> NodeOutput`` and finds the
worker's models in ``kwargs["ctx"]`` (a :class:`siirl.dag_worker.context.WorkerContext`), so a custom
pipeline can reuse any of them next to its own nodes. Each declares its contract (batch keys read and
written, model roles) with ``node_contract``; the planner checks the whole graph against them.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from tensordict import TensorDict

from siirl import algorithms
from siirl.data_coordinator.tensordict_ops import non_tensor_list
from siirl.environment.outputs import environment_outputs, environment_reward_inputs
from siirl.execution.dag import NodeOutput
from siirl.execution.dag.contract import NodeContract, node_contract
from siirl.execution.dag.contract_check import uses_reference
from siirl.params.root import SiirlConfig

#: What a model forward over prompt + response reads.
SEQUENCE_KEYS = ("input_ids", "attention_mask", "position_ids", "responses", "response_mask")
ROLLOUT_WRITES = ("prompts", "responses", "response_mask", "input_ids", "attention_mask", "position_ids", "uid")


def _advantage_inputs(cfg: SiirlConfig) -> NodeContract:
    """KL-in-reward needs both log-probs; the estimator adds what it declared (values, baselines, uids)."""
    kl = ("old_log_probs", "ref_log_prob") if cfg.algorithm.use_kl_in_reward else ()
    needs = algorithms.estimator_needs(cfg.algorithm.adv_estimator)
    return NodeContract(reads=(*kl, *needs.batch_keys()))


def _reference_output(cfg: SiirlConfig) -> NodeContract:
    return NodeContract(writes=("ref_log_prob",), roles=("reference",)) if uses_reference(cfg) else NodeContract()


def _kl_loss_input(cfg: SiirlConfig) -> NodeContract:
    use_kl_loss = cfg.actor_rollout_ref.actor.use_kl_loss
    return NodeContract(reads=("ref_log_prob",)) if use_kl_loss else NodeContract()


def _timed(metrics: dict[str, float], key: str, start: float) -> None:
    metrics[f"timing_s/{key}"] = time.perf_counter() - start


@node_contract(
    reads=("input_ids", "attention_mask"), writes=ROLLOUT_WRITES, roles=("rollout",), when=environment_outputs
)
def generate(batch: TensorDict, config: Any = None, *, ctx, **_: Any) -> NodeOutput:
    """Roll out ``n`` responses per prompt with the current policy (weights synced when stale)."""
    start = time.perf_counter()
    ctx.refresh_rollout_weights()
    out = ctx.rollout.generate(batch, validate=ctx.validating)
    ctx.rollout_done()
    lengths = out["response_mask"].sum(-1).float()
    prompt_lengths = batch["attention_mask"].sum(-1).float()
    metrics = {
        "response_length/mean": lengths.mean().item(),
        "response_length/max": lengths.max().item(),
        "prompt_length/mean": prompt_lengths.mean().item(),
        **ctx.rollout.rollout_metrics(out),
    }
    _timed(metrics, "gen", start)
    return NodeOutput(out, metrics=metrics)


@node_contract(
    reads=("responses", "response_mask", "data_source", "ground_truth"), writes=("token_level_scores",),
    when=environment_reward_inputs,
)
def compute_reward(batch: TensorDict, config: Any = None, *, ctx, **_: Any) -> NodeOutput:
    """Rule (or model) reward on the last response token -> ``token_level_scores``."""
    start = time.perf_counter()
    scores, _extra = ctx.reward_manager(batch, ctx.tokenizer)
    batch["token_level_scores"] = scores.to(torch.float32)
    seq_scores = scores.sum(-1)
    metrics = {"reward/mean": seq_scores.mean().item(), "reward/max": seq_scores.max().item()}
    failure_metrics = getattr(ctx.reward_manager, "failure_metrics", None)
    if failure_metrics is not None:
        metrics.update(failure_metrics())
    _timed(metrics, "reward", start)
    return NodeOutput(batch, metrics=metrics)


@node_contract(
    reads=("token_level_scores", "response_mask"),
    writes=("token_level_rewards", "advantages", "returns"),
    when=_advantage_inputs,
)
def compute_advantage(batch: TensorDict, config: Any = None, *, ctx, **_: Any) -> NodeOutput:
    """KL-in-reward (optional), then the configured estimator over uid groups."""
    algo = ctx.cfg.algorithm
    metrics: dict[str, float] = {}
    if algo.use_kl_in_reward:
        rewards, kl_metrics = algorithms.apply_kl_penalty(
            batch["token_level_scores"],
            batch["old_log_probs"],
            batch["ref_log_prob"],
            batch["response_mask"],
            ctx.kl_ctrl,
            algo.kl_penalty,
        )
        batch["token_level_rewards"] = rewards
        metrics.update(kl_metrics)
    else:
        batch["token_level_rewards"] = batch["token_level_scores"]
    advantages, returns = algorithms.compute_advantage(
        algo.adv_estimator,
        token_level_rewards=batch["token_level_rewards"],
        response_mask=batch["response_mask"],
        index=non_tensor_list(batch, "uid") if "uid" in batch.keys() else None,  # noqa: SIM118
        values=batch.get("values", None),
        reward_baselines=batch.get("reward_baselines", None),
        config=algo,
    )
    batch["advantages"], batch["returns"] = advantages, returns
    mask = batch["response_mask"].bool()
    metrics["advantages/mean"] = advantages[mask].mean().item() if mask.any() else 0.0
    return NodeOutput(batch, metrics=metrics)


@node_contract(reads=SEQUENCE_KEYS, writes=("old_log_probs",), roles=("actor",))
def compute_old_log_prob(batch: TensorDict, config: Any = None, *, ctx, **_: Any) -> NodeOutput:
    """Log-probs of the sampled tokens under the policy that generated them (the PPO 'old' policy):
    those the rollout recorded while sampling, or one actor forward (``old_log_prob_source``)."""
    start = time.perf_counter()
    if ctx.old_log_probs_from_rollout and "rollout_log_probs" in batch.keys():  # noqa: SIM118
        out = {"old_log_probs": batch["rollout_log_probs"], "entropys": batch["rollout_entropys"]}
    else:
        out = ctx.actor.compute_log_prob(batch)
    batch["old_log_probs"] = out["old_log_probs"]
    mask = batch["response_mask"].bool()
    entropy = out.get("entropys", None)
    metrics = {"actor/entropy": entropy[mask].mean().item()} if entropy is not None else {}
    _timed(metrics, "old_log_prob", start)
    return NodeOutput(batch, metrics=metrics)


@node_contract(reads=SEQUENCE_KEYS, when=_reference_output)
def compute_ref_log_prob(batch: TensorDict, config: Any = None, *, ctx, **_: Any) -> NodeOutput:
    """Reference-policy log-probs; only computed when a KL term (loss or reward) needs them."""
    if ctx.ref is None:
        return NodeOutput(batch, info={"skipped": "no KL term configured"})
    start = time.perf_counter()
    batch["ref_log_prob"] = ctx.ref.compute_ref_log_prob(batch)
    metrics: dict[str, float] = {}
    _timed(metrics, "ref", start)
    return NodeOutput(batch, metrics=metrics)


@node_contract(reads=SEQUENCE_KEYS, writes=("values",), roles=("critic",))
def compute_value(batch: TensorDict, config: Any = None, *, ctx, **_: Any) -> NodeOutput:
    """Critic values for GAE."""
    start = time.perf_counter()
    batch["values"] = ctx.critic.compute_values(batch)
    metrics: dict[str, float] = {}
    _timed(metrics, "values", start)
    return NodeOutput(batch, metrics=metrics)


@node_contract(
    reads=(*SEQUENCE_KEYS, "old_log_probs", "advantages"), roles=("actor",), when=_kl_loss_input
)
def train_actor(batch: TensorDict, config: Any = None, *, ctx, **_: Any) -> NodeOutput:
    """PPO-style policy update; marks the rollout engine's weights stale."""
    start = time.perf_counter()
    metrics = ctx.actor.update_policy(batch)
    ctx.mark_rollout_weights_stale()
    _timed(metrics, "update_actor", start)
    return NodeOutput(batch, metrics=metrics)


@node_contract(reads=(*SEQUENCE_KEYS, "values", "returns"), roles=("critic",))
def train_critic(batch: TensorDict, config: Any = None, *, ctx, **_: Any) -> NodeOutput:
    """Clipped value-loss update of the critic."""
    start = time.perf_counter()
    metrics = ctx.critic.update_critic(batch)
    _timed(metrics, "update_critic", start)
    return NodeOutput(batch, metrics=metrics)


class BuiltinNodeMethods:
    """The built-in steps as static methods, so ``"module:DAGWorker.generate"`` references resolve.

    ``DAGWorker`` inherits this; static methods need no worker instance and keep their contracts.
    """

    generate = staticmethod(generate)
    compute_reward = staticmethod(compute_reward)
    compute_advantage = staticmethod(compute_advantage)
    compute_old_log_prob = staticmethod(compute_old_log_prob)
    compute_ref_log_prob = staticmethod(compute_ref_log_prob)
    compute_value = staticmethod(compute_value)
    train_actor = staticmethod(train_actor)
    train_critic = staticmethod(train_critic)

"""The node functions the built-in pipelines point at.

Each has the public node signature ``fn(batch, config=None, **kwargs) -> NodeOutput`` and finds the
worker's models in ``kwargs["ctx"]`` (a :class:`siirl.dag_worker.context.WorkerContext`), so a custom
pipeline can reuse any of them next to its own nodes. Each declares its contract (batch keys read and
written, model roles) with ``node_contract``; the planner checks the whole graph against them.

The nodes after the rollout act on ONE policy: the run's, or, with ``config={"agent": name}``, agent
``name``'s (its rows ``batch["agents", name]``, its models ``<name>/actor``, ``<name>/critic`` ...,
its metrics prefixed ``<name>/``). Single policies and multi-agent teams run this same code.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDict

from siirl import algorithms
from siirl.algorithms.distillation import TEACHER_LOG_PROB
from siirl.algorithms.rollout_correction import IS_WEIGHTS_KEY
from siirl.dag_worker.agent_chain import incoming_chain, record_chain_head
from siirl.dag_worker.batch_reweighting import (
    apply_rollout_correction,
    compares_rollout_log_probs,
    has_rollout_log_probs,
    pf_ppo_resample,
)
from siirl.dag_worker.high_diff_tokens import dump_dir, dump_high_diff_tokens
from siirl.data_coordinator.tensordict_ops import non_tensor_list
from siirl.engine.reward.extra_metrics import reward_extra_metrics, store_reward_extra
from siirl.engine.rollout.vision_requests import MULTIMODAL_DATA
from siirl.engine.workers.vision import policy_sees_images
from siirl.engine.workers.vision_inputs import MULTIMODAL_INPUTS
from siirl.environment.outputs import REWARD_READS, ROLLOUT_KEYS, env_mode
from siirl.errors import TrainingDivergedError
from siirl.execution.dag import NodeOutput
from siirl.execution.dag.contract import AGENTS_FIELD, ROLLOUT_WRITES, NodeContract, node_contract
from siirl.execution.roles import uses_reference, uses_teacher
from siirl.params.root import SiirlConfig

if TYPE_CHECKING:
    from siirl.dag_worker.context import WorkerContext

#: What a model forward over prompt + response reads.
SEQUENCE_KEYS = ("input_ids", "attention_mask", "position_ids", "responses", "response_mask")


def with_images(
    when: Callable[[SiirlConfig], NodeContract] | None = None, keys: tuple[str, ...] = (MULTIMODAL_INPUTS,)
) -> Callable[[SiirlConfig], NodeContract]:
    """``when`` plus, for a vision-language policy, the rows' image ``keys`` (a policy forward reads the
    processed inputs; the rollout also the decoded images, which vLLM takes)."""

    def contract(cfg: SiirlConfig) -> NodeContract:
        images = NodeContract(reads=keys) if policy_sees_images(cfg) else NodeContract()
        return images.merged(when(cfg) if when is not None else None)

    return contract


def _advantage_inputs(cfg: SiirlConfig) -> NodeContract:
    """KL-in-reward needs both log-probs; the estimator adds what it declared (values, baselines, uids)."""
    kl = ("old_log_probs", "ref_log_prob") if cfg.algorithm.use_kl_in_reward else ()
    correction = ("old_log_probs",) if compares_rollout_log_probs(cfg) else ()
    needs = algorithms.estimator_needs(cfg.algorithm.adv_estimator)
    return NodeContract(reads=(*kl, *correction, *needs.batch_keys(cfg.algorithm)))


def _reference_output(cfg: SiirlConfig) -> NodeContract:
    return NodeContract(writes=("ref_log_prob",), roles=("reference",)) if uses_reference(cfg) else NodeContract()


#: What a rule reward manager reports per response next to the reward (verl's reward extra info), kept as
#: (B,) float tensors so DAPO's group filter can compare them (``algorithm.filter_groups.metric``).
RULE_REWARD_VALUES = ("acc", "score")


def _environment_outputs(cfg: SiirlConfig) -> NodeContract:
    """The rollout's extra writes (and its need of an environment) in environment-driven runs."""
    mode = env_mode(cfg)
    return NodeContract(writes=ROLLOUT_KEYS[mode], roles=("environment",)) if mode else NodeContract()


def _reward_inputs(cfg: SiirlConfig) -> NodeContract:
    """Environment rewards read the environment's outputs; a reward model's scores come from its node; a rule
    reward manager also writes ``acc`` and ``score``, and the extra keys of its dict that the estimator reads
    (gdpo's reward components)."""
    mode = env_mode(cfg)
    environment = NodeContract(reads=REWARD_READS[mode]) if mode else NodeContract()
    if cfg.reward_model.enable:
        return environment.merged(NodeContract(reads=("rm_scores",)))
    if mode is not None:
        return environment
    components = algorithms.estimator_needs(cfg.algorithm.adv_estimator).component_keys(cfg.algorithm)
    return NodeContract(writes=(*RULE_REWARD_VALUES, *components))


def _rule_reward_values(batch: TensorDict, extra: dict[str, list], cfg: SiirlConfig) -> dict[str, float]:
    """Store ``RULE_REWARD_VALUES`` in the batch; the overlong-penalty metrics with ``overlong_buffer.log``."""
    for key in RULE_REWARD_VALUES:
        if key in extra:
            values = [float(v) for v in extra[key]]
            batch[key] = torch.tensor(values, dtype=torch.float32, device=batch["response_mask"].device)
    if not (cfg.reward_model.overlong_buffer.log and "overlong_reward" in extra):
        return {}
    penalties = extra["overlong_reward"]
    return {
        "reward/overlong_reward": sum(penalties) / max(len(penalties), 1),
        "reward/overlong": sum(map(bool, extra["overlong"])) / max(len(penalties), 1),
    }


def _kl_loss_input(cfg: SiirlConfig) -> NodeContract:
    """The reference's log-probs for the KL loss; the teacher's for on-policy distillation."""
    reads = ("ref_log_prob",) if cfg.actor_rollout_ref.actor.use_kl_loss else ()
    reads += (TEACHER_LOG_PROB,) if uses_teacher(cfg) else ()
    return NodeContract(reads=reads)


def _timed(metrics: dict[str, float], key: str, start: float) -> None:
    metrics[f"timing_s/{key}"] = time.perf_counter() - start


@dataclass
class PolicyNodeConfig:
    """Own section of a per-policy node: the agent whose policy it acts on (empty: the run's policy)."""

    agent: str = ""
    #: estimators that chain a team's agents (gae_marft): the agent acting after this one ("" for the last)
    next_agent: str = ""
    #: agents taking turns updating (MARFT's train_cycle): [cycle, this agent's position, team size]
    train_turn: list[int] = field(default_factory=list)
    #: the agent whose critic this node uses, when not its own (MARFT's share_instance)
    model_agent: str = ""


def _agent(node_config: Any) -> str:
    return node_config.agent if isinstance(node_config, PolicyNodeConfig) else ""


def _critic(ctx: WorkerContext, node_config: Any) -> Any:
    """The critic a node uses: its agent's, or the one it shares (``model_agent``)."""
    owner = node_config.model_agent if isinstance(node_config, PolicyNodeConfig) else ""
    return ctx.model("critic", owner or _agent(node_config))


def _rows(batch: TensorDict, agent: str) -> TensorDict:
    """The policy's rows: the batch itself, or the agent's nested rows (written in place)."""
    return batch.get((AGENTS_FIELD, agent)) if agent else batch


def _scoped(metrics: dict[str, float], agent: str) -> dict[str, float]:
    return {f"{agent}/{key}": value for key, value in metrics.items()} if agent else metrics


def per_policy(**contract: Any):
    """``node_contract`` of a node acting on one policy's rows (see the module docstring)."""
    return node_contract(config=PolicyNodeConfig, per_policy=True, **contract)


@node_contract(
    reads=("input_ids", "attention_mask"), writes=ROLLOUT_WRITES, roles=("rollout",),
    when=with_images(_environment_outputs, (MULTIMODAL_INPUTS, MULTIMODAL_DATA)),
)
def generate(batch: TensorDict, config: Any = None, *, ctx: WorkerContext, **_: Any) -> NodeOutput:
    """Roll out ``n`` responses per prompt with the current policy, through the run's batch source
    (siirl.dag_worker.batch_source): sampled now, or taken from the producer that sampled it ahead."""
    start = time.perf_counter()
    policy = ctx.policy()
    out, prompt_mask, produced = ctx.batch_source.rollout(policy, batch, ctx.step, ctx.validating)
    lengths = out["response_mask"].sum(-1).float()
    prompt_lengths = prompt_mask.sum(-1).float()
    metrics = {
        "response_length/mean": lengths.mean().item(),
        "response_length/max": lengths.max().item(),
        "prompt_length/mean": prompt_lengths.mean().item(),
        **policy.rollout.rollout_metrics(out),
        **produced,
    }
    _timed(metrics, "gen", start)
    return NodeOutput(out, metrics=metrics)


def _reward_model_inputs(cfg: SiirlConfig) -> NodeContract:
    """A reward model with its own chat template re-renders the conversation (``data.return_raw_chat``)."""
    return NodeContract(reads=("raw_prompt",)) if cfg.reward_model.model.input_tokenizer else NodeContract()


@node_contract(reads=SEQUENCE_KEYS, writes=("rm_scores",), roles=("reward_model",), when=_reward_model_inputs)
def compute_rm_score(batch: TensorDict, config: Any = None, *, ctx: WorkerContext, **_: Any) -> NodeOutput:
    """The reward model's score of each response, on its last token (verl's ``rm_scores``)."""
    start = time.perf_counter()
    batch["rm_scores"] = ctx.model("reward_model").compute_rm_score(batch)
    metrics = {"reward_model/score_mean": batch["rm_scores"].sum(-1).mean().item()}
    _timed(metrics, "reward_model", start)
    return NodeOutput(batch, metrics=metrics)


@node_contract(
    reads=("responses", "response_mask", "data_source", "ground_truth"), writes=("token_level_scores",),
    when=_reward_inputs,
)
def compute_reward(batch: TensorDict, config: Any = None, *, ctx: WorkerContext, **_: Any) -> NodeOutput:
    """The reward on the last response token -> ``token_level_scores``: the reward model's score when an
    upstream node wrote ``rm_scores`` (it replaces the rule score, as in verl), else the rule reward, whose
    extra dict keys stay in the batch for later nodes (``siirl.engine.reward.extra_metrics``)."""
    start = time.perf_counter()
    metrics: dict[str, float] = {}
    if "rm_scores" in batch.keys():  # noqa: SIM118 - keys() works on every tensordict release
        scores = batch["rm_scores"]
    else:
        scores, extra = ctx.reward_manager(batch, ctx.tokenizer)
        metrics = {**_rule_reward_values(batch, extra, ctx.cfg), **reward_extra_metrics(extra)}
        store_reward_extra(batch, extra, batch["response_mask"].device)
    batch["token_level_scores"] = scores.to(torch.float32)
    seq_scores = scores.sum(-1)
    metrics.update({"reward/mean": seq_scores.mean().item(), "reward/max": seq_scores.max().item()})
    failure_metrics = getattr(ctx.reward_manager, "failure_metrics", None)
    if failure_metrics is not None:
        metrics.update(failure_metrics())
    _timed(metrics, "reward", start)
    return NodeOutput(batch, metrics=metrics)


@per_policy(
    reads=("token_level_scores", "response_mask"),
    writes=("token_level_rewards", "advantages", "returns"),
    when=_advantage_inputs,
)
def compute_advantage(
    batch: TensorDict, config: Any = None, *, ctx: WorkerContext, node_config: Any = None, **_: Any
) -> NodeOutput:
    """KL-in-reward (optional), rollout correction (where log-probs were recorded), the configured estimator
    over uid groups, then policy-filtered resampling (optional); see ``siirl.dag_worker.batch_reweighting``."""
    agent = _agent(node_config)
    full, batch = batch, _rows(batch, agent)
    algo = ctx.cfg.algorithm
    metrics: dict[str, float] = {}
    if algo.use_kl_in_reward:
        rewards, kl_metrics = algorithms.apply_kl_penalty(
            batch["token_level_scores"],
            batch["old_log_probs"],
            batch["ref_log_prob"],
            batch["response_mask"],
            ctx.policy(agent).kl_ctrl,
            algo.kl_penalty,
        )
        batch["token_level_rewards"] = rewards
        metrics.update(kl_metrics)
    else:
        batch["token_level_rewards"] = batch["token_level_scores"]
    if ctx.cfg.trainer.dump_high_diff_tokens and has_rollout_log_probs(batch, ctx.cfg):
        dump_high_diff_tokens(batch, ctx.tokenizer, dump_dir(ctx.cfg.trainer), ctx.step, ctx.rank)
    metrics.update(apply_rollout_correction(batch, ctx.cfg))
    needs = algorithms.estimator_needs(algo.adv_estimator)
    chained = bool(agent) and needs.agent_chain
    incoming = incoming_chain(full, batch, node_config.next_agent) if chained else None
    advantages, returns = algorithms.compute_advantage(
        algo.adv_estimator,
        token_level_rewards=batch["token_level_rewards"],
        response_mask=batch["response_mask"],
        index=non_tensor_list(batch, "uid") if "uid" in batch.keys() else None,  # noqa: SIM118
        values=batch.get("values", None),
        reward_baselines=batch.get("reward_baselines", None),
        config=algo,
        chain=incoming,
        reward_components={key: batch[key] for key in needs.component_keys(algo) if key in batch.keys()},  # noqa: SIM118
        **{key: batch.get(key, None) for key in ("old_log_probs", "sum_pi_squared", IS_WEIGHTS_KEY)},
    )
    batch["advantages"], batch["returns"] = advantages, returns
    if incoming is not None:
        record_chain_head(batch, incoming)
    mask = batch["response_mask"].bool()
    metrics["advantages/mean"] = advantages[mask].mean().item() if mask.any() else 0.0
    resampled = pf_ppo_resample(batch, algo, ctx.cfg.trainer.seed, ctx.step, ctx.rank)
    if resampled is not batch:
        if agent:
            full.set((AGENTS_FIELD, agent), resampled)
        else:
            full = resampled
    return NodeOutput(full, metrics=_scoped(metrics, agent))


def rollout_probs_diff(rollout_log_probs: torch.Tensor, log_probs: torch.Tensor, mask: torch.Tensor) -> dict:
    """verl's ``training/rollout_probs_diff_*``: how far the token probabilities the rollout sampled with are
    from the actor's (``rollout.calculate_log_probs=true``); large values mean the engines disagree."""
    if not mask.any():
        return {}
    diff = (rollout_log_probs.exp() - log_probs.exp()).abs()[mask]
    return {
        "training/rollout_probs_diff_max": diff.max().item(),
        "training/rollout_probs_diff_mean": diff.mean().item(),
        "training/rollout_probs_diff_std": diff.std().item() if diff.numel() > 1 else 0.0,
    }


def _sum_pi_squared_output(cfg: SiirlConfig) -> NodeContract:
    return NodeContract(writes=("sum_pi_squared",)) if cfg.actor_rollout_ref.actor.calculate_sum_pi_squared else NodeContract()


@per_policy(reads=SEQUENCE_KEYS, writes=("old_log_probs",), roles=("actor",), when=with_images(_sum_pi_squared_output))
def compute_old_log_prob(
    batch: TensorDict, config: Any = None, *, ctx: WorkerContext, node_config: Any = None, **_: Any
) -> NodeOutput:
    """Log-probs of the sampled tokens under the policy that generated them (the PPO 'old' policy):
    those the rollout recorded while sampling, or one actor forward (``old_log_prob_source``)."""
    start = time.perf_counter()
    agent = _agent(node_config)
    full, batch, policy = batch, _rows(batch, agent), ctx.policy(agent)
    recorded = "rollout_log_probs" in batch.keys()  # noqa: SIM118
    if policy.old_log_probs_from_rollout and recorded:
        out = {"old_log_probs": batch["rollout_log_probs"]}
        if "rollout_entropys" in batch.keys():  # noqa: SIM118 (vLLM records no entropies: no entropy metric)
            out["entropys"] = batch["rollout_entropys"]
    else:
        out = policy.actor.compute_log_prob(batch)
    batch["old_log_probs"] = out["old_log_probs"]
    if "sum_pi_squared" in out.keys():  # noqa: SIM118
        batch["sum_pi_squared"] = out["sum_pi_squared"]
    mask = batch["response_mask"].bool()
    entropy = out.get("entropys", None)
    metrics = {"actor/entropy": entropy[mask].mean().item()} if entropy is not None else {}
    if recorded and not policy.old_log_probs_from_rollout:
        metrics.update(rollout_probs_diff(batch["rollout_log_probs"], batch["old_log_probs"], mask))
    _timed(metrics, "old_log_prob", start)
    return NodeOutput(full, metrics=_scoped(metrics, agent))


@per_policy(reads=SEQUENCE_KEYS, when=with_images(_reference_output))
def compute_ref_log_prob(
    batch: TensorDict, config: Any = None, *, ctx: WorkerContext, node_config: Any = None, **_: Any
) -> NodeOutput:
    """Reference-policy log-probs; only computed when a KL term (loss or reward) needs them."""
    agent = _agent(node_config)
    reference = ctx.model("reference", agent)
    if reference is None:
        return NodeOutput(batch, info={"skipped": "no KL term configured"})
    start = time.perf_counter()
    rows = _rows(batch, agent)
    rows["ref_log_prob"] = reference.compute_ref_log_prob(rows)
    metrics: dict[str, float] = {}
    _timed(metrics, "ref", start)
    return NodeOutput(batch, metrics=_scoped(metrics, agent))


@per_policy(reads=SEQUENCE_KEYS, writes=(TEACHER_LOG_PROB,), roles=("teacher",), when=with_images())
def compute_teacher_log_prob(
    batch: TensorDict, config: Any = None, *, ctx: WorkerContext, node_config: Any = None, **_: Any
) -> NodeOutput:
    """On-policy distillation: the frozen teacher's log-prob of every sampled response token."""
    start = time.perf_counter()
    agent = _agent(node_config)
    rows = _rows(batch, agent)
    rows[TEACHER_LOG_PROB] = ctx.model("teacher", agent).compute_ref_log_prob(rows)
    metrics: dict[str, float] = {}
    _timed(metrics, "teacher", start)
    return NodeOutput(batch, metrics=_scoped(metrics, agent))


@per_policy(reads=SEQUENCE_KEYS, writes=("values",), roles=("critic",))
def compute_value(
    batch: TensorDict, config: Any = None, *, ctx: WorkerContext, node_config: Any = None, **_: Any
) -> NodeOutput:
    """Critic values for GAE."""
    start = time.perf_counter()
    agent = _agent(node_config)
    rows = _rows(batch, agent)
    rows["values"] = _critic(ctx, node_config).compute_values(rows)
    metrics: dict[str, float] = {}
    _timed(metrics, "values", start)
    return NodeOutput(batch, metrics=_scoped(metrics, agent))


def stop_if_diverged(model: Any, section: str, ctx: WorkerContext) -> None:
    """End the job once ``trainer.max_nonfinite_steps`` updates in a row were skipped whole: the weights have
    diverged, and training on would log NaN and score 0 to the end. Every rank sees the same all-reduced
    gradient norm, so every rank raises at the same step (no collective is left waiting)."""
    limit = ctx.cfg.trainer.max_nonfinite_steps
    if limit and model.nonfinite_streak >= limit:
        raise TrainingDivergedError(
            f"step {ctx.step}: the {section} update was skipped {model.nonfinite_streak} steps in a row because "
            f"its loss or gradient norm is not finite; the weights have diverged (lower {section}.optim.lr, "
            "or set trainer.max_nonfinite_steps=0 to train on)"
        )


@per_policy(reads=(*SEQUENCE_KEYS, "old_log_probs", "advantages"), roles=("actor",), when=with_images(_kl_loss_input))
def train_actor(
    batch: TensorDict, config: Any = None, *, ctx: WorkerContext, node_config: Any = None, **_: Any
) -> NodeOutput:
    """PPO-style policy update; marks the rollout engine's weights stale. During verl's critic warm-up
    (``step <= trainer.critic_warmup``) the update is skipped, so the policy stays as it is while the
    critic learns values for it; ``actor/critic_warmup=1`` marks those steps. Agents taking turns
    (``train_turn``) skip the steps that are not theirs (``actor/waiting_turn=1``)."""
    agent = _agent(node_config)
    warmup = ctx.cfg.trainer.critic_warmup
    if warmup > 0 and ctx.step <= warmup:
        return NodeOutput(batch, metrics=_scoped({"actor/critic_warmup": 1.0}, agent), info={"skipped": "critic warm-up"})
    if agent and node_config.train_turn:
        cycle, position, team = node_config.train_turn
        if ctx.step // cycle % team != position:
            return NodeOutput(batch, metrics=_scoped({"actor/waiting_turn": 1.0}, agent), info={"skipped": "not its turn"})
    start = time.perf_counter()
    policy = ctx.policy(agent)
    metrics = policy.actor.update_policy(_rows(batch, agent))
    policy.mark_stale()
    stop_if_diverged(policy.actor, "actor_rollout_ref.actor", ctx)
    _timed(metrics, "update_actor", start)
    return NodeOutput(batch, metrics=_scoped(metrics, agent))


@per_policy(reads=(*SEQUENCE_KEYS, "values", "returns"), roles=("critic",))
def train_critic(
    batch: TensorDict, config: Any = None, *, ctx: WorkerContext, node_config: Any = None, **_: Any
) -> NodeOutput:
    """Clipped value-loss update of the critic."""
    start = time.perf_counter()
    agent = _agent(node_config)
    critic = _critic(ctx, node_config)
    metrics = critic.update_critic(_rows(batch, agent))
    stop_if_diverged(critic, "critic", ctx)
    _timed(metrics, "update_critic", start)
    return NodeOutput(batch, metrics=_scoped(metrics, agent))


class BuiltinNodeMethods:
    """The built-in steps as static methods, so ``"module:DAGWorker.generate"`` references resolve.

    ``DAGWorker`` inherits this; static methods need no worker instance and keep their contracts.
    """

    generate = staticmethod(generate)
    compute_rm_score = staticmethod(compute_rm_score)
    compute_reward = staticmethod(compute_reward)
    compute_advantage = staticmethod(compute_advantage)
    compute_old_log_prob = staticmethod(compute_old_log_prob)
    compute_ref_log_prob = staticmethod(compute_ref_log_prob)
    compute_teacher_log_prob = staticmethod(compute_teacher_log_prob)
    compute_value = staticmethod(compute_value)
    train_actor = staticmethod(train_actor)
    train_critic = staticmethod(train_critic)

"""Building ``models[key]`` on a DAG worker: one builder per role spec (siirl.execution.roles).

The worker asks each node of its own task graph which roles it needs (its contract, or its ``node_role``
for an undeclared custom node), so it builds only what it runs: a graph without a critic node never
loads a critic, and with ``dag.agent_placement=own`` a worker builds only its own agents' models.
A builder is ``fn(ctx, key, agent, roles) -> model``, registered here under the name a spec's ``builder``
gives (the planner names it without importing worker code); ``roles`` are the role names the graph asked
for under this slot (a policy builds its rollout engine only when some node samples with it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from siirl.dag_worker.context import WorkerContext
from siirl.execution.dag import NodeType, TaskGraph
from siirl.execution.dag.contract import AGENT_KEY, model_agent
from siirl.execution.roles import NODE_ROLE_SPECS, ROLES, RoleSpec, model_key
from siirl.execution.scheduler.plan import ALL_RANKS
from siirl.params.root import SiirlConfig
from siirl.registry import Registry

logger = logging.getLogger(__name__)

#: Builders by the name a ``RoleSpec.builder`` gives; a role of your own may give a ``module:function`` instead.
MODEL_BUILDERS: Registry[Callable[..., Any]] = Registry("model builder", open=True)


def _node_roles(node: Any, cfg: Any) -> tuple[str, ...]:
    contract = node.effective_contract(cfg)
    if contract is not None:
        return contract.roles
    name = NODE_ROLE_SPECS.get(node.node_role)
    if node.node_type is NodeType.COMPUTE or name is None or ROLES.get(name).available(cfg) is not None:
        return ()
    return (name,)


def requested_models(graph: TaskGraph, cfg: Any) -> dict[str, tuple[RoleSpec, str, set[str]]]:
    """Slot -> (spec, agent, role names asked for), in the graph's execution order."""
    wanted: dict[str, tuple[RoleSpec, str, set[str]]] = {}
    for node_id in graph.get_execution_order():
        node = graph.nodes[node_id]
        agent = model_agent(node.config)
        for name in _node_roles(node, cfg):
            spec = ROLES.get(name)
            host = spec.served_by(cfg) if spec.served_by is not None else None
            if host is not None:  # the serving model is built before the role that borrows it
                host_spec = ROLES.get(host)
                wanted.setdefault(model_key(host_spec, agent), (host_spec, agent, set()))
            if spec.builder:
                wanted.setdefault(model_key(spec, agent), (spec, agent, set()))[2].add(name)
    return wanted


def build_models(ctx: WorkerContext, graph: TaskGraph) -> dict[str, Any]:
    """Every model this worker's graph uses, built in execution order (the same order on every rank) into
    ``ctx.models``, so a role served by another's model finds it there."""
    models = ctx.models
    for key, (spec, agent, roles) in requested_models(graph, ctx.cfg).items():
        models[key] = MODEL_BUILDERS.get(spec.builder)(ctx, key, agent, roles)
    logger.info("worker %d built: %s", ctx.rank, ", ".join(models) or "no models")
    return models


def _slot(ctx: WorkerContext, spec: RoleSpec, agent: str) -> str:
    """The plan's role key of a slot: agents' slots are ``<agent>/<role>``, a role in a named placement group
    (``trainer.v1.trainer_mode=separate_async``) is ``<group>/<role>``."""
    name = spec.group.value
    if agent:
        return f"{agent}/{name}"
    placed = f"{ctx.plan.worker(ctx.rank).placement}/{name}"
    return placed if placed in ctx.plan.groups else name


def _group(ctx: WorkerContext, spec: RoleSpec, agent: str) -> Any:
    """The data-parallel process group the planner made for this slot."""
    return ctx.groups.get(_slot(ctx, spec, agent))


def _sp_group(ctx: WorkerContext, spec: RoleSpec, agent: str) -> Any:
    """The slot's Ulysses sequence-parallel group, or None where the plan does not split its sequences."""
    return ctx.sp_groups.get(_slot(ctx, spec, agent))


def agent_model_config(cfg: SiirlConfig, graph: TaskGraph, agent: str) -> Any:
    """The policy's model section: the run's, with an agent's own ``model_path`` when it has one."""
    paths = [n.config.get("model_path") for n in graph if agent and n.config.get(AGENT_KEY) == agent]
    path = next((p for p in paths if p), "")
    if not path:
        return cfg.actor_rollout_ref.model
    return replace(cfg.actor_rollout_ref.model, path=path, tokenizer_path="")


def scheduled_over_run(section: Any, run_steps: int) -> Any:
    """``section`` (actor or critic) with ``optim.total_training_steps`` set to the run's length where the user
    left it unset, as verl's trainer fills it: its lr schedule then decays over the whole run."""
    if section.optim.total_training_steps > 0 or run_steps <= 0:
        return section
    return replace(section, optim=replace(section.optim, total_training_steps=run_steps))


@MODEL_BUILDERS.register("policy")
def build_policy(ctx: WorkerContext, key: str, agent: str, roles: set[str]) -> Any:
    """The actor and, when a node samples with it, its rollout engine (an agent's samples one per row). A
    rollout placed apart from every node that uses the actor (``separate_async``) holds the engine alone; its
    weights come from the trainers."""
    from siirl.algorithms import make_kl_controller
    from siirl.dag_worker.env_setup import inner_rollout_config, wrap_rollout
    from siirl.dag_worker.policy import Policy
    from siirl.engine.rollout import make_rollout_engine
    from siirl.engine.rollout.bounded import bound_generation
    from siirl.engine.rollout.env_session import single_sample_config
    from siirl.engine.workers import ActorWorker

    cfg, arr = ctx.cfg, ctx.cfg.actor_rollout_ref
    model = agent_model_config(cfg, ctx.graph, agent)
    apart = "actor" not in roles and ctx.plan.worker(ctx.rank).placement != ALL_RANKS
    actor = None if apart else ActorWorker(
        model, scheduled_over_run(arr.actor, ctx.plan.resolved.run_steps), ctx.backend, process_group=_group(ctx, ROLES.get("actor"), agent),
        sp_group=_sp_group(ctx, ROLES.get("actor"), agent),
        rollout_n=arr.rollout.n, temperature=arr.rollout.temperature, log_prob_cfg=arr.rollout,
        init_seed=cfg.trainer.seed, local_rank=ctx.local_device, rollout_correction=cfg.algorithm.rollout_correction,
        distillation=cfg.distillation.distillation_loss if cfg.distillation.enabled else None,
    )
    resolved = ctx.plan.resolved
    kl_ctrl = make_kl_controller(cfg.algorithm.kl_ctrl)
    # an asynchronous producer keeps the engine awake between the steps it overlaps
    free_cache = bool(arr.rollout.free_cache_engine) and not resolved.schedule.is_async
    if "rollout" not in roles:
        return Policy(actor, None, kl_ctrl, free_cache)
    engine = make_rollout_engine(
        resolved.rollout_engine, model_cfg=model,
        rollout_cfg=single_sample_config(arr.rollout) if agent else inner_rollout_config(cfg),
        backend=ctx.backend, max_response_length=int(arr.rollout.response_length), tokenizer=ctx.tokenizer,
        local_rank=ctx.local_device, apart=apart,
    )
    bound_generation(engine, resolved.rollout_engine, arr.rollout.generation_timeout_s, lambda: ctx.step,
                     pin=lambda: ctx.backend.set_device(ctx.local_device))
    rollout = engine if agent else wrap_rollout(engine, cfg, ctx.tokenizer)
    # Exact only while the rollout copy is this worker's actor, synced before every rollout.
    from_rollout = resolved.old_log_prob_source == "rollout" and rollout is engine
    # verl's calculate_log_probs: recorded too, to compare with the actor's recomputation (a metric);
    # asynchronous runs record the behaviour policy's, for the off-policy correction
    engine.records_log_probs = from_rollout or bool(arr.rollout.calculate_log_probs) or resolved.schedule.is_async
    return Policy(actor, rollout, kl_ctrl, free_cache, old_log_probs_from_rollout=from_rollout)


@MODEL_BUILDERS.register("reference")
def build_reference(ctx: WorkerContext, key: str, agent: str, roles: set[str]) -> Any:
    """The frozen reference policy: the policy's own base model, without optimiser. Under LoRA it is the
    actor's model with its adapters off (the base weights never train), so no second copy is loaded."""
    from siirl.engine.workers import ReferenceWorker
    from siirl.engine.workers.reference import BaseModelReference

    arr = ctx.cfg.actor_rollout_ref
    host = ROLES.get("reference").served_by(ctx.cfg)
    if host is not None:
        policy = ctx.models[model_key(ROLES.get(host), agent)]
        return BaseModelReference(policy.actor, arr.ref, temperature=arr.rollout.temperature)
    return ReferenceWorker(
        agent_model_config(ctx.cfg, ctx.graph, agent), arr.ref, ctx.backend,
        process_group=_group(ctx, ROLES.get("reference"), agent), temperature=arr.rollout.temperature,
        sp_group=_sp_group(ctx, ROLES.get("reference"), agent),
        strategy=str(arr.actor.strategy), local_rank=ctx.local_device,
    )


@MODEL_BUILDERS.register("teacher")
def build_teacher(ctx: WorkerContext, key: str, agent: str, roles: set[str]) -> Any:
    """On-policy distillation's frozen teacher: a forward-only model like the reference (sharded as the actor,
    ``actor_rollout_ref.ref``'s micro-batching) over the teacher's weights. It scores at temperature 1, as
    verl's teacher engine returns its log-probs, whatever the rollout samples with."""
    from siirl.engine.workers import ReferenceWorker
    from siirl.params.distillation import teacher_model_config

    arr = ctx.cfg.actor_rollout_ref
    return ReferenceWorker(
        teacher_model_config(arr.model, ctx.cfg.distillation), arr.ref, ctx.backend,
        process_group=_group(ctx, ROLES.get("teacher"), agent), temperature=1.0,
        sp_group=_sp_group(ctx, ROLES.get("teacher"), agent),
        strategy=str(arr.actor.strategy), local_rank=ctx.local_device,
    )


@MODEL_BUILDERS.register("critic")
def build_critic(ctx: WorkerContext, key: str, agent: str, roles: set[str]) -> Any:
    from siirl.engine.workers import CriticWorker

    cfg = ctx.cfg
    return CriticWorker(
        scheduled_over_run(cfg.critic, ctx.plan.resolved.run_steps), ctx.backend, process_group=_group(ctx, ROLES.get("critic"), agent),
        sp_group=_sp_group(ctx, ROLES.get("critic"), agent),
        rollout_n=cfg.actor_rollout_ref.rollout.n, init_seed=cfg.trainer.seed, local_rank=ctx.local_device,
    )


@MODEL_BUILDERS.register("reward_model")
def build_reward_model(ctx: WorkerContext, key: str, agent: str, roles: set[str]) -> Any:
    from siirl.engine.workers.reward_model import RewardModelWorker

    return RewardModelWorker(
        ctx.cfg.reward_model, ctx.backend, process_group=_group(ctx, ROLES.get("reward_model"), agent),
        local_rank=ctx.local_device,
    )

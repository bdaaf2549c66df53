"""What one DAG worker holds while it runs: config, models its graph needs, data shard, reward, KL.

Built-in node functions reach everything through this object (``kwargs["ctx"]``), so the worker builds
only what its own task graph uses: a graph without a critic node never loads a critic.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from siirl.algorithms import make_kl_controller
from siirl.dag_worker.handoff import Handoffs
from siirl.dag_worker.layouts import moves_samples
from siirl.dag_worker.process_groups import build_dp_groups
from siirl.dag_worker.reward_setup import make_reward_manager_from_config
from siirl.device import DeviceBackend
from siirl.execution.dag import NodeRole, NodeType
from siirl.execution.scheduler.plan import ExecutionPlan
from siirl.params.root import SiirlConfig

logger = logging.getLogger(__name__)


@dataclass
class WorkerContext:
    cfg: SiirlConfig
    plan: ExecutionPlan
    rank: int
    backend: DeviceBackend
    tokenizer: Any
    train_loader: Any
    val_loader: Any
    reward_manager: Any
    kl_ctrl: Any
    actor: Any = None
    rollout: Any = None
    ref: Any = None
    critic: Any = None
    coordinator: Any = None
    #: Batches this worker takes from / hands to other placement groups (siirl.dag_worker.handoff).
    handoffs: Any = None
    #: Multi-agent graphs: agent name -> its own actor and rollout engine (siirl.dag_worker.agents).
    agents: dict[str, Any] = field(default_factory=dict)
    validating: bool = False
    rollout_weights_stale: bool = True
    #: The rollout records the sampled tokens' log-probs and they serve as the PPO old log-probs
    #: (``actor_rollout_ref.actor.old_log_prob_source``), so the actor skips its extra forward.
    old_log_probs_from_rollout: bool = False
    extras: dict[str, Any] = field(default_factory=dict)

    # ----- rollout weights follow the actor -----

    def mark_rollout_weights_stale(self) -> None:
        self.rollout_weights_stale = True

    def refresh_rollout_weights(self) -> None:
        """Wake the engine and, after a policy update, stream the actor's weights into it (no disk)."""
        self.rollout.wake_up()
        if self.rollout_weights_stale and self.actor is not None:
            self.rollout.sync_weights(self.actor.named_parameters_for_sync())
            self.rollout_weights_stale = False

    def rollout_done(self) -> None:
        if self.cfg.actor_rollout_ref.rollout.free_cache_engine:
            self.rollout.sleep()

    # ----- per step -----

    def step_finished(self, metrics: dict[str, float]) -> None:
        """Adaptive KL controllers move once per step with the step's measured KL."""
        if "actor/reward_kl_penalty" in metrics:
            self.kl_ctrl.update(metrics["actor/reward_kl_penalty"], self.cfg.data.train_batch_size)

    def kl_ctrl_state(self) -> dict[str, float]:
        return {"value": float(self.kl_ctrl.value)}

    def load_kl_ctrl_state(self, state: dict[str, float] | None) -> None:
        if state:
            self.kl_ctrl.value = state["value"]

    def checkpoint_components(self) -> dict[str, Any]:
        components = {name: c for name, c in (("actor", self.actor), ("critic", self.critic)) if c is not None}
        components.update({f"agent_{name}": agent.actor for name, agent in self.agents.items()})
        return components

    def close(self) -> None:
        for owner in (self.reward_manager, self.rollout):
            closer = getattr(owner, "close", None)
            if closer is not None:
                closer()


def _roles(graph) -> set[NodeRole]:
    """Roles of the single policy; nodes of a multi-agent graph's agents bring their own models."""
    return {
        node.node_role for node in graph.nodes.values()
        if node.node_type is not NodeType.DATA_LOAD and not node.config.get("agent")
    }


def uses_reference(cfg: SiirlConfig) -> bool:
    return bool(cfg.actor_rollout_ref.actor.use_kl_loss or cfg.algorithm.use_kl_in_reward)


def build_context(
    cfg: SiirlConfig, plan: ExecutionPlan, rank: int, backend: DeviceBackend, local_device: int
) -> WorkerContext:
    from siirl.dag_worker.env_setup import env_reward_manager, inner_rollout_config, wrap_rollout
    from siirl.data_coordinator import build_train_dataloader, build_val_dataloader
    from siirl.data_coordinator.dataloader import dist_scan_share
    from siirl.engine.rollout import make_rollout_engine
    from siirl.engine.workers import ActorWorker, CriticWorker, ReferenceWorker
    from siirl.engine.workers.model_loading import load_tokenizer

    me = plan.worker(rank)
    roles = _roles(me.graph)
    groups = build_dp_groups(plan, rank)
    arr = cfg.actor_rollout_ref
    backend.manual_seed(cfg.trainer.seed + rank)
    tokenizer = load_tokenizer(arr.model)
    data_coord = me.coords.get("rollout") or next(iter(me.coords.values()))
    ctx = WorkerContext(
        cfg=cfg,
        plan=plan,
        rank=rank,
        backend=backend,
        tokenizer=tokenizer,
        # Every worker scans a 1/world slice of the rows for over-long prompts; they share the findings.
        # Workers whose first node is fed by another placement group build the loader (same epoch
        # length everywhere) but never iterate it, so they read no rows.
        train_loader=build_train_dataloader(
            cfg.data, tokenizer, data_coord.dp_rank, data_coord.dp_size, scan=dist_scan_share()
        ),
        val_loader=(
            build_val_dataloader(cfg.data, tokenizer, data_coord.dp_rank, data_coord.dp_size, scan=dist_scan_share())
            if cfg.data.val_files else None
        ),
        reward_manager=env_reward_manager(cfg) or make_reward_manager_from_config(cfg, tokenizer),
        kl_ctrl=make_kl_controller(cfg.algorithm.kl_ctrl),
    )
    if moves_samples(plan):
        from siirl.data_coordinator import DataCoordinator

        ctx.coordinator = DataCoordinator()
    ctx.handoffs = Handoffs(plan, rank, ctx.coordinator)
    common = {"local_rank": local_device}
    if NodeRole.ACTOR in roles or NodeRole.ROLLOUT in roles:
        ctx.actor = ActorWorker(
            arr.model, arr.actor, backend, process_group=groups.get("actor"), rollout_n=arr.rollout.n,
            temperature=arr.rollout.temperature, log_prob_cfg=arr.rollout, init_seed=cfg.trainer.seed, **common,
        )
    if NodeRole.ROLLOUT in roles:
        engine = make_rollout_engine(
            arr.rollout.name, model_cfg=arr.model, rollout_cfg=inner_rollout_config(cfg), backend=backend,
            max_response_length=cfg.data.max_response_length, tokenizer=tokenizer, **common,
        )
        ctx.rollout = wrap_rollout(engine, cfg, tokenizer)
        # Exact only while the rollout copy is this worker's actor, synced before every rollout.
        engine.records_log_probs = ctx.old_log_probs_from_rollout = (
            str(arr.actor.old_log_prob_source) == "rollout" and ctx.actor is not None and ctx.rollout is engine
        )
    if any(node.config.get("agent") for node in me.graph):
        from siirl.dag_worker.agent_nodes import validate_team
        from siirl.dag_worker.agents import build_agents

        ctx.agents = build_agents(cfg, me.graph, groups, backend, tokenizer, local_device)
        ctx.extras["validate"] = validate_team
    if NodeRole.REFERENCE in roles and uses_reference(cfg):
        ctx.ref = ReferenceWorker(
            arr.model, arr.ref, backend, process_group=groups.get("reference"),
            temperature=arr.rollout.temperature, strategy=str(arr.actor.strategy), **common,
        )
    if NodeRole.CRITIC in roles:
        ctx.critic = CriticWorker(
            cfg.critic, backend, process_group=groups.get("critic"), rollout_n=arr.rollout.n,
            init_seed=cfg.trainer.seed, **common,
        )
    logger.info("worker %d built: %s", rank, ", ".join(
        [name for name in ("actor", "rollout", "ref", "critic") if getattr(ctx, name) is not None]
        + [f"agent {name}" for name in ctx.agents]))
    return ctx

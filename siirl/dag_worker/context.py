"""What one DAG worker holds while it runs: config, the models its graph needs, data shard, reward.

Built-in node functions reach everything through this object (``kwargs["ctx"]``). Models live in
``models[key]`` under the planner's slot names (``actor``, ``critic``, ``<agent>/actor`` ...), built by
the role specs of :mod:`siirl.execution.roles` for the nodes of this worker's own graph only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from siirl import startup_timing
from siirl.dag_worker.handoff import Handoffs
from siirl.dag_worker.layouts import moves_samples
from siirl.dag_worker.policy import Policy
from siirl.dag_worker.process_groups import build_dp_groups, build_sp_groups
from siirl.dag_worker.reward_setup import make_reward_manager_from_config
from siirl.device import DeviceBackend
from siirl.execution.dag import TaskGraph
from siirl.execution.roles import ROLES, model_key
from siirl.execution.scheduler.plan import ExecutionPlan
from siirl.params.data import data_tokenizer_model
from siirl.params.root import SiirlConfig

logger = logging.getLogger(__name__)


def policy_key(agent: str = "") -> str:
    """The slot of the policy a node acts on: ``actor``, or ``<agent>/actor`` for an agent of a team."""
    return model_key(ROLES.get("actor"), agent)


@dataclass
class WorkerContext:
    cfg: SiirlConfig
    plan: ExecutionPlan
    rank: int
    backend: DeviceBackend
    tokenizer: Any
    graph: TaskGraph
    local_device: int = 0
    #: Role key -> this rank's dp process group (siirl.dag_worker.process_groups).
    groups: dict[str, Any] = field(default_factory=dict)
    #: Role key -> this rank's Ulysses sequence-parallel group, for the roles that have one.
    sp_groups: dict[str, Any] = field(default_factory=dict)
    train_loader: Any = None
    val_loader: Any = None
    reward_manager: Any = None
    #: Slot -> model (a Policy, ReferenceWorker, CriticWorker, ...), see siirl.execution.roles.
    models: dict[str, Any] = field(default_factory=dict)
    coordinator: Any = None
    #: Batches this worker takes from / hands to other placement groups (siirl.dag_worker.handoff).
    handoffs: Any = None
    validating: bool = False
    #: Start-up marks (``siirl.startup_timing``) up to the models; the loop marks its first step.
    startup_marks: dict[str, float] = field(default_factory=dict)
    #: The training step being run (1-based; 0 before the first), for nodes that act by step.
    step: int = 0
    #: Where training batches come from, chosen once when the run starts (siirl.dag_worker.batch_source).
    batch_source: Any = None
    extras: dict[str, Any] = field(default_factory=dict)

    def policy(self, agent: str = "") -> Policy:
        return self.models[policy_key(agent)]

    def model(self, role: str, agent: str = "") -> Any:
        """The model of ``role`` for the single policy or for ``agent``; None when the run has none."""
        return self.models.get(model_key(ROLES.get(role), agent))

    def policies(self) -> dict[str, Policy]:
        return {key: model for key, model in self.models.items() if isinstance(model, Policy)}

    def agents(self) -> list[str]:
        """The agents whose policies this worker holds (empty for single-policy runs)."""
        return [key.rsplit("/", 1)[0] for key in self.policies() if "/" in key]

    # ----- per step -----

    def step_finished(self, metrics: dict[str, float]) -> None:
        """Adaptive KL controllers move once per step with their policy's measured KL."""
        for key, policy in self.policies().items():
            prefix = key.rsplit("/", 1)[0] + "/" if "/" in key else ""
            measured = metrics.get(f"{prefix}actor/reward_kl_penalty")
            if measured is not None:
                policy.kl_ctrl.update(measured, self.cfg.data.train_batch_size)

    def kl_ctrl_state(self) -> dict[str, dict[str, float]]:
        return {key: policy.kl_state() for key, policy in self.policies().items()}

    def load_kl_ctrl_state(self, state: dict[str, dict[str, float]] | None) -> None:
        for key, policy in self.policies().items():
            if state and key in state:
                policy.load_kl_state(state[key])

    def mark_policies_stale(self) -> None:
        for policy in self.policies().values():
            policy.mark_stale()

    def checkpoint_components(self) -> dict[str, Any]:
        """What each checkpointed role saves, named by slot (``adder/actor`` -> ``adder_actor``)."""
        components = {}
        for key, model in self.models.items():
            role = key.rsplit("/", 1)[-1]
            if role in ROLES and ROLES.get(role).checkpointed:
                target = getattr(model, "checkpoint_target", None)
                state = target() if target is not None else model
                if state is not None:  # a rollout placed apart from its actor trains nothing here
                    components[key.replace("/", "_")] = state
        return components

    def close(self) -> None:
        for owner in (self.reward_manager, *self.models.values()):
            closer = getattr(owner, "close", None)
            if closer is not None:
                closer()


def build_context(
    cfg: SiirlConfig, plan: ExecutionPlan, rank: int, backend: DeviceBackend, local_device: int,
    startup_marks: dict[str, float] | None = None,
) -> WorkerContext:
    from siirl.dag_worker.env_setup import env_reward_manager
    from siirl.dag_worker.models import build_models
    from siirl.data_coordinator import build_train_dataloader, build_val_dataloader
    from siirl.data_coordinator.dataloader import dist_scan_share
    from siirl.engine.workers.model_loading import load_tokenizer
    from siirl.engine.workers.vision import load_image_processor

    marks = {} if startup_marks is None else startup_marks
    me = plan.worker(rank)
    backend.manual_seed(cfg.trainer.seed + rank)
    tokenizer = load_tokenizer(data_tokenizer_model(cfg))
    images = load_image_processor(data_tokenizer_model(cfg))
    startup_timing.mark("tokenizer", marks)
    groups, sp_groups = build_dp_groups(plan, rank), build_sp_groups(plan, rank)
    startup_timing.mark("process_groups", marks)
    data_coord = me.data_coord()
    # Every worker scans a 1/world slice of the rows for over-long prompts; they share the findings.
    # Workers whose first node is fed by another placement group build the loader (same epoch
    # length everywhere) but never iterate it, so they read no rows.
    train_loader = build_train_dataloader(
        cfg.data, tokenizer, data_coord.dp_rank, data_coord.dp_size, scan=dist_scan_share(), image_processor=images,
        prompts_per_draw=plan.resolved.prompts_per_draw,
    )
    val_loader = (
        build_val_dataloader(
            cfg.data, tokenizer, data_coord.dp_rank, data_coord.dp_size, scan=dist_scan_share(),
            image_processor=images,
        )
        if cfg.data.val_files else None
    )
    startup_timing.mark("data", marks)
    reward_manager = env_reward_manager(cfg, tokenizer) or make_reward_manager_from_config(cfg, tokenizer)
    startup_timing.mark("reward", marks)
    ctx = WorkerContext(
        cfg=cfg, plan=plan, rank=rank, backend=backend, tokenizer=tokenizer, graph=me.graph,
        local_device=local_device, groups=groups, sp_groups=sp_groups, train_loader=train_loader,
        val_loader=val_loader, reward_manager=reward_manager, startup_marks=marks,
    )
    if moves_samples(plan):
        from siirl.data_coordinator import DataCoordinator

        ctx.coordinator = DataCoordinator(balance=cfg.trainer.balance_batch)
    ctx.handoffs = Handoffs(plan, rank, ctx.coordinator)
    ctx.models = build_models(ctx, me.graph)
    startup_timing.mark("models", marks)
    return ctx

"""What one DAG worker holds while it runs: config, the models its graph needs, data shard, reward.

Built-in node functions reach everything through this object (``kwargs["ctx"]``). Models live in
``models[key]`` under the planner's slot names (``actor``, ``critic``, ``<agent>/actor`` ...), built by
the role specs of :mod:`siirl.execution.roles` for the nodes of this worker's own graph only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from siirl.dag_worker.policy import Policy
from siirl.device import DeviceBackend
from siirl.execution.dag import TaskGraph
from siirl.execution.roles import ROLES, model_key
from siirl.execution.scheduler.plan import ExecutionPlan
from siirl.params.root import SiirlConfig


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

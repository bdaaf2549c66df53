"""The built-in algorithm graphs (grpo, ppo, dapo, embodied) and the config-driven choice among them.

Every built-in graph is a single chain: all nodes run colocated on every worker, as in siiRL. The chain is
derived from what the configured estimator declares it needs (``siirl.algorithms.estimator_needs``): values add the
critic nodes, reward baselines add the greedy-baseline node; then the node contracts order it, so a step
always runs after the step writing what it reads (KL in the reward puts the log-prob passes first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from siirl.algorithms import estimator_needs
from siirl.errors import ConfigError
from siirl.execution.dag.contract import NodeContract, declared_contract
from siirl.execution.dag.node import resolve_node_callable
from siirl.execution.dag.node_types import NodeRole, NodeType
from siirl.execution.dag.pipeline import Pipeline
from siirl.execution.dag.role_defaults import NODES, default_func
from siirl.execution.dag.task_graph import TaskGraph
from siirl.execution.roles import uses_critic, uses_teacher
from siirl.params.algorithm import AlgorithmConfig
from siirl.params.enums import WorkflowType
from siirl.params.root import SiirlConfig, or_defaults
from siirl.registry import Registry


@dataclass(frozen=True)
class _Step:
    node_type: NodeType
    node_role: NodeRole
    only_forward_compute: bool = False
    #: ``module:function`` of a step that does not run its role's built-in function
    own_func: str = ""

    @property
    def func(self) -> str:
        """The worker function: its own, else the role's built-in one (``role_defaults``, which workflow
        files without a ``func`` read too)."""
        return self.own_func or str(default_func(self.node_type, self.node_role, self.only_forward_compute))


#: The building blocks of every built-in graph, keyed by their node_id.
STEPS: dict[str, _Step] = {
    "rollout_actor": _Step(NodeType.MODEL_INFERENCE, NodeRole.ROLLOUT),
    "embodied_sampling": _Step(NodeType.COMPUTE, NodeRole.EMBODIED_SAMPLING),
    "reward_model": _Step(NodeType.MODEL_INFERENCE, NodeRole.REWARD, own_func=f"{NODES}:compute_rm_score"),
    "function_reward": _Step(NodeType.COMPUTE, NodeRole.REWARD),
    "dynamic_sampling": _Step(NodeType.COMPUTE, NodeRole.DYNAMIC_SAMPLING),
    "calculate_advantages": _Step(NodeType.COMPUTE, NodeRole.ADVANTAGE),
    "actor_old_log_prob": _Step(NodeType.MODEL_INFERENCE, NodeRole.ACTOR, only_forward_compute=True),
    "reference_log_prob": _Step(NodeType.MODEL_INFERENCE, NodeRole.REFERENCE),
    "teacher_log_prob": _Step(NodeType.MODEL_INFERENCE, NodeRole.TEACHER),
    "critic_value": _Step(NodeType.MODEL_INFERENCE, NodeRole.CRITIC, only_forward_compute=True),
    "critic_train": _Step(NodeType.MODEL_TRAIN, NodeRole.CRITIC),
    "actor_train": _Step(NodeType.MODEL_TRAIN, NodeRole.ACTOR),
    "reward_baseline": _Step(
        NodeType.MODEL_INFERENCE, NodeRole.ROLLOUT, own_func="siirl.dag_worker.reward_baseline:compute_reward_baseline"
    ),
}

_HEAD = ["rollout_actor", "function_reward"]

PipelineBuilder = Callable[..., TaskGraph]
#: Built-in graph builders (``fn(cfg=None) -> TaskGraph``) by family name.
PIPELINES: Registry[PipelineBuilder] = Registry("built-in pipeline")


def chain_pipeline(pipeline_id: str, description: str, node_ids: list[str]) -> Pipeline:
    """A Pipeline running the named ``STEPS`` one after another (each depends on the previous one)."""
    pipeline = Pipeline(pipeline_id, description)
    for i, node_id in enumerate(node_ids):
        step = STEPS[node_id]
        pipeline.add_node(
            node_id,
            func=step.func,
            deps=node_ids[i - 1 : i],
            node_type=step.node_type,
            node_role=step.node_role,
            only_forward_compute=step.only_forward_compute,
        )
    return pipeline


def _contract(node_id: str, cfg: SiirlConfig) -> NodeContract:
    declared = declared_contract(resolve_node_callable(STEPS[node_id].func, f"node {node_id!r}"))
    return declared.resolve(cfg) if declared is not None else NodeContract()


def order_by_contracts(node_ids: list[str], cfg: SiirlConfig) -> list[str]:
    """``node_ids`` in their preferred order, except that a step moves up to just before the first step
    reading one of its outputs (e.g. the log-prob passes before the advantage when KL is in the reward)."""
    ordered = list(node_ids)
    contracts = {node_id: _contract(node_id, cfg) for node_id in node_ids}
    moved = True
    while moved:
        moved = False
        for i, reader in enumerate(ordered):
            later = [w for w in ordered[i + 1 :] if set(contracts[w].writes) & set(contracts[reader].reads)]
            if later:
                ordered.remove(later[0])
                ordered.insert(i, later[0])
                moved = True
                break
    return ordered


def policy_steps(cfg: SiirlConfig) -> list[str]:
    """The steps that train one policy once its samples are scored, derived from the estimator's needs and
    the critic setting, in contract order. Single-policy graphs and every agent of a team use them."""
    needs = estimator_needs(_estimator_name(cfg))
    baseline = ["reward_baseline"] if needs.reward_baselines else []
    teacher = ["teacher_log_prob"] if uses_teacher(cfg) else []
    if uses_critic(cfg):
        critic = ["actor_old_log_prob", "reference_log_prob", *teacher, "critic_value", "calculate_advantages",
                  "critic_train"]
        steps = [*baseline, *critic, "actor_train"]
    else:
        steps = [*baseline, "calculate_advantages", "actor_old_log_prob", "reference_log_prob", *teacher, "actor_train"]
    return order_by_contracts(steps, cfg)


def _scoring(head: list[str], cfg: SiirlConfig) -> list[str]:
    """With ``reward_model.enable`` the reward model scores the responses before the reward node."""
    if not cfg.reward_model.enable:
        return head
    if estimator_needs(_estimator_name(cfg)).reward_baselines:
        raise ConfigError(
            "reward_model.enable=true with a greedy-baseline estimator (remax) is not supported: the baseline "
            "is scored by the rule reward; use grpo, rloo, gae, ..."
        )
    at = head.index("function_reward")
    return [*head[:at], "reward_model", *head[at:]]


def derived_pipeline(pipeline_id: str, description: str, head: list[str], cfg: SiirlConfig | None) -> TaskGraph:
    """The chain for ``cfg`` (``None``: the defaults), ordered so that every read comes after its writer."""
    cfg = or_defaults(cfg)
    if estimator_needs(_estimator_name(cfg)).agent_chain:
        raise ConfigError(
            f"algorithm.adv_estimator={_estimator_name(cfg)} chains the turns of a multi-agent team and this run "
            "trains one policy; use gae, or a team (dag.workflow_path=<MARFT workflow> or multi_agent_pipeline)"
        )
    steps = [*_scoring(head, cfg), *policy_steps(cfg)]
    return chain_pipeline(pipeline_id, description, order_by_contracts(steps, cfg)).build()


@PIPELINES.register("grpo")
def grpo_pipeline(cfg: SiirlConfig | None = None) -> TaskGraph:
    """Group-relative advantages need no critic: reward -> advantage, then log-probs and the update."""
    return derived_pipeline("grpo", "GRPO-family training step (critic-free)", _HEAD, cfg)


@PIPELINES.register("ppo")
def ppo_pipeline(cfg: SiirlConfig | None = None) -> TaskGraph:
    """GAE needs the critic's values before advantages, and the critic trains on the returns."""
    cfg = cfg if cfg is not None else SiirlConfig(algorithm=AlgorithmConfig(adv_estimator="gae"))
    return derived_pipeline("ppo", "PPO training step with a critic (GAE)", _HEAD, cfg)


@PIPELINES.register("dapo")
def dapo_pipeline(cfg: SiirlConfig | None = None) -> TaskGraph:
    """GRPO with dynamic sampling: zero-variance groups are dropped right after scoring."""
    return derived_pipeline("dapo", "DAPO training step (GRPO + dynamic sampling)", [*_HEAD, "dynamic_sampling"], cfg)


@PIPELINES.register("embodied")
def embodied_pipeline(cfg: SiirlConfig | None = None) -> TaskGraph:
    """SRPO-style embodied training: groups that all succeed or all fail are dropped before scoring."""
    head = ["rollout_actor", "embodied_sampling", "function_reward"]
    return derived_pipeline("embodied", "Embodied (SRPO-style) training step", head, cfg)


def _text(value: str | Enum) -> str:
    """A config value as written in YAML; configs built in Python may hold the enum member itself."""
    return str(value.value if isinstance(value, Enum) else value)


def _estimator_name(cfg: SiirlConfig) -> str:
    return _text(cfg.algorithm.adv_estimator)


def builtin_pipeline_name(cfg: SiirlConfig | None) -> str:
    """Which built-in family the config asks for; the estimator's needs shape the graph inside it."""
    cfg = or_defaults(cfg)
    estimator_needs(_estimator_name(cfg))  # unknown -> one line
    workflow = WorkflowType(_text(cfg.algorithm.workflow_type))  # its field's rule held at load
    if workflow is WorkflowType.DEFAULT and cfg.algorithm.filter_groups.enable:
        workflow = WorkflowType.DAPO
    if workflow is WorkflowType.DEFAULT:
        return "ppo" if uses_critic(cfg) else "grpo"
    return workflow.value.lower()

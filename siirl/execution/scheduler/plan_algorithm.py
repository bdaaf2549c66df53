"""What one training step computes, for ``--plan``: the advantage estimator, the policy loss, the reward and
the batch keys each node reads and writes (its contract under the run's config), so a user can see where a
node of theirs fits before anything starts."""

from __future__ import annotations

from typing import Any

from siirl.algorithms.advantage import ADV_ESTIMATORS
from siirl.environment.outputs import env_mode
from siirl.execution.dag.task_graph import TaskGraph
from siirl.params.root import SiirlConfig


def _function_ref(fn: Any) -> str:
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    return f"{module}:{name}" if module and name else repr(fn)


def reward_description(cfg: SiirlConfig) -> str:
    """Where ``token_level_scores`` come from under ``cfg``."""
    mode = env_mode(cfg)
    if mode is not None:
        return f"the environment's rewards ({mode} rollouts)"
    if cfg.reward_model.enable:
        return f"reward model {cfg.reward_model.model.path or '(embedded)'} (its score replaces the rule reward)"
    manager = f"reward manager {cfg.reward_model.reward_manager}"
    custom = cfg.custom_reward_function
    if custom.path:
        return f"{custom.name} from {custom.path} (custom_reward_function), {manager}"
    return f"the score function registered for each row's data_source (siirl.reward_score), {manager}"


def render_algorithm(graph: TaskGraph, cfg: SiirlConfig) -> str:
    """The estimator (and the function it names), the policy loss, the reward, then per node in execution
    order its function, the keys it reads and writes and the models it needs."""
    estimator = str(cfg.algorithm.adv_estimator)
    lines = [
        "Algorithm:",
        f"  advantage estimator: {estimator} ({_function_ref(ADV_ESTIMATORS.get(estimator))})",
        f"  policy loss: {cfg.actor_rollout_ref.actor.policy_loss.loss_mode}",
        f"  reward: {reward_description(cfg)}",
        "Node contracts (batch keys read -> written; models):",
    ]
    for node_id in graph.get_execution_order():
        node = graph.nodes[node_id]
        contract = node.effective_contract(cfg)
        lines.append(f"  {node_id} ({node.executable_ref})")
        if contract is None:
            lines.append("    no contract declared: its reads and writes are not checked")
            continue
        lines.append(f"    reads: {', '.join(contract.reads) or '-'}")
        lines.append(f"    writes: {', '.join(contract.writes) or '-'}")
        if contract.roles:
            lines.append(f"    models: {', '.join(contract.roles)}")
    return "\n".join(lines)

"""Plan-time proof that a graph cannot fail at step 1 for a missing batch key or a missing model.

Walks the graph in execution order: every key a node reads must be written by one of its ancestors or
by the dataloader, and every model role it needs must exist under the config. A node without any
contract (an undeclared custom function) may write anything, so reads below it are not judged.
Model roles are a registry (``register_model_role``): a new kind of model or environment adds one check.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from siirl.errors import ConfigError
from siirl.execution.dag.contract import NodeContract
from siirl.execution.dag.task_graph import TaskGraph
from siirl.params.root import SiirlConfig

logger = logging.getLogger(__name__)


class ContractError(ConfigError):
    """A node reads a key nothing upstream writes, or needs a model the config does not provide."""


#: Keys every batch carries when it leaves the dataloader.
DATALOADER_KEYS = ("input_ids", "attention_mask", "position_ids", "data_source", "ground_truth", "index")

#: Role -> check(cfg) returning None when the model exists, else the reason it does not.
RoleCheck = Callable[[Any], str | None]
MODEL_ROLES: dict[str, RoleCheck] = {}


def register_model_role(name: str) -> Callable[[RoleCheck], RoleCheck]:
    """Decorator adding the availability check of a model role (``actor``, ``critic``, ``environment`` ...).

    Registering a name again replaces its check: an environment package replaces ``environment``'s
    "none configured" with a check of its own config section.
    """

    def wrap(check: RoleCheck) -> RoleCheck:
        MODEL_ROLES[name] = check
        return check

    return wrap


def uses_reference(cfg: SiirlConfig) -> bool:
    """A reference policy is loaded only when a KL term needs it (in the loss or in the reward)."""
    return cfg.actor_rollout_ref.actor.use_kl_loss or cfg.algorithm.use_kl_in_reward


def uses_critic(cfg: SiirlConfig) -> bool:
    """A critic is loaded when enabled or when the advantage estimator needs values."""
    from siirl.algorithms.needs import estimator_needs

    return cfg.critic.enable or estimator_needs(cfg.algorithm.adv_estimator).values


@register_model_role("actor")
@register_model_role("rollout")
def _policy(cfg: Any) -> str | None:
    return None


@register_model_role("reference")
def _reference(cfg: Any) -> str | None:
    if uses_reference(cfg):
        return None
    return "no KL term is configured (actor_rollout_ref.actor.use_kl_loss / algorithm.use_kl_in_reward)"


@register_model_role("critic")
def _critic(cfg: Any) -> str | None:
    return None if uses_critic(cfg) else "critic.enable=false and the advantage estimator needs no values"


@register_model_role("reward_model")
def _reward_model(cfg: Any) -> str | None:
    return "model-based rewards are not supported (rule rewards need no model)"


@register_model_role("environment")
def _environment(cfg: Any) -> str | None:
    return "no environment is configured for this run"


def dataloader_keys(cfg: SiirlConfig) -> tuple[str, ...]:
    raw = ("raw_prompt",) if cfg.data.return_raw_chat else ()
    return (*DATALOADER_KEYS, *raw)


def _check_roles(node_id: str, contract: NodeContract, cfg: SiirlConfig) -> None:
    for role in contract.roles:
        check = MODEL_ROLES.get(role)
        if check is None:
            raise ContractError(
                f"node {node_id!r} needs unknown model role {role!r}; known: {', '.join(sorted(MODEL_ROLES))}"
            )
        reason = check(cfg)
        if reason is not None:
            raise ContractError(f"node {node_id!r} needs the {role} model, but {reason}")


def check_contracts(graph: TaskGraph, cfg: SiirlConfig) -> dict[str, NodeContract | None]:
    """Raise ``ContractError`` (one line naming node and key) on the first broken read or missing role.

    Returns each node's effective contract (None for undeclared nodes), e.g. for display.
    """
    order = graph.get_execution_order()
    contracts = {node_id: graph.nodes[node_id].effective_contract(cfg) for node_id in order}
    loaded = set(dataloader_keys(cfg))
    for node_id in order:
        contract = contracts[node_id]
        if contract is None:
            logger.info("node %r declares no contract; its reads and writes are not checked", node_id)
            continue
        _check_roles(node_id, contract, cfg)
        upstream = [contracts[a] for a in graph.ancestors(node_id)]
        if any(c is None for c in upstream):
            continue
        available = loaded.union(*(c.writes for c in upstream if c is not None))
        missing = [key for key in contract.reads if key not in available]
        if missing:
            raise ContractError(
                f"node {node_id!r} reads {missing[0]!r}, which no upstream node and not the dataloader writes"
            )
    for node_id in order:
        graph.nodes[node_id].node_config()  # a node's own section must fit its config dataclass
    return contracts


def check_declared_writes(node_id: str, contract: NodeContract | None, batch: Any) -> None:
    """At run time: a node must really write what its contract promises (keeps contracts honest)."""
    if contract is None or not hasattr(batch, "keys"):
        return
    present = set(batch.keys())
    missing = [key for key in contract.writes if key not in present]
    if missing:
        raise ContractError(f"node {node_id!r} declares that it writes {missing[0]!r}, but its output batch lacks it")

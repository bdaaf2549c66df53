"""Plan-time proof that a graph cannot fail at step 1 for a missing batch key or a missing model.

Walks the graph in execution order: every key a node reads must be written by one of its ancestors or
by the dataloader, and every model role it needs must exist under the config. A node without any
contract (an undeclared custom function) may write anything, so reads below it are not judged.
Model roles are the specs of :mod:`siirl.execution.roles`: a new kind of model adds one spec there.
"""

from __future__ import annotations

import logging
from typing import Any

from siirl.errors import ConfigError
from siirl.execution.dag.contract import NodeContract
from siirl.execution.dag.task_graph import TaskGraph
from siirl.execution.roles import ROLES
from siirl.params.root import SiirlConfig

logger = logging.getLogger(__name__)


class ContractError(ConfigError):
    """A node reads a key nothing upstream writes, or needs a model the config does not provide."""


#: Keys every batch carries when it leaves the dataloader.
DATALOADER_KEYS = (
    "input_ids", "attention_mask", "position_ids", "data_source", "ground_truth", "index", "extra_info",
)

def dataloader_keys(cfg: SiirlConfig) -> tuple[str, ...]:
    from siirl.engine.rollout.vision_requests import MULTIMODAL_DATA
    from siirl.engine.workers.vision import policy_sees_images
    from siirl.engine.workers.vision_inputs import MULTIMODAL_INPUTS

    raw = ("raw_prompt",) if cfg.data.return_raw_chat else ()
    images = (MULTIMODAL_INPUTS, MULTIMODAL_DATA) if policy_sees_images(cfg) else ()
    return (*DATALOADER_KEYS, *raw, *images)


def _check_roles(node_id: str, contract: NodeContract, cfg: SiirlConfig) -> None:
    for role in contract.roles:
        if role not in ROLES:
            raise ContractError(
                f"node {node_id!r} needs unknown model role {role!r}; known: {', '.join(ROLES.names())}"
            )
        reason = ROLES.get(role).available(cfg)
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
    try:
        keys = batch.keys(include_nested=True)  # a TensorDict: agents' rows are nested
    except TypeError:
        keys = batch.keys()
    present = {"/".join(k) if isinstance(k, tuple) else k for k in keys}
    missing = [key for key in contract.writes if key not in present]
    if missing:
        raise ContractError(f"node {node_id!r} declares that it writes {missing[0]!r}, but its output batch lacks it")

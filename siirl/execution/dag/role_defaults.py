"""The built-in function behind each (node_type, node_role), for workflow files that name no ``func``.

siiRL's published workflow YAML lists only ``node_id``, ``node_type``, ``node_role`` and ``dependencies``;
the worker then runs the built-in step of that role. ``only_forward_compute`` tells an actor's old-log-prob
pass from its update (and a critic's value pass from its training).
"""

from __future__ import annotations

from siirl.execution.dag.node_types import NodeRole, NodeType

NODES = "siirl.dag_worker.builtin_nodes"
FILTERS = "siirl.user_interface.filters"

_FORWARD, _TRAIN = "forward", "train"

#: (role, forward | train | None for either) -> "module:function"
_DEFAULTS: dict[tuple[NodeRole, str | None], str] = {
    (NodeRole.ROLLOUT, None): f"{NODES}:generate",
    (NodeRole.REWARD, None): f"{NODES}:compute_reward",
    (NodeRole.ADVANTAGE, None): f"{NODES}:compute_advantage",
    (NodeRole.REFERENCE, None): f"{NODES}:compute_ref_log_prob",
    (NodeRole.TEACHER, None): f"{NODES}:compute_teacher_log_prob",
    (NodeRole.ACTOR, _FORWARD): f"{NODES}:compute_old_log_prob",
    (NodeRole.ACTOR, _TRAIN): f"{NODES}:train_actor",
    (NodeRole.CRITIC, _FORWARD): f"{NODES}:compute_value",
    (NodeRole.CRITIC, _TRAIN): f"{NODES}:train_critic",
    (NodeRole.DYNAMIC_SAMPLING, None): f"{FILTERS}:dynamic_sampling",
    (NodeRole.EMBODIED_SAMPLING, None): f"{FILTERS}:embodied_sampling",
}


def default_func(node_type: NodeType, node_role: NodeRole, only_forward_compute: bool) -> str | None:
    """The built-in ``"module:function"`` for this node, or None when the role has none (DEFAULT)."""
    if (node_role, None) in _DEFAULTS:
        return _DEFAULTS[(node_role, None)]
    forward = only_forward_compute or node_type is NodeType.MODEL_INFERENCE
    return _DEFAULTS.get((node_role, _FORWARD if forward else _TRAIN))

"""The hand-over between a team's advantage nodes for estimators that chain agents (``gae_marft``).

Agent ``k``'s advantage node runs after agent ``k+1``'s (the planner orders them), which leaves its head,
its value and unwhitened advantage at its first response token (:func:`siirl.algorithms.marft_gae.chain_head`),
in its rows; agent ``k`` continues its GAE from there. The last agent continues from zeros.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

from siirl.algorithms.marft_gae import chain_head
from siirl.execution.dag.contract import AGENTS_FIELD

HEAD_KEYS = ("chain_head_value", "chain_head_advantage")


def incoming_chain(full: TensorDict, rows: TensorDict, next_agent: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The next agent's head (one value and advantage per row), zeros for the last agent."""
    if not next_agent:
        zeros = torch.zeros(rows.batch_size[0], dtype=torch.float32)
        return zeros, zeros
    following = full.get((AGENTS_FIELD, next_agent))
    missing = [key for key in HEAD_KEYS if key not in following.keys()]  # noqa: SIM118 (TensorDict keys)
    if missing:
        raise RuntimeError(
            f"agent {next_agent!r} has no {missing[0]} yet: its advantage node must run before the agent "
            "acting before it (the multi-agent planner chains them for this estimator)"
        )
    return following[HEAD_KEYS[0]], following[HEAD_KEYS[1]]


def record_chain_head(rows: TensorDict, incoming: tuple[torch.Tensor, torch.Tensor]) -> None:
    """Leave this agent's head in its rows for the agent acting before it."""
    head = chain_head(rows["values"], rows["returns"], rows["response_mask"], incoming)
    rows[HEAD_KEYS[0]], rows[HEAD_KEYS[1]] = head

"""Which environment-driven rollout a config asks for, the batch keys each one adds, and the contract
parts the planner uses for them (the ``environment`` role's check is its spec in siirl.execution.roles).

Kept free of torch and engine imports: the planner reads it (node contracts) before any worker starts.
"""

from __future__ import annotations

from typing import Any

from siirl.execution.config_access import cfg_get
from siirl.execution.dag.contract import NodeContract

#: Keys the multi-turn (conversation) rollout adds to the usual rollout output.
MULTI_TURN_KEYS = ("env_turn_rewards", "env_turn_index", "task_success", "env_progress", "env_error", "num_turns")
#: Keys the step-wise (embodied) rollout adds; each row is one environment step.
STEP_KEYS = (
    "task_success", "env_progress", "env_error", "traj_steps", "traj_signature", "env_step_reward", "env_step",
    "traj_uid",
)
ROLLOUT_KEYS = {"turns": MULTI_TURN_KEYS, "steps": STEP_KEYS}
#: What each mode's reward reads (siirl.engine.reward.env_rewards).
REWARD_READS = {
    "turns": ("env_turn_rewards", "env_turn_index", "response_mask"),
    "steps": ("task_success", "traj_signature", "env_progress", "env_error", "uid", "response_mask"),
}


def env_mode(cfg: Any) -> str | None:
    """``steps`` for ``algorithm.workflow_type=EMBODIED``, ``turns`` for multi-turn rollouts, else None."""
    if str(cfg_get(cfg, "algorithm.workflow_type", "DEFAULT")).upper() == "EMBODIED":
        return "steps"
    if bool(cfg_get(cfg, "actor_rollout_ref.rollout.multi_turn.enable", False)):
        return "turns"
    return None


def environment_outputs(cfg: Any) -> NodeContract:
    """The rollout node's extra writes (and its need of an environment) in environment-driven runs."""
    mode = env_mode(cfg)
    return NodeContract(writes=ROLLOUT_KEYS[mode], roles=("environment",)) if mode else NodeContract()


def environment_reward_inputs(cfg: Any) -> NodeContract:
    """What the reward node reads when the environment scores the rollout."""
    mode = env_mode(cfg)
    return NodeContract(reads=REWARD_READS[mode]) if mode else NodeContract()

"""Which environment-driven rollout a config asks for, the batch keys each one adds and those its reward
reads: the built-in rollout and reward nodes declare their contracts from them (siirl.dag_worker.builtin_nodes);
the ``environment`` role's check is its spec in siirl.execution.roles.

Kept free of torch and engine imports: the planner reads it (node contracts) before any worker starts.
"""

from __future__ import annotations

from siirl.agent_loops import TOOL_AGENT, runs_agent_loops
from siirl.params.root import SiirlConfig

#: Keys the multi-turn (conversation) rollout adds to the usual rollout output.
MULTI_TURN_KEYS = ("env_turn_rewards", "env_turn_index", "task_success", "env_progress", "env_error", "num_turns")
#: Keys the step-wise (embodied) rollout adds; each row is one environment step.
STEP_KEYS = (
    "task_success", "env_progress", "env_error", "traj_steps", "traj_signature", "env_step_reward", "env_step",
    "traj_uid",
)
#: Keys the tool-calling multi-turn rollout adds on top of the multi-turn ones.
TOOL_KEYS = (
    "tool_calls", "tool_errors", "tool_timeouts", "interaction_turns", "interaction_errors", "interaction_timeouts",
    "rollout_reward_scores",
)
#: Keys the agent-loop rollout adds (siirl.engine.rollout.agent_loop_rollout).
AGENT_LOOP_KEYS = ("num_turns", "env_error", "agent_reward", "agent_reward_set")
ROLLOUT_KEYS = {
    "turns": MULTI_TURN_KEYS, "tools": MULTI_TURN_KEYS + TOOL_KEYS, "steps": STEP_KEYS, "agents": AGENT_LOOP_KEYS,
}
#: What each mode's reward reads (siirl.engine.reward.env_rewards).
REWARD_READS = {
    "turns": ("env_turn_rewards", "env_turn_index", "response_mask"),
    "tools": ("env_turn_rewards", "env_turn_index", "response_mask", "rollout_reward_scores", "num_turns", "env_error"),
    "steps": ("task_success", "traj_signature", "env_progress", "env_error", "uid", "response_mask"),
    "agents": ("agent_reward", "agent_reward_set", "env_error", "num_turns", "response_mask"),
}


def env_mode(cfg: SiirlConfig) -> str | None:
    """``steps`` for ``algorithm.workflow_type=EMBODIED``; ``agents`` for a run of user agent loops; for
    multi-turn rollouts (verl's ``tool_agent``) ``tools`` when a tool or interaction config is set, else
    ``turns``; otherwise None."""
    if str(cfg.algorithm.workflow_type) == "EMBODIED":  # canonical once loaded (WorkflowType)
        return "steps"
    agent = cfg.actor_rollout_ref.rollout.agent
    if runs_agent_loops(agent):
        return "agents"
    multi_turn = cfg.actor_rollout_ref.rollout.multi_turn
    if multi_turn.enable or agent.default_agent_loop == TOOL_AGENT:
        return "tools" if multi_turn.tool_config_path or multi_turn.interaction_config_path else "turns"
    return None

"""Where the PPO "old" log-probs come from: ``actor_rollout_ref.actor.old_log_prob_source``.

- ``recompute``: the actor runs one extra forward over every response after the rollout (verl's default).
- ``rollout``: the rollout engine records the log-probs of the tokens it samples, and that forward is
  skipped. Only engines that can record them accept it; environment-driven rollouts (multi-turn,
  EMBODIED) assemble their sequences from several calls and always recompute.
- ``auto`` (default): ``rollout`` where the engine's numbers are exact (the HF engine in float32: the same
  weights, synced before every rollout, through the same model code), else ``recompute``.

Rollout correction's bypass mode (``algorithm.rollout_correction.bypass_mode=true``) means ``rollout`` by
definition: verl then trains on two policies, the rollout's and the current one, never recomputing.

Resolved once, by ``siirl.engine.rollout.choice.resolve_old_log_prob_source`` in ``load_config`` (it asks the
rollout engine and the device backend), so the plan, the node contracts and every worker see the same choice.
"""

from __future__ import annotations

OLD_LOG_PROB_KEY = "actor_rollout_ref.actor.old_log_prob_source"
SOURCES = ("auto", "recompute", "rollout")
BYPASS_KEY = "algorithm.rollout_correction.bypass_mode"

"""verl's ``ulysses_sequence_parallel_size`` per model role, resolved and checked when the config loads.

The ranks of one sequence-parallel group share each micro-batch and split its packed tokens, so the role
needs the packed padding-free layout (``model.use_remove_padding`` with layout ``auto`` or ``packed``).
The planner lays the groups out (``siirl.execution.scheduler.planner``); the heads check needs the model's
config and runs with the other input checks (``siirl.engine.workers.ulysses.check_attention_heads``).
"""

from __future__ import annotations

from typing import Any

from siirl.errors import ConfigError
from siirl.params.rules import Rule
from siirl.params.trainer import world_size

#: A role's size: a whole number of ranks, at least one.
SP_SIZE: Rule = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a positive integer")

#: Role -> the key that sets its size.
SP_KEYS = {
    "actor": "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
    "reference": "actor_rollout_ref.ref.ulysses_sequence_parallel_size",
    "critic": "critic.ulysses_sequence_parallel_size",
}


def sequence_parallel_sizes(cfg: Any) -> dict[str, int]:
    """Role -> its sequence-parallel size (the reference's null follows the actor, as in verl)."""
    actor = cfg.actor_rollout_ref.actor.ulysses_sequence_parallel_size
    ref = cfg.actor_rollout_ref.ref.ulysses_sequence_parallel_size
    return {"actor": actor, "reference": actor if ref is None else ref, "critic": cfg.critic.ulysses_sequence_parallel_size}


def role_models(cfg: Any) -> dict[str, tuple[str, Any]]:
    """Role -> (the key of its model section, that section)."""
    policy = ("actor_rollout_ref.model", cfg.actor_rollout_ref.model)
    return {"actor": policy, "reference": policy, "critic": ("critic.model", cfg.critic.model)}


def check_sequence_parallel(cfg: Any) -> None:
    """A role with size > 1 splits the job's devices evenly and runs the packed layout (each size is a
    positive integer by its field's rule, ``SP_SIZE``)."""
    sizes = sequence_parallel_sizes(cfg)
    models = role_models(cfg)
    for role, size in sizes.items():
        if size == 1:
            continue
        devices = world_size(cfg)
        if devices % size:
            raise ConfigError(
                f"bad config: {SP_KEYS[role]}={size} must divide the job's {devices} devices "
                "(trainer.nnodes x trainer.n_gpus_per_node)"
            )
        section, model = models[role]
        layout = str(model.remove_padding_layout)
        if not model.use_remove_padding or layout not in ("auto", "packed"):
            raise ConfigError(
                f"bad config: {SP_KEYS[role]}={size} splits each packed micro-batch over {size} ranks; it needs "
                f"{section}.use_remove_padding=true and remove_padding_layout=auto or packed (got "
                f"use_remove_padding={model.use_remove_padding}, remove_padding_layout={layout})"
            )
    if cfg.actor_rollout_ref.actor.use_prefix_grouper and max(sizes["actor"], sizes["reference"]) > 1:
        raise ConfigError(
            "bad config: actor_rollout_ref.actor.use_prefix_grouper (a prompt once per micro-batch) and Ulysses "
            "sequence parallelism (ulysses_sequence_parallel_size > 1) do not combine; set one of them"
        )

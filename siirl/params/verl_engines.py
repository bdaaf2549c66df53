"""verl's training engines other than FSDP, refused in one line naming the engine, before the unknown keys
their options would cause (siiRL trains with FSDP2 or whole-model replicas, verl's ``dp`` engine).

A script picks an engine by ``model_engine=<name>``, by a role's ``strategy=<name>``, by choosing one of the
engine's YAML files for a role (``actor@actor_rollout_ref.actor=mlite_actor``), or by setting the engine's
own section (``actor_rollout_ref.actor.veomni.*``). Megatron-LM is refused by its section alone, at any
depth, in an override or a config file (verl's Megatron scripts set ``actor_rollout_ref.actor.megatron.*``
next to ``strategy=megatron``, which its field's rule refuses).
"""

from __future__ import annotations

from typing import Any

MEGATRON = "Megatron-LM training is not implemented; siiRL trains with FSDP2 or replicated"
_ELSE = "is not implemented; siiRL trains with FSDP2 or replicated (verl's dp engine)"

#: engine name (as verl's scripts spell it) -> the feature a refusal names.
ENGINES: dict[str, str] = {
    "veomni": "verl's VeOmni engine",
    "torchtitan": "verl's TorchTitan engine",
    "automodel": "verl's Automodel engine",
    "mlite": "verl's megatron-lite engine (Megatron-LM)",
    "fsdp_turbo": "verl's FSDP-Turbo engine",
}


def engine_refusal(key: str, value: str) -> str | None:
    """The one-line refusal of an override choosing another engine, or None."""
    parts = key.split(".")
    if "megatron" in parts:
        return f"{key}: {MEGATRON}"
    section = next((part for part in parts[:-1] if part in ENGINES), None)
    if section is not None:
        return f"{key}: {ENGINES[section]} {_ELSE}"
    chooses = key == "model_engine" or parts[-1] == "strategy" or "@" in key
    chosen = value.strip().strip("'\"") if chooses else ""
    # the engine's name itself or one of its YAML files (``mlite_actor``, ``veomni_critic``)
    engine = next((name for name in ENGINES if chosen == name or chosen.startswith(name + "_")), None)
    return f"{key}={value}: {ENGINES[engine]} {_ELSE}" if engine else None


def tree_engine_refusal(tree: Any) -> str | None:
    """The one-line refusal of a config file that sets a ``megatron`` section anywhere, or None."""
    found = isinstance(tree, dict) and any(k == "megatron" or tree_engine_refusal(v) for k, v in tree.items())
    return f"the config file sets megatron.*: {MEGATRON}" if found else None

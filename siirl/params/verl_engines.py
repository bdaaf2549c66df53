"""verl's training engines other than FSDP, refused in one line naming the engine, before the unknown keys
their options would cause (siiRL trains with FSDP2 or whole-model replicas, verl's ``dp`` engine).

A script picks an engine by ``model_engine=<name>``, by a role's ``strategy=<name>``, by choosing one of the
engine's YAML files for a role (``actor@actor_rollout_ref.actor=mlite_actor``), or by setting the engine's
own section (``actor_rollout_ref.actor.veomni.*``). Megatron keeps its older refusal
(``siirl.params.validate.UNSUPPORTED_SECTIONS``).
"""

from __future__ import annotations

_ELSE = "is not implemented; siiRL trains with FSDP2 or replicated (verl's dp engine)"

#: engine name (as verl's scripts spell it) -> the feature a refusal names.
ENGINES: dict[str, str] = {
    "veomni": "verl's VeOmni engine",
    "torchtitan": "verl's TorchTitan engine",
    "automodel": "verl's Automodel engine",
    "mlite": "verl's megatron-lite engine (Megatron-LM)",
    "fsdp_turbo": "verl's FSDP-Turbo engine",
}


def _engine_of(value: str) -> str | None:
    """The engine a value chooses: the name itself or a YAML of it (``mlite_actor``, ``veomni_critic``)."""
    return next((name for name in ENGINES if value == name or value.startswith(name + "_")), None)


def engine_refusal(key: str, value: str) -> str | None:
    """The one-line refusal of an override choosing another engine, or None."""
    parts = key.split(".")
    section = next((part for part in parts[:-1] if part in ENGINES), None)
    if section is not None:
        return f"{key}: {ENGINES[section]} {_ELSE}"
    chooses = key == "model_engine" or parts[-1] == "strategy" or "@" in key
    engine = _engine_of(value.strip().strip("'\"")) if chooses else None
    return f"{key}={value}: {ENGINES[engine]} {_ELSE}" if engine else None

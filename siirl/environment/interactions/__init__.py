"""Interactions (verl's simulated user turns): the YAML, the ``BaseInteraction`` interface, the built-in
gsm8k interaction, and the per-trajectory runner the tool environment uses when the policy stops calling
tools."""

from siirl.environment.interactions import gsm8k  # noqa: F401 - registers the built-in interactions
from siirl.environment.interactions.base import BaseInteraction
from siirl.environment.interactions.config import (
    INTERACTIONS,
    InteractionSpec,
    build_interactions,
    check_interaction_classes,
    check_interaction_rows,
    load_interaction_config,
)
from siirl.environment.interactions.turns import InteractionTurns

__all__ = [
    "INTERACTIONS",
    "BaseInteraction",
    "InteractionSpec",
    "InteractionTurns",
    "build_interactions",
    "check_interaction_classes",
    "check_interaction_rows",
    "load_interaction_config",
]

"""Dataclass configs (Hydra ConfigStore schema), their YAML composition and value checks.

The lowest config layer: it imports no engine, device, environment or algorithm. A run's config comes from
``siirl.config_checks.load_config``, which adds the checks against those packages' registries.
"""

from siirl.params.enums import AdvantageEstimator, WorkflowType
from siirl.params.loader import compose_config, config_dir
from siirl.params.root import SiirlConfig, or_defaults

__all__ = ["AdvantageEstimator", "SiirlConfig", "WorkflowType", "compose_config", "config_dir", "or_defaults"]

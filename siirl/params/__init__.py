"""Dataclass configs (Hydra ConfigStore schema), their YAML loader and value checks."""

from siirl.params.enums import AdvantageEstimator, WorkflowType
from siirl.params.loader import config_dir, load_config
from siirl.params.root import SiirlConfig, or_defaults

__all__ = ["AdvantageEstimator", "SiirlConfig", "WorkflowType", "config_dir", "load_config", "or_defaults"]

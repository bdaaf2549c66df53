"""Typed run configs for tests that need a few keys off their defaults."""

from typing import Any

from omegaconf import OmegaConf

from siirl.params import SiirlConfig


def typed_config(tree: dict[str, Any] | None = None) -> SiirlConfig:
    """The schema's defaults with the nested ``tree`` merged on top, as the loader merges YAML: a
    misspelt key or a wrong type fails here instead of being silently ignored by the code under test."""
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(SiirlConfig), tree or {}))

"""verl options refused before Hydra composes them; the sections' own rules (``siirl.params.rules``) run once
over the composed config (``validate_sections``, from the loader).

A key whose value names a registry entry (estimator, loss, engine, dtype, ...) has no rule here: its registry
states the keys it governs and ``siirl.config_checks`` checks them, so the allowed values are written once.
Options that are accepted by the schema but not implemented are refused rather than silently ignored.
"""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from siirl.errors import ConfigError
from siirl.params.distillation import refuse_other_teachers
from siirl.params.override_screen import parse_value
from siirl.params.root import SiirlConfig
from siirl.params.rules import field_table
from siirl.params.verl_engines import engine_refusal, tree_engine_refusal

#: Options the schema accepts for verl compatibility but siiRL does not implement: key -> (is it set?, why).
UNSUPPORTED = field_table(SiirlConfig, "early")


def refuse_unsupported(overrides: list[str], user_tree: dict[str, Any] | None) -> None:
    """Name an unsupported feature the input asks for, before any unknown-key error it also causes: a
    Megatron script fails on ``strategy=megatron``, not on the first ``megatron.*`` key the schema lacks."""
    refuse_other_teachers(overrides, user_tree)
    raw = OmegaConf.create(user_tree or {})
    for override in overrides:
        key, sep, value = override.partition("=")
        key = key.lstrip("+~")
        engine = engine_refusal(key, value)
        if engine:
            raise ConfigError(f"bad config: {engine}")
        if sep and key in UNSUPPORTED:
            OmegaConf.update(raw, key, parse_value(value), force_add=True)
    for key, (is_set, why) in UNSUPPORTED.items():
        value = OmegaConf.select(raw, key, default=None)
        if value is not None and is_set(value):
            raise ConfigError(f"bad config: {key}={value!r} {why}")
    engine = tree_engine_refusal(user_tree)
    if engine:
        raise ConfigError(f"bad config: {engine}")

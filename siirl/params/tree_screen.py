"""A user's YAML tree (``--config-path/--config-name``, e.g. verl's ``ppo_trainer.yaml``) under the same rules
as command-line overrides: each leaf is screened as ``key=value`` would be (renamed keys move, keys of
unimplemented features are dropped at their "off" value and refused otherwise, keys that change nothing here
are dropped, unknown keys are refused with a did-you-mean), all problems in one error.

Values are judged resolved (verl's tree fills many keys from others with ``${oc.select:...}``); what is kept
stays as written, so its interpolations still see the command line.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from siirl.params.override_screen import override_key, raise_problems, screen_each
from siirl.params.schema_keys import SchemaKeys


def _leaves(node: Any, prefix: str = "") -> list[str]:
    """Dotted keys of the tree's leaves (an empty dict or list is a leaf: a value the schema may hold)."""
    if isinstance(node, dict) and node:
        return [leaf for key, value in node.items() for leaf in _leaves(value, f"{prefix}{key}.")]
    return [prefix[:-1]]


def _resolved(cfg: Any, key: str) -> Any:
    try:
        value = OmegaConf.select(cfg, key, throw_on_resolution_failure=True)
    except OmegaConfBaseException:  # refers to a key only the command line or siiRL's defaults give
        value = OmegaConf.select(cfg, key, throw_on_resolution_failure=False)
    return OmegaConf.to_container(value, resolve=False) if OmegaConf.is_config(value) else value


def screen_tree(tree: dict[str, Any], schema: SchemaKeys, verl_tree: bool = False) -> dict[str, Any]:
    """The tree with renamed keys moved and dropped keys removed; every problem at once as one error.
    ``verl_tree``: the tree is verl's (its sections name verl's config classes), so a key without a status
    is reported as a verl key newer than the status table, with the nearest known key."""
    cfg = OmegaConf.create(tree)
    keys = _leaves(tree)
    overrides = [f"{key}={json.dumps(_resolved(cfg, key), default=str)}" for key in keys]
    results = screen_each(overrides, schema, verl_tree=verl_tree)
    raise_problems([problem for _, problem in results if problem is not None], "keys of the config file")
    dropped = {
        key for key, (keep, _) in zip(keys, results)
        if keep is None or _unset(cfg, key, override_key(keep), schema)
    }
    kept = OmegaConf.create({})
    for key, (keep, _) in zip(keys, results):
        if key in dropped:
            continue
        target, value = override_key(keep), keep.partition("=")[2]
        # a renamed key takes the value the rename gives; any other keeps the leaf as written, unless it
        # interpolates a dropped key (verl's reward model reads the critic's token budget): then its value
        raw = _raw(cfg, key)
        if isinstance(raw, str) and "${" in raw and dropped.intersection(re.findall(r"[\w.]+", raw)):
            raw = _resolved(cfg, key)
        OmegaConf.update(kept, target, yaml.safe_load(value) if target != key else raw, force_add=True)
    return OmegaConf.to_container(kept, resolve=False)


def _unset(cfg: Any, key: str, target: str, schema: SchemaKeys) -> bool:
    """verl's ``null`` on a key siiRL types without null means "not set" (tokenizer_path: the model's,
    total_training_steps: from the epochs, critic.enable: follow the estimator; a renamed key, e.g. the
    moved ``reward.custom_reward_function.path``, judged where it lands): siiRL's default stands."""
    return target in schema.not_nullable and _resolved(cfg, key) is None


def _raw(cfg: Any, key: str) -> Any:
    """The leaf as written (an interpolation stays one)."""
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    return OmegaConf.to_container(node, resolve=False)[leaf]

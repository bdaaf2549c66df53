"""The interaction YAML (verl's format) -> checked :class:`InteractionSpec` s -> interaction objects.

    interaction:
      - name: gsm8k                                       # optional: Gsm8kInteraction -> gsm8k
        class_name: verl.interactions.gsm8k_interaction.Gsm8kInteraction
        config: {}

``class_name`` is a registered name, its verl / siiRL path, ``module:Class`` or a dotted
``package.module.Class``. Every mistake (missing file, bad YAML, a duplicate name, a class that cannot be
imported) is one ``ConfigError`` line naming the file and the entry, raised on the driver before Ray starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from siirl.environment.outputs import env_mode
from siirl.errors import ConfigError, SiirlUserError
from siirl.params.root import SiirlConfig
from siirl.registry import Registry
from siirl.user_files import class_entries

KEY = "actor_rollout_ref.rollout.multi_turn.interaction_config_path"

#: Built-in interactions by name (and their verl / siiRL class paths); they register on import of this
#: package (its ``__init__`` imports them).
INTERACTIONS: Registry[type] = Registry("interaction", open=True)


@dataclass(frozen=True)
class InteractionSpec:
    name: str
    class_name: str
    config: dict[str, Any]


def default_name(class_name: str) -> str:
    """verl's rule for an entry without a name: the class name without a trailing "Interaction", lower-cased."""
    short = class_name.rpartition(":")[2].rpartition(".")[2]
    return short.removesuffix("Interaction").lower() or short.lower()


def load_interaction_config(path: str) -> list[InteractionSpec]:
    """The interactions a YAML file declares, checked (their classes are not imported here)."""
    specs: dict[str, InteractionSpec] = {}
    for where, entry in class_entries(path, KEY, "interaction", "an interaction YAML file"):
        name = entry.get("name") or default_name(entry["class_name"])
        if not isinstance(name, str):
            raise ConfigError(f"{where}: name must be a string")
        config = entry.get("config") or {}
        if not isinstance(config, dict):
            raise ConfigError(f"{where}: config must be a mapping")
        if name in specs:
            raise ConfigError(f"{where}: a second interaction named {name!r}")
        specs[name] = InteractionSpec(name, entry["class_name"], config)
    return list(specs.values())


def resolve_interaction_class(class_name: str) -> type:
    return INTERACTIONS.resolve_class_name(class_name)


def check_interaction_classes(specs: list[InteractionSpec], path: str) -> None:
    """Every ``class_name`` resolves to a class (driver-side check; nothing is instantiated)."""
    for spec in specs:
        try:
            resolve_interaction_class(spec.class_name)
        except ConfigError as exc:
            raise ConfigError(f"bad config: {KEY}={path!r}: interaction {spec.name!r}: {exc}") from None


def build_interactions(specs: list[InteractionSpec]) -> dict[str, Any]:
    """Interaction name (what a row's ``interaction_kwargs["name"]`` selects) -> interaction object."""
    return {
        spec.name: resolve_interaction_class(spec.class_name)(config={**spec.config, "name": spec.name})
        for spec in specs
    }


def check_interaction_rows(cfg: SiirlConfig, rows: Any) -> None:
    """In an interaction run every row's ``extra_info.interaction_kwargs.name`` picks a configured
    interaction (verl's rollout raises on the first row that does not)."""
    path = cfg.actor_rollout_ref.rollout.multi_turn.interaction_config_path
    if env_mode(cfg) != "tools" or not path:
        return
    names = {spec.name for spec in load_interaction_config(str(path))}
    for first, columns in rows.iter_columns(["extra_info"]):
        for offset, info in enumerate(columns["extra_info"]):
            kwargs = info.get("interaction_kwargs") if isinstance(info, dict) else None
            name = kwargs.get("name") if isinstance(kwargs, dict) else None
            if name in names:
                continue
            problem = (
                "has no extra_info.interaction_kwargs.name" if name is None
                else f"names interaction {name!r} in extra_info.interaction_kwargs"
            )
            raise SiirlUserError(
                f"{rows.describe(first + offset)} {problem}; {KEY}={path} defines: {', '.join(sorted(names))}"
            )

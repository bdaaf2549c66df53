"""The tool YAML (verl's format) -> checked :class:`ToolSpec` s -> tool objects.

    tools:
      - class_name: verl.tools.gsm8k_tool.Gsm8kTool     # a registered name, its verl / siiRL path, or module:Class
        config: {type: native}
        tool_schema: {type: function, function: {name: ..., description: ..., parameters: {...}}}

Every mistake (missing file, bad YAML, a schema without a name, a class that cannot be imported) is one
``ConfigError`` line naming the file and the entry, raised on the driver before Ray starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from siirl.environment.interactions import check_interaction_classes, load_interaction_config
from siirl.environment.tools.base import BaseTool
from siirl.errors import ConfigError
from siirl.params.root import SiirlConfig
from siirl.registry import Registry
from siirl.user_files import class_entries

KEY = "actor_rollout_ref.rollout.multi_turn.tool_config_path"

#: Built-in tools by name (they register on import of this package: its ``__init__`` imports them);
#: ``class_name`` may also be ``module:Class`` or a dotted ``package.module.Class``.
TOOLS: Registry[type] = Registry("tool", open=True)


@dataclass(frozen=True)
class ToolSpec:
    class_name: str
    config: dict[str, Any]
    schema: dict[str, Any]

    @property
    def name(self) -> str:
        return self.schema["function"]["name"]


def _check_schema(schema: Any, where: str) -> dict[str, Any]:
    """An OpenAI function schema: ``{type: function, function: {name, description?, parameters?}}``."""
    if not isinstance(schema, dict) or schema.get("type") != "function":
        raise ConfigError(f"{where}: tool_schema must be a mapping with type: function")
    function = schema.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
        raise ConfigError(f"{where}: tool_schema.function needs a non-empty name")
    parameters = function.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(parameters, dict) or parameters.get("type", "object") != "object":
        raise ConfigError(f"{where}: tool_schema.function.parameters must be a JSON schema of type object")
    properties = parameters.get("properties", {}) or {}
    required = parameters.get("required", []) or []
    if not isinstance(properties, dict) or not isinstance(required, list):
        raise ConfigError(f"{where}: parameters.properties must be a mapping and parameters.required a list")
    unknown = [name for name in required if name not in properties]
    if unknown:
        raise ConfigError(f"{where}: parameters.required names {unknown[0]!r}, which is not in properties")
    return schema


def load_tool_config(path: str) -> list[ToolSpec]:
    """The tools a YAML file declares, checked (their classes are not imported here)."""
    specs, names = [], set()
    for where, entry in class_entries(path, KEY, "tools", "a tool YAML file"):
        config = entry.get("config") or {}
        if not isinstance(config, dict):
            raise ConfigError(f"{where}: config must be a mapping")
        spec = ToolSpec(entry["class_name"], config, _check_schema(entry.get("tool_schema"), where))
        if spec.name in names:
            raise ConfigError(f"{where}: a second tool named {spec.name!r}")
        names.add(spec.name)
        specs.append(spec)
    return specs


def resolve_tool_class(class_name: str) -> type:
    """A registered name (or alias), ``module:Class``, or a dotted ``package.module.Class``."""
    return TOOLS.resolve_class_name(class_name)


def check_tool_classes(specs: list[ToolSpec], path: str) -> None:
    """Every ``class_name`` resolves to a class and its ``config`` passes the class's ``check_config`` when it
    has one (driver-side check; nothing is instantiated)."""
    for spec in specs:
        try:
            target = resolve_tool_class(spec.class_name)
            getattr(target, "check_config", lambda config: None)(spec.config)
        except ConfigError as exc:
            raise ConfigError(f"bad config: {KEY}={path!r}: tool {spec.name!r}: {exc}") from None


def check_tools(cfg: SiirlConfig, env: str | None) -> None:
    """A tool-calling run (``env`` = ``tools``): its tool and interaction YAMLs load, their classes import,
    and the raw chat reaches the rollout."""
    if env != "tools":
        return
    multi_turn = cfg.actor_rollout_ref.rollout.multi_turn
    for path, load, check in (
        (multi_turn.tool_config_path, load_tool_config, check_tool_classes),
        (multi_turn.interaction_config_path, load_interaction_config, check_interaction_classes),
    ):
        if path:
            check(load(str(path)), str(path))
    if not cfg.data.return_raw_chat:
        key = "tool_config_path" if multi_turn.tool_config_path else "interaction_config_path"
        raise ConfigError(
            f"bad config: actor_rollout_ref.rollout.multi_turn.{key} needs data.return_raw_chat=true "
            "(the rollout renders each chat itself and hands it to the tools and interactions, as in verl)"
        )


def build_tools(specs: list[ToolSpec]) -> dict[str, BaseTool]:
    """Tool name (the schema's function name, what the policy calls) -> tool object."""
    return {spec.name: resolve_tool_class(spec.class_name)(spec.config, spec.schema) for spec in specs}

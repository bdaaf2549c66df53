"""A tiny name -> function registry and a config reader shared by every algorithm family.

Each family (advantage estimators, policy losses, KL estimators, ...) owns one ``Registry``; adding a
variant is one function plus one ``@REGISTRY.register("name")`` decorator, and an unknown name fails with
a one-line ``ConfigError`` (a ``ValueError``) that lists what is registered. A name of the form
``module:function`` imports that function from user code and registers it on first use, so every family
is open without editing siiRL.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, Generic, TypeVar

from siirl.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])


def _key(name: str | Enum) -> str:
    """Enum members register and look up by their value, so YAML strings and enums are interchangeable."""
    return name.value if isinstance(name, Enum) else str(name)


class Registry(Generic[F]):
    """Functions of one family, keyed by the name users write in configs."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, F] = {}

    def register(self, *names: str | Enum) -> Callable[[F], F]:
        """Decorator registering a function under one or more names (aliases)."""
        if not names:
            raise ValueError(f"register() of a {self.kind} needs at least one name")

        def wrap(fn: F) -> F:
            for name in names:
                key = _key(name)
                if key in self._entries and self._entries[key] is not fn:
                    raise ValueError(f"{self.kind} '{key}' is already registered to {self._entries[key]!r}")
                self._entries[key] = fn
            return fn

        return wrap

    def get(self, name: str | Enum) -> F:
        key = _key(name)
        if key not in self._entries and ":" in key:
            self._entries[key] = self._import(key)
        if key not in self._entries:
            raise ConfigError(
                f"unknown {self.kind} '{key}'; registered: {', '.join(self.names())} (or 'module:function')"
            )
        return self._entries[key]

    def _import(self, ref: str) -> F:
        """``module:attr`` (dots allowed in attr) from user code, checked to be callable."""
        module_name, _, attr_path = ref.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
            for attr in attr_path.split("."):
                target = getattr(target, attr)
        except (ImportError, AttributeError, ValueError) as exc:
            reason = " ".join(str(exc).split())
            raise ConfigError(f"{self.kind} '{ref}' cannot be imported ({type(exc).__name__}: {reason})") from exc
        if not callable(target):
            raise ConfigError(f"{self.kind} '{ref}' is a {type(target).__name__}, not a function")
        return target

    def names(self) -> list[str]:
        """Registered names (functions imported from user code by ``module:function`` not included)."""
        return sorted(key for key in self._entries if ":" not in key)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, (str, Enum)) and _key(name) in self._entries


def config_value(config: Any, key: str, default: Any = None) -> Any:
    """Read ``key`` from a mapping (dict, OmegaConf DictConfig) or an attribute object (dataclass).

    A missing key or an explicit ``None`` gives ``default``, so partially filled configs work.
    """
    if config is None:
        return default
    value = config.get(key, None) if isinstance(config, Mapping) else getattr(config, key, None)
    return default if value is None else value

"""The one name -> entry registry every pluggable family uses (estimators, losses, engines, roles, ...).

A leaf module: it imports nothing from siiRL but ``siirl.errors``, so ``params/`` and the planner can
read registries without importing torch. The rules are the same for every family:

- ``register("name", "alias", **metadata)`` decorates a function or class; metadata (e.g. what an
  estimator needs from the pipeline) rides with the entry and is read with ``metadata(name)``.
- Registering a taken name again with the SAME object is a no-op (module reloads); with a different object
  it raises ``ValueError`` naming both, unless the call says ``replace=True`` (tests, deliberate overrides).
- ``get`` of an unknown name is one ``ConfigError`` line listing what is registered. An ``open`` family
  also accepts ``module:attr`` and imports it from user code on first use.
- ``config_keys`` names the config keys whose value must be an entry of this family (``also_allowed``: values
  that are not entries, such as ``auto``, which lets the family choose at run time); config validation is
  generated from them (``governed_keys`` and ``check_config``), so the allowed values are stated once, here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Sequence
from enum import Enum
from typing import Any, Generic, TypeVar

from siirl.errors import ConfigError

T = TypeVar("T")

#: Every registry by kind, so config validation can find the families that govern config keys.
_ALL: dict[str, Registry[Any]] = {}


def _key(name: str | Enum) -> str:
    """Enum members register and look up by their value, so YAML strings and enums are interchangeable."""
    return name.value if isinstance(name, Enum) else str(name)


def import_ref(ref: str, what: str) -> Any:
    """``module:attr`` (dots allowed in attr) from user code; a failure is one ``ConfigError`` line."""
    module_name, sep, attr_path = ref.partition(":")
    if not sep or not module_name or not attr_path:
        raise ConfigError(f"{what} {ref!r} must look like 'module:function'")
    try:
        target: Any = importlib.import_module(module_name)
        for attr in attr_path.split("."):
            target = getattr(target, attr)
    except (ImportError, AttributeError, ValueError) as exc:
        reason = " ".join(str(exc).split())
        raise ConfigError(f"{what} {ref!r} cannot be imported ({type(exc).__name__}: {reason})") from exc
    return target


def import_user_modules(names: Sequence[str], what: str) -> None:
    """Import each of the user's modules (``what``: the config key naming them) for what it registers; a
    module that is missing or fails to import is one ``ConfigError`` line."""
    for name in names:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{what} must name Python modules (a string or a list of them), got {name!r}")
        try:
            importlib.import_module(name)
        except Exception as exc:  # the user's module may raise anything at import
            reason = " ".join(str(exc).split())
            raise ConfigError(f"{what}: module {name!r} cannot be imported ({type(exc).__name__}: {reason})") from exc


class Registry(Generic[T]):
    """Entries of one family, keyed by the name users write in configs."""

    def __init__(
        self,
        kind: str,
        *,
        open: bool = False,
        config_keys: tuple[str, ...] = (),
        also_allowed: tuple[str, ...] = (),
    ) -> None:
        self.kind = kind
        self.open = open
        self.config_keys = config_keys
        self.also_allowed = also_allowed
        self._entries: dict[str, T] = {}
        self._metadata: dict[str, dict[str, Any]] = {}
        _ALL[kind] = self

    def forget(self, modules: set[str]) -> None:
        """Drop the entries defined in ``modules`` and those named ``module:function`` after one of them."""
        for key, entry in list(self._entries.items()):
            if getattr(entry, "__module__", None) in modules or key.partition(":")[0] in modules:
                del self._entries[key]
                self._metadata.pop(key, None)

    def register(self, *names: str | Enum, replace: bool = False, **metadata: Any) -> Callable[[T], T]:
        """Decorator registering an entry under one or more names (aliases), with optional metadata."""
        if not names:
            raise ValueError(f"register() of a {self.kind} needs at least one name")

        def wrap(entry: T) -> T:
            for name in names:
                self.add(_key(name), entry, replace=replace, **metadata)
            return entry

        return wrap

    def add(self, name: str | Enum, entry: T, *, replace: bool = False, **metadata: Any) -> T:
        key = _key(name)
        if not key:
            raise ValueError(f"a {self.kind} needs a non-empty name")
        current = self._entries.get(key)
        if current is not None and current is not entry and not replace:
            raise ValueError(f"{self.kind} '{key}' is already registered to {current!r}")
        self._entries[key] = entry
        self._metadata[key] = metadata
        return entry

    def get(self, name: str | Enum) -> T:
        key = _key(name)
        if key not in self._entries and self.open and ":" in key:
            self._entries[key] = self._import(key)
            self._metadata[key] = {}
        if key not in self._entries:
            extra = " (or 'module:function')" if self.open else ""
            raise ConfigError(f"unknown {self.kind} '{key}'; registered: {', '.join(self.names())}{extra}")
        return self._entries[key]

    def resolve_class_name(self, class_name: str) -> T:
        """A registered name (or alias), ``module:Class``, or a dotted ``package.module.Class`` (how verl's
        YAML files name classes); an unknown bare name is the registry's one-line error, as is a name that
        resolves to something other than a class."""
        ref = class_name
        if ref not in self and ":" not in ref:
            module, _, attr = ref.rpartition(".")
            ref = f"{module}:{attr}" if module else ref
        target = self.get(ref)
        if not isinstance(target, type):
            raise ConfigError(f"{class_name} is not a class")
        return target

    def metadata(self, name: str | Enum) -> dict[str, Any]:
        """What the entry was registered with (empty for entries imported from user code)."""
        self.get(name)
        return self._metadata[_key(name)]

    def _import(self, ref: str) -> T:
        target = import_ref(ref, self.kind)
        if not callable(target):
            raise ConfigError(f"{self.kind} '{ref}' is a {type(target).__name__}, not a function")
        return target

    def canonical(self, value: Any) -> Any:
        """``value`` spelt as registered when it differs only in case (verl and siiRL scripts write
        ``GRPO``, ``Token-Mean``); anything else unchanged, for ``check_config`` to judge."""
        if not isinstance(value, str) or value in self._entries or value in self.also_allowed:
            return value
        matches = [name for name in (*self.names(), *self.also_allowed) if name.lower() == value.lower()]
        return matches[0] if len(matches) == 1 else value

    def check_config(self, key: str, value: Any) -> None:
        """``key=value`` (a list: each element) names an entry or an ``also_allowed`` value; else one
        ``ConfigError`` line naming the key and what is allowed."""
        values = list(value) if isinstance(value, Sequence) and not isinstance(value, str) else [value]
        for item in values:
            if item in self.also_allowed:
                continue
            try:
                self.get(item)
            except ConfigError as exc:
                also = f"; also allowed: {', '.join(self.also_allowed)}" if self.also_allowed else ""
                raise ConfigError(f"bad config: {key}={item!r}: {exc}{also}") from None

    def names(self) -> list[str]:
        """Registered names (entries imported from user code by ``module:function`` not included)."""
        return sorted(key for key in self._entries if ":" not in key)

    def items(self) -> Iterator[tuple[str, T]]:
        """Registered entries in registration order (the order a family that applies all of them uses)."""
        return ((key, entry) for key, entry in list(self._entries.items()) if ":" not in key)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, (str, Enum)) and _key(name) in self._entries

    def __len__(self) -> int:
        return len(self.names())


def registries() -> dict[str, Registry[Any]]:
    """Every registry created so far, by kind."""
    return dict(_ALL)


def forget_entries_of(modules: set[str]) -> None:
    """Remove, from every registry, the entries defined in ``modules`` (a warm worker forgetting the last
    job's user code) and those imported by ``module:function`` from them."""
    for registry in _ALL.values():
        registry.forget(modules)


def governed_keys() -> dict[str, Registry[Any]]:
    """Config key -> the registry its value names, from the ``config_keys`` of every registry created so far."""
    governed: dict[str, Registry[Any]] = {}
    for registry in _ALL.values():
        for key in registry.config_keys:
            if key in governed:
                raise ValueError(f"config key {key} is governed by both {governed[key].kind} and {registry.kind}")
            governed[key] = registry
    return governed

"""Environment name -> factory, plus ``"module:Class"`` for environments that live in user code.

Built-in environments register themselves on import of :mod:`siirl.environment`; a user's environment
needs no registration: ``env.name=my_pkg.envs:GridWorld`` imports the class in the process that runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from siirl.environment.base import Env
from siirl.errors import ConfigError

EnvFactory = Callable[..., Env]
_ENVS: dict[str, EnvFactory] = {}


def register_env(name: str) -> Callable[[EnvFactory], EnvFactory]:
    """Decorator: ``@register_env("arith_chain")`` on a class or factory function."""

    def wrap(factory: EnvFactory) -> EnvFactory:
        if name in _ENVS and _ENVS[name] is not factory:
            raise ValueError(f"environment {name!r} is already registered to {_ENVS[name]!r}")
        _ENVS[name] = factory
        return factory

    return wrap


def env_names() -> list[str]:
    return sorted(_ENVS)


def resolve_env_factory(spec: str) -> EnvFactory:
    """The factory for a registered name or a ``module:Class`` path (one clear error otherwise)."""
    import siirl.environment  # noqa: F401 - registers the built-ins

    if spec in _ENVS:
        return _ENVS[spec]
    if ":" not in spec:
        raise ConfigError(
            f"unknown environment {spec!r}; registered: {', '.join(env_names())} (or give module:Class)"
        )
    from siirl.execution.dag.node import resolve_callable

    return resolve_callable(spec, "env.name")


def make_env(spec: str, **kwargs: Any) -> Env:
    """Build one environment; ``kwargs`` are its constructor arguments (``env.kwargs``)."""
    return resolve_env_factory(spec)(**kwargs)

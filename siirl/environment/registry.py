"""Environment name -> factory, plus ``"module:Class"`` for environments that live in user code.

Built-in environments register themselves on import of :mod:`siirl.environment` (its ``__init__`` imports
them, and Python runs it before any module of the package); a user's environment
needs no registration: ``env.name=my_pkg.envs:GridWorld`` imports the class in the process that runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from siirl.environment.base import Env
from siirl.environment.outputs import env_mode
from siirl.params.root import SiirlConfig
from siirl.registry import Registry

EnvFactory = Callable[..., Env]
ENVS: Registry[EnvFactory] = Registry("environment", open=True, config_keys=("env.name",))

#: ``@register_env("arith_chain")`` on a class or factory function (the name the manual documents).
register_env = ENVS.register


def resolve_env_factory(spec: str) -> EnvFactory:
    """The factory for a registered name or a ``module:Class`` path (one clear error otherwise)."""
    return ENVS.get(spec)


def make_env(spec: str, **kwargs: Any) -> Env:
    """Build one environment; ``kwargs`` are its constructor arguments (``env.kwargs``)."""
    return resolve_env_factory(spec)(**kwargs)


def check_environment(cfg: SiirlConfig) -> None:
    """An environment that can say what it lacks (``preflight``: a simulator not installed) says it here."""
    if env_mode(cfg) is None:
        return
    preflight = getattr(resolve_env_factory(cfg.env.name), "preflight", None)
    if callable(preflight):
        preflight(**dict(cfg.env.kwargs))

"""Environments the policy acts in: the ``Env`` contract, a registry, vectorised process-isolated
execution, the built-in ``arith_chain`` task, tool calling (``tools``) and the LIBERO adapter (``pip install siirl[embodied]``)."""

from siirl.environment import arithmetic, libero, tools  # noqa: F401 - register the built-in environments
from siirl.environment.base import Env, StepResult, failed_result
from siirl.environment.registry import ENVS, make_env, register_env, resolve_env_factory
from siirl.environment.vector import VectorEnv

__all__ = [
    "ENVS",
    "Env",
    "StepResult",
    "VectorEnv",
    "failed_result",
    "make_env",
    "register_env",
    "resolve_env_factory",
]

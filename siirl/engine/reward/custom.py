"""User reward functions loaded from a Python file (config ``custom_reward_function.path`` + ``name``).

The loaded function is wrapped in ``FileRewardFunction``, which pickles as (path, name, kwargs) and
re-loads the file on the other side: a module executed from a file path is not importable by name, so
plain pickling would fail in the parallel manager's worker processes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from siirl.errors import ConfigError
from siirl.params.algorithm import CustomRewardFunctionConfig
from siirl.user_files import check_regular_file


def _import_once(path: str) -> Any:
    """The user's file as a module, executed once per process: the ``parallel`` manager unpickles the
    function for every call it submits, and the file's top-level code must not run each time."""
    module_name = "siirl_custom_reward_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"custom_reward_function.path: cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise ConfigError(
            f"custom_reward_function.path: {path} failed to import: {type(exc).__name__}: {exc}"
        ) from exc
    return module


def _load_function(path: str, name: str) -> Callable[..., Any]:
    if not path:
        raise ConfigError("custom_reward_function.path is empty; give the path of a .py file")
    check_regular_file(path, "custom_reward_function.path:")
    if not path.endswith(".py"):
        raise ConfigError(f"custom_reward_function.path must be a .py file, got {path}")
    module = _import_once(path)
    if not hasattr(module, name):
        defined = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_"))
        raise ConfigError(
            f"custom_reward_function.name: {name!r} not found in {path} (callables there: {defined})"
        )
    fn = getattr(module, name)
    if not callable(fn):
        raise ConfigError(
            f"custom_reward_function.name: {name!r} in {path} is not callable ({type(fn).__name__})"
        )
    return fn


class FileRewardFunction:
    """A reward function defined in a user file; extra ``kwargs`` are passed on every call."""

    def __init__(self, path: str, name: str = "compute_score", kwargs: Mapping[str, Any] | None = None):
        self.path = os.path.abspath(os.path.expanduser(path)) if path else path
        self.name = name
        self.kwargs = dict(kwargs or {})
        self._fn = _load_function(self.path, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **{**self.kwargs, **kwargs})

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "name": self.name, "kwargs": self.kwargs}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], state["name"], state["kwargs"])

    def __repr__(self) -> str:
        return f"FileRewardFunction({self.path!r}, {self.name!r})"


def load_custom_reward_fn(
    path: str, name: str = "compute_score", kwargs: Mapping[str, Any] | None = None
) -> FileRewardFunction:
    """Load ``name`` from the Python file ``path``; errors are one-line ``ConfigError`` (a ValueError)."""
    return FileRewardFunction(path, name, kwargs)


def custom_reward_fn_from_config(config: CustomRewardFunctionConfig) -> FileRewardFunction | None:
    """The function the ``custom_reward_function`` section names, or None when its ``path`` is unset."""
    if not config.path:
        return None
    return load_custom_reward_fn(config.path, config.name or "compute_score", config.reward_kwargs)
